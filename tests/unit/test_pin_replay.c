/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_pin_replay.c - soft pin deadlines and recency survive a
 * reopen on the same (injected) clock: eviction after the reopen picks
 * what it would have picked without it.
 */
#include "config.h"

#include "tests/unit/helpers.h"

#define OBJ 4096
#define N 8

struct scenario {
	enum kvf_durability mode;
	enum kvf_index_kind kind;
	bool reopen;
};

static void put_group(struct kvf_engine *e, const char *prefix, bool soft)
{
	struct kvf_put_config pc = { .replica_num = 1, .soft_pin = soft };
	char name[32];

	for (int i = 0; i < N; i++) {
		struct kvf_key k;
		uint64_t size = OBJ;
		struct kvf_replicas out;
		enum kvf_status st;

		snprintf(name, sizeof(name), "%s-%d", prefix, i);
		k = key_of(name);
		assert_int_equal(kvf_batch_put_start(e, 1, &k, &size, 1, &pc,
						     &out, &st),
				 KVF_OK);
		assert_int_equal(end1(e, 1, name), KVF_OK);
	}
}

/* How many of @prefix's objects exist. */
static int count_group(struct kvf_engine *e, const char *prefix)
{
	char name[32];
	int n = 0;

	for (int i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "%s-%d", prefix, i);
		n += exist1(e, name) == KVF_OK;
	}
	return n;
}

/*
 * Put group "a" (pinned or not), advance the clock by @gap_ms, put group
 * "b" unpinned, optionally close and reopen, evict one group's worth and
 * return how many of "a" are left.
 */
static int a_left_after_evict(const struct scenario *sc, bool pin_a,
			      uint64_t gap_ms)
{
	struct fixture f;
	char *dir = test_tmpdir("pin-replay");
	uint64_t evicted = 0;
	int left;

	fixture_config(&f);
	f.cfg.durability = sc->mode;
	f.cfg.data_dir = dir;
	f.cfg.index = sc->kind;
	f.cfg.soft_pin_ttl_ms = 8000;
	f.cfg.journal_wal_bytes = 64 * 1024; /* quicker to create */
	assert_int_equal(kvf_engine_open(&f.cfg, &f.e), KVF_OK);
	assert_int_equal(mount(f.e, 1, 1, 1 * MIB), KVF_OK);
	put_group(f.e, "a", pin_a);
	test_clock_advance_ms(&f.clock, gap_ms);
	put_group(f.e, "b", false);
	if (sc->reopen) {
		kvf_engine_close(f.e);
		f.e = NULL;
		test_clock_advance_ms(&f.clock, 10);
		assert_int_equal(kvf_engine_open(&f.cfg, &f.e), KVF_OK);
	}
	/* Soft-pinned objects are counted, across a reopen too. */
	assert_int_equal(stats_of(f.e).soft_pinned, pin_a ? N : 0);
	assert_int_equal(kvf_engine_evict(f.e, N * OBJ, NULL, &evicted),
			 KVF_OK);
	assert_int_equal(evicted, N);
	left = count_group(f.e, "a");
	assert_int_equal(left + count_group(f.e, "b"), N);
	assert_int_equal(stats_of(f.e).soft_pinned, pin_a ? left : 0);
	kvf_engine_close(f.e);
	free(dir);
	return left;
}

static const enum kvf_durability modes[] = { KVF_DURABILITY_BOUNDED,
					     KVF_DURABILITY_STRICT };
static const enum kvf_index_kind kinds[] = { KVF_INDEX_LFHT,
					     KVF_INDEX_BUCKET };

/* Run @check on every mode and index kind, with and without a reopen. */
static void each_scenario(void (*check)(const struct scenario *))
{
	for (int m = 0; m < 2; m++)
		for (int k = 0; k < 2; k++)
			for (int r = 0; r < 2; r++) {
				struct scenario sc = { modes[m], kinds[k],
						       r == 1 };

				check(&sc);
			}
}

/* The pins expired before the close: the pinned, older objects go. */
static void expired_pins_go_first(const struct scenario *sc)
{
	assert_int_equal(a_left_after_evict(sc, true, 9000), 0);
}

/* The pins still run after the reopen: the unpinned objects go. */
static void live_pins_still_protect(const struct scenario *sc)
{
	assert_int_equal(a_left_after_evict(sc, true, 1000), N);
}

/* Neither pinned: the older puts go, as before the reopen. */
static void older_puts_go_first(const struct scenario *sc)
{
	assert_int_equal(a_left_after_evict(sc, false, 1000), 0);
}

static void test_expired_pins(void **state)
{
	(void)state;
	each_scenario(expired_pins_go_first);
}

static void test_live_pins(void **state)
{
	(void)state;
	each_scenario(live_pins_still_protect);
}

static void test_recency(void **state)
{
	(void)state;
	each_scenario(older_puts_go_first);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_expired_pins),
		cmocka_unit_test(test_live_pins),
		cmocka_unit_test(test_recency),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
