/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_get_paths.c - batch get and exist: the batched probe
 * (the index's pipelined lookup_batch over every key, taken when every
 * key is valid) against the key-by-key probe (taken when a key is
 * refused, to keep it out of the index) and against a model, on
 * randomised batches, for both index kinds.
 *
 * The same batch is asked twice: as it is (batched), and with one
 * invalid key inserted at a random place (key by key). Every valid key
 * must get the same status and replicas both ways, and those the model
 * says: complete objects their replicas from put_start, a put not yet
 * ended "not ready" (exist: not found), removed and unknown keys not
 * found.
 * Keys have random lengths, so records straddle cache lines every way,
 * and objects have one to three replicas. Also: a replica's packed
 * segment pointer and offset, and the segment size mount allows for it.
 */
#include "config.h"

#include <stdio.h>

#include "metadata/object.h"
#include "tests/unit/helpers.h"

#define CLIENT 11
#define NR_KEYS 1500
#define MAX_BATCH 200
#define ROUNDS 150

enum kstate { K_NEVER, K_PROCESSING, K_COMPLETE, K_REMOVED };

struct model {
	char key[NR_KEYS][112];
	enum kstate state[NR_KEYS];
	struct kvf_replicas rep[NR_KEYS];
};

static uint64_t rng_state;

static uint64_t rng(void)
{
	/* splitmix64: deterministic, so a failure replays. */
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* Key @id: its number, padded to a random length of 6..105. */
static void make_key(struct model *m, unsigned id)
{
	int len = snprintf(m->key[id], sizeof(m->key[id]), "k%05u", id);
	int pad = (int)(rng() % 100);

	for (int i = 0; i < pad; i++)
		m->key[id][len + i] = (char)('a' + (id + i) % 26);
	m->key[id][len + pad] = '\0';
}

static void fill(struct kvf_engine *e, struct model *m)
{
	for (unsigned id = 0; id < NR_KEYS; id++) {
		uint32_t replicas = 1 + (uint32_t)(rng() % 3);
		unsigned what = (unsigned)(rng() % 8);

		make_key(m, id);
		m->state[id] = K_NEVER;
		if (what == 0)
			continue;
		assert_int_equal(put1(e, CLIENT, m->key[id], 4096, replicas,
				      &m->rep[id]),
				 KVF_OK);
		m->state[id] = K_PROCESSING;
		if (what == 1)
			continue;
		assert_int_equal(end1(e, CLIENT, m->key[id]), KVF_OK);
		m->state[id] = K_COMPLETE;
		if (what == 2) {
			assert_int_equal(remove1(e, m->key[id], false), KVF_OK);
			m->state[id] = K_REMOVED;
		}
	}
}

static enum kvf_status expected(const struct model *m, unsigned id, bool get)
{
	switch (m->state[id]) {
	case K_COMPLETE:
		return KVF_OK;
	case K_PROCESSING:
		return get ? KVF_ERR_OBJECT_NOT_READY
			   : KVF_ERR_OBJECT_NOT_FOUND;
	default:
		return KVF_ERR_OBJECT_NOT_FOUND;
	}
}

/* Distinct random ids, @n of them. */
static void pick(unsigned *ids, size_t n)
{
	static unsigned perm[NR_KEYS];

	for (unsigned i = 0; i < NR_KEYS; i++)
		perm[i] = i;
	for (size_t i = 0; i < n; i++) {
		size_t j = i + rng() % (NR_KEYS - i);
		unsigned t = perm[i];

		perm[i] = perm[j];
		perm[j] = t;
		ids[i] = perm[i];
	}
}

/* One batch both ways, get (@get) or exist, checked against the model. */
static void check_batch(struct kvf_engine *e, const struct model *m, bool get)
{
	static struct kvf_key one[MAX_BATCH], staged[MAX_BATCH + 1];
	static struct kvf_replicas out1[MAX_BATCH], out2[MAX_BATCH + 1];
	static enum kvf_status st1[MAX_BATCH], st2[MAX_BATCH + 1];
	static unsigned ids[MAX_BATCH];
	size_t n = 1 + rng() % MAX_BATCH, bad = rng() % (n + 1);
	bool all_ok = true;
	int ret;

	pick(ids, n);
	for (size_t i = 0; i < n; i++) {
		one[i] = key_of(m->key[ids[i]]);
		staged[i < bad ? i : i + 1] = one[i];
	}
	staged[bad] = (struct kvf_key){"", 0};
	if (get) {
		ret = kvf_batch_get(e, one, n, out1, st1, NULL);
		assert_int_equal(
			kvf_batch_get(e, staged, n + 1, out2, st2, NULL),
			KVF_ERR_PARTIAL);
	} else {
		ret = kvf_batch_exist(e, one, n, st1);
		assert_int_equal(kvf_batch_exist(e, staged, n + 1, st2),
				 KVF_ERR_PARTIAL);
	}
	assert_int_equal(st2[bad], KVF_ERR_INVALID_KEY);
	for (size_t i = 0; i < n; i++)
		all_ok &= expected(m, ids[i], get) == KVF_OK;
	/* exist answers "not found" as an answer, get as a failed item */
	assert_int_equal(ret, all_ok || !get ? KVF_OK : KVF_ERR_PARTIAL);
	for (size_t i = 0; i < n; i++) {
		size_t j = i < bad ? i : i + 1;

		assert_int_equal(st1[i], expected(m, ids[i], get));
		assert_int_equal(st2[j], st1[i]);
		if (!get || st1[i] != KVF_OK)
			continue;
		assert_replicas_equal(&out1[i], &m->rep[ids[i]]);
		assert_replicas_equal(&out2[j], &out1[i]);
	}
}

static void run_kind(enum kvf_index_kind kind)
{
	struct fixture f = {0};
	struct model *m = calloc(1, sizeof(*m));

	assert_non_null(m);
	fixture_config(&f);
	f.cfg.index = kind;
	assert_int_equal(kvf_engine_open(&f.cfg, &f.e), KVF_OK);
	assert_int_equal(test_engine_index_kind(f.e), (int)kind);
	for (uint64_t id = 1; id <= 3; id++)
		assert_int_equal(mount(f.e, CLIENT, id, 64 * MIB), KVF_OK);
	rng_state = 0x5eed0000u + (uint64_t)kind;
	fill(f.e, m);
	for (int r = 0; r < ROUNDS; r++) {
		check_batch(f.e, m, rng() % 2);
		test_clock_advance_ms(&f.clock, 1);
	}
	kvf_engine_close(f.e);
	free(m);
}

/* A replica keeps any 48-bit segment pointer and offset exactly. */
static void test_replica_fields(void **state)
{
	static const uint64_t ptrs[] = {0x1000, 0x7fffffffeff8,
					0x0000800000000000 - 8, 0x12345678};
	static const uint64_t offs[] = {0, 1, 0xffffffff, 0x100000000,
					KVF__REPLICA_OFFSET_MAX};
	struct kvf__replica r;

	(void)state;
	for (size_t i = 0; i < sizeof(ptrs) / sizeof(ptrs[0]); i++) {
		for (size_t j = 0; j < sizeof(offs) / sizeof(offs[0]); j++) {
			struct kvf__segment *seg =
				(struct kvf__segment *)(uintptr_t)ptrs[i];

			kvf__replica_set(&r, seg, offs[j]);
			assert_ptr_equal(kvf__replica_seg(&r), seg);
			assert_int_equal(kvf__replica_offset(&r), offs[j]);
		}
	}
}

/* Mount refuses a segment whose offsets a replica cannot hold. */
static void test_mount_size_limit(void **state)
{
	struct fixture f = {0};
	struct kvf_replicas out, got;

	(void)state;
	fixture_config(&f);
	assert_int_equal(kvf_engine_open(&f.cfg, &f.e), KVF_OK);
	assert_int_equal(mount(f.e, CLIENT, 1, KVF__REPLICA_OFFSET_MAX + 2),
			 KVF_ERR_INVALID_PARAMS);
	assert_int_equal(stats_of(f.e).segments, 0);
	assert_int_equal(mount(f.e, CLIENT, 1, KVF__REPLICA_OFFSET_MAX + 1),
			 KVF_OK);
	assert_int_equal(stats_of(f.e).capacity_bytes,
			 KVF__REPLICA_OFFSET_MAX + 1);
	assert_int_equal(put1(f.e, CLIENT, "big", 1 << 20, 1, &out), KVF_OK);
	assert_int_equal(end1(f.e, CLIENT, "big"), KVF_OK);
	assert_int_equal(get1(f.e, "big", &got), KVF_OK);
	assert_replicas_equal(&got, &out);
	kvf_engine_close(f.e);
}

static void test_bucket(void **state)
{
	(void)state;
	run_kind(KVF_INDEX_BUCKET);
}

static void test_lfht(void **state)
{
	(void)state;
	run_kind(KVF_INDEX_LFHT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_replica_fields),
		cmocka_unit_test(test_mount_size_limit),
		cmocka_unit_test(test_bucket),
		cmocka_unit_test(test_lfht),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
