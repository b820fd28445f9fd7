/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_rdma_master.c - kvforge-master's RPC loop serving RDMA
 * on its TCP port, on the fake fabric (so master and clients share this
 * process). Every request of the captured fixtures is sent to a fresh
 * master over TCP and to another fresh master over RDMA: the answers are
 * byte-identical. TCP clients keep being served beside RDMA ones. Without
 * a device the master still answers TCP and closes RDMA handshakes.
 * The C client (client/client.c, as kvforge-bench --transport rdma uses
 * it) gets the same answers over RDMA as over TCP, and fails cleanly when
 * the master has no device.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include <kvforge/engine.h>
#include <kvforge/status.h>

#include "rdma/fake.h"
#include "rdma/listener.h"
#include "wire/abi.h"
#include "client/client.h"
#include "master/flags.h"
#include "master/loop.h"
#include "master/registry.h"
#include "master/service.h"
#include "tests/rdma/pair.h"

#define WAIT_MS 5000
#define RESP_HDR 16

struct master {
	struct kvf_master_flags flags;
	struct kvf_engine *engine;
	struct kvf_registry *registry;
	struct kvf_service *service;
	struct kvf__rdma_listener *rdma;
	struct kvf_loop *loop;
};

static void master_start(struct master *m, int device_errno)
{
	struct kvf_service_options so = {.abi = kvf_abi_find(NULL)};
	struct kvf_loop_options lo = {.address = "127.0.0.1",
				      .threads = 1,
				      .max_connections = 64,
				      .idle_timeout_sec = 3600,
				      .request_timeout_sec = 30,
				      .tcp_nodelay = true};
	struct kvf_config cfg;
	char err[256];

	memset(m, 0, sizeof(*m));
	kvf_flags_defaults(&m->flags);
	assert_int_equal(
		kvf_flags_engine_config(&m->flags, &cfg, err, sizeof(err)),
		KVF_OK);
	assert_int_equal(kvf_engine_open(&cfg, &m->engine), KVF_OK);
	assert_int_equal(kvf_registry_open(m->engine, NULL, cfg.client_ttl_ms,
					   &m->registry),
			 KVF_OK);
	so.engine = m->engine;
	so.registry = m->registry;
	so.flags = &m->flags;
	assert_int_equal(kvf_service_new(&so, &m->service), KVF_OK);
	kvf__fake_set_device_errno(device_errno);
	assert_int_equal(kvf__rdma_listener_open(kvf__verbs_fake(), NULL, NULL, &m->rdma),
			 KVF_OK);
	kvf__fake_set_device_errno(0);
	lo.max_request_bytes = m->flags.max_request_bytes;
	lo.service = m->service;
	lo.rdma = m->rdma;
	assert_int_equal(kvf_loop_start(&lo, &m->loop), KVF_OK);
}

static void master_stop(struct master *m)
{
	kvf_loop_stop(m->loop);
	kvf__rdma_listener_close(m->rdma);
	kvf_service_free(m->service);
	kvf_registry_close(m->registry);
	kvf_engine_close(m->engine);
}

static int tcp_connect(struct master *m)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons(kvf_loop_port(m->loop)),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	return fd;
}

static uint32_t le32(const uint8_t *p)
{
	return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

/* One connection of either transport, as the test's client sees it. */
struct client {
	int fd;			    /* TCP socket, or -1 */
	struct kvf__rdma_stream *s; /* RDMA stream, or NULL */
};

static ssize_t client_read(struct client *c, uint8_t *buf, size_t len)
{
	struct pollfd p = {.events = POLLIN};

	if (!c->s) {
		p.fd = c->fd;
		assert_int_equal(poll(&p, 1, WAIT_MS), 1);
		return recv(c->fd, buf, len, 0);
	}
	for (;;) {
		ssize_t r;

		assert_int_equal(kvf__rdma_stream_progress(c->s), KVF_OK);
		r = kvf__rdma_stream_read(c->s, buf, len);
		if (r != KVF_ERR_BUSY)
			return r;
		p.fd = kvf__rdma_stream_fd(c->s);
		assert_int_equal(poll(&p, 1, WAIT_MS), 1);
	}
}

static void client_write(struct client *c, const uint8_t *buf, size_t len)
{
	struct iovec v = {(void *)buf, len};

	if (!c->s) {
		assert_int_equal(send(c->fd, buf, len, 0), (ssize_t)len);
		return;
	}
	while (v.iov_len) {
		ssize_t w = kvf__rdma_stream_writev(c->s, &v, 1);

		assert_true(w > 0 || w == KVF_ERR_BUSY);
		if (w > 0) {
			v.iov_base = (uint8_t *)v.iov_base + w;
			v.iov_len -= (size_t)w;
		} else {
			assert_int_equal(kvf__rdma_stream_progress(c->s),
					 KVF_OK);
		}
	}
}

/* Send @req, return its whole response (malloc'd, length in @len). */
static uint8_t *call(struct client *c, const uint8_t *req, size_t req_len,
		     size_t *len)
{
	uint8_t *buf = malloc(RESP_HDR);
	size_t have = 0, want = RESP_HDR;

	assert_non_null(buf);
	client_write(c, req, req_len);
	while (have < want) {
		ssize_t r = client_read(c, buf + have, want - have);

		assert_true(r > 0);
		have += (size_t)r;
		if (have == RESP_HDR && want == RESP_HDR) {
			want += le32(buf + 8) + le32(buf + 12);
			buf = realloc(buf, want);
			assert_non_null(buf);
		}
	}
	*len = want;
	return buf;
}

static struct client rdma_client(struct master *m, struct kvf__rdma_dev *dev)
{
	struct client c = {.fd = -1};
	int fd = tcp_connect(m);

	assert_int_equal(kvf__rdma_dial_fd(fd, dev, NULL, WAIT_MS, &c.s),
			 KVF_OK);
	close(fd);
	return c;
}

static void client_close(struct client *c)
{
	if (c->s)
		kvf__rdma_stream_close(c->s);
	else
		close(c->fd);
}

/* Every request of @dir on a fresh master, over one client connection. */
static void replay(const char *dir, bool rdma, struct kvf__rdma_dev *dev,
		   uint8_t ***out, size_t **lens, size_t *n)
{
	struct fixture_set set;
	struct master m;
	struct client c;

	assert_int_equal(fixtures_load(dir, &set), 0);
	master_start(&m, 0);
	if (rdma) {
		c = rdma_client(&m, dev);
	} else {
		c.fd = tcp_connect(&m);
		c.s = NULL;
	}
	*out = calloc(set.n, sizeof(**out));
	*lens = calloc(set.n, sizeof(**lens));
	assert_non_null(*out);
	assert_non_null(*lens);
	for (size_t i = 0; i < set.n; i++)
		(*out)[i] =
			call(&c, set.f[i].req, set.f[i].req_len, &(*lens)[i]);
	*n = set.n;
	client_close(&c);
	master_stop(&m);
	fixtures_free(&set);
}

static void free_answers(uint8_t **a, size_t *lens, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(a[i]);
	free(a);
	free(lens);
}

static void test_same_answers(void **state)
{
	static const char *const dirs[] = {"py-reference", "cpp-client",
					   "cpp-client-release-form"};
	struct kvf__rdma_dev *dev = *state;

	for (int d = 0; d < 3; d++) {
		uint8_t **tcp, **rdma;
		size_t *tl, *rl, tn, rn;

		replay(dirs[d], false, dev, &tcp, &tl, &tn);
		replay(dirs[d], true, dev, &rdma, &rl, &rn);
		assert_int_equal(tn, rn);
		for (size_t i = 0; i < tn; i++) {
			assert_int_equal(tl[i], rl[i]);
			assert_memory_equal(tcp[i], rdma[i], tl[i]);
		}
		free_answers(tcp, tl, tn);
		free_answers(rdma, rl, rn);
	}
}

/* ServiceReady's request from the reference client. */
static const uint8_t *service_ready(const struct fixture_set *set, size_t *len)
{
	*len = set->f[0].req_len;
	return set->f[0].req;
}

static void test_both_transports_at_once(void **state)
{
	struct kvf__rdma_dev *dev = *state;
	struct fixture_set set;
	struct client r1, t, r2;
	struct master m;
	uint8_t *a, *b, *c;
	size_t la, lb, lc, len;
	const uint8_t *req;

	assert_int_equal(fixtures_load("py-reference", &set), 0);
	req = service_ready(&set, &len);
	master_start(&m, 0);
	r1 = rdma_client(&m, dev);
	t.fd = tcp_connect(&m);
	t.s = NULL;
	r2 = rdma_client(&m, dev);
	a = call(&r1, req, len, &la);
	b = call(&t, req, len, &lb);
	c = call(&r2, req, len, &lc);
	assert_int_equal(la, lb);
	assert_int_equal(lb, lc);
	assert_memory_equal(a, b, la);
	assert_memory_equal(b, c, la);
	free(a);
	free(b);
	free(c);
	client_close(&r1);
	client_close(&t);
	client_close(&r2);
	master_stop(&m);
	fixtures_free(&set);
}

static void test_no_device_serves_tcp(void **state)
{
	struct kvf__rdma_dev *dev = *state;
	struct kvf__rdma_stream *s = NULL;
	struct fixture_set set;
	struct master m;
	struct client t;
	uint8_t *a;
	size_t la, len;
	const uint8_t *req;
	int fd;

	assert_int_equal(fixtures_load("py-reference", &set), 0);
	req = service_ready(&set, &len);
	master_start(&m, ENOSYS);
	assert_false(kvf__rdma_listener_ready(m.rdma));
	fd = tcp_connect(&m);
	assert_int_not_equal(kvf__rdma_dial_fd(fd, dev, NULL, WAIT_MS, &s),
			     KVF_OK);
	assert_null(s);
	close(fd);
	t.fd = tcp_connect(&m);
	t.s = NULL;
	a = call(&t, req, len, &la);
	assert_int_equal(a[2], 0); /* err_code: answered */
	assert_true(la > RESP_HDR);
	free(a);
	client_close(&t);
	master_stop(&m);
	fixtures_free(&set);
}

/* ServiceReady then pipelined Pings through the C client on @dev. */
static void client_session(struct master *m, struct kvf__rdma_dev *dev,
			   int64_t *view)
{
	const struct kvf_abi *abi = kvf_abi_find(NULL);
	struct kvf_msg_req q = {.rpc = KVF_RPC_ServiceReady};
	struct kvf_msg_resp resp = {0};
	struct kvf_client_resp r;
	struct kvf_client *c;

	assert_int_equal(kvf_client_connect_via("127.0.0.1",
						kvf_loop_port(m->loop), abi, 8,
						dev, &c),
			 0);
	assert_int_equal(kvf_client_call(c, &q, WAIT_MS, &resp), 0);
	q = (struct kvf_msg_req){.rpc = KVF_RPC_Ping, .client_id = {1, 2}};
	for (uint64_t tag = 0; tag < 8; tag++)
		assert_int_equal(kvf_client_send(c, &q, tag, NULL), 0);
	assert_int_equal(kvf_client_flush(c), 0);
	for (uint64_t tag = 0; tag < 8; tag++) {
		assert_int_equal(kvf_client_recv(c, WAIT_MS, &r), 0);
		assert_int_equal(r.tag, tag);
		assert_int_equal(r.err_code, 0);
		assert_int_equal(kvf_msg_resp_decode(abi, KVF_RPC_Ping, r.body,
						     r.len, &resp),
				 0);
	}
	*view = resp.ping_view_version;
	assert_int_equal(kvf_client_outstanding(c), 0);
	kvf_client_close(c);
}

static void test_c_client_over_rdma(void **state)
{
	struct kvf__rdma_dev *dev = *state;
	int64_t tcp_view = -1, rdma_view = -1;
	struct master m;

	master_start(&m, 0);
	client_session(&m, NULL, &tcp_view);
	client_session(&m, dev, &rdma_view);
	assert_true(tcp_view >= 0);
	assert_int_equal(tcp_view, rdma_view);
	master_stop(&m);
}

static void test_c_client_no_master_device(void **state)
{
	struct kvf_client *c = NULL;
	struct master m;

	master_start(&m, ENOSYS);
	assert_int_equal(
		kvf_client_connect_via("127.0.0.1", kvf_loop_port(m.loop),
				       kvf_abi_find(NULL), 8, *state, &c),
		-ECONNREFUSED);
	assert_null(c);
	master_stop(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_same_answers),
		cmocka_unit_test(test_both_transports_at_once),
		cmocka_unit_test(test_no_device_serves_tcp),
		cmocka_unit_test(test_c_client_over_rdma),
		cmocka_unit_test(test_c_client_no_master_device),
	};

	return cmocka_run_group_tests(tests, fake_dev_setup, fake_dev_teardown);
}
