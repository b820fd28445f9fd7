/* SPDX-License-Identifier: MIT */
/*
 * tests/master/test_metrics.c - the metrics registry and its renderings,
 * without sockets: counters move with recorded RPCs, the page is valid
 * Prometheus text with upstream's family names, histograms are
 * cumulative, gauges come from the engine, the stage profile appears when
 * the profiler is on.
 */
#include "config.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <kvforge.h>

#include "http/metrics.h"
#include "tests/master/test_http_util.h"

#ifndef KVF_FIXTURES_DIR
#error "KVF_FIXTURES_DIR must name tests/master/fixtures"
#endif

static char *render(struct kvf_metrics *m)
{
	char *text, bad[512];
	size_t len;

	assert_int_equal(kvf_metrics_render_prometheus(m, &text, &len), KVF_OK);
	assert_int_equal(strlen(text), len);
	if (!prom_check(text, bad, sizeof(bad)))
		fail_msg("not Prometheus text: \"%s\"", bad);
	return text;
}

static void assert_series(const char *text, const char *series, double want)
{
	double got = prom_value(text, series);

	if (got != want)
		fail_msg("%s: got %g, want %g", series, got, want);
}

static void test_empty_page(void **state)
{
	struct kvf_metrics *m;
	char *text;

	(void)state;
	assert_int_equal(kvf_metrics_new(&m), KVF_OK);
	text = render(m);
	/* Upstream's families are there from the start, at zero. */
	assert_series(text, "master_put_start_requests_total", 0);
	assert_series(text, "master_batch_get_replica_list_items_total", 0);
	assert_series(text, "master_ping_failures_total", 0);
	assert_series(text, "master_update_task_requests_total", 0);
	assert_series(text, "master_key_count", 0);
	assert_series(text, "master_value_size_bytes_bucket{le=\"+Inf\"}", 0);
	assert_series(text, "kvforge_rpc_connections", 0);
	/* Single RPCs have no per-item families, as upstream. */
	assert_null(strstr(text, "master_put_start_items_total"));
	/* Labelled series appear only once an RPC was answered. */
	assert_null(strstr(text, "kvforge_rpc_requests_total{"));
	assert_non_null(strstr(text, "# TYPE master_put_start_requests_total "
				     "counter\n"));
	free(text);
	kvf_metrics_free(m);
}

static void test_counters_move(void **state)
{
	struct kvf_metrics *m;
	char *text;

	(void)state;
	assert_int_equal(kvf_metrics_new(&m), KVF_OK);
	for (int i = 0; i < 8; i++)
		kvf_metrics_rpc_done(m, KVF_RPC_PutStart, 2000, i < 2, 0, 0);
	/* Batches: all fine, partial, all failed, failure flagged. */
	kvf_metrics_rpc_done(m, KVF_RPC_BatchGetReplicaList, 5000, false, 4, 0);
	kvf_metrics_rpc_done(m, KVF_RPC_BatchGetReplicaList, 5000, false, 4, 1);
	kvf_metrics_rpc_done(m, KVF_RPC_BatchGetReplicaList, 5000, true, 4, 4);
	/* failed_items beyond items is clamped. */
	kvf_metrics_rpc_done(m, KVF_RPC_BatchGetReplicaList, 5000, true, 2, 9);
	kvf_metrics_rpc_done(m, KVF_RPC_GetReplicaList, 1000, true, 0, 0);
	kvf_metrics_rpc_done(m, KVF_RPC_GetReplicaList, 1000, false, 0, 0);
	kvf_metrics_rpc_done(m, KVF_RPC_UpsertStart, 1000, false, 0, 0);
	/* Out-of-range RPCs and NULL registries are ignored. */
	kvf_metrics_rpc_done(m, KVF_RPC__COUNT, 1, false, 0, 0);
	kvf_metrics_rpc_done(NULL, KVF_RPC_Ping, 1, false, 0, 0);

	text = render(m);
	assert_series(text, "master_put_start_requests_total", 8);
	assert_series(text, "master_put_start_failures_total", 2);
	assert_series(text, "master_batch_get_replica_list_requests_total", 4);
	assert_series(text, "master_batch_get_replica_list_failures_total", 2);
	assert_series(text,
		      "master_batch_get_replica_list_partial_successes_total",
		      1);
	assert_series(text, "master_batch_get_replica_list_items_total", 14);
	assert_series(text, "master_batch_get_replica_list_failed_items_total",
		      7);
	/* Upstream's get counters: 2 single gets + 14 batch items. */
	assert_series(text, "total_get_nums_", 16);
	assert_series(text, "valid_get_nums_", 1 + 7);
	assert_series(text, "mem_cache_hit_nums_", 8);
	/* KVForge's labelled families, including RPCs upstream has none for. */
	assert_series(text, "kvforge_rpc_requests_total{rpc=\"PutStart\"}", 8);
	assert_series(text, "kvforge_rpc_failures_total{rpc=\"PutStart\"}", 2);
	assert_series(text, "kvforge_rpc_requests_total{rpc=\"UpsertStart\"}",
		      1);
	assert_series(text,
		      "kvforge_rpc_items_total{rpc=\"BatchGetReplicaList\"}",
		      14);
	assert_series(text,
		      "kvforge_rpc_partial_successes_total{rpc="
		      "\"BatchGetReplicaList\"}",
		      1);
	assert_series(text, "kvforge_rpc_requests_total{rpc=\"Ping\"}", -1);
	assert_null(strstr(text, "kvforge_rpc_items_total{rpc=\"PutStart\"}"));
	free(text);
	kvf_metrics_free(m);
}

/* Every bucket of @rpc's latency histogram, checked cumulative. */
static void check_cumulative(const char *text, const char *rpc,
			     double *count_out)
{
	char prefix[128];
	const char *p = text;
	double prev = 0, v = 0;
	int buckets = 0;

	snprintf(prefix, sizeof(prefix),
		 "kvforge_rpc_latency_seconds_bucket{rpc=\"%s\",le=\"", rpc);
	while ((p = strstr(p, prefix))) {
		const char *sp = strchr(p, ' ');

		v = strtod(sp + 1, NULL);
		assert_true(v >= prev);
		prev = v;
		buckets++;
		p = sp;
	}
	assert_true(buckets > 10);
	snprintf(prefix, sizeof(prefix),
		 "kvforge_rpc_latency_seconds_count{rpc=\"%s\"}", rpc);
	assert_series(text, prefix, v); /* +Inf bucket == count */
	*count_out = v;
}

static void test_latency_histogram(void **state)
{
	static const uint64_t lat_ns[] = {
		500, 1000, 1001, 3000, 70000, 70000, 2000000, 20000000000ULL};
	struct kvf_metrics *m;
	char *text, series[160];
	double count, sum;

	(void)state;
	assert_int_equal(kvf_metrics_new(&m), KVF_OK);
	for (size_t i = 0; i < sizeof(lat_ns) / sizeof(lat_ns[0]); i++)
		kvf_metrics_rpc_done(m, KVF_RPC_BatchPutEnd, lat_ns[i], false,
				     1, 0);
	text = render(m);
	check_cumulative(text, "BatchPutEnd", &count);
	assert_true(count == 8);
#define BUCKET(le)                                                             \
	(snprintf(series, sizeof(series),                                      \
		  "kvforge_rpc_latency_seconds_bucket{rpc=\"BatchPutEnd\","    \
		  "le=\"%s\"}",                                                \
		  le),                                                         \
	 series)
	/* le is inclusive: 1000 ns is in the 1 us bucket, 1001 is not. */
	assert_series(text, BUCKET("0.000001"), 2);
	assert_series(text, BUCKET("0.0000025"), 3);
	assert_series(text, BUCKET("0.000005"), 4);
	assert_series(text, BUCKET("0.0001"), 6);
	assert_series(text, BUCKET("0.0025"), 7);
	assert_series(text, BUCKET("10"), 7);
	assert_series(text, BUCKET("+Inf"), 8);
#undef BUCKET
	sum = prom_value(
		text, "kvforge_rpc_latency_seconds_sum{rpc=\"BatchPutEnd\"}");
	assert_true(fabs(sum - 20.002145501) < 1e-6);
	free(text);
	kvf_metrics_free(m);
}

static void test_unsupported_connections_sizes(void **state)
{
	static const uint64_t sizes[] = {100, 4096, 4097, 1 << 20, 100000000};
	static const enum kvf_status st[] = {KVF_OK, KVF_OK, KVF_ERR_NO_SPACE,
					     KVF_OK, KVF_OK};
	struct kvf_metrics *m;
	char *text;

	(void)state;
	assert_int_equal(kvf_metrics_new(&m), KVF_OK);
	kvf_metrics_unsupported(m, KVF_RPC_CopyStart);
	kvf_metrics_unsupported(m, KVF_RPC_CopyStart);
	kvf_metrics_rpc_done(m, KVF_RPC_CopyStart, 100, true, 0, 0);
	kvf_metrics_connections(m, 1);
	kvf_metrics_connections(m, 1);
	kvf_metrics_connections(m, 1);
	kvf_metrics_connections(m, -1);
	kvf_metrics_value_sizes(m, sizes, st, 5);
	kvf_metrics_value_sizes(m, sizes, NULL, 1);

	text = render(m);
	assert_series(text,
		      "kvforge_rpc_not_supported_total{rpc=\"CopyStart\"}", 2);
	assert_series(text, "master_copy_start_failures_total", 1);
	assert_series(text, "kvforge_rpc_connections", 2);
	assert_series(text,
		      "master_value_size_bytes_bucket{le=\"4096.000000\"}", 3);
	assert_series(text,
		      "master_value_size_bytes_bucket{le=\"65536.000000\"}", 3);
	assert_series(text,
		      "master_value_size_bytes_bucket{le=\"1048576.000000\"}",
		      4);
	assert_series(text,
		      "master_value_size_bytes_bucket{le=\"67108864.000000\"}",
		      4);
	assert_series(text, "master_value_size_bytes_bucket{le=\"+Inf\"}", 5);
	assert_series(text, "master_value_size_bytes_count", 5);
	assert_series(text, "master_value_size_bytes_sum",
		      100 + 4096 + (1 << 20) + 100000000 + 100);
	free(text);
	kvf_metrics_free(m);
}

static uint64_t seven_clients(void *ctx)
{
	return *(uint64_t *)ctx;
}

static struct kvf_engine *open_engine(void)
{
	struct kvf_config cfg;
	struct kvf_engine *e;

	kvf_config_init(&cfg);
	cfg.durability = KVF_DURABILITY_NONE;
	cfg.background = false;
	assert_int_equal(kvf_engine_open(&cfg, &e), KVF_OK);
	return e;
}

/* Mount a 64 MiB segment for client 1 and put @n objects of 4 KiB. */
static void fill_engine(struct kvf_engine *e, unsigned n)
{
	struct kvf_segment_desc seg = {.id = 11,
				       .name = "seg",
				       .base = 1ULL << 40,
				       .size = 64 << 20,
				       .endpoint = "127.0.0.1:1"};
	struct kvf_put_config pc = {.replica_num = 1};
	struct kvf_key keys[16];
	uint64_t sizes[16];
	struct kvf_replicas out[16];
	enum kvf_status st[16];
	char names[16][16];

	assert_true(n <= 16);
	assert_int_equal(kvf_segment_mount(e, 1, &seg), KVF_OK);
	for (unsigned i = 0; i < n; i++) {
		snprintf(names[i], sizeof(names[i]), "key-%u", i);
		keys[i] = (struct kvf_key){names[i], strlen(names[i])};
		sizes[i] = 4096;
	}
	assert_int_equal(
		kvf_batch_put_start(e, 1, keys, sizes, n, &pc, out, st),
		KVF_OK);
	/* Half ended, half still processing. */
	assert_int_equal(kvf_batch_put_end(e, 1, keys, n / 2, st), KVF_OK);
}

static void test_engine_gauges(void **state)
{
	struct kvf_metrics *m;
	struct kvf_engine *e = open_engine();
	struct kvf_engine_stats st;
	uint64_t clients = 7;
	char *text;

	(void)state;
	assert_int_equal(kvf_metrics_new(&m), KVF_OK);
	fill_engine(e, 8);
	kvf_metrics_set_source(m, e, NULL, NULL);
	text = render(m);
	assert_series(text, "master_total_capacity_bytes", 64 << 20);
	assert_series(text, "master_allocated_bytes", 8 * 4096);
	assert_series(text, "master_key_count", 8);
	assert_series(text, "kvforge_engine_objects", 4);
	assert_series(text, "kvforge_engine_processing_objects", 4);
	assert_series(text, "kvforge_engine_segments", 1);
	/* The memory gauges are the engine's own counts. */
	assert_int_equal(kvf_engine_get_stats(e, &st), KVF_OK);
	assert_true(st.index_bytes > 0 && st.allocator_bytes > 0);
	assert_series(text, "kvforge_engine_record_bytes",
		      (double)st.record_bytes);
	assert_series(text, "kvforge_engine_index_bytes",
		      (double)st.index_bytes);
	assert_series(text, "kvforge_engine_allocator_bytes",
		      (double)st.allocator_bytes);
	/* Without a callback, active clients are the engine's. */
	assert_series(text, "master_active_clients", 1);
	/* The profiler is off: no stage families. */
	assert_null(strstr(text, "kvforge_stage_"));
	free(text);

	kvf_metrics_set_source(m, e, seven_clients, &clients);
	text = render(m);
	assert_series(text, "master_active_clients", 7);
	free(text);
	kvf_metrics_free(m);
	kvf_engine_close(e);
}

/* ---- upstream's engine families after a scenario ----------------------- */

struct scene {
	struct kvf_engine *e;
	struct kvf_metrics *m;
	uint64_t now_ns;
};

static uint64_t scene_clock(void *ctx)
{
	return ((struct scene *)ctx)->now_ns;
}

static void scene_advance_ms(struct scene *sc, uint64_t ms)
{
	sc->now_ns += ms * 1000000;
	assert_int_equal(kvf_client_heartbeat(sc->e, 1), KVF_OK);
	assert_int_equal(kvf_engine_tick(sc->e), KVF_OK);
}

/*
 * An engine on @sc's clock (discard timeout 1 s, release timeout 5 s)
 * with two 1 MiB segments of client 1, and a registry reading it.
 */
static void scene_open(struct scene *sc)
{
	struct kvf_segment_desc seg = {.name = "seg",
				       .size = 1 << 20,
				       .endpoint = "127.0.0.1:1"};
	struct kvf_config cfg;

	sc->now_ns = 1000000000;
	kvf_config_init(&cfg);
	cfg.durability = KVF_DURABILITY_NONE;
	cfg.background = false;
	cfg.clock = scene_clock;
	cfg.clock_ctx = sc;
	cfg.put_discard_timeout_ms = 1000;
	cfg.put_release_timeout_ms = 5000;
	assert_int_equal(kvf_engine_open(&cfg, &sc->e), KVF_OK);
	assert_int_equal(kvf_metrics_new(&sc->m), KVF_OK);
	kvf_metrics_set_source(sc->m, sc->e, NULL, NULL);
	for (uint64_t id = 1; id <= 2; id++) {
		seg.id = id;
		seg.base = id << 40;
		assert_int_equal(kvf_segment_mount(sc->e, 1, &seg), KVF_OK);
	}
}

static void scene_close(struct scene *sc)
{
	kvf_metrics_free(sc->m);
	kvf_engine_close(sc->e);
}

/* One key's put start with @pc: its status. */
static enum kvf_status scene_put(struct scene *sc, const char *k,
				 uint64_t size, const struct kvf_put_config *pc)
{
	struct kvf_key key = {k, strlen(k)};
	struct kvf_replicas out;
	enum kvf_status st;
	int ret = kvf_batch_put_start(sc->e, 1, &key, &size, 1, pc, &out, &st);

	return ret == KVF_ERR_PARTIAL ? st : (enum kvf_status)ret;
}

static enum kvf_status scene_end(struct scene *sc, const char *k)
{
	struct kvf_key key = {k, strlen(k)};
	enum kvf_status st;
	int ret = kvf_batch_put_end(sc->e, 1, &key, 1, &st);

	return ret == KVF_ERR_PARTIAL ? st : (enum kvf_status)ret;
}

/* Scrape and compare the series of @want ("name value" pairs). */
static void scene_expect(struct scene *sc, ...)
{
	char *text = render(sc->m);
	const char *name;
	va_list ap;

	va_start(ap, sc);
	while ((name = va_arg(ap, const char *)))
		assert_series(text, name, va_arg(ap, double));
	va_end(ap);
	free(text);
}

#define KIB 1024.0

/*
 * Soft pins, a pre-empted put until its release, placements that fail,
 * an eviction pass that frees something and one that cannot: each
 * upstream family counts what upstream's master counts for it.
 */
static void test_upstream_engine_families(void **state)
{
	struct kvf_put_config one = {.replica_num = 1},
			      two = {.replica_num = 2},
			      three = {.replica_num = 3},
			      pinned = {.replica_num = 1, .soft_pin = true};
	struct kvf_key keys[2] = {{"t1", 2}, {"t2", 2}};
	uint64_t sizes[2] = {4096, 4096}, freed, evicted;
	struct kvf_replicas out[2];
	enum kvf_status st[2];
	struct scene sc;

	(void)state;
	scene_open(&sc);
	scene_expect(&sc, "master_soft_pin_key_count", 0.0,
		     "master_put_start_alloc_failures_total", 0.0,
		     "master_put_start_partial_allocations_total", 0.0,
		     "master_attempted_evictions_total", 0.0,
		     "master_put_start_discard_cnt", 0.0, NULL);

	/* Soft pins count from the put's start, complete or not. */
	assert_int_equal(scene_put(&sc, "pin", 4096, &pinned), KVF_OK);
	assert_int_equal(scene_end(&sc, "pin"), KVF_OK);
	assert_int_equal(scene_put(&sc, "pin-open", 4096, &pinned), KVF_OK);
	scene_expect(&sc, "master_soft_pin_key_count", 2.0, NULL);

	/* A put stuck past the discard timeout is pre-empted: its two
	 * 64 KiB buffers are staged until the release timeout. */
	assert_int_equal(scene_put(&sc, "stuck", 64 * 1024, &two), KVF_OK);
	scene_advance_ms(&sc, 1001);
	assert_int_equal(scene_put(&sc, "stuck", 64 * 1024, &two), KVF_OK);
	scene_expect(&sc, "master_put_start_discard_cnt", 1.0,
		     "master_put_start_release_cnt", 0.0,
		     "master_put_start_discarded_staging_size", 128 * KIB,
		     NULL);
	scene_advance_ms(&sc, 5000);
	scene_expect(&sc, "master_put_start_discard_cnt", 1.0,
		     "master_put_start_release_cnt", 1.0,
		     "master_put_start_discarded_staging_size", 0.0, NULL);

	/* Placements that fail: no room for a second 768 KiB replica, and
	 * a batch of two asking for more replicas than segments. */
	assert_int_equal(scene_put(&sc, "big", 768 * 1024, &one), KVF_OK);
	assert_int_equal(scene_end(&sc, "big"), KVF_OK);
	assert_int_equal(scene_put(&sc, "big2", 768 * 1024, &two),
			 KVF_ERR_NO_SPACE);
	assert_int_equal(kvf_batch_put_start(sc.e, 1, keys, sizes, 2, &three,
					     out, st),
			 KVF_ERR_NOT_ENOUGH_SEGMENTS);
	scene_expect(&sc, "master_put_start_alloc_failures_total", 3.0,
		     "master_put_start_partial_allocations_total", 0.0, NULL);

	/* A pass that evicts "big" (the only object neither pinned nor
	 * processing), then one that finds nothing it may take. */
	assert_int_equal(kvf_engine_evict(sc.e, 4096, &freed, &evicted),
			 KVF_OK);
	assert_int_equal(evicted, 1);
	scene_expect(&sc, "master_attempted_evictions_total", 1.0,
		     "master_successful_evictions_total", 1.0,
		     "master_evicted_key_count", 1.0,
		     "master_evicted_size_bytes", 768 * KIB, NULL);
	{
		struct kvf_key k = {"pin", 3};
		struct kvf_replicas r;
		enum kvf_status s1;

		/* Leased, "pin" cannot go; "pin-open" and "stuck" are
		 * processing. */
		assert_int_equal(kvf_batch_get(sc.e, &k, 1, &r, &s1, NULL),
				 KVF_OK);
	}
	assert_int_equal(kvf_engine_evict(sc.e, 4096, &freed, &evicted),
			 KVF_OK);
	assert_int_equal(evicted, 0);
	scene_expect(&sc, "master_attempted_evictions_total", 2.0,
		     "master_successful_evictions_total", 1.0,
		     "master_evicted_key_count", 1.0,
		     "master_evicted_size_bytes", 768 * KIB, NULL);

	/* Soft-pinned keys leave the count when removed or revoked. */
	{
		struct kvf_key k = {"pin", 3}, open = {"pin-open", 8};
		enum kvf_status s1;

		assert_int_equal(kvf_batch_remove(sc.e, &k, 1, true, &s1),
				 KVF_OK);
		assert_int_equal(kvf_batch_put_revoke(sc.e, 1, &open, 1, &s1),
				 KVF_OK);
	}
	scene_expect(&sc, "master_soft_pin_key_count", 0.0, NULL);
	scene_close(&sc);
}

/*
 * A pre-empted put whose buffers lie in two segments: unmounting one
 * unstages its buffer, and the put counts as released only when the
 * other is released too.
 */
static void test_discarded_put_across_unmount(void **state)
{
	struct kvf_put_config two = {.replica_num = 2};
	struct kvf_engine_stats st;
	struct scene sc;

	(void)state;
	scene_open(&sc);
	assert_int_equal(scene_put(&sc, "a", 4096, &two), KVF_OK);
	assert_int_equal(scene_put(&sc, "b", 4096, &two), KVF_OK);
	scene_advance_ms(&sc, 1001);
	assert_int_equal(scene_put(&sc, "a", 4096, &two), KVF_OK);
	assert_int_equal(scene_put(&sc, "b", 4096, &two), KVF_OK);
	assert_int_equal(kvf_engine_get_stats(sc.e, &st), KVF_OK);
	assert_int_equal(st.discarded_puts, 2);
	assert_int_equal(st.discarded_bytes, 4 * 4096);
	/* Segment 1 goes: each put's buffer there is no longer staged,
	 * but each still holds one in segment 2. */
	assert_int_equal(kvf_segment_unmount(sc.e, 1, 1), KVF_OK);
	assert_int_equal(kvf_engine_get_stats(sc.e, &st), KVF_OK);
	assert_int_equal(st.discarded_bytes, 2 * 4096);
	assert_int_equal(st.deferred_frees, 2);
	assert_int_equal(st.released_puts, 0);
	scene_advance_ms(&sc, 5000);
	assert_int_equal(kvf_engine_get_stats(sc.e, &st), KVF_OK);
	assert_int_equal(st.discarded_bytes, 0);
	assert_int_equal(st.released_puts, 2);
	assert_int_equal(st.deferred_frees, 0);
	scene_close(&sc);
}

static void test_stage_profile(void **state)
{
	struct kvf_metrics *m;
	struct kvf_engine *e = open_engine();
	struct kvf_profiler *p = kvf_engine_profiler(e);
	char *text;

	(void)state;
	setenv("KVF_PROFILE_TIER", "clock", 1);
	setenv("KVF_PROFILE_QUIET", "1", 1);
	kvf_profile_enable(p, true);
	assert_int_equal(kvf_metrics_new(&m), KVF_OK);
	kvf_metrics_set_source(m, e, NULL, NULL);
	fill_engine(e, 4);
	text = render(m);
	assert_series(
		text,
		"kvforge_stage_calls_total{op=\"put_start\",stage=\"total\"}",
		1);
	assert_series(
		text,
		"kvforge_stage_keys_total{op=\"put_start\",stage=\"total\"}",
		4);
	assert_true(prom_value(text,
			       "kvforge_stage_seconds_total{op=\"put_start\","
			       "stage=\"total\"}") >= 0);
	assert_series(text, "kvforge_profile_tier{tier=\"clock\"}", 1);
	free(text);
	kvf_metrics_free(m);
	kvf_engine_close(e);
}

static void test_summary_and_health(void **state)
{
	struct kvf_metrics *m;
	char *text;
	size_t len;

	(void)state;
	assert_int_equal(kvf_metrics_new(&m), KVF_OK);
	assert_int_equal(kvf_metrics_render_summary(m, &text, &len), KVF_OK);
	assert_non_null(strstr(text, "Requests (total/failed, mean latency): "
				     "none\n"));
	free(text);

	kvf_metrics_rpc_done(m, KVF_RPC_BatchPutStart, 4000, false, 10, 3);
	kvf_metrics_rpc_done(m, KVF_RPC_Ping, 2000, false, 0, 0);
	kvf_metrics_unsupported(m, KVF_RPC_MoveStart);
	assert_int_equal(kvf_metrics_render_summary(m, &text, &len), KVF_OK);
	assert_int_equal(strlen(text), len);
	assert_non_null(strstr(text, "BatchPutStart=1/0 (4.0 us)"));
	assert_non_null(strstr(text, "Ping=1/0 (2.0 us)"));
	assert_non_null(strstr(text, "BatchPutStart=10/3 (1)"));
	assert_non_null(strstr(text, "Not supported: MoveStart=1\n"));
	free(text);

	assert_int_equal(kvf_metrics_render_health(m, &text, &len), KVF_OK);
	assert_string_equal(text,
			    "{\"status\":\"ok\",\"role\":\"leader\","
			    "\"ha_state\":\"serving\",\"service_ready\":true,"
			    "\"leader_address\":null,\"view_version\":null}");
	assert_int_equal(strlen(text), len);
	free(text);

	assert_int_equal(kvf_metrics_render_health(NULL, &text, &len),
			 KVF_ERR_INVALID_ARGUMENT);
	assert_int_equal(kvf_metrics_new(NULL), KVF_ERR_INVALID_ARGUMENT);
	kvf_metrics_free(m);
	kvf_metrics_free(NULL);
}

/* The checker the other tests rely on must itself refuse bad pages. */
static void test_checker_refuses(void **state)
{
	static const char *const bad_pages[] = {
		"x 1\n",			/* no TYPE before */
		"# TYPE x counter\nx{a=1} 2\n", /* unquoted label */
		"# TYPE x counter\nx one\n",	/* not a number */
		"# TYPE x counter\ny 1\n",	/* other family */
		"# TYPE x counter\nx 1",	/* no final newline */
		"# TYPE x widget\nx 1\n",	/* unknown type */
		"# TYPE x histogram\nx_bucket{le=\"1\" 1\n", /* open brace */
	};
	char bad[128];

	(void)state;
	for (size_t i = 0; i < sizeof(bad_pages) / sizeof(bad_pages[0]); i++)
		assert_false(prom_check(bad_pages[i], bad, sizeof(bad)));
	assert_true(
		prom_check("# HELP x h\n# TYPE x histogram\n"
			   "x_bucket{le=\"+Inf\"} 1\nx_sum 0.5\nx_count 1\n",
			   bad, sizeof(bad)));
}

static char *read_fixture(const char *name)
{
	char path[512];
	FILE *f;
	char *buf;
	long n;

	snprintf(path, sizeof(path), "%s/http/%s", KVF_FIXTURES_DIR, name);
	f = fopen(path, "rb");
	assert_non_null(f);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	rewind(f);
	buf = malloc((size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

/* The "# HELP name " / "# TYPE name " line of @name in @text, or NULL. */
static const char *comment_line(const char *text, const char *kind,
				const char *name, size_t *len)
{
	char prefix[192];
	const char *p = text;
	size_t pl;

	pl = (size_t)snprintf(prefix, sizeof(prefix), "# %s %s ", kind, name);
	while ((p = strstr(p, prefix))) {
		if (p == text || p[-1] == '\n') {
			*len = (size_t)(strchr(p, '\n') - p);
			return p;
		}
		p += pl;
	}
	return NULL;
}

/*
 * Against the page captured from upstream's mooncake_master: every
 * family both pages have is declared with the same type and help text,
 * the families docs/metrics.md promises are there, and /health answers
 * upstream's body.
 */
static void test_matches_upstream_page(void **state)
{
	static const char *const promised[] = {
		"master_allocated_bytes",
		"master_total_capacity_bytes",
		"master_key_count",
		"master_active_clients",
		"master_value_size_bytes",
		"master_exist_key_requests_total",
		"master_put_start_failures_total",
		"master_ping_requests_total",
		"master_fetch_tasks_requests_total",
		"master_update_task_failures_total",
		"master_batch_put_end_partial_successes_total",
		"master_batch_get_replica_list_failed_items_total",
		"master_batch_replica_clear_items_total",
		"total_get_nums_",
		"valid_get_nums_",
		"mem_cache_hit_nums_",
		"master_evicted_key_count",
		"master_soft_pin_key_count",
		"master_put_start_alloc_failures_total",
		"master_put_start_partial_allocations_total",
		"master_successful_evictions_total",
		"master_attempted_evictions_total",
		"master_evicted_size_bytes",
		"master_put_start_discard_cnt",
		"master_put_start_release_cnt",
		"master_put_start_discarded_staging_size",
	};
	char *up = read_fixture("metrics.txt"),
	     *health = read_fixture("health.txt");
	struct kvf_engine *e = open_engine();
	struct kvf_metrics *m;
	char *text, *body;
	size_t len, common = 0;

	(void)state;
	assert_int_equal(kvf_metrics_new(&m), KVF_OK);
	kvf_metrics_set_source(m, e, NULL, NULL);
	text = render(m);
	for (const char *p = up; (p = strstr(p, "# TYPE ")); p++) {
		char name[160];
		const char *mine, *theirs;
		size_t ml, tl;

		if (sscanf(p, "# TYPE %159s", name) != 1)
			fail_msg("bad fixture line at %.40s", p);
		if (!comment_line(text, "TYPE", name, &ml))
			continue;
		common++;
		for (int k = 0; k < 2; k++) {
			const char *kind = k ? "HELP" : "TYPE";

			mine = comment_line(text, kind, name, &ml);
			theirs = comment_line(up, kind, name, &tl);
			assert_non_null(mine);
			assert_non_null(theirs);
			if (ml != tl || memcmp(mine, theirs, ml))
				fail_msg(
					"%s differs from upstream:\n%.*s\n%.*s",
					name, (int)ml, mine, (int)tl, theirs);
		}
	}
	for (size_t i = 0; i < sizeof(promised) / sizeof(promised[0]); i++) {
		if (!comment_line(text, "TYPE", promised[i], &len))
			fail_msg("%s missing", promised[i]);
		assert_non_null(comment_line(up, "TYPE", promised[i], &len));
	}
	assert_true(common >= 80);

	body = strstr(health, "\r\n\r\n");
	assert_non_null(body);
	body += 4;
	free(text);
	assert_int_equal(kvf_metrics_render_health(m, &text, &len), KVF_OK);
	assert_int_equal(len, strcspn(body, "\r\n"));
	assert_memory_equal(text, body, len);
	free(text);
	kvf_metrics_free(m);
	kvf_engine_close(e);
	free(up);
	free(health);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_checker_refuses),
		cmocka_unit_test(test_empty_page),
		cmocka_unit_test(test_counters_move),
		cmocka_unit_test(test_latency_histogram),
		cmocka_unit_test(test_unsupported_connections_sizes),
		cmocka_unit_test(test_engine_gauges),
		cmocka_unit_test(test_upstream_engine_families),
		cmocka_unit_test(test_discarded_put_across_unmount),
		cmocka_unit_test(test_stage_profile),
		cmocka_unit_test(test_summary_and_health),
		cmocka_unit_test(test_matches_upstream_page),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
