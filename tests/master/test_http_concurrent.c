/* SPDX-License-Identifier: MIT */
/*
 * tests/master/test_http_concurrent.c - recording, scraping and metadata
 * traffic at once (run under ThreadSanitizer in CI).
 *
 * Recorder threads call kvf_metrics_rpc_done() and friends while scraper
 * threads fetch /metrics over HTTP and check every page is valid and no
 * counter goes backwards between their scrapes; metadata clients write,
 * read and delete their own keys on keep-alive connections, and a second
 * client per key range races PUTs of a shared rpc_meta key (exactly one
 * may win). An engine worker puts objects while the scrapers read its
 * gauges. At the end, every counter equals what was recorded.
 */
#include "config.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <kvforge.h>

#include "http/http.h"
#include "http/metrics.h"
#include "tests/master/test_http_util.h"

enum {
	RECORDERS = 4,
	RECORDS = 20000,
	SCRAPERS = 2,
	SCRAPES = 25,
	META_CLIENTS = 3,
	META_ROUNDS = 100,
};

struct shared {
	struct kvf_metrics *m;
	struct kvf_engine *e;
	uint16_t mport;
	uint16_t dport;
	atomic_int rpc_meta_wins;
	atomic_bool failed;
	char why[256];
	pthread_mutex_t why_lock;
};

struct worker {
	struct shared *sh;
	int id;
};

static void flag_failure(struct shared *sh, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&sh->why_lock);
	if (!atomic_exchange(&sh->failed, true)) {
		va_start(ap, fmt);
		vsnprintf(sh->why, sizeof(sh->why), fmt, ap);
		va_end(ap);
	}
	pthread_mutex_unlock(&sh->why_lock);
}

/* Each recorder: RECORDS BatchPutStart of 4 items (every 4th partial). */
static void *recorder(void *arg)
{
	struct worker *w = arg;
	struct kvf_metrics *m = w->sh->m;
	uint64_t size = 8192;

	for (int i = 0; i < RECORDS; i++) {
		kvf_metrics_rpc_done(m, KVF_RPC_BatchPutStart,
				     (uint64_t)(i % 7) * 3000, false, 4,
				     i % 4 == 0 ? 1 : 0);
		kvf_metrics_rpc_done(m, KVF_RPC_Ping, 1000, i % 10 == 0, 0, 0);
		/* Gets: every 3rd fails, every 5th batch loses all 8 keys. */
		kvf_metrics_rpc_done(m, KVF_RPC_GetReplicaList, 2000,
				     i % 3 == 0, 0, 0);
		kvf_metrics_rpc_done(m, KVF_RPC_BatchGetReplicaList, 9000,
				     i % 5 == 0, 8, i % 5 == 0 ? 8 : 0);
		if (i % 100 == 0) {
			kvf_metrics_unsupported(m, KVF_RPC_MoveStart);
			kvf_metrics_connections(m, 1);
			kvf_metrics_value_sizes(m, &size, NULL, 1);
			kvf_metrics_connections(m, -1);
		}
	}
	return NULL;
}

static const char *const monotonic_series[] = {
	"master_batch_put_start_requests_total",
	"master_batch_put_start_items_total",
	"master_batch_put_start_partial_successes_total",
	"master_ping_requests_total",
	"master_ping_failures_total",
	"master_value_size_bytes_count",
	"valid_get_nums_",
	"total_get_nums_",
	"kvforge_rpc_not_supported_total{rpc=\"MoveStart\"}",
};
#define N_MONO (sizeof(monotonic_series) / sizeof(monotonic_series[0]))

static void *scraper(void *arg)
{
	struct worker *w = arg;
	double last[N_MONO];
	char bad[256];

	for (size_t k = 0; k < N_MONO; k++)
		last[k] = -1; /* labelled series are absent at first */

	for (int i = 0; i < SCRAPES; i++) {
		int status = 0;
		char *body = http_get_body(w->sh->mport, "/metrics", &status);

		if (!body || status != 200) {
			flag_failure(w->sh, "scrape %d: status %d", i, status);
			free(body);
			return NULL;
		}
		if (!prom_check(body, bad, sizeof(bad)))
			flag_failure(w->sh, "invalid line \"%s\"", bad);
		for (size_t k = 0; k < N_MONO; k++) {
			double v = prom_value(body, monotonic_series[k]);

			if (v < last[k])
				flag_failure(w->sh, "%s went back: %g -> %g",
					     monotonic_series[k], last[k], v);
			if (v > last[k])
				last[k] = v;
		}
		free(body);
	}
	return NULL;
}

static bool meta_call(struct shared *sh, struct http_conn_buf *cb,
		      const char *req, int status, const char *body)
{
	struct http_reply r;
	bool ok = http_send_all(cb->fd, req, strlen(req)) &&
		  http_read_reply(cb, false, &r);

	if (!ok) {
		flag_failure(sh, "no answer to %.40s", req);
		return false;
	}
	if (r.status != status || (body && strcmp(r.body, body))) {
		flag_failure(sh, "%.40s: %d %s", req, r.status, r.body);
		ok = false;
	}
	http_reply_free(&r);
	return ok;
}

static void *meta_client(void *arg)
{
	struct worker *w = arg;
	struct shared *sh = w->sh;
	struct http_conn_buf *cb = calloc(1, sizeof(*cb));
	char req[256], val[64];
	struct http_reply r;

	cb->fd = http_connect(sh->dport);
	if (cb->fd < 0) {
		flag_failure(sh, "connect");
		free(cb);
		return NULL;
	}
	/* Everyone races for one rpc_meta key: one PUT may succeed. */
	snprintf(req, sizeof(req),
		 "PUT /metadata?key=race_rpc_meta HTTP/1.1\r\n"
		 "Content-Length: 1\r\n\r\n%d",
		 w->id);
	if (http_send_all(cb->fd, req, strlen(req)) &&
	    http_read_reply(cb, false, &r)) {
		if (r.status == 200)
			atomic_fetch_add(&sh->rpc_meta_wins, 1);
		else if (r.status != 400)
			flag_failure(sh, "rpc_meta race: %d", r.status);
		http_reply_free(&r);
	}
	for (int i = 0; i < META_ROUNDS && !atomic_load(&sh->failed); i++) {
		snprintf(val, sizeof(val), "{\"client\":%d,\"round\":%d}",
			 w->id, i);
		snprintf(req, sizeof(req),
			 "PUT /metadata?key=c%d-k%d HTTP/1.1\r\n"
			 "Content-Length: %zu\r\n\r\n%s",
			 w->id, i % 10, strlen(val), val);
		if (!meta_call(sh, cb, req, 200, "metadata updated"))
			break;
		snprintf(req, sizeof(req),
			 "GET /metadata?key=c%d-k%d HTTP/1.1\r\n\r\n", w->id,
			 i % 10);
		if (!meta_call(sh, cb, req, 200, val))
			break;
		if (i % 3 == 0) {
			snprintf(
				req, sizeof(req),
				"DELETE /metadata?key=c%d-k%d HTTP/1.1\r\n\r\n",
				w->id, i % 10);
			if (!meta_call(sh, cb, req, 200, "metadata deleted"))
				break;
		}
	}
	close(cb->fd);
	free(cb);
	return NULL;
}

/* Puts objects into the engine while scrapers read its gauges. */
static void *engine_worker(void *arg)
{
	struct worker *w = arg;
	struct kvf_put_config pc = {.replica_num = 1};
	enum kvf_status st[8];
	struct kvf_replicas out[8];
	struct kvf_key keys[8];
	uint64_t sizes[8];
	char names[8][24];

	for (int round = 0; round < 50; round++) {
		for (int i = 0; i < 8; i++) {
			snprintf(names[i], sizeof(names[i]), "obj-%d-%d", round,
				 i);
			keys[i] = (struct kvf_key){names[i], strlen(names[i])};
			sizes[i] = 4096;
		}
		if (kvf_batch_put_start(w->sh->e, 1, keys, sizes, 8, &pc, out,
					st) != KVF_OK ||
		    kvf_batch_put_end(w->sh->e, 1, keys, 8, st) != KVF_OK) {
			flag_failure(w->sh, "engine put round %d", round);
			break;
		}
	}
	return NULL;
}

static void test_concurrent(void **state)
{
	struct kvf_http_options o = {.host = "127.0.0.1", .port = 0};
	struct kvf_segment_desc seg = {.id = 5,
				       .name = "seg",
				       .base = 1ULL << 40,
				       .size = 64 << 20,
				       .endpoint = "127.0.0.1:1"};
	struct kvf_http_server *msrv, *dsrv;
	struct shared sh = {0};
	struct kvf_config cfg;
	pthread_t t[RECORDERS + SCRAPERS + META_CLIENTS + 1];
	struct worker w[RECORDERS + SCRAPERS + META_CLIENTS + 1];
	int n = 0, status;
	char *body;

	(void)state;
	pthread_mutex_init(&sh.why_lock, NULL);
	kvf_config_init(&cfg);
	cfg.durability = KVF_DURABILITY_NONE;
	cfg.background = false;
	assert_int_equal(kvf_engine_open(&cfg, &sh.e), KVF_OK);
	assert_int_equal(kvf_segment_mount(sh.e, 1, &seg), KVF_OK);
	assert_int_equal(kvf_metrics_new(&sh.m), KVF_OK);
	kvf_metrics_set_source(sh.m, sh.e, NULL, NULL);
	assert_int_equal(kvf_http_metrics_start(&o, sh.m, &msrv), KVF_OK);
	assert_int_equal(kvf_http_metadata_start(&o, &dsrv), KVF_OK);
	sh.mport = kvf_http_port(msrv);
	sh.dport = kvf_http_port(dsrv);

	for (int i = 0; i < RECORDERS; i++, n++) {
		w[n] = (struct worker){&sh, i};
		assert_int_equal(pthread_create(&t[n], NULL, recorder, &w[n]),
				 0);
	}
	for (int i = 0; i < SCRAPERS; i++, n++) {
		w[n] = (struct worker){&sh, i};
		assert_int_equal(pthread_create(&t[n], NULL, scraper, &w[n]),
				 0);
	}
	for (int i = 0; i < META_CLIENTS; i++, n++) {
		w[n] = (struct worker){&sh, i};
		assert_int_equal(
			pthread_create(&t[n], NULL, meta_client, &w[n]), 0);
	}
	w[n] = (struct worker){&sh, 0};
	assert_int_equal(pthread_create(&t[n], NULL, engine_worker, &w[n]), 0);
	n++;
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	if (atomic_load(&sh.failed))
		fail_msg("%s", sh.why);
	assert_int_equal(atomic_load(&sh.rpc_meta_wins), 1);

	/* Exact totals once everyone is done. */
	body = http_get_body(sh.mport, "/metrics", &status);
	assert_non_null(body);
	assert_int_equal(status, 200);
	assert_true(prom_value(body, "master_batch_put_start_requests_total") ==
		    RECORDERS * RECORDS);
	assert_true(prom_value(body, "master_batch_put_start_items_total") ==
		    4.0 * RECORDERS * RECORDS);
	assert_true(
		prom_value(body, "master_batch_put_start_failed_items_total") ==
		RECORDERS * RECORDS / 4);
	assert_true(
		prom_value(body,
			   "master_batch_put_start_partial_successes_total") ==
		RECORDERS * RECORDS / 4);
	assert_true(prom_value(body, "master_ping_failures_total") ==
		    RECORDERS * RECORDS / 10);
	/* i % 3 == 0 for (RECORDS + 2) / 3 of the i, i % 5 == 0 for RECORDS
	 * / 5. */
	assert_true(prom_value(body, "valid_get_nums_") ==
		    RECORDERS * (RECORDS - (RECORDS + 2) / 3 +
				 8.0 * (RECORDS - RECORDS / 5)));
	assert_true(prom_value(body, "total_get_nums_") ==
		    RECORDERS * 9.0 * RECORDS);
	assert_true(prom_value(body,
			       "kvforge_rpc_not_supported_total{rpc="
			       "\"MoveStart\"}") == RECORDERS * RECORDS / 100);
	assert_true(prom_value(body, "kvforge_rpc_connections") == 0);
	assert_true(prom_value(body, "master_value_size_bytes_sum") ==
		    8192.0 * RECORDERS * RECORDS / 100);
	assert_true(prom_value(body, "master_key_count") == 400);
	free(body);

	kvf_http_stop(msrv);
	kvf_http_stop(dsrv);
	kvf_metrics_free(sh.m);
	kvf_engine_close(sh.e);
	pthread_mutex_destroy(&sh.why_lock);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_concurrent),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
