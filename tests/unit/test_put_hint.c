/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_put_hint.c - put_end after put_start on one thread.
 *
 * A put_end repeating what its thread's put_start accepted finds the records
 * through the put_start's hint instead of probing (batch/put_hint.c).
 * Whatever happened to those records in between (revoked, pre-empted,
 * put again by another client, the engine closed), or however the
 * put_end differs from the put_start (another client, order, a key, a
 * duplicate), every item must get the answer a probe gives; each case
 * also says whether the hint was taken, so the fast path is what ran
 * where it should. Both index kinds.
 */
#include "config.h"

#include <pthread.h>

#include "tests/unit/helpers.h"
#include "batch/put_hint.h"

#define N 64
#define SIZE 4096
#define CLIENT_A 1
#define CLIENT_B 2

struct batch {
	char text[N][40];
	struct kvf_key keys[N];
	uint64_t sizes[N];
	struct kvf_replicas out[N];
	enum kvf_status st[N];
};

static void batch_init(struct batch *b, const char *prefix)
{
	for (int i = 0; i < N; i++) {
		snprintf(b->text[i], sizeof(b->text[i]), "%s-%02d", prefix, i);
		b->keys[i] = key_of(b->text[i]);
		b->sizes[i] = SIZE;
	}
}

static int start(struct kvf_engine *e, uint64_t client, struct batch *b)
{
	struct kvf_put_config cfg = { .replica_num = 1 };

	return kvf_batch_put_start(e, client, b->keys, b->sizes, N, &cfg,
				   b->out, b->st);
}

static int end(struct kvf_engine *e, uint64_t client, struct batch *b)
{
	return kvf_batch_put_end(e, client, b->keys, N, b->st);
}

static void assert_all(const struct batch *b, int status)
{
	for (int i = 0; i < N; i++)
		if ((int)b->st[i] != status)
			fail_msg("item %d: %s, want %s", i,
				 kvf_strerror(b->st[i]), kvf_strerror(status));
}

static void open_engine(struct fixture *f, enum kvf_index_kind kind)
{
	fixture_config(f);
	f->cfg.index = kind;
	assert_int_equal(kvf_engine_open(&f->cfg, &f->e), KVF_OK);
	assert_int_equal(mount(f->e, CLIENT_A, 1, 64 * MIB), KVF_OK);
	assert_int_equal(mount(f->e, CLIENT_B, 2, 64 * MIB), KVF_OK);
}

/* Ended through the hint: complete and readable, counted once. */
static void ends_through_hint(struct fixture *f)
{
	struct batch b;
	uint64_t hinted = kvf__put_hint_claimed();

	batch_init(&b, "plain");
	assert_int_equal(start(f->e, CLIENT_A, &b), KVF_OK);
	assert_int_equal(end(f->e, CLIENT_A, &b), KVF_OK);
	assert_all(&b, KVF_OK);
	assert_int_equal(kvf__put_hint_claimed(), hinted + 1);
	assert_int_equal(stats_of(f->e).objects, N);
	assert_int_equal(stats_of(f->e).processing, 0);
	for (int i = 0; i < N; i++)
		assert_int_equal(get1(f->e, b.text[i], NULL), KVF_OK);
	/* The hint is used up: ending again probes, and hears it ended. */
	assert_int_equal(end(f->e, CLIENT_A, &b), KVF_ERR_PARTIAL);
	assert_all(&b, KVF_ERR_OBJECT_ALREADY_EXISTS);
	assert_int_equal(kvf__put_hint_claimed(), hinted + 1);
}

/*
 * A start that refuses some keys (here: already put) leaves a hint for
 * the keys it accepted, in order, which is what a client ends; ending
 * the whole batch instead probes, and hears the refused key exists.
 */
static void accepted_subset(struct fixture *f)
{
	struct batch b, ok;
	uint64_t hinted;
	size_t k = 0;

	batch_init(&b, "subset");
	assert_int_equal(put_complete(f->e, CLIENT_A, b.text[3], SIZE, 1),
			 KVF_OK);
	assert_int_equal(put_complete(f->e, CLIENT_A, b.text[N - 1], SIZE, 1),
			 KVF_OK);
	assert_int_equal(start(f->e, CLIENT_A, &b), KVF_ERR_PARTIAL);
	for (int i = 0; i < N; i++) {
		bool refused = i == 3 || i == N - 1;

		assert_int_equal(b.st[i], refused ?
						  KVF_ERR_OBJECT_ALREADY_EXISTS :
						  KVF_OK);
		if (!refused)
			ok.keys[k++] = b.keys[i];
	}
	hinted = kvf__put_hint_claimed();
	assert_int_equal(kvf_batch_put_end(f->e, CLIENT_A, ok.keys, k, ok.st),
			 KVF_OK);
	assert_int_equal(kvf__put_hint_claimed(), hinted + 1);
	assert_int_equal(stats_of(f->e).objects, N);

	batch_init(&b, "whole");
	assert_int_equal(put_complete(f->e, CLIENT_A, b.text[0], SIZE, 1),
			 KVF_OK);
	assert_int_equal(start(f->e, CLIENT_A, &b), KVF_ERR_PARTIAL);
	hinted = kvf__put_hint_claimed();
	assert_int_equal(end(f->e, CLIENT_A, &b), KVF_ERR_PARTIAL);
	for (int i = 0; i < N; i++)
		assert_int_equal(b.st[i], i == 0 ?
						  KVF_ERR_OBJECT_ALREADY_EXISTS :
						  KVF_OK);
	assert_int_equal(kvf__put_hint_claimed(), hinted);
	assert_int_equal(stats_of(f->e).objects, 2 * N);
}

/* Another client's end is refused and leaves the hint to its owner. */
static void other_client_refused(struct fixture *f)
{
	struct batch b;
	uint64_t hinted = kvf__put_hint_claimed();

	batch_init(&b, "other");
	assert_int_equal(start(f->e, CLIENT_A, &b), KVF_OK);
	assert_int_equal(end(f->e, CLIENT_B, &b), KVF_ERR_PARTIAL);
	assert_all(&b, KVF_ERR_ILLEGAL_CLIENT);
	assert_int_equal(end(f->e, CLIENT_A, &b), KVF_OK);
	assert_all(&b, KVF_OK);
	assert_int_equal(kvf__put_hint_claimed(), hinted + 1);
}

/* Another order, or a key swapped for one never started: probed. */
static void different_batch_probed(struct fixture *f)
{
	struct batch b, r;
	uint64_t hinted = kvf__put_hint_claimed();

	batch_init(&b, "order");
	assert_int_equal(start(f->e, CLIENT_A, &b), KVF_OK);
	r = b;
	for (int i = 0; i < N; i++)
		r.keys[i] = b.keys[N - 1 - i];
	assert_int_equal(end(f->e, CLIENT_A, &r), KVF_OK);
	assert_all(&r, KVF_OK);

	batch_init(&b, "swap");
	assert_int_equal(start(f->e, CLIENT_A, &b), KVF_OK);
	b.keys[N / 2] = key_of("never-started");
	assert_int_equal(end(f->e, CLIENT_A, &b), KVF_ERR_PARTIAL);
	for (int i = 0; i < N; i++)
		assert_int_equal(b.st[i], i == N / 2 ?
						  KVF_ERR_OBJECT_NOT_FOUND :
						  KVF_OK);
	assert_int_equal(kvf__put_hint_claimed(), hinted);
	assert_int_equal(stats_of(f->e).processing, 1);
}

/* A key repeated in the end batch: both refused, the rest ended. */
static void duplicate_refused(struct fixture *f)
{
	struct batch b;
	uint64_t hinted = kvf__put_hint_claimed();

	batch_init(&b, "dup");
	assert_int_equal(start(f->e, CLIENT_A, &b), KVF_OK);
	b.keys[7] = b.keys[2];
	assert_int_equal(end(f->e, CLIENT_A, &b), KVF_ERR_PARTIAL);
	for (int i = 0; i < N; i++)
		assert_int_equal(b.st[i], i == 2 || i == 7 ?
						  KVF_ERR_DUPLICATE_KEY :
						  KVF_OK);
	assert_int_equal(kvf__put_hint_claimed(), hinted);
}

/* An item revoked between start and end: not found, the rest ended. */
static void revoked_item(struct fixture *f)
{
	struct batch b;

	batch_init(&b, "revoked");
	assert_int_equal(start(f->e, CLIENT_A, &b), KVF_OK);
	assert_int_equal(revoke1(f->e, CLIENT_A, b.text[5]), KVF_OK);
	assert_int_equal(end(f->e, CLIENT_A, &b), KVF_ERR_PARTIAL);
	for (int i = 0; i < N; i++)
		assert_int_equal(b.st[i], i == 5 ? KVF_ERR_OBJECT_NOT_FOUND :
						   KVF_OK);
	assert_int_equal(exist1(f->e, b.text[5]), KVF_ERR_OBJECT_NOT_FOUND);
	assert_int_equal(stats_of(f->e).objects, N - 1);
}

/*
 * Revoked, then put by another client (whose records may take the freed
 * memory): the first client's end is refused item by item and the other
 * client's records stay processing, then end through its own hint.
 */
static void put_again_by_other(struct fixture *f)
{
	struct batch a, b;
	enum kvf_status st[N];
	uint64_t hinted;

	batch_init(&a, "again");
	b = a;
	assert_int_equal(start(f->e, CLIENT_A, &a), KVF_OK);
	assert_int_equal(kvf_batch_put_revoke(f->e, CLIENT_A, a.keys, N, st),
			 KVF_OK);
	kvf__rcu_barrier(); /* the revoked records freed for reuse */
	assert_int_equal(start(f->e, CLIENT_B, &b), KVF_OK);
	assert_int_equal(end(f->e, CLIENT_A, &a), KVF_ERR_PARTIAL);
	assert_all(&a, KVF_ERR_ILLEGAL_CLIENT);
	assert_int_equal(stats_of(f->e).processing, N);
	hinted = kvf__put_hint_claimed();
	assert_int_equal(end(f->e, CLIENT_B, &b), KVF_OK);
	assert_all(&b, KVF_OK);
	assert_int_equal(kvf__put_hint_claimed(), hinted + 1);
}

/*
 * Pre-empted by the same client's second start of the batch: the newest
 * hint ends the new records; the older one, naming replaced records, is
 * found by a second end and rejected (probed: already ended).
 */
static void preempted(struct fixture *f)
{
	struct batch b;
	uint64_t hinted = kvf__put_hint_claimed();

	batch_init(&b, "stuck");
	assert_int_equal(start(f->e, CLIENT_A, &b), KVF_OK);
	test_clock_advance_ms(&f->clock, f->cfg.put_discard_timeout_ms + 1);
	assert_int_equal(start(f->e, CLIENT_A, &b), KVF_OK);
	assert_int_equal(end(f->e, CLIENT_A, &b), KVF_OK);
	assert_all(&b, KVF_OK);
	assert_int_equal(kvf__put_hint_claimed(), hinted + 1);
	assert_int_equal(end(f->e, CLIENT_A, &b), KVF_ERR_PARTIAL);
	assert_all(&b, KVF_ERR_OBJECT_ALREADY_EXISTS);
	assert_int_equal(kvf__put_hint_claimed(), hinted + 1);
	assert_int_equal(stats_of(f->e).objects, N);
}

static void *start_batch(void *arg)
{
	struct fixture *f = arg;
	struct batch *b = malloc(sizeof(*b));

	batch_init(b, "thread");
	if (start(f->e, CLIENT_A, b) != KVF_OK)
		b = NULL;
	kvf_thread_unregister();
	return b;
}

/* Started on another thread: this thread has no hint and probes. */
static void other_thread(struct fixture *f)
{
	uint64_t hinted = kvf__put_hint_claimed();
	struct batch *b;
	pthread_t t;

	assert_int_equal(pthread_create(&t, NULL, start_batch, f), 0);
	assert_int_equal(pthread_join(t, (void **)&b), 0);
	assert_non_null(b);
	assert_int_equal(end(f->e, CLIENT_A, b), KVF_OK);
	assert_all(b, KVF_OK);
	assert_int_equal(kvf__put_hint_claimed(), hinted);
	free(b);
}

static void run(void (*body)(struct fixture *), enum kvf_index_kind kind)
{
	struct fixture f;

	open_engine(&f, kind);
	body(&f);
	kvf_engine_close(f.e);
}

/* A hint that outlives its engine: a new engine (maybe at the same
 * address) holds none of its records. */
static void engine_reopened(enum kvf_index_kind kind)
{
	struct fixture f;
	struct batch b;
	uint64_t hinted = kvf__put_hint_claimed();

	batch_init(&b, "closed");
	open_engine(&f, kind);
	assert_int_equal(start(f.e, CLIENT_A, &b), KVF_OK);
	kvf_engine_close(f.e);
	open_engine(&f, kind);
	assert_int_equal(end(f.e, CLIENT_A, &b), KVF_ERR_PARTIAL);
	assert_all(&b, KVF_ERR_OBJECT_NOT_FOUND);
	assert_int_equal(kvf__put_hint_claimed(), hinted);
	kvf_engine_close(f.e);
}

/* Ended through the hint into a journal: all there after a reopen. */
static void journaled(enum kvf_index_kind kind)
{
	char *dir = test_tmpdir("put-hint");
	struct fixture f;
	struct batch b;
	uint64_t hinted = kvf__put_hint_claimed();

	batch_init(&b, "journaled");
	fixture_config(&f);
	f.cfg.index = kind;
	f.cfg.durability = KVF_DURABILITY_STRICT;
	f.cfg.data_dir = dir;
	assert_int_equal(kvf_engine_open(&f.cfg, &f.e), KVF_OK);
	assert_int_equal(mount(f.e, CLIENT_A, 1, 64 * MIB), KVF_OK);
	assert_int_equal(start(f.e, CLIENT_A, &b), KVF_OK);
	assert_int_equal(end(f.e, CLIENT_A, &b), KVF_OK);
	assert_int_equal(kvf__put_hint_claimed(), hinted + 1);
	kvf_engine_close(f.e);
	assert_int_equal(kvf_engine_open(&f.cfg, &f.e), KVF_OK);
	assert_int_equal(stats_of(f.e).recovered_objects, N);
	for (int i = 0; i < N; i++)
		assert_int_equal(exist1(f.e, b.text[i]), KVF_OK);
	kvf_engine_close(f.e);
	free(dir);
}

#define BOTH(name, body)                                 \
	static void name(void **state)                   \
	{                                                \
		(void)state;                             \
		run(body, KVF_INDEX_BUCKET);             \
		run(body, KVF_INDEX_LFHT);               \
	}

BOTH(test_ends_through_hint, ends_through_hint)
BOTH(test_accepted_subset, accepted_subset)
BOTH(test_other_client_refused, other_client_refused)
BOTH(test_different_batch_probed, different_batch_probed)
BOTH(test_duplicate_refused, duplicate_refused)
BOTH(test_revoked_item, revoked_item)
BOTH(test_put_again_by_other, put_again_by_other)
BOTH(test_preempted, preempted)
BOTH(test_other_thread, other_thread)

static void test_engine_reopened(void **state)
{
	(void)state;
	engine_reopened(KVF_INDEX_BUCKET);
	engine_reopened(KVF_INDEX_LFHT);
}

static void test_journaled(void **state)
{
	(void)state;
	journaled(KVF_INDEX_BUCKET);
	journaled(KVF_INDEX_LFHT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ends_through_hint),
		cmocka_unit_test(test_accepted_subset),
		cmocka_unit_test(test_other_client_refused),
		cmocka_unit_test(test_different_batch_probed),
		cmocka_unit_test(test_duplicate_refused),
		cmocka_unit_test(test_revoked_item),
		cmocka_unit_test(test_put_again_by_other),
		cmocka_unit_test(test_preempted),
		cmocka_unit_test(test_other_thread),
		cmocka_unit_test(test_engine_reopened),
		cmocka_unit_test(test_journaled),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
