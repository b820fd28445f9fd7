/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_segalloc_scan.c - kvf__segalloc_scan() against a model:
 * the live blocks kept sorted by offset. After random allocs and frees
 * (trees of height 0 to 3), scans from random offsets with random limits
 * must return exactly the model's used blocks at or after the offset, in
 * order, with the right continuation; a full walk in windows must visit
 * every used block once.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <kvforge/status.h>

#include "alloc/segalloc.h"

#define KiB (1ULL << 10)
#define MiB (1ULL << 20)
#define GiB (1ULL << 30)

static uint64_t rng_next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* The model: live blocks, sorted by offset on demand. */
struct model {
	struct kvf__segalloc_block *b;
	size_t n, cap;
};

static int by_offset(const void *x, const void *y)
{
	const struct kvf__segalloc_block *a = x, *b = y;

	return a->offset < b->offset ? -1 : a->offset > b->offset;
}

static void model_add(struct model *m, uint64_t off, uint64_t size,
		      uint64_t tag)
{
	if (m->n == m->cap) {
		m->cap = m->cap ? 2 * m->cap : 1024;
		m->b = realloc(m->b, m->cap * sizeof(*m->b));
		assert_non_null(m->b);
	}
	m->b[m->n++] = (struct kvf__segalloc_block){ off, size, tag };
}

/* Drive @a to about @live blocks with churn, mirrored in @m. */
static void churn(struct kvf__segalloc *a, struct model *m, size_t live,
		  size_t ops, uint64_t *rng)
{
	for (size_t op = 0; op < ops; op++) {
		bool grow = m->n < live ? rng_next(rng) % 4 != 0 :
					  rng_next(rng) % 4 == 0;

		if (grow || !m->n) {
			uint64_t size = (1 + rng_next(rng) % 16) * 4 * KiB;
			uint64_t tag = (rng_next(rng) | 1), off;

			if (kvf__segalloc_alloc_tagged(a, size, tag, &off) ==
			    KVF_OK)
				model_add(m, off, size, tag);
			continue;
		}
		size_t i = rng_next(rng) % m->n;

		kvf__segalloc_free(a, m->b[i].offset, m->b[i].size);
		m->b[i] = m->b[--m->n];
	}
	qsort(m->b, m->n, sizeof(*m->b), by_offset);
}

/* First model block at offset >= @from. */
static size_t model_first(const struct model *m, uint64_t from)
{
	size_t lo = 0, hi = m->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (m->b[mid].offset < from)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static void check_scan(struct kvf__segalloc *a, const struct model *m,
		       uint64_t from, size_t max,
		       struct kvf__segalloc_block *out)
{
	size_t first = model_first(m, from), want, got;
	uint64_t next = 0;

	want = m->n - first < max ? m->n - first : max;
	got = kvf__segalloc_scan(a, from, out, max, &next);
	assert_int_equal(got, want);
	for (size_t i = 0; i < got; i++) {
		assert_int_equal(out[i].offset, m->b[first + i].offset);
		assert_int_equal(out[i].size, m->b[first + i].size);
		/* A slab keeps a tag's high half (segalloc.h). */
		assert_true(out[i].tag == m->b[first + i].tag ||
			    out[i].tag ==
				    (m->b[first + i].tag & ~0xffffffffULL));
	}
	if (got == max && max)
		assert_int_equal(next, out[got - 1].offset + out[got - 1].size);
	else
		assert_int_equal(next, kvf__segalloc_capacity(a));
}

/* Walk everything in windows of @win: each used block exactly once. */
static void check_walk(struct kvf__segalloc *a, const struct model *m,
		       size_t win, struct kvf__segalloc_block *out)
{
	uint64_t from = 0, next;
	size_t seen = 0, got;

	do {
		got = kvf__segalloc_scan(a, from, out, win, &next);
		for (size_t i = 0; i < got; i++, seen++) {
			assert_true(seen < m->n);
			assert_int_equal(out[i].offset, m->b[seen].offset);
		}
		assert_true(next > from || !got);
		from = next;
	} while (got == win);
	assert_int_equal(seen, m->n);
	assert_int_equal(kvf__segalloc_nr_allocs(a), m->n);
}

static void run_model(size_t live, uint64_t seed)
{
	struct kvf__segalloc_block *out = calloc(4096, sizeof(*out));
	struct kvf__segalloc *a;
	struct model m = { 0 };
	uint64_t rng = seed, cap;

	assert_non_null(out);
	assert_int_equal(kvf__segalloc_create(4 * GiB, 4 * KiB, &a), KVF_OK);
	cap = kvf__segalloc_capacity(a);
	for (int round = 0; round < 6; round++) {
		churn(a, &m, live, live * 2 + 500, &rng);
		check_walk(a, &m, 1, out);
		check_walk(a, &m, 7, out);
		check_walk(a, &m, 256, out);
		for (int s = 0; s < 200; s++) {
			uint64_t from = rng_next(&rng) % (cap + cap / 8);
			size_t max = rng_next(&rng) % 300;

			/* Half the time start exactly at or inside a block. */
			if (m.n && s % 2) {
				const struct kvf__segalloc_block *b =
					&m.b[rng_next(&rng) % m.n];

				from = b->offset + (s % 4 == 1 ? 0 : b->size / 2);
			}
			check_scan(a, &m, from, max, out);
		}
		/* The tree's end: the last block, and just past it. */
		if (m.n) {
			check_scan(a, &m, m.b[m.n - 1].offset, 5, out);
			check_scan(a, &m, m.b[m.n - 1].offset + 1, 5, out);
		}
	}
	kvf__segalloc_destroy(a);
	free(m.b);
	free(out);
}

static void test_scan_empty(void **state)
{
	struct kvf__segalloc_block out[4];
	struct kvf__segalloc *a;
	uint64_t next = 0, off;

	(void)state;
	assert_int_equal(kvf__segalloc_create(64 * MiB, 8, &a), KVF_OK);
	assert_int_equal(kvf__segalloc_scan(a, 0, out, 4, &next), 0);
	assert_int_equal(next, 64 * MiB);
	assert_int_equal(kvf__segalloc_alloc_tagged(a, 100, 9, &off), KVF_OK);
	assert_int_equal(kvf__segalloc_scan(a, 0, out, 0, &next), 0);
	assert_int_equal(next, 64 * MiB);
	assert_int_equal(kvf__segalloc_scan(a, 64 * MiB, out, 4, &next), 0);
	assert_int_equal(next, 64 * MiB);
	assert_int_equal(kvf__segalloc_scan(a, 0, out, 4, &next), 1);
	assert_int_equal(out[0].offset, off);
	assert_int_equal(out[0].size, 104);
	assert_int_equal(out[0].tag, 9);
	assert_int_equal(next, 64 * MiB);
	kvf__segalloc_destroy(a);
}

static void test_scan_small_tree(void **state)
{
	(void)state;
	run_model(20, 0x9e3779b97f4a7c15ULL); /* a single leaf */
}

static void test_scan_medium_tree(void **state)
{
	(void)state;
	run_model(900, 0x2545f4914f6cdd1dULL); /* height 1-2 */
}

static void test_scan_large_tree(void **state)
{
	(void)state;
	run_model(12000, 0xda942042e4dd58b5ULL); /* height 2-3 */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_scan_empty),
		cmocka_unit_test(test_scan_small_tree),
		cmocka_unit_test(test_scan_medium_tree),
		cmocka_unit_test(test_scan_large_tree),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
