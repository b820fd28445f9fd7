/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_contracts.c - the public contracts a newcomer reads in
 * the headers and docs/api.md, checked against behaviour: the defaults
 * open, the version, client and segment rules (overlap, unknown and
 * expired clients, alignment, unusable tails), pins, refused
 * preferred lists, and requests no segment could ever hold.
 */
#include "config.h"

#include <sys/stat.h>
#include <unistd.h>

#include "tests/unit/helpers.h"

#define C1 41
#define C2 42
#define NEVER_SEEN 4242

static void test_version(void **state)
{
	char want[64];

	(void)state;
	snprintf(want, sizeof(want), "%d.%d.%d", KVF_VERSION_MAJOR,
		 KVF_VERSION_MINOR, KVF_VERSION_PATCH);
	assert_string_equal(kvf_version(), want);
	assert_string_equal(KVF_VERSION_STRING, want);
	assert_string_equal(PACKAGE_VERSION, want);
	assert_int_equal(KVF_VERSION_NUMBER,
			 KVF_VERSION_MAJOR * 10000 + KVF_VERSION_MINOR * 100 +
				 KVF_VERSION_PATCH);
}

/* The README's first example, as written there: defaults only. */
static void test_defaults_open(void **state)
{
	struct kvf_config cfg;
	struct kvf_engine *e;
	struct kvf_segment_desc seg = { .id = 1, .name = "gpu0",
					.base = 0x7f0000000000,
					.size = 64ULL << 30,
					.endpoint = "10.0.0.7:17812" };
	struct kvf_key keys[2] = { { "page-a_0_k", 10 }, { "page-a_0_v", 10 } };
	uint64_t sizes[2] = { 3 << 20, 3 << 20 };
	struct kvf_put_config pc = { .replica_num = 1 };
	struct kvf_replicas where[2];
	enum kvf_status st[2];

	(void)state;
	kvf_config_init(&cfg);
	assert_null(cfg.data_dir);
	assert_int_equal(cfg.durability, KVF_DURABILITY_DEFAULT);
	assert_int_equal(kvf_engine_open(&cfg, &e), KVF_OK);
	assert_int_equal(kvf_segment_mount(e, 42, &seg), KVF_OK);
	assert_int_equal(kvf_batch_put_start(e, 42, keys, sizes, 2, &pc, where,
					     st),
			 KVF_OK);
	assert_int_equal(kvf_batch_put_end(e, 42, keys, 2, st), KVF_OK);
	assert_int_equal(kvf_batch_get(e, keys, 2, where, st, NULL), KVF_OK);
	assert_int_equal(where[0].replica[0].segment_id, 1);
	assert_int_equal(stats_of(e).objects, 2);
	kvf_engine_close(e);
}

/* An explicit journal without a directory is refused, never downgraded. */
static void test_explicit_durability_needs_dir(void **state)
{
	struct kvf_engine *e = (struct kvf_engine *)0x1;
	struct kvf_config cfg;

	(void)state;
	kvf_config_init(&cfg);
	cfg.durability = KVF_DURABILITY_BOUNDED;
	assert_int_equal(kvf_engine_open(&cfg, &e), KVF_ERR_INVALID_ARGUMENT);
	cfg.durability = KVF_DURABILITY_STRICT;
	assert_int_equal(kvf_engine_open(&cfg, &e), KVF_ERR_INVALID_ARGUMENT);
	cfg.durability = (enum kvf_durability)7;
	assert_int_equal(kvf_engine_open(&cfg, &e), KVF_ERR_INVALID_ARGUMENT);
	assert_ptr_equal(e, (struct kvf_engine *)0x1);
}

/* The default with a data directory journals (BOUNDED) and recovers. */
static void test_default_with_dir_journals(void **state)
{
	struct fixture f;
	char *dir = test_tmpdir("contracts-default");
	char path[600];
	struct stat sb;

	(void)state;
	fixture_config(&f);
	f.cfg.durability = KVF_DURABILITY_DEFAULT;
	f.cfg.data_dir = dir;
	assert_int_equal(kvf_engine_open(&f.cfg, &f.e), KVF_OK);
	snprintf(path, sizeof(path), "%s/data.mdb", dir);
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(mount(f.e, C1, 1, 8 * MIB), KVF_OK);
	assert_int_equal(put_complete(f.e, C1, "durable", 4096, 1), KVF_OK);
	kvf_engine_close(f.e);
	assert_int_equal(kvf_engine_open(&f.cfg, &f.e), KVF_OK);
	assert_int_equal(stats_of(f.e).recovered_objects, 1);
	assert_int_equal(get1(f.e, "durable", NULL), KVF_OK);
	kvf_engine_close(f.e);
	free(dir);
}

/* Unmounting the last segment keeps the client; so does a reopen. */
static void test_client_known_until_removed(void **state)
{
	struct fixture f;
	char *dir = test_tmpdir("contracts-client");

	(void)state;
	fixture_open_journaled(&f, dir, KVF_DURABILITY_BOUNDED);
	assert_int_equal(mount(f.e, C1, 1, 8 * MIB), KVF_OK);
	assert_int_equal(mount(f.e, C2, 2, 8 * MIB), KVF_OK);
	assert_int_equal(kvf_segment_unmount(f.e, C1, 1), KVF_OK);
	assert_int_equal(kvf_client_heartbeat(f.e, C1), KVF_OK);
	assert_int_equal(kvf_client_unregister(f.e, C2), KVF_OK);
	kvf_engine_close(f.e);
	assert_int_equal(kvf_engine_open(&f.cfg, &f.e), KVF_OK);
	assert_int_equal(kvf_client_heartbeat(f.e, C1), KVF_OK);
	assert_int_equal(kvf_client_heartbeat(f.e, C2),
			 KVF_ERR_CLIENT_NOT_FOUND);
	assert_int_equal(stats_of(f.e).clients, 1);
	/* Its TTL starts again at open. */
	test_clock_advance_ms(&f.clock, f.cfg.client_ttl_ms + 1);
	assert_int_equal(kvf_engine_tick(f.e), KVF_OK);
	assert_int_equal(kvf_client_heartbeat(f.e, C1),
			 KVF_ERR_CLIENT_NOT_FOUND);
	kvf_engine_close(f.e);
	free(dir);
}

/*
 * A client that lends no memory registers, writes into another client's
 * segment, lives by heartbeats, expires like any client, and is unknown
 * after a reopen (registration is not journaled) while its objects stay.
 */
static void test_register_without_segment(void **state)
{
	struct fixture f;
	char *dir = test_tmpdir("contracts-register");

	(void)state;
	fixture_config(&f);
	f.cfg.durability = KVF_DURABILITY_BOUNDED;
	f.cfg.data_dir = dir;
	assert_int_equal(kvf_engine_open(&f.cfg, &f.e), KVF_OK);
	assert_int_equal(kvf_client_register(f.e, 0), KVF_ERR_INVALID_ARGUMENT);
	assert_int_equal(kvf_client_register(NULL, C1),
			 KVF_ERR_INVALID_ARGUMENT);
	assert_int_equal(mount(f.e, C2, 2, 8 * MIB), KVF_OK);
	assert_int_equal(put1(f.e, C1, "early", 4096, 1, NULL),
			 KVF_ERR_CLIENT_NOT_FOUND);
	assert_int_equal(kvf_client_register(f.e, C1), KVF_OK);
	assert_int_equal(kvf_client_register(f.e, C1), KVF_OK); /* idempotent */
	assert_int_equal(stats_of(f.e).clients, 2);
	assert_int_equal(put1(f.e, C1, "mine", 4096, 1, NULL), KVF_OK);
	assert_int_equal(end1(f.e, C1, "mine"), KVF_OK);
	/* Heartbeats keep it; silence past the TTL expires it. */
	test_clock_advance_ms(&f.clock, f.cfg.client_ttl_ms / 2);
	assert_int_equal(kvf_client_heartbeat(f.e, C1), KVF_OK);
	assert_int_equal(kvf_client_heartbeat(f.e, C2), KVF_OK);
	test_clock_advance_ms(&f.clock, f.cfg.client_ttl_ms / 2 + 1);
	assert_int_equal(kvf_engine_tick(f.e), KVF_OK);
	assert_int_equal(kvf_client_heartbeat(f.e, C1), KVF_OK);
	test_clock_advance_ms(&f.clock, f.cfg.client_ttl_ms + 1);
	assert_int_equal(kvf_client_heartbeat(f.e, C2), KVF_OK);
	assert_int_equal(kvf_engine_tick(f.e), KVF_OK);
	assert_int_equal(kvf_client_heartbeat(f.e, C1),
			 KVF_ERR_CLIENT_NOT_FOUND);
	assert_int_equal(get1(f.e, "mine", NULL), KVF_OK);
	/* Registered again, then reopened: unknown, its object kept. */
	assert_int_equal(kvf_client_register(f.e, C1), KVF_OK);
	kvf_engine_close(f.e);
	assert_int_equal(kvf_engine_open(&f.cfg, &f.e), KVF_OK);
	assert_int_equal(kvf_client_heartbeat(f.e, C1),
			 KVF_ERR_CLIENT_NOT_FOUND);
	assert_int_equal(get1(f.e, "mine", NULL), KVF_OK);
	kvf_engine_close(f.e);
	free(dir);
}

static int mount_at(struct kvf_engine *e, uint64_t client, uint64_t id,
		    uint64_t base, uint64_t size)
{
	struct kvf_segment_desc d = { .id = id, .name = "s", .base = base,
				      .size = size, .endpoint = "" };

	return kvf_segment_mount(e, client, &d);
}

/* Overlap is judged in the owner's address space, for every client. */
static void test_overlap_rules(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(mount_at(f->e, C1, 1, 0, 16 * MIB), KVF_OK);
	assert_int_equal(mount_at(f->e, C1, 2, 8 * MIB, 16 * MIB),
			 KVF_ERR_SEGMENT_OVERLAP);
	assert_int_equal(mount_at(f->e, C2, 3, 0, 16 * MIB), KVF_OK);
	assert_int_equal(mount_at(f->e, C2, 4, 4 * MIB, 4 * MIB),
			 KVF_ERR_SEGMENT_OVERLAP);
	assert_int_equal(mount_at(f->e, C2, 5, 16 * MIB, 4 * MIB), KVF_OK);
	assert_int_equal(mount_at(f->e, C1, 6, 16 * MIB, 4 * MIB), KVF_OK);
	assert_int_equal(stats_of(f->e).segments, 4);
}

static void test_unmount_errors(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(mount(f->e, C1, 1, 8 * MIB), KVF_OK);
	assert_int_equal(kvf_segment_unmount(f->e, 0, 1),
			 KVF_ERR_INVALID_PARAMS);
	assert_int_equal(kvf_segment_unmount(f->e, C2, 1),
			 KVF_ERR_ILLEGAL_CLIENT);
	assert_int_equal(kvf_segment_unmount(f->e, C1, 99),
			 KVF_ERR_SEGMENT_NOT_FOUND);
	assert_int_equal(kvf_segment_unmount(NULL, C1, 1),
			 KVF_ERR_INVALID_ARGUMENT);
	assert_int_equal(stats_of(f->e).segments, 1);
	assert_int_equal(kvf_segment_unmount(f->e, C1, 1), KVF_OK);
}

static int put_preferring(struct kvf_engine *e, uint64_t client,
			  const char *k, uint64_t seg, uint64_t size)
{
	return put_in_segments(e, client, k, size, &seg, 1);
}

/*
 * put_end/revoke check ownership per item: an unknown client is not a
 * batch refusal, and an expired client may end its puts that kept a
 * replica.
 */
static void test_put_end_client_rules(void **state)
{
	struct fixture *f = *state;
	struct kvf_key keys[2] = { key_of("theirs"), key_of("absent") };
	enum kvf_status st[2];

	assert_int_equal(mount(f->e, C1, 1, 8 * MIB), KVF_OK);
	assert_int_equal(mount(f->e, C2, 2, 8 * MIB), KVF_OK);
	assert_int_equal(put1(f->e, C1, "theirs", 4096, 1, NULL), KVF_OK);
	assert_int_equal(kvf_batch_put_end(f->e, NEVER_SEEN, keys, 2, st),
			 KVF_ERR_PARTIAL);
	assert_int_equal(st[0], KVF_ERR_ILLEGAL_CLIENT);
	assert_int_equal(st[1], KVF_ERR_OBJECT_NOT_FOUND);
	assert_int_equal(kvf_batch_put_revoke(f->e, NEVER_SEEN, keys, 2, st),
			 KVF_ERR_PARTIAL);
	assert_int_equal(st[0], KVF_ERR_ILLEGAL_CLIENT);
	assert_int_equal(kvf_batch_put_start(f->e, NEVER_SEEN, keys,
					     (uint64_t[]){ 1, 1 }, 2,
					     &(struct kvf_put_config){
						     .replica_num = 1 },
					     (struct kvf_replicas[2]){ 0 }, st),
			 KVF_ERR_CLIENT_NOT_FOUND);
	assert_int_equal(st[1], KVF_ERR_CLIENT_NOT_FOUND);

	/* C1's puts: one placed in C2's segment, one in its own. */
	assert_int_equal(put_preferring(f->e, C1, "kept", 2, 4096), KVF_OK);
	assert_int_equal(put_preferring(f->e, C1, "lost", 1, 4096), KVF_OK);
	test_clock_advance_ms(&f->clock, f->cfg.client_ttl_ms + 1);
	assert_int_equal(kvf_client_heartbeat(f->e, C2), KVF_OK);
	assert_int_equal(kvf_engine_tick(f->e), KVF_OK);
	assert_int_equal(stats_of(f->e).expired_clients, 1);
	assert_int_equal(kvf_client_heartbeat(f->e, C1),
			 KVF_ERR_CLIENT_NOT_FOUND);
	assert_int_equal(end1(f->e, C1, "kept"), KVF_OK);
	assert_int_equal(get1(f->e, "kept", NULL), KVF_OK);
	assert_int_equal(end1(f->e, C1, "lost"), KVF_ERR_OBJECT_NOT_FOUND);
	/* Ended: the putter (expired or not) hears so, any other client
	 * that it did not put the object. */
	assert_int_equal(end1(f->e, C1, "kept"), KVF_ERR_OBJECT_ALREADY_EXISTS);
	assert_int_equal(end1(f->e, C2, "kept"), KVF_ERR_ILLEGAL_CLIENT);
	assert_int_equal(revoke1(f->e, NEVER_SEEN, "kept"),
			 KVF_ERR_ILLEGAL_CLIENT);
}

static void open_with_alignment(struct fixture *f, uint64_t alignment)
{
	fixture_config(f);
	f->cfg.alloc_alignment = alignment;
	assert_int_equal(kvf_engine_open(&f->cfg, &f->e), KVF_OK);
}

static void test_alignment_rules(void **state)
{
	struct kvf_engine *e = (struct kvf_engine *)0x1;
	struct fixture f;

	(void)state;
	fixture_config(&f);
	for (uint64_t a = 0; a < 8; a++) {
		f.cfg.alloc_alignment = a;
		assert_int_equal(kvf_engine_open(&f.cfg, &e),
				 KVF_ERR_INVALID_ARGUMENT);
	}
	f.cfg.alloc_alignment = 24;
	assert_int_equal(kvf_engine_open(&f.cfg, &e), KVF_ERR_INVALID_ARGUMENT);
	assert_ptr_equal(e, (struct kvf_engine *)0x1);

	/* Larger than the segment: a parameter error that mounts nothing. */
	open_with_alignment(&f, 4 * MIB);
	assert_int_equal(mount(f.e, C1, 1, 2 * MIB), KVF_ERR_INVALID_PARAMS);
	assert_int_equal(stats_of(f.e).segments, 0);
	assert_int_equal(kvf_client_heartbeat(f.e, C1),
			 KVF_ERR_CLIENT_NOT_FOUND);
	assert_int_equal(mount(f.e, C1, 1, 4 * MIB), KVF_OK);
	kvf_engine_close(f.e);

	open_with_alignment(&f, 8);
	assert_int_equal(mount(f.e, C1, 1, 8 * MIB), KVF_OK);
	assert_int_equal(put_complete(f.e, C1, "eight", 9, 1), KVF_OK);
	assert_int_equal(stats_of(f.e).used_bytes, 16);
	kvf_engine_close(f.e);
}

/* A segment's tail past the last aligned block is neither used nor free. */
static void test_unaligned_tail_not_used(void **state)
{
	struct kvf_segment_info info;
	struct kvf_engine_stats st;
	struct fixture f;
	const uint64_t size = MIB + 4000;

	(void)state;
	open_with_alignment(&f, 4096);
	assert_int_equal(mount(f.e, C1, 1, size), KVF_OK);
	st = stats_of(f.e);
	assert_int_equal(st.capacity_bytes, size);
	assert_int_equal(st.used_bytes, 0);
	assert_int_equal(kvf_segment_query(f.e, 1, &info), KVF_OK);
	assert_int_equal(info.size, size);
	assert_int_equal(info.used_bytes, 0);
	assert_int_equal(info.free_bytes, MIB);
	assert_int_equal(put_complete(f.e, C1, "k", 1, 1), KVF_OK);
	assert_int_equal(stats_of(f.e).used_bytes, 4096);
	assert_int_equal(kvf_segment_query(f.e, 1, &info), KVF_OK);
	assert_int_equal(info.used_bytes + info.free_bytes, MIB);
	kvf_engine_close(f.e);
}

static int put_pinned(struct kvf_engine *e, const char *k, bool hard,
		      bool soft)
{
	struct kvf_key key = key_of(k);
	struct kvf_put_config pc = { .replica_num = 1, .hard_pin = hard,
				     .soft_pin = soft };
	uint64_t size = MIB;
	struct kvf_replicas r;
	enum kvf_status st;
	int ret = kvf_batch_put_start(e, C1, &key, &size, 1, &pc, &r, &st);

	return ret ? ret : end1(e, C1, k);
}

/* Both pins: the hard pin governs, before and after the soft TTL. */
static void test_both_pins(void **state)
{
	struct fixture *f = *state;
	uint64_t freed, evicted;

	assert_int_equal(mount(f->e, C1, 1, 8 * MIB), KVF_OK);
	assert_int_equal(put_pinned(f->e, "both", true, true), KVF_OK);
	assert_int_equal(put_pinned(f->e, "soft", false, true), KVF_OK);
	assert_int_equal(remove1(f->e, "both", false), KVF_ERR_OBJECT_PINNED);
	test_clock_advance_ms(&f->clock, f->cfg.soft_pin_ttl_ms + 1);
	assert_int_equal(kvf_engine_evict(f->e, 8 * MIB, &freed, &evicted),
			 KVF_OK);
	assert_int_equal(evicted, 1);
	assert_int_equal(exist1(f->e, "soft"), KVF_ERR_OBJECT_NOT_FOUND);
	assert_int_equal(stats_of(f->e).objects, 1);
	assert_int_equal(remove1(f->e, "both", false), KVF_ERR_OBJECT_PINNED);
	assert_int_equal(remove1(f->e, "both", true), KVF_OK);
}

/* More preferred segments than the limit: refused whole, not truncated. */
static void test_preferred_limit(void **state)
{
	struct fixture *f = *state;
	uint64_t pref[KVF_MAX_PREFERRED + 1];
	struct kvf_put_config pc = { .replica_num = 1,
				     .preferred_segments = pref };
	struct kvf_key key = key_of("k");
	uint64_t size = 4096;
	struct kvf_replicas r;
	enum kvf_status st;
	char k[16];

	assert_int_equal(mount(f->e, C1, 100, 8 * MIB), KVF_OK);
	for (uint32_t i = 0; i <= KVF_MAX_PREFERRED; i++) {
		pref[i] = i + 1;
		assert_int_equal(mount(f->e, C1, i + 1, MIB), KVF_OK);
	}
	pc.nr_preferred = KVF_MAX_PREFERRED + 1;
	assert_int_equal(kvf_batch_put_start(f->e, C1, &key, &size, 1, &pc,
					     &r, &st),
			 KVF_ERR_INVALID_PARAMS);
	assert_int_equal(st, KVF_ERR_INVALID_PARAMS);
	assert_int_equal(stats_of(f->e).processing, 0);
	/* At the limit every entry counts: all but the last are full. */
	for (uint32_t i = 0; i + 1 < KVF_MAX_PREFERRED; i++) {
		snprintf(k, sizeof(k), "fill-%u", i);
		assert_int_equal(put_preferring(f->e, C1, k, pref[i], MIB),
				 KVF_OK);
	}
	pc.nr_preferred = KVF_MAX_PREFERRED;
	assert_int_equal(kvf_batch_put_start(f->e, C1, &key, &size, 1, &pc,
					     &r, &st),
			 KVF_OK);
	assert_int_equal(r.replica[0].segment_id,
			 pref[KVF_MAX_PREFERRED - 1]);
}

static int put_size(struct kvf_engine *e, const char *k, uint64_t size,
		    uint32_t replicas)
{
	return put1(e, C1, k, size, replicas, NULL);
}

/*
 * A request no mounted segment could hold even empty is a parameter
 * error and leaves eviction alone; one that merely does not fit now is
 * memory pressure and makes the next tick evict.
 */
static void test_impossible_size_is_not_pressure(void **state)
{
	struct fixture *f = *state;
	char k[16];

	assert_int_equal(mount(f->e, C1, 1, 8 * MIB), KVF_OK);
	assert_int_equal(mount(f->e, C1, 2, 2 * MIB), KVF_OK);
	for (int i = 0; i < 7; i++) {
		snprintf(k, sizeof(k), "obj-%d", i);
		assert_int_equal(put_complete(f->e, C1, k, MIB, 1), KVF_OK);
	}
	assert_int_equal(put_size(f->e, "huge", UINT64_MAX, 1),
			 KVF_ERR_INVALID_PARAMS);
	assert_int_equal(put_size(f->e, "huge", UINT64_MAX - 8, 1),
			 KVF_ERR_INVALID_PARAMS);
	assert_int_equal(put_size(f->e, "huge", 8 * MIB + 1, 1),
			 KVF_ERR_INVALID_PARAMS);
	/* Only one segment could hold 3 MiB: two replicas never fit. */
	assert_int_equal(put_size(f->e, "huge", 3 * MIB, 2),
			 KVF_ERR_INVALID_PARAMS);
	assert_int_equal(kvf_engine_tick(f->e), KVF_OK);
	assert_int_equal(stats_of(f->e).evicted_objects, 0);
	assert_int_equal(stats_of(f->e).objects, 7);

	/* 4 MiB fits the empty 8 MiB segment: pressure, so evict. */
	assert_int_equal(put_size(f->e, "big", 4 * MIB, 1), KVF_ERR_NO_SPACE);
	assert_int_equal(kvf_engine_tick(f->e), KVF_OK);
	assert_true(stats_of(f->e).evicted_objects > 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_version),
		cmocka_unit_test(test_defaults_open),
		cmocka_unit_test(test_explicit_durability_needs_dir),
		cmocka_unit_test(test_default_with_dir_journals),
		cmocka_unit_test(test_client_known_until_removed),
		cmocka_unit_test(test_register_without_segment),
		cmocka_unit_test_setup_teardown(test_overlap_rules,
						fixture_setup,
						fixture_teardown),
		cmocka_unit_test_setup_teardown(test_unmount_errors,
						fixture_setup,
						fixture_teardown),
		cmocka_unit_test_setup_teardown(test_put_end_client_rules,
						fixture_setup,
						fixture_teardown),
		cmocka_unit_test(test_alignment_rules),
		cmocka_unit_test(test_unaligned_tail_not_used),
		cmocka_unit_test_setup_teardown(test_both_pins, fixture_setup,
						fixture_teardown),
		cmocka_unit_test_setup_teardown(test_preferred_limit,
						fixture_setup,
						fixture_teardown),
		cmocka_unit_test_setup_teardown(
			test_impossible_size_is_not_pressure, fixture_setup,
			fixture_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
