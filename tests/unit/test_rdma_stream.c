/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_rdma_stream.c - the RDMA byte stream on the fake fabric:
 * every captured coro_rpc pair replayed client -> server -> client with
 * any SEND split (small and asymmetric buffers, one-byte reads, messages
 * larger than a buffer, coalescing while SENDs are in flight), arriving
 * byte-identical; faults (peer gone mid-message, completion error, SEND
 * larger than the posted RECV, forced error, zero-length close) end the
 * connection cleanly, leave nothing allocated and leave another connection
 * serving; 10,000 connect/close cycles leave nothing behind.
 *
 * The device is opened through a tap over the fake table that records
 * every SEND posted (QP, length), so SEND sizes can be checked.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <kvforge/status.h>

#include "rdma/fake.h"
#include "tests/rdma/pair.h"

#define TAP_MAX 65536

static struct {
	uint32_t qpn[TAP_MAX];
	uint32_t len[TAP_MAX];
	size_t n;
} tap;

static struct kvf__verbs_ops tap_ops;

static int tap_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
			 struct ibv_send_wr **bad)
{
	for (struct ibv_send_wr *w = wr; w && tap.n < TAP_MAX; w = w->next) {
		uint32_t len = 0;

		for (int i = 0; i < w->num_sge; i++)
			len += w->sg_list[i].length;
		tap.qpn[tap.n] = qp->qp_num;
		tap.len[tap.n++] = len;
	}
	return kvf__verbs_fake()->post_send(qp, wr, bad);
}

/* SENDs QP @qpn posted: count, largest, and how many were empty. */
static size_t tap_sends(uint32_t qpn, uint32_t *max, size_t *empty)
{
	size_t n = 0;

	*max = 0;
	*empty = 0;
	for (size_t i = 0; i < tap.n; i++) {
		if (tap.qpn[i] != qpn)
			continue;
		n++;
		if (tap.len[i] > *max)
			*max = tap.len[i];
		if (!tap.len[i])
			(*empty)++;
	}
	return n;
}

struct env {
	struct kvf__rdma_dev *dev;
	long live_before;
};

static int setup(void **state)
{
	static struct env e;
	char why[160];

	tap_ops = *kvf__verbs_fake();
	tap_ops.post_send = tap_post_send;
	tap.n = 0;
	if (kvf__rdma_dev_open(&tap_ops, &e.dev, why, sizeof(why)))
		return -1;
	e.live_before = kvf__fake_live_objects();
	*state = &e;
	return 0;
}

static int teardown(void **state)
{
	struct env *e = *state;

	kvf__rdma_dev_close(e->dev);
	return kvf__fake_live_objects() ? -1 : 0;
}

static struct kvf__rdma_cfg cfg_of(uint32_t buf, uint16_t rbufs, uint16_t sbufs)
{
	struct kvf__rdma_cfg c;

	kvf__rdma_cfg_default(&c);
	c.buf_size = buf;
	c.recv_bufs = rbufs;
	c.send_bufs = sbufs;
	return c;
}

static void replay_dir(struct env *e, const char *dir,
		       const struct kvf__rdma_cfg *cc,
		       const struct kvf__rdma_cfg *sc, size_t chunk)
{
	struct fixture_set set;
	struct kvf__rdma_stream *c, *s;
	struct replay r;
	long live = kvf__fake_live_objects();

	assert_int_equal(fixtures_load(dir, &set), 0);
	assert_int_equal(pair_connect(e->dev, cc, sc, &c, &s), KVF_OK);
	replay_init(&r, c, s, &set, chunk);
	assert_int_equal(replay_run(&r), 0);
	assert_int_equal(r.checked, set.n);
	assert_int_equal(r.answered, set.n);
	replay_free(&r);
	kvf__rdma_stream_close(c);
	assert_int_equal(kvf__rdma_stream_progress(s), KVF_OK);
	kvf__rdma_stream_close(s);
	fixtures_free(&set);
	assert_int_equal(kvf__fake_live_objects(), live);
}

static const char *const dirs[] = {"cpp-client", "cpp-client-release-form",
				   "py-reference"};

/* Our defaults, and upstream's 256 KiB buffers on either side. */
static void test_fixtures_default(void **state)
{
	struct kvf__rdma_cfg ylt = cfg_of(256 * 1024, 8, 5);

	for (size_t i = 0; i < 3; i++) {
		replay_dir(*state, dirs[i], NULL, NULL, 4096);
		replay_dir(*state, dirs[i], &ylt, NULL, 4096);
		replay_dir(*state, dirs[i], NULL, &ylt, 4096);
	}
}

/*
 * Small, asymmetric buffers: every message spans several SENDs, each no
 * larger than the smaller advertised buffer; one-byte and odd reads.
 */
static void test_fixtures_split(void **state)
{
	struct kvf__rdma_cfg cc = cfg_of(256, 4, 3), sc = cfg_of(40, 3, 2);
	static const size_t chunks[] = {1, 7, 4096};

	for (size_t k = 0; k < 3; k++) {
		for (size_t i = 0; i < 3; i++) {
			uint32_t max;
			size_t empty;

			tap.n = 0;
			replay_dir(*state, dirs[i], &cc, &sc, chunks[k]);
			/* Every SEND in both directions fit the 40-byte side.
			 */
			for (size_t j = 0; j < tap.n; j++)
				assert_true(tap.len[j] <= 40);
			assert_true(tap_sends(tap.qpn[0], &max, &empty) > 1);
			assert_int_equal(max, 40);
		}
	}
}

/* With upstream's 256 KiB buffers, 600 KiB in one write is
 * 256 K + 256 K + 88 K, as upstream's sender sends it. */
static void test_large_message(void **state)
{
	struct env *e = *state;
	size_t len = 600 * 1024;
	uint8_t *msg = malloc(len), *got = malloc(len);
	struct kvf__rdma_stream *c, *s;
	struct iovec v = {msg, len};
	size_t have = 0, n = 0, empty;
	struct kvf__rdma_cfg ylt = cfg_of(256 * 1024, 8, 5);
	uint32_t max;

	assert_non_null(msg);
	assert_non_null(got);
	for (size_t i = 0; i < len; i++)
		msg[i] = (uint8_t)(i * 131 + 7);
	tap.n = 0;
	assert_int_equal(pair_connect(e->dev, &ylt, &ylt, &c, &s), KVF_OK);
	assert_int_equal(kvf__rdma_stream_writev(c, &v, 1), (ssize_t)len);
	while (have < len) {
		ssize_t r;

		assert_int_equal(kvf__rdma_stream_progress(s), KVF_OK);
		r = kvf__rdma_stream_read(s, got + have, len - have);
		assert_true(r > 0);
		have += (size_t)r;
		assert_true(++n < 100);
	}
	assert_memory_equal(got, msg, len);
	assert_int_equal(tap_sends(kvf__rdma_stream_qpn(c), &max, &empty), 3);
	assert_int_equal(tap.len[0], 256 * 1024);
	assert_int_equal(tap.len[1], 256 * 1024);
	assert_int_equal(tap.len[2], 88 * 1024);
	kvf__rdma_stream_close(c);
	kvf__rdma_stream_close(s);
	free(msg);
	free(got);
	assert_int_equal(kvf__fake_live_objects(), e->live_before);
}

/*
 * While the server does not read, its few RECVs fill, SENDs stay in flight
 * (receiver not ready) and later messages coalesce into one buffer: fewer
 * SENDs than messages, the same bytes at the end.
 */
static void test_coalescing(void **state)
{
	struct env *e = *state;
	struct kvf__rdma_cfg cc = cfg_of(4096, 4, 5), sc = cfg_of(4096, 2, 2);
	struct fixture_set set;
	struct kvf__rdma_stream *c, *s;
	struct replay r;
	uint32_t max;
	size_t empty;

	assert_int_equal(fixtures_load("cpp-client", &set), 0);
	tap.n = 0;
	assert_int_equal(pair_connect(e->dev, &cc, &sc, &c, &s), KVF_OK);
	replay_init(&r, c, s, &set, 4096);
	/* All requests written before the server reads any. */
	for (int i = 0; i < 4 && !outq_empty(&r.cout); i++)
		assert_int_equal(replay_step_client(&r), 1);
	assert_true(tap_sends(kvf__rdma_stream_qpn(c), &max, &empty) < set.n);
	assert_int_equal(replay_run(&r), 0);
	assert_int_equal(r.checked, set.n);
	assert_true(tap_sends(kvf__rdma_stream_qpn(c), &max, &empty) < set.n);
	assert_true(max > 200);
	replay_free(&r);
	kvf__rdma_stream_close(c);
	kvf__rdma_stream_close(s);
	fixtures_free(&set);
	assert_int_equal(kvf__fake_live_objects(), e->live_before);
}

static void test_write_contract(void **state)
{
	struct env *e = *state;
	struct kvf__rdma_cfg cc = cfg_of(64, 2, 2), sc = cfg_of(64, 1, 2);
	struct kvf__rdma_stream *c, *s;
	uint8_t buf[64] = {1};
	struct iovec v = {buf, sizeof(buf)};
	ssize_t w;
	int rounds = 0;

	assert_int_equal(kvf__rdma_stream_create(e->dev, &cc, &c), KVF_OK);
	assert_int_equal(kvf__rdma_stream_writev(c, &v, 1),
			 KVF_ERR_INVALID_ARGUMENT);
	kvf__rdma_stream_close(c);

	cc.send_bufs = 1;
	assert_int_equal(kvf__rdma_stream_create(e->dev, &cc, &c),
			 KVF_ERR_INVALID_ARGUMENT);
	cc.send_bufs = 2;
	cc.buf_size = 0;
	assert_int_equal(kvf__rdma_stream_create(e->dev, &cc, &c),
			 KVF_ERR_INVALID_ARGUMENT);
	cc.buf_size = 64;

	assert_int_equal(pair_connect(e->dev, &cc, &sc, &c, &s), KVF_OK);
	assert_int_equal(kvf__rdma_stream_writev(c, &v, 0), 0);
	assert_int_equal(kvf__rdma_stream_read(s, buf, sizeof(buf)),
			 KVF_ERR_BUSY);
	/* The server reads nothing: writes are accepted until the buffers
	 * are full, then the stream says "would block". */
	while ((w = kvf__rdma_stream_writev(c, &v, 1)) > 0)
		assert_true(++rounds < 10);
	assert_int_equal(w, KVF_ERR_BUSY);
	assert_true(rounds >= 2);
	kvf__rdma_stream_close(c);
	kvf__rdma_stream_close(s);
	assert_int_equal(kvf__fake_live_objects(), e->live_before);
}

static bool readable(struct kvf__rdma_stream *s)
{
	struct pollfd p = {.fd = kvf__rdma_stream_fd(s), .events = POLLIN};

	return poll(&p, 1, 0) == 1;
}

/*
 * The fd is level-triggered like a socket's: readable while bytes wait,
 * whether or not the completion that brought them was taken already.
 */
static void test_readiness(void **state)
{
	struct env *e = *state;
	struct kvf__rdma_stream *c, *s;
	uint8_t msg[300] = {0x15}, got[300];
	struct iovec v = {msg, sizeof(msg)};

	assert_int_equal(pair_connect(e->dev, NULL, NULL, &c, &s), KVF_OK);
	assert_false(readable(s));
	assert_int_equal(kvf__rdma_stream_writev(c, &v, 1),
			 (ssize_t)sizeof(msg));
	assert_true(readable(s)); /* the completion */
	assert_int_equal(kvf__rdma_stream_progress(s), KVF_OK);
	assert_true(readable(s)); /* the bytes */
	assert_int_equal(kvf__rdma_stream_read(s, got, 100), 100);
	assert_true(readable(s));
	/* An owner that stops reading is not woken by waiting bytes. */
	kvf__rdma_stream_want_read(s, false);
	assert_false(readable(s));
	kvf__rdma_stream_want_read(s, true);
	assert_true(readable(s));
	assert_int_equal(kvf__rdma_stream_read(s, got + 100, 200), 200);
	assert_memory_equal(got, msg, sizeof(msg));
	assert_false(readable(s));
	/* End of stream is something to collect too. */
	kvf__rdma_stream_close(c);
	assert_true(readable(s));
	assert_int_equal(kvf__rdma_stream_progress(s), KVF_OK);
	assert_true(readable(s));
	assert_int_equal(kvf__rdma_stream_read(s, got, 1), 0);
	kvf__rdma_stream_close(s);
	assert_int_equal(kvf__fake_live_objects(), e->live_before);
}

/* Serve one more connection end to end: the others are unaffected. */
static void bystander(struct env *e)
{
	replay_dir(e, "py-reference", NULL, NULL, 4096);
}

/* Drive @s until it reports the connection failed (or ended). */
static ssize_t until_failed(struct kvf__rdma_stream *s)
{
	uint8_t buf[256];
	ssize_t r = 0;

	for (int i = 0; i < 64; i++) {
		if (kvf__rdma_stream_progress(s))
			return KVF_ERR_IO;
		r = kvf__rdma_stream_read(s, buf, sizeof(buf));
		if (r == KVF_ERR_IO || r == 0)
			return r;
	}
	return r;
}

static void test_peer_vanishes_mid_message(void **state)
{
	struct env *e = *state;
	struct fixture_set set;
	struct kvf__rdma_stream *c, *s;
	struct kvf__rdma_stream *oc, *os;
	struct replay rp;
	const struct fixture *f;
	uint8_t buf[512];
	struct iovec v;
	ssize_t r;

	assert_int_equal(fixtures_load("cpp-client", &set), 0);
	f = &set.f[2];
	assert_int_equal(pair_connect(e->dev, NULL, NULL, &oc, &os), KVF_OK);
	assert_int_equal(pair_connect(e->dev, NULL, NULL, &c, &s), KVF_OK);
	/* A whole request, then half of the next one. */
	v.iov_base = set.f[0].req;
	v.iov_len = set.f[0].req_len;
	assert_int_equal(kvf__rdma_stream_writev(c, &v, 1), (ssize_t)v.iov_len);
	v.iov_base = f->req;
	v.iov_len = f->req_len / 2;
	assert_int_equal(kvf__rdma_stream_writev(c, &v, 1), (ssize_t)v.iov_len);
	assert_int_equal(kvf__fake_vanish(kvf__rdma_stream_qpn(c)), 0);

	assert_int_equal(kvf__rdma_stream_progress(s), KVF_OK);
	r = kvf__rdma_stream_read(s, buf, sizeof(buf));
	assert_int_equal(r, (ssize_t)(set.f[0].req_len + f->req_len / 2));
	/* Answering the dead peer fails: the transport's retries run out. */
	v.iov_base = set.f[0].resp;
	v.iov_len = set.f[0].resp_len;
	assert_int_equal(kvf__rdma_stream_writev(s, &v, 1), (ssize_t)v.iov_len);
	assert_int_equal(until_failed(s), KVF_ERR_IO);
	assert_int_equal(kvf__rdma_stream_wc_status(s), IBV_WC_RETRY_EXC_ERR);
	assert_int_equal(kvf__rdma_stream_writev(s, &v, 1), KVF_ERR_IO);
	kvf__rdma_stream_close(s);
	kvf__rdma_stream_close(c);

	/* The connection opened before the fault still serves. */
	replay_init(&rp, oc, os, &set, 4096);
	assert_int_equal(replay_run(&rp), 0);
	replay_free(&rp);
	kvf__rdma_stream_close(oc);
	kvf__rdma_stream_close(os);
	bystander(e);
	fixtures_free(&set);
	assert_int_equal(kvf__fake_live_objects(), e->live_before);
}

static void test_completion_error(void **state)
{
	struct env *e = *state;
	struct kvf__rdma_stream *c, *s;
	uint8_t msg[100] = {0x15};
	struct iovec v = {msg, sizeof(msg)};

	assert_int_equal(pair_connect(e->dev, NULL, NULL, &c, &s), KVF_OK);
	assert_int_equal(kvf__fake_fail_next_send(kvf__rdma_stream_qpn(c),
						  IBV_WC_REM_ACCESS_ERR),
			 0);
	assert_int_equal(kvf__rdma_stream_writev(c, &v, 1),
			 (ssize_t)sizeof(msg));
	assert_int_equal(until_failed(c), KVF_ERR_IO);
	assert_int_equal(kvf__rdma_stream_wc_status(c), IBV_WC_REM_ACCESS_ERR);
	assert_int_equal(kvf__fake_qp_state(kvf__rdma_stream_qpn(c)),
			 IBV_QPS_ERR);
	/* The server got nothing; its answer to anything would not arrive. */
	assert_int_equal(kvf__rdma_stream_read(s, msg, sizeof(msg)),
			 KVF_ERR_BUSY);
	assert_int_equal(kvf__rdma_stream_writev(s, &v, 1),
			 (ssize_t)sizeof(msg));
	assert_int_equal(until_failed(s), KVF_ERR_IO);
	kvf__rdma_stream_close(c);
	kvf__rdma_stream_close(s);
	bystander(e);
	assert_int_equal(kvf__fake_live_objects(), e->live_before);
}

static void test_send_larger_than_recv(void **state)
{
	struct env *e = *state;
	struct kvf__rdma_stream *c, *s;
	uint8_t msg[64] = {0x15};
	struct iovec v = {msg, sizeof(msg)};

	assert_int_equal(pair_connect(e->dev, NULL, NULL, &c, &s), KVF_OK);
	/* The server's RECVs hold fewer bytes than it advertised. */
	assert_int_equal(kvf__fake_clip_recvs(kvf__rdma_stream_qpn(s), 8), 0);
	assert_int_equal(kvf__rdma_stream_writev(c, &v, 1),
			 (ssize_t)sizeof(msg));
	assert_int_equal(until_failed(s), KVF_ERR_IO);
	assert_int_equal(kvf__rdma_stream_wc_status(s), IBV_WC_LOC_LEN_ERR);
	assert_int_equal(until_failed(c), KVF_ERR_IO);
	assert_int_equal(kvf__rdma_stream_wc_status(c), IBV_WC_REM_INV_REQ_ERR);
	kvf__rdma_stream_close(c);
	kvf__rdma_stream_close(s);
	bystander(e);
	assert_int_equal(kvf__fake_live_objects(), e->live_before);
}

static void test_forced_error_flushes(void **state)
{
	struct env *e = *state;
	struct kvf__rdma_stream *c, *s;

	assert_int_equal(pair_connect(e->dev, NULL, NULL, &c, &s), KVF_OK);
	assert_int_equal(kvf__fake_force_error(kvf__rdma_stream_qpn(s)), 0);
	/* Every posted RECV comes back flushed. */
	assert_int_equal(until_failed(s), KVF_ERR_IO);
	assert_int_equal(kvf__rdma_stream_wc_status(s), IBV_WC_WR_FLUSH_ERR);
	kvf__rdma_stream_close(s);
	/* The client's close SEND finds no peer: it fails, close returns. */
	kvf__rdma_stream_close(c);
	bystander(e);
	assert_int_equal(kvf__fake_live_objects(), e->live_before);
}

static void test_zero_length_close(void **state)
{
	struct env *e = *state;
	struct fixture_set set;
	struct kvf__rdma_stream *c, *s;
	struct inq in = {0};
	uint32_t max;
	size_t empty, len, cqpn;

	assert_int_equal(fixtures_load("py-reference", &set), 0);
	tap.n = 0;
	assert_int_equal(pair_connect(e->dev, NULL, NULL, &c, &s), KVF_OK);
	cqpn = kvf__rdma_stream_qpn(c);
	for (int i = 0; i < 2; i++) {
		struct iovec v = {set.f[i].req, set.f[i].req_len};

		assert_int_equal(kvf__rdma_stream_writev(c, &v, 1),
				 (ssize_t)v.iov_len);
	}
	kvf__rdma_stream_close(c);
	assert_int_equal(tap_sends((uint32_t)cqpn, &max, &empty), 3);
	assert_int_equal(empty, 1);

	/* The server reads both requests, then the end of the stream. */
	assert_int_equal(kvf__rdma_stream_progress(s), KVF_OK);
	assert_int_equal(inq_fill(&in, s, 4096), 0);
	assert_true(in.eof);
	for (int i = 0; i < 2; i++) {
		len = inq_frame(&in, true);
		assert_int_equal(len, set.f[i].req_len);
		assert_memory_equal(in.buf, set.f[i].req, len);
		inq_drop(&in, len);
	}
	assert_int_equal(kvf__rdma_stream_read(s, &max, 1), 0);
	/* Closed by the peer: writes fail, close sends nothing back. */
	assert_int_equal(
		kvf__rdma_stream_writev(s, &(struct iovec){&max, 1}, 1),
		KVF_ERR_IO);
	tap.n = 0;
	kvf__rdma_stream_close(s);
	assert_int_equal(tap.n, 0);
	inq_free(&in);
	fixtures_free(&set);
	bystander(e);
	assert_int_equal(kvf__fake_live_objects(), e->live_before);
}

/* 10,000 connections opened, used once and closed: nothing stays. */
static void test_cycles(void **state)
{
	struct env *e = *state;
	struct kvf__rdma_cfg cfg = cfg_of(4096, 4, 2);
	uint8_t ping[20] = {0x15}, got[20];

	for (int i = 0; i < 10000; i++) {
		struct kvf__rdma_stream *c, *s;
		struct iovec v = {ping, sizeof(ping)};

		ping[4] = (uint8_t)i;
		tap.n = 0;
		assert_int_equal(pair_connect(e->dev, &cfg, &cfg, &c, &s),
				 KVF_OK);
		assert_int_equal(kvf__rdma_stream_writev(c, &v, 1), 20);
		assert_int_equal(kvf__rdma_stream_progress(s), KVF_OK);
		assert_int_equal(kvf__rdma_stream_read(s, got, sizeof(got)),
				 20);
		assert_memory_equal(got, ping, sizeof(ping));
		if (i % 2) {
			kvf__rdma_stream_close(c);
			assert_int_equal(kvf__rdma_stream_read(s, got, 1), 0);
			kvf__rdma_stream_close(s);
		} else {
			kvf__rdma_stream_close(s);
			kvf__rdma_stream_close(c);
		}
	}
	assert_int_equal(kvf__fake_live_objects(), e->live_before);
}

static void test_bad_handshake(void **state)
{
	struct env *e = *state;
	uint8_t block[KVF_RDMA_HS_LEN] = {0x3e, 0x3a, 0xe3, 0xa3}, reply[32];
	struct kvf__rdma_stream *s = NULL;

	/* Another type hash: refused, nothing created. */
	block[24] = 1;
	assert_int_equal(kvf__rdma_accept(e->dev, NULL, block, reply, &s),
			 KVF_ERR_INVALID_ARGUMENT);
	assert_null(s);
	/* The right hash but no buffer to send into: refused. */
	block[3] = 0xa2;
	block[24] = 0;
	assert_int_equal(kvf__rdma_accept(e->dev, NULL, block, reply, &s),
			 KVF_ERR_INVALID_ARGUMENT);
	assert_null(s);
	assert_int_equal(kvf__fake_live_objects(), e->live_before);
}

static void test_no_device(void **state)
{
	struct kvf__rdma_dev *d = NULL;
	char why[160] = "";

	(void)state;
	kvf__fake_set_device_errno(ENOSYS);
	assert_int_equal(
		kvf__rdma_dev_open(kvf__verbs_fake(), &d, why, sizeof(why)),
		KVF_ERR_UNAVAILABLE);
	assert_null(d);
	assert_non_null(strstr(why, strerror(ENOSYS)));
	kvf__fake_set_device_errno(0);
}

static void test_device_choice(void **state)
{
	struct env *e = *state;
	static const uint8_t mapped[16] = {[10] = 0xff, [11] = 0xff, 10,
					   0,		0,	     1};

	/* Index 1 (IPv4-mapped RoCE v2) beats the link-local index 0. */
	assert_int_equal(e->dev->gid_index, 1);
	assert_memory_equal(e->dev->gid.raw, mapped, 16);
	assert_int_equal(e->dev->mtu, IBV_MTU_1024);
	assert_string_equal(e->dev->name, "fakeib0");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_device_choice),
		cmocka_unit_test(test_no_device),
		cmocka_unit_test(test_bad_handshake),
		cmocka_unit_test(test_fixtures_default),
		cmocka_unit_test(test_fixtures_split),
		cmocka_unit_test(test_large_message),
		cmocka_unit_test(test_coalescing),
		cmocka_unit_test(test_write_contract),
		cmocka_unit_test(test_readiness),
		cmocka_unit_test(test_peer_vanishes_mid_message),
		cmocka_unit_test(test_completion_error),
		cmocka_unit_test(test_send_larger_than_recv),
		cmocka_unit_test(test_forced_error_flushes),
		cmocka_unit_test(test_zero_length_close),
		cmocka_unit_test(test_cycles),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
