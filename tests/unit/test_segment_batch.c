// SPDX-License-Identifier: MIT
/*
 * tests/unit/test_segment_batch.c - kvf_segment_mount_batch(): per-item
 * answers for a batch with every kind of bad item (nothing else changes),
 * the batch against one mount after the other on random inputs, the
 * batch across a reopen, a journal error failing the whole batch, and
 * readers walking the table while batches are published (TSan tier).
 */
#include "config.h"

#include <pthread.h>
#include <errno.h>

#include "tests/unit/helpers.h"

#include "engine/internal.h"
#include "journal/journal.h"

#define C1 0xc1
#define C2 0xc2
#define C3 0xc3

static struct kvf_segment_desc desc(uint64_t id, uint64_t base, uint64_t size)
{
	static char names[4096][24];
	static unsigned next;
	char *name = names[next++ % 4096];

	snprintf(name, 24, "seg-%llu", (unsigned long long)id);
	return (struct kvf_segment_desc){.id = id,
					 .name = name,
					 .base = base,
					 .size = size,
					 .endpoint = "10.0.0.1:7000"};
}

/* Segment @id as mounted: its client and base, or 0 and 0 if absent. */
static int where(struct kvf_engine *e, uint64_t id, uint64_t *client,
		 uint64_t *base)
{
	struct kvf_segment_info info;
	int ret = kvf_segment_query(e, id, &info);

	*client = ret ? 0 : info.client_id;
	*base = ret ? 0 : info.base;
	return ret;
}

static void assert_mounted(struct kvf_engine *e, uint64_t id, uint64_t client,
			   uint64_t base)
{
	uint64_t c, b;

	assert_int_equal(where(e, id, &c, &b), KVF_OK);
	assert_int_equal(c, client);
	assert_int_equal(b, base);
}

/* Every kind of bad item in one batch: each its status, the rest mount. */
static void test_mixed_bad_items(void **state)
{
	struct fixture *f = *state;
	struct kvf_segment_desc d[] = {
		desc(1, 64 * MIB, 8 * MIB),	/* mounts */
		desc(1, 128 * MIB, 8 * MIB),	/* id taken by [0] */
		desc(100, 256 * MIB, 8 * MIB),	/* id mounted */
		desc(2, 68 * MIB, 8 * MIB),	/* overlaps [0] */
		desc(3, 4 * MIB, 8 * MIB),	/* overlaps mounted 100 */
		desc(4, 512 * MIB, 0),		/* zero size */
		desc(5, 1 * GIB, 8 * MIB),	/* C2's range: mounts */
		desc(6, 72 * MIB, 8 * MIB),	/* right after [0]: mounts */
		desc(200, 2 * GIB, 8 * MIB),	/* C2's id */
		desc(0, 3 * GIB, 8 * MIB),	/* id 0 */
		desc(7, 128 * MIB, 8 * MIB),	/* [1]'s range: mounts */
		desc(2, 300 * MIB, 8 * MIB),	/* [3]'s id: mounts */
		desc(8, 60 * MIB, 4 * MIB + 1), /* one byte into [0] */
		desc(9, UINT64_MAX - MIB, 2 * MIB), /* wraps */
	};
	enum kvf_status want[] = {
		KVF_OK,
		KVF_ERR_SEGMENT_EXISTS,
		KVF_ERR_SEGMENT_EXISTS,
		KVF_ERR_SEGMENT_OVERLAP,
		KVF_ERR_SEGMENT_OVERLAP,
		KVF_ERR_INVALID_PARAMS,
		KVF_OK,
		KVF_OK,
		KVF_ERR_SEGMENT_EXISTS,
		KVF_ERR_INVALID_PARAMS,
		KVF_OK,
		KVF_OK,
		KVF_ERR_SEGMENT_OVERLAP,
		KVF_ERR_INVALID_PARAMS,
	};
	size_t n = sizeof(d) / sizeof(d[0]);
	enum kvf_status st[sizeof(d) / sizeof(d[0])];
	struct kvf_segment_desc m100 = desc(100, 0, 8 * MIB);
	struct kvf_segment_desc m200 = desc(200, 1 * GIB, 8 * MIB);

	assert_int_equal(kvf_segment_mount(f->e, C1, &m100), KVF_OK);
	assert_int_equal(kvf_segment_mount(f->e, C2, &m200), KVF_OK);
	assert_int_equal(kvf_segment_mount_batch(f->e, C1, d, n, st),
			 KVF_ERR_PARTIAL);
	for (size_t i = 0; i < n; i++) {
		print_message("item %zu: %s\n", i, kvf_strerror(st[i]));
		assert_int_equal(st[i], want[i]);
	}
	assert_int_equal(stats_of(f->e).segments, 2 + 5);
	assert_int_equal(stats_of(f->e).clients, 2);
	assert_mounted(f->e, 1, C1, 64 * MIB);
	assert_mounted(f->e, 2, C1, 300 * MIB);
	assert_mounted(f->e, 5, C1, 1 * GIB);
	assert_mounted(f->e, 6, C1, 72 * MIB);
	assert_mounted(f->e, 7, C1, 128 * MIB);
	assert_mounted(f->e, 100, C1, 0);
	assert_mounted(f->e, 200, C2, 1 * GIB);
	for (uint64_t id = 3; id <= 9; id++) {
		uint64_t c, b;

		if (id != 5 && id != 6 && id != 7)
			assert_int_equal(where(f->e, id, &c, &b),
					 KVF_ERR_SEGMENT_NOT_FOUND);
	}

	/* The same batch again: everything refused, nothing changes. */
	assert_int_equal(kvf_segment_mount_batch(f->e, C1, d, n, st),
			 KVF_ERR_PARTIAL);
	for (size_t i = 0; i < n; i++)
		assert_int_not_equal(st[i], KVF_OK);
	assert_int_equal(stats_of(f->e).segments, 7);
}

/* Whole-call answers: empty, all good, bad arguments. */
static void test_whole_call(void **state)
{
	struct fixture *f = *state;
	struct kvf_segment_desc d[] = {desc(1, 0, 2 * MIB),
				       desc(2, 2 * MIB, 2 * MIB)};
	enum kvf_status st[2] = {99, 99};

	assert_int_equal(kvf_segment_mount_batch(f->e, C1, NULL, 0, NULL),
			 KVF_OK);
	assert_int_equal(kvf_segment_mount_batch(NULL, C1, d, 2, st),
			 KVF_ERR_INVALID_ARGUMENT);
	assert_int_equal(kvf_segment_mount_batch(f->e, C1, d, 2, NULL),
			 KVF_ERR_INVALID_ARGUMENT);
	assert_int_equal(kvf_segment_mount_batch(f->e, 0, d, 2, st),
			 KVF_ERR_INVALID_PARAMS);
	assert_int_equal(st[0], KVF_ERR_INVALID_PARAMS);
	assert_int_equal(st[1], KVF_ERR_INVALID_PARAMS);
	assert_int_equal(stats_of(f->e).segments, 0);
	assert_int_equal(stats_of(f->e).clients, 0);
	assert_int_equal(kvf_segment_mount_batch(f->e, C1, d, 2, st), KVF_OK);
	assert_int_equal(st[0], KVF_OK);
	assert_int_equal(st[1], KVF_OK);
	assert_int_equal(stats_of(f->e).segments, 2);
	/* A mount counts as a heartbeat, and makes the client known. */
	assert_int_equal(kvf_client_heartbeat(f->e, C1), KVF_OK);
}

static uint64_t rnd(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

#define MODEL_IDS 96

/*
 * The batch against one kvf_segment_mount() after the other, on two
 * engines fed the same random batches (few ids and a small address range
 * per client, so duplicates and overlaps are common), with unmounts in
 * between: every item's status, the call's answer and the mounted set
 * agree.
 */
static void test_model_random(void **state)
{
	static const uint64_t sizes[] = {0,	  MIB,	   2 * MIB,
					 3 * MIB, 5 * MIB, MIB + 1};
	static const uint64_t clients[] = {C1, C2, C3};
	struct fixture *f = *state, g;
	struct kvf_segment_desc d[48];
	enum kvf_status st[48];
	uint64_t seed = 0x5e6ba7c4, mounted = 0;

	fixture_config(&g);
	assert_int_equal(kvf_engine_open(&g.cfg, &g.e), KVF_OK);
	for (int round = 0; round < 400; round++) {
		uint64_t client = clients[rnd(&seed) % 3];
		size_t n = rnd(&seed) % 48;
		bool all = true;
		int ret;

		for (size_t i = 0; i < n; i++) {
			uint64_t id = rnd(&seed) % MODEL_IDS +
				      (rnd(&seed) % 50 ? 1 : 0);

			d[i] = desc(id, (rnd(&seed) % 64) * MIB / 2,
				    sizes[rnd(&seed) % 6]);
		}
		ret = kvf_segment_mount_batch(f->e, client, d, n, st);
		for (size_t i = 0; i < n; i++) {
			int one = kvf_segment_mount(g.e, client, &d[i]);

			assert_int_equal(st[i], one);
			all &= one == KVF_OK;
			mounted += one == KVF_OK;
		}
		assert_int_equal(ret, all ? KVF_OK : KVF_ERR_PARTIAL);
		/* Unmount a few, the same on both. */
		for (int u = rnd(&seed) % 6; u > 0; u--) {
			uint64_t id = rnd(&seed) % MODEL_IDS + 1, c, b;

			if (where(g.e, id, &c, &b))
				continue;
			assert_int_equal(kvf_segment_unmount(f->e, c, id),
					 KVF_OK);
			assert_int_equal(kvf_segment_unmount(g.e, c, id),
					 KVF_OK);
		}
		for (uint64_t id = 1; id <= MODEL_IDS; id++) {
			uint64_t c1, b1, c2, b2;

			assert_int_equal(where(f->e, id, &c1, &b1),
					 where(g.e, id, &c2, &b2));
			assert_int_equal(c1, c2);
			assert_int_equal(b1, b2);
		}
		assert_int_equal(stats_of(f->e).segments,
				 stats_of(g.e).segments);
	}
	print_message("%llu mounts agreed\n", (unsigned long long)mounted);
	assert_true(mounted > 400);
	kvf_engine_close(g.e);
}

/* Mounted in one batch, back after a reopen; the refused ones are not. */
static void test_batch_survives_reopen(void **state)
{
	struct fixture f;
	char *dir = test_tmpdir("segbatch-reopen");
	enum { N = 300 };
	struct kvf_segment_desc *d = calloc(N, sizeof(*d));
	enum kvf_status *st = calloc(N, sizeof(*st));
	struct kvf_segment_info info;
	size_t ok = 0;

	(void)state;
	assert_non_null(d);
	assert_non_null(st);
	fixture_open_journaled(&f, dir, KVF_DURABILITY_BOUNDED);
	assert_int_equal(mount(f.e, C2, 1000, 8 * MIB), KVF_OK);
	for (size_t i = 0; i < N; i++)
		/* every 7th repeats the previous one's range: refused */
		d[i] = desc(i + 1, (i % 7 == 6 ? i - 1 : i) * 4 * MIB, 4 * MIB);
	assert_int_equal(kvf_segment_mount_batch(f.e, C1, d, N, st),
			 KVF_ERR_PARTIAL);
	for (size_t i = 0; i < N; i++) {
		assert_int_equal(st[i],
				 i % 7 == 6 ? KVF_ERR_SEGMENT_OVERLAP : KVF_OK);
		ok += st[i] == KVF_OK;
	}
	kvf_engine_close(f.e);
	assert_int_equal(kvf_engine_open(&f.cfg, &f.e), KVF_OK);
	assert_int_equal(stats_of(f.e).segments, ok + 1);
	for (size_t i = 0; i < N; i++) {
		int ret = kvf_segment_query(f.e, d[i].id, &info);

		if (st[i] != KVF_OK) {
			assert_int_equal(ret, KVF_ERR_SEGMENT_NOT_FOUND);
			continue;
		}
		assert_int_equal(ret, KVF_OK);
		assert_int_equal(info.client_id, C1);
		assert_int_equal(info.base, d[i].base);
		assert_int_equal(info.size, d[i].size);
		assert_string_equal(info.name, d[i].name);
		assert_string_equal(info.endpoint, d[i].endpoint);
	}
	assert_mounted(f.e, 1000, C2, 1000ULL << 40);
	/* Puts land in the recovered segments. */
	assert_int_equal(put_complete(f.e, C1, "after-reopen", 4096, 1),
			 KVF_OK);
	kvf_engine_close(f.e);
	free(d);
	free(st);
	free(dir);
}

/* One append for the batch: a journal that refuses it fails every item. */
static void test_journal_error_fails_batch(void **state)
{
	struct fixture f;
	char *dir = test_tmpdir("segbatch-fault");
	struct kvf_segment_desc d[] = {
		desc(1, 0, 2 * MIB), desc(2, 2 * MIB, 2 * MIB),
		desc(2, 8 * MIB, 2 * MIB), desc(3, 4 * MIB, 2 * MIB)};
	enum kvf_status st[4];

	(void)state;
#ifndef KVF_FAULT_INJECTION
	skip(); /* ./configure --enable-fault-injection compiles the hook in */
#endif
	fixture_open_journaled(&f, dir, KVF_DURABILITY_STRICT);
	kvf__journal_inject_fault(f.e->journal, EIO, 1);
	assert_int_equal(kvf_segment_mount_batch(f.e, C1, d, 4, st),
			 KVF_ERR_PARTIAL);
	assert_int_equal(st[0], KVF_ERR_IO);
	assert_int_equal(st[1], KVF_ERR_IO);
	assert_int_equal(st[2], KVF_ERR_SEGMENT_EXISTS);
	assert_int_equal(st[3], KVF_ERR_IO);
	assert_int_equal(stats_of(f.e).segments, 0);
	assert_int_equal(stats_of(f.e).clients, 0);
	/* The fault is spent: the same batch mounts. */
	assert_int_equal(kvf_segment_mount_batch(f.e, C1, d, 4, st),
			 KVF_ERR_PARTIAL);
	assert_int_equal(st[0], KVF_OK);
	assert_int_equal(st[3], KVF_OK);
	assert_int_equal(stats_of(f.e).segments, 3);
	kvf_engine_close(f.e);
	assert_int_equal(kvf_engine_open(&f.cfg, &f.e), KVF_OK);
	assert_int_equal(stats_of(f.e).segments, 3);
	kvf_engine_close(f.e);
	free(dir);
}

/* ---- readers during batch mounts ---------------------------------------- */

#define BATCHES 24
#define PER_BATCH 64

struct race {
	struct kvf_engine *e;
	int done;	     /* atomic */
	uint64_t seen_whole; /* atomic */
	uint64_t failures;   /* atomic: asserted by the main thread */
};

static uint64_t race_fail(struct race *r)
{
	return __atomic_fetch_add(&r->failures, 1, __ATOMIC_RELAXED);
}

static uint64_t batch_id(unsigned b, unsigned i)
{
	return 1 + b * PER_BATCH + i;
}

/*
 * Reads the table with no lock: a batch is published whole (its first
 * segment visible means its last one is), a mounted segment reads back as
 * mounted, and puts place into whatever the table holds.
 */
struct reader_arg {
	struct race *r;
	unsigned no;
};

static void *reader(void *arg)
{
	struct race *r = ((struct reader_arg *)arg)->r;
	unsigned no = ((struct reader_arg *)arg)->no;
	uint64_t seed = no, whole = 0;
	struct kvf_segment_info info;
	char key[32];

	for (unsigned iter = 0;
	     !__atomic_load_n(&r->done, __ATOMIC_ACQUIRE) || iter < 64;
	     iter++) {
		unsigned b = rnd(&seed) % BATCHES;

		if (kvf_segment_query(r->e, batch_id(b, 0), &info) == KVF_OK) {
			if (info.base != batch_id(b, 0) * 4 * MIB)
				race_fail(r);
			if (kvf_segment_query(r->e, batch_id(b, PER_BATCH - 1),
					      &info) ||
			    info.client_id != C1 + b % 2)
				race_fail(r);
			whole++;
		}
		/* The replica may land in a segment unmounted meanwhile: the
		 * revoke's answer is not the point, the placement's walk is. */
		snprintf(key, sizeof(key), "k%u-%u", iter, no);
		if (put1(r->e, C3, key, 4096, 1, NULL) == KVF_OK)
			(void)revoke1(r->e, C3, key);
	}
	__atomic_fetch_add(&r->seen_whole, whole, __ATOMIC_RELAXED);
	return NULL;
}

static void test_readers_during_batches(void **state)
{
	struct fixture *f = *state;
	struct race r = {.e = f->e};
	struct kvf_segment_desc d[PER_BATCH];
	enum kvf_status st[PER_BATCH];
	struct reader_arg ra[2];
	pthread_t th[2];

	/* The readers' own client, so their puts always have a home. */
	assert_int_equal(mount(f->e, C3, 1ULL << 20, 64 * MIB), KVF_OK);
	for (unsigned i = 0; i < 2; i++) {
		ra[i] = (struct reader_arg){.r = &r, .no = i};
		assert_int_equal(pthread_create(&th[i], NULL, reader, &ra[i]),
				 0);
	}
	for (unsigned b = 0; b < BATCHES; b++) {
		for (unsigned i = 0; i < PER_BATCH; i++)
			d[i] = desc(batch_id(b, i), batch_id(b, i) * 4 * MIB,
				    4 * MIB);
		assert_int_equal(kvf_segment_mount_batch(f->e, C1 + b % 2, d,
							 PER_BATCH, st),
				 KVF_OK);
		/* Some churn the readers walk past: an unmount per batch. */
		if (b)
			assert_int_equal(
				kvf_segment_unmount(f->e, C1 + (b - 1) % 2,
						    batch_id(b - 1, 1)),
				KVF_OK);
	}
	__atomic_store_n(&r.done, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_join(th[i], NULL), 0);
	assert_int_equal(r.failures, 0);
	assert_int_equal(stats_of(f->e).segments,
			 1 + BATCHES * PER_BATCH - (BATCHES - 1));
	for (unsigned b = 0; b < BATCHES; b++)
		assert_mounted(f->e, batch_id(b, PER_BATCH - 1), C1 + b % 2,
			       batch_id(b, PER_BATCH - 1) * 4 * MIB);
	print_message("readers saw %llu whole batches\n",
		      (unsigned long long)r.seen_whole);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
			test_mixed_bad_items, fixture_setup, fixture_teardown),
		cmocka_unit_test_setup_teardown(test_whole_call, fixture_setup,
						fixture_teardown),
		cmocka_unit_test_setup_teardown(
			test_model_random, fixture_setup, fixture_teardown),
		cmocka_unit_test(test_batch_survives_reopen),
		cmocka_unit_test(test_journal_error_fails_batch),
		cmocka_unit_test_setup_teardown(test_readers_during_batches,
						fixture_setup,
						fixture_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
