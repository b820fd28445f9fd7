/* SPDX-License-Identifier: MIT */
/*
 * tests/stress/test_engine_concurrent.c - readers against writers.
 *
 * Writers cycle their own keys through put_start -> put_end -> remove
 * (hard-pinned, so eviction leaves them alone); readers batch-get and
 * batch-exist the same keys and a set of filler keys; a churn thread
 * mounts a third segment, fills it with fillers, evicts them, runs
 * housekeeping and unmounts the segment again (dropping replicas under the
 * readers' feet).
 *
 * What is asserted:
 *  - a reader never sees a processing object: each key has a sequence
 *    word the writer makes odd before put_start and even just before
 *    put_end; a get that ran entirely inside an odd window must miss;
 *  - every descriptor a reader gets is sane (1..2 replicas in distinct,
 *    mounted-at-the-time segments, the key's size, inside its segment);
 *  - freed records are never read (ASan/TSan builds catch that);
 *  - at the end, object counts and used bytes add up exactly.
 */
#include "config.h"

#include <pthread.h>

#include "tests/unit/helpers.h"
#include "tests/stress/audit.h"

#define WRITERS 2
#define READERS 2
#define KEYS_PER_WRITER 64
#define BATCH 16
#define CLIENT 5

#ifdef __SANITIZE_THREAD__
#define CYCLES 60
#else
#define CYCLES 400
#endif

struct shared {
	struct kvf_engine *e;
	uint64_t seq[WRITERS * KEYS_PER_WRITER]; /* atomic */
	char keys[WRITERS * KEYS_PER_WRITER][80];
	int writers_done; /* atomic */
	int failures;     /* atomic */
	uint64_t reads_ok;
};

static struct shared S;

static uint64_t size_of_key(size_t k)
{
	return (k % 7 + 1) * 64 * 1024;
}

static void report_failure(const char *what, size_t k, int st)
{
	fprintf(stderr, "FAIL: %s key %zu status %s\n", what, k,
		kvf_status_name(st));
	__atomic_fetch_add(&S.failures, 1, __ATOMIC_RELAXED);
}

static void *writer(void *arg)
{
	size_t w = (size_t)(uintptr_t)arg, base = w * KEYS_PER_WRITER;
	struct kvf_put_config cfg = { .replica_num = 2, .hard_pin = true };
	struct kvf_key keys[BATCH];
	uint64_t sizes[BATCH];
	struct kvf_replicas out[BATCH];
	enum kvf_status st[BATCH];

	for (int c = 0; c < CYCLES; c++) {
		size_t first = base + (size_t)(c * BATCH) % KEYS_PER_WRITER;

		for (int i = 0; i < BATCH; i++) {
			size_t k = first + (size_t)i;

			keys[i] = key_of(S.keys[k]);
			sizes[i] = size_of_key(k);
			__atomic_fetch_add(&S.seq[k], 1, __ATOMIC_SEQ_CST);
		}
		kvf_batch_put_start(S.e, CLIENT, keys, sizes, BATCH, &cfg, out,
				    st);
		for (int i = 0; i < BATCH; i++)
			if (st[i] != KVF_OK)
				report_failure("put_start", first + (size_t)i, st[i]);
		for (int i = 0; i < BATCH; i++)
			__atomic_fetch_add(&S.seq[first + (size_t)i], 1,
					   __ATOMIC_SEQ_CST);
		kvf_batch_put_end(S.e, CLIENT, keys, BATCH, st);
		for (int i = 0; i < BATCH; i++)
			if (st[i] != KVF_OK)
				report_failure("put_end", first + (size_t)i, st[i]);
		if (c == CYCLES - 1 && w == 0)
			break; /* leave writer 0's last batch in place */
		kvf_batch_remove(S.e, keys, BATCH, true, st);
		for (int i = 0; i < BATCH; i++)
			if (st[i] != KVF_OK)
				report_failure("remove", first + (size_t)i, st[i]);
	}
	return NULL;
}

static void check_replicas(size_t k, const struct kvf_replicas *r)
{
	struct kvf_segment_info info;

	if (r->count < 1 || r->count > 2) {
		report_failure("replica count", k, (int)r->count);
		return;
	}
	if (r->count == 2 &&
	    r->replica[0].segment_id == r->replica[1].segment_id)
		report_failure("replicas share a segment", k, 0);
	for (uint32_t i = 0; i < r->count; i++) {
		const struct kvf_replica_desc *d = &r->replica[i];

		if (d->size != size_of_key(k))
			report_failure("size", k, 0);
		/* Segment 3 may be gone by now; 1 and 2 never go. */
		if (kvf_segment_query(S.e, d->segment_id, &info) != KVF_OK)
			continue;
		if (d->addr < info.base ||
		    d->addr + d->size > info.base + info.size)
			report_failure("descriptor outside its segment", k, 0);
	}
}

#define FILLERS 64
#define FILLER_SIZE (256 * 1024)

static char filler_keys[FILLERS][32];

static void put_fillers(void)
{
	struct kvf_put_config cfg = { .replica_num = 1 };
	struct kvf_key keys[FILLERS];
	uint64_t sizes[FILLERS];
	struct kvf_replicas out[FILLERS];
	enum kvf_status st[FILLERS];

	for (int i = 0; i < FILLERS; i++) {
		keys[i] = key_of(filler_keys[i]);
		sizes[i] = FILLER_SIZE;
	}
	/* Some may still exist (not evicted: leased by a reader). */
	kvf_batch_put_start(S.e, CLIENT, keys, sizes, FILLERS, &cfg, out, st);
	kvf_batch_put_end(S.e, CLIENT, keys, FILLERS, st);
}

static void check_fillers(void)
{
	struct kvf_key keys[FILLERS];
	struct kvf_replicas out[FILLERS];
	enum kvf_status st[FILLERS];

	for (int i = 0; i < FILLERS; i++)
		keys[i] = key_of(filler_keys[i]);
	kvf_batch_get(S.e, keys, FILLERS, out, st, NULL);
	for (int i = 0; i < FILLERS; i++) {
		/* Absent, or caught between put_start and put_end. */
		if (st[i] == KVF_ERR_OBJECT_NOT_FOUND ||
		    st[i] == KVF_ERR_OBJECT_NOT_READY)
			continue;
		if (st[i] != KVF_OK || out[i].count != 1 ||
		    out[i].replica[0].size != FILLER_SIZE)
			report_failure("filler", (size_t)i, st[i]);
	}
}

/* A miss is "not found", or for get also "not ready" (a put in flight). */
static bool read_miss_ok(enum kvf_status st, bool was_get)
{
	return st == KVF_ERR_OBJECT_NOT_FOUND ||
	       (was_get && st == KVF_ERR_OBJECT_NOT_READY);
}

static void *reader(void *arg)
{
	size_t n = WRITERS * KEYS_PER_WRITER;
	struct kvf_key keys[32];
	struct kvf_replicas out[32];
	enum kvf_status st[32];
	uint64_t before[32], rng = (uintptr_t)arg * 7919 + 1;
	size_t idx[32];

	while (!__atomic_load_n(&S.writers_done, __ATOMIC_SEQ_CST)) {
		for (int i = 0; i < 32; i++) {
			/* Distinct keys: a stride coprime with n. */
			idx[i] = (size_t)(rng + (uint64_t)i * 37) % n;
			keys[i] = key_of(S.keys[idx[i]]);
			before[i] = __atomic_load_n(&S.seq[idx[i]],
						    __ATOMIC_SEQ_CST);
		}
		rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
		if ((rng >> 8) % 4 == 0)
			check_fillers();
		if (rng & 1) {
			kvf_batch_get(S.e, keys, 32, out, st, NULL);
		} else {
			kvf_batch_exist(S.e, keys, 32, st);
		}
		for (int i = 0; i < 32; i++) {
			uint64_t after = __atomic_load_n(&S.seq[idx[i]],
							 __ATOMIC_SEQ_CST);

			if (st[i] != KVF_OK) {
				if (!read_miss_ok(st[i], rng & 1))
					report_failure("read status", idx[i], st[i]);
				continue;
			}
			if (before[i] == after && (after & 1))
				report_failure("saw a processing object", idx[i], 0);
			if (rng & 1)
				check_replicas(idx[i], &out[i]);
			__atomic_fetch_add(&S.reads_ok, 1, __ATOMIC_RELAXED);
		}
	}
	return NULL;
}

static void *churn(void *arg)
{
	(void)arg;
	while (!__atomic_load_n(&S.writers_done, __ATOMIC_SEQ_CST)) {
		if (mount(S.e, CLIENT, 3, 256 * MIB) != KVF_OK)
			report_failure("mount", 0, 0);
		put_fillers();
		kvf_engine_tick(S.e);
		if (kvf_engine_evict(S.e, FILLERS * FILLER_SIZE, NULL, NULL) !=
		    KVF_OK)
			report_failure("evict", 0, 0);
		if (kvf_segment_unmount(S.e, CLIENT, 3) != KVF_OK)
			report_failure("unmount", 0, 0);
	}
	return NULL;
}

static void test_readers_never_see_processing(void **state)
{
	pthread_t w[WRITERS], r[READERS], c;
	struct kvf_engine_stats s;
	uint64_t expect_bytes = 0;
	struct kvf_config cfg;

	(void)state;
	kvf_config_init(&cfg);
	cfg.durability = KVF_DURABILITY_NONE;
	cfg.tick_interval_ms = 5;
	cfg.client_ttl_ms = 3600 * 1000;
	cfg.index = KVF_TEST_INDEX;
	assert_int_equal(kvf_engine_open(&cfg, &S.e), KVF_OK);
	assert_test_index(S.e);
	assert_int_equal(mount(S.e, CLIENT, 1, 1024 * MIB), KVF_OK);
	assert_int_equal(mount(S.e, CLIENT, 2, 1024 * MIB), KVF_OK);
	for (int i = 0; i < FILLERS; i++)
		snprintf(filler_keys[i], sizeof(filler_keys[i]), "filler-%d", i);
	for (size_t k = 0; k < WRITERS * KEYS_PER_WRITER; k++)
		snprintf(S.keys[k], sizeof(S.keys[k]),
			 "%064llx_%zu_k", (unsigned long long)(k * 0x9e3779b97f4a7c15ULL), k % 8);
	for (uintptr_t i = 0; i < READERS; i++)
		assert_int_equal(pthread_create(&r[i], NULL, reader,
						(void *)(i + 1)),
				 0);
	assert_int_equal(pthread_create(&c, NULL, churn, NULL), 0);
	for (uintptr_t i = 0; i < WRITERS; i++)
		assert_int_equal(pthread_create(&w[i], NULL, writer, (void *)i),
				 0);
	for (int i = 0; i < WRITERS; i++)
		pthread_join(w[i], NULL);
	__atomic_store_n(&S.writers_done, 1, __ATOMIC_SEQ_CST);
	for (int i = 0; i < READERS; i++)
		pthread_join(r[i], NULL);
	pthread_join(c, NULL);
	assert_int_equal(S.failures, 0);

	/* Writer 0 left its last batch; segment 3 is unmounted; fillers go. */
	{
		struct kvf_key pre = key_of("filler-");

		assert_int_equal(kvf_remove_prefix(S.e, &pre, true, NULL),
				 KVF_OK);
	}
	s = stats_of(S.e);
	assert_int_equal(s.objects, BATCH);
	assert_int_equal(s.processing, 0);
	assert_int_equal(s.segments, 2);
	for (size_t i = 0; i < BATCH; i++) {
		size_t k = (size_t)((CYCLES - 1) * BATCH) % KEYS_PER_WRITER + i;
		struct kvf_replicas out;

		assert_int_equal(get1(S.e, S.keys[k], &out), KVF_OK);
		expect_bytes += out.count * ((size_of_key(k) + 63) & ~63ULL);
	}
	assert_int_equal(s.used_bytes, expect_bytes);
	print_message("reads that found an object: %llu\n",
		      (unsigned long long)S.reads_ok);
	assert_accounting(S.e);
	kvf_engine_close(S.e);
}

/* Two threads end (or revoke) the same puts in opposite orders. */
struct racer {
	struct kvf_engine *e;
	struct kvf_key *keys;
	size_t n;
	bool reverse;
	bool revoke;
	int ok;
};

static void *race_end(void *arg)
{
	struct racer *r = arg;
	struct kvf_key k[32];
	enum kvf_status st[32];

	for (size_t i = 0; i < r->n; i++)
		k[i] = r->keys[r->reverse ? r->n - 1 - i : i];
	if (r->revoke)
		kvf_batch_put_revoke(r->e, CLIENT, k, r->n, st);
	else
		kvf_batch_put_end(r->e, CLIENT, k, r->n, st);
	for (size_t i = 0; i < r->n; i++)
		r->ok += st[i] == KVF_OK;
	return NULL;
}

static void test_same_puts_ended_twice(void **state)
{
	struct kvf_put_config cfg = { .replica_num = 1 };
	struct kvf_key keys[32];
	uint64_t sizes[32];
	struct kvf_replicas out[32];
	enum kvf_status st[32];
	char names[32][16];
	struct kvf_config c;
	struct kvf_engine *e;

	(void)state;
	kvf_config_init(&c);
	c.durability = KVF_DURABILITY_NONE;
	c.index = KVF_TEST_INDEX;
	/* A loaded machine may take longer than the default TTL: the client
	 * must not expire under the rounds (nothing here heartbeats). */
	c.client_ttl_ms = 3600 * 1000;
	assert_int_equal(kvf_engine_open(&c, &e), KVF_OK);
	assert_test_index(e);
	assert_int_equal(mount(e, CLIENT, 1, 1024 * MIB), KVF_OK);
	for (int i = 0; i < 32; i++) {
		snprintf(names[i], sizeof(names[i]), "race-%d", i);
		keys[i] = key_of(names[i]);
		sizes[i] = 4096;
	}
	for (int round = 0; round < 200; round++) {
		struct racer a = { e, keys, 32, false, round % 3 == 2, 0 };
		struct racer b = { e, keys, 32, true, round % 3 == 1, 0 };
		pthread_t ta, tb;

		assert_int_equal(kvf_batch_put_start(e, CLIENT, keys, sizes,
						     32, &cfg, out, st),
				 KVF_OK);
		pthread_create(&ta, NULL, race_end, &a);
		pthread_create(&tb, NULL, race_end, &b);
		pthread_join(ta, NULL);
		pthread_join(tb, NULL);
		/* Each put ended or revoked exactly once. */
		assert_int_equal(a.ok + b.ok, 32);
		kvf_remove_all(e, true, NULL);
		kvf_batch_put_revoke(e, CLIENT, keys, 32, st);
		assert_int_equal(stats_of(e).objects, 0);
		assert_int_equal(stats_of(e).processing, 0);
		assert_accounting(e);
	}
	kvf_engine_close(e);
}

/*
 * Two putting threads, each in its own placement lane, remove each
 * other's objects: every cycle each puts a batch of its own keys, then
 * (both past a barrier) removes the odd keys of the other's batch of the
 * cycle before and the even ones of the batch before that, freeing into
 * the other's segments: the odd blocks, between held ones, park, and a
 * thread's puts take blocks the other parked (most of a batch is one page
 * size; a few odd sizes make the allocators split and merge leaves under
 * the parked blocks). At the end the last batches are there with their
 * sizes, no two replicas overlap, and every used byte is held.
 */
#define CROSS_CYCLES 120
#define CROSS_BATCH 32

struct cross {
	struct kvf_engine *e;
	pthread_barrier_t *bar;
	unsigned t;
	int failures;
};

static uint64_t cross_size(unsigned c, unsigned i)
{
	return i % 8 == 7 ? (uint64_t)((c + i) % 5 + 1) * 4096 + 100 :
			    64 * 1024;
}

static void cross_keys(char names[][32], struct kvf_key *keys, unsigned t,
		       unsigned c)
{
	for (unsigned i = 0; i < CROSS_BATCH; i++) {
		snprintf(names[i], 32, "cross-%u-%u-%u", t, c, i);
		keys[i] = key_of(names[i]);
	}
}

static void *cross_worker(void *arg)
{
	struct cross *x = arg;
	struct kvf_put_config cfg = { .replica_num = 1 };
	char names[CROSS_BATCH][32];
	struct kvf_key keys[CROSS_BATCH];
	uint64_t sizes[CROSS_BATCH];
	struct kvf_replicas out[CROSS_BATCH];
	enum kvf_status st[CROSS_BATCH];

	for (unsigned c = 0; c < CROSS_CYCLES; c++) {
		cross_keys(names, keys, x->t, c);
		for (unsigned i = 0; i < CROSS_BATCH; i++)
			sizes[i] = cross_size(c, i);
		kvf_batch_put_start(x->e, CLIENT, keys, sizes, CROSS_BATCH,
				    &cfg, out, st);
		for (unsigned i = 0; i < CROSS_BATCH; i++)
			x->failures += st[i] != KVF_OK;
		kvf_batch_put_end(x->e, CLIENT, keys, CROSS_BATCH, st);
		for (unsigned i = 0; i < CROSS_BATCH; i++)
			x->failures += st[i] != KVF_OK;
		pthread_barrier_wait(x->bar);
		/* The odd keys of the other's last batch, the even ones of
		 * the batch before: odd blocks between held ones park. */
		for (unsigned back = 1; back <= 2 && back <= c; back++) {
			cross_keys(names, keys, 1 - x->t, c - back);
			for (unsigned i = 0; i < CROSS_BATCH / 2; i++)
				keys[i] = keys[2 * i + (back == 1)];
			kvf_batch_remove(x->e, keys, CROSS_BATCH / 2, true, st);
			for (unsigned i = 0; i < CROSS_BATCH / 2; i++)
				x->failures += st[i] != KVF_OK;
		}
		pthread_barrier_wait(x->bar);
	}
	return NULL;
}

struct span {
	uint64_t addr, size;
};

static int span_cmp(const void *a, const void *b)
{
	const struct span *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static void test_cross_lane_frees(void **state)
{
	struct span spans[3 * CROSS_BATCH];
	pthread_barrier_t bar;
	struct cross x[2];
	pthread_t t[2];
	struct kvf_config cfg;
	struct kvf_engine *e;
	size_t m = 0;

	(void)state;
	kvf_config_init(&cfg);
	cfg.durability = KVF_DURABILITY_NONE;
	cfg.client_ttl_ms = 3600 * 1000;
	cfg.index = KVF_TEST_INDEX;
	assert_int_equal(kvf_engine_open(&cfg, &e), KVF_OK);
	assert_test_index(e);
	for (uint64_t id = 1; id <= 4; id++)
		assert_int_equal(mount(e, CLIENT, id, 64 * MIB), KVF_OK);
	assert_int_equal(pthread_barrier_init(&bar, NULL, 2), 0);
	for (unsigned i = 0; i < 2; i++) {
		x[i] = (struct cross){ .e = e, .bar = &bar, .t = i };
		assert_int_equal(pthread_create(&t[i], NULL, cross_worker,
						&x[i]),
				 0);
	}
	for (unsigned i = 0; i < 2; i++)
		assert_int_equal(pthread_join(t[i], NULL), 0);
	pthread_barrier_destroy(&bar);
	assert_int_equal(x[0].failures + x[1].failures, 0);
	/* Each thread's last batch, and the even half of the one before. */
	assert_int_equal(stats_of(e).objects, 3 * CROSS_BATCH);
	for (unsigned w = 0; w < 2; w++) {
		for (unsigned c = CROSS_CYCLES - 2; c < CROSS_CYCLES; c++) {
			char names[CROSS_BATCH][32];
			struct kvf_key keys[CROSS_BATCH];

			cross_keys(names, keys, w, c);
			for (unsigned i = 0; i < CROSS_BATCH; i++) {
				struct kvf_replicas out;
				int want = c == CROSS_CYCLES - 1 || i % 2 == 0 ?
						   KVF_OK :
						   KVF_ERR_OBJECT_NOT_FOUND;

				assert_int_equal(get1(e, names[i], &out), want);
				if (want != KVF_OK)
					continue;
				assert_int_equal(out.count, 1);
				assert_int_equal(out.replica[0].size,
						 cross_size(c, i));
				spans[m++] = (struct span){
					out.replica[0].addr,
					out.replica[0].size
				};
			}
		}
	}
	/* Segments are mounted at distinct bases: addresses never collide. */
	qsort(spans, m, sizeof(spans[0]), span_cmp);
	for (size_t i = 1; i < m; i++)
		assert_true(spans[i - 1].addr + spans[i - 1].size <=
			    spans[i].addr);
	assert_accounting(e);
	kvf_engine_close(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_readers_never_see_processing),
		cmocka_unit_test(test_same_puts_ended_twice),
		cmocka_unit_test(test_cross_lane_frees),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
