/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_rdma_peer.c - our server stream against a client that
 * is not built from our stream code: raw verbs calls on the fake fabric
 * following coro_rpc's client as rdma.md describes it. It advertises
 * 256 KiB buffers and posts 8 RECVs before sending its block; it tracks
 * RECVs by order (every RECV has wr_id 0); it sends chunks of at most
 * 256 bytes inline and larger ones from registered buffers, at most 4 in
 * flight; it closes with a zero-length SEND. Every captured request goes
 * through it to a server stream, every answer comes back byte-identical.
 */
#include "config.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <kvforge/status.h>

#include "rdma/fake.h"
#include "tests/rdma/pair.h"

#define YLT_BUF (256u * 1024)
#define YLT_RECVS 8
#define YLT_SENDS 4
#define YLT_INLINE 256
#define RESP_HDR 16

static const struct kvf__verbs_ops *ops;

struct peer {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *mem; /* YLT_RECVS recv buffers, then YLT_SENDS send buffers */
	unsigned recv_head; /* oldest posted RECV buffer */
	unsigned inflight, send_next;
	uint32_t max_send;
	uint8_t in[1 << 16];
	size_t in_len;
};

static uint8_t *pbuf(struct peer *p, unsigned i)
{
	return p->mem + (size_t)i * YLT_BUF;
}

static void peer_post_recv(struct peer *p, unsigned i)
{
	struct ibv_sge sge = {(uintptr_t)pbuf(p, i), YLT_BUF, p->mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = 0, .sg_list = &sge, .num_sge = 1},
			   *bad;

	assert_int_equal(ops->post_recv(p->qp, &wr, &bad), 0);
}

static void peer_open(struct peer *p)
{
	struct ibv_device **list = ops->get_device_list(NULL);
	struct ibv_qp_init_attr qa = {
		.cap = {.max_send_wr = 32,
			.max_recv_wr = 32,
			.max_send_sge = 3,
			.max_recv_sge = 1,
			.max_inline_data = YLT_INLINE},
		.qp_type = IBV_QPT_RC,
		.sq_sig_all = 1,
	};
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT,
				.port_num = 1,
				.qp_access_flags = IBV_ACCESS_LOCAL_WRITE |
						   IBV_ACCESS_REMOTE_READ |
						   IBV_ACCESS_REMOTE_WRITE};
	size_t bytes = (size_t)(YLT_RECVS + YLT_SENDS) * YLT_BUF;

	memset(p, 0, sizeof(*p));
	assert_non_null(list);
	p->ctx = ops->open_device(list[0]);
	ops->free_device_list(list);
	p->pd = ops->alloc_pd(p->ctx);
	p->cq = ops->create_cq(p->ctx, 128, NULL, NULL, 0);
	assert_non_null(p->cq);
	qa.send_cq = qa.recv_cq = p->cq;
	p->qp = ops->create_qp(p->pd, &qa);
	assert_non_null(p->qp);
	assert_int_equal(ops->modify_qp(p->qp, &a,
					IBV_QP_STATE | IBV_QP_PKEY_INDEX |
						IBV_QP_PORT |
						IBV_QP_ACCESS_FLAGS),
			 0);
	p->mem = malloc(bytes);
	assert_non_null(p->mem);
	p->mr = ops->reg_mr(p->pd, p->mem, bytes, IBV_ACCESS_LOCAL_WRITE);
	assert_non_null(p->mr);
	for (unsigned i = 0; i < YLT_RECVS; i++)
		peer_post_recv(p, i);
}

static void peer_block(struct peer *p, uint8_t out[KVF_RDMA_HS_LEN])
{
	struct kvf__rdma_hs hs = {
		.lid = 0, .buffer_size = YLT_BUF, .qp_num = p->qp->qp_num};
	struct ibv_gid_entry g;

	assert_int_equal(ops->query_gid_ex(p->ctx, 1, 1, &g), 0);
	memcpy(hs.gid, g.gid.raw, 16);
	kvf__rdma_hs_encode(&hs, out);
}

static void peer_connect(struct peer *p, const uint8_t in[KVF_RDMA_HS_LEN])
{
	struct kvf__rdma_hs hs;
	struct ibv_qp_attr rtr = {
		.qp_state = IBV_QPS_RTR,
		.path_mtu = IBV_MTU_1024,
		.rq_psn = 0,
		.max_dest_rd_atomic = 1,
		.min_rnr_timer = 8,
		.ah_attr = {.is_global = 1,
			    .port_num = 1,
			    .grh = {.sgid_index = 1, .hop_limit = 1}},
	};
	struct ibv_qp_attr rts = {.qp_state = IBV_QPS_RTS,
				  .sq_psn = 0,
				  .timeout = 18,
				  .retry_cnt = 5,
				  .rnr_retry = 7,
				  .max_rd_atomic = 1};

	assert_int_equal(kvf__rdma_hs_decode(in, &hs), KVF_OK);
	rtr.dest_qp_num = hs.qp_num;
	rtr.ah_attr.dlid = hs.lid;
	memcpy(rtr.ah_attr.grh.dgid.raw, hs.gid, 16);
	assert_int_equal(
		ops->modify_qp(p->qp, &rtr,
			       IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				       IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				       IBV_QP_MAX_DEST_RD_ATOMIC |
				       IBV_QP_MIN_RNR_TIMER),
		0);
	assert_int_equal(
		ops->modify_qp(p->qp, &rts,
			       IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
				       IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				       IBV_QP_MAX_QP_RD_ATOMIC),
		0);
	p->max_send = hs.buffer_size < YLT_BUF ? hs.buffer_size : YLT_BUF;
}

/* Take completions: RECVs append to @in (in posting order), SENDs free. */
static void peer_poll(struct peer *p)
{
	struct ibv_wc wc[16];
	int n;

	while ((n = ops->poll_cq(p->cq, 16, wc)) > 0) {
		for (int i = 0; i < n; i++) {
			assert_int_equal(wc[i].status, IBV_WC_SUCCESS);
			if (wc[i].opcode != IBV_WC_RECV) {
				p->inflight--;
				continue;
			}
			assert_true(p->in_len + wc[i].byte_len <=
				    sizeof(p->in));
			memcpy(p->in + p->in_len, pbuf(p, p->recv_head),
			       wc[i].byte_len);
			p->in_len += wc[i].byte_len;
			peer_post_recv(p, p->recv_head);
			p->recv_head = (p->recv_head + 1) % YLT_RECVS;
		}
	}
	assert_true(n == 0);
}

static void peer_send_chunk(struct peer *p, const uint8_t *data, uint32_t len)
{
	struct ibv_sge sge = {(uintptr_t)data, len, 0};
	struct ibv_send_wr wr = {.wr_id = 1,
				 .sg_list = &sge,
				 .num_sge = len ? 1 : 0,
				 .opcode = IBV_WR_SEND},
			   *bad;

	while (p->inflight >= YLT_SENDS)
		peer_poll(p);
	if (len > YLT_INLINE) {
		uint8_t *b = pbuf(p, YLT_RECVS + p->send_next);

		p->send_next = (p->send_next + 1) % YLT_SENDS;
		memcpy(b, data, len);
		sge.addr = (uintptr_t)b;
		sge.lkey = p->mr->lkey;
	} else if (len) {
		wr.send_flags = IBV_SEND_INLINE;
	}
	assert_int_equal(ops->post_send(p->qp, &wr, &bad), 0);
	p->inflight++;
}

static void peer_send(struct peer *p, const uint8_t *data, size_t len)
{
	while (len) {
		uint32_t n = len < p->max_send ? (uint32_t)len : p->max_send;

		peer_send_chunk(p, data, n);
		data += n;
		len -= n;
	}
}

static void peer_close(struct peer *p)
{
	assert_int_equal(ops->destroy_qp(p->qp), 0);
	assert_int_equal(ops->dereg_mr(p->mr), 0);
	assert_int_equal(ops->destroy_cq(p->cq), 0);
	assert_int_equal(ops->dealloc_pd(p->pd), 0);
	assert_int_equal(ops->close_device(p->ctx), 0);
	free(p->mem);
}

static uint32_t le32(const uint8_t *b)
{
	return b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
	       (uint32_t)b[3] << 24;
}

/* Answer every complete request waiting on @s with its captured answer. */
static void serve(struct kvf__rdma_stream *s, struct inq *in,
		  const struct fixture_set *set, size_t *answered)
{
	size_t len;

	assert_int_equal(kvf__rdma_stream_progress(s), KVF_OK);
	assert_int_equal(inq_fill(in, s, 4096), 0);
	while ((len = inq_frame(in, true))) {
		const struct fixture *f = &set->f[*answered];
		struct iovec v[2] = {
			{f->resp, RESP_HDR},
			{f->resp + RESP_HDR, f->resp_len - RESP_HDR},
		};

		assert_int_equal(len, f->req_len);
		assert_memory_equal(in->buf, f->req, len);
		inq_drop(in, len);
		assert_int_equal(kvf__rdma_stream_writev(s, v, 2),
				 (ssize_t)f->resp_len);
		(*answered)++;
	}
}

static void run_dir(struct kvf__rdma_dev *dev, const char *dir)
{
	uint8_t hello[KVF_RDMA_HS_LEN], reply[KVF_RDMA_HS_LEN];
	struct kvf__rdma_stream *s;
	struct fixture_set set;
	struct inq in = {0};
	size_t answered = 0, checked = 0;
	struct peer p;

	assert_int_equal(fixtures_load(dir, &set), 0);
	peer_open(&p);
	peer_block(&p, hello);
	assert_int_equal(kvf__rdma_accept(dev, NULL, hello, reply, &s), KVF_OK);
	peer_connect(&p, reply);
	for (size_t i = 0; i < set.n; i++) {
		peer_send(&p, set.f[i].req, set.f[i].req_len);
		serve(s, &in, &set, &answered);
		peer_poll(&p);
		while (p.in_len >= RESP_HDR) {
			size_t len =
				RESP_HDR + le32(p.in + 8) + le32(p.in + 12);

			if (p.in_len < len)
				break;
			assert_int_equal(len, set.f[checked].resp_len);
			assert_memory_equal(p.in, set.f[checked].resp, len);
			memmove(p.in, p.in + len, p.in_len - len);
			p.in_len -= len;
			checked++;
		}
	}
	assert_int_equal(answered, set.n);
	assert_int_equal(checked, set.n);
	/* Zero-length close: the server sees the end of the stream. */
	peer_send_chunk(&p, NULL, 0);
	serve(s, &in, &set, &answered);
	assert_true(in.eof);
	kvf__rdma_stream_close(s);
	peer_poll(&p);
	peer_close(&p);
	inq_free(&in);
	fixtures_free(&set);
}

static void test_ylt_like_client(void **state)
{
	static const char *const dirs[] = {
		"cpp-client", "cpp-client-release-form", "py-reference"};

	for (int i = 0; i < 3; i++)
		run_dir(*state, dirs[i]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ylt_like_client),
	};

	ops = kvf__verbs_fake();
	return cmocka_run_group_tests(tests, fake_dev_setup, fake_dev_teardown);
}
