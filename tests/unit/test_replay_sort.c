/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_replay_sort.c - the image replicas' radix sort agrees
 * with a stable comparison sort on every shape of input: offsets of all
 * 48 bits, aligned ones, one segment and a million, equal keys (whose
 * input order it must keep), and the trivial sizes.
 */
#include "config.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "engine/replay_sort.h"

static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* Order by (slot, offset), then input position (kept in ->tag). */
static int cmp_stable(const void *a, const void *b)
{
	const struct kvf__replay_range *x = a, *y = b;

	if (x->slot != y->slot)
		return x->slot < y->slot ? -1 : 1;
	if (x->offset != y->offset)
		return x->offset < y->offset ? -1 : 1;
	return (x->tag > y->tag) - (x->tag < y->tag);
}

struct shape {
	const char *what;
	uint64_t offset_mask; /* random bits of the offset */
	unsigned offset_shift;
	uint32_t slots; /* slots drawn from [0, slots) */
};

static void check_shape(const struct shape *s, size_t n)
{
	struct kvf__replay_range *a = calloc(n + 1, sizeof(*a));
	struct kvf__replay_range *tmp = calloc(n + 1, sizeof(*tmp));
	struct kvf__replay_range *want = calloc(n + 1, sizeof(*want));
	struct kvf__replay_range *got;

	assert_true(a && tmp && want);
	for (size_t i = 0; i < n; i++) {
		a[i].offset = (next() & s->offset_mask) << s->offset_shift;
		a[i].slot = s->slots ? (uint32_t)(next() % s->slots) : 0;
		a[i].size = next();
		a[i].tag = i; /* input position, for stability */
	}
	memcpy(want, a, n * sizeof(*a));
	if (n)
		qsort(want, n, sizeof(*want), cmp_stable);
	got = kvf__replay_sort(a, tmp, n);
	assert_non_null(got);
	assert_true(got == a || got == tmp);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(got[i].slot, want[i].slot);
		assert_int_equal(got[i].offset, want[i].offset);
		assert_int_equal(got[i].tag, want[i].tag);
		assert_int_equal(got[i].size, want[i].size);
	}
	free(a);
	free(tmp);
	free(want);
}

static const struct shape shapes[] = {
	{"48-bit offsets, 16 segments", (1ULL << 48) - 1, 0, 16},
	{"4 KiB-aligned offsets below 64 GiB, 3 segments", (1ULL << 24) - 1, 12,
	 3},
	{"one segment", (1ULL << 30) - 1, 0, 1},
	{"slots of all four bytes", (1ULL << 16) - 1, 0, UINT32_MAX},
	{"many equal keys (stability)", 7, 20, 2},
	{"every key equal", 0, 0, 1},
};

static void test_agrees_with_stable_sort(void **state)
{
	static const size_t sizes[] = {2, 3, 255, 256, 257, 4099, 70000};

	(void)state;
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
		for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
			print_message("%s, %zu\n", shapes[s].what, sizes[k]);
			check_shape(&shapes[s], sizes[k]);
		}
}

static void test_trivial_sizes(void **state)
{
	struct kvf__replay_range one = {.offset = 5, .slot = 9, .tag = 1};
	struct kvf__replay_range tmp;

	(void)state;
	assert_ptr_equal(kvf__replay_sort(&one, &tmp, 1), &one);
	assert_int_equal(one.offset, 5);
	assert_int_equal(one.slot, 9);
	assert_ptr_equal(kvf__replay_sort(&one, &tmp, 0), &one);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_agrees_with_stable_sort),
		cmocka_unit_test(test_trivial_sizes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
