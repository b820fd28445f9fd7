/* SPDX-License-Identifier: MIT */
/*
 * tests/master/test_http.c - the HTTP servers over real loopback sockets:
 * /metrics, /metrics/summary and /health; the metadata service's
 * upstream paths, codes and bodies; keep-alive, pipelining, HEAD and
 * 100-continue; refusals of malformed, oversized and unsupported requests
 * without harm to the server; listener options; the store on its own.
 */
#include "config.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <poll.h>
#include <setjmp.h>
#include <cmocka.h>

#include <kvforge.h>

#include "http/http.h"
#include "http/metastore.h"
#include "http/metrics.h"
#include "tests/master/test_http_util.h"

struct servers {
	struct kvf_metrics *m;
	struct kvf_http_server *metrics;
	struct kvf_http_server *meta;
	uint16_t mport;
	uint16_t dport;
};

static int setup(void **state)
{
	struct kvf_http_options o = {.host = "127.0.0.1", .port = 0};
	struct servers *s = calloc(1, sizeof(*s));

	assert_non_null(s);
	assert_int_equal(kvf_metrics_new(&s->m), KVF_OK);
	assert_int_equal(kvf_http_metrics_start(&o, s->m, &s->metrics), KVF_OK);
	assert_int_equal(kvf_http_metadata_start(&o, &s->meta), KVF_OK);
	s->mport = kvf_http_port(s->metrics);
	s->dport = kvf_http_port(s->meta);
	assert_int_not_equal(s->mport, 0);
	assert_int_not_equal(s->dport, 0);
	assert_int_not_equal(s->mport, s->dport);
	*state = s;
	return 0;
}

static int teardown(void **state)
{
	struct servers *s = *state;

	kvf_http_stop(s->metrics);
	kvf_http_stop(s->meta);
	kvf_metrics_free(s->m);
	free(s);
	return 0;
}

/* A connection with its read buffer, for several requests in a row. */
static struct http_conn_buf *open_conn(uint16_t port)
{
	struct http_conn_buf *cb = calloc(1, sizeof(*cb));

	assert_non_null(cb);
	cb->fd = http_connect(port);
	assert_true(cb->fd >= 0);
	return cb;
}

static void close_conn(struct http_conn_buf *cb)
{
	close(cb->fd);
	free(cb);
}

static void send_str(struct http_conn_buf *cb, const char *s)
{
	assert_true(http_send_all(cb->fd, s, strlen(s)));
}

static void expect_reply(struct http_conn_buf *cb, bool head_only, int status,
			 const char *body)
{
	struct http_reply r;

	if (!http_read_reply(cb, head_only, &r))
		fail_msg("no answer (want %d); %zu bytes buffered: %.*s",
			 status, cb->len, (int)cb->len, cb->buf);
	if (r.status != status)
		fail_msg("status %d, want %d: %s", r.status, status, r.head);
	if (body)
		assert_string_equal(r.body, body);
	http_reply_free(&r);
}

/* One request on a fresh connection, checking the status and body. */
static void roundtrip(uint16_t port, const char *req, int status,
		      const char *body)
{
	struct http_conn_buf *cb = open_conn(port);

	send_str(cb, req);
	expect_reply(cb, false, status, body);
	close_conn(cb);
}

/* ---- the metrics server ---- */

static void test_metrics_endpoints(void **state)
{
	struct servers *s = *state;
	struct http_reply r;
	char v[128], bad[512];

	kvf_metrics_rpc_done(s->m, KVF_RPC_BatchExistKey, 3000, false, 5, 2);
	assert_true(http_once(s->mport,
			      "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", false,
			      &r));
	assert_int_equal(r.status, 200);
	assert_true(http_header(r.head, "Content-Type", v, sizeof(v)));
	assert_string_equal(v, "text/plain; version=0.0.4");
	assert_true(http_header(r.head, "Content-Length", v, sizeof(v)));
	assert_int_equal(strtoul(v, NULL, 10), r.body_len);
	if (!prom_check(r.body, bad, sizeof(bad)))
		fail_msg("not Prometheus text: \"%s\"", bad);
	assert_true(prom_value(r.body, "master_batch_exist_key_items_total") ==
		    5);
	assert_true(
		prom_value(r.body,
			   "master_batch_exist_key_partial_successes_total") ==
		1);
	http_reply_free(&r);

	/* The counters move between scrapes. */
	kvf_metrics_rpc_done(s->m, KVF_RPC_BatchExistKey, 3000, false, 5, 0);
	assert_true(http_once(s->mport,
			      "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", false,
			      &r));
	assert_true(prom_value(r.body, "master_batch_exist_key_items_total") ==
		    10);
	http_reply_free(&r);

	assert_true(http_once(s->mport,
			      "GET /health HTTP/1.1\r\nHost: x\r\n\r\n", false,
			      &r));
	assert_int_equal(r.status, 200);
	assert_true(http_header(r.head, "Content-Type", v, sizeof(v)));
	assert_string_equal(v, "application/json; charset=utf-8");
	assert_non_null(strstr(r.body, "\"status\":\"ok\""));
	http_reply_free(&r);

	assert_true(http_once(
		s->mport, "GET /metrics/summary HTTP/1.1\r\nHost: x\r\n\r\n",
		false, &r));
	assert_int_equal(r.status, 200);
	assert_non_null(strstr(r.body, "BatchExistKey=2/0"));
	http_reply_free(&r);
}

static void test_metrics_not_found_and_methods(void **state)
{
	struct servers *s = *state;
	struct http_conn_buf *cb = open_conn(s->mport);
	struct http_reply r;
	char v[64];

	/* Unknown paths and wrong methods keep the connection open. */
	send_str(cb, "GET /nope HTTP/1.1\r\nHost: x\r\n\r\n");
	expect_reply(cb, false, 404, "not found");
	send_str(cb, "POST /metrics HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc");
	assert_true(http_read_reply(cb, false, &r));
	assert_int_equal(r.status, 405);
	assert_true(http_header(r.head, "Allow", v, sizeof(v)));
	assert_string_equal(v, "GET, HEAD");
	http_reply_free(&r);
	send_str(cb, "BREW /health HTTP/1.1\r\n\r\n");
	expect_reply(cb, false, 405, NULL);
	/* A query string does not change the route. */
	send_str(cb, "GET /health?verbose=1 HTTP/1.1\r\n\r\n");
	expect_reply(cb, false, 200, NULL);
	/* /metrics/ is not /metrics. */
	send_str(cb, "GET /metrics/ HTTP/1.1\r\n\r\n");
	expect_reply(cb, false, 404, NULL);
	close_conn(cb);
}

static void test_keep_alive_pipelining_head(void **state)
{
	struct servers *s = *state;
	struct http_conn_buf *cb = open_conn(s->mport);
	struct http_reply r;
	char v[64];

	/* Three requests in one write, answered in order. */
	send_str(cb, "GET /health HTTP/1.1\r\n\r\n"
		     "HEAD /metrics HTTP/1.1\r\n\r\n"
		     "GET /nope HTTP/1.1\r\n\r\n");
	expect_reply(cb, false, 200, NULL);
	/* HEAD: the GET's length, no body (else the next answer breaks). */
	assert_true(http_read_reply(cb, true, &r));
	assert_int_equal(r.status, 200);
	assert_true(http_header(r.head, "Content-Length", v, sizeof(v)));
	assert_true(strtoul(v, NULL, 10) > 1000);
	http_reply_free(&r);
	expect_reply(cb, false, 404, NULL);

	/*
	 * Requests that arrive a byte at a time: each byte is served after
	 * the server read its clock, so enough of them cross a clock tick
	 * to catch a deadline computed from a stamp later than "now".
	 */
	for (int i = 0; i < 40; i++) {
		for (const char *p = "GET /health HTTP/1.1\r\n\r\n"; *p; p++)
			assert_true(http_send_all(cb->fd, p, 1));
		expect_reply(cb, false, 200, NULL);
	}

	/* Connection: close is honoured. */
	send_str(cb, "GET /health HTTP/1.1\r\nConnection: close\r\n\r\n");
	expect_reply(cb, false, 200, NULL);
	assert_true(http_peer_closed(cb));
	close_conn(cb);

	/* HTTP/1.0 closes by default, keeps alive when asked. */
	cb = open_conn(s->mport);
	send_str(cb, "GET /health HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
	assert_true(http_read_reply(cb, false, &r));
	http_reply_free(&r);
	send_str(cb, "GET /health HTTP/1.0\r\n\r\n");
	assert_true(http_read_reply(cb, false, &r));
	http_reply_free(&r);
	assert_true(http_peer_closed(cb));
	close_conn(cb);

	/* A client that half-closes after its request still gets the answer. */
	cb = open_conn(s->mport);
	send_str(cb, "GET /health HTTP/1.1\r\n\r\n");
	shutdown(cb->fd, SHUT_WR);
	expect_reply(cb, false, 200, NULL);
	assert_true(http_peer_closed(cb));
	close_conn(cb);
}

/*
 * Send @req on a fresh connection, expect @status and a closed
 * connection, then check the server still answers.
 */
static void refused(uint16_t port, const char *req, size_t len, int status)
{
	struct http_conn_buf *cb = open_conn(port);

	assert_true(http_send_all(cb->fd, req, len));
	expect_reply(cb, false, status, NULL);
	assert_true(http_peer_closed(cb));
	close_conn(cb);
	roundtrip(port, "GET /health HTTP/1.1\r\n\r\n", 200, NULL);
}

#define REFUSED(port, lit, status) refused(port, lit, sizeof(lit) - 1, status)

static void test_bad_requests(void **state)
{
	struct servers *s = *state;
	uint16_t p = s->dport;
	size_t big = 20 * 1024;
	char *req = malloc(big + 64);

	REFUSED(p, "GARBAGE\r\n\r\n", 400);
	REFUSED(p, "GET /health\r\n\r\n", 400);
	REFUSED(p, "GET health HTTP/1.1\r\n\r\n", 400);
	REFUSED(p, "GET /health HTTP/2.0\r\n\r\n", 400);
	REFUSED(p, "GET /health  HTTP/1.1\r\n\r\n", 400);
	REFUSED(p, "GET /health HTTP/1.1\r\nNoColon\r\n\r\n", 400);
	REFUSED(p, "GET /health HTTP/1.1\r\nBad Name: x\r\n\r\n", 400);
	REFUSED(p, "GET /health HTTP/1.1\r\nA: b\r\n folded\r\n\r\n", 400);
	REFUSED(p, "PUT /metadata?key=k HTTP/1.1\r\nContent-Length: x\r\n\r\n",
		400);
	REFUSED(p, "PUT /metadata?key=k HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
		400);
	REFUSED(p,
		"PUT /metadata?key=k HTTP/1.1\r\nContent-Length: 1\r\n"
		"Content-Length: 2\r\n\r\nab",
		400);
	REFUSED(p,
		"PUT /metadata?key=k HTTP/1.1\r\nTransfer-Encoding: chunked\r\n"
		"\r\n3\r\nabc\r\n0\r\n\r\n",
		501);
	REFUSED(p, "PUT /metadata?key=k HTTP/1.1\r\nExpect: magic\r\n\r\n",
		417);
	/* A body over the limit is refused before it is sent. */
	REFUSED(p,
		"PUT /metadata?key=k HTTP/1.1\r\nContent-Length: "
		"9437184\r\n\r\n",
		413);
	/* A head over 16 KiB, with and without its end. */
	strcpy(req, "GET /health HTTP/1.1\r\nX-Long: ");
	memset(req + strlen(req), 'a', big);
	req[30 + big] = '\0';
	refused(p, req, strlen(req), 431);
	strcat(req, "\r\n\r\n");
	refused(p, req, strlen(req), 431);
	/* Too many header lines. */
	strcpy(req, "GET /health HTTP/1.1\r\n");
	for (int i = 0; i < 70; i++)
		strcat(req, "A: b\r\n");
	strcat(req, "\r\n");
	refused(p, req, strlen(req), 431);
	free(req);

	/* Nothing leaked into the store. */
	roundtrip(p, "GET /metadata?key=k HTTP/1.1\r\n\r\n", 404,
		  "metadata not found");
}

/* ---- the metadata server ---- */

static void put_key(struct http_conn_buf *cb, const char *qkey, const char *val,
		    int status, const char *body)
{
	char req[1024];

	snprintf(req, sizeof(req),
		 "PUT /metadata?key=%s HTTP/1.1\r\nContent-Type: "
		 "application/json\r\nContent-Length: %zu\r\n\r\n%s",
		 qkey, strlen(val), val);
	send_str(cb, req);
	expect_reply(cb, false, status, body);
}

static void get_key(struct http_conn_buf *cb, const char *method,
		    const char *qkey, int status, const char *body)
{
	char req[512];

	snprintf(req, sizeof(req), "%s /metadata?key=%s HTTP/1.1\r\n\r\n",
		 method, qkey);
	send_str(cb, req);
	expect_reply(cb, false, status, body);
}

static void test_metadata_roundtrip(void **state)
{
	struct servers *s = *state;
	struct http_conn_buf *cb = open_conn(s->dport);
	struct http_reply r;
	char v[64];

	put_key(cb, "mooncake%2Fram%2Fnode1", "{\"a\":1}", 200,
		"metadata updated");
	send_str(cb, "GET /metadata?key=mooncake/ram/node1 HTTP/1.1\r\n\r\n");
	assert_true(http_read_reply(cb, false, &r));
	assert_int_equal(r.status, 200);
	assert_string_equal(r.body, "{\"a\":1}");
	assert_true(http_header(r.head, "Content-Type", v, sizeof(v)));
	assert_string_equal(v, "application/json");
	http_reply_free(&r);
	/* Overwrite; other parameters around the key are ignored. */
	put_key(cb, "mooncake/ram/node1&x=1", "{\"a\":2}", 200,
		"metadata updated");
	get_key(cb, "GET", "mooncake%2fram%2fnode1", 200, "{\"a\":2}");
	send_str(cb,
		 "GET /metadata?x=1&key=mooncake/ram/node1 HTTP/1.1\r\n\r\n");
	expect_reply(cb, false, 200, "{\"a\":2}");
	/* '+' and %20 are both a space. */
	put_key(cb, "a+b", "", 200, "metadata updated");
	get_key(cb, "GET", "a%20b", 200, "");
	get_key(cb, "DELETE", "a%20b", 200, "metadata deleted");
	get_key(cb, "DELETE", "a%20b", 404, "metadata not found");

	get_key(cb, "DELETE", "mooncake/ram/node1", 200, "metadata deleted");
	get_key(cb, "GET", "mooncake/ram/node1", 404, "metadata not found");

	/* Upstream's answers to a missing or empty key. */
	send_str(cb, "GET /metadata HTTP/1.1\r\n\r\n");
	expect_reply(cb, false, 400, "Missing key parameter");
	get_key(cb, "GET", "", 400, "Missing key parameter");
	get_key(cb, "DELETE", "", 400, "Missing key parameter");
	put_key(cb, "", "x", 400, "Missing key parameter");
	get_key(cb, "GET", "bad%zzescape", 400, "Missing key parameter");
	get_key(cb, "GET", "bad%2", 400, "Missing key parameter");
	send_str(cb,
		 "POST /metadata?key=a HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
	assert_true(http_read_reply(cb, false, &r));
	assert_int_equal(r.status, 405);
	assert_true(http_header(r.head, "Allow", v, sizeof(v)));
	assert_string_equal(v, "GET, HEAD, PUT, DELETE");
	http_reply_free(&r);
	send_str(cb, "GET /health HTTP/1.1\r\n\r\n");
	expect_reply(cb, false, 200, "OK");
	send_str(cb, "GET /metrics HTTP/1.1\r\n\r\n");
	expect_reply(cb, false, 404, NULL);
	close_conn(cb);
}

static void test_metadata_rpc_meta(void **state)
{
	struct servers *s = *state;
	struct http_conn_buf *cb = open_conn(s->dport);

	put_key(cb, "mooncake%2Frpc_meta%2Fnode1", "{\"ip\":\"a\"}", 200,
		"metadata updated");
	put_key(cb, "mooncake%2Frpc_meta%2Fnode1", "{\"ip\":\"b\"}", 400,
		"Duplicate rpc_meta key not allowed");
	get_key(cb, "GET", "mooncake/rpc_meta/node1", 200, "{\"ip\":\"a\"}");
	get_key(cb, "DELETE", "mooncake/rpc_meta/node1", 200,
		"metadata deleted");
	put_key(cb, "mooncake%2Frpc_meta%2Fnode1", "{\"ip\":\"b\"}", 200,
		"metadata updated");
	get_key(cb, "GET", "mooncake/rpc_meta/node1", 200, "{\"ip\":\"b\"}");
	close_conn(cb);
}

static void test_metadata_large_and_continue(void **state)
{
	struct servers *s = *state;
	struct http_conn_buf *cb = open_conn(s->dport);
	size_t n = 3 * 1024 * 1024 + 17;
	char *val = malloc(n + 1), head[256];
	struct http_reply r;

	for (size_t i = 0; i < n; i++)
		val[i] = (char)('a' + i % 26);
	val[n] = '\0';
	/* Expect: 100-continue, as curl sends for large bodies. */
	snprintf(head, sizeof(head),
		 "PUT /metadata?key=big HTTP/1.1\r\nExpect: 100-continue\r\n"
		 "Content-Length: %zu\r\n\r\n",
		 n);
	send_str(cb, head);
	expect_reply(cb, false, 100, NULL);
	assert_true(http_send_all(cb->fd, val, n));
	expect_reply(cb, false, 200, "metadata updated");
	send_str(cb, "GET /metadata?key=big HTTP/1.1\r\n\r\n");
	assert_true(http_read_reply(cb, false, &r));
	assert_int_equal(r.status, 200);
	assert_int_equal(r.body_len, n);
	assert_memory_equal(r.body, val, n);
	http_reply_free(&r);
	send_str(cb, "HEAD /metadata?key=big HTTP/1.1\r\n\r\n");
	expect_reply(cb, true, 200, "");
	/* The body may also arrive with its head, 100-continue or not. */
	snprintf(head, sizeof(head),
		 "PUT /metadata?key=small HTTP/1.1\r\nExpect: 100-continue\r\n"
		 "Content-Length: 2\r\n\r\nok");
	send_str(cb, head);
	assert_true(http_read_reply(cb, false, &r));
	if (r.status == 100) { /* the body came in a later segment */
		http_reply_free(&r);
		assert_true(http_read_reply(cb, false, &r));
	}
	assert_int_equal(r.status, 200);
	assert_string_equal(r.body, "metadata updated");
	http_reply_free(&r);
	get_key(cb, "GET", "small", 200, "ok");
	close_conn(cb);
	free(val);
}

/* ---- lifecycle and options ---- */

static void test_options(void **state)
{
	struct servers *s = *state;
	struct kvf_http_options o = {.host = "127.0.0.1", .port = s->mport};
	struct kvf_http_server *srv = NULL;
	struct http_conn_buf *idle;

	/* The port is taken. */
	assert_int_equal(kvf_http_metadata_start(&o, &srv), KVF_ERR_BUSY);
	assert_null(srv);
	o.host = "not a host name"; /* refused without a DNS query */
	assert_int_equal(kvf_http_metrics_start(&o, s->m, &srv),
			 KVF_ERR_INVALID_ARGUMENT);
	assert_int_equal(kvf_http_metrics_start(NULL, s->m, &srv),
			 KVF_ERR_INVALID_ARGUMENT);
	assert_int_equal(kvf_http_metrics_start(&o, NULL, &srv),
			 KVF_ERR_INVALID_ARGUMENT);
	assert_int_equal(kvf_http_metadata_start(&o, NULL),
			 KVF_ERR_INVALID_ARGUMENT);
	/* NULL host is loopback; IPv6 loopback when the machine has it. */
	o.host = NULL;
	o.port = 0;
	assert_int_equal(kvf_http_metadata_start(&o, &srv), KVF_OK);
	roundtrip(kvf_http_port(srv), "GET /health HTTP/1.1\r\n\r\n", 200,
		  "OK");
	/* Stopping with an idle connection and a half-sent request open. */
	idle = open_conn(kvf_http_port(srv));
	send_str(idle, "GET /hea");
	kvf_http_stop(srv);
	assert_true(http_peer_closed(idle));
	close_conn(idle);
	kvf_http_stop(NULL);
	assert_int_equal(kvf_http_port(NULL), 0);
	o.host = "localhost";
	assert_int_equal(kvf_http_metadata_start(&o, &srv), KVF_OK);
	kvf_http_stop(srv);
	o.host = "::1";
	if (kvf_http_metadata_start(&o, &srv) == KVF_OK) {
		assert_int_not_equal(kvf_http_port(srv), 0);
		kvf_http_stop(srv);
	}
}

/* Connections beyond the bound are answered 503; the others still work. */
static void test_connection_bound(void **state)
{
	struct servers *s = *state;
	enum { N = 128 };
	struct http_conn_buf *cb[N + 2];

	for (int i = 0; i < N; i++) {
		cb[i] = open_conn(s->dport);
		/* A round trip makes sure the server has accepted it. */
		send_str(cb[i], "GET /health HTTP/1.1\r\n\r\n");
		expect_reply(cb[i], false, 200, "OK");
	}
	/* Every slot holds an idle keep-alive connection: a new client takes
	 * the slot of the longest idle one. */
	cb[N] = open_conn(s->dport);
	send_str(cb[N], "GET /health HTTP/1.1\r\n\r\n");
	expect_reply(cb[N], false, 200, "OK");
	assert_true(http_peer_closed(cb[0]));
	close_conn(cb[0]);
	/*
	 * Every connection in the middle of a request: no slot to take. The
	 * 100 Continue says the server parsed that connection's head (its
	 * slot is busy from then on), whatever the scheduling.
	 */
	for (int i = 1; i <= N; i++) {
		send_str(cb[i], "PUT /metadata?key=busy HTTP/1.1\r\n"
				"Expect: 100-continue\r\n"
				"Content-Length: 10\r\n\r\n");
		expect_reply(cb[i], false, 100, NULL);
		send_str(cb[i], "x");
	}
	cb[N + 1] = open_conn(s->dport);
	expect_reply(cb[N + 1], false, 503, NULL);
	assert_true(http_peer_closed(cb[N + 1]));
	close_conn(cb[N + 1]);
	send_str(cb[1], "123456789");
	expect_reply(cb[1], false, 200, NULL);
	for (int i = 1; i <= N; i++)
		close_conn(cb[i]);
	/* Closed connections free their slots (the server notices soon). */
	for (int tries = 0;; tries++) {
		struct http_reply r;
		bool ok = http_once(s->dport, "GET /health HTTP/1.1\r\n\r\n",
				    false, &r);

		assert_true(ok);
		if (r.status == 200) {
			http_reply_free(&r);
			break;
		}
		http_reply_free(&r);
		assert_true(tries < 3000); /* 30 s: however slow the server */
		usleep(10000);
	}
}

/* A slow head has a deadline of its own and is the first slot taken. */
static void test_slow_heads(void **state)
{
	struct kvf_http_options o = {.port = 0, .idle_timeout_ms = 400};
	struct kvf_http_server *srv;
	enum { N = 128 };
	struct http_conn_buf *cb[N], *fresh;
	uint16_t port;

	(void)state;
	assert_int_equal(kvf_http_metadata_start(&o, &srv), KVF_OK);
	port = kvf_http_port(srv);
	for (int i = 0; i < N; i++) {
		cb[i] = open_conn(port);
		send_str(cb[i], "GET /hea");
	}
	usleep(50 * 1000);
	/* All slots trickling heads: a new client is still served. */
	fresh = open_conn(port);
	send_str(fresh, "GET /health HTTP/1.1\r\n\r\n");
	expect_reply(fresh, false, 200, "OK");
	close_conn(fresh);
	/* Trickling keeps a connection active but not alive: its head is
	 * cut off after the head deadline (here the idle timeout). */
	for (int round = 0; round < 8; round++) {
		usleep(100 * 1000);
		for (int i = 1; i < N; i++)
			http_send_all(cb[i]->fd, "l", 1);
	}
	for (int i = 1; i < N; i++)
		assert_true(http_peer_closed(cb[i]));
	for (int i = 0; i < N; i++)
		close_conn(cb[i]);
	kvf_http_stop(srv);
}

/* True once @cb's peer closed or reset (or sent something): no waiting. */
static bool readable_now(struct http_conn_buf *cb)
{
	struct pollfd p = {.fd = cb->fd, .events = POLLIN};

	return poll(&p, 1, 0) == 1;
}

/* Idle and half-sent connections are closed after the idle timeout. */
static void test_idle_timeout(void **state)
{
	struct kvf_http_options o = {.port = 0, .idle_timeout_ms = 2000};
	struct kvf_http_server *srv;
	struct http_conn_buf *idle, *half, *busy;
	uint16_t port;

	(void)state;
	assert_int_equal(kvf_http_metadata_start(&o, &srv), KVF_OK);
	port = kvf_http_port(srv);
	idle = open_conn(port);
	half = open_conn(port);
	send_str(half, "GET /health HTTP/1.1\r\nHost: sl");
	busy = open_conn(port);
	/*
	 * Both are closed without an answer; a connection in use stays open
	 * meanwhile: it asks every 10 ms until they are (200 times within the
	 * timeout, so even a stalled sanitizer build keeps it in use), for
	 * 30 s at most.
	 */
	for (int i = 0; !readable_now(idle) || !readable_now(half); i++) {
		assert_true(i < 3000);
		send_str(busy, "GET /health HTTP/1.1\r\n\r\n");
		expect_reply(busy, false, 200, "OK");
		usleep(10000);
	}
	send_str(busy, "GET /health HTTP/1.1\r\n\r\n");
	expect_reply(busy, false, 200, "OK");
	assert_true(http_peer_closed(idle));
	assert_true(http_peer_closed(half));
	close_conn(idle);
	close_conn(half);
	close_conn(busy);
	roundtrip(port, "GET /health HTTP/1.1\r\n\r\n", 200, "OK");
	kvf_http_stop(srv);
}

/*
 * Random bytes and randomly damaged requests: whatever the server
 * answers, it must stay up and keep answering (ASan checks the parser's
 * memory accesses on the way).
 */
static void test_garbage(void **state)
{
	static const char *const seeds[] = {
		"GET /metadata?key=a%20b HTTP/1.1\r\nHost: x\r\n\r\n",
		"PUT /metadata?key=k HTTP/1.1\r\nContent-Length: 5\r\n"
		"Expect: 100-continue\r\n\r\nhello",
		"DELETE /metadata?key=k HTTP/1.0\r\nConnection: "
		"keep-alive\r\n\r\n",
	};
	struct servers *s = *state;
	unsigned seed = 12345;
	char buf[512];

	for (int round = 0; round < 300; round++) {
		struct http_conn_buf *cb = open_conn(s->dport);
		const char *base = seeds[round % 3];
		size_t n = strlen(base);

		memcpy(buf, base, n);
		if (round % 4 == 0) { /* pure noise */
			n = (size_t)(rand_r(&seed) % sizeof(buf));
			for (size_t i = 0; i < n; i++)
				buf[i] = (char)rand_r(&seed);
		} else { /* a few damaged bytes, maybe truncated */
			for (int k = rand_r(&seed) % 4 + 1; k > 0; k--)
				buf[rand_r(&seed) % n] = (char)rand_r(&seed);
			if (rand_r(&seed) % 3 == 0)
				n = (size_t)rand_r(&seed) % n;
		}
		assert_true(http_send_all(cb->fd, buf, n));
		shutdown(cb->fd, SHUT_WR);
		/* Whatever the answer, the server closes: EOF, not a timeout.
		 */
		for (;;) {
			ssize_t r = recv(cb->fd, buf, sizeof(buf), 0);

			if (r > 0)
				continue;
			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0 && errno != ECONNRESET)
				fail_msg("round %d: %s", round,
					 strerror(errno));
			break;
		}
		close_conn(cb);
		if (round % 50 == 49)
			roundtrip(s->dport, "GET /health HTTP/1.1\r\n\r\n", 200,
				  "OK");
	}
	roundtrip(s->dport, "GET /health HTTP/1.1\r\n\r\n", 200, "OK");
}

/*
 * Large bodies share a budget: announced 7 MiB bodies are accepted
 * (100 Continue) until the buffers would pass it (503), and the budget
 * comes back when those connections close.
 */
static void test_body_budget(void **state)
{
	static const char head[] = "PUT /metadata?key=big HTTP/1.1\r\n"
				   "Expect: 100-continue\r\n"
				   "Content-Length: 7340032\r\n\r\n";
	struct servers *s = *state;
	struct http_conn_buf *cb[16];
	struct http_reply r;
	int n = 0, refused_at = -1;
	char *body;

	for (; n < 16 && refused_at < 0; n++) {
		cb[n] = open_conn(s->dport);
		send_str(cb[n], head);
		assert_true(http_read_reply(cb[n], false, &r));
		if (r.status == 503) {
			refused_at = n;
			assert_true(http_peer_closed(cb[n]));
		} else {
			assert_int_equal(r.status, 100);
		}
		http_reply_free(&r);
	}
	/* 64 MiB hold nine of them, not ten. */
	assert_int_equal(refused_at, 9);
	while (n--)
		close_conn(cb[n]);

	/* Once the server noticed the closes, a big upload goes through. */
	body = calloc(1, 7340032);
	assert_non_null(body);
	for (int tries = 0;; tries++) {
		struct http_conn_buf *c = open_conn(s->dport);

		send_str(c, head);
		assert_true(http_read_reply(c, false, &r));
		if (r.status == 100) {
			http_reply_free(&r);
			assert_true(http_send_all(c->fd, body, 7340032));
			expect_reply(c, false, 200, "metadata updated");
			close_conn(c);
			break;
		}
		assert_int_equal(r.status, 503);
		http_reply_free(&r);
		close_conn(c);
		assert_true(tries < 3000); /* 30 s: however slow the server */
		usleep(10000);
	}
	free(body);
}

/* ---- the store alone ---- */

/* "k\0ey-<i>": keys are byte strings and may hold NULs. */
static int binary_key(char *buf, size_t cap, int i)
{
	buf[0] = 'k';
	buf[1] = '\0';
	return 2 + snprintf(buf + 2, cap - 2, "ey-%d", i);
}

static void test_metastore(void **state)
{
	struct kvf_metastore *st;
	char key[32], *val;
	size_t vlen;

	(void)state;
	assert_int_equal(kvf__metastore_new(&st), KVF_OK);
	assert_int_equal(kvf__metastore_put(st, "", 0, "x", 1),
			 KVF_ERR_INVALID_KEY);
	/* Enough keys to grow the table several times. */
	for (int i = 0; i < 1000; i++) {
		int n = binary_key(key, sizeof(key), i);

		assert_int_equal(
			kvf__metastore_put(st, key, (size_t)n, key, (size_t)n),
			KVF_OK);
	}
	assert_int_equal(kvf__metastore_count(st), 1000);
	for (int i = 0; i < 1000; i++) {
		int n = binary_key(key, sizeof(key), i);

		assert_int_equal(
			kvf__metastore_get(st, key, (size_t)n, &val, &vlen),
			KVF_OK);
		assert_int_equal(vlen, n);
		assert_memory_equal(val, key, vlen);
		free(val);
	}
	/* Keys are byte strings: the embedded NUL makes "k" distinct. */
	assert_int_equal(kvf__metastore_get(st, "k", 1, &val, &vlen),
			 KVF_ERR_OBJECT_NOT_FOUND);
	for (int i = 0; i < 1000; i += 2) {
		int n = binary_key(key, sizeof(key), i);

		assert_int_equal(kvf__metastore_remove(st, key, (size_t)n),
				 KVF_OK);
		assert_int_equal(kvf__metastore_remove(st, key, (size_t)n),
				 KVF_ERR_OBJECT_NOT_FOUND);
	}
	assert_int_equal(kvf__metastore_count(st), 500);
	assert_int_equal(kvf__metastore_put(st, "x_rpc_meta", 10, "1", 1),
			 KVF_OK);
	assert_int_equal(kvf__metastore_put(st, "x_rpc_meta", 10, "2", 1),
			 KVF_ERR_OBJECT_ALREADY_EXISTS);
	assert_int_equal(kvf__metastore_get(st, "x_rpc_meta", 10, &val, &vlen),
			 KVF_OK);
	assert_string_equal(val, "1");
	free(val);
	assert_int_equal(kvf__metastore_count(st), 501);
	kvf__metastore_free(st);
	kvf__metastore_free(NULL);
}

static void count_change(void *ctx)
{
	(*(int *)ctx)++;
}

/* Export, import into another store (a standby's), malformed imports. */
static void test_metastore_replica(void **state)
{
	static const uint8_t trunc[] = {0, 0, 0, 1, 0, 0, 0, 9, 'k', 'v'};
	static const uint8_t empty_key[] = {0, 0, 0, 0, 0, 0, 0, 1, 'v'};
	static const uint8_t twice[] = {0, 0, 0, 1, 0, 0, 0, 1, 'k', 'a',
					0, 0, 0, 1, 0, 0, 0, 1, 'k', 'b'};
	struct kvf_metastore *a, *b;
	uint8_t *buf;
	size_t len, vlen;
	char *val;
	int changes = 0;

	(void)state;
	assert_int_equal(kvf__metastore_new(&a), KVF_OK);
	assert_int_equal(kvf__metastore_new(&b), KVF_OK);
	kvf__metastore_set_hook(a, count_change, &changes);
	assert_int_equal(kvf__metastore_put(a, "k1", 2, "v1", 2), KVF_OK);
	assert_int_equal(kvf__metastore_put(a, "x_rpc_meta", 10, "", 0),
			 KVF_OK);
	assert_int_equal(kvf__metastore_put(a, "gone", 4, "g", 1), KVF_OK);
	assert_int_equal(kvf__metastore_remove(a, "gone", 4), KVF_OK);
	assert_int_equal(changes, 4);
	/* refused changes are not changes */
	assert_int_equal(kvf__metastore_put(a, "x_rpc_meta", 10, "2", 1),
			 KVF_ERR_OBJECT_ALREADY_EXISTS);
	assert_int_equal(kvf__metastore_remove(a, "gone", 4),
			 KVF_ERR_OBJECT_NOT_FOUND);
	assert_int_equal(changes, 4);

	assert_int_equal(kvf__metastore_put(b, "old", 3, "o", 1), KVF_OK);
	assert_int_equal(kvf__metastore_export(a, &buf, &len), KVF_OK);
	assert_int_equal(len, 2 * 8 + 4 + 10);
	/* malformed: nothing changes */
	assert_int_equal(kvf__metastore_import(b, buf, len - 1),
			 KVF_ERR_INVALID_ARGUMENT);
	assert_int_equal(kvf__metastore_import(b, trunc, sizeof(trunc)),
			 KVF_ERR_INVALID_ARGUMENT);
	assert_int_equal(kvf__metastore_import(b, empty_key, sizeof(empty_key)),
			 KVF_ERR_INVALID_ARGUMENT);
	assert_int_equal(kvf__metastore_import(b, twice, sizeof(twice)),
			 KVF_ERR_INVALID_ARGUMENT);
	assert_int_equal(kvf__metastore_count(b), 1);
	/* whole: b is a's copy, the old key gone */
	assert_int_equal(kvf__metastore_import(b, buf, len), KVF_OK);
	free(buf);
	assert_int_equal(kvf__metastore_count(b), 2);
	assert_int_equal(kvf__metastore_bytes(b), kvf__metastore_bytes(a));
	assert_int_equal(kvf__metastore_get(b, "old", 3, &val, &vlen),
			 KVF_ERR_OBJECT_NOT_FOUND);
	assert_int_equal(kvf__metastore_get(b, "k1", 2, &val, &vlen), KVF_OK);
	assert_int_equal(vlen, 2);
	assert_memory_equal(val, "v1", 2);
	free(val);
	assert_int_equal(kvf__metastore_get(b, "x_rpc_meta", 10, &val, &vlen),
			 KVF_OK);
	assert_int_equal(vlen, 0);
	free(val);
	/* an empty store exports nothing and imports as empty */
	assert_int_equal(kvf__metastore_remove(a, "k1", 2), KVF_OK);
	assert_int_equal(kvf__metastore_remove(a, "x_rpc_meta", 10), KVF_OK);
	assert_int_equal(kvf__metastore_export(a, &buf, &len), KVF_OK);
	assert_int_equal(len, 0);
	assert_int_equal(kvf__metastore_import(b, buf, len), KVF_OK);
	free(buf);
	assert_int_equal(kvf__metastore_count(b), 0);
	assert_int_equal(changes, 6);
	kvf__metastore_free(a);
	kvf__metastore_free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_metrics_endpoints, setup,
						teardown),
		cmocka_unit_test_setup_teardown(
			test_metrics_not_found_and_methods, setup, teardown),
		cmocka_unit_test_setup_teardown(test_keep_alive_pipelining_head,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_requests, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_metadata_roundtrip, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_metadata_rpc_meta, setup,
						teardown),
		cmocka_unit_test_setup_teardown(
			test_metadata_large_and_continue, setup, teardown),
		cmocka_unit_test_setup_teardown(test_options, setup, teardown),
		cmocka_unit_test(test_slow_heads),
		cmocka_unit_test_setup_teardown(test_connection_bound, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_body_budget, setup,
						teardown),
		cmocka_unit_test(test_idle_timeout),
		cmocka_unit_test_setup_teardown(test_garbage, setup, teardown),
		cmocka_unit_test(test_metastore),
		cmocka_unit_test(test_metastore_replica),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
