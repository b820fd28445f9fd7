/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_evict.c - eviction and dead-client cleanup, on an
 * injected clock: leases, pins, targets, what is freed, what survives.
 */
#include "config.h"

#include "tests/unit/helpers.h"

#define C1 41
#define C2 42
#define OBJ (1 * MIB)

/* Put and end "<prefix>-0" .. "<prefix>-<n-1>" as client C1 under @cfg. */
static void fill_with(struct kvf_engine *e, const char *prefix, int n,
		      const struct kvf_put_config *cfg, uint64_t size)
{
	char key[64];

	for (int i = 0; i < n; i++) {
		struct kvf_key k;
		struct kvf_replicas out;
		enum kvf_status st;

		snprintf(key, sizeof(key), "%s-%d", prefix, i);
		k = key_of(key);
		assert_int_equal(kvf_batch_put_start(e, C1, &k, &size, 1, cfg,
						     &out, &st),
				 KVF_OK);
		assert_int_equal(end1(e, C1, key), KVF_OK);
	}
}

static void fill(struct kvf_engine *e, const char *prefix, int n,
		 bool hard, bool soft)
{
	struct kvf_put_config cfg = { .replica_num = 1, .hard_pin = hard,
				      .soft_pin = soft };

	fill_with(e, prefix, n, &cfg, OBJ);
}

static int count_present(struct kvf_engine *e, const char *prefix, int n)
{
	char key[64];
	int present = 0;

	for (int i = 0; i < n; i++) {
		snprintf(key, sizeof(key), "%s-%d", prefix, i);
		present += exist1(e, key) == KVF_OK;
	}
	return present;
}

static void test_evict_respects_leases_and_pins(void **state)
{
	struct fixture *f = *state;
	uint64_t freed = 0, evicted = 0, before;

	assert_int_equal(mount(f->e, C1, 1, 256 * MIB), KVF_OK);
	fill(f->e, "hard", 20, true, false);
	fill(f->e, "soft", 20, false, true);
	fill(f->e, "plain", 100, false, false);
	fill(f->e, "read", 20, false, false);
	/* Leased: read just now. */
	for (int i = 0; i < 20; i++) {
		char key[32];

		snprintf(key, sizeof(key), "read-%d", i);
		assert_int_equal(get1(f->e, key, NULL), KVF_OK);
	}
	before = stats_of(f->e).used_bytes;
	/* Ask for 30 objects' worth: only plain ones may go. */
	assert_int_equal(kvf_engine_evict(f->e, 30 * OBJ, &freed, &evicted),
			 KVF_OK);
	assert_int_equal(evicted, 30);
	assert_int_equal(freed, 30 * OBJ);
	assert_int_equal(stats_of(f->e).used_bytes, before - freed);
	assert_int_equal(stats_of(f->e).objects, 160 - 30);
	assert_int_equal(stats_of(f->e).evicted_objects, 30);
	/* Ask for everything: leased and hard-pinned stay; soft pins go last. */
	assert_int_equal(kvf_engine_evict(f->e, 1000 * OBJ, &freed, &evicted),
			 KVF_OK);
	assert_int_equal(evicted, 70 + 20);
	assert_int_equal(stats_of(f->e).objects, 40);
	test_clock_advance_ms(&f->clock, f->cfg.lease_ttl_ms + 1);
	assert_int_equal(count_present(f->e, "hard", 20), 20);
	assert_int_equal(count_present(f->e, "read", 20), 20);
	assert_int_equal(count_present(f->e, "soft", 20), 0);
}

static void test_evict_prefers_least_recently_used(void **state)
{
	struct fixture *f = *state;
	uint64_t evicted = 0;
	char key[32];
	int recent = 0;

	assert_int_equal(mount(f->e, C1, 1, 512 * MIB), KVF_OK);
	fill(f->e, "o", 200, false, false);
	/* Read the first half late: they are the recently used ones. */
	test_clock_advance_ms(&f->clock, 60000);
	for (int i = 0; i < 100; i++) {
		snprintf(key, sizeof(key), "o-%d", i);
		assert_int_equal(get1(f->e, key, NULL), KVF_OK);
	}
	test_clock_advance_ms(&f->clock, f->cfg.lease_ttl_ms + 1);
	assert_int_equal(kvf_engine_evict(f->e, 50 * OBJ, NULL, &evicted),
			 KVF_OK);
	assert_int_equal(evicted, 50);
	for (int i = 0; i < 100; i++) {
		snprintf(key, sizeof(key), "o-%d", i);
		recent += exist1(f->e, key) == KVF_OK;
	}
	/* Sampling is approximate; the old half should take nearly all. */
	assert_true(recent >= 90);
}

/*
 * The clock hands read windows of neighbouring blocks and evict the oldest
 * part of each: with every other object read recently, across two
 * segments and several windows per segment, a pass that frees a quarter
 * must take only unread objects, and so must a second pass.
 */
static void test_evict_windows_keep_recently_read(void **state)
{
	struct fixture *f = *state;
	const int n = 1200;
	uint64_t evicted = 0;
	char key[32];
	int old = 0;

	assert_int_equal(mount(f->e, C1, 1, 1 * GIB), KVF_OK);
	assert_int_equal(mount(f->e, C1, 2, 1 * GIB), KVF_OK);
	fill(f->e, "w", n, false, false);
	test_clock_advance_ms(&f->clock, 60000);
	for (int i = 1; i < n; i += 2) {
		snprintf(key, sizeof(key), "w-%d", i);
		assert_int_equal(get1(f->e, key, NULL), KVF_OK);
	}
	test_clock_advance_ms(&f->clock, f->cfg.lease_ttl_ms + 1);
	assert_int_equal(kvf_engine_evict(f->e, n / 4 * OBJ, NULL, &evicted),
			 KVF_OK);
	assert_int_equal(evicted, n / 4);
	assert_int_equal(kvf_engine_evict(f->e, n / 8 * OBJ, NULL, &evicted),
			 KVF_OK);
	assert_int_equal(evicted, n / 8);
	for (int i = 0; i < n; i++) {
		snprintf(key, sizeof(key), "w-%d", i);
		if (i % 2)
			assert_int_equal(exist1(f->e, key), KVF_OK);
		else
			old += exist1(f->e, key) == KVF_OK;
	}
	assert_int_equal(old, n / 2 - n / 4 - n / 8);
}

static void test_watermark_and_failed_allocation(void **state)
{
	struct fixture *f = *state;
	struct kvf_engine_stats s;

	/* 64 MiB segment, 1 MiB objects: 58 fills past 0.90. */
	assert_int_equal(mount(f->e, C1, 1, 64 * MIB), KVF_OK);
	fill(f->e, "w", 57, false, false);
	assert_int_equal(kvf_engine_tick(f->e), KVF_OK);
	assert_int_equal(stats_of(f->e).objects, 57); /* 89%: nothing */
	fill(f->e, "x", 2, false, false);
	assert_int_equal(kvf_client_heartbeat(f->e, C1), KVF_OK);
	assert_int_equal(kvf_engine_tick(f->e), KVF_OK);
	s = stats_of(f->e);
	/* 5% of 64 MiB: about 3 objects, no more. */
	assert_int_equal(s.objects, 59 - 4);
	assert_true(s.used_bytes <= 64 * MIB * 90 / 100);
	/* A put that cannot be placed asks for eviction. */
	fill(f->e, "y", 9, false, false);
	assert_int_equal(put1(f->e, C1, "too-big", 8 * MIB, 1, NULL),
			 KVF_ERR_NO_SPACE);
	assert_int_equal(kvf_client_heartbeat(f->e, C1), KVF_OK);
	assert_int_equal(kvf_engine_tick(f->e), KVF_OK);
	assert_true(stats_of(f->e).evicted_objects >= 4 + 3);
}

static void test_dead_client_cleanup(void **state)
{
	struct fixture *f = *state;
	uint64_t pref[2] = { 1, 2 }, size = 4 * MIB;
	struct kvf_put_config cfg = { .replica_num = 2,
				      .preferred_segments = pref,
				      .nr_preferred = 2 };
	struct kvf_replicas out;
	char key[32];

	assert_int_equal(mount(f->e, C1, 1, 256 * MIB), KVF_OK);
	assert_int_equal(mount(f->e, C2, 2, 256 * MIB), KVF_OK);
	assert_int_equal(mount(f->e, C2, 3, 256 * MIB), KVF_OK);
	fill_with(f->e, "both", 30, &cfg, size);
	cfg.replica_num = 1;
	cfg.nr_preferred = 1;
	fill(f->e, "only", 10, false, false); /* placement's choice */
	fill_with(f->e, "dead", 10, &cfg, size);
	for (int i = 0; i < 10; i++) {
		snprintf(key, sizeof(key), "dead-%d", i);
		assert_int_equal(get1(f->e, key, NULL), KVF_OK); /* leased */
	}
	/* C1 (segment 1) goes silent. */
	test_clock_advance_ms(&f->clock, 6000);
	assert_int_equal(kvf_client_heartbeat(f->e, C2), KVF_OK);
	test_clock_advance_ms(&f->clock, 6000);
	assert_int_equal(kvf_engine_tick(f->e), KVF_OK);
	for (int i = 0; i < 10; i++) {
		snprintf(key, sizeof(key), "dead-%d", i);
		assert_int_equal(exist1(f->e, key), KVF_ERR_OBJECT_NOT_FOUND);
	}
	for (int i = 0; i < 30; i++) {
		snprintf(key, sizeof(key), "both-%d", i);
		assert_int_equal(get1(f->e, key, &out), KVF_OK);
		assert_int_equal(out.count, 1);
		assert_int_equal(out.replica[0].segment_id, 2);
	}
	assert_int_equal(stats_of(f->e).segments, 2);
	assert_int_equal(stats_of(f->e).capacity_bytes, 512 * MIB);
	/* What is left: the surviving replicas, nothing of segment 1. */
	assert_int_equal(stats_of(f->e).used_bytes,
			 30 * size +
				 (uint64_t)count_present(f->e, "only", 10) * OBJ);
	assert_int_equal(stats_of(f->e).objects,
			 30 + (uint64_t)count_present(f->e, "only", 10));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
			test_evict_respects_leases_and_pins, fixture_setup,
			fixture_teardown),
		cmocka_unit_test_setup_teardown(
			test_evict_prefers_least_recently_used, fixture_setup,
			fixture_teardown),
		cmocka_unit_test_setup_teardown(
			test_evict_windows_keep_recently_read, fixture_setup,
			fixture_teardown),
		cmocka_unit_test_setup_teardown(
			test_watermark_and_failed_allocation, fixture_setup,
			fixture_teardown),
		cmocka_unit_test_setup_teardown(test_dead_client_cleanup,
						fixture_setup, fixture_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
