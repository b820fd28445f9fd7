/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_batch.c - every batch operation and its error paths,
 * asserting exact statuses and the resulting state.
 */
#include "config.h"

#include <unistd.h>

#include "base/xorshift.h"
#include "tests/unit/helpers.h"

#define C1 101
#define C2 202
#define KIB 1024ULL

static int setup_two_segments(void **state)
{
	struct fixture *f;

	fixture_setup(state);
	f = *state;
	assert_int_equal(mount(f->e, C1, 1, 64 * MIB), KVF_OK);
	assert_int_equal(mount(f->e, C2, 2, 64 * MIB), KVF_OK);
	return 0;
}

static void test_refused_batches(void **state)
{
	struct fixture *f = *state;
	struct kvf_key keys[2] = { key_of("a"), key_of("b") };
	uint64_t sizes[2] = { MIB, MIB };
	struct kvf_put_config cfg = { .replica_num = 1 };
	struct kvf_replicas out[2];
	enum kvf_status st[2] = { 99, 99 };

	assert_int_equal(kvf_batch_put_start(f->e, C1, NULL, sizes, 2, &cfg,
					     out, st),
			 KVF_ERR_INVALID_ARGUMENT);
	assert_int_equal(st[0], KVF_ERR_INVALID_ARGUMENT);
	assert_int_equal(kvf_batch_put_start(f->e, C1, keys, NULL, 2, &cfg,
					     out, st),
			 KVF_ERR_INVALID_ARGUMENT);
	assert_int_equal(kvf_batch_put_start(f->e, C1, keys, sizes, 2, &cfg,
					     NULL, st),
			 KVF_ERR_INVALID_ARGUMENT);
	assert_int_equal(kvf_batch_put_start(f->e, C1, keys, sizes, 2, &cfg,
					     out, NULL),
			 KVF_ERR_INVALID_ARGUMENT);
	assert_int_equal(kvf_batch_put_start(f->e, C1, keys, sizes, 0, &cfg,
					     out, st),
			 KVF_ERR_BATCH_EMPTY);
	assert_int_equal(kvf_batch_get(f->e, keys, 2, NULL, st, NULL),
			 KVF_ERR_INVALID_ARGUMENT);
	assert_int_equal(kvf_batch_exist(NULL, keys, 2, st),
			 KVF_ERR_INVALID_ARGUMENT);
	assert_int_equal(kvf_batch_remove(f->e, keys, 0, false, st),
			 KVF_ERR_BATCH_EMPTY);
	/* Nothing changed. */
	assert_int_equal(stats_of(f->e).processing, 0);
	assert_int_equal(stats_of(f->e).used_bytes, 0);
}

static void test_batch_too_large(void **state)
{
	struct fixture *f = *state;
	size_t n = f->cfg.max_batch + 1;
	struct kvf_key *keys = calloc(n, sizeof(*keys));
	enum kvf_status *st = calloc(n, sizeof(*st));

	for (size_t i = 0; i < n; i++)
		keys[i] = key_of("k");
	assert_int_equal(kvf_batch_exist(f->e, keys, n, st),
			 KVF_ERR_BATCH_TOO_LARGE);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(st[i], KVF_ERR_BATCH_TOO_LARGE);
	free(keys);
	free(st);
}

static void test_put_start_batch_errors(void **state)
{
	struct fixture *f = *state;
	struct kvf_key k = key_of("obj");
	uint64_t size = MIB, bogus = 999;
	struct kvf_put_config cfg = { .replica_num = 1 };
	struct kvf_replicas out;
	enum kvf_status st;

	assert_int_equal(kvf_batch_put_start(f->e, 777, &k, &size, 1, &cfg,
					     &out, &st),
			 KVF_ERR_CLIENT_NOT_FOUND);
	assert_int_equal(st, KVF_ERR_CLIENT_NOT_FOUND);
	cfg.replica_num = 0;
	assert_int_equal(kvf_batch_put_start(f->e, C1, &k, &size, 1, &cfg,
					     &out, &st),
			 KVF_ERR_INVALID_PARAMS);
	cfg.replica_num = KVF_MAX_REPLICAS + 1;
	assert_int_equal(kvf_batch_put_start(f->e, C1, &k, &size, 1, &cfg,
					     &out, &st),
			 KVF_ERR_INVALID_PARAMS);
	cfg.replica_num = 3; /* two segments mounted */
	assert_int_equal(kvf_batch_put_start(f->e, C1, &k, &size, 1, &cfg,
					     &out, &st),
			 KVF_ERR_NOT_ENOUGH_SEGMENTS);
	cfg.replica_num = 1;
	cfg.preferred_segments = &bogus;
	cfg.nr_preferred = 1;
	assert_int_equal(kvf_batch_put_start(f->e, C1, &k, &size, 1, &cfg,
					     &out, &st),
			 KVF_ERR_SEGMENT_NOT_FOUND);
	assert_int_equal(exist1(f->e, "obj"), KVF_ERR_OBJECT_NOT_FOUND);
	assert_int_equal(stats_of(f->e).processing, 0);
	assert_int_equal(stats_of(f->e).used_bytes, 0);
}

static void test_put_start_item_errors(void **state)
{
	struct fixture *f = *state;
	char *longkey = malloc(f->cfg.max_key_len + 1);
	struct kvf_key keys[8];
	uint64_t sizes[8];
	struct kvf_put_config cfg = { .replica_num = 1 };
	struct kvf_replicas out[8];
	enum kvf_status st[8];
	struct kvf_engine_stats s;

	memset(longkey, 'x', f->cfg.max_key_len + 1);
	assert_int_equal(put_complete(f->e, C1, "exists", MIB, 1), KVF_OK);
	assert_int_equal(put1(f->e, C1, "pending", MIB, 1, NULL), KVF_OK);
	keys[0] = key_of("good");           sizes[0] = MIB;
	keys[1] = (struct kvf_key){ "", 0 }; sizes[1] = MIB;
	keys[2] = (struct kvf_key){ longkey, f->cfg.max_key_len + 1 };
	sizes[2] = MIB;
	keys[3] = key_of("zero");           sizes[3] = 0;
	keys[4] = key_of("dup");            sizes[4] = MIB;
	keys[5] = key_of("dup");            sizes[5] = MIB;
	keys[6] = key_of("exists");         sizes[6] = MIB;
	keys[7] = key_of("huge");           sizes[7] = 65 * MIB;
	assert_int_equal(kvf_batch_put_start(f->e, C1, keys, sizes, 8, &cfg,
					     out, st),
			 KVF_ERR_PARTIAL);
	assert_int_equal(st[0], KVF_OK);
	assert_int_equal(st[1], KVF_ERR_INVALID_KEY);
	assert_int_equal(st[2], KVF_ERR_INVALID_KEY);
	assert_int_equal(st[3], KVF_ERR_INVALID_PARAMS);
	assert_int_equal(st[4], KVF_ERR_DUPLICATE_KEY);
	assert_int_equal(st[5], KVF_ERR_DUPLICATE_KEY);
	assert_int_equal(st[6], KVF_ERR_OBJECT_ALREADY_EXISTS);
	assert_int_equal(st[7], KVF_ERR_INVALID_PARAMS); /* fits no segment */
	/* A processing object not yet stuck cannot be taken over. */
	assert_int_equal(put1(f->e, C2, "pending", MIB, 1, NULL),
			 KVF_ERR_OBJECT_ALREADY_EXISTS);
	s = stats_of(f->e);
	assert_int_equal(s.objects, 1);
	assert_int_equal(s.processing, 2); /* "pending" and "good" */
	assert_true(s.used_bytes >= 3 * MIB && s.used_bytes < 4 * MIB);
	/* Three records live: at least one arena chunk is mapped. */
	assert_true(s.record_bytes >= 2 * MIB);
	/* A key of exactly the maximum length is fine. */
	keys[0] = (struct kvf_key){ longkey, f->cfg.max_key_len };
	assert_int_equal(kvf_batch_put_start(f->e, C1, keys, sizes, 1, &cfg,
					     out, st),
			 KVF_OK);
	free(longkey);
}

/*
 * With background work on, record memory for the expected objects (96
 * bytes each, whole 2 MiB chunks) is faulted in ahead; it is reported as
 * reserve, not as record memory, until records take it.
 */
static void test_expected_objects_faulted_ahead(void **state)
{
	struct fixture f = { 0 };
	struct kvf_engine_stats s;
	const uint64_t chunks = 13; /* 200,000 x 128 bytes, rounded up */

	(void)state;
	fixture_config(&f);
	f.cfg.background = true;
	f.cfg.expected_objects = 200000;
	assert_int_equal(kvf_engine_open(&f.cfg, &f.e), KVF_OK);
	for (int i = 0; i < 60000; i++) {
		s = stats_of(f.e);
		if (s.record_reserve_bytes >= chunks * 2 * MIB)
			break;
		usleep(1000); /* the prefault thread's pace; a minute at most */
	}
	assert_int_equal(s.record_reserve_bytes, chunks * 2 * MIB);
	assert_int_equal(s.record_bytes, 0);
	kvf_engine_close(f.e);
}

/*
 * The memory counters: the index reports its table (the lfht index
 * cannot), and the allocators' bookkeeping grows by a block slot or more
 * per object put.
 */
static void test_memory_stats(void **state)
{
	struct fixture *f = *state;
	struct kvf_engine_stats before = stats_of(f->e), after;
	char name[16];

	if (f->cfg.index == KVF_INDEX_LFHT)
		assert_int_equal(before.index_bytes, 0);
	else
		assert_true(before.index_bytes >= 64 * 1024);
	assert_true(before.allocator_bytes > 0);
	for (int i = 0; i < 600; i++) {
		snprintf(name, sizeof(name), "m%d", i);
		assert_int_equal(put_complete(f->e, C1, name, 4096, 1),
				 KVF_OK);
	}
	after = stats_of(f->e);
	assert_true(after.allocator_bytes >= before.allocator_bytes + 600 * 16);
	assert_true(after.index_bytes >= before.index_bytes);
}

static void test_put_start_placement(void **state)
{
	struct fixture *f = *state;
	struct kvf_key k = key_of("two");
	uint64_t size = 3 * MIB, pref = 2;
	struct kvf_put_config cfg = { .replica_num = 2,
				      .preferred_segments = &pref,
				      .nr_preferred = 1 };
	struct kvf_segment_info info;
	struct kvf_replicas out, got;
	enum kvf_status st;

	assert_int_equal(kvf_batch_put_start(f->e, C1, &k, &size, 1, &cfg,
					     &out, &st),
			 KVF_OK);
	assert_int_equal(out.count, 2);
	assert_int_equal(out.replica[0].segment_id, 2);
	assert_int_not_equal(out.replica[0].segment_id,
			     out.replica[1].segment_id);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(kvf_segment_query(f->e,
						   out.replica[i].segment_id,
						   &info),
				 KVF_OK);
		assert_int_equal(out.replica[i].size, size);
		assert_true(out.replica[i].addr >= info.base);
		assert_true(out.replica[i].addr + size <= info.base + info.size);
		assert_true(info.used_bytes >= size);
	}
	assert_int_equal(get1(f->e, "two", NULL), KVF_ERR_OBJECT_NOT_READY);
	assert_int_equal(end1(f->e, C1, "two"), KVF_OK);
	assert_int_equal(get1(f->e, "two", &got), KVF_OK);
	assert_replicas_equal(&got, &out);
}

static void test_put_end_errors(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(end1(f->e, C1, "nothing"), KVF_ERR_OBJECT_NOT_FOUND);
	assert_int_equal(put1(f->e, C1, "mine", MIB, 1, NULL), KVF_OK);
	assert_int_equal(end1(f->e, C2, "mine"), KVF_ERR_ILLEGAL_CLIENT);
	assert_int_equal(revoke1(f->e, C2, "mine"), KVF_ERR_ILLEGAL_CLIENT);
	assert_int_equal(exist1(f->e, "mine"), KVF_ERR_OBJECT_NOT_FOUND);
	assert_int_equal(end1(f->e, C1, "mine"), KVF_OK);
	assert_int_equal(end1(f->e, C1, "mine"), KVF_ERR_OBJECT_ALREADY_EXISTS);
	assert_int_equal(revoke1(f->e, C1, "mine"),
			 KVF_ERR_OBJECT_ALREADY_EXISTS);
	assert_int_equal(exist1(f->e, "mine"), KVF_OK);
	assert_int_equal(stats_of(f->e).objects, 1);
	assert_int_equal(stats_of(f->e).processing, 0);
}

static void test_revoke_frees(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(put1(f->e, C1, "r", 5 * MIB, 2, NULL), KVF_OK);
	assert_true(stats_of(f->e).used_bytes >= 10 * MIB);
	assert_int_equal(revoke1(f->e, C1, "r"), KVF_OK);
	assert_int_equal(stats_of(f->e).used_bytes, 0);
	assert_int_equal(stats_of(f->e).processing, 0);
	assert_int_equal(end1(f->e, C1, "r"), KVF_ERR_OBJECT_NOT_FOUND);
	assert_int_equal(revoke1(f->e, C1, "r"), KVF_ERR_OBJECT_NOT_FOUND);
	/* The key is free for a new put. */
	assert_int_equal(put_complete(f->e, C2, "r", MIB, 1), KVF_OK);
}

static void test_get_and_exist(void **state)
{
	struct fixture *f = *state;
	struct kvf_key keys[3] = { key_of("a"), key_of("missing"),
				   key_of("b") };
	struct kvf_replicas out[3];
	enum kvf_status st[3];
	uint64_t ttl = 0;

	assert_int_equal(put_complete(f->e, C1, "a", MIB, 1), KVF_OK);
	assert_int_equal(put_complete(f->e, C1, "b", 2 * MIB, 2), KVF_OK);
	assert_int_equal(kvf_batch_get(f->e, keys, 3, out, st, &ttl),
			 KVF_ERR_PARTIAL);
	assert_int_equal(ttl, f->cfg.lease_ttl_ms);
	assert_int_equal(st[0], KVF_OK);
	assert_int_equal(st[1], KVF_ERR_OBJECT_NOT_FOUND);
	assert_int_equal(st[2], KVF_OK);
	assert_int_equal(out[0].count, 1);
	assert_int_equal(out[2].count, 2);
	assert_int_equal(out[2].replica[1].size, 2 * MIB);
	/* Exist: not-found is an answer, not a failure. */
	assert_int_equal(kvf_batch_exist(f->e, keys, 3, st), KVF_OK);
	assert_int_equal(st[0], KVF_OK);
	assert_int_equal(st[1], KVF_ERR_OBJECT_NOT_FOUND);
	assert_int_equal(st[2], KVF_OK);
	keys[1] = keys[0];
	assert_int_equal(kvf_batch_exist(f->e, keys, 3, st), KVF_ERR_PARTIAL);
	assert_int_equal(st[0], KVF_ERR_DUPLICATE_KEY);
	assert_int_equal(st[1], KVF_ERR_DUPLICATE_KEY);
	assert_int_equal(st[2], KVF_OK);
}

/*
 * Duplicate detection against a brute-force reference, on random batches
 * on both sides of the small-batch filter (up to 128 keys) and the table
 * above it: keys drawn from a pool small enough to repeat, some of them
 * invalid, half the pool stored.
 */
static void test_duplicates_randomised(void **state)
{
	struct fixture *f = *state;
	enum { POOL = 400, MAXN = 300, ROUNDS = 300 };
	static char names[POOL][24];
	static struct kvf_key keys[MAXN];
	static enum kvf_status st[MAXN];
	uint64_t rng = 0x9e3779b97f4a7c15ULL;

	for (int k = 0; k < POOL; k++) {
		snprintf(names[k], sizeof(names[k]), "dup-%d", k);
		if (k % 2 == 0)
			assert_int_equal(put_complete(f->e, C1, names[k], 4096, 1),
					 KVF_OK);
	}
	for (int r = 0; r < ROUNDS; r++) {
		size_t n = 2 + (size_t)(kvf__xorshift64s(&rng) % (MAXN - 1));
		/* Pools from n distinct-ish keys to many repeats. */
		uint64_t span = 1 + kvf__xorshift64s(&rng) % POOL;

		for (size_t i = 0; i < n; i++) {
			uint64_t k = kvf__xorshift64s(&rng) % span;

			keys[i] = key_of(names[k]);
			if (kvf__xorshift64s(&rng) % 50 == 0)
				keys[i].len = 0; /* invalid */
		}
		kvf_batch_exist(f->e, keys, n, st);
		for (size_t i = 0; i < n; i++) {
			size_t k = (size_t)(keys[i].data - names[0]) /
				   sizeof(names[0]);
			bool twin = false;

			if (!keys[i].len) {
				assert_int_equal(st[i], KVF_ERR_INVALID_KEY);
				continue;
			}
			for (size_t j = 0; j < n && !twin; j++)
				twin = j != i && keys[j].len &&
				       keys[j].data == keys[i].data;
			if (twin)
				assert_int_equal(st[i], KVF_ERR_DUPLICATE_KEY);
			else if (k % 2) /* odd names were never stored */
				assert_int_equal(st[i], KVF_ERR_OBJECT_NOT_FOUND);
			else
				assert_int_equal(st[i], KVF_OK);
		}
	}
}

static void test_remove_rules(void **state)
{
	struct fixture *f = *state;
	struct kvf_key k = key_of("pinned");
	uint64_t size = MIB;
	struct kvf_put_config cfg = { .replica_num = 1, .hard_pin = true };
	struct kvf_replicas out;
	enum kvf_status st;

	assert_int_equal(remove1(f->e, "none", false), KVF_ERR_OBJECT_NOT_FOUND);
	assert_int_equal(put1(f->e, C1, "p", MIB, 1, NULL), KVF_OK);
	assert_int_equal(remove1(f->e, "p", false), KVF_ERR_OBJECT_NOT_READY);
	assert_int_equal(remove1(f->e, "p", true), KVF_ERR_OBJECT_NOT_READY);
	assert_int_equal(end1(f->e, C1, "p"), KVF_OK);
	/* No lease yet: put_end grants none. */
	assert_int_equal(get1(f->e, "p", NULL), KVF_OK);
	assert_int_equal(remove1(f->e, "p", false), KVF_ERR_OBJECT_HAS_LEASE);
	assert_int_equal(exist1(f->e, "p"), KVF_OK);
	test_clock_advance_ms(&f->clock, f->cfg.lease_ttl_ms + 1);
	assert_int_equal(remove1(f->e, "p", false), KVF_OK);
	assert_int_equal(exist1(f->e, "p"), KVF_ERR_OBJECT_NOT_FOUND);
	assert_int_equal(stats_of(f->e).used_bytes, 0);
	/* Exist also extends the lease; force overrides it. */
	assert_int_equal(put_complete(f->e, C1, "q", MIB, 1), KVF_OK);
	assert_int_equal(exist1(f->e, "q"), KVF_OK);
	assert_int_equal(remove1(f->e, "q", false), KVF_ERR_OBJECT_HAS_LEASE);
	assert_int_equal(remove1(f->e, "q", true), KVF_OK);
	/* Hard pin. */
	assert_int_equal(kvf_batch_put_start(f->e, C1, &k, &size, 1, &cfg,
					     &out, &st),
			 KVF_OK);
	assert_int_equal(end1(f->e, C1, "pinned"), KVF_OK);
	assert_int_equal(remove1(f->e, "pinned", false), KVF_ERR_OBJECT_PINNED);
	assert_int_equal(remove1(f->e, "pinned", true), KVF_OK);
	assert_int_equal(stats_of(f->e).objects, 0);
}

static void test_remove_all_and_prefix(void **state)
{
	struct fixture *f = *state;
	struct kvf_key empty = { "", 0 }, pre = key_of("model-a/");
	char key[64];
	uint64_t removed = 0;

	for (int i = 0; i < 300; i++) {
		snprintf(key, sizeof(key), "model-%c/%d", i % 3 ? 'a' : 'b', i);
		assert_int_equal(put_complete(f->e, C1, key, 64 * 1024, 1),
				 KVF_OK);
	}
	assert_int_equal(put1(f->e, C1, "model-a/processing", MIB, 1, NULL),
			 KVF_OK);
	assert_int_equal(exist1(f->e, "model-a/1"), KVF_OK); /* leased */
	assert_int_equal(kvf_remove_prefix(f->e, &empty, false, &removed),
			 KVF_ERR_INVALID_KEY);
	assert_int_equal(kvf_remove_prefix(f->e, &pre, false, &removed),
			 KVF_OK);
	assert_int_equal(removed, 199);
	assert_int_equal(exist1(f->e, "model-a/1"), KVF_OK);
	assert_int_equal(exist1(f->e, "model-a/2"), KVF_ERR_OBJECT_NOT_FOUND);
	assert_int_equal(exist1(f->e, "model-b/0"), KVF_OK);
	assert_int_equal(kvf_remove_all(f->e, false, &removed), KVF_OK);
	assert_int_equal(removed, 99); /* model-b/0 and model-a/1 leased */
	assert_int_equal(kvf_remove_all(f->e, true, &removed), KVF_OK);
	assert_int_equal(removed, 2);
	assert_int_equal(stats_of(f->e).objects, 0);
	assert_int_equal(stats_of(f->e).processing, 1);
}

static void test_status_strings(void **state)
{
	(void)state;
	assert_string_equal(kvf_status_name(KVF_ERR_NO_SPACE),
			    "KVF_ERR_NO_SPACE");
	assert_string_equal(kvf_status_name(KVF_OK), "KVF_OK");
	assert_string_equal(kvf_strerror(KVF_ERR_OBJECT_HAS_LEASE),
			    "object has a lease");
	assert_string_equal(kvf_strerror(12345), "unknown status");
	assert_string_equal(kvf_status_name(-12345), "KVF_UNKNOWN");
}

/*
 * A batch remove frees its buffers grouped by segment: one and two
 * replicas in two segments, sizes mixed, unknown keys among them, a batch
 * small enough for the stack and one that is not. Every freed byte comes
 * back, per segment, and the space is usable again.
 */
#define GROUPED 350

static void put_grouped(struct fixture *f, char names[][16], uint64_t *bytes)
{
	*bytes = 0;
	for (int i = 0; i < GROUPED; i++) {
		uint64_t size = 4096 * (1 + i % 7);
		uint32_t replicas = i % 5 ? 2 : 1;

		snprintf(names[i], 16, "g%d", i);
		assert_int_equal(put_complete(f->e, C1, names[i], size,
					      replicas),
				 KVF_OK);
		*bytes += size * replicas;
	}
}

static uint64_t segments_used(struct kvf_engine *e)
{
	struct kvf_segment_info a, b;

	assert_int_equal(kvf_segment_query(e, 1, &a), KVF_OK);
	assert_int_equal(kvf_segment_query(e, 2, &b), KVF_OK);
	return a.used_bytes + b.used_bytes;
}

static void test_remove_frees_grouped(void **state)
{
	struct fixture *f = *state;
	static char names[GROUPED][16];
	struct kvf_key keys[GROUPED + 2];
	enum kvf_status st[GROUPED + 2];
	uint64_t bytes, small = 0;

	put_grouped(f, names, &bytes);
	assert_int_equal(stats_of(f->e).used_bytes, bytes);
	assert_int_equal(segments_used(f->e), bytes);
	/* A small batch: ten keys and an unknown one. */
	for (int i = 0; i < 10; i++) {
		keys[i] = key_of(names[i]);
		small += 4096 * (1 + i % 7) * (i % 5 ? 2 : 1);
	}
	keys[10] = key_of("unknown");
	assert_int_equal(kvf_batch_remove(f->e, keys, 11, false, st),
			 KVF_ERR_PARTIAL);
	for (int i = 0; i < 10; i++)
		assert_int_equal(st[i], KVF_OK);
	assert_int_equal(st[10], KVF_ERR_OBJECT_NOT_FOUND);
	assert_int_equal(stats_of(f->e).used_bytes, bytes - small);
	/* The rest in one batch, the ten removed ones among them. */
	for (int i = 0; i < GROUPED; i++)
		keys[i] = key_of(names[i]);
	keys[GROUPED] = key_of("unknown");
	keys[GROUPED + 1] = key_of("unknown2");
	assert_int_equal(kvf_batch_remove(f->e, keys, GROUPED + 2, false, st),
			 KVF_ERR_PARTIAL);
	for (int i = 0; i < GROUPED + 2; i++)
		assert_int_equal(st[i], i >= 10 && i < GROUPED ?
						KVF_OK :
						KVF_ERR_OBJECT_NOT_FOUND);
	assert_int_equal(stats_of(f->e).used_bytes, 0);
	assert_int_equal(segments_used(f->e), 0);
	assert_int_equal(stats_of(f->e).objects, 0);
	/* The allocators took every range back: the same fill fits again. */
	put_grouped(f, names, &bytes);
	assert_int_equal(segments_used(f->e), bytes);
}

/*
 * Keep the one replica of every OK item of a put_start in @kept (@nr so
 * far), asserting it overlaps none kept before; the bytes they hold.
 */
static uint64_t keep_apart(const struct kvf_replicas *out,
			   const enum kvf_status *st, size_t n,
			   struct kvf_replica_desc *kept, size_t *nr)
{
	uint64_t bytes = 0;

	for (size_t i = 0; i < n; i++) {
		const struct kvf_replica_desc *d = &out[i].replica[0];

		if (st[i] != KVF_OK)
			continue;
		assert_int_equal(out[i].count, 1);
		for (size_t j = 0; j < *nr; j++)
			assert_true(kept[j].segment_id != d->segment_id ||
				    kept[j].addr + kept[j].size <= d->addr ||
				    d->addr + d->size <= kept[j].addr);
		kept[(*nr)++] = *d;
		bytes += d->size;
	}
	return bytes;
}

/*
 * put_start places a batch's one-replica items a run per size
 * (kvf__place_run); items it must not place (errors, existing keys) are
 * left out, items of a size met once go alone, and a batch that runs
 * out of space places a prefix and refuses the rest with NO_SPACE. Every
 * placed replica is its record's alone (no two overlap) and the
 * segments hold exactly the live records' bytes; removing them all
 * leaves nothing used.
 */
static void test_put_start_runs(void **state)
{
	struct fixture *f = *state;
	static char names[2][128][16];
	struct kvf_key keys[128];
	uint64_t sizes[128], bytes = 2 * MIB;
	struct kvf_put_config cfg = { .replica_num = 1 };
	struct kvf_replicas out[128];
	enum kvf_status st[128];
	struct kvf_replica_desc kept[256];
	size_t nr = 0, no_space = 0;

	assert_int_equal(put_complete(f->e, C1, "exists", MIB, 1), KVF_OK);
	assert_int_equal(put1(f->e, C1, "pending", MIB, 1, NULL), KVF_OK);
	for (int b = 0; b < 2; b++) {
		for (int i = 0; i < 128; i++) {
			snprintf(names[b][i], 16, "r%d-%d", b, i);
			keys[i] = key_of(names[b][i]);
			sizes[i] = b ? MIB :
				       i % 4 == 3 ? 300 * KIB : 700 * KIB;
		}
		if (b == 0) {
			keys[10] = key_of("exists");
			keys[20] = key_of("pending");
			keys[31] = keys[30];
			sizes[40] = 0;
			sizes[50] = 65 * MIB;
			sizes[60] = 12 * KIB;
		}
		assert_int_equal(kvf_batch_put_start(f->e, C1, keys, sizes,
						     128, &cfg, out, st),
				 KVF_ERR_PARTIAL);
		for (int i = 0; b == 0 && i < 128; i++)
			assert_int_equal(st[i],
					 i == 10 || i == 20 ?
						 KVF_ERR_OBJECT_ALREADY_EXISTS :
					 i == 30 || i == 31 ?
						 KVF_ERR_DUPLICATE_KEY :
					 i == 40 || i == 50 ?
						 KVF_ERR_INVALID_PARAMS :
						 KVF_OK);
		for (int i = 0; b == 1 && i < 128; i++) {
			if (st[i] != KVF_OK) {
				assert_int_equal(st[i], KVF_ERR_NO_SPACE);
				no_space++;
			}
		}
		bytes += keep_apart(out, st, 128, kept, &nr);
		assert_int_equal(stats_of(f->e).used_bytes, bytes);
		assert_int_equal(segments_used(f->e), bytes);
	}
	/* The second batch filled both segments and refused the rest. */
	assert_true(no_space > 0 && no_space < 128);
	for (int b = 0; b < 2; b++) {
		for (int i = 0; i < 128; i++)
			keys[i] = key_of(names[b][i]);
		kvf_batch_put_end(f->e, C1, keys, 128, st);
		kvf_batch_remove(f->e, keys, 128, true, st);
	}
	assert_int_equal(remove1(f->e, "exists", true), KVF_OK);
	assert_int_equal(revoke1(f->e, C1, "pending"), KVF_OK);
	assert_int_equal(stats_of(f->e).used_bytes, 0);
	assert_int_equal(segments_used(f->e), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_status_strings),
		cmocka_unit_test(test_expected_objects_faulted_ahead),
		cmocka_unit_test_setup_teardown(test_refused_batches,
						setup_two_segments,
						fixture_teardown),
		cmocka_unit_test_setup_teardown(test_batch_too_large,
						setup_two_segments,
						fixture_teardown),
		cmocka_unit_test_setup_teardown(test_put_start_batch_errors,
						setup_two_segments,
						fixture_teardown),
		cmocka_unit_test_setup_teardown(test_put_start_item_errors,
						setup_two_segments,
						fixture_teardown),
		cmocka_unit_test_setup_teardown(test_memory_stats,
						setup_two_segments,
						fixture_teardown),
		cmocka_unit_test_setup_teardown(test_put_start_placement,
						setup_two_segments,
						fixture_teardown),
		cmocka_unit_test_setup_teardown(test_put_end_errors,
						setup_two_segments,
						fixture_teardown),
		cmocka_unit_test_setup_teardown(test_revoke_frees,
						setup_two_segments,
						fixture_teardown),
		cmocka_unit_test_setup_teardown(test_get_and_exist,
						setup_two_segments,
						fixture_teardown),
		cmocka_unit_test_setup_teardown(test_duplicates_randomised,
						setup_two_segments,
						fixture_teardown),
		cmocka_unit_test_setup_teardown(test_remove_rules,
						setup_two_segments,
						fixture_teardown),
		cmocka_unit_test_setup_teardown(test_remove_frees_grouped,
						setup_two_segments,
						fixture_teardown),
		cmocka_unit_test_setup_teardown(test_remove_all_and_prefix,
						setup_two_segments,
						fixture_teardown),
		cmocka_unit_test_setup_teardown(test_put_start_runs,
						setup_two_segments,
						fixture_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
