/* SPDX-License-Identifier: MIT */
/*
 * tests/stress/test_segalloc_concurrent.c - many threads allocating and
 * freeing in shared allocators, directly and through kvf__place().
 *
 * Every granule of every segment has an atomic owner flag: a thread that
 * gets a range swaps the flags of its granules to 1 and must see 0 in each
 * (no overlap with any live range), and swaps them back to 0 before it
 * frees (seeing 1). At the end every allocator is one free region again.
 * Half the requests are of three page sizes, so frees park blocks in the
 * allocators' reuse lists and allocs take them back, under contention.
 * Worker threads never call cmocka (it is not thread-safe): they count
 * violations, the main thread asserts.
 */
#include "config.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include <kvforge/status.h>

#include "alloc/placement.h"

#define NR_SEGS 4
#define NR_THREADS 4
#define SEG_SIZE (4ULL << 20)
#define GRAN 256ULL
#define GRANULES (SEG_SIZE / GRAN)
#define OPS 50000
#define MAX_LIVE 256

static struct kvf__segalloc *segs[NR_SEGS];
static atomic_uchar owner[NR_SEGS][GRANULES];
static atomic_ulong violations, parked_seen;
static const uint64_t hot_sizes[3] = { 4096, 9000, 20 * 1024 };

struct held {
	uint32_t seg;
	uint64_t off, size;
};

static void mark(uint32_t s, uint64_t off, uint64_t size, unsigned char v)
{
	if (off % GRAN || off + size > SEG_SIZE) {
		atomic_fetch_add(&violations, 1);
		return;
	}
	for (uint64_t g = off / GRAN; g < (off + size + GRAN - 1) / GRAN; g++)
		if (atomic_exchange(&owner[s][g], v) == v)
			atomic_fetch_add(&violations, 1);
}

static uint64_t next(uint64_t *r)
{
	*r ^= *r << 13;
	*r ^= *r >> 7;
	*r ^= *r << 17;
	return *r;
}

static void release(struct held *h)
{
	mark(h->seg, h->off, h->size, 0);
	kvf__segalloc_free(segs[h->seg], h->off, h->size);
}

static void *worker(void *arg)
{
	uintptr_t id = (uintptr_t)arg;
	uint64_t rng = 0x9e3779b97f4a7c15ULL * (id + 1);
	struct kvf__placer placer;
	struct held live[MAX_LIVE];
	uint32_t n = 0;

	kvf__placer_init(&placer, 7, id);

	for (int op = 0; op < OPS; op++) {
		uint64_t r = next(&rng), size = 1 + (r >> 40) % (32 * 1024);

		if (r & 16)
			size = hot_sizes[(r >> 20) % 3];

		if (n && ((r & 3) == 0 || n + 2 > MAX_LIVE)) {
			uint32_t k = (uint32_t)((r >> 8) % n);

			release(&live[k]);
			live[k] = live[--n];
		} else if (r & 4) {
			/* Directly in one allocator; half of them try-alloc
			 * (KVF_ERR_BUSY when another thread is inside). */
			uint32_t s = (uint32_t)((r >> 16) % NR_SEGS);
			uint64_t off;
			int rc = (r & 8) ? kvf__segalloc_try_alloc_tagged(
						   segs[s], size, 1, &off)
					 : kvf__segalloc_alloc_tagged(
						   segs[s], size, 1, &off);

			if (rc != KVF_OK)
				continue;
			mark(s, off, size, 1);
			live[n++] = (struct held){ s, off, size };
		} else {
			/* Two replicas through placement. */
			struct kvf__place_request req = { .size = size,
							  .replica_num = 2 };
			struct kvf__place_result res;
			enum kvf_placement_strategy st =
				(enum kvf_placement_strategy)((r >> 12) % 3);

			if (kvf__place(st, segs, NR_SEGS, &req, &placer, &res) !=
			    KVF_OK)
				continue;
			if (res.count != 2 || res.seg[0] == res.seg[1])
				atomic_fetch_add(&violations, 1);
			for (uint32_t k = 0; k < res.count; k++) {
				mark(res.seg[k], res.offset[k], size, 1);
				live[n++] = (struct held){ res.seg[k],
							   res.offset[k], size };
			}
		}
		if (op % 64 == 0 &&
		    kvf__segalloc_reuse_bytes(segs[(r >> 8) % NR_SEGS]))
			atomic_fetch_add(&parked_seen, 1);
		/* Lock-free reads must stay within bounds. */
		for (uint32_t s = 0; s < NR_SEGS; s++)
			if (kvf__segalloc_largest_free(segs[s]) > SEG_SIZE ||
			    kvf__segalloc_free_bytes(segs[s]) > SEG_SIZE)
				atomic_fetch_add(&violations, 1);
	}
	while (n)
		release(&live[--n]);
	return NULL;
}

static void test_concurrent(void **state)
{
	pthread_t t[NR_THREADS];

	(void)state;
	for (int s = 0; s < NR_SEGS; s++)
		assert_int_equal(kvf__segalloc_create(SEG_SIZE, GRAN, &segs[s]),
				 KVF_OK);
	for (uintptr_t i = 0; i < NR_THREADS; i++)
		assert_int_equal(pthread_create(&t[i], NULL, worker, (void *)i),
				 0);
	for (int i = 0; i < NR_THREADS; i++)
		assert_int_equal(pthread_join(t[i], NULL), 0);
	assert_int_equal(atomic_load(&violations), 0);
	assert_true(atomic_load(&parked_seen) > 0);
	for (int s = 0; s < NR_SEGS; s++) {
		assert_int_equal(kvf__segalloc_free_bytes(segs[s]), SEG_SIZE);
		assert_int_equal(kvf__segalloc_largest_free(segs[s]), SEG_SIZE);
		assert_int_equal(kvf__segalloc_nr_allocs(segs[s]), 0);
		for (uint64_t g = 0; g < GRANULES; g++)
			assert_int_equal(atomic_load(&owner[s][g]), 0);
		kvf__segalloc_destroy(segs[s]);
	}
}

/*
 * Two threads allocate objects of two slab sizes from one allocator and
 * free each other's (handed over through a locked exchange), so each
 * frees into slabs the other filled. Each also keeps blocks of scattered
 * sizes (plain blocks of the tree) until the segment is full, so that
 * their allocations break slabs up (free slots back to the tree) while
 * the other thread frees into them. At the end: no overlap seen, slabs
 * were broken up, the accounting audit (used bytes = live objects) holds,
 * and once everything is freed every slab is back in the tree.
 */
#define XSEG (64ULL << 20)
#define XOPS 20000
#define XRING 512
#define XKEEP 16384

static struct kvf__segalloc *xa;
static pthread_mutex_t xlock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	uint64_t off, size;
	uint32_t n;
	struct held ring[XRING];
} xq[2];
static atomic_ulong xlive_bytes, xslabs_seen;
static atomic_uchar xowner[XSEG / GRAN];

static void xmark(uint64_t off, uint64_t size, unsigned char v)
{
	if (off % GRAN || off + size > XSEG) {
		atomic_fetch_add(&violations, 1);
		return;
	}
	for (uint64_t g = off / GRAN; g < (off + size + GRAN - 1) / GRAN; g++)
		if (atomic_exchange(&xowner[g], v) == v)
			atomic_fetch_add(&violations, 1);
}

static void xput(int to, uint64_t off, uint64_t size)
{
	pthread_mutex_lock(&xlock);
	if (xq[to].n < XRING) {
		xq[to].ring[xq[to].n++] = (struct held){ 0, off, size };
		off = 0;
		size = 0;
	}
	pthread_mutex_unlock(&xlock);
	if (size) { /* the other thread's queue is full: free it here */
		xmark(off, size, 0);
		atomic_fetch_sub(&xlive_bytes, (size + GRAN - 1) & ~(GRAN - 1));
		kvf__segalloc_free(xa, off, size);
	}
}

static struct held xkept[2][XKEEP];
static uint32_t xnkept[2];

static void *xworker(void *arg)
{
	int id = (int)(uintptr_t)arg;
	uint64_t rng = 0x51ab0001ULL + (uint64_t)id;

	for (int op = 0; op < XOPS; op++) {
		uint64_t r = next(&rng), size = r & 1 ? 1000 : 3000, off;
		uint64_t keep = 1 + (r >> 8) % 8000;
		struct held h[XRING];
		uint32_t k;

		/* Every other op a scattered size kept to the end. */
		if (r & 2 && xnkept[id] < XKEEP &&
		    kvf__segalloc_alloc_tagged(xa, keep, r | 1, &off) ==
			    KVF_OK) {
			xmark(off, keep, 1);
			atomic_fetch_add(&xlive_bytes,
					 (keep + GRAN - 1) & ~(GRAN - 1));
			xkept[id][xnkept[id]++] = (struct held){ 0, off, keep };
		}

		if (kvf__segalloc_alloc_tagged(xa, size, r | 1, &off) ==
		    KVF_OK) {
			xmark(off, size, 1);
			atomic_fetch_add(&xlive_bytes,
					 (size + GRAN - 1) & ~(GRAN - 1));
			xput(!id, off, size);
		}
		if (op % 32)
			continue;
		/* Free what the other thread handed over. */
		pthread_mutex_lock(&xlock);
		k = xq[id].n;
		for (uint32_t i = 0; i < k; i++)
			h[i] = xq[id].ring[i];
		xq[id].n = 0;
		pthread_mutex_unlock(&xlock);
		for (uint32_t i = 0; i < k; i++) {
			xmark(h[i].off, h[i].size, 0);
			atomic_fetch_sub(&xlive_bytes,
					 (h[i].size + GRAN - 1) & ~(GRAN - 1));
			kvf__segalloc_free(xa, h[i].off, h[i].size);
		}
		if (kvf__segalloc_nr_slabs(xa, NULL))
			atomic_fetch_add(&xslabs_seen, 1);
	}
	return NULL;
}

static void test_cross_frees_slabs(void **state)
{
	uint64_t *xfill, broken;
	size_t nfill = 0;
	pthread_t t[2];

	(void)state;
	atomic_store(&violations, 0);
	assert_int_equal(kvf__segalloc_create(XSEG, GRAN, &xa), KVF_OK);
	for (uintptr_t i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&t[i], NULL, xworker, (void *)i),
				 0);
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_join(t[i], NULL), 0);
	assert_int_equal(atomic_load(&violations), 0);
	assert_true(atomic_load(&xslabs_seen) > 0);
	/* The audit: used bytes are the live objects'. */
	assert_int_equal(kvf__segalloc_used_bytes(xa),
			 atomic_load(&xlive_bytes));
	/*
	 * Half the handed-over objects freed (slots of slabs free now), then
	 * the smallest blocks until no space: that happens only once nothing
	 * at all is free, every free slot of a slab given back to the tree.
	 */
	for (int q = 0; q < 2; q++) {
		uint32_t m = 0;

		for (uint32_t i = 0; i < xq[q].n; i++) {
			struct held *h = &xq[q].ring[i];

			if (i % 2) {
				xq[q].ring[m++] = *h;
				continue;
			}
			xmark(h->off, h->size, 0);
			atomic_fetch_sub(&xlive_bytes,
					 (h->size + GRAN - 1) & ~(GRAN - 1));
			kvf__segalloc_free(xa, h->off, h->size);
		}
		xq[q].n = m;
	}
	xfill = malloc(XSEG / GRAN * sizeof(*xfill));
	assert_non_null(xfill);
	while (kvf__segalloc_alloc_tagged(xa, GRAN, 5, &xfill[nfill]) ==
	       KVF_OK)
		xmark(xfill[nfill++], GRAN, 1);
	assert_int_equal(kvf__segalloc_free_bytes(xa), 0);
	assert_int_equal(kvf__segalloc_used_bytes(xa),
			 atomic_load(&xlive_bytes) + nfill * GRAN);
	kvf__segalloc_nr_slabs(xa, &broken);
	print_message("# %llu slabs broken up, %u + %u kept, %zu filled\n",
		      (unsigned long long)broken, xnkept[0], xnkept[1], nfill);
	while (nfill--) {
		xmark(xfill[nfill], GRAN, 0);
		kvf__segalloc_free(xa, xfill[nfill], GRAN);
	}
	free(xfill);
	for (int w = 0; w < 2; w++)
		for (uint32_t i = 0; i < xnkept[w]; i++) {
			xmark(xkept[w][i].off, xkept[w][i].size, 0);
			kvf__segalloc_free(xa, xkept[w][i].off,
					   xkept[w][i].size);
		}
	for (int q = 0; q < 2; q++)
		for (uint32_t i = 0; i < xq[q].n; i++) {
			xmark(xq[q].ring[i].off, xq[q].ring[i].size, 0);
			kvf__segalloc_free(xa, xq[q].ring[i].off,
					   xq[q].ring[i].size);
		}
	assert_int_equal(atomic_load(&violations), 0);
	assert_int_equal(kvf__segalloc_used_bytes(xa), 0);
	assert_int_equal(kvf__segalloc_nr_slabs(xa, NULL), 0);
	assert_int_equal(kvf__segalloc_largest_free(xa), XSEG);
	kvf__segalloc_destroy(xa);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_concurrent),
		cmocka_unit_test(test_cross_frees_slabs),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
