/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_abi.c - the growable public structs across header
 * versions: a config, stats or segment info struct as an older or newer
 * program lays it out, and what the library must do with each (take defaults,
 * refuse, or read and write only the bytes the caller owns).
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <kvforge.h>

/* A program built against a later header: the same struct, two more
 * fields this library does not know. */
struct newer_config {
	struct kvf_config known;
	uint64_t later[2];
};

struct newer_stats {
	struct kvf_engine_stats known;
	uint64_t later[3];
};

struct newer_info {
	struct kvf_segment_info known;
	uint64_t later[2];
};

static void memory_only(struct kvf_config *cfg)
{
	cfg->background = false;
}

static void test_init_stamps_size(void **state)
{
	struct kvf_config cfg;

	(void)state;
	memset(&cfg, 0xa5, sizeof(cfg));
	kvf_config_init(&cfg);
	assert_int_equal(cfg.struct_size, sizeof(cfg));
	assert_int_equal(cfg.max_batch, 65536);
	assert_null(cfg.log);
	assert_int_equal(cfg.eviction_order, KVF_EVICTION_PREFIX);
	assert_true(KVF_CONFIG_SIZE_MIN < sizeof(cfg));
}

/*
 * A program built against 0.1.0's header (its config ends at log_ctx):
 * the fields appended since are never read from its memory and take
 * their defaults.
 */
static void test_older_config(void **state)
{
	struct kvf_config cfg;
	struct kvf_engine *e = NULL;

	(void)state;
	memset(&cfg, 0xa5, sizeof(cfg));
	assert_int_equal(kvf_config_init_sized(&cfg, KVF_CONFIG_SIZE_MIN),
			 KVF_OK);
	assert_int_equal(cfg.struct_size, KVF_CONFIG_SIZE_MIN);
	/* Past the old layout: untouched, and garbage as far as the
	 * library may know (an eviction order it would refuse). */
	assert_int_equal((unsigned)cfg.eviction_order, 0xa5a5a5a5u);
	memory_only(&cfg);
	assert_int_equal(kvf_engine_open(&cfg, &e), KVF_OK);
	kvf_engine_close(e);
}

static void test_init_refuses_short(void **state)
{
	struct kvf_config cfg, before;

	(void)state;
	memset(&cfg, 0x5a, sizeof(cfg));
	before = cfg;
	assert_int_equal(kvf_config_init_sized(&cfg, KVF_CONFIG_SIZE_MIN - 1),
			 KVF_ERR_INVALID_PARAMS);
	assert_memory_equal(&cfg, &before, sizeof(cfg));
	assert_int_equal(kvf_config_init_sized(&cfg, KVF_CONFIG_SIZE_MAX + 1),
			 KVF_ERR_INVALID_PARAMS);
	assert_memory_equal(&cfg, &before, sizeof(cfg));
	assert_int_equal(kvf_config_init_sized(NULL, sizeof(cfg)),
			 KVF_ERR_INVALID_ARGUMENT);
}

/* A config never initialised (size 0) or with a size below this
 * release's layout is refused, and nothing is opened. */
static void test_open_refuses_bad_size(void **state)
{
	struct kvf_config cfg;
	struct kvf_engine *e = (struct kvf_engine *)&cfg;

	(void)state;
	kvf_config_init(&cfg);
	memory_only(&cfg);
	cfg.struct_size = 0;
	assert_int_equal(kvf_engine_open(&cfg, &e), KVF_ERR_INVALID_PARAMS);
	assert_ptr_equal(e, (struct kvf_engine *)&cfg);
	cfg.struct_size = KVF_CONFIG_SIZE_MIN - sizeof(void *);
	assert_int_equal(kvf_engine_open(&cfg, &e), KVF_ERR_INVALID_PARAMS);
	cfg.struct_size = 1 << 20; /* garbage: never scanned */
	assert_int_equal(kvf_engine_open(&cfg, &e), KVF_ERR_INVALID_PARAMS);
	assert_ptr_equal(e, (struct kvf_engine *)&cfg);
}

static void test_newer_config(void **state)
{
	struct newer_config big;
	struct kvf_engine *e = NULL;

	(void)state;
	memset(&big, 0xff, sizeof(big));
	assert_int_equal(kvf_config_init_sized(&big.known, sizeof(big)),
			 KVF_OK);
	assert_int_equal(big.known.struct_size, sizeof(big));
	/* Fields this library does not know keep their zero default. */
	assert_int_equal(big.later[0], 0);
	assert_int_equal(big.later[1], 0);
	memory_only(&big.known);
	assert_int_equal(kvf_engine_open(&big.known, &e), KVF_OK);
	kvf_engine_close(e);
	/* A later field set to something this library cannot honour. */
	big.later[1] = 1;
	e = NULL;
	assert_int_equal(kvf_engine_open(&big.known, &e),
			 KVF_ERR_INVALID_PARAMS);
	assert_null(e);
}

/* The config is validated as the library's own copy: bad values are still
 * refused whatever the size. */
static void test_values_still_checked(void **state)
{
	struct newer_config big;
	struct kvf_engine *e = NULL;

	(void)state;
	kvf_config_init_sized(&big.known, sizeof(big));
	memory_only(&big.known);
	big.known.max_batch = 0;
	assert_int_equal(kvf_engine_open(&big.known, &e),
			 KVF_ERR_INVALID_ARGUMENT);
	assert_null(e);
}

static struct kvf_engine *open_engine(void)
{
	struct kvf_config cfg;
	struct kvf_engine *e;

	kvf_config_init(&cfg);
	memory_only(&cfg);
	assert_int_equal(kvf_engine_open(&cfg, &e), KVF_OK);
	return e;
}

static void test_stats_sizes(void **state)
{
	struct kvf_engine *e = open_engine();
	struct kvf_engine_stats st;
	struct newer_stats big;
	struct kvf_segment_desc seg = {.id = 3,
				       .name = "s",
				       .base = 1 << 20,
				       .size = 8 << 20,
				       .endpoint = ""};

	(void)state;
	assert_int_equal(kvf_segment_mount(e, 9, &seg), KVF_OK);
	assert_int_equal(kvf_engine_get_stats(e, &st), KVF_OK);
	assert_int_equal(st.struct_size, sizeof(st));
	assert_int_equal(st.segments, 1);
	assert_int_equal(st.capacity_bytes, 8 << 20);

	/* Newer caller: what this library knows, the rest zeroed. */
	memset(&big, 0xff, sizeof(big));
	assert_int_equal(kvf_engine_get_stats_sized(e, &big.known, sizeof(big)),
			 KVF_OK);
	assert_int_equal(big.known.struct_size, sizeof(big.known));
	assert_int_equal(big.known.segments, 1);
	for (int i = 0; i < 3; i++)
		assert_int_equal(big.later[i], 0);

	/* Too small for this release's layout: refused, untouched. */
	memset(&st, 0x77, sizeof(st));
	assert_int_equal(kvf_engine_get_stats_sized(
				 e, &st, KVF_ENGINE_STATS_SIZE_MIN - 8),
			 KVF_ERR_INVALID_PARAMS);
	assert_int_equal(st.segments, 0x7777777777777777ULL);
	assert_int_equal(kvf_engine_get_stats(NULL, &st),
			 KVF_ERR_INVALID_ARGUMENT);
	assert_int_equal(kvf_engine_get_stats(e, NULL),
			 KVF_ERR_INVALID_ARGUMENT);
	kvf_engine_close(e);
}

static void test_segment_info_sizes(void **state)
{
	struct kvf_engine *e = open_engine();
	struct kvf_segment_info info;
	struct newer_info big;
	struct kvf_segment_desc seg = {.id = 4,
				       .name = "s4",
				       .base = 1 << 20,
				       .size = 8 << 20,
				       .endpoint = "ep"};

	(void)state;
	assert_int_equal(kvf_segment_mount(e, 9, &seg), KVF_OK);
	assert_int_equal(kvf_segment_query(e, 4, &info), KVF_OK);
	assert_int_equal(info.struct_size, sizeof(info));
	assert_int_equal(info.size, 8 << 20);
	assert_string_equal(info.endpoint, "ep");
	memset(&big, 0xff, sizeof(big));
	assert_int_equal(kvf_segment_query_sized(e, 4, &big.known, sizeof(big)),
			 KVF_OK);
	assert_int_equal(big.known.struct_size, sizeof(big.known));
	assert_int_equal(big.known.client_id, 9);
	assert_int_equal(big.later[0], 0);
	assert_int_equal(big.later[1], 0);
	/* Refusals leave the caller's struct alone. */
	memset(&info, 0x77, sizeof(info));
	assert_int_equal(kvf_segment_query_sized(e, 4, &info,
						 KVF_SEGMENT_INFO_SIZE_MIN - 1),
			 KVF_ERR_INVALID_PARAMS);
	assert_int_equal(kvf_segment_query(e, 5, &info),
			 KVF_ERR_SEGMENT_NOT_FOUND);
	assert_int_equal(info.id, 0x7777777777777777ULL);
	kvf_engine_close(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_init_stamps_size),
		cmocka_unit_test(test_older_config),
		cmocka_unit_test(test_init_refuses_short),
		cmocka_unit_test(test_open_refuses_bad_size),
		cmocka_unit_test(test_newer_config),
		cmocka_unit_test(test_values_still_checked),
		cmocka_unit_test(test_stats_sizes),
		cmocka_unit_test(test_segment_info_sizes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
