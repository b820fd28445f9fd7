/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_segalloc.c - the per-segment allocator against reference
 * models: a granule bitmap (small segments, exact free bytes and largest
 * region after every operation) and a sorted list of live ranges (larger
 * segments, no overlap ever). Some tests steer the allocations to the
 * largest free block, as best fit across segments does, so the summaries
 * (max, sub, maxi, the exact-sub hand-over) change in every order, also in
 * a tree several levels deep.
 */
#include "config.h"

#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include <kvforge/status.h>

#include "alloc/segalloc.h"

#define KiB (1ULL << 10)
#define MiB (1ULL << 20)
#define GiB (1ULL << 30)
#define TiB (1ULL << 40)

static uint64_t rng_next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static uint64_t rng_range(uint64_t *s, uint64_t lo, uint64_t hi)
{
	return lo + rng_next(s) % (hi - lo + 1);
}

struct live {
	uint64_t off, size, asked, tag;
};

/* ---- bitmap model: one byte per granule ---- */

struct bitmap_model {
	uint8_t *used;
	uint64_t granules, gran;
};

static void bm_check(const struct bitmap_model *m, struct kvf__segalloc *a)
{
	uint64_t free_g = 0, run = 0, best = 0;

	for (uint64_t i = 0; i < m->granules; i++) {
		if (m->used[i]) {
			run = 0;
			continue;
		}
		free_g++;
		if (++run > best)
			best = run;
	}
	assert_int_equal(kvf__segalloc_free_bytes(a), free_g * m->gran);
	assert_int_equal(kvf__segalloc_largest_free(a), best * m->gran);
	assert_int_equal(kvf__segalloc_used_bytes(a),
			 (m->granules - free_g) * m->gran);
}

/*
 * bm_check() but for the largest free region: with slabs (reuse lists on)
 * a slab's free slot serves only its size and never joins a free
 * neighbour, so the model's longest free run can exceed what alloc serves.
 */
static void bm_check_free(const struct bitmap_model *m, struct kvf__segalloc *a)
{
	uint64_t free_g = 0;

	for (uint64_t i = 0; i < m->granules; i++)
		free_g += !m->used[i];
	assert_int_equal(kvf__segalloc_free_bytes(a), free_g * m->gran);
	assert_true(kvf__segalloc_largest_free(a) <= free_g * m->gran);
}

static void bm_mark(struct bitmap_model *m, uint64_t off, uint64_t size,
		    uint8_t v)
{
	for (uint64_t g = off / m->gran; g < (off + size) / m->gran; g++) {
		assert_int_equal(m->used[g], !v); /* disjoint from live ranges */
		m->used[g] = v;
	}
}

static uint64_t round_up(uint64_t v, uint64_t al)
{
	return (v + al - 1) & ~(al - 1);
}

/* Lowest offset of a free run of @g granules, or UINT64_MAX. */
static uint64_t bm_first_fit(const struct bitmap_model *m, uint64_t g)
{
	uint64_t run = 0;

	for (uint64_t i = 0; i < m->granules; i++) {
		run = m->used[i] ? 0 : run + 1;
		if (run == g)
			return (i + 1 - g) * m->gran;
	}
	return UINT64_MAX;
}

static bool bm_all_free(const struct bitmap_model *m, uint64_t off,
			uint64_t size)
{
	for (uint64_t g = off / m->gran; g < (off + size) / m->gran; g++)
		if (m->used[g])
			return false;
	return true;
}

static int cmp_live_off(const void *x, const void *y)
{
	const struct live *p = x, *q = y;

	return p->off < q->off ? -1 : p->off > q->off;
}

/*
 * The allocator's used blocks are exactly the model's live ranges, in
 * address order, each with the tag it was allocated with (tags must follow
 * their blocks through leaf splits, borrows and merges).
 */
static void check_blocks(struct kvf__segalloc *a, const struct live *lv,
			 uint64_t n)
{
	struct live *sorted = malloc((n ? n : 1) * sizeof(*sorted));
	struct kvf__segalloc_block *b;
	size_t nb;

	assert_non_null(sorted);
	memcpy(sorted, lv, n * sizeof(*sorted));
	qsort(sorted, n, sizeof(*sorted), cmp_live_off);
	assert_int_equal(kvf__segalloc_used_blocks(a, &b, &nb), KVF_OK);
	assert_int_equal(nb, n);
	for (size_t i = 0; i < nb; i++) {
		assert_int_equal(b[i].offset, sorted[i].off);
		assert_int_equal(b[i].size, sorted[i].size);
		/* A slab keeps a tag's high half (segalloc.h). */
		assert_true(b[i].tag == sorted[i].tag ||
			    b[i].tag == (sorted[i].tag & ~0xffffffffULL));
	}
	free(b);
	free(sorted);
}

/*
 * One allocator checked against the bitmap model: the live allocations
 * (@lv, @n), random frees of them, and at the end every one freed and the
 * segment whole again.
 */
struct model_run {
	struct bitmap_model m;
	struct live *lv;
	uint64_t n, seg;
	struct kvf__segalloc *a;
};

/*
 * @reuse: the bound on the reuse lists (kvf__segalloc_set_reuse_limit);
 * 0 for the tree alone, whose first-fit choices the models predict.
 */
static void run_begin(struct model_run *r, uint64_t seg, uint64_t al,
		      uint64_t reuse)
{
	r->m = (struct bitmap_model){ calloc(seg / al, 1), seg / al, al };
	r->lv = calloc(seg / al, sizeof(*r->lv));
	r->n = 0;
	r->seg = seg;
	assert_non_null(r->m.used);
	assert_non_null(r->lv);
	assert_int_equal(kvf__segalloc_create(seg, al, &r->a), KVF_OK);
	kvf__segalloc_set_reuse_limit(r->a, reuse);
}

/* Record a new live allocation (alloc or reserve). */
static void run_add(struct model_run *r, struct live l)
{
	r->lv[r->n++] = l;
	bm_mark(&r->m, l.off, l.size, 1);
}

/* Free one live allocation chosen at random. */
static void run_free_random(struct model_run *r, uint64_t *rng)
{
	uint64_t k = rng_next(rng) % r->n;

	kvf__segalloc_free(r->a, r->lv[k].off, r->lv[k].asked);
	bm_mark(&r->m, r->lv[k].off, r->lv[k].size, 0);
	r->lv[k] = r->lv[--r->n];
}

/* Free everything: no used block left, one free region, then destroy. */
static void run_end(struct model_run *r)
{
	while (r->n) {
		r->n--;
		kvf__segalloc_free(r->a, r->lv[r->n].off, r->lv[r->n].asked);
	}
	check_blocks(r->a, r->lv, 0);
	assert_int_equal(kvf__segalloc_largest_free(r->a), r->seg);
	assert_int_equal(kvf__segalloc_free_bytes(r->a), r->seg);
	kvf__segalloc_destroy(r->a);
	free(r->lv);
	free(r->m.used);
}

struct exact_cfg {
	uint64_t seg, al, max_asked;
	int ops;
	uint64_t free_pct;  /* chance of a free, in percent */
	int check_every;    /* full model comparison every this many ops */
	int first_fit_every; /* first-fit offset checked every this many */
	int blocks_every;   /* used_blocks checked every this many */
	uint64_t reuse;     /* reuse lists' bound; 0: tree only */
};

/*
 * Random alloc / free / reserve against the granule bitmap: free bytes and
 * the largest region exact, every alloc at the address-ordered first fit,
 * reserve succeeding exactly when its range is free, used blocks and their
 * tags exactly the live ones.
 */
static void run_exact_random(const struct exact_cfg *cfg, uint64_t rng)
{
	const uint64_t seg = cfg->seg, al = cfg->al;
	uint64_t parked = 0, not_first = 0;
	struct model_run r;

	run_begin(&r, seg, al, cfg->reuse);
	bm_check(&r.m, r.a);
	for (int op = 0; op < cfg->ops; op++) {
		uint64_t dice = rng_next(&rng) % 100, tag;

		if (r.n && (dice < cfg->free_pct || r.n == seg / al)) {
			run_free_random(&r, &rng);
		} else if (dice < cfg->free_pct + 5) {
			uint64_t asked = rng_range(&rng, 1, cfg->max_asked);
			uint64_t sz = round_up(asked, al);
			uint64_t off = rng_next(&rng) % (seg / al) * al;
			int rc;

			if (off + sz > seg)
				continue;
			/* Tag 0 (untagged) too, now and then. */
			tag = op % 7 ? rng_next(&rng) : 0;
			rc = kvf__segalloc_reserve_tagged(r.a, off, asked, tag);
			if (!bm_all_free(&r.m, off, sz)) {
				assert_int_equal(rc, KVF_ERR_NO_SPACE);
				continue;
			}
			assert_int_equal(rc, KVF_OK);
			run_add(&r, (struct live){ off, sz, asked, tag });
		} else {
			uint64_t asked = rng_range(&rng, 1, cfg->max_asked), off;
			uint64_t sz = round_up(asked, al);
			int rc;

			tag = op % 5 ? rng_next(&rng) : 0;
			rc = kvf__segalloc_alloc_tagged(r.a, asked, tag, &off);

			if (rc == KVF_ERR_NO_SPACE) {
				/* Only when no free run fits. */
				assert_true(kvf__segalloc_largest_free(r.a) <
					    sz);
				assert_int_equal(bm_first_fit(&r.m, sz / al),
						 UINT64_MAX);
				continue;
			}
			assert_int_equal(rc, KVF_OK);
			assert_int_equal(off % al, 0);
			assert_true(off + sz <= seg);
			/* Reuse hands out parked blocks, not the first fit. */
			if (!cfg->reuse && op % cfg->first_fit_every == 0)
				assert_int_equal(off,
						 bm_first_fit(&r.m, sz / al));
			not_first += off != bm_first_fit(&r.m, sz / al);
			run_add(&r, (struct live){ off, sz, asked, tag });
		}
		parked += kvf__segalloc_reuse_bytes(r.a) > 0;
		assert_true(kvf__segalloc_reuse_bytes(r.a) <= cfg->reuse);
		if (op % cfg->check_every == 0)
			bm_check(&r.m, r.a);
		if (op % cfg->blocks_every == 0)
			check_blocks(r.a, r.lv, r.n);
		assert_int_equal(kvf__segalloc_nr_allocs(r.a), r.n);
	}
	bm_check(&r.m, r.a);
	check_blocks(r.a, r.lv, r.n);
	/* With the lists on, blocks were parked and handed out again. */
	if (cfg->reuse) {
		assert_true(parked > (uint64_t)cfg->ops / 4);
		assert_true(not_first > 0);
	}
	run_end(&r);
}

static void test_exact_random(void **state)
{
	const struct exact_cfg cfg = { 64 * KiB, 64, 4096, 30000, 45, 1, 1, 16,
				       0 };

	(void)state;
	run_exact_random(&cfg, 0x1234567);
}

/*
 * The same with the reuse lists on (bound: half the segment) and four
 * request sizes, so frees park and allocs take parked blocks: free bytes
 * and the largest region stay exact against the bitmap (a parked block is
 * free to every reader), NO_SPACE only when no free run fits, reserve
 * succeeds exactly on free ranges (parked ones too), used blocks and tags
 * exactly the live ones.
 */
static void test_exact_random_reuse(void **state)
{
	const struct exact_cfg cfg = { 64 * KiB, 64, 256, 30000, 45, 1, 1, 16,
				       32 * KiB };

	(void)state;
	run_exact_random(&cfg, 0x7654321);
}

/* Many sizes: slots are claimed, go stale and are handed on. */
static void test_exact_random_reuse_sizes(void **state)
{
	const struct exact_cfg cfg = { 256 * KiB, 64, 2048, 20000, 45, 4, 1,
				       64, 128 * KiB };

	(void)state;
	run_exact_random(&cfg, 0x2468ace);
}

/*
 * Small blocks in a bigger segment: tens of thousands of blocks, so the
 * tree is several levels deep and nodes split, borrow and merge (the
 * segment fills up, then churns near full).
 */
static void test_exact_random_deep(void **state)
{
	const struct exact_cfg cfg = { 1 * MiB, 8, 64, 150000, 35, 512, 16,
				       8192, 0 };

	(void)state;
	run_exact_random(&cfg, 0xabcdef12);
}

/*
 * A run of allocations that take the largest free block (or all but a
 * random part of it) between small ones and random frees, against the
 * bitmap model (run_largest_taken()).
 */
struct largest_cfg {
	uint64_t al;
	int ops;
	int small_ops;     /* the first ops allocate only small pieces ... */
	int free_from;     /* ... and free nothing before this op */
	uint64_t free_pct; /* then: chance of a free, in percent */
	uint64_t small_pct; /* of a small allocation (else a large one) */
	uint64_t small_max; /* small: 1..small_max granules */
	uint64_t exact_pct; /* large: below this dice, exactly the largest */
	int check_every;   /* bm_check every this many ops, and after large */
	bool fit_all;      /* every allocation at the first fit, not only
			    * the large ones */
};

static void run_largest_taken(const struct largest_cfg *cfg, uint64_t rng)
{
	const uint64_t al = cfg->al;
	struct model_run r;

	run_begin(&r, 1 * MiB, al, 0);
	for (int op = 0; op < cfg->ops; op++) {
		uint64_t largest = kvf__segalloc_largest_free(r.a), off, sz;
		uint64_t dice = rng_next(&rng) % 100;
		bool big = false;

		if (r.n && op >= cfg->free_from &&
		    (dice < cfg->free_pct || largest < al)) {
			run_free_random(&r, &rng);
		} else {
			if (op < cfg->small_ops || dice < cfg->small_pct) {
				sz = al * rng_range(&rng, 1, cfg->small_max);
			} else {
				big = true;
				/* exact: the block disappears */
				sz = dice < cfg->exact_pct ?
					     largest :
					     largest - al * (rng_next(&rng) %
							     (largest / al));
			}
			if (sz > largest)
				continue;
			assert_int_equal(
				kvf__segalloc_alloc_tagged(r.a, sz, 1, &off),
				KVF_OK);
			if (big || cfg->fit_all)
				assert_int_equal(off,
						 bm_first_fit(&r.m, sz / al));
			run_add(&r, (struct live){ off, sz, sz, 0 });
		}
		if (big || op % cfg->check_every == 0)
			bm_check(&r.m, r.a);
	}
	bm_check(&r.m, r.a);
	run_end(&r);
}

/*
 * Allocations that take the largest free block (what best fit across
 * segments and the engine's fill do), leaving remainders larger and
 * smaller than the second largest: each node's max and sub (see
 * segalloc.c) shrink, rise and tie in every order. Largest region and
 * free bytes against the bitmap after every operation, every allocation
 * at the first fit.
 */
static void test_largest_taken(void **state)
{
	const struct largest_cfg cfg = {
		.al = 64, .ops = 40000, .small_ops = 4000, .free_from = 0,
		.free_pct = 45, .small_pct = 60, .small_max = 64,
		.exact_pct = 80, .check_every = 1, .fit_all = true,
	};

	(void)state;
	run_largest_taken(&cfg, 0x5eed1e55);
}

/*
 * The same in a tree several levels deep (8-byte granules, ~10,000 small
 * blocks laid down first): allocations that take the largest block make
 * inner nodes hand their maximum to their exact second (no rescan) and
 * rescan once that second is only a bound, frees raise entries back to
 * exact seconds and to maxima, so the descent by maxi/maxchild and the
 * sub_exact bookkeeping (segalloc.c) are exercised at every level. The
 * model is checked every few operations and every such allocation must
 * land at the first fit.
 */
static void test_largest_taken_deep(void **state)
{
	const struct largest_cfg cfg = {
		.al = 8, .ops = 24000, .small_ops = 10000, .free_from = 10000,
		.free_pct = 40, .small_pct = 70, .small_max = 24,
		.exact_pct = 85, .check_every = 64, .fit_all = false,
	};

	(void)state;
	run_largest_taken(&cfg, 0xdeadbeef5eed);
}

/* ---- sorted-range model for big segments ---- */

static int cmp_off(const void *x, const void *y)
{
	const struct live *p = x, *q = y;

	return p->off < q->off ? -1 : p->off > q->off;
}

/* Index of the first live range with off >= @off. */
static size_t lower(const struct live *lv, size_t n, uint64_t off)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (lv[mid].off < off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static void test_no_overlap_large(void **state)
{
	const uint64_t seg = 4 * GiB, al = 4096;
	const size_t max_live = 100000;
	struct live *lv = calloc(max_live, sizeof(*lv));
	struct kvf__segalloc *a;
	uint64_t rng = 0xfeedbeef, used = 0;
	size_t n = 0;

	(void)state;
	assert_int_equal(kvf__segalloc_create(seg, al, &a), KVF_OK);
	for (int op = 0; op < 60000; op++) {
		bool do_free = n && (rng_next(&rng) % 100 < 48 || n == max_live);

		if (do_free) {
			size_t k = rng_next(&rng) % n;

			kvf__segalloc_free(a, lv[k].off, lv[k].asked);
			used -= lv[k].size;
			memmove(&lv[k], &lv[k + 1], (n - k - 1) * sizeof(*lv));
			n--;
		} else {
			/* Log-uniform-ish sizes, 1 byte to 64 MiB. */
			uint64_t asked = 1 + rng_next(&rng) %
						     (1ULL << rng_range(&rng, 0, 26));
			uint64_t off, sz = round_up(asked, al);
			uint64_t tag = rng_next(&rng);
			int rc = kvf__segalloc_alloc_tagged(a, asked, tag, &off);
			size_t k;

			if (rc == KVF_ERR_NO_SPACE) {
				assert_true(kvf__segalloc_largest_free(a) < sz);
				continue;
			}
			assert_int_equal(rc, KVF_OK);
			assert_int_equal(off % al, 0);
			assert_true(off + sz <= seg);
			k = lower(lv, n, off);
			if (k < n)
				assert_true(off + sz <= lv[k].off);
			if (k > 0)
				assert_true(lv[k - 1].off + lv[k - 1].size <= off);
			memmove(&lv[k + 1], &lv[k], (n - k) * sizeof(*lv));
			lv[k] = (struct live){ off, sz, asked, tag };
			n++;
			used += sz;
		}
		assert_int_equal(kvf__segalloc_used_bytes(a), used);
	}
	/* Exact largest region against the sorted model at the end. */
	{
		uint64_t prev = 0, best = 0;

		for (size_t k = 0; k <= n; k++) {
			uint64_t start = k < n ? lv[k].off : seg;

			if (start - prev > best)
				best = start - prev;
			if (k < n)
				prev = lv[k].off + lv[k].size;
		}
		assert_int_equal(kvf__segalloc_largest_free(a), best);
	}
	check_blocks(a, lv, n);
	qsort(lv, n, sizeof(*lv), cmp_off);
	for (size_t k = 0; k < n; k++)
		kvf__segalloc_free(a, lv[k].off, lv[k].asked);
	assert_int_equal(kvf__segalloc_largest_free(a), seg);
	kvf__segalloc_destroy(a);
	free(lv);
}

/* Fill completely, free in random order: one region again. */
static void test_coalesce_full(void **state)
{
	const uint64_t seg = 16 * MiB, al = 256;
	size_t cap = seg / al, n = 0;
	struct live *lv = calloc(cap, sizeof(*lv));
	struct kvf__segalloc *a;
	uint64_t rng = 99, off;

	(void)state;
	assert_int_equal(kvf__segalloc_create(seg, al, &a), KVF_OK);
	for (;;) {
		uint64_t asked = rng_range(&rng, 1, 8 * KiB);

		if (kvf__segalloc_alloc_tagged(a, asked, 1, &off) != KVF_OK)
			break;
		lv[n++] = (struct live){ off, round_up(asked, al), asked, 0 };
	}
	/* Fill the tail with the smallest unit: the segment is then full. */
	while (kvf__segalloc_alloc_tagged(a, 1, 1, &off) == KVF_OK)
		lv[n++] = (struct live){ off, al, 1, 0 };
	assert_int_equal(kvf__segalloc_free_bytes(a), 0);
	assert_int_equal(kvf__segalloc_largest_free(a), 0);
	for (size_t i = n; i > 1; i--) {
		size_t j = rng_next(&rng) % i;
		struct live t = lv[i - 1];

		lv[i - 1] = lv[j];
		lv[j] = t;
	}
	for (size_t i = 0; i < n; i++)
		kvf__segalloc_free(a, lv[i].off, lv[i].asked);
	assert_int_equal(kvf__segalloc_largest_free(a), seg);
	assert_int_equal(kvf__segalloc_free_bytes(a), seg);
	assert_int_equal(kvf__segalloc_nr_allocs(a), 0);
	/* One region: the whole segment can be allocated at once. */
	assert_int_equal(kvf__segalloc_alloc_tagged(a, seg, 1, &off), KVF_OK);
	assert_int_equal(off, 0);
	kvf__segalloc_destroy(a);
	free(lv);
}

/*
 * The bookkeeping bytes follow the blocks: a fill adds at least a 16-byte
 * slot per block, and freeing everything gives the nodes back (at most
 * eight spares of each kind kept).
 */
static void test_meta_bytes(void **state)
{
	const size_t n = 4000;
	uint64_t *off = calloc(n, sizeof(*off));
	uint64_t empty, full, after;
	struct kvf__segalloc *a;

	(void)state;
	assert_non_null(off);
	assert_int_equal(kvf__segalloc_create(64 * MiB, 4096, &a), KVF_OK);
	kvf__segalloc_set_reuse_limit(a, 0); /* parked blocks stay in the tree */
	empty = kvf__segalloc_meta_bytes(a);
	assert_true(empty > 0);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(kvf__segalloc_alloc_tagged(a, 4096, i + 1,
							    &off[i]),
				 KVF_OK);
	full = kvf__segalloc_meta_bytes(a);
	assert_true(full - empty >= n * 16);
	assert_true(full - empty <= n * 48);
	for (size_t i = 0; i < n; i++)
		kvf__segalloc_free(a, off[i], 4096);
	after = kvf__segalloc_meta_bytes(a);
	assert_true(after >= empty);
	/* Spare nodes kept for the next splits: a few, not the tree. */
	assert_true(after - empty <= 16 * 1024);
	assert_true(after - empty < (full - empty) / 4);
	kvf__segalloc_destroy(a);
	free(off);
}

static void test_alignment(void **state)
{
	struct kvf__segalloc *a;
	uint64_t off[64];

	(void)state;
	/* Unaligned segment size: the tail below the alignment is unused. */
	assert_int_equal(kvf__segalloc_create(MiB + 1000, 4096, &a), KVF_OK);
	assert_int_equal(kvf__segalloc_size(a), MiB + 1000);
	assert_int_equal(kvf__segalloc_capacity(a), MiB);
	assert_int_equal(kvf__segalloc_alignment(a), 4096);
	assert_int_equal(kvf__segalloc_largest_free(a), MiB);
	for (int i = 0; i < 64; i++) {
		assert_int_equal(
			kvf__segalloc_alloc_tagged(a, 1 + i * 64, 1, &off[i]),
			KVF_OK);
		assert_int_equal(off[i] % 4096, 0);
	}
	/* Each took one 4 KiB unit, and first fit packs them from 0. */
	assert_int_equal(kvf__segalloc_used_bytes(a), 64 * 4096);
	assert_int_equal(off[63], 63 * 4096);
	assert_true(kvf__segalloc_may_fit(a, MiB - 64 * 4096));
	assert_false(kvf__segalloc_may_fit(a, MiB - 64 * 4096 + 1));
	for (int i = 0; i < 64; i++)
		kvf__segalloc_free(a, off[i], 1 + i * 64);
	assert_int_equal(kvf__segalloc_largest_free(a), MiB);
	kvf__segalloc_destroy(a);

	assert_int_equal(kvf__segalloc_create(64 * MiB, 2 * MiB, &a), KVF_OK);
	assert_int_equal(kvf__segalloc_alloc_tagged(a, 100, 1, &off[0]),
			 KVF_OK);
	assert_int_equal(kvf__segalloc_alloc_tagged(a, 100, 1, &off[1]),
			 KVF_OK);
	assert_int_equal(off[1] - off[0], 2 * MiB);
	assert_int_equal(kvf__segalloc_free_bytes(a), 60 * MiB);
	kvf__segalloc_destroy(a);
}

static void test_reserve(void **state)
{
	struct kvf__segalloc *a;
	uint64_t off;

	(void)state;
	assert_int_equal(kvf__segalloc_create(MiB, 64, &a), KVF_OK);
	/* Middle of the one region: it splits in two. */
	assert_int_equal(kvf__segalloc_reserve_tagged(a, 4096, 100, 1), KVF_OK);
	assert_int_equal(kvf__segalloc_free_bytes(a), MiB - 128);
	assert_int_equal(kvf__segalloc_largest_free(a), MiB - 4096 - 128);
	/* Any overlap with a used range is NO_SPACE. */
	assert_int_equal(kvf__segalloc_reserve_tagged(a, 4096, 64, 1),
			 KVF_ERR_NO_SPACE);
	assert_int_equal(kvf__segalloc_reserve_tagged(a, 4096 - 64, 128, 1),
			 KVF_ERR_NO_SPACE);
	assert_int_equal(kvf__segalloc_reserve_tagged(a, 4096 + 64, 64, 1),
			 KVF_ERR_NO_SPACE);
	/* Exactly adjacent is fine (start and end of regions). */
	assert_int_equal(kvf__segalloc_reserve_tagged(a, 4096 - 64, 64, 1),
			 KVF_OK);
	assert_int_equal(kvf__segalloc_reserve_tagged(a, 4096 + 128, 64, 1),
			 KVF_OK);
	assert_int_equal(kvf__segalloc_reserve_tagged(a, 0, 64, 1), KVF_OK);
	assert_int_equal(kvf__segalloc_reserve_tagged(a, MiB - 64, 64, 1),
			 KVF_OK);
	assert_int_equal(kvf__segalloc_nr_allocs(a), 5);
	/* Invalid: unaligned, zero, outside. */
	assert_int_equal(kvf__segalloc_reserve_tagged(a, 8, 64, 1),
			 KVF_ERR_INVALID_PARAMS);
	assert_int_equal(kvf__segalloc_reserve_tagged(a, 8192, 0, 1),
			 KVF_ERR_INVALID_PARAMS);
	assert_int_equal(kvf__segalloc_reserve_tagged(a, MiB, 64, 1),
			 KVF_ERR_INVALID_PARAMS);
	assert_int_equal(kvf__segalloc_reserve_tagged(a, MiB - 64, 128, 1),
			 KVF_ERR_INVALID_PARAMS);
	/* First fit now lands in the hole [64, 4096 - 64). */
	assert_int_equal(kvf__segalloc_alloc_tagged(a, 64, 1, &off), KVF_OK);
	assert_int_equal(off, 64);
	kvf__segalloc_free(a, off, 64);
	/* Reserved ranges are freed like allocations; all coalesces. */
	kvf__segalloc_free(a, 4096, 100);
	kvf__segalloc_free(a, 0, 64);
	kvf__segalloc_free(a, MiB - 64, 64);
	kvf__segalloc_free(a, 4096 + 128, 64);
	kvf__segalloc_free(a, 4096 - 64, 64);
	assert_int_equal(kvf__segalloc_largest_free(a), MiB);
	/* Whole segment. */
	assert_int_equal(kvf__segalloc_reserve_tagged(a, 0, MiB, 1), KVF_OK);
	assert_int_equal(kvf__segalloc_alloc_tagged(a, 1, 1, &off),
			 KVF_ERR_NO_SPACE);
	kvf__segalloc_free(a, 0, MiB);
	kvf__segalloc_destroy(a);
}

static void test_tib(void **state)
{
	struct kvf__segalloc *a;
	uint64_t off, offs[1000];

	(void)state;
	assert_int_equal(kvf__segalloc_create(4 * TiB, 64, &a), KVF_OK);
	assert_int_equal(kvf__segalloc_largest_free(a), 4 * TiB);
	assert_int_equal(kvf__segalloc_alloc_tagged(a, 4 * TiB, 1, &off),
			 KVF_OK);
	assert_int_equal(kvf__segalloc_alloc_tagged(a, 64, 1, &off),
			 KVF_ERR_NO_SPACE);
	kvf__segalloc_free(a, 0, 4 * TiB);
	for (int i = 0; i < 1000; i++)
		assert_int_equal(
			kvf__segalloc_alloc_tagged(a, 3 * GiB + 7, 1, &offs[i]),
			KVF_OK);
	for (int i = 0; i < 1000; i += 2)
		kvf__segalloc_free(a, offs[i], 3 * GiB + 7);
	assert_int_equal(kvf__segalloc_largest_free(a),
			 4 * TiB - 1000 * round_up(3 * GiB + 7, 64));
	/* Used ranges end near 2.93 TiB; cut the free tail in two. */
	assert_int_equal(kvf__segalloc_reserve_tagged(a, 2 * TiB, TiB, 1),
			 KVF_ERR_NO_SPACE);
	assert_int_equal(
		kvf__segalloc_reserve_tagged(a, 3 * TiB + 4096, 512 * GiB, 1),
		KVF_OK);
	assert_int_equal(kvf__segalloc_largest_free(a), 512 * GiB - 4096);
	kvf__segalloc_destroy(a);

	assert_int_equal(kvf__segalloc_create(TiB, 4096, &a), KVF_OK);
	assert_int_equal(kvf__segalloc_alloc_tagged(a, TiB + 1, 1, &off),
			 KVF_ERR_NO_SPACE);
	assert_int_equal(kvf__segalloc_alloc_tagged(a, TiB, 1, &off), KVF_OK);
	kvf__segalloc_destroy(a);
}

static void test_invalid(void **state)
{
	struct kvf__segalloc *a = NULL;
	uint64_t off;

	(void)state;
	assert_int_equal(kvf__segalloc_create(MiB, 0, &a), KVF_ERR_INVALID_PARAMS);
	assert_int_equal(kvf__segalloc_create(MiB, 4, &a), KVF_ERR_INVALID_PARAMS);
	assert_int_equal(kvf__segalloc_create(MiB, 96, &a),
			 KVF_ERR_INVALID_PARAMS);
	assert_int_equal(kvf__segalloc_create(32, 64, &a), KVF_ERR_INVALID_PARAMS);
	assert_int_equal(kvf__segalloc_create(MiB, 64, NULL),
			 KVF_ERR_INVALID_PARAMS);
	assert_int_equal(kvf__segalloc_create(MiB, 64, &a), KVF_OK);
	assert_int_equal(kvf__segalloc_alloc_tagged(a, 0, 1, &off),
			 KVF_ERR_INVALID_PARAMS);
	assert_int_equal(kvf__segalloc_alloc_tagged(a, 64, 1, NULL),
			 KVF_ERR_INVALID_PARAMS);
	assert_int_equal(kvf__segalloc_alloc_tagged(a, MiB + 1, 1, &off),
			 KVF_ERR_NO_SPACE);
	assert_int_equal(kvf__segalloc_alloc_tagged(a, UINT64_MAX, 1, &off),
			 KVF_ERR_NO_SPACE);
	kvf__segalloc_destroy(a);
	kvf__segalloc_destroy(NULL);
}

/* Run @fn in a child; it must die with SIGABRT (kvf__die). */
static void expect_death(void (*fn)(struct kvf__segalloc *),
			 struct kvf__segalloc *a)
{
	int status;
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		/* Keep the expected abort message out of the test log. */
		if (!freopen("/dev/null", "w", stderr))
			_exit(3);
		fn(a);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status));
	assert_int_equal(WTERMSIG(status), SIGABRT);
}

static void free_unknown(struct kvf__segalloc *a)
{
	kvf__segalloc_free(a, 128, 64);
}

static void free_wrong_size(struct kvf__segalloc *a)
{
	kvf__segalloc_free(a, 0, 200);
}

static void free_twice(struct kvf__segalloc *a)
{
	kvf__segalloc_free(a, 0, 64);
	kvf__segalloc_free(a, 0, 64);
}

/*
 * An uncontended try-alloc is an alloc: same first-fit offsets, tag kept,
 * the same errors; its KVF_ERR_BUSY path (another thread in the
 * allocator) runs in tests/stress/test_segalloc_concurrent.
 */
static void test_try_alloc(void **state)
{
	struct kvf__segalloc *a, *b;
	struct kvf__segalloc_block *blk;
	uint64_t oa, ob;
	size_t n;

	(void)state;
	assert_int_equal(kvf__segalloc_create(1 << 20, 64, &a), KVF_OK);
	assert_int_equal(kvf__segalloc_create(1 << 20, 64, &b), KVF_OK);
	for (int i = 0; i < 20; i++) {
		uint64_t size = 1000 + 3000 * (uint64_t)(i % 7);

		assert_int_equal(kvf__segalloc_try_alloc_tagged(a, size, 7 + i,
								 &oa), KVF_OK);
		assert_int_equal(kvf__segalloc_alloc_tagged(b, size, 7 + i,
							    &ob), KVF_OK);
		assert_true(oa == ob);
	}
	assert_int_equal(kvf__segalloc_used_blocks(a, &blk, &n), KVF_OK);
	assert_int_equal(n, 20);
	for (size_t k = 0; k < n; k++)
		assert_true(blk[k].tag == 7 + k);
	free(blk);
	assert_int_equal(kvf__segalloc_try_alloc_tagged(a, 2 << 20, 1, &oa),
			 KVF_ERR_NO_SPACE);
	assert_int_equal(kvf__segalloc_try_alloc_tagged(a, 0, 1, &oa),
			 KVF_ERR_INVALID_PARAMS);
	kvf__segalloc_destroy(a);
	kvf__segalloc_destroy(b);
}

static void test_bad_free_dies(void **state)
{
	struct kvf__segalloc *a;
	uint64_t off;

	(void)state;
	assert_int_equal(kvf__segalloc_create(MiB, 64, &a), KVF_OK);
	assert_int_equal(kvf__segalloc_alloc_tagged(a, 64, 1, &off), KVF_OK);
	assert_int_equal(off, 0);
	expect_death(free_unknown, a);
	expect_death(free_wrong_size, a);
	expect_death(free_twice, a);
	/* Same rounded size is the same allocation: accepted. */
	kvf__segalloc_free(a, 0, 60);
	kvf__segalloc_destroy(a);
}

/* ---- reuse lists (the fast path of alloc) ---- */

/* Free of a parked block (the middle of three 64 KiB blocks) again. */
static void free_parked_twice(struct kvf__segalloc *a)
{
	kvf__segalloc_free(a, 64 * KiB, 64 * KiB);
	kvf__segalloc_free(a, 64 * KiB, 64 * KiB);
}

static uint64_t used_block_count(struct kvf__segalloc *a)
{
	struct kvf__segalloc_block *b;
	size_t n;

	assert_int_equal(kvf__segalloc_used_blocks(a, &b, &n), KVF_OK);
	free(b);
	return n;
}

/*
 * kvf__segalloc_try_take_parked_many(): the parked blocks of the size,
 * newest first, each with its new owner's tag, as many as there are (a
 * prefix of the request); none left, 0; the figures as after single
 * takes; size 0 or no arrays refused.
 */
static void test_take_parked_many(void **state)
{
	struct kvf__segalloc_block blk[16];
	const uint64_t tags[6] = { 41, 42, 43, 44, 45, 46 };
	struct kvf__segalloc *a;
	uint64_t off[16], got[6], next, free_before;

	(void)state;
	assert_int_equal(kvf__segalloc_create(MiB, 64, &a), KVF_OK);
	kvf__segalloc_set_reuse_limit(a, MiB);
	for (int i = 0; i < 16; i++)
		assert_int_equal(kvf__segalloc_alloc_tagged(a, 64 * KiB, 100 + i,
							    &off[i]),
				 KVF_OK);
	for (int i = 1; i < 9; i += 2)
		kvf__segalloc_free(a, off[i], 64 * KiB);
	assert_int_equal(kvf__segalloc_reuse_bytes(a), 4 * 64 * KiB);
	free_before = kvf__segalloc_free_bytes(a);
	/* Another size has nothing parked. */
	assert_int_equal(kvf__segalloc_try_take_parked_many(a, 32 * KiB, 6,
							    tags, got),
			 0);
	assert_int_equal(kvf__segalloc_try_take_parked_many(a, 64 * KiB, 6,
							    tags, got),
			 4);
	for (int k = 0; k < 4; k++) {
		assert_int_equal(got[k], off[7 - 2 * k]);
		assert_int_equal(kvf__segalloc_scan(a, got[k], blk, 1, &next),
				 1);
		assert_int_equal(blk[0].offset, got[k]);
		assert_int_equal(blk[0].tag, tags[k]);
	}
	assert_int_equal(kvf__segalloc_reuse_bytes(a), 0);
	assert_int_equal(kvf__segalloc_free_bytes(a),
			 free_before - 4 * 64 * KiB);
	assert_int_equal(kvf__segalloc_nr_allocs(a), 16);
	assert_false(kvf__segalloc_has_parked(a, 64 * KiB));
	assert_int_equal(kvf__segalloc_try_take_parked_many(a, 64 * KiB, 6,
							    tags, got),
			 0);
	assert_int_equal(kvf__segalloc_try_take_parked_many(a, 0, 6, tags,
							    got),
			 KVF_ERR_INVALID_PARAMS);
	assert_int_equal(kvf__segalloc_try_take_parked_many(a, 64 * KiB, 6,
							    NULL, got),
			 KVF_ERR_INVALID_PARAMS);
	/* What it handed out frees as alloc's blocks do. */
	for (int k = 0; k < 4; k++)
		kvf__segalloc_free(a, got[k], 64 * KiB);
	assert_int_equal(kvf__segalloc_free_bytes(a), free_before);
	kvf__segalloc_destroy(a);
}

/*
 * What the lists do, step by step, in a 1 MiB segment of 16 blocks of
 * 64 KiB: a freed block between held ones is parked (free to every
 * reader, not a used block, not scanned), the next alloc of its size
 * takes the newest parked block, an alloc the tree cannot serve while a
 * parked block could gives every parked block back to the tree first, a
 * free next to a parked block merges with it, the bound holds, reserve
 * takes a parked range, and freeing a parked block again dies.
 */
static void test_reuse_lists(void **state)
{
	struct kvf__segalloc_block blk[16];
	struct kvf__segalloc *a;
	uint64_t off[16], o, next;

	(void)state;
	assert_int_equal(kvf__segalloc_create(MiB, 64, &a), KVF_OK);
	/* The default bound: a sixteenth of the segment. */
	for (int i = 0; i < 16; i++) {
		assert_int_equal(kvf__segalloc_alloc_tagged(a, 64 * KiB, 100 + i,
							    &off[i]),
				 KVF_OK);
		assert_int_equal(off[i], i * 64 * KiB);
	}
	kvf__segalloc_free(a, off[1], 64 * KiB);
	kvf__segalloc_free(a, off[3], 64 * KiB);
	assert_int_equal(kvf__segalloc_reuse_bytes(a), 64 * KiB);
	/* Over the bound: block 3 went to the tree. */
	assert_int_equal(kvf__segalloc_free_bytes(a), 128 * KiB);
	assert_int_equal(kvf__segalloc_largest_free(a), 64 * KiB);
	kvf__segalloc_set_reuse_limit(a, MiB);
	kvf__segalloc_free(a, off[5], 64 * KiB);
	kvf__segalloc_free(a, off[7], 64 * KiB);
	assert_int_equal(kvf__segalloc_reuse_bytes(a), 192 * KiB);
	assert_int_equal(kvf__segalloc_free_bytes(a), 256 * KiB);
	assert_int_equal(kvf__segalloc_nr_allocs(a), 12);
	assert_int_equal(used_block_count(a), 12);
	assert_int_equal(kvf__segalloc_scan(a, 0, blk, 16, &next), 12);
	for (int i = 0; i < 12; i++)
		assert_true(blk[i].tag >= 100);
	/* Newest parked first, with the new owner's tag. */
	assert_int_equal(kvf__segalloc_alloc_tagged(a, 64 * KiB, 7, &o),
			 KVF_OK);
	assert_int_equal(o, off[7]);
	assert_int_equal(kvf__segalloc_scan(a, off[7], blk, 1, &next), 1);
	assert_int_equal(blk[0].tag, 7);
	assert_int_equal(kvf__segalloc_reuse_bytes(a), 128 * KiB);
	/* The tree holds 64 KiB (block 3): 32 KiB fits there, lists stay. */
	assert_int_equal(kvf__segalloc_alloc_tagged(a, 32 * KiB, 8, &o),
			 KVF_OK);
	assert_int_equal(o, off[3]);
	assert_int_equal(kvf__segalloc_reuse_bytes(a), 128 * KiB);
	/* Bigger than anything free: NO_SPACE, the lists untouched. */
	assert_int_equal(kvf__segalloc_alloc_tagged(a, 128 * KiB, 9, &o),
			 KVF_ERR_NO_SPACE);
	assert_int_equal(kvf__segalloc_reuse_bytes(a), 128 * KiB);
	/*
	 * 48 KiB: the tree's largest is 32 KiB, parked blocks are 64 KiB.
	 * The lists give everything back, first fit takes block 1.
	 */
	assert_int_equal(kvf__segalloc_alloc_tagged(a, 48 * KiB, 10, &o),
			 KVF_OK);
	assert_int_equal(o, off[1]);
	assert_int_equal(kvf__segalloc_reuse_bytes(a), 0);
	assert_int_equal(kvf__segalloc_free_bytes(a),
			 64 * KiB + 16 * KiB + 32 * KiB);
	assert_int_equal(kvf__segalloc_largest_free(a), 64 * KiB);
	/* Park 9; freeing 10 (next to it) merges both into the tree. */
	kvf__segalloc_free(a, off[9], 64 * KiB);
	assert_int_equal(kvf__segalloc_reuse_bytes(a), 64 * KiB);
	kvf__segalloc_free(a, off[10], 64 * KiB);
	assert_int_equal(kvf__segalloc_reuse_bytes(a), 0);
	assert_int_equal(kvf__segalloc_largest_free(a), 128 * KiB);
	/* A parked range can be reserved (recovery), and is then used. */
	kvf__segalloc_free(a, off[12], 64 * KiB);
	assert_int_equal(kvf__segalloc_reuse_bytes(a), 64 * KiB);
	assert_int_equal(kvf__segalloc_reserve_tagged(a, off[12], 64 * KiB,
						      11),
			 KVF_OK);
	assert_int_equal(kvf__segalloc_reuse_bytes(a), 0);
	assert_int_equal(kvf__segalloc_free_bytes(a), 240 * KiB);
	/* Turning the lists off gives their blocks back. */
	kvf__segalloc_free(a, off[14], 64 * KiB);
	assert_int_equal(kvf__segalloc_reuse_bytes(a), 64 * KiB);
	kvf__segalloc_set_reuse_limit(a, 0);
	assert_int_equal(kvf__segalloc_reuse_bytes(a), 0);
	assert_int_equal(kvf__segalloc_free_bytes(a), 304 * KiB);
	kvf__segalloc_destroy(a);

	/* A parked block is not allocated: freeing it again dies. */
	assert_int_equal(kvf__segalloc_create(MiB, 64, &a), KVF_OK);
	for (int i = 0; i < 3; i++)
		assert_int_equal(kvf__segalloc_alloc_tagged(a, 64 * KiB, 1,
							    &off[i]),
				 KVF_OK);
	expect_death(free_parked_twice, a);
	kvf__segalloc_destroy(a);
}

/* The tag of the used block at @off, which must be one. */
static uint64_t tag_at(struct kvf__segalloc *a, uint64_t off)
{
	struct kvf__segalloc_block b;
	uint64_t next;

	assert_int_equal(kvf__segalloc_scan(a, off, &b, 1, &next), 1);
	assert_int_equal(b.offset, off);
	return b.tag;
}

/*
 * A parked block remembers its leaf, and the alloc that takes it writes
 * its owner there without a descent, if that leaf still holds it. Two
 * ways the leaf stops holding it, the block staying parked: (1) its leaf
 * splits, the block moving to the new right leaf (a hole before it cut
 * into 4 KiB blocks), so the remembered leaf, still in the tree, covers
 * other blocks; (2) its leaf merges into the one before it and goes back
 * to malloc (the spare leaves full after a large free). Both times the
 * claim must land on the block itself, every other block untouched, and
 * the block freed again parks and is taken again.
 */
static void test_parked_leaf_hints(void **state)
{
	enum { N = 1024, HOLE = 16, SMALL = 64 };
	struct kvf__segalloc_range *r = calloc(N, sizeof(*r));
	struct kvf__segalloc *a;
	uint64_t off[N], o, small[SMALL];
	size_t m = 0;

	(void)state;
	assert_non_null(r);
	/* (1) the leaf splits. */
	assert_int_equal(kvf__segalloc_create(32 * MiB, 64, &a), KVF_OK);
	kvf__segalloc_set_reuse_limit(a, 32 * MiB);
	for (int i = 0; i < 64; i++)
		assert_int_equal(kvf__segalloc_alloc_tagged(a, 16 * KiB, 1000 + i,
							    &off[i]),
				 KVF_OK);
	for (int i = 2; i < 2 + HOLE; i++)
		kvf__segalloc_free(a, off[i], 16 * KiB);
	kvf__segalloc_free(a, off[20], 16 * KiB);
	assert_int_equal(kvf__segalloc_reuse_bytes(a), 16 * KiB);
	for (int i = 0; i < SMALL; i++) {
		assert_int_equal(kvf__segalloc_alloc_tagged(a, 4 * KiB, 3000 + i,
							    &small[i]),
				 KVF_OK);
		assert_int_equal(small[i], off[2] + i * 4 * KiB);
	}
	assert_int_equal(kvf__segalloc_alloc_tagged(a, 16 * KiB, 7, &o),
			 KVF_OK);
	assert_int_equal(o, off[20]);
	assert_int_equal(tag_at(a, off[20]), 7);
	for (int i = 0; i < 64; i++)
		if (i < 2 || (i >= 2 + HOLE && i != 20))
			assert_int_equal(tag_at(a, off[i]), 1000 + i);
	for (int i = 0; i < SMALL; i++)
		assert_int_equal(tag_at(a, small[i]), 3000 + i);
	assert_int_equal(used_block_count(a), 64 - HOLE + SMALL);
	kvf__segalloc_free(a, off[20], 16 * KiB);
	assert_int_equal(kvf__segalloc_reuse_bytes(a), 16 * KiB);
	assert_int_equal(kvf__segalloc_alloc_tagged(a, 16 * KiB, 8, &o),
			 KVF_OK);
	assert_int_equal(o, off[20]);
	assert_int_equal(tag_at(a, off[20]), 8);
	kvf__segalloc_destroy(a);

	/* (2) the leaf merges away and is given back to malloc. */
	assert_int_equal(kvf__segalloc_create(32 * MiB, 64, &a), KVF_OK);
	kvf__segalloc_set_reuse_limit(a, 32 * MiB);
	for (int i = 0; i < N; i++)
		assert_int_equal(kvf__segalloc_alloc_tagged(a, 16 * KiB, 1000 + i,
							    &off[i]),
				 KVF_OK);
	/* Park block 40 (in the second leaf), then free most of the rest. */
	kvf__segalloc_free(a, off[40], 16 * KiB);
	for (int i = 256; i < N; i++)
		r[m++] = (struct kvf__segalloc_range){ off[i], 16 * KiB };
	kvf__segalloc_free_many(a, r, m);
	m = 0;
	for (int i = 0; i < 256; i++)
		if (i < 39 || i > 41)
			r[m++] = (struct kvf__segalloc_range){ off[i], 16 * KiB };
	kvf__segalloc_free_many(a, r, m);
	assert_int_equal(kvf__segalloc_reuse_bytes(a), 16 * KiB);
	assert_int_equal(used_block_count(a), 2);
	assert_int_equal(kvf__segalloc_alloc_tagged(a, 16 * KiB, 9, &o),
			 KVF_OK);
	assert_int_equal(o, off[40]);
	assert_int_equal(tag_at(a, off[39]), 1039);
	assert_int_equal(tag_at(a, off[40]), 9);
	assert_int_equal(tag_at(a, off[41]), 1041);
	assert_int_equal(used_block_count(a), 3);
	assert_int_equal(kvf__segalloc_free_bytes(a), 32 * MiB - 48 * KiB);
	kvf__segalloc_destroy(a);
	free(r);
}

/*
 * Blocks popped from a reuse list are claims until their leaves are
 * written (more pops than the claims hold in a row, a free of the block,
 * a scan, a reserve): the used blocks carry the new owners' tags, the
 * counters are exact at once, a claimed block can be freed (and parked
 * again), alone or in a batch, a free next to one takes it as held, and
 * it cannot be reserved.
 */
static void test_reuse_claims(void **state)
{
	enum { N = 130, PARKED = 64 };
	struct kvf__segalloc_range r[2];
	struct kvf__segalloc_block *b;
	struct kvf__segalloc *a;
	uint64_t off[N], o[PARKED];
	size_t nb;

	(void)state;
	assert_int_equal(kvf__segalloc_create(4 * MiB, 64, &a), KVF_OK);
	kvf__segalloc_set_reuse_limit(a, 4 * MiB);
	for (int i = 0; i < N; i++)
		assert_int_equal(kvf__segalloc_alloc_tagged(a, 16 * KiB,
							    1000 + i, &off[i]),
				 KVF_OK);
	/* Odd blocks 1..127 park: both neighbours held. */
	for (int k = 0; k < PARKED; k++)
		kvf__segalloc_free(a, off[2 * k + 1], 16 * KiB);
	assert_int_equal(kvf__segalloc_reuse_bytes(a), PARKED * 16 * KiB);
	for (int k = 0; k < PARKED; k++) {
		assert_int_equal(kvf__segalloc_alloc_tagged(a, 16 * KiB,
							    5000 + k, &o[k]),
				 KVF_OK);
		/* Newest parked first. */
		assert_int_equal(o[k], off[2 * (PARKED - 1 - k) + 1]);
		assert_int_equal(kvf__segalloc_nr_allocs(a),
				 N - PARKED + k + 1);
	}
	assert_int_equal(kvf__segalloc_reuse_bytes(a), 0);
	assert_int_equal(kvf__segalloc_free_bytes(a), 4 * MiB - N * 16 * KiB);
	/*
	 * A batch free with claims pending (the last 32 pops): block N - 1,
	 * and block 2, whose neighbours 1 and 3 are claimed, so held: 2 is
	 * parked.
	 */
	r[0] = (struct kvf__segalloc_range){ off[N - 1], 16 * KiB };
	r[1] = (struct kvf__segalloc_range){ off[2], 16 * KiB };
	kvf__segalloc_free_many(a, r, 2);
	assert_int_equal(kvf__segalloc_reuse_bytes(a), 16 * KiB);
	assert_int_equal(kvf__segalloc_used_blocks(a, &b, &nb), KVF_OK);
	assert_int_equal(nb, N - 2);
	for (size_t k = 0, i = 0; k < nb; k++, i++) {
		uint64_t want;

		i += i == 2;
		want = i % 2 && i < 2 * PARKED ?
			       5000 + (PARKED - 1 - (i - 1) / 2) :
			       1000 + i;
		assert_int_equal(b[k].offset, off[i]);
		assert_int_equal(b[k].tag, want);
	}
	free(b);
	/* Claimed, then freed at once: parked again. */
	kvf__segalloc_free(a, o[0], 16 * KiB);
	assert_int_equal(kvf__segalloc_alloc_tagged(a, 16 * KiB, 6000, &o[0]),
			 KVF_OK);
	kvf__segalloc_free(a, o[0], 16 * KiB);
	assert_int_equal(kvf__segalloc_reuse_bytes(a), 32 * KiB);
	/* Claimed: not reservable. */
	assert_int_equal(kvf__segalloc_alloc_tagged(a, 16 * KiB, 6001, &o[0]),
			 KVF_OK);
	assert_int_equal(kvf__segalloc_reserve_tagged(a, o[0], 16 * KiB, 1),
			 KVF_ERR_NO_SPACE);
	/* Block 2 again, freed in a batch while claimed. */
	assert_int_equal(kvf__segalloc_alloc_tagged(a, 16 * KiB, 6002, &o[1]),
			 KVF_OK);
	assert_int_equal(o[1], off[2]);
	r[0] = (struct kvf__segalloc_range){ o[1], 16 * KiB };
	r[1] = (struct kvf__segalloc_range){ off[0], 16 * KiB };
	kvf__segalloc_free_many(a, r, 2);
	assert_int_equal(kvf__segalloc_nr_allocs(a), N - 3);
	assert_int_equal(used_block_count(a), N - 3);
	assert_int_equal(kvf__segalloc_free_bytes(a),
			 4 * MiB - (N - 3) * 16 * KiB);
	kvf__segalloc_destroy(a);
}

struct shadow {
	struct kvf__segalloc *a;
	struct bitmap_model m;
	struct live *lv;
};

/*
 * The fast path against the slow path it bypasses: the same requests and
 * frees go to an allocator with its reuse lists on (frees batched, as a
 * batch remove does) and to one without (single frees). Placements differ
 * (a parked block is not the first fit), so "the same decisions" means:
 * every request succeeds in both (the pool stays under 80% full, requests
 * are small), the bytes in use are equal after every step, neither
 * allocator ever overlaps two blocks (each has its own bitmap), free
 * bytes and the largest region are exact against its bitmap, its used
 * blocks and tags are exactly its live allocations, and freeing
 * everything leaves both one free region. Three hot sizes and a few odd
 * ones, as a master's page sizes with an occasional other object.
 */
static void test_reuse_matches_tree(void **state)
{
	const uint64_t seg = 4 * MiB, al = 64;
	const uint64_t hot[3] = { 40 * KiB, 13 * KiB + 100, 64 * KiB };
	struct shadow sh[2];
	struct kvf__segalloc_range *r = calloc(seg / al, sizeof(*r));
	uint64_t rng = 0x51ad0u, used = 0, n = 0, hits = 0;

	(void)state;
	assert_non_null(r);
	for (int k = 0; k < 2; k++) {
		sh[k].m = (struct bitmap_model){ calloc(seg / al, 1), seg / al,
						 al };
		sh[k].lv = calloc(seg / al, sizeof(*sh[k].lv));
		assert_non_null(sh[k].m.used);
		assert_non_null(sh[k].lv);
		assert_int_equal(kvf__segalloc_create(seg, al, &sh[k].a),
				 KVF_OK);
	}
	kvf__segalloc_set_reuse_limit(sh[0].a, seg / 4);
	kvf__segalloc_set_reuse_limit(sh[1].a, 0);
	for (int op = 0; op < 20000; op++) {
		uint64_t dice = rng_next(&rng) % 100, asked, sz, tag;

		if (n && (dice < 40 || used > seg * 8 / 10)) {
			/* Free a random handful, in one batch for the fast. */
			uint64_t cnt = rng_range(&rng, 1, n < 2 ? n : 2);

			for (uint64_t i = 0; i < cnt; i++) {
				uint64_t j = rng_next(&rng) % n;
				struct live l0 = sh[0].lv[j], l1 = sh[1].lv[j];

				r[i] = (struct kvf__segalloc_range){ l0.off,
								     l0.asked };
				kvf__segalloc_free(sh[1].a, l1.off, l1.asked);
				bm_mark(&sh[0].m, l0.off, l0.size, 0);
				bm_mark(&sh[1].m, l1.off, l1.size, 0);
				used -= l0.size;
				n--;
				sh[0].lv[j] = sh[0].lv[n];
				sh[1].lv[j] = sh[1].lv[n];
			}
			kvf__segalloc_free_many(sh[0].a, r, cnt);
		} else {
			asked = dice % 10 ? hot[dice % 3] :
					    rng_range(&rng, 1, 64 * KiB);
			sz = round_up(asked, al);
			tag = rng_next(&rng) | 1;
			for (int k = 0; k < 2; k++) {
				uint64_t off, ff = bm_first_fit(&sh[k].m,
								sz / al);

				assert_int_equal(kvf__segalloc_alloc_tagged(
							 sh[k].a, asked, tag,
							 &off),
						 KVF_OK);
				if (k == 0)
					hits += off != ff;
				else
					assert_int_equal(off, ff);
				bm_mark(&sh[k].m, off, sz, 1);
				sh[k].lv[n] = (struct live){ off, sz, asked,
							     tag };
			}
			used += sz;
			n++;
		}
		for (int k = 0; k < 2; k++) {
			assert_int_equal(kvf__segalloc_used_bytes(sh[k].a),
					 used);
			assert_int_equal(kvf__segalloc_nr_allocs(sh[k].a), n);
			if (op % 16 == 0)
				bm_check(&sh[k].m, sh[k].a);
			if (op % 512 == 0)
				check_blocks(sh[k].a, sh[k].lv, n);
		}
	}
	/* The fast path did serve: allocations off the first fit. */
	assert_true(hits > 1000);
	for (int k = 0; k < 2; k++) {
		struct model_run end = { sh[k].m, sh[k].lv, n, seg, sh[k].a };

		bm_check(&sh[k].m, sh[k].a);
		check_blocks(sh[k].a, sh[k].lv, n);
		run_end(&end);
	}
	free(r);
}

/* Both allocators hold the same used blocks (offsets, sizes, tags). */
static void assert_same_blocks(struct kvf__segalloc *a, struct kvf__segalloc *b)
{
	struct kvf__segalloc_block *ba, *bb;
	size_t na, nb;

	assert_int_equal(kvf__segalloc_used_blocks(a, &ba, &na), KVF_OK);
	assert_int_equal(kvf__segalloc_used_blocks(b, &bb, &nb), KVF_OK);
	assert_int_equal(na, nb);
	assert_true(!na || !memcmp(ba, bb, na * sizeof(*ba)));
	free(ba);
	free(bb);
	assert_int_equal(kvf__segalloc_free_bytes(a), kvf__segalloc_free_bytes(b));
	assert_int_equal(kvf__segalloc_largest_free(a),
			 kvf__segalloc_largest_free(b));
	assert_int_equal(kvf__segalloc_nr_allocs(a), kvf__segalloc_nr_allocs(b));
}

static int range_cmp(const void *x, const void *y)
{
	const struct kvf__segalloc_range *a = x, *b = y;

	return (a->offset > b->offset) - (a->offset < b->offset);
}

/*
 * free_many against the single frees it stands for: two allocators get
 * the same allocations; a random subset of the live ranges (random order,
 * mixed sizes, neighbours included so groups coalesce) is freed one by one
 * in one and with one free_many in the other (every other round sorted by
 * address, so runs of frees merge in place in one leaf and its summaries
 * are fixed once; which frees come first does not change the blocks that
 * result). Both must then hold the same blocks, free bytes, largest
 * region and count, and make the same next allocations; the bitmap model
 * checks the batched one exactly.
 */
/* How big, and how deep, the trees of one free_many comparison get. */
struct many_cfg {
	uint64_t granules;
	uint64_t max_granules; /* an alloc takes 1..max_granules */
	int rounds;
	int allocs;         /* alloc attempts per round */
	uint64_t free_div;  /* a round frees up to live / free_div */
	uint64_t seed;
	/*
	 * Reuse lists on, and both allocators free in one order (address
	 * order every round): parking depends on the order of the frees.
	 */
	bool lists;
};

static void run_free_many_matches_single(const struct many_cfg *c)
{
	const uint64_t gran = 64, granules = c->granules;
	struct bitmap_model m = { calloc(granules, 1), granules, gran };
	struct kvf__segalloc *one, *many;
	struct live *live = calloc(granules, sizeof(*live));
	struct kvf__segalloc_range *r = calloc(granules, sizeof(*r));
	uint64_t seed = c->seed;
	size_t nr_live = 0;

	assert_non_null(m.used);
	assert_non_null(live);
	assert_non_null(r);
	assert_int_equal(kvf__segalloc_create(granules * gran, gran, &one),
			 KVF_OK);
	assert_int_equal(kvf__segalloc_create(granules * gran, gran, &many),
			 KVF_OK);
	/*
	 * The tree alone: parking depends on the order of the frees, which
	 * differs here on purpose (unless c->lists).
	 */
	if (!c->lists) {
		kvf__segalloc_set_reuse_limit(one, 0);
		kvf__segalloc_set_reuse_limit(many, 0);
	}
	for (int round = 0; round < c->rounds; round++) {
		size_t nr_free, k = 0;

		/* Allocate until a tenth of the attempts fail. */
		for (int t = 0; t < c->allocs; t++) {
			uint64_t size = rng_range(&seed, 1, c->max_granules) *
					gran, o1, o2;
			uint64_t tag = rng_range(&seed, 1, UINT64_MAX - 1);
			int r1 = kvf__segalloc_alloc_tagged(one, size, tag, &o1);
			int r2 = kvf__segalloc_alloc_tagged(many, size, tag, &o2);

			assert_int_equal(r1, r2);
			if (r1 != KVF_OK)
				continue;
			assert_int_equal(o1, o2);
			bm_mark(&m, o1, size, 1);
			live[nr_live++] = (struct live){ o1, size, size, tag };
		}
		/* Free a random subset, in random order. */
		nr_free = rng_range(&seed, 0, nr_live / c->free_div);
		for (size_t i = 0; i < nr_free; i++) {
			size_t j = rng_range(&seed, i, nr_live - 1);
			struct live t = live[i];

			live[i] = live[j];
			live[j] = t;
			if (!c->lists)
				kvf__segalloc_free(one, live[i].off,
						   live[i].size);
			bm_mark(&m, live[i].off, live[i].size, 0);
			r[k++] = (struct kvf__segalloc_range){ live[i].off,
							       live[i].size };
		}
		/* Every other round in address order, as a fill is removed. */
		if (round % 2 || c->lists)
			qsort(r, k, sizeof(*r), range_cmp);
		for (size_t i = 0; i < k && c->lists; i++)
			kvf__segalloc_free(one, r[i].offset, r[i].size);
		kvf__segalloc_free_many(many, r, k);
		memmove(live, live + nr_free,
			(nr_live - nr_free) * sizeof(*live));
		nr_live -= nr_free;
		if (c->lists)
			bm_check_free(&m, many);
		else
			bm_check(&m, many);
		assert_same_blocks(one, many);
	}
	kvf__segalloc_destroy(one);
	kvf__segalloc_destroy(many);
	free(live);
	free(r);
	free(m.used);
}

static void test_free_many_matches_single(void **state)
{
	const struct many_cfg c = { 1 << 14, 24, 400, 64, 1, 0x5eed1234abcdULL,
				    false };

	(void)state;
	run_free_many_matches_single(&c);
}

/*
 * The same with thousands of small blocks, so the tree is three levels
 * high and a free_many's batch (hundreds of frees, several passes of the
 * descents' prefetching) descends through inner nodes of two levels.
 */
static void test_free_many_matches_single_deep(void **state)
{
	const struct many_cfg c = { 1 << 14, 3, 16, 1024, 8, 0x77aa55ccULL,
				    false };

	(void)state;
	run_free_many_matches_single(&c);
}

/*
 * Runs of neighbours freed at once (a fill removed in address order) with
 * the reuse lists on: the run's first block, parked and taken back by the
 * second one at a time, is never parked; the blocks, lists and counts
 * must be those of the single frees in the same order. Few sizes, so
 * they claim lists and park.
 */
static void test_free_many_runs_match_single_with_lists(void **state)
{
	const struct many_cfg c = { 1 << 14, 4, 200, 256, 1, 0x3c3c1f1fULL,
				    true };

	(void)state;
	run_free_many_matches_single(&c);
}

static void free_many_twice(struct kvf__segalloc *a)
{
	const struct kvf__segalloc_range r[2] = { { 0, 64 }, { 0, 64 } };

	kvf__segalloc_free_many(a, r, 2);
}

static void test_free_many_bad_dies(void **state)
{
	const struct kvf__segalloc_range none[1] = { { 0, 64 } };
	struct kvf__segalloc *a;
	uint64_t off;

	(void)state;
	assert_int_equal(kvf__segalloc_create(MiB, 64, &a), KVF_OK);
	assert_int_equal(kvf__segalloc_alloc_tagged(a, 64, 1, &off), KVF_OK);
	expect_death(free_many_twice, a);
	/* An empty batch changes nothing. */
	kvf__segalloc_free_many(a, none, 0);
	assert_int_equal(kvf__segalloc_nr_allocs(a), 1);
	kvf__segalloc_free_many(a, none, 1);
	assert_int_equal(kvf__segalloc_nr_allocs(a), 0);
	assert_int_equal(kvf__segalloc_largest_free(a), MiB);
	kvf__segalloc_destroy(a);
}

/* ---- slabs ---- */

static uint64_t slabs_broken(struct kvf__segalloc *a)
{
	uint64_t broken;

	kvf__segalloc_nr_slabs(a, &broken);
	return broken;
}

/*
 * Free the @n objects left, check the segment is one free block again
 * with no slab, and let go of the allocator and the model.
 */
static void model_end(struct kvf__segalloc *a, struct bitmap_model *m,
		      struct live *lv, size_t n)
{
	uint64_t seg = m->granules * m->gran;

	while (n) {
		kvf__segalloc_free(a, lv[n - 1].off, lv[n - 1].asked);
		n--;
	}
	assert_int_equal(kvf__segalloc_nr_slabs(a, NULL), 0);
	assert_int_equal(kvf__segalloc_free_bytes(a), seg);
	assert_int_equal(kvf__segalloc_largest_free(a), seg);
	kvf__segalloc_destroy(a);
	free(lv);
	free(m->used);
}

/* A model of @seg bytes in granules of @gran, room for as many objects. */
static struct kvf__segalloc *model_new(struct bitmap_model *m,
				       struct live **lv, uint64_t seg,
				       uint64_t gran)
{
	struct kvf__segalloc *a;

	*m = (struct bitmap_model){ calloc(seg / gran, 1), seg / gran, gran };
	*lv = calloc(seg / gran, sizeof(**lv));
	assert_non_null(m->used);
	assert_non_null(*lv);
	assert_int_equal(kvf__segalloc_create(seg, gran, &a), KVF_OK);
	return a;
}

/*
 * Slabs under churn against the bitmap model: two repeated sizes (they
 * get slabs) and scattered ones (plain blocks of the tree: their frees
 * miss the directory), freed one by one and in batches. Every range
 * handed out is disjoint from the live ones, free and used bytes match
 * the model, the used blocks are exactly the live objects with their
 * tags, and once all are freed every slab has gone back to the tree.
 */
static void test_slab_churn(void **state)
{
	const uint64_t gran = 64, seg = 64 * MiB;
	const uint64_t hot[2] = { 1000, 3000 };
	struct kvf__segalloc_range r[64];
	uint64_t seed = 0x51ab51abULL, most = 0;
	struct bitmap_model m;
	struct live *lv;
	struct kvf__segalloc *a = model_new(&m, &lv, seg, gran);
	size_t n = 0;

	(void)state;
	for (int op = 0; op < 60000; op++) {
		uint64_t x = rng_next(&seed), size, off, tag = x | 1;

		if (n && (x % 8 < 3 || n > 1500)) {
			size_t k = 0;

			/* A batch of up to 64 frees, or one. */
			for (uint64_t b = x % 3 ? 1 : 1 + (x >> 8) % 64;
			     b && n; b--) {
				size_t v = rng_range(&seed, 0, n - 1);

				bm_mark(&m, lv[v].off, lv[v].size, 0);
				r[k++] = (struct kvf__segalloc_range){
					lv[v].off, lv[v].asked };
				lv[v] = lv[--n];
			}
			if (k == 1 && x & 64)
				kvf__segalloc_free(a, r[0].offset, r[0].size);
			else
				kvf__segalloc_free_many(a, r, k);
		} else {
			size = x % 4 ? hot[(x >> 4) & 1] :
				       rng_range(&seed, 1, 20000);
			if (kvf__segalloc_alloc_tagged(a, size, tag, &off))
				continue;
			bm_mark(&m, off, round_up(size, gran), 1);
			lv[n++] = (struct live){ off, round_up(size, gran), size,
						 tag };
		}
		if (kvf__segalloc_nr_slabs(a, NULL) > most)
			most = kvf__segalloc_nr_slabs(a, NULL);
		if (op % 1024 == 0) {
			bm_check_free(&m, a);
			assert_int_equal(kvf__segalloc_nr_allocs(a), n);
			check_blocks(a, lv, n);
		}
	}
	assert_true(most >= 2);
	model_end(a, &m, lv, n);
}

/* Fill with one size: slabs form; an empty one goes back to the tree. */
static void test_slab_empty_returns(void **state)
{
	struct kvf__segalloc *a;
	uint64_t off[256], n = 0;

	(void)state;
	assert_int_equal(kvf__segalloc_create(16 * MiB, 64, &a), KVF_OK);
	for (; n < 256; n++)
		assert_int_equal(kvf__segalloc_alloc_tagged(a, 900, n + 1,
							    &off[n]),
				 KVF_OK);
	assert_true(kvf__segalloc_nr_slabs(a, NULL) >= 1);
	/* Objects of a slab are adjacent slots of one size. */
	assert_int_equal(off[101] - off[100], 960);
	while (n--)
		kvf__segalloc_free(a, off[n], 900);
	assert_int_equal(kvf__segalloc_nr_slabs(a, NULL), 0);
	assert_int_equal(kvf__segalloc_nr_allocs(a), 0);
	assert_int_equal(kvf__segalloc_largest_free(a), 16 * MiB);
	kvf__segalloc_destroy(a);
}

/*
 * An object in a slab costs the allocator its tag's high half (4 bytes)
 * and its share of the slab's bitmap and header: 2048 objects of 256
 * bytes per slab in a 1 GiB segment, under 4.5 bytes each; their tags
 * read back with the low half 0, the high half as given.
 */
static void test_slab_tag_bytes(void **state)
{
	enum { FIRST = 100, N = 8192 };
	struct kvf__segalloc *a;
	struct kvf__segalloc_block *b;
	uint64_t off, before, in_slab = 0;
	size_t nb;

	(void)state;
	assert_int_equal(kvf__segalloc_create(1ULL << 30, 64, &a), KVF_OK);
	for (uint64_t i = 0; i < FIRST; i++)
		assert_int_equal(kvf__segalloc_alloc_tagged(
					 a, 256, (i + 1) << 32 | 0xabcd, &off),
				 KVF_OK);
	assert_true(kvf__segalloc_nr_slabs(a, NULL) >= 1);
	before = kvf__segalloc_meta_bytes(a);
	for (uint64_t i = FIRST; i < FIRST + N; i++)
		assert_int_equal(kvf__segalloc_alloc_tagged(
					 a, 256, (i + 1) << 32 | 0xabcd, &off),
				 KVF_OK);
	assert_true((kvf__segalloc_meta_bytes(a) - before) * 2 < N * 9);
	assert_int_equal(kvf__segalloc_used_blocks(a, &b, &nb), KVF_OK);
	assert_int_equal(nb, FIRST + N);
	for (size_t i = 0; i < nb; i++) {
		assert_int_equal(b[i].tag >> 32, i + 1);
		assert_true((b[i].tag & 0xffffffff) == 0 ||
			    (b[i].tag & 0xffffffff) == 0xabcd);
		in_slab += (b[i].tag & 0xffffffff) == 0;
	}
	assert_true(in_slab >= N);
	free(b);
	kvf__segalloc_destroy(a);
}

static int u64_cmp(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;

	return (a > b) - (a < b);
}

/*
 * Slots freed across many slabs (the slabs of a stretch emptied whole, so
 * they leave the middle of their class's partial array) come back to
 * runs of allocs (kvf__segalloc_try_alloc_many(), one slab taken after
 * another), every one of them: no slab is carved while one has a free
 * slot. The checked build verifies the partial array after each change.
 */
static void test_slab_partials_come_back(void **state)
{
	enum { N = 4096, RUN = 48 };
	uint64_t *off = calloc(N, sizeof(*off));
	uint64_t *freed = calloc(N, sizeof(*freed));
	uint64_t *got = calloc(N, sizeof(*got));
	uint64_t tags[RUN], seed = 0x5a1b5a1bULL, slabs;
	bool *in_slab = calloc(N, sizeof(*in_slab));
	struct kvf__segalloc_block *b;
	struct kvf__segalloc *a;
	size_t nf = 0, ng = 0, nall = 0, nb;

	(void)state;
	assert_non_null(off);
	assert_non_null(freed);
	assert_non_null(got);
	assert_non_null(in_slab);
	assert_int_equal(kvf__segalloc_create(64 * MiB, 64, &a), KVF_OK);
	for (size_t i = 0; i < N; i++)
		assert_int_equal(kvf__segalloc_alloc_tagged(
					 a, 1000, (i + 1) << 32 | 1, &off[i]),
				 KVF_OK);
	slabs = kvf__segalloc_nr_slabs(a, NULL);
	assert_true(slabs >= 8);
	/* A slab keeps a tag's high half only: in_slab[] says which. */
	assert_int_equal(kvf__segalloc_used_blocks(a, &b, &nb), KVF_OK);
	assert_int_equal(nb, N);
	for (size_t i = 0; i < nb; i++)
		in_slab[(b[i].tag >> 32) - 1] = !(b[i].tag & 0xffffffff);
	free(b);
	/*
	 * One slab object in five at random (a plain block freed could
	 * merge with free space), and every object of a stretch.
	 */
	for (size_t i = 0; i < N; i++) {
		bool stretch = i >= N / 2 && i < N / 2 + 200;

		if (stretch || (in_slab[i] && rng_next(&seed) % 5 == 0)) {
			kvf__segalloc_free(a, off[i], 1000);
			nall++;
			if (!stretch)
				freed[nf++] = off[i];
		}
	}
	/* The stretch emptied slabs: they went back to the tree. */
	assert_true(kvf__segalloc_nr_slabs(a, NULL) < slabs);
	while (ng < nall) {
		uint32_t n = nall - ng < RUN ? (uint32_t)(nall - ng) : RUN;
		int k;

		for (uint32_t i = 0; i < n; i++)
			tags[i] = ng + i + 1;
		k = kvf__segalloc_try_alloc_many(a, 1000, n, tags, got + ng);
		assert_true(k > 0);
		ng += (size_t)k;
	}
	/* Every slot freed outside the stretch came back. */
	qsort(freed, nf, sizeof(*freed), u64_cmp);
	qsort(got, ng, sizeof(*got), u64_cmp);
	for (size_t i = 0, j = 0; i < nf; i++) {
		while (j < ng && got[j] < freed[i])
			j++;
		assert_true(j < ng && got[j] == freed[i]);
	}
	assert_int_equal(kvf__segalloc_nr_allocs(a), N);
	kvf__segalloc_destroy(a);
	free(off);
	free(freed);
	free(got);
	free(in_slab);
}

static uint64_t slab_obj;

static void free_slab_inside(struct kvf__segalloc *a)
{
	kvf__segalloc_free(a, slab_obj + 64, 900);
}

static void free_slab_wrong_size(struct kvf__segalloc *a)
{
	kvf__segalloc_free(a, slab_obj, 2000);
}

static void free_slab_twice(struct kvf__segalloc *a)
{
	kvf__segalloc_free(a, slab_obj, 900);
	kvf__segalloc_free(a, slab_obj, 900);
}

/*
 * A batch with a slab's object and an offset far past the segment's end:
 * the batch's walk ahead must not read a directory cell for it (a cell
 * thousands of directories away faults), and the free dies as any free
 * of a range the segment does not hold.
 */
static void free_many_beyond(struct kvf__segalloc *a)
{
	const struct kvf__segalloc_range r[2] = {
		{ slab_obj, 900 },
		{ kvf__segalloc_capacity(a) << 16, 900 },
	};

	kvf__segalloc_free_many(a, r, 2);
}

/*
 * A slab's object freed off its start, with another size, or twice, or a
 * batch of frees with a range past the segment's end, is a broken
 * invariant (abort), as for a block of the tree; journal replay's
 * release says so and changes nothing. A reserve of exactly a free slot
 * takes it; one across slots finds no space.
 */
static void test_slab_bad_frees(void **state)
{
	struct kvf__segalloc *a;
	uint64_t off[128], free_before;

	(void)state;
	assert_int_equal(kvf__segalloc_create(16 * MiB, 64, &a), KVF_OK);
	/* Slabs from the 64th alloc of the size on (SLAB_AFTER). */
	for (int i = 0; i < 128; i++)
		assert_int_equal(kvf__segalloc_alloc_tagged(a, 900, 7, &off[i]),
				 KVF_OK);
	assert_true(kvf__segalloc_nr_slabs(a, NULL) >= 1);
	slab_obj = off[100];
	expect_death(free_slab_inside, a);
	expect_death(free_slab_wrong_size, a);
	expect_death(free_slab_twice, a);
	expect_death(free_many_beyond, a);
	free_before = kvf__segalloc_free_bytes(a);
	assert_int_equal(kvf__segalloc_release(a, slab_obj + 64, 900),
			 KVF_ERR_INVALID_PARAMS);
	assert_int_equal(kvf__segalloc_release(a, slab_obj, 2000),
			 KVF_ERR_INVALID_PARAMS);
	assert_int_equal(kvf__segalloc_free_bytes(a), free_before);
	assert_int_equal(kvf__segalloc_release(a, slab_obj, 900), KVF_OK);
	assert_int_equal(kvf__segalloc_free_bytes(a), free_before + 960);
	assert_int_equal(kvf__segalloc_reserve_tagged(a, slab_obj, 2000, 9),
			 KVF_ERR_NO_SPACE);
	assert_int_equal(kvf__segalloc_reserve_tagged(a, slab_obj, 900, 9),
			 KVF_OK);
	assert_int_equal(kvf__segalloc_free_bytes(a), free_before);
	kvf__segalloc_destroy(a);
}

/*
 * With the tree full, a slab's free slot still serves a request of
 * another size: the slab is broken up (its objects become plain blocks of
 * the tree with their tags, its free slot free space), and the request
 * takes that space. The broken slab's objects are then freed through the
 * tree (directory misses), the other slabs' through their slabs.
 */
static void test_slab_broken_under_pressure(void **state)
{
	struct kvf__segalloc *a;
	struct live *lv = calloc(16384 + 1, sizeof(*lv));
	uint64_t o, n = 0, h, got, slabs;

	(void)state;
	assert_non_null(lv);
	assert_int_equal(kvf__segalloc_create(16 * MiB, 64, &a), KVF_OK);
	/* Fill with 1 KiB objects (slabs of four), then free one slot. */
	while (kvf__segalloc_alloc_tagged(a, 1024, n + 1, &o) == KVF_OK) {
		lv[n] = (struct live){ o, 1024, 1024, n + 1 };
		n++;
	}
	assert_int_equal(n, 16384);
	slabs = kvf__segalloc_nr_slabs(a, NULL);
	assert_true(slabs >= 1);
	assert_int_equal(slabs_broken(a), 0);
	h = n / 2;
	o = lv[h].off;
	kvf__segalloc_free(a, o, 1024);
	lv[h] = lv[--n];
	assert_int_equal(kvf__segalloc_largest_free(a), 1024);
	assert_int_equal(kvf__segalloc_alloc_tagged(a, 500, 99999, &got),
			 KVF_OK);
	assert_int_equal(got, o);
	lv[n++] = (struct live){ got, 512, 500, 99999 };
	assert_int_equal(slabs_broken(a), 1);
	assert_int_equal(kvf__segalloc_nr_slabs(a, NULL), slabs - 1);
	assert_int_equal(kvf__segalloc_free_bytes(a), 512);
	assert_int_equal(kvf__segalloc_largest_free(a), 512);
	assert_int_equal(kvf__segalloc_nr_allocs(a), n);
	check_blocks(a, lv, n);
	/* Nothing left to break: no space, nothing changed. */
	assert_int_equal(kvf__segalloc_alloc_tagged(a, 1000, 5, &got),
			 KVF_ERR_NO_SPACE);
	assert_int_equal(kvf__segalloc_free_bytes(a), 512);
	assert_int_equal(kvf__segalloc_nr_allocs(a), n);
	while (n--)
		kvf__segalloc_free(a, lv[n].off, lv[n].asked);
	assert_int_equal(kvf__segalloc_nr_slabs(a, NULL), 0);
	assert_int_equal(kvf__segalloc_nr_allocs(a), 0);
	assert_int_equal(kvf__segalloc_largest_free(a), 16 * MiB);
	kvf__segalloc_destroy(a);
	free(lv);
}

/*
 * kvf__segalloc_try_alloc_many() gives a run of blocks as single allocs
 * would, and stops where a caller checking the published largest region
 * before each alloc would stop: here the run's first block takes the
 * one free 1536-byte block, and the second is not made by breaking up
 * the slab whose two adjacent free 1 KiB slots would hold it (the
 * published figure, 1 KiB, says it does not fit).
 */
static void test_alloc_many_stops_at_published(void **state)
{
	struct kvf__segalloc *a;
	struct live *lv = calloc(16384, sizeof(*lv));
	uint64_t o, p, n = 0, h, tags[3] = { 7, 8, 9 }, offs[3];

	(void)state;
	assert_non_null(lv);
	assert_int_equal(kvf__segalloc_create(16 * MiB, 64, &a), KVF_OK);
	assert_int_equal(kvf__segalloc_try_alloc_many(a, 0, 1, tags, offs),
			 KVF_ERR_INVALID_PARAMS);
	assert_int_equal(kvf__segalloc_try_alloc_many(a, 64, 0, tags, offs),
			 0);
	assert_int_equal(kvf__segalloc_alloc_tagged(a, 1536, 1, &p), KVF_OK);
	while (kvf__segalloc_alloc_tagged(a, 1024, n + 2, &o) == KVF_OK) {
		lv[n] = (struct live){ o, 1024, 1024, n + 2 };
		n++;
	}
	assert_true(kvf__segalloc_nr_slabs(a, NULL) >= 1);
	h = n / 2;
	assert_int_equal(lv[h + 1].off, lv[h].off + 1024);
	kvf__segalloc_free(a, p, 1536);
	kvf__segalloc_free(a, lv[h].off, 1024);
	kvf__segalloc_free(a, lv[h + 1].off, 1024);
	/* Slab slots: the pair did not merge into a 2 KiB free block. */
	assert_int_equal(kvf__segalloc_largest_free(a), 1536);
	assert_int_equal(kvf__segalloc_try_alloc_many(a, 1536, 3, tags, offs),
			 1);
	assert_int_equal(offs[0], p);
	assert_int_equal(slabs_broken(a), 0);
	assert_int_equal(kvf__segalloc_largest_free(a), 1024);
	/* A single alloc of it, not checked first, breaks the slab up. */
	assert_int_equal(kvf__segalloc_alloc_tagged(a, 1536, 10, &o), KVF_OK);
	assert_int_equal(o, lv[h].off);
	assert_int_equal(slabs_broken(a), 1);
	kvf__segalloc_destroy(a);
	free(lv);
}

/*
 * A size that loses its slot (here: the reuse lists turned off) breaks
 * its partial slabs up at once; its full slabs drain, and one that gets a
 * free slot is broken up like any other when the tree runs out. In the
 * end the segment fills down to no free byte with the smallest blocks,
 * every slab gone.
 */
static void test_slab_orphaned(void **state)
{
	struct kvf__segalloc *a;
	struct live *lv = calloc(300000, sizeof(*lv));
	uint64_t o, n = 0, slabs, broken;

	(void)state;
	assert_non_null(lv);
	assert_int_equal(kvf__segalloc_create(16 * MiB, 64, &a), KVF_OK);
	/* Slabs from the 64th alloc of the size on (SLAB_AFTER). */
	for (; n < 160; n++) {
		assert_int_equal(kvf__segalloc_alloc_tagged(a, 1000, n + 1, &o),
				 KVF_OK);
		lv[n] = (struct live){ o, 1024, 1000, n + 1 };
	}
	slabs = kvf__segalloc_nr_slabs(a, NULL);
	assert_true(slabs >= 4);
	/* One slot of a middle slab free: that slab is partial. */
	kvf__segalloc_free(a, lv[130].off, lv[130].asked);
	lv[130] = lv[--n];
	kvf__segalloc_set_reuse_limit(a, 0);
	broken = slabs_broken(a);
	assert_true(broken >= 1);
	assert_int_equal(kvf__segalloc_nr_slabs(a, NULL), slabs - broken);
	check_blocks(a, lv, n);
	/* A slot of a full one freed: it has no class now (stray). */
	kvf__segalloc_free(a, lv[100].off, lv[100].asked);
	lv[100] = lv[--n];
	check_blocks(a, lv, n);
	/* Fill the rest of the segment, large blocks then small ones. */
	for (uint64_t size = 64 * KiB; size >= 64; size /= 4)
		while (kvf__segalloc_alloc_tagged(a, size, 7, &o) == KVF_OK) {
			lv[n] = (struct live){ o, size, size, 7 };
			n++;
		}
	assert_true(slabs_broken(a) > broken);
	assert_int_equal(kvf__segalloc_free_bytes(a), 0);
	assert_int_equal(kvf__segalloc_nr_allocs(a), n);
	check_blocks(a, lv, n);
	while (n--)
		kvf__segalloc_free(a, lv[n].off, lv[n].asked);
	assert_int_equal(kvf__segalloc_nr_slabs(a, NULL), 0);
	assert_int_equal(kvf__segalloc_largest_free(a), 16 * MiB);
	kvf__segalloc_destroy(a);
	free(lv);
}

/* The longest run of free granules of the model, in bytes. */
static uint64_t bm_longest(const struct bitmap_model *m)
{
	uint64_t run = 0, best = 0;

	for (uint64_t i = 0; i < m->granules; i++) {
		run = m->used[i] ? 0 : run + 1;
		best = run > best ? run : best;
	}
	return best * m->gran;
}

/*
 * Slabs under churn at the edge of full, against the bitmap model: two
 * repeated sizes (slabs) and scattered ones (plain blocks), the segment
 * filled until allocations fail, then a few objects freed, again and
 * again. Whenever an allocation finds no space, the model has no free run
 * that long: no free slot of a slab is kept from a request the space
 * could serve (slabs broken up under pressure give it back). Free bytes,
 * object count and the used blocks with their tags match the model
 * throughout; at the end every slab is back in the tree.
 */
static void test_slab_pressure_churn(void **state)
{
	const uint64_t gran = 64, seg = 16 * MiB;
	const uint64_t hot[2] = { 500, 1000 };
	uint64_t seed = 0x9e55a7e5ULL, fails = 0;
	struct bitmap_model m;
	struct live *lv;
	struct kvf__segalloc *a = model_new(&m, &lv, seg, gran);
	size_t n = 0;

	(void)state;
	for (int op = 0; op < 40000; op++) {
		uint64_t x = rng_next(&seed), size, off, tag = x | 1;

		size = x % 4 ? hot[(x >> 4) & 1] : rng_range(&seed, 1, 3000);
		if (kvf__segalloc_alloc_tagged(a, size, tag, &off)) {
			assert_true(bm_longest(&m) < round_up(size, gran));
			fails++;
			/* Make a little room: a few objects at random. */
			for (int k = 0; k < 6 && n; k++) {
				size_t v = rng_range(&seed, 0, n - 1);

				bm_mark(&m, lv[v].off, lv[v].size, 0);
				kvf__segalloc_free(a, lv[v].off, lv[v].asked);
				lv[v] = lv[--n];
			}
			continue;
		}
		bm_mark(&m, off, round_up(size, gran), 1);
		lv[n++] = (struct live){ off, round_up(size, gran), size, tag };
		if (op % 2048 == 0) {
			bm_check_free(&m, a);
			assert_int_equal(kvf__segalloc_nr_allocs(a), n);
			check_blocks(a, lv, n);
		}
	}
	assert_true(fails > 100);
	assert_true(slabs_broken(a) > 0);
	check_blocks(a, lv, n);
	model_end(a, &m, lv, n);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_invalid),
		cmocka_unit_test(test_alignment),
		cmocka_unit_test(test_reserve),
		cmocka_unit_test(test_coalesce_full),
		cmocka_unit_test(test_meta_bytes),
		cmocka_unit_test(test_exact_random),
		cmocka_unit_test(test_exact_random_deep),
		cmocka_unit_test(test_exact_random_reuse),
		cmocka_unit_test(test_exact_random_reuse_sizes),
		cmocka_unit_test(test_largest_taken),
		cmocka_unit_test(test_largest_taken_deep),
		cmocka_unit_test(test_no_overlap_large),
		cmocka_unit_test(test_tib),
		cmocka_unit_test(test_try_alloc),
		cmocka_unit_test(test_bad_free_dies),
		cmocka_unit_test(test_free_many_matches_single),
		cmocka_unit_test(test_free_many_matches_single_deep),
		cmocka_unit_test(test_free_many_runs_match_single_with_lists),
		cmocka_unit_test(test_free_many_bad_dies),
		cmocka_unit_test(test_reuse_lists),
		cmocka_unit_test(test_take_parked_many),
		cmocka_unit_test(test_reuse_claims),
		cmocka_unit_test(test_parked_leaf_hints),
		cmocka_unit_test(test_reuse_matches_tree),
		cmocka_unit_test(test_slab_churn),
		cmocka_unit_test(test_slab_empty_returns),
		cmocka_unit_test(test_slab_tag_bytes),
		cmocka_unit_test(test_slab_partials_come_back),
		cmocka_unit_test(test_slab_bad_frees),
		cmocka_unit_test(test_slab_broken_under_pressure),
		cmocka_unit_test(test_alloc_many_stops_at_published),
		cmocka_unit_test(test_slab_pressure_churn),
		cmocka_unit_test(test_slab_orphaned),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
