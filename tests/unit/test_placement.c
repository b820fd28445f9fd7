/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_placement.c - replica placement over arrays of
 * allocators: distinct segments, preferred segments, failures that leave
 * nothing allocated, and a fragmented pool where the free ratio lies.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include <kvforge/status.h>

#include "alloc/placement.h"
#include "base/xorshift.h"

#define KiB (1ULL << 10)
#define MiB (1ULL << 20)
#define MAX_SEGS 16

static const enum kvf_placement_strategy all[] = {
	KVF_PLACEMENT_RANDOM,
	KVF_PLACEMENT_FREE_RATIO_FIRST,
	KVF_PLACEMENT_FRAGMENTATION_AWARE,
};

struct pool {
	struct kvf__segalloc *seg[MAX_SEGS];
	uint32_t n;
};

static void pool_init(struct pool *p, uint32_t n, uint64_t size)
{
	p->n = n;
	for (uint32_t i = 0; i < n; i++)
		assert_int_equal(kvf__segalloc_create(size, 64, &p->seg[i]),
				 KVF_OK);
}

static void pool_fini(struct pool *p)
{
	for (uint32_t i = 0; i < p->n; i++)
		kvf__segalloc_destroy(p->seg[i]);
}

static uint64_t pool_free(const struct pool *p)
{
	uint64_t sum = 0;

	for (uint32_t i = 0; i < p->n; i++)
		sum += kvf__segalloc_free_bytes(p->seg[i]);
	return sum;
}

static uint32_t fitting(const struct pool *p, uint64_t size)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < p->n; i++)
		n += kvf__segalloc_may_fit(p->seg[i], size);
	return n;
}

static void assert_distinct(const struct kvf__place_result *res)
{
	for (uint32_t i = 0; i < res->count; i++)
		for (uint32_t j = i + 1; j < res->count; j++)
			assert_int_not_equal(res->seg[i], res->seg[j]);
}

static void test_distinct_until_full(void **state)
{
	(void)state;
	for (size_t s = 0; s < sizeof(all) / sizeof(all[0]); s++) {
		struct pool p;
		struct kvf__place_request req = { .size = 100 * KiB,
						  .replica_num = 3 };
		struct kvf__place_result res;
		struct kvf__placer rng = { .rng = 77 + s };
		uint64_t before;
		int rc, placed = 0;

		pool_init(&p, 5, MiB);
		for (;;) {
			before = pool_free(&p);
			rc = kvf__place(all[s], p.seg, p.n, &req, &rng, &res);
			if (rc != KVF_OK)
				break;
			assert_int_equal(res.count, 3);
			assert_distinct(&res);
			placed++;
		}
		assert_int_equal(rc, KVF_ERR_NO_SPACE);
		assert_int_equal(res.count, 0);
		assert_int_equal(pool_free(&p), before);
		/* NO_SPACE only when fewer than 3 segments could fit. */
		assert_true(fitting(&p, req.size) < 3);
		assert_true(placed >= 10);
		pool_fini(&p);
	}
}

static void test_preferred(void **state)
{
	(void)state;
	for (size_t s = 0; s < sizeof(all) / sizeof(all[0]); s++) {
		struct pool p;
		const uint32_t pref[] = { 5, 2, 99 };
		struct kvf__place_request req = { .size = 256 * KiB,
						  .replica_num = 2,
						  .preferred = pref,
						  .nr_preferred = 3 };
		struct kvf__place_result res;
		struct kvf__placer rng = { .rng = 5 };

		pool_init(&p, 8, MiB);
		for (int i = 0; i < 4; i++) {
			assert_int_equal(kvf__place(all[s], p.seg, p.n, &req,
						    &rng, &res),
					 KVF_OK);
			assert_int_equal(res.seg[0], 5);
			assert_int_equal(res.seg[1], 2);
		}
		/* 5 and 2 are full now: the strategy picks elsewhere. */
		assert_int_equal(kvf__place(all[s], p.seg, p.n, &req, &rng,
					    &res),
				 KVF_OK);
		assert_int_not_equal(res.seg[0], 5);
		assert_int_not_equal(res.seg[0], 2);
		assert_int_not_equal(res.seg[1], 5);
		assert_int_not_equal(res.seg[1], 2);
		assert_distinct(&res);
		/* A preferred segment is not reused for a second replica. */
		req.nr_preferred = 1;
		req.preferred = &pref[0];
		kvf__segalloc_free(p.seg[5], 0, 256 * KiB);
		kvf__segalloc_free(p.seg[5], 256 * KiB, 256 * KiB);
		assert_int_equal(kvf__place(all[s], p.seg, p.n, &req, &rng,
					    &res),
				 KVF_OK);
		assert_int_equal(res.seg[0], 5);
		assert_int_not_equal(res.seg[1], 5);
		pool_fini(&p);
	}
}

static void test_not_enough_and_invalid(void **state)
{
	struct pool p;
	struct kvf__place_request req = { .size = 4096, .replica_num = 3 };
	struct kvf__place_result res;
	struct kvf__placer rng = { .rng = 1 };
	struct kvf__placer zero = { .rng = 0, .lane = 0, .lanes = 0 };

	(void)state;
	pool_init(&p, 2, MiB);
	assert_int_equal(kvf__place(KVF_PLACEMENT_FRAGMENTATION_AWARE, p.seg,
				    p.n, &req, &rng, &res),
			 KVF_ERR_NOT_ENOUGH_SEGMENTS);
	req.replica_num = 0;
	assert_int_equal(kvf__place(KVF_PLACEMENT_RANDOM, p.seg, p.n, &req,
				    &rng, &res),
			 KVF_ERR_INVALID_PARAMS);
	req.replica_num = KVF_MAX_REPLICAS + 1;
	assert_int_equal(kvf__place(KVF_PLACEMENT_RANDOM, p.seg, p.n, &req,
				    &rng, &res),
			 KVF_ERR_INVALID_PARAMS);
	req.replica_num = 1;
	req.size = 0;
	assert_int_equal(kvf__place(KVF_PLACEMENT_RANDOM, p.seg, p.n, &req,
				    &rng, &res),
			 KVF_ERR_INVALID_PARAMS);
	req.size = 64;
	assert_int_equal(kvf__place(KVF_PLACEMENT_RANDOM, p.seg, p.n, &req,
				    &zero, &res),
			 KVF_ERR_INVALID_PARAMS);
	assert_int_equal(kvf__place(KVF_PLACEMENT_RANDOM, p.seg, 0, &req, &rng,
				    &res),
			 KVF_ERR_NOT_ENOUGH_SEGMENTS);
	/* Bigger than any segment: a parameter error, not pressure. */
	req.size = 2 * MiB;
	assert_int_equal(kvf__place(KVF_PLACEMENT_FRAGMENTATION_AWARE, p.seg,
				    p.n, &req, &rng, &res),
			 KVF_ERR_INVALID_PARAMS);
	pool_fini(&p);
}

/* Two segments have room, the third is full: 3 replicas cannot fit. */
static void test_no_space_leaves_nothing(void **state)
{
	(void)state;
	for (size_t s = 0; s < sizeof(all) / sizeof(all[0]); s++) {
		struct pool p;
		struct kvf__place_request req = { .size = 64 * KiB,
						  .replica_num = 3 };
		struct kvf__place_result res;
		struct kvf__placer rng = { .rng = 3 + s };
		uint64_t off;

		pool_init(&p, 3, MiB);
		assert_int_equal(
			kvf__segalloc_alloc_tagged(p.seg[1], MiB, 1, &off),
			KVF_OK);
		for (int i = 0; i < 20; i++) {
			assert_int_equal(kvf__place(all[s], p.seg, p.n, &req,
						    &rng, &res),
					 KVF_ERR_NO_SPACE);
			assert_int_equal(pool_free(&p), 2 * MiB);
		}
		/* Two replicas do fit. */
		req.replica_num = 2;
		assert_int_equal(kvf__place(all[s], p.seg, p.n, &req, &rng,
					    &res),
				 KVF_OK);
		assert_distinct(&res);
		assert_int_not_equal(res.seg[0], 1);
		assert_int_not_equal(res.seg[1], 1);
		kvf__place_undo(p.seg, &req, &res);
		assert_int_equal(pool_free(&p), 2 * MiB);
		pool_fini(&p);
	}
}

/* Unmounted slots (NULL) are never chosen. */
static void test_null_segments(void **state)
{
	struct kvf__segalloc *segs[6] = { 0 };
	struct kvf__place_request req = { .size = 4096, .replica_num = 2 };
	struct kvf__place_result res;
	struct kvf__placer rng = { .rng = 11 };

	(void)state;
	assert_int_equal(kvf__segalloc_create(MiB, 64, &segs[1]), KVF_OK);
	assert_int_equal(kvf__segalloc_create(MiB, 64, &segs[4]), KVF_OK);
	for (size_t s = 0; s < sizeof(all) / sizeof(all[0]); s++) {
		for (int i = 0; i < 10; i++) {
			assert_int_equal(kvf__place(all[s], segs, 6, &req,
						    &rng, &res),
					 KVF_OK);
			assert_true((res.seg[0] == 1 && res.seg[1] == 4) ||
				    (res.seg[0] == 4 && res.seg[1] == 1));
			kvf__place_undo(segs, &req, &res);
		}
		/* Two segments can never hold three replicas. */
		req.replica_num = 3;
		assert_int_equal(kvf__place(all[s], segs, 6, &req, &rng, &res),
				 KVF_ERR_INVALID_PARAMS);
		req.replica_num = 2;
	}
	kvf__segalloc_destroy(segs[1]);
	kvf__segalloc_destroy(segs[4]);
}

/*
 * Segments 0-1 are half free but shredded into 64 KiB holes; segments 2-3
 * are 7/8 full with one contiguous 1 MiB hole. Requests of 256 KiB only
 * fit in 2-3, which have the lowest free ratio.
 */
static void fragmented_pool(struct pool *p)
{
	uint64_t off;

	pool_init(p, 4, 8 * MiB);
	for (uint32_t s = 0; s < 2; s++) {
		for (int i = 0; i < 128; i++) {
			assert_int_equal(kvf__segalloc_alloc_tagged(
						 p->seg[s], 64 * KiB, 1, &off),
					 KVF_OK);
			assert_int_equal(off, i * 64 * KiB);
		}
		for (int i = 0; i < 128; i += 2)
			kvf__segalloc_free(p->seg[s], i * 64 * KiB, 64 * KiB);
		assert_int_equal(kvf__segalloc_free_bytes(p->seg[s]), 4 * MiB);
		assert_int_equal(kvf__segalloc_largest_free(p->seg[s]),
				 64 * KiB);
	}
	for (uint32_t s = 2; s < 4; s++)
		assert_int_equal(
			kvf__segalloc_alloc_tagged(p->seg[s], 7 * MiB, 1, &off),
			KVF_OK);
}

static void test_free_ratio_lies(void **state)
{
	struct kvf__place_request req = { .size = 256 * KiB,
					  .replica_num = 1 };
	struct kvf__place_result res;
	struct pool p;
	struct kvf__placer rng = { .rng = 42 };

	(void)state;
	fragmented_pool(&p);
	for (int i = 0; i < 8; i++) {
		assert_int_equal(kvf__place(KVF_PLACEMENT_FRAGMENTATION_AWARE,
					    p.seg, p.n, &req, &rng, &res),
				 KVF_OK);
		assert_true(res.seg[0] >= 2);
		assert_true(res.first_choice);
		assert_int_equal(res.fallbacks, 0);
	}
	assert_int_equal(kvf__place(KVF_PLACEMENT_FRAGMENTATION_AWARE, p.seg,
				    p.n, &req, &rng, &res),
			 KVF_ERR_NO_SPACE);
	pool_fini(&p);

	fragmented_pool(&p);
	for (int i = 0; i < 8; i++) {
		assert_int_equal(kvf__place(KVF_PLACEMENT_FREE_RATIO_FIRST,
					    p.seg, p.n, &req, &rng, &res),
				 KVF_OK);
		assert_true(res.seg[0] >= 2);
		assert_false(res.first_choice);
		assert_int_equal(res.fallbacks, 1);
	}
	pool_fini(&p);
}

/* Best fit across segments: the tightest region that fits is chosen. */
static void test_best_fit(void **state)
{
	struct kvf__place_request req = { .size = 300 * KiB,
					  .replica_num = 2 };
	struct kvf__place_result res;
	struct pool p;
	struct kvf__placer rng = { .rng = 9 };
	uint64_t off;

	(void)state;
	pool_init(&p, 6, 4 * MiB);
	/* Largest free: seg i has 4 MiB - (i + 1) * 512 KiB. */
	for (uint32_t s = 0; s < 6; s++)
		assert_int_equal(kvf__segalloc_alloc_tagged(p.seg[s],
							    (s + 1) * 512 * KiB,
							    1, &off),
				 KVF_OK);
	assert_int_equal(kvf__place(KVF_PLACEMENT_FRAGMENTATION_AWARE, p.seg,
				    p.n, &req, &rng, &res),
			 KVF_OK);
	assert_int_equal(res.seg[0], 5);
	assert_int_equal(res.seg[1], 4);
	assert_true(res.first_choice);
	pool_fini(&p);
}

/*
 * A segment whose largest region is exactly the request is the best fit
 * (the candidate pass stops there): it wins over near-exact and larger
 * ones wherever the random start puts it, and ties go either way.
 */
static void test_exact_fit(void **state)
{
	static const uint64_t tail[8] = {
		2 * MiB, MiB / 2, MiB, 3 * MiB, MiB + 64, MiB, MiB / 4, 2 * MiB,
	};
	struct kvf__place_request req = { .size = MiB, .replica_num = 1 };
	struct kvf__place_result res;
	uint32_t hits[8] = { 0 };
	struct pool p;
	struct kvf__placer rng = { .rng = 77 };
	uint64_t off;

	(void)state;
	pool_init(&p, 8, 4 * MiB);
	for (uint32_t s = 0; s < 8; s++)
		assert_int_equal(kvf__segalloc_alloc_tagged(
					 p.seg[s], 4 * MiB - tail[s], 1, &off),
				 KVF_OK);
	for (int k = 0; k < 400; k++) {
		assert_int_equal(kvf__place(KVF_PLACEMENT_FRAGMENTATION_AWARE,
					    p.seg, p.n, &req, &rng, &res),
				 KVF_OK);
		assert_true(res.first_choice);
		assert_int_equal(tail[res.seg[0]], MiB);
		hits[res.seg[0]]++;
		kvf__place_undo(p.seg, &req, &res);
		/* Else the placer goes back to the segment it remembers. */
		kvf__placer_forget(&rng);
	}
	/* The first exact segment met from the random start: both win. */
	assert_true(hits[2] > 0 && hits[5] > 0);
	pool_fini(&p);
}

/*
 * The smallest of @largest[0..@n) that holds @size, leaving out the
 * segments of the first @r replicas of @res: what best fit chooses when
 * its window sees every segment.
 */
static uint64_t tightest(const uint64_t *largest, uint32_t n, uint64_t size,
			 const struct kvf__place_result *res, uint32_t r)
{
	uint64_t best = UINT64_MAX;

	for (uint32_t i = 0; i < n; i++) {
		bool skip = false;

		for (uint32_t q = 0; q < r; q++)
			skip |= res->seg[q] == i;
		if (!skip && largest[i] >= size && largest[i] < best)
			best = largest[i];
	}
	return best;
}

/*
 * A placer remembers best fit's last choice per size and replica and
 * goes back there while it fits: on random sequences of three sizes and
 * one or two replicas, with a quarter of the objects freed again (each
 * free followed by kvf__placer_forget()), every replica still lands in a
 * segment whose largest region was the tightest that held it, and the
 * memo is used. Eight segments, so best fit's window sees every one.
 */
static void test_memo_is_best_fit(void **state)
{
	static const uint64_t sizes[3] = { 640 * KiB, MiB + 128 * KiB,
					   64 * KiB };
	struct kvf__place_result res;
	struct kvf__placer pl;
	uint64_t rng = 0x2545f4914f6cdd1dULL, before[MAX_SEGS];
	struct placed {
		struct kvf__place_request req;
		struct kvf__place_result res;
	} *live = calloc(3000, sizeof(*live));
	uint32_t remembered = 0;
	size_t nr_live;
	struct pool p;

	(void)state;
	assert_non_null(live);
	for (int round = 0; round < 4; round++) {
		nr_live = 0;
		pool_init(&p, 8, 256 * MiB);
		kvf__placer_init(&pl, 5, (uint64_t)round);
		for (int k = 0; k < 3000; k++) {
			struct kvf__place_request req = {
				.size = sizes[kvf__xorshift64s(&rng) % 3],
				.replica_num = 1 + kvf__xorshift64s(&rng) % 2,
			};

			if (nr_live && kvf__xorshift64s(&rng) % 4 == 0) {
				/* Free an earlier object's replicas. */
				size_t v = kvf__xorshift64s(&rng) % nr_live;

				kvf__place_undo(p.seg, &live[v].req,
						&live[v].res);
				live[v] = live[--nr_live];
				kvf__placer_forget(&pl);
			}
			for (uint32_t i = 0; i < p.n; i++)
				before[i] = kvf__segalloc_largest_free(p.seg[i]);
			for (uint32_t m = 0; m < KVF__PLACER_MEMO; m++)
				remembered += pl.memo[m].size == req.size;
			if (kvf__place(KVF_PLACEMENT_FRAGMENTATION_AWARE,
				       p.seg, p.n, &req, &pl, &res) != KVF_OK)
				break;
			live[nr_live++] = (struct placed){ req, res };
			/* Each replica's segment is another: the others' state
			 * before the call is the one best fit saw. */
			for (uint32_t r = 0; r < res.count; r++)
				assert_int_equal(before[res.seg[r]],
						 tightest(before, p.n, req.size,
							  &res, r));
		}
		pool_fini(&p);
	}
	free(live);
	assert_true(remembered > 1000);
}

/*
 * A run (kvf__place_run) places what kvf__place() one object after
 * another would: two pools built alike, two placers on the same stream,
 * runs of one size (1 to 40 objects, three sizes, so runs of one size
 * follow runs of another and the memo's drops matter) with some objects
 * freed between runs (each free followed by kvf__placer_forget() in
 * both), until a run stops short; every object of a run lands where the
 * single placements put theirs, at the same offset. Small segments, so
 * runs cross from a full segment into the next best fit, and sizes the
 * allocator gives slabs to.
 */
static void test_run_places_as_singles(void **state)
{
	static const uint64_t sizes[3] = { 640 * KiB, MiB + 128 * KiB,
					   64 * KiB };
	struct kvf__placer one, run;
	uint64_t rng = 0x9e3779b97f4a7c15ULL;
	struct pool a, b;
	struct obj {
		uint32_t seg;
		uint64_t off, size;
	} *live = calloc(4096, sizeof(*live));
	uint32_t nr_live = 0, runs = 0, crossed = 0;

	(void)state;
	assert_non_null(live);
	pool_init(&a, 8, 128 * MiB);
	pool_init(&b, 8, 128 * MiB);
	kvf__placer_init(&one, 9, 1);
	kvf__placer_init(&run, 9, 1);
	for (;;) {
		uint64_t size = sizes[kvf__xorshift64s(&rng) % 3];
		uint32_t n = 1 + kvf__xorshift64s(&rng) % 40, got;
		uint64_t tags[40], off[40];
		uint32_t seg[40];

		if (nr_live > 8 && kvf__xorshift64s(&rng) % 3 == 0) {
			for (int f = 0; f < 4; f++) {
				uint32_t v = kvf__xorshift64s(&rng) % nr_live;

				kvf__segalloc_free(a.seg[live[v].seg],
						   live[v].off, live[v].size);
				kvf__segalloc_free(b.seg[live[v].seg],
						   live[v].off, live[v].size);
				live[v] = live[--nr_live];
			}
			kvf__placer_forget(&one);
			kvf__placer_forget(&run);
		}
		for (uint32_t k = 0; k < n; k++)
			tags[k] = kvf__xorshift64s(&rng);
		got = kvf__place_run(KVF_PLACEMENT_FRAGMENTATION_AWARE, b.seg,
				     b.n, size, n, tags, &run, seg, off);
		assert_true(got <= n);
		for (uint32_t k = 0; k < got; k++) {
			struct kvf__place_request req = { .size = size,
							  .replica_num = 1,
							  .tag = tags[k] };
			struct kvf__place_result res;

			assert_int_equal(kvf__place(KVF_PLACEMENT_FRAGMENTATION_AWARE,
						    a.seg, a.n, &req, &one,
						    &res),
					 KVF_OK);
			assert_int_equal(res.seg[0], seg[k]);
			assert_int_equal(res.offset[0], off[k]);
			crossed += k && seg[k] != seg[k - 1];
			assert_true(nr_live < 4096);
			live[nr_live++] = (struct obj){ seg[k], off[k], size };
		}
		runs++;
		if (got < n)
			break;
	}
	/* Both pools hold the same: the singles agree where the run ended. */
	for (uint32_t i = 0; i < a.n; i++)
		assert_int_equal(kvf__segalloc_free_bytes(a.seg[i]),
				 kvf__segalloc_free_bytes(b.seg[i]));
	print_message("# %u runs, %u crossed to another segment\n", runs,
		      crossed);
	assert_true(runs > 50);
	assert_true(crossed > 0);
	/* Only fragmentation_aware runs; a run of none places none. */
	{
		uint64_t tag = 1, off1;
		uint32_t seg1;

		assert_int_equal(kvf__place_run(KVF_PLACEMENT_RANDOM, b.seg,
						b.n, 64 * KiB, 1, &tag, &one,
						&seg1, &off1),
				 0);
	}
	pool_fini(&a);
	pool_fini(&b);
	free(live);
}

/*
 * A run that leaves its segment tighter than another size's remembered
 * best fit drops that memo, as single placements do: 64 KiB goes to
 * segment 0 (1 MiB free, the tighter), 1152 KiB then fits only segment 1
 * (1252 KiB free) and leaves 100 KiB there, so the next 64 KiB run
 * starts in segment 1 and, once that is too small, goes on in segment 0.
 */
static void test_run_drops_undercut_memo(void **state)
{
	uint64_t tags[2] = { 1, 2 }, off[2], o;
	struct kvf__placer pl;
	uint32_t seg[2];
	struct pool p;

	(void)state;
	pool_init(&p, 2, 4 * MiB);
	kvf__placer_init(&pl, 4, 0);
	assert_int_equal(kvf__segalloc_alloc_tagged(p.seg[0], 3 * MiB, 9, &o),
			 KVF_OK);
	assert_int_equal(kvf__segalloc_alloc_tagged(p.seg[1], 2844 * KiB, 9,
						    &o),
			 KVF_OK);
	assert_int_equal(kvf__place_run(KVF_PLACEMENT_FRAGMENTATION_AWARE,
					p.seg, p.n, 64 * KiB, 1, tags, &pl, seg,
					off),
			 1);
	assert_int_equal(seg[0], 0);
	assert_int_equal(kvf__place_run(KVF_PLACEMENT_FRAGMENTATION_AWARE,
					p.seg, p.n, 1152 * KiB, 1, tags, &pl,
					seg, off),
			 1);
	assert_int_equal(seg[0], 1);
	assert_int_equal(kvf__place_run(KVF_PLACEMENT_FRAGMENTATION_AWARE,
					p.seg, p.n, 64 * KiB, 2, tags, &pl, seg,
					off),
			 2);
	assert_int_equal(seg[0], 1);
	assert_int_equal(seg[1], 0);
	pool_fini(&p);
}

/* Place @req with fragmentation_aware; the segment its replica went to. */
static uint32_t placed_in(struct pool *p, const struct kvf__place_request *req,
			  struct kvf__placer *pl)
{
	struct kvf__place_result res;

	assert_int_equal(kvf__place(KVF_PLACEMENT_FRAGMENTATION_AWARE, p->seg,
				    p->n, req, pl, &res),
			 KVF_OK);
	assert_true(res.first_choice);
	return res.seg[0];
}

/*
 * A placer with lanes takes the best fit of its lane's segments (index
 * mod lanes), and of every segment only when none of its own fits; lanes
 * keep two segments each at least.
 */
static void test_placer_lanes(void **state)
{
	struct kvf__place_request req = { .size = 64 * KiB,
					  .replica_num = 1 };
	struct kvf__placer pl;
	struct pool p;
	uint64_t off;

	(void)state;
	pool_init(&p, 4, 4 * MiB);
	kvf__placer_init(&pl, 1, 0);
	/* Tightest first: 0, then 3, then 2 and 1 (empty). */
	assert_int_equal(kvf__segalloc_alloc_tagged(p.seg[0], 3 * MiB, 1, &off),
			 KVF_OK);
	assert_int_equal(kvf__segalloc_alloc_tagged(p.seg[3], 2 * MiB, 1, &off),
			 KVF_OK);
	assert_int_equal(placed_in(&p, &req, &pl), 0);

	pl.lanes = 2;
	pl.lane = 1;
	for (int k = 0; k < 4; k++)
		assert_int_equal(placed_in(&p, &req, &pl), 3);
	pl.lane = 0;
	assert_int_equal(placed_in(&p, &req, &pl), 0);
	/* Three lanes of four segments would leave lanes of one: two. */
	pl.lanes = 3;
	pl.lane = 1;
	assert_int_equal(placed_in(&p, &req, &pl), 3);

	/* Only segments 1 and 2 fit; lane 1 of 2 has 1 and 3. */
	req.size = 3 * MiB;
	pl.lanes = 2;
	assert_int_equal(placed_in(&p, &req, &pl), 1);
	/* Now only segment 2 fits, outside the lane: it takes it. */
	assert_int_equal(placed_in(&p, &req, &pl), 2);
	pool_fini(&p);
}

/* A pool whose allocators note their parks in @h, as the engine's do. */
static void pool_hinted(struct pool *p, uint32_t n, uint64_t size,
			struct kvf__park_hint *h)
{
	pool_init(p, n, size);
	kvf__park_hint_init(h, 64);
	for (uint32_t i = 0; i < n; i++)
		kvf__segalloc_set_park_hint(p->seg[i], h, i);
}

/*
 * A run whose first object finds an exact fit takes every block of the
 * size parked in that segment under the same hold (newest first), and
 * goes on past them as kvf__place() would: to the tightest fit, then
 * the next tightest.
 */
static void test_run_takes_parked_together(void **state)
{
	const uint64_t sz = 256 * KiB;
	const uint64_t tags[5] = { 1, 2, 3, 4, 5 };
	struct kvf__park_hint hint;
	struct kvf__placer pl;
	uint64_t off[8], tight, at[5];
	uint32_t seg[5];
	struct pool p;

	(void)state;
	pool_hinted(&p, 4, 4 * MiB, &hint);
	kvf__placer_init(&pl, 3, 0);
	pl.hint = &hint;
	/* Segment 0 is the tightest fit: 300 KiB left. */
	assert_int_equal(kvf__segalloc_alloc_tagged(p.seg[0],
						    4 * MiB - 300 * KiB, 1,
						    &tight),
			 KVF_OK);
	/* Segment 2 parks three blocks of the size, between held ones. */
	kvf__segalloc_set_reuse_limit(p.seg[2], 4 * MiB);
	for (int k = 0; k < 8; k++)
		assert_int_equal(kvf__segalloc_alloc_tagged(p.seg[2], sz, 1,
							    &off[k]),
				 KVF_OK);
	for (int k = 1; k < 7; k += 2)
		kvf__segalloc_free(p.seg[2], off[k], sz);
	assert_int_equal(kvf__park_hint_get(&hint, sz), 2);

	assert_int_equal(kvf__place_run(KVF_PLACEMENT_FRAGMENTATION_AWARE,
					p.seg, p.n, sz, 5, tags, &pl, seg, at),
			 5);
	for (int k = 0; k < 3; k++) {
		assert_int_equal(seg[k], 2);
		assert_int_equal(at[k], off[5 - 2 * k]);
	}
	assert_false(kvf__segalloc_has_parked(p.seg[2], sz));
	assert_int_equal(seg[3], 0);
	assert_int_equal(at[3], tight + 4 * MiB - 300 * KiB);
	/* Then the next tightest: segment 2's own free region. */
	assert_int_equal(seg[4], 2);
	assert_int_equal(at[4], off[7] + sz);
	pool_fini(&p);
}

/*
 * The exact-fit fast path: a block of exactly the request's size parked
 * in a segment's reuse list is taken, whole, where the pass would have
 * cut the tightest segment's largest region; a stale hint takes nothing
 * and the pass chooses; without a hint the pass chooses.
 */
static void test_exact_fit_fast_path(void **state)
{
	const uint64_t sz = 256 * KiB;
	struct kvf__place_request req = { .size = sz, .replica_num = 1 };
	struct kvf__place_result res;
	struct kvf__park_hint hint;
	struct kvf__placer pl;
	uint64_t off[4], tight, largest[4], free2;
	struct pool p;

	(void)state;
	pool_hinted(&p, 4, 4 * MiB, &hint);
	kvf__placer_init(&pl, 3, 0);
	/* Segment 0 is the tightest fit: 300 KiB left. */
	assert_int_equal(kvf__segalloc_alloc_tagged(p.seg[0],
						    4 * MiB - 300 * KiB, 1,
						    &tight),
			 KVF_OK);
	/* Segment 2 parks the second of four blocks of the size. */
	for (int k = 0; k < 4; k++)
		assert_int_equal(kvf__segalloc_alloc_tagged(p.seg[2], sz, 1,
							    &off[k]),
				 KVF_OK);
	kvf__segalloc_free(p.seg[2], off[1], sz);
	assert_true(kvf__segalloc_has_parked(p.seg[2], sz));
	assert_int_equal(kvf__park_hint_get(&hint, sz), 2);
	for (uint32_t i = 0; i < 4; i++)
		largest[i] = kvf__segalloc_largest_free(p.seg[i]);
	free2 = kvf__segalloc_free_bytes(p.seg[2]);

	/* Without the hint: the pass, the tightest region. */
	assert_int_equal(kvf__place(KVF_PLACEMENT_FRAGMENTATION_AWARE, p.seg,
				    p.n, &req, &pl, &res),
			 KVF_OK);
	assert_int_equal(res.seg[0], 0);
	kvf__place_undo(p.seg, &req, &res);
	kvf__placer_forget(&pl);

	/* With it: the parked block, nothing else touched. */
	pl.hint = &hint;
	assert_int_equal(kvf__place(KVF_PLACEMENT_FRAGMENTATION_AWARE, p.seg,
				    p.n, &req, &pl, &res),
			 KVF_OK);
	assert_int_equal(res.count, 1);
	assert_int_equal(res.seg[0], 2);
	assert_int_equal(res.offset[0], off[1]);
	assert_true(res.first_choice);
	assert_int_equal(kvf__segalloc_free_bytes(p.seg[2]), free2 - sz);
	for (uint32_t i = 0; i < 4; i++)
		assert_int_equal(kvf__segalloc_largest_free(p.seg[i]),
				 largest[i]);
	assert_false(kvf__segalloc_has_parked(p.seg[2], sz));

	/* Stale now (nothing parked there): the pass, segment 0 again. */
	kvf__placer_forget(&pl);
	assert_int_equal(kvf__park_hint_get(&hint, sz), 2);
	assert_int_equal(kvf__place(KVF_PLACEMENT_FRAGMENTATION_AWARE, p.seg,
				    p.n, &req, &pl, &res),
			 KVF_OK);
	assert_int_equal(res.seg[0], 0);
	assert_int_equal(res.offset[0], tight + 4 * MiB - 300 * KiB);
	/* Another size's hint names no segment. */
	assert_int_equal(kvf__park_hint_get(&hint, sz + 64), UINT32_MAX);
	pool_fini(&p);
}

/*
 * The placement workload in small (8 segments of 64 MiB, sizes / 64):
 * fill to 90%, churn at 90%, fill to the first failure. Returns the used
 * fraction then; with @hinted the placer takes parked exact fits.
 */
static double fill_at_failure(int mix, bool hinted, uint64_t seed)
{
	struct fobj {
		uint32_t seg;
		uint64_t off, size;
	} *live = calloc(80000, sizeof(*live));
	uint64_t rng = seed, used = 0, cap = 8 * 64 * MiB, churn = 0;
	struct kvf__place_result res;
	struct kvf__park_hint hint;
	struct kvf__placer pl;
	size_t n = 0;
	struct pool p;

	assert_non_null(live);
	pool_hinted(&p, 8, 64 * MiB, &hint);
	kvf__placer_init(&pl, seed, 0);
	pl.hint = hinted ? &hint : NULL;
	for (;;) {
		uint64_t r = kvf__xorshift64s(&rng);
		struct kvf__place_request req = { .replica_num = 1 };

		if (mix == 0)
			req.size = 64 * KiB;
		else if (mix == 1)
			req.size = r & 3 ? 48750 : 10047;
		else
			req.size = (1024ULL << (r % 7)) + (r >> 40 & 1023);
		/* 20000 placements of churn at 90%, once 90% is reached. */
		while (churn < 20000 && (double)used >= 0.9 * (double)cap) {
			size_t v = kvf__xorshift64s(&rng) % n;

			kvf__segalloc_free(p.seg[live[v].seg], live[v].off,
					   live[v].size);
			used -= (live[v].size + 63) & ~63ULL;
			live[v] = live[--n];
			kvf__placer_forget(&pl);
			churn += (double)used < 0.9 * (double)cap;
		}
		if (kvf__place(KVF_PLACEMENT_FRAGMENTATION_AWARE, p.seg, p.n,
			       &req, &pl, &res) != KVF_OK)
			break;
		assert_true(n < 80000);
		live[n++] = (struct fobj){ res.seg[0], res.offset[0], req.size };
		used += (req.size + 63) & ~63ULL;
	}
	assert_int_equal(churn, 20000); /* it failed after the churn only */
	pool_fini(&p);
	free(live);
	return (double)used / (double)cap;
}

/*
 * The fast path fills at least as well as the pass alone on the same
 * requests: uniform, bimodal and wide mixes, two seeds each.
 */
static void test_exact_fit_keeps_fill(void **state)
{
	(void)state;
	for (int mix = 0; mix < 3; mix++) {
		for (uint64_t seed = 1; seed <= 2; seed++) {
			double with = fill_at_failure(mix, true, seed);
			double without = fill_at_failure(mix, false, seed);

			print_message("# mix %d seed %llu: %.6f with, %.6f without\n",
				      mix, (unsigned long long)seed, with,
				      without);
			assert_true(with >= without);
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_distinct_until_full),
		cmocka_unit_test(test_preferred),
		cmocka_unit_test(test_not_enough_and_invalid),
		cmocka_unit_test(test_no_space_leaves_nothing),
		cmocka_unit_test(test_null_segments),
		cmocka_unit_test(test_free_ratio_lies),
		cmocka_unit_test(test_best_fit),
		cmocka_unit_test(test_exact_fit),
		cmocka_unit_test(test_placer_lanes),
		cmocka_unit_test(test_memo_is_best_fit),
		cmocka_unit_test(test_run_places_as_singles),
		cmocka_unit_test(test_run_drops_undercut_memo),
		cmocka_unit_test(test_exact_fit_fast_path),
		cmocka_unit_test(test_run_takes_parked_together),
		cmocka_unit_test(test_exact_fit_keeps_fill),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
