/* SPDX-License-Identifier: MIT */
/*
 * tests/stress/test_put_race.c - concurrent put_start of one key.
 *
 * Two clients race put_start/put_revoke of the same key. A put that is
 * processing and younger than the discard timeout may not be pre-empted,
 * so whichever thread's put_start succeeds owns the key until it revokes
 * it: its revoke must always succeed, and nothing may be left allocated.
 * Runs on the engine's real clock (the threads read it at different
 * moments, which is what the race needs), against both index kinds; the
 * same interleaving is also replayed deterministically on an injected
 * clock, whole batches of the same keys race (each key won once), and
 * a mixed run checks that a client's put_end of its own put
 * always succeeds.
 */
#include "config.h"

#include <pthread.h>

#include "tests/unit/helpers.h"
#include "tests/stress/audit.h"

/* As in the report; ~10 s under ThreadSanitizer here. */
#define ROUNDS 100000

struct racer {
	struct kvf_engine *e;
	uint64_t client;
	uint64_t started;
	uint64_t bad_revokes; /* own puts whose revoke or end failed */
	int last_bad;
};

static void *race(void *arg)
{
	struct racer *r = arg;
	struct kvf_key key = key_of("k");
	struct kvf_put_config cfg = { .replica_num = 1 };
	uint64_t size = 4096;
	struct kvf_replicas out;
	enum kvf_status st;

	for (int i = 0; i < ROUNDS; i++) {
		int ret = kvf_batch_put_start(r->e, r->client, &key, &size, 1,
					      &cfg, &out, &st);

		if (ret != KVF_OK)
			continue; /* the other client holds the key */
		r->started++;
		ret = kvf_batch_put_revoke(r->e, r->client, &key, 1, &st);
		if (ret != KVF_OK) {
			r->bad_revokes++;
			r->last_bad = ret == KVF_ERR_PARTIAL ? (int)st : ret;
		}
	}
	return NULL;
}

/*
 * Mixed: each client puts (start, end) keys of a small shared set and
 * removes the ones it finds complete. A put_start that succeeded owns the
 * key until its put_end, which must therefore succeed.
 */
#define MIXED_KEYS 16
#define MIXED_ROUNDS 5000

static void *mixed(void *arg)
{
	struct racer *r = arg;
	struct kvf_put_config cfg = { .replica_num = 1 };
	unsigned seed = (unsigned)r->client;
	char name[16];

	for (int i = 0; i < MIXED_ROUNDS; i++) {
		struct kvf_key key;
		uint64_t size = 4096;
		struct kvf_replicas out;
		enum kvf_status st;
		int ret;

		snprintf(name, sizeof(name), "m-%d",
			 rand_r(&seed) % MIXED_KEYS);
		key = key_of(name);
		ret = kvf_batch_put_start(r->e, r->client, &key, &size, 1,
					  &cfg, &out, &st);
		if (ret != KVF_OK) {
			/* Taken: remove it if complete (errors expected). */
			kvf_batch_remove(r->e, &key, 1, false, &st);
			continue;
		}
		r->started++;
		ret = end1(r->e, r->client, name);
		if (ret != KVF_OK) {
			r->bad_revokes++;
			r->last_bad = ret;
		}
	}
	return NULL;
}

/*
 * Whole batches: both clients put_start the same BATCH_KEYS keys at
 * once, round after round (a barrier starts each). Every key must go to
 * exactly one of them, the other hearing it exists, however their
 * lookups and inserts interleave: the insert trusts its batch's lookup
 * only while no insert of the key's group came between
 * (kvf__index_insert_since). Each winner then revokes its keys.
 */
#define BATCH_KEYS 512
#define BATCH_ROUNDS 100

struct batch_race {
	pthread_barrier_t barrier;
	char names[BATCH_KEYS][24];
	struct kvf_key keys[BATCH_KEYS];
	uint32_t wins[BATCH_KEYS]; /* this round's; atomic */
	uint32_t bad_wins;	   /* keys won by both or none; atomic */
	uint32_t bad_status;	   /* losers not told it exists; atomic */
	uint32_t running;	   /* threads past the barrier; atomic */
};

static struct batch_race batch_race;

static void *race_batches(void *arg)
{
	struct racer *r = arg;
	struct batch_race *br = &batch_race;
	struct kvf_put_config cfg = { .replica_num = 1 };
	uint64_t sizes[BATCH_KEYS];
	struct kvf_replicas out[BATCH_KEYS];
	enum kvf_status st[BATCH_KEYS];
	struct kvf_key mine[BATCH_KEYS];

	for (int i = 0; i < BATCH_KEYS; i++)
		sizes[i] = 4096;
	for (int round = 0; round < BATCH_ROUNDS; round++) {
		size_t nr_mine = 0;

		pthread_barrier_wait(&br->barrier);
		/* Both running before either starts (a barrier's wake-ups
		 * alone let one batch finish before the other began). */
		__atomic_fetch_add(&br->running, 1, __ATOMIC_ACQ_REL);
		while (__atomic_load_n(&br->running, __ATOMIC_ACQUIRE) <
		       2 * (uint32_t)(round + 1))
			;
		kvf_batch_put_start(r->e, r->client, br->keys, sizes,
				    BATCH_KEYS, &cfg, out, st);
		for (int i = 0; i < BATCH_KEYS; i++) {
			if (st[i] == KVF_OK) {
				__atomic_fetch_add(&br->wins[i], 1,
						   __ATOMIC_RELAXED);
				mine[nr_mine++] = br->keys[i];
			} else if (st[i] != KVF_ERR_OBJECT_ALREADY_EXISTS) {
				__atomic_fetch_add(&br->bad_status, 1,
						   __ATOMIC_RELAXED);
			}
		}
		r->started += nr_mine;
		pthread_barrier_wait(&br->barrier);
		/* Both batches are done: each key has one winner. */
		if (r->client == 1)
			for (int i = 0; i < BATCH_KEYS; i++)
				if (__atomic_exchange_n(&br->wins[i], 0,
							__ATOMIC_RELAXED) != 1)
					__atomic_fetch_add(&br->bad_wins, 1,
							   __ATOMIC_RELAXED);
		if (nr_mine &&
		    kvf_batch_put_revoke(r->e, r->client, mine, nr_mine, st) !=
			    KVF_OK)
			r->bad_revokes++;
		pthread_barrier_wait(&br->barrier);
	}
	return NULL;
}

static void run(enum kvf_index_kind kind, void *(*worker)(void *))
{
	struct racer r[2];
	pthread_t t[2];
	struct kvf_engine_stats s;
	struct kvf_config cfg;
	struct kvf_engine *e;

	kvf_config_init(&cfg);
	cfg.durability = KVF_DURABILITY_NONE;
	cfg.background = false;
	cfg.index = kind;
	assert_int_equal(kvf_engine_open(&cfg, &e), KVF_OK);
	assert_int_equal(mount(e, 1, 1, 8 * MIB), KVF_OK);
	assert_int_equal(mount(e, 2, 2, 8 * MIB), KVF_OK);
	for (int i = 0; i < 2; i++) {
		r[i] = (struct racer){ .e = e, .client = (uint64_t)i + 1 };
		assert_int_equal(pthread_create(&t[i], NULL, worker, &r[i]),
				 0);
	}
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < 2; i++) {
		if (r[i].bad_revokes)
			print_error("index %d client %d: %llu of %llu own "
				    "puts not revoked or ended (last: %s)\n",
				    (int)kind, i + 1,
				    (unsigned long long)r[i].bad_revokes,
				    (unsigned long long)r[i].started,
				    kvf_status_name(r[i].last_bad));
		assert_int_equal(r[i].bad_revokes, 0);
	}
	assert_true(r[0].started + r[1].started > 0);
	assert_accounting(e);
	assert_int_equal(kvf_remove_all(e, true, NULL), KVF_OK);
	assert_int_equal(kvf_engine_get_stats(e, &s), KVF_OK);
	assert_int_equal(s.objects, 0);
	assert_int_equal(s.processing, 0);
	assert_int_equal(s.deferred_frees, 0);
	assert_int_equal(s.used_bytes, 0);
	kvf_engine_close(e);
}

/*
 * The race, made deterministic on an injected clock: client 2's batch
 * read the clock just before client 1's put started, so client 1's
 * record is "younger" than client 2's now. It is not stuck.
 */
static void younger_put_kept(enum kvf_index_kind kind)
{
	struct fixture f;

	fixture_config(&f);
	f.cfg.index = kind;
	assert_int_equal(kvf_engine_open(&f.cfg, &f.e), KVF_OK);
	assert_int_equal(mount(f.e, 1, 1, 8 * MIB), KVF_OK);
	assert_int_equal(mount(f.e, 2, 2, 8 * MIB), KVF_OK);
	assert_int_equal(put1(f.e, 1, "k", 4096, 1, NULL), KVF_OK);
	__atomic_fetch_sub(&f.clock.now_ns, 1, __ATOMIC_RELAXED);
	assert_int_equal(put1(f.e, 2, "k", 4096, 1, NULL),
			 KVF_ERR_OBJECT_ALREADY_EXISTS);
	assert_int_equal(revoke1(f.e, 1, "k"), KVF_OK);
	assert_accounting(f.e);
	kvf_engine_close(f.e);
}

static void test_younger_put_kept(void **state)
{
	(void)state;
	younger_put_kept(KVF_INDEX_LFHT);
	younger_put_kept(KVF_INDEX_BUCKET);
}

static void test_put_start_race_lfht(void **state)
{
	(void)state;
	run(KVF_INDEX_LFHT, race);
}

static void test_put_start_race_bucket(void **state)
{
	(void)state;
	run(KVF_INDEX_BUCKET, race);
}

static void batch_race_run(enum kvf_index_kind kind)
{
	struct batch_race *br = &batch_race;

	memset(br, 0, sizeof(*br));
	for (int i = 0; i < BATCH_KEYS; i++) {
		snprintf(br->names[i], sizeof(br->names[i]), "batch-key-%d",
			 i);
		br->keys[i] = key_of(br->names[i]);
	}
	assert_int_equal(pthread_barrier_init(&br->barrier, NULL, 2), 0);
	run(kind, race_batches);
	pthread_barrier_destroy(&br->barrier);
	assert_int_equal(br->bad_wins, 0);
	assert_int_equal(br->bad_status, 0);
}

static void test_put_start_batch_race_lfht(void **state)
{
	(void)state;
	batch_race_run(KVF_INDEX_LFHT);
}

static void test_put_start_batch_race_bucket(void **state)
{
	(void)state;
	batch_race_run(KVF_INDEX_BUCKET);
}

static void test_mixed_own_puts_end_lfht(void **state)
{
	(void)state;
	run(KVF_INDEX_LFHT, mixed);
}

static void test_mixed_own_puts_end_bucket(void **state)
{
	(void)state;
	run(KVF_INDEX_BUCKET, mixed);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_younger_put_kept),
		cmocka_unit_test(test_put_start_race_lfht),
		cmocka_unit_test(test_put_start_race_bucket),
		cmocka_unit_test(test_put_start_batch_race_lfht),
		cmocka_unit_test(test_put_start_batch_race_bucket),
		cmocka_unit_test(test_mixed_own_puts_end_lfht),
		cmocka_unit_test(test_mixed_own_puts_end_bucket),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
