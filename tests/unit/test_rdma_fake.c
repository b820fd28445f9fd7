/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_rdma_fake.c - the fake fabric enforces what hardware
 * would, so the transport's tests can fail for the right reasons: QP
 * state machine and attribute masks, PSN and GID agreement, MR bounds and
 * keys, receiver-not-ready holds and retries, length errors, flush on
 * error, one-shot notifications, bounded CQs, busy objects.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <string.h>
#include <cmocka.h>

#include "rdma/fake.h"
#include "rdma/ops.h"

#define BUF 4096

static const struct kvf__verbs_ops *ops;

struct ep {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t buf[BUF];
};

static void ep_open(struct ep *e, int cqe)
{
	struct ibv_device **list = ops->get_device_list(NULL);
	struct ibv_qp_init_attr qa = {
		.cap = {.max_send_wr = 8,
			.max_recv_wr = 8,
			.max_send_sge = 2,
			.max_recv_sge = 1},
		.qp_type = IBV_QPT_RC,
		.sq_sig_all = 1,
	};
	int fl;

	assert_non_null(list);
	e->ctx = ops->open_device(list[0]);
	ops->free_device_list(list);
	assert_non_null(e->ctx);
	e->pd = ops->alloc_pd(e->ctx);
	e->ch = ops->create_comp_channel(e->ctx);
	assert_non_null(e->ch);
	fl = fcntl(e->ch->fd, F_GETFL);
	assert_int_equal(fcntl(e->ch->fd, F_SETFL, fl | O_NONBLOCK), 0);
	e->cq = ops->create_cq(e->ctx, cqe, NULL, e->ch, 0);
	assert_non_null(e->cq);
	qa.send_cq = qa.recv_cq = e->cq;
	e->qp = ops->create_qp(e->pd, &qa);
	assert_non_null(e->qp);
	e->mr = ops->reg_mr(e->pd, e->buf, BUF, IBV_ACCESS_LOCAL_WRITE);
	assert_non_null(e->mr);
}

static void ep_close(struct ep *e)
{
	assert_int_equal(ops->destroy_qp(e->qp), 0);
	assert_int_equal(ops->dereg_mr(e->mr), 0);
	assert_int_equal(ops->destroy_cq(e->cq), 0);
	assert_int_equal(ops->destroy_comp_channel(e->ch), 0);
	assert_int_equal(ops->dealloc_pd(e->pd), 0);
	assert_int_equal(ops->close_device(e->ctx), 0);
}

static int to_init(struct ep *e)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT,
				.port_num = 1,
				.qp_access_flags = IBV_ACCESS_LOCAL_WRITE};

	return ops->modify_qp(e->qp, &a,
			      IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				      IBV_QP_ACCESS_FLAGS);
}

static const int rtr_mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			    IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			    IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
static const int rts_mask = IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
			    IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			    IBV_QP_MAX_QP_RD_ATOMIC;

static struct ibv_qp_attr rtr_attr(const struct ep *peer, uint32_t psn,
				   uint8_t dgid_index)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR,
		.path_mtu = IBV_MTU_1024,
		.dest_qp_num = peer->qp->qp_num,
		.rq_psn = psn,
		.max_dest_rd_atomic = 1,
		.min_rnr_timer = 8,
		.ah_attr = {.is_global = 1,
			    .port_num = 1,
			    .grh = {.sgid_index = 1, .hop_limit = 1}},
	};
	struct ibv_gid_entry g;

	assert_int_equal(ops->query_gid_ex(peer->ctx, 1, dgid_index, &g), 0);
	a.ah_attr.grh.dgid = g.gid;
	return a;
}

static int to_rts(struct ep *e, uint32_t psn, uint8_t rnr_retry)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_RTS,
				.sq_psn = psn,
				.timeout = 18,
				.retry_cnt = 5,
				.rnr_retry = rnr_retry,
				.max_rd_atomic = 1};

	return ops->modify_qp(e->qp, &a, rts_mask);
}

/* Connect @a and @b; @a sends with @a_psn, @b expects @b_psn. */
static void link_pair(struct ep *a, struct ep *b, uint32_t a_psn,
		      uint32_t b_psn, uint8_t rnr_retry)
{
	struct ibv_qp_attr ra = rtr_attr(b, 0, 1), rb = rtr_attr(a, b_psn, 1);

	assert_int_equal(to_init(a), 0);
	assert_int_equal(to_init(b), 0);
	assert_int_equal(ops->modify_qp(a->qp, &ra, rtr_mask), 0);
	assert_int_equal(ops->modify_qp(b->qp, &rb, rtr_mask), 0);
	assert_int_equal(to_rts(a, a_psn, rnr_retry), 0);
	assert_int_equal(to_rts(b, 0, rnr_retry), 0);
}

static int post_recv(struct ep *e, uint32_t off, uint32_t len, uint32_t lkey)
{
	struct ibv_sge s = {(uintptr_t)e->buf + off, len, lkey};
	struct ibv_recv_wr wr = {.wr_id = off, .sg_list = &s, .num_sge = 1},
			   *bad;

	return ops->post_recv(e->qp, &wr, &bad);
}

static int post_send(struct ep *e, uint32_t off, uint32_t len, uint32_t lkey)
{
	struct ibv_sge s = {(uintptr_t)e->buf + off, len, lkey};
	struct ibv_send_wr wr = {.wr_id = 1000 + off,
				 .sg_list = &s,
				 .num_sge = len ? 1 : 0,
				 .opcode = IBV_WR_SEND},
			   *bad;

	return ops->post_send(e->qp, &wr, &bad);
}

/* Exactly one completion on @e's CQ, with @status. */
static struct ibv_wc one_wc(struct ep *e, enum ibv_wc_status status)
{
	struct ibv_wc wc[2];

	assert_int_equal(ops->poll_cq(e->cq, 2, wc), 1);
	assert_int_equal(wc[0].status, status);
	return wc[0];
}

static void no_wc(struct ep *e)
{
	struct ibv_wc wc;

	assert_int_equal(ops->poll_cq(e->cq, 1, &wc), 0);
}

static void test_state_machine(void **state)
{
	struct ep a, b;
	struct ibv_qp_attr r;

	(void)state;
	ep_open(&a, 16);
	ep_open(&b, 16);
	assert_int_equal(post_recv(&a, 0, 16, a.mr->lkey), EINVAL); /* RESET */
	r = rtr_attr(&b, 0, 1);
	assert_int_equal(ops->modify_qp(a.qp, &r, rtr_mask), EINVAL);
	{
		struct ibv_qp_attr i = {.qp_state = IBV_QPS_INIT,
					.port_num = 1};

		/* Missing access flags; then a foreign attribute. */
		assert_int_equal(ops->modify_qp(a.qp, &i,
						IBV_QP_STATE |
							IBV_QP_PKEY_INDEX |
							IBV_QP_PORT),
				 EINVAL);
		assert_int_equal(
			ops->modify_qp(
				a.qp, &i,
				IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					IBV_QP_ACCESS_FLAGS | IBV_QP_SQ_PSN),
			EINVAL);
	}
	assert_int_equal(to_init(&a), 0);
	assert_int_equal(post_recv(&a, 0, 16, a.mr->lkey), 0); /* INIT ok */
	assert_int_equal(post_send(&a, 0, 16, a.mr->lkey), EINVAL);
	assert_int_equal(
		ops->modify_qp(a.qp, &r, rtr_mask & ~IBV_QP_MIN_RNR_TIMER),
		EINVAL);
	r.ah_attr.is_global = 0; /* GRH is mandatory */
	assert_int_equal(ops->modify_qp(a.qp, &r, rtr_mask), EINVAL);
	r.ah_attr.is_global = 1;
	assert_int_equal(to_rts(&a, 0, 7), EINVAL); /* INIT -> RTS */
	assert_int_equal(ops->modify_qp(a.qp, &r, rtr_mask), 0);
	assert_int_equal(post_send(&a, 0, 16, a.mr->lkey), EINVAL); /* RTR */
	assert_int_equal(to_rts(&a, 0, 8), EINVAL); /* rnr_retry > 7 */
	assert_int_equal(to_rts(&a, 0, 7), 0);
	assert_int_equal(kvf__fake_qp_state(a.qp->qp_num), IBV_QPS_RTS);
	{
		struct ibv_qp_attr x = {.qp_state = IBV_QPS_RESET};

		/* RESET discards the posted RECV without a completion. */
		assert_int_equal(ops->modify_qp(a.qp, &x, IBV_QP_STATE), 0);
		no_wc(&a);
	}
	ep_close(&a);
	ep_close(&b);
	assert_int_equal(kvf__fake_live_objects(), 0);
}

static void test_delivery_and_psn(void **state)
{
	struct ep a, b, c, d;
	struct ibv_wc wc;

	(void)state;
	ep_open(&a, 16);
	ep_open(&b, 16);
	link_pair(&a, &b, 0, 0, 7);
	memcpy(a.buf, "hello", 5);
	assert_int_equal(post_recv(&b, 100, 64, b.mr->lkey), 0);
	assert_int_equal(post_send(&a, 0, 5, a.mr->lkey), 0);
	wc = one_wc(&b, IBV_WC_SUCCESS);
	assert_int_equal(wc.opcode, IBV_WC_RECV);
	assert_int_equal(wc.byte_len, 5);
	assert_int_equal(wc.wr_id, 100);
	assert_memory_equal(b.buf + 100, "hello", 5);
	wc = one_wc(&a, IBV_WC_SUCCESS);
	assert_int_equal(wc.opcode, IBV_WC_SEND);
	/* Zero-length SEND: a zero-byte RECV completion. */
	assert_int_equal(post_recv(&b, 200, 64, b.mr->lkey), 0);
	assert_int_equal(post_send(&a, 0, 0, 0), 0);
	assert_int_equal(one_wc(&b, IBV_WC_SUCCESS).byte_len, 0);
	one_wc(&a, IBV_WC_SUCCESS);
	ep_close(&a);
	ep_close(&b);

	/* The sender starts at PSN 5, the receiver expects 0: dropped. */
	ep_open(&c, 16);
	ep_open(&d, 16);
	link_pair(&c, &d, 5, 0, 7);
	assert_int_equal(post_recv(&d, 0, 64, d.mr->lkey), 0);
	assert_int_equal(post_send(&c, 0, 5, c.mr->lkey), 0);
	one_wc(&c, IBV_WC_RETRY_EXC_ERR);
	no_wc(&d);
	assert_int_equal(kvf__fake_qp_state(c.qp->qp_num), IBV_QPS_ERR);
	ep_close(&c);
	ep_close(&d);
	assert_int_equal(kvf__fake_live_objects(), 0);
}

static void test_gid_must_match(void **state)
{
	struct ep a, b;
	struct ibv_qp_attr ra, rb;

	(void)state;
	ep_open(&a, 16);
	ep_open(&b, 16);
	assert_int_equal(to_init(&a), 0);
	assert_int_equal(to_init(&b), 0);
	/* a targets GID index 0, but b sends from index 1. */
	ra = rtr_attr(&b, 0, 0);
	rb = rtr_attr(&a, 0, 1);
	assert_int_equal(ops->modify_qp(a.qp, &ra, rtr_mask), 0);
	assert_int_equal(ops->modify_qp(b.qp, &rb, rtr_mask), 0);
	assert_int_equal(to_rts(&a, 0, 7), 0);
	assert_int_equal(to_rts(&b, 0, 7), 0);
	assert_int_equal(post_recv(&b, 0, 64, b.mr->lkey), 0);
	assert_int_equal(post_send(&a, 0, 5, a.mr->lkey), 0);
	one_wc(&a, IBV_WC_RETRY_EXC_ERR);
	ep_close(&a);
	ep_close(&b);
}

static void test_memory_checks(void **state)
{
	struct ep a, b;
	struct ibv_mr *ro;

	(void)state;
	ep_open(&a, 16);
	ep_open(&b, 16);
	link_pair(&a, &b, 0, 0, 7);
	/* Past the end of the MR. */
	assert_int_equal(post_send(&a, BUF - 4, 8, a.mr->lkey), 0);
	one_wc(&a, IBV_WC_LOC_PROT_ERR);
	assert_int_equal(kvf__fake_qp_state(a.qp->qp_num), IBV_QPS_ERR);
	/* Posting in ERR: accepted, flushed. */
	assert_int_equal(post_send(&a, 0, 8, a.mr->lkey), 0);
	one_wc(&a, IBV_WC_WR_FLUSH_ERR);
	/* A RECV into memory registered without LOCAL_WRITE. */
	ro = ops->reg_mr(b.pd, b.buf, BUF, 0);
	assert_non_null(ro);
	assert_int_equal(post_recv(&b, 0, 64, ro->lkey), 0);
	one_wc(&b, IBV_WC_LOC_PROT_ERR);
	/* A key nobody registered. */
	assert_int_equal(post_recv(&b, 0, 64, 0xdead), 0);
	one_wc(&b, IBV_WC_WR_FLUSH_ERR);
	/* Busy objects cannot go. */
	assert_int_equal(ops->dealloc_pd(b.pd), EBUSY);
	assert_int_equal(ops->destroy_cq(b.cq), EBUSY);
	assert_int_equal(ops->dereg_mr(ro), 0);
	ep_close(&a);
	ep_close(&b);
}

static void test_receiver_not_ready(void **state)
{
	struct ep a, b, c, d;

	(void)state;
	/* rnr_retry 7: held until a RECV is posted, however long. */
	ep_open(&a, 16);
	ep_open(&b, 16);
	link_pair(&a, &b, 0, 0, 7);
	assert_int_equal(post_send(&a, 0, 5, a.mr->lkey), 0);
	for (int i = 0; i < 20; i++)
		assert_int_equal(kvf__fake_clip_recvs(b.qp->qp_num, 0), 0);
	no_wc(&a);
	assert_int_equal(post_recv(&b, 0, 64, b.mr->lkey), 0);
	one_wc(&b, IBV_WC_SUCCESS);
	one_wc(&a, IBV_WC_SUCCESS);
	ep_close(&a);
	ep_close(&b);

	/* rnr_retry 2: the first try and two retries, then an error. */
	ep_open(&c, 16);
	ep_open(&d, 16);
	link_pair(&c, &d, 0, 0, 2);
	assert_int_equal(post_send(&c, 0, 5, c.mr->lkey), 0);
	assert_int_equal(kvf__fake_clip_recvs(d.qp->qp_num, 0), 0);
	no_wc(&c);
	assert_int_equal(kvf__fake_clip_recvs(d.qp->qp_num, 0), 0);
	one_wc(&c, IBV_WC_RNR_RETRY_EXC_ERR);
	ep_close(&c);
	ep_close(&d);
}

static void test_length_error_and_flush(void **state)
{
	struct ep a, b;

	(void)state;
	ep_open(&a, 16);
	ep_open(&b, 16);
	link_pair(&a, &b, 0, 0, 7);
	assert_int_equal(post_recv(&b, 0, 16, b.mr->lkey), 0);
	assert_int_equal(post_recv(&b, 16, 16, b.mr->lkey), 0);
	assert_int_equal(post_recv(&b, 32, 16, b.mr->lkey), 0);
	assert_int_equal(post_send(&a, 0, 32, a.mr->lkey), 0);
	/* Both sides in error; the receiver's other RECVs flushed. */
	one_wc(&a, IBV_WC_REM_INV_REQ_ERR);
	{
		struct ibv_wc wc[4];

		assert_int_equal(ops->poll_cq(b.cq, 4, wc), 3);
		assert_int_equal(wc[0].status, IBV_WC_LOC_LEN_ERR);
		assert_int_equal(wc[1].status, IBV_WC_WR_FLUSH_ERR);
		assert_int_equal(wc[2].status, IBV_WC_WR_FLUSH_ERR);
	}
	assert_int_equal(kvf__fake_qp_state(a.qp->qp_num), IBV_QPS_ERR);
	assert_int_equal(kvf__fake_qp_state(b.qp->qp_num), IBV_QPS_ERR);
	ep_close(&a);
	ep_close(&b);
}

static void test_notification_one_shot(void **state)
{
	struct ep a, b;
	struct ibv_cq *cq;
	void *ctx;

	(void)state;
	ep_open(&a, 16);
	ep_open(&b, 16);
	link_pair(&a, &b, 0, 0, 7);
	for (uint32_t i = 0; i < 3; i++)
		assert_int_equal(post_recv(&b, i * 64, 64, b.mr->lkey), 0);
	/* Not armed: no event. */
	assert_int_equal(post_send(&a, 0, 5, a.mr->lkey), 0);
	assert_int_equal(ops->get_cq_event(b.ch, &cq, &ctx), -1);
	assert_int_equal(errno, EAGAIN);
	/* Armed: one event for two completions. */
	assert_int_equal(ops->req_notify_cq(b.cq, 0), 0);
	assert_int_equal(post_send(&a, 0, 5, a.mr->lkey), 0);
	assert_int_equal(post_send(&a, 0, 5, a.mr->lkey), 0);
	assert_int_equal(ops->get_cq_event(b.ch, &cq, &ctx), 0);
	assert_ptr_equal(cq, b.cq);
	assert_int_equal(ops->get_cq_event(b.ch, &cq, &ctx), -1);
	/* Unacknowledged event: the CQ cannot be destroyed. */
	assert_int_equal(ops->destroy_qp(b.qp), 0);
	assert_int_equal(ops->destroy_cq(b.cq), EBUSY);
	ops->ack_cq_events(b.cq, 1);
	assert_int_equal(ops->destroy_cq(b.cq), 0);
	assert_int_equal(ops->dereg_mr(b.mr), 0);
	assert_int_equal(ops->destroy_comp_channel(b.ch), 0);
	assert_int_equal(ops->dealloc_pd(b.pd), 0);
	assert_int_equal(ops->close_device(b.ctx), 0);
	/* a's SENDs to the destroyed QP... the ones delivered completed. */
	ep_close(&a);
	assert_int_equal(kvf__fake_live_objects(), 0);
}

static void test_cq_overflow(void **state)
{
	struct ep a, b;
	struct ibv_wc wc;

	(void)state;
	ep_open(&a, 16);
	ep_open(&b, 1);
	link_pair(&a, &b, 0, 0, 7);
	assert_int_equal(post_recv(&b, 0, 64, b.mr->lkey), 0);
	assert_int_equal(post_recv(&b, 64, 64, b.mr->lkey), 0);
	assert_int_equal(post_send(&a, 0, 5, a.mr->lkey), 0);
	assert_int_equal(post_send(&a, 0, 5, a.mr->lkey), 0);
	assert_true(ops->poll_cq(b.cq, 1, &wc) < 0);
	ep_close(&a);
	ep_close(&b);
}

static void test_create_limits(void **state)
{
	struct ep a;
	struct ibv_qp_init_attr qa = {
		.cap = {.max_send_wr = 8,
			.max_recv_wr = 8,
			.max_send_sge = 1,
			.max_recv_sge = 1,
			.max_inline_data = 256},
		.qp_type = IBV_QPT_RC,
	};

	(void)state;
	ep_open(&a, 16);
	qa.send_cq = qa.recv_cq = a.cq;
	kvf__fake_set_inline_cap(0);
	assert_null(ops->create_qp(a.pd, &qa));
	assert_int_equal(errno, EINVAL);
	kvf__fake_set_inline_cap(256);
	qa.qp_type = IBV_QPT_UD;
	assert_null(ops->create_qp(a.pd, &qa));
	assert_null(ops->create_cq(a.ctx, 0, NULL, NULL, 0));
	assert_int_equal(kvf__fake_qp_state(0xffffff), -1);
	assert_int_equal(kvf__fake_vanish(0xffffff), ENOENT);
	ep_close(&a);
	assert_int_equal(kvf__fake_live_objects(), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_state_machine),
		cmocka_unit_test(test_delivery_and_psn),
		cmocka_unit_test(test_gid_must_match),
		cmocka_unit_test(test_memory_checks),
		cmocka_unit_test(test_receiver_not_ready),
		cmocka_unit_test(test_length_error_and_flush),
		cmocka_unit_test(test_notification_one_shot),
		cmocka_unit_test(test_cq_overflow),
		cmocka_unit_test(test_create_limits),
	};

	ops = kvf__verbs_fake();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
