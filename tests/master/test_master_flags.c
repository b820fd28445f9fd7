// SPDX-License-Identifier: MIT
/*
 * tests/master/test_master_flags.c - kvforge-master's flags: upstream
 * defaults and units, gflags syntax, durations, the JSON config file,
 * unknown flags, refusals, and the translation into an engine config.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <kvforge.h>

#include "master/flags.h"
#include "master/ha_config.h"
#include "master/registry.h"

static int parse(struct kvf_master_flags *f, char *err, ...)
{
	char *argv[32] = {"kvforge-master"};
	int argc = 1;
	va_list ap;
	char *a;

	kvf_flags_defaults(f);
	va_start(ap, err);
	while ((a = va_arg(ap, char *)) != NULL && argc < 31)
		argv[argc++] = a;
	va_end(ap);
	return kvf_flags_parse(f, argc, argv, err, 256);
}

#define PARSE(f, err, ...) parse(f, err, __VA_ARGS__, (char *)NULL)

static void test_upstream_defaults(void **state)
{
	struct kvf_master_flags f;

	(void)state;
	kvf_flags_defaults(&f);
	assert_int_equal(kvf_flags_rpc_port(&f), 50051);
	assert_string_equal(f.rpc_address, "127.0.0.1");
	assert_int_equal(f.metrics_port, 9003);
	assert_true(f.enable_metric_reporting);
	assert_true(f.rpc_enable_tcp_no_delay);
	assert_int_equal(f.default_kv_lease_ttl_ms, 10000);
	assert_int_equal(f.default_kv_soft_pin_ttl_ms, 30 * 60 * 1000);
	assert_int_equal(f.client_ttl_s, 10);
	assert_int_equal(f.put_start_discard_timeout_sec, 30);
	assert_int_equal(f.put_start_release_timeout_sec, 600);
	assert_true(f.eviction_ratio == 0.05);
	assert_true(f.eviction_high_watermark_ratio == 0.90);
	assert_false(f.enable_http_metadata_server);
	assert_int_equal(f.http_metadata_server_port, 8080);
	assert_string_equal(f.allocation_strategy, "random");
	assert_int_equal(f.max_request_bytes, 8u << 20);
	assert_false(f.placement_set);
}

static void test_syntax(void **state)
{
	struct kvf_master_flags f;
	char err[256];

	(void)state;
	assert_int_equal(PARSE(&f, err, "--rpc_port=1234", "--metrics_port",
			       "99", "-client_ttl", "5",
			       "--noenable_metric_reporting",
			       "--enable_http_metadata_server",
			       "--rpc_enable_tcp_no_delay=false"),
			 KVF_OK);
	assert_int_equal(kvf_flags_rpc_port(&f), 1234);
	assert_int_equal(f.metrics_port, 99);
	assert_int_equal(f.client_ttl_s, 5);
	assert_false(f.enable_metric_reporting);
	assert_true(f.enable_http_metadata_server);
	assert_false(f.rpc_enable_tcp_no_delay);
	/* --port is the deprecated spelling, used without --rpc_port. */
	assert_int_equal(PARSE(&f, err, "--port=777"), KVF_OK);
	assert_int_equal(kvf_flags_rpc_port(&f), 777);
	assert_int_equal(PARSE(&f, err, "--port=777", "--rpc_port=0"), KVF_OK);
	assert_int_equal(kvf_flags_rpc_port(&f), 0);
	/* KVForge's dashed names also take underscores. */
	assert_int_equal(PARSE(&f, err, "--data_dir=/x", "--mooncake-abi",
			       "v0.3.12.post1"),
			 KVF_OK);
	assert_string_equal(f.data_dir, "/x");
	assert_string_equal(f.mooncake_abi, "v0.3.12.post1");
}

static void test_durations(void **state)
{
	struct kvf_master_flags f;
	char err[256];

	(void)state;
	assert_int_equal(PARSE(&f, err, "--default_kv_lease_ttl=500ms",
			       "--default_kv_soft_pin_ttl=2h",
			       "--client_ttl=2m",
			       "--put_start_discard_timeout_sec=5000ms"),
			 KVF_OK);
	assert_int_equal(f.default_kv_lease_ttl_ms, 500);
	assert_int_equal(f.default_kv_soft_pin_ttl_ms, 2 * 3600 * 1000);
	assert_int_equal(f.client_ttl_s, 120);
	assert_int_equal(f.put_start_discard_timeout_sec, 5);
	assert_int_equal(PARSE(&f, err, "--default_kv_lease_ttl=3s"), KVF_OK);
	assert_int_equal(f.default_kv_lease_ttl_ms, 3000);
	/* Not a whole number of the flag's unit, unknown suffix, garbage. */
	assert_int_equal(PARSE(&f, err, "--client_ttl=1500ms"),
			 KVF_ERR_INVALID_ARGUMENT);
	assert_int_equal(PARSE(&f, err, "--client_ttl=3d"),
			 KVF_ERR_INVALID_ARGUMENT);
	assert_int_equal(PARSE(&f, err, "--default_kv_lease_ttl=-1"),
			 KVF_ERR_INVALID_ARGUMENT);
	assert_non_null(strstr(err, "default_kv_lease_ttl"));
}

static void test_refusals(void **state)
{
	struct kvf_master_flags f;
	char err[256];

	(void)state;
	assert_int_equal(PARSE(&f, err, "--rpc_port=70000"),
			 KVF_ERR_INVALID_ARGUMENT);
	assert_int_equal(PARSE(&f, err, "--eviction_ratio=1.5"),
			 KVF_ERR_INVALID_ARGUMENT);
	assert_int_equal(PARSE(&f, err, "--enable_metric_reporting=maybe"),
			 KVF_ERR_INVALID_ARGUMENT);
	assert_int_equal(PARSE(&f, err, "--metrics_port"),
			 KVF_ERR_INVALID_ARGUMENT);
	assert_non_null(strstr(err, "needs a value"));
	assert_int_equal(PARSE(&f, err, "positional"),
			 KVF_ERR_INVALID_ARGUMENT);
	assert_int_equal(PARSE(&f, err, "--max_request_bytes=100"),
			 KVF_ERR_INVALID_ARGUMENT);
	assert_int_equal(PARSE(&f, err, "--config_path=/nonexistent/x.json"),
			 KVF_ERR_IO);
}

static void test_unknown_upstream_flags(void **state)
{
	struct kvf_master_flags f;
	char err[256];

	(void)state;
	/* Snapshot/offload flags of mooncake_master: accepted, one warning;
	 * a separate value is consumed with them. */
	assert_int_equal(PARSE(&f, err, "--enable_snapshot",
			       "--snapshot_backup_dir", "/x", "--rpc_port=5",
			       "--enable_offload=true"),
			 KVF_OK);
	assert_int_equal(kvf_flags_rpc_port(&f), 5);
}

static void test_ha_flags(void **state)
{
	struct kvf_master_flags f;
	char err[256];

	(void)state;
	kvf_flags_defaults(&f);
	assert_false(f.enable_ha);
	assert_int_equal(f.ha_lease_ttl_s, 5);
	assert_string_equal(f.ha_backend_type, "etcd");
	assert_string_equal(f.cluster_id, "mooncake_cluster");
	assert_int_equal(PARSE(&f, err, "--enable_ha", "--etcd_endpoints",
			       "a:1;b:2", "--ha_lease_ttl=2s",
			       "--ha_advertise_address", "10.0.0.1:7"),
			 KVF_OK);
	assert_true(f.enable_ha);
	assert_string_equal(f.etcd_endpoints, "a:1;b:2");
	assert_int_equal(f.ha_lease_ttl_s, 2);
	assert_string_equal(f.ha_advertise_address, "10.0.0.1:7");
}

static void test_ha_options(void **state)
{
	struct kvf_master_flags f;
	struct kvf_ha_options o;
	char err[256], adv[KVF_HA_ADDR_MAX];

	(void)state;
	/* the published address: --rpc_address and the port by default */
	assert_int_equal(PARSE(&f, err, "--enable_ha", "--etcd_endpoints",
			       "a:1;b:2", "--rpc_address=10.1.2.3",
			       "--rpc_port=6000"),
			 KVF_OK);
	assert_int_equal(kvf_flags_ha_options(&f, &o, adv, err, sizeof(err)),
			 KVF_OK);
	assert_string_equal(o.advertise, "10.1.2.3:6000");
	assert_string_equal(o.endpoints, "a:1;b:2");
	assert_string_equal(o.cluster_id, "mooncake_cluster");
	assert_int_equal(o.ttl_s, 5);
	assert_false(o.legacy_key);
	assert_int_equal(PARSE(&f, err, "--enable_ha", "--etcd_endpoints",
			       "a:1", "--rpc_address=10.1.2.3",
			       "--ha_publish_legacy_key"),
			 KVF_OK);
	assert_int_equal(kvf_flags_ha_options(&f, &o, adv, err, sizeof(err)),
			 KVF_OK);
	assert_true(o.legacy_key);
	/* IPv6 in brackets; the connstring wins, etcd:// dropped */
	assert_int_equal(PARSE(&f, err, "--enable_ha", "--etcd_endpoints",
			       "a:1", "--ha_backend_connstring=etcd://c:3",
			       "--rpc_address=fd00::1", "--rpc_port=6000"),
			 KVF_OK);
	assert_int_equal(kvf_flags_ha_options(&f, &o, adv, err, sizeof(err)),
			 KVF_OK);
	assert_string_equal(o.advertise, "[fd00::1]:6000");
	assert_string_equal(o.endpoints, "c:3");
	/* a wildcard bind needs an explicit address to publish */
	assert_int_equal(PARSE(&f, err, "--enable_ha", "--etcd_endpoints",
			       "a:1", "--rpc_address=0.0.0.0"),
			 KVF_OK);
	assert_int_equal(kvf_flags_ha_options(&f, &o, adv, err, sizeof(err)),
			 KVF_ERR_INVALID_ARGUMENT);
	assert_non_null(strstr(err, "wildcard"));
	assert_int_equal(PARSE(&f, err, "--enable_ha", "--etcd_endpoints",
			       "a:1", "--rpc_address=0.0.0.0",
			       "--ha_advertise_address=10.0.0.9:50051"),
			 KVF_OK);
	assert_int_equal(kvf_flags_ha_options(&f, &o, adv, err, sizeof(err)),
			 KVF_OK);
	assert_string_equal(o.advertise, "10.0.0.9:50051");
	/* refused: no endpoints, bad endpoints, other backends, TTL 0,
	 * port 0, wildcard or malformed published addresses */
	{
		static const char *const bad[][2] = {
			{"--etcd_endpoints=", "--rpc_port=1"},
			{"--etcd_endpoints=https://a:1", "--rpc_port=1"},
			{"--ha_backend_type=redis", "--etcd_endpoints=a:1"},
			{"--ha_lease_ttl=0", "--etcd_endpoints=a:1"},
			{"--rpc_port=0", "--etcd_endpoints=a:1"},
			{"--ha_advertise_address=[::]:5", "--etcd_endpoints=a:1"},
			{"--ha_advertise_address=:5", "--etcd_endpoints=a:1"},
			{"--ha_advertise_address=h", "--etcd_endpoints=a:1"},
			{"--ha_advertise_address=h:0", "--etcd_endpoints=a:1"},
			{"--ha_advertise_address=a:b:1", "--etcd_endpoints=a:1"},
		};

		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			assert_int_equal(PARSE(&f, err, "--enable_ha",
					       bad[i][0], bad[i][1]),
					 KVF_OK);
			assert_int_equal(kvf_flags_ha_options(&f, &o, adv, err,
							      sizeof(err)),
					 KVF_ERR_INVALID_ARGUMENT);
		}
	}
}

static void test_json_config(void **state)
{
	struct kvf_master_flags f;
	char err[256], path[] = "/tmp/kvf-flags-XXXXXX";
	const char *text =
		"{ \"rpc_port\": 6000, \"client_live_ttl_sec\": 7,\n"
		"  \"enable_metric_reporting\": false, \"eviction_ratio\": "
		"0.1,\n"
		"  \"default_kv_lease_ttl\": \"2s\", \"rpc_address\": "
		"\"0.0.0.0\",\n"
		"  \"root_fs_dir\": \"/mnt\\/fs\", \"enable_ha\": false }";
	int fd = mkstemp(path);
	char arg[64];

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	snprintf(arg, sizeof(arg), "--config_path=%s", path);
	/* The command line overrides the file, wherever it appears. */
	assert_int_equal(PARSE(&f, err, "--rpc_port=6001", arg), KVF_OK);
	unlink(path);
	assert_int_equal(kvf_flags_rpc_port(&f), 6001);
	assert_int_equal(f.client_ttl_s, 7);
	assert_false(f.enable_metric_reporting);
	assert_true(f.eviction_ratio == 0.1);
	assert_int_equal(f.default_kv_lease_ttl_ms, 2000);
	assert_string_equal(f.rpc_address, "0.0.0.0");
	assert_string_equal(f.root_fs_dir, "/mnt/fs");

	/* Strict: syntax errors and wrong kinds are refused. */
	kvf_flags_defaults(&f);
	assert_int_equal(
		kvf_flags_load_json(&f, "{\"rpc_port\": 1,}", err, sizeof(err)),
		KVF_ERR_INVALID_ARGUMENT);
	assert_int_equal(kvf_flags_load_json(&f, "{\"rpc_address\": 5}", err,
					     sizeof(err)),
			 KVF_ERR_INVALID_ARGUMENT);
	assert_int_equal(kvf_flags_load_json(&f,
					     "{\"enable_ha\": true} trailing",
					     err, sizeof(err)),
			 KVF_ERR_INVALID_ARGUMENT);
	assert_int_equal(
		kvf_flags_load_json(&f, "{\"a\": \"\\q\"}", err, sizeof(err)),
		KVF_ERR_INVALID_ARGUMENT);
	assert_int_equal(kvf_flags_load_json(&f, "", err, sizeof(err)),
			 KVF_ERR_INVALID_ARGUMENT);
	assert_int_equal(kvf_flags_load_json(&f, "{}", err, sizeof(err)),
			 KVF_OK);
}

static void test_engine_config(void **state)
{
	struct kvf_master_flags f;
	struct kvf_config cfg;
	char err[256];

	(void)state;
	assert_int_equal(PARSE(&f, err, "--default_kv_lease_ttl=500ms",
			       "--client_ttl=3"),
			 KVF_OK);
	assert_int_equal(kvf_flags_engine_config(&f, &cfg, err, sizeof(err)),
			 KVF_OK);
	assert_int_equal(cfg.lease_ttl_ms, 500);
	assert_int_equal(cfg.client_ttl_ms, 3000);
	assert_int_equal(cfg.durability, KVF_DURABILITY_NONE); /* no dir */
	assert_null(cfg.data_dir);
	assert_int_equal(cfg.placement, KVF_PLACEMENT_FRAGMENTATION_AWARE);
	assert_int_equal(cfg.put_release_timeout_ms, 600000);
	assert_int_equal(cfg.journal_checkpoint_records, 0); /* the engine's */

	/* An explicit upstream strategy is honoured; --placement wins. */
	assert_int_equal(PARSE(&f, err,
			       "--allocation_strategy=free_ratio_first",
			       "--data-dir=/d", "--durability=strict",
			       "--checkpoint_records=5000000"),
			 KVF_OK);
	assert_int_equal(kvf_flags_engine_config(&f, &cfg, err, sizeof(err)),
			 KVF_OK);
	assert_true(cfg.journal_checkpoint_records == 5000000);
	assert_int_equal(cfg.placement, KVF_PLACEMENT_FREE_RATIO_FIRST);
	assert_int_equal(cfg.durability, KVF_DURABILITY_STRICT);
	assert_string_equal(cfg.data_dir, "/d");
	assert_int_equal(PARSE(&f, err, "--allocation_strategy=random",
			       "--placement=fragmentation_aware"),
			 KVF_OK);
	assert_int_equal(kvf_flags_engine_config(&f, &cfg, err, sizeof(err)),
			 KVF_OK);
	assert_int_equal(cfg.placement, KVF_PLACEMENT_FRAGMENTATION_AWARE);
	assert_int_equal(PARSE(&f, err, "--allocation_strategy=cxl"), KVF_OK);
	assert_int_equal(kvf_flags_engine_config(&f, &cfg, err, sizeof(err)),
			 KVF_ERR_INVALID_ARGUMENT);
	assert_int_equal(PARSE(&f, err, "--durability=sometimes"), KVF_OK);
	assert_int_equal(kvf_flags_engine_config(&f, &cfg, err, sizeof(err)),
			 KVF_ERR_INVALID_ARGUMENT);
}

/*
 * Values mooncake_master accepts are accepted with its meaning, and the
 * engine opens with them (docs/master.md, "Accepted ranges").
 */
static void test_upstream_ranges(void **state)
{
	struct kvf_master_flags f;
	struct kvf_config cfg;
	struct kvf_engine *e;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	char err[256];

	(void)state;
	/* No read lease, no eviction, eviction on any use. */
	assert_int_equal(PARSE(&f, err, "--default_kv_lease_ttl=0",
			       "--eviction_ratio=0",
			       "--eviction_high_watermark_ratio=0",
			       "--default_kv_soft_pin_ttl=0",
			       "--put_start_discard_timeout_sec=0"),
			 KVF_OK);
	assert_int_equal(f.default_kv_lease_ttl_ms, 0);
	assert_int_equal(kvf_flags_engine_config(&f, &cfg, err, sizeof(err)),
			 KVF_OK);
	assert_int_equal(cfg.lease_ttl_ms, 0);
	cfg.background = false;
	assert_int_equal(kvf_engine_open(&cfg, &e), KVF_OK);
	kvf_engine_close(e);
	assert_int_equal(PARSE(&f, err, "--eviction_ratio=1",
			       "--eviction_high_watermark_ratio=1"),
			 KVF_OK);
	assert_int_equal(kvf_flags_engine_config(&f, &cfg, err, sizeof(err)),
			 KVF_OK);
	cfg.background = false;
	assert_int_equal(kvf_engine_open(&cfg, &e), KVF_OK);
	kvf_engine_close(e);
	/* Upstream's "0 or less": --max_threads threads, --port. */
	assert_int_equal(PARSE(&f, err, "--rpc_thread_num=-1",
			       "--max_threads=1", "--rpc_port=-1", "--port=7",
			       "--rpc_conn_timeout_seconds=-5"),
			 KVF_OK);
	assert_int_equal(kvf_flags_rpc_threads(&f), 1);
	assert_int_equal(kvf_flags_rpc_port(&f), 7);
	assert_int_equal(PARSE(&f, err, "--rpc_thread_num=0"), KVF_OK);
	assert_int_equal(kvf_flags_rpc_threads(&f), cpus < 4 ? cpus : 4);
	/* What upstream refuses, or cannot mean anything, is refused. */
	assert_int_equal(PARSE(&f, err, "--eviction_high_watermark_ratio=1.01"),
			 KVF_ERR_INVALID_ARGUMENT);
	assert_int_equal(PARSE(&f, err, "--eviction_ratio=-0.1"),
			 KVF_ERR_INVALID_ARGUMENT);
	assert_int_equal(PARSE(&f, err, "--put_start_discard_timeout_sec=600"),
			 KVF_ERR_INVALID_ARGUMENT);
	assert_non_null(strstr(err, "put_start_release_timeout_sec"));
	assert_int_equal(PARSE(&f, err, "--client_ttl=0"),
			 KVF_ERR_INVALID_ARGUMENT);
	assert_int_equal(PARSE(&f, err, "--max_threads=0"),
			 KVF_ERR_INVALID_ARGUMENT);
	assert_int_equal(PARSE(&f, err, "--rpc_thread_num=257"),
			 KVF_ERR_INVALID_ARGUMENT);
	/* 584 years of ms wrap the engine's ns clock. */
	assert_int_equal(PARSE(&f, err,
			       "--default_kv_lease_ttl=18446744073710ms"),
			 KVF_ERR_INVALID_ARGUMENT);
	assert_int_equal(PARSE(&f, err,
			       "--default_kv_lease_ttl=18446744073709ms"),
			 KVF_OK);
}

static void test_help_lists_every_flag(void **state)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *fp = open_memstream(&buf, &len);

	(void)state;
	kvf_flags_help(fp);
	fclose(fp);
	assert_non_null(strstr(buf, "--rpc_port"));
	assert_non_null(strstr(buf, "--default_kv_lease_ttl"));
	assert_non_null(strstr(buf, "--max_request_bytes"));
	assert_non_null(strstr(buf, "--placement"));
	assert_non_null(strstr(buf, "--config_path"));
	free(buf);
}

static void test_uuid_ids(void **state)
{
	struct kvf_uuid a = {1, 2}, b = {2, 1}, z = {0, 0};

	(void)state;
	assert_int_equal(kvf_registry_id(a), kvf_registry_id(a));
	assert_int_not_equal(kvf_registry_id(a), kvf_registry_id(b));
	assert_int_not_equal(kvf_registry_id(z), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_upstream_defaults),
		cmocka_unit_test(test_syntax),
		cmocka_unit_test(test_durations),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_unknown_upstream_flags),
		cmocka_unit_test(test_ha_flags),
		cmocka_unit_test(test_ha_options),
		cmocka_unit_test(test_json_config),
		cmocka_unit_test(test_engine_config),
		cmocka_unit_test(test_upstream_ranges),
		cmocka_unit_test(test_help_lists_every_flag),
		cmocka_unit_test(test_uuid_ids),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
