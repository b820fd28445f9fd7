/* SPDX-License-Identifier: MIT */
/*
 * rdma/fake.c - an in-process RDMA fabric behind the verbs ops table.
 *
 * The transport cannot be run on hardware here, so this fabric is strict
 * where hardware is strict and where a transport bug would otherwise stay
 * hidden:
 *
 *  - RC QP state machine RESET -> INIT -> RTR -> RTS with the attribute
 *    masks the kernel requires for each transition (missing or foreign
 *    attributes: EINVAL); posting a SEND before RTS or anything in RESET
 *    fails synchronously; in ERR every new work request is flushed.
 *  - A SEND is delivered into the peer's oldest posted RECV only when the
 *    two QPs name each other (dest QPN), each one's GRH targets the GID the
 *    other sends from, and the sender's next PSN is the receiver's expected
 *    PSN (both advance by the packets each message takes). Otherwise the
 *    packets would be dropped on a wire: the SEND ends in RETRY_EXC_ERR.
 *  - Receiver not ready: with no RECV posted the SEND is held; with
 *    rnr_retry 7 for ever, otherwise it fails (RNR_RETRY_EXC_ERR) after
 *    rnr_retry further fabric events find no RECV.
 *  - A SEND longer than the RECV: LOC_LEN_ERR at the receiver,
 *    REM_INV_REQ_ERR at the sender, both QPs in ERR.
 *  - Scatter/gather entries must lie inside a registered MR of the QP's PD
 *    with the matching lkey (RECVs also need LOCAL_WRITE); inline SENDs
 *    are exempt. A bad entry completes with LOC_PROT_ERR (QP to ERR).
 *  - Moving to ERR flushes every outstanding work request with
 *    WR_FLUSH_ERR; RESET and destroy discard them (as hardware does).
 *  - Bounded CQ: overflow makes poll_cq fail. The completion channel is an
 *    eventfd in semaphore mode; a CQ signals it once per req_notify_cq,
 *    on the next completion added after arming. destroy_cq with events
 *    not acknowledged fails with EBUSY (libibverbs would block for ever).
 *  - Destroying an object that others still use fails with EBUSY.
 *
 * Delivery is synchronous: whenever a work request is posted or a QP
 * changes state, the fabric retries every held SEND. Data is copied at
 * delivery time, from the sender's registered memory as a DMA engine
 * would, so a sender that reuses a buffer before its completion is caught
 * by the comparison tests.
 *
 * Concurrency: one process-wide mutex guards the whole fabric; only
 * get_cq_event's read of the channel fd happens outside it (it may block).
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "rdma/fake.h"
#include "rdma/ops.h"

#define FAKE_PORT 1
#define FAKE_NR_GIDS 2
#define FAKE_MTU IBV_MTU_1024
#define FAKE_MTU_BYTES 1024u
#define FAKE_MAX_WR 1024u
#define FAKE_MAX_SGE 4
#define FAKE_MAX_CQE 65536
#define FAKE_INLINE_MAX 256u
#define RNR_INFINITE 7

struct fake_ctx {
	struct ibv_context ibv;
	int users;
};

struct fake_pd {
	struct ibv_pd ibv;
	int users;
};

struct fake_mr {
	struct ibv_mr ibv;
	int access;
	struct fake_mr *next;
};

struct fake_channel {
	struct ibv_comp_channel ibv;
	int users;
};

struct fake_cq {
	struct ibv_cq ibv;
	struct ibv_wc *ring;
	int cap, head, count;
	bool armed, overflow;
	unsigned int pending_events; /* signalled, not yet fetched */
	unsigned int events, acked;
	int users;
	struct fake_cq *next;
};

struct fake_wr {
	uint64_t wr_id;
	struct ibv_sge sge[FAKE_MAX_SGE];
	int num_sge;
	uint32_t len;
	bool inline_data, signaled, prot;
	unsigned int tries;
	uint8_t data[FAKE_INLINE_MAX];
};

struct wr_ring {
	struct fake_wr *wr;
	uint32_t cap, head, count;
};

struct fake_qp {
	struct ibv_qp ibv;
	enum ibv_qp_state state;
	struct fake_cq *scq, *rcq;
	bool sig_all;
	uint32_t max_send_sge, max_recv_sge, max_inline;
	int access;
	uint32_t dest_qpn, rq_psn, sq_psn;
	uint8_t sgid_index, rnr_retry;
	union ibv_gid dgid;
	struct wr_ring sq, rq;
	/* faults */
	bool vanished;
	enum ibv_wc_status fail_next;
	uint32_t recv_clip;
	struct fake_qp *next;
};

static struct {
	pthread_mutex_t lock;
	int device_errno;
	uint32_t inline_cap;
	uint32_t next_qpn, next_key;
	long live;
	struct fake_mr *mrs;
	struct fake_cq *cqs;
	struct fake_qp *qps;
} fab = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.inline_cap = FAKE_INLINE_MAX,
	.next_qpn = 0x100,
	.next_key = 0x1000,
};

static const union ibv_gid fake_gids[FAKE_NR_GIDS] = {
	{.raw = {0xfe, 0x80, [15] = 1}},
	{.raw = {[10] = 0xff, [11] = 0xff, 10, 0, 0, 1}},
};

static struct ibv_device fake_device = {
	.node_type = IBV_NODE_CA,
	.transport_type = IBV_TRANSPORT_IB,
	.name = "fakeib0",
	.dev_name = "uverbs-fake0",
};

static void lock(void)
{
	pthread_mutex_lock(&fab.lock);
}

static void unlock(void)
{
	pthread_mutex_unlock(&fab.lock);
}

/* ---- completions and notification ---------------------------------- */

static void cq_signal(struct fake_cq *cq)
{
	uint64_t one = 1;

	if (!cq->armed || !cq->ibv.channel)
		return;
	cq->armed = false;
	cq->pending_events++;
	/* An eventfd write of 1 cannot fail short of counter overflow. */
	if (write(cq->ibv.channel->fd, &one, sizeof(one)) != sizeof(one))
		cq->pending_events--;
}

static void cq_push(struct fake_cq *cq, struct fake_qp *qp, uint64_t wr_id,
		    enum ibv_wc_status st, enum ibv_wc_opcode op, uint32_t len)
{
	struct ibv_wc *wc;

	if (cq->overflow)
		return;
	if (cq->count == cq->cap) {
		cq->overflow = true;
		return;
	}
	wc = &cq->ring[(cq->head + cq->count) % cq->cap];
	cq->count++;
	memset(wc, 0, sizeof(*wc));
	wc->wr_id = wr_id;
	wc->status = st;
	wc->opcode = op;
	wc->byte_len = len;
	wc->qp_num = qp->ibv.qp_num;
	cq_signal(cq);
}

/* ---- work request rings -------------------------------------------- */

static int ring_init(struct wr_ring *r, uint32_t cap)
{
	r->wr = calloc(cap, sizeof(*r->wr));
	r->cap = cap;
	r->head = r->count = 0;
	return r->wr ? 0 : ENOMEM;
}

static struct fake_wr *ring_head(struct wr_ring *r)
{
	return r->count ? &r->wr[r->head] : NULL;
}

static struct fake_wr *ring_push(struct wr_ring *r)
{
	struct fake_wr *w;

	if (r->count == r->cap)
		return NULL;
	w = &r->wr[(r->head + r->count) % r->cap];
	r->count++;
	memset(w, 0, offsetof(struct fake_wr, data));
	return w;
}

static void ring_pop(struct wr_ring *r)
{
	r->head = (r->head + 1) % r->cap;
	r->count--;
}

/* ---- QP lookup, errors, flush -------------------------------------- */

static struct fake_qp *find_qp(uint32_t qpn)
{
	for (struct fake_qp *q = fab.qps; q; q = q->next)
		if (q->ibv.qp_num == qpn)
			return q;
	return NULL;
}

static void flush_ring(struct fake_qp *q, struct wr_ring *r, struct fake_cq *cq,
		       enum ibv_wc_opcode op)
{
	struct fake_wr *w;

	while ((w = ring_head(r))) {
		cq_push(cq, q, w->wr_id, IBV_WC_WR_FLUSH_ERR, op, 0);
		ring_pop(r);
	}
}

static void qp_to_error(struct fake_qp *q)
{
	q->state = IBV_QPS_ERR;
	q->ibv.state = IBV_QPS_ERR;
	flush_ring(q, &q->sq, q->scq, IBV_WC_SEND);
	flush_ring(q, &q->rq, q->rcq, IBV_WC_RECV);
}

/* Complete the head SEND of @q with @st; any error takes the QP down. */
static void send_done(struct fake_qp *q, enum ibv_wc_status st)
{
	struct fake_wr *w = ring_head(&q->sq);
	bool signal = w->signaled || q->sig_all || st != IBV_WC_SUCCESS;

	if (signal)
		cq_push(q->scq, q, w->wr_id, st, IBV_WC_SEND, 0);
	ring_pop(&q->sq);
	if (st != IBV_WC_SUCCESS)
		qp_to_error(q);
}

/* ---- memory checks ------------------------------------------------- */

static bool sge_ok(const struct ibv_sge *s, struct ibv_pd *pd, int need)
{
	for (struct fake_mr *m = fab.mrs; m; m = m->next) {
		uintptr_t lo = (uintptr_t)m->ibv.addr;

		if (m->ibv.lkey != s->lkey)
			continue;
		return m->ibv.pd == pd && (m->access & need) == need &&
		       s->addr >= lo && s->length <= m->ibv.length &&
		       s->addr - lo <= m->ibv.length - s->length;
	}
	return false;
}

/* ---- delivery ------------------------------------------------------ */

static bool routes_to(const struct fake_qp *s, const struct fake_qp *r)
{
	return r->dest_qpn == s->ibv.qp_num && s->dest_qpn == r->ibv.qp_num &&
	       !memcmp(&s->dgid, &fake_gids[r->sgid_index], sizeof(s->dgid)) &&
	       !memcmp(&r->dgid, &fake_gids[s->sgid_index], sizeof(r->dgid));
}

static bool receiving(const struct fake_qp *r)
{
	return r->state == IBV_QPS_RTR || r->state == IBV_QPS_RTS;
}

static uint32_t packets(uint32_t len)
{
	return len ? (len + FAKE_MTU_BYTES - 1) / FAKE_MTU_BYTES : 1;
}

static void copy_payload(const struct fake_wr *w, const struct fake_wr *rw)
{
	uint8_t *dst = (uint8_t *)(uintptr_t)rw->sge[0].addr;

	if (w->inline_data) {
		memcpy(dst, w->data, w->len);
		return;
	}
	for (int i = 0; i < w->num_sge; i++) {
		memcpy(dst, (const void *)(uintptr_t)w->sge[i].addr,
		       w->sge[i].length);
		dst += w->sge[i].length;
	}
}

static uint32_t recv_room(const struct fake_qp *r, const struct fake_wr *rw)
{
	uint32_t room = rw->len;

	if (r->recv_clip && r->recv_clip < room)
		room = r->recv_clip;
	return room;
}

/*
 * Try to deliver the head SEND of @s. Return: true when it left the send
 * queue (delivered or failed), false when it is held.
 */
static bool deliver_head(struct fake_qp *s)
{
	struct fake_wr *w = ring_head(&s->sq), *rw;
	struct fake_qp *r;
	enum ibv_wc_status st;

	if (s->state != IBV_QPS_RTS || s->vanished)
		return false;
	if (w->prot) {
		send_done(s, IBV_WC_LOC_PROT_ERR);
		return true;
	}
	r = find_qp(s->dest_qpn);
	if (!r || r->vanished || !receiving(r) || !routes_to(s, r) ||
	    s->sq_psn != r->rq_psn) {
		send_done(s, IBV_WC_RETRY_EXC_ERR);
		return true;
	}
	rw = ring_head(&r->rq);
	if (!rw) {
		if (s->rnr_retry == RNR_INFINITE || w->tries++ < s->rnr_retry)
			return false;
		send_done(s, IBV_WC_RNR_RETRY_EXC_ERR);
		return true;
	}
	if (w->len > recv_room(r, rw)) {
		cq_push(r->rcq, r, rw->wr_id, IBV_WC_LOC_LEN_ERR, IBV_WC_RECV,
			0);
		ring_pop(&r->rq);
		qp_to_error(r);
		send_done(s, IBV_WC_REM_INV_REQ_ERR);
		return true;
	}
	if (s->fail_next != IBV_WC_SUCCESS) {
		st = s->fail_next;
		s->fail_next = IBV_WC_SUCCESS;
		send_done(s, st);
		return true;
	}
	copy_payload(w, rw);
	s->sq_psn = (s->sq_psn + packets(w->len)) & 0xffffff;
	r->rq_psn = (r->rq_psn + packets(w->len)) & 0xffffff;
	cq_push(r->rcq, r, rw->wr_id, IBV_WC_SUCCESS, IBV_WC_RECV, w->len);
	ring_pop(&r->rq);
	send_done(s, IBV_WC_SUCCESS);
	return true;
}

/* Retry every held SEND; one pass may free RECVs others wait for. */
static void pump(void)
{
	bool moved;

	do {
		moved = false;
		for (struct fake_qp *q = fab.qps; q; q = q->next)
			while (ring_head(&q->sq) && deliver_head(q))
				moved = true;
	} while (moved);
}

/* ---- devices ------------------------------------------------------- */

static struct ibv_device **fake_get_device_list(int *num)
{
	struct ibv_device **list;
	int err;

	lock();
	err = fab.device_errno;
	unlock();
	if (err) {
		errno = err;
		return NULL;
	}
	list = calloc(2, sizeof(*list));
	if (!list) {
		errno = ENOMEM;
		return NULL;
	}
	list[0] = &fake_device;
	if (num)
		*num = 1;
	return list;
}

static void fake_free_device_list(struct ibv_device **list)
{
	free(list);
}

static const char *fake_get_device_name(struct ibv_device *dev)
{
	return dev->name;
}

static struct ibv_context *fake_open_device(struct ibv_device *dev)
{
	struct fake_ctx *c;

	if (dev != &fake_device) {
		errno = ENODEV;
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		errno = ENOMEM;
		return NULL;
	}
	c->ibv.device = dev;
	c->ibv.cmd_fd = -1;
	c->ibv.async_fd = -1;
	c->ibv.num_comp_vectors = 1;
	lock();
	fab.live++;
	unlock();
	return &c->ibv;
}

static int release(int users, long *live)
{
	if (users)
		return EBUSY;
	(*live)--;
	return 0;
}

static int fake_close_device(struct ibv_context *ctx)
{
	struct fake_ctx *c = (struct fake_ctx *)ctx;
	int err;

	lock();
	err = release(c->users, &fab.live);
	unlock();
	if (!err)
		free(c);
	return err;
}

static int fake_query_device(struct ibv_context *ctx,
			     struct ibv_device_attr *attr)
{
	(void)ctx;
	memset(attr, 0, sizeof(*attr));
	snprintf(attr->fw_ver, sizeof(attr->fw_ver), "fake");
	attr->max_mr_size = UINT64_MAX;
	attr->max_qp_wr = FAKE_MAX_WR;
	attr->max_sge = FAKE_MAX_SGE;
	attr->max_cqe = FAKE_MAX_CQE;
	attr->phys_port_cnt = FAKE_PORT;
	return 0;
}

static int fake_query_port(struct ibv_context *ctx, uint8_t port,
			   struct ibv_port_attr *attr)
{
	(void)ctx;
	if (port != FAKE_PORT)
		return EINVAL;
	memset(attr, 0, sizeof(*attr));
	attr->state = IBV_PORT_ACTIVE;
	attr->max_mtu = IBV_MTU_4096;
	attr->active_mtu = FAKE_MTU;
	attr->gid_tbl_len = FAKE_NR_GIDS;
	attr->max_msg_sz = 1u << 31;
	attr->pkey_tbl_len = 1;
	attr->link_layer = IBV_LINK_LAYER_ETHERNET;
	return 0;
}

static int fake_query_gid_ex(struct ibv_context *ctx, uint32_t port,
			     uint32_t index, struct ibv_gid_entry *e)
{
	(void)ctx;
	if (port != FAKE_PORT || index >= FAKE_NR_GIDS)
		return EINVAL;
	memset(e, 0, sizeof(*e));
	e->gid = fake_gids[index];
	e->gid_index = index;
	e->port_num = port;
	e->gid_type = index ? IBV_GID_TYPE_ROCE_V2 : IBV_GID_TYPE_ROCE_V1;
	return 0;
}

/* ---- PD and MR ----------------------------------------------------- */

static struct ibv_pd *fake_alloc_pd(struct ibv_context *ctx)
{
	struct fake_pd *p = calloc(1, sizeof(*p));

	if (!p) {
		errno = ENOMEM;
		return NULL;
	}
	p->ibv.context = ctx;
	lock();
	((struct fake_ctx *)ctx)->users++;
	fab.live++;
	unlock();
	return &p->ibv;
}

static int fake_dealloc_pd(struct ibv_pd *pd)
{
	struct fake_pd *p = (struct fake_pd *)pd;
	int err;

	lock();
	err = release(p->users, &fab.live);
	if (!err)
		((struct fake_ctx *)pd->context)->users--;
	unlock();
	if (!err)
		free(p);
	return err;
}

static struct ibv_mr *fake_reg_mr(struct ibv_pd *pd, void *addr, size_t len,
				  int access)
{
	struct fake_mr *m;

	if (!addr || !len || len > UINT32_MAX) {
		errno = EINVAL;
		return NULL;
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		errno = ENOMEM;
		return NULL;
	}
	m->ibv.context = pd->context;
	m->ibv.pd = pd;
	m->ibv.addr = addr;
	m->ibv.length = len;
	m->access = access;
	lock();
	m->ibv.lkey = m->ibv.rkey = fab.next_key++;
	m->next = fab.mrs;
	fab.mrs = m;
	((struct fake_pd *)pd)->users++;
	fab.live++;
	unlock();
	return &m->ibv;
}

static int fake_dereg_mr(struct ibv_mr *mr)
{
	struct fake_mr **pp;

	lock();
	for (pp = &fab.mrs; *pp && &(*pp)->ibv != mr; pp = &(*pp)->next)
		;
	if (!*pp) {
		unlock();
		return EINVAL;
	}
	*pp = (*pp)->next;
	((struct fake_pd *)mr->pd)->users--;
	fab.live--;
	unlock();
	free(mr);
	return 0;
}

/* ---- completion channel and CQ ------------------------------------- */

static struct ibv_comp_channel *
fake_create_comp_channel(struct ibv_context *ctx)
{
	struct fake_channel *ch = calloc(1, sizeof(*ch));

	if (!ch) {
		errno = ENOMEM;
		return NULL;
	}
	ch->ibv.context = ctx;
	ch->ibv.fd = eventfd(0, EFD_SEMAPHORE | EFD_CLOEXEC);
	if (ch->ibv.fd < 0) {
		free(ch);
		return NULL;
	}
	lock();
	((struct fake_ctx *)ctx)->users++;
	fab.live++;
	unlock();
	return &ch->ibv;
}

static int fake_destroy_comp_channel(struct ibv_comp_channel *chan)
{
	struct fake_channel *ch = (struct fake_channel *)chan;
	int err;

	lock();
	err = release(ch->users, &fab.live);
	if (!err)
		((struct fake_ctx *)chan->context)->users--;
	unlock();
	if (err)
		return err;
	close(chan->fd);
	free(ch);
	return 0;
}

static struct ibv_cq *fake_create_cq(struct ibv_context *ctx, int cqe,
				     void *cq_context,
				     struct ibv_comp_channel *ch, int vector)
{
	struct fake_cq *cq;

	if (cqe < 1 || cqe > FAKE_MAX_CQE || vector != 0) {
		errno = EINVAL;
		return NULL;
	}
	cq = calloc(1, sizeof(*cq));
	if (cq)
		cq->ring = calloc((size_t)cqe, sizeof(*cq->ring));
	if (!cq || !cq->ring) {
		free(cq);
		errno = ENOMEM;
		return NULL;
	}
	cq->cap = cqe;
	cq->ibv.context = ctx;
	cq->ibv.channel = ch;
	cq->ibv.cq_context = cq_context;
	cq->ibv.cqe = cqe;
	lock();
	((struct fake_ctx *)ctx)->users++;
	if (ch)
		((struct fake_channel *)ch)->users++;
	cq->next = fab.cqs;
	fab.cqs = cq;
	fab.live++;
	unlock();
	return &cq->ibv;
}

static int fake_destroy_cq(struct ibv_cq *ibcq)
{
	struct fake_cq *cq = (struct fake_cq *)ibcq, **pp;

	lock();
	if (cq->users || cq->events != cq->acked) {
		unlock();
		return EBUSY;
	}
	for (pp = &fab.cqs; *pp != cq; pp = &(*pp)->next)
		;
	*pp = cq->next;
	((struct fake_ctx *)ibcq->context)->users--;
	if (ibcq->channel)
		((struct fake_channel *)ibcq->channel)->users--;
	fab.live--;
	unlock();
	free(cq->ring);
	free(cq);
	return 0;
}

static int fake_poll_cq(struct ibv_cq *ibcq, int n, struct ibv_wc *wc)
{
	struct fake_cq *cq = (struct fake_cq *)ibcq;
	int got = 0;

	lock();
	if (cq->overflow) {
		unlock();
		return -EIO;
	}
	while (got < n && cq->count) {
		wc[got++] = cq->ring[cq->head];
		cq->head = (cq->head + 1) % cq->cap;
		cq->count--;
	}
	unlock();
	return got;
}

static int fake_req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
	struct fake_cq *cq = (struct fake_cq *)ibcq;

	(void)solicited_only;
	lock();
	cq->armed = true;
	unlock();
	return 0;
}

static int fake_get_cq_event(struct ibv_comp_channel *chan, struct ibv_cq **out,
			     void **cq_context)
{
	uint64_t v;
	struct fake_cq *cq;

	if (read(chan->fd, &v, sizeof(v)) != sizeof(v))
		return -1; /* errno from read: EAGAIN on a non-blocking fd */
	lock();
	for (cq = fab.cqs; cq; cq = cq->next)
		if (cq->ibv.channel == chan && cq->pending_events)
			break;
	if (cq) {
		cq->pending_events--;
		cq->events++;
	}
	unlock();
	if (!cq) {
		errno = EIO;
		return -1;
	}
	*out = &cq->ibv;
	*cq_context = cq->ibv.cq_context;
	return 0;
}

static void fake_ack_cq_events(struct ibv_cq *ibcq, unsigned int n)
{
	lock();
	((struct fake_cq *)ibcq)->acked += n;
	unlock();
}

/* ---- QP ------------------------------------------------------------ */

static bool caps_ok(const struct ibv_qp_cap *c)
{
	return c->max_send_wr && c->max_send_wr <= FAKE_MAX_WR &&
	       c->max_recv_wr && c->max_recv_wr <= FAKE_MAX_WR &&
	       c->max_send_sge <= FAKE_MAX_SGE && c->max_recv_sge &&
	       c->max_recv_sge <= FAKE_MAX_SGE;
}

static struct ibv_qp *fake_create_qp(struct ibv_pd *pd,
				     struct ibv_qp_init_attr *a)
{
	struct fake_qp *q;
	int err = EINVAL;

	if (a->qp_type != IBV_QPT_RC || !a->send_cq || !a->recv_cq || a->srq ||
	    !caps_ok(&a->cap))
		goto err_out;
	lock();
	err = a->cap.max_inline_data > fab.inline_cap ? EINVAL : 0;
	unlock();
	if (err)
		goto err_out;
	err = ENOMEM;
	q = calloc(1, sizeof(*q));
	if (!q)
		goto err_out;
	if (ring_init(&q->sq, a->cap.max_send_wr) ||
	    ring_init(&q->rq, a->cap.max_recv_wr))
		goto err_free;
	q->ibv.context = pd->context;
	q->ibv.qp_context = a->qp_context;
	q->ibv.pd = pd;
	q->ibv.send_cq = a->send_cq;
	q->ibv.recv_cq = a->recv_cq;
	q->ibv.qp_type = IBV_QPT_RC;
	q->ibv.state = q->state = IBV_QPS_RESET;
	q->scq = (struct fake_cq *)a->send_cq;
	q->rcq = (struct fake_cq *)a->recv_cq;
	q->sig_all = a->sq_sig_all;
	q->max_send_sge = a->cap.max_send_sge;
	q->max_recv_sge = a->cap.max_recv_sge;
	q->max_inline = a->cap.max_inline_data;
	lock();
	q->ibv.qp_num = fab.next_qpn++ & 0xffffff;
	q->scq->users++;
	q->rcq->users++;
	((struct fake_pd *)pd)->users++;
	q->next = fab.qps;
	fab.qps = q;
	fab.live++;
	unlock();
	return &q->ibv;

err_free:
	free(q->sq.wr);
	free(q->rq.wr);
	free(q);
err_out:
	errno = err;
	return NULL;
}

/* The kernel's transition table, reduced to the RC transitions we use. */
struct transition {
	enum ibv_qp_state from, to;
	int required, optional;
};

static const struct transition transitions[] = {
	{IBV_QPS_RESET, IBV_QPS_INIT,
	 IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS,
	 0},
	{IBV_QPS_INIT, IBV_QPS_INIT, IBV_QP_STATE,
	 IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS},
	{IBV_QPS_INIT, IBV_QPS_RTR,
	 IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
		 IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
		 IBV_QP_MIN_RNR_TIMER,
	 IBV_QP_PKEY_INDEX | IBV_QP_ACCESS_FLAGS | IBV_QP_ALT_PATH},
	{IBV_QPS_RTR, IBV_QPS_RTS,
	 IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
		 IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC,
	 IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_MIN_RNR_TIMER |
		 IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE},
	{IBV_QPS_RTS, IBV_QPS_RTS, IBV_QP_STATE,
	 IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_MIN_RNR_TIMER},
};

static int check_transition(enum ibv_qp_state from, enum ibv_qp_state to,
			    int mask)
{
	if (to == IBV_QPS_RESET || to == IBV_QPS_ERR)
		return (mask & ~(IBV_QP_STATE | IBV_QP_CUR_STATE)) ? EINVAL : 0;
	for (size_t i = 0; i < sizeof(transitions) / sizeof(*transitions);
	     i++) {
		const struct transition *t = &transitions[i];

		if (t->from != from || t->to != to)
			continue;
		if ((mask & t->required) != t->required ||
		    (mask & ~(t->required | t->optional)))
			return EINVAL;
		return 0;
	}
	return EINVAL;
}

static int check_attrs(const struct ibv_qp_attr *a, int mask)
{
	if ((mask & IBV_QP_PORT) && a->port_num != FAKE_PORT)
		return EINVAL;
	if ((mask & IBV_QP_PKEY_INDEX) && a->pkey_index != 0)
		return EINVAL;
	if ((mask & IBV_QP_PATH_MTU) && a->path_mtu > FAKE_MTU)
		return EINVAL;
	if (mask & IBV_QP_AV) {
		/* RoCE needs a GRH; the source GID must exist. */
		if (!a->ah_attr.is_global ||
		    a->ah_attr.grh.sgid_index >= FAKE_NR_GIDS ||
		    a->ah_attr.port_num != FAKE_PORT)
			return EINVAL;
	}
	if ((mask & IBV_QP_RNR_RETRY) && a->rnr_retry > RNR_INFINITE)
		return EINVAL;
	if ((mask & IBV_QP_RETRY_CNT) && a->retry_cnt > 7)
		return EINVAL;
	if ((mask & (IBV_QP_RQ_PSN | IBV_QP_SQ_PSN | IBV_QP_DEST_QPN)) &&
	    ((a->rq_psn | a->sq_psn | a->dest_qp_num) >> 24))
		return EINVAL;
	return 0;
}

static void apply_attrs(struct fake_qp *q, const struct ibv_qp_attr *a,
			int mask)
{
	if (mask & IBV_QP_ACCESS_FLAGS)
		q->access = a->qp_access_flags;
	if (mask & IBV_QP_AV) {
		q->sgid_index = a->ah_attr.grh.sgid_index;
		q->dgid = a->ah_attr.grh.dgid;
	}
	if (mask & IBV_QP_DEST_QPN)
		q->dest_qpn = a->dest_qp_num;
	if (mask & IBV_QP_RQ_PSN)
		q->rq_psn = a->rq_psn;
	if (mask & IBV_QP_SQ_PSN)
		q->sq_psn = a->sq_psn;
	if (mask & IBV_QP_RNR_RETRY)
		q->rnr_retry = a->rnr_retry;
}

static void reset_rings(struct fake_qp *q)
{
	q->sq.head = q->sq.count = 0;
	q->rq.head = q->rq.count = 0;
}

static int fake_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *a, int mask)
{
	struct fake_qp *q = (struct fake_qp *)ibqp;
	enum ibv_qp_state to;
	int err;

	lock();
	to = (mask & IBV_QP_STATE) ? a->qp_state : q->state;
	err = (mask & IBV_QP_CUR_STATE) && a->cur_qp_state != q->state
		      ? EINVAL
		      : check_transition(q->state, to, mask);
	if (!err)
		err = check_attrs(a, mask);
	if (err) {
		unlock();
		return err;
	}
	apply_attrs(q, a, mask);
	if (to == IBV_QPS_ERR) {
		qp_to_error(q);
	} else {
		if (to == IBV_QPS_RESET)
			reset_rings(q);
		q->state = to;
		q->ibv.state = to;
	}
	pump();
	unlock();
	return 0;
}

static int fake_destroy_qp(struct ibv_qp *ibqp)
{
	struct fake_qp *q = (struct fake_qp *)ibqp, **pp;

	lock();
	for (pp = &fab.qps; *pp != q; pp = &(*pp)->next)
		;
	*pp = q->next;
	q->scq->users--;
	q->rcq->users--;
	((struct fake_pd *)ibqp->pd)->users--;
	fab.live--;
	/* SENDs held for this QP now find nobody: they time out. */
	pump();
	unlock();
	free(q->sq.wr);
	free(q->rq.wr);
	free(q);
	return 0;
}

/* ---- posting ------------------------------------------------------- */

static int fill_send(struct fake_qp *q, const struct ibv_send_wr *wr,
		     struct fake_wr *w, bool *prot)
{
	w->wr_id = wr->wr_id;
	w->num_sge = wr->num_sge;
	w->signaled = wr->send_flags & IBV_SEND_SIGNALED;
	w->inline_data = wr->send_flags & IBV_SEND_INLINE;
	for (int i = 0; i < wr->num_sge; i++) {
		w->sge[i] = wr->sg_list[i];
		w->len += wr->sg_list[i].length;
		if (!w->inline_data && !sge_ok(&wr->sg_list[i], q->ibv.pd, 0))
			*prot = true;
	}
	if (!w->inline_data)
		return 0;
	if (w->len > q->max_inline)
		return EINVAL;
	for (int i = 0, off = 0; i < wr->num_sge; i++) {
		memcpy(w->data + off, (void *)(uintptr_t)wr->sg_list[i].addr,
		       wr->sg_list[i].length);
		off += wr->sg_list[i].length;
	}
	return 0;
}

static int post_one_send(struct fake_qp *q, const struct ibv_send_wr *wr)
{
	struct fake_wr *w;
	bool prot = false;
	int err;

	if (q->state != IBV_QPS_RTS && q->state != IBV_QPS_ERR)
		return EINVAL;
	if (wr->opcode != IBV_WR_SEND || wr->num_sge < 0 ||
	    (uint32_t)wr->num_sge > q->max_send_sge)
		return EINVAL;
	w = ring_push(&q->sq);
	if (!w)
		return ENOMEM;
	err = fill_send(q, wr, w, &prot);
	if (err) {
		q->sq.count--;
		return err;
	}
	/* Earlier SENDs go first; this one fails when it is reached. */
	w->prot = prot;
	if (q->state == IBV_QPS_ERR)
		flush_ring(q, &q->sq, q->scq, IBV_WC_SEND);
	return 0;
}

static int fake_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
			  struct ibv_send_wr **bad)
{
	struct fake_qp *q = (struct fake_qp *)ibqp;
	int err = 0;

	lock();
	for (; wr; wr = wr->next) {
		err = post_one_send(q, wr);
		if (err) {
			*bad = wr;
			break;
		}
		pump();
	}
	unlock();
	return err;
}

static int post_one_recv(struct fake_qp *q, const struct ibv_recv_wr *wr)
{
	struct fake_wr *w;
	bool prot = false;

	if (q->state == IBV_QPS_RESET)
		return EINVAL;
	if (wr->num_sge < 1 || (uint32_t)wr->num_sge > q->max_recv_sge)
		return EINVAL;
	w = ring_push(&q->rq);
	if (!w)
		return ENOMEM;
	w->wr_id = wr->wr_id;
	/* Scatter into one contiguous SGE: the only shape the transport
	 * posts; more would need a scatter copy the transport never uses. */
	w->num_sge = 1;
	w->sge[0] = wr->sg_list[0];
	w->len = wr->sg_list[0].length;
	if (wr->num_sge != 1 ||
	    !sge_ok(&wr->sg_list[0], q->ibv.pd, IBV_ACCESS_LOCAL_WRITE))
		prot = true;
	if (q->state == IBV_QPS_ERR) {
		flush_ring(q, &q->rq, q->rcq, IBV_WC_RECV);
	} else if (prot) {
		cq_push(q->rcq, q, w->wr_id, IBV_WC_LOC_PROT_ERR, IBV_WC_RECV,
			0);
		q->rq.count--;
		qp_to_error(q);
	}
	return 0;
}

static int fake_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr,
			  struct ibv_recv_wr **bad)
{
	struct fake_qp *q = (struct fake_qp *)ibqp;
	int err = 0;

	lock();
	for (; wr; wr = wr->next) {
		err = post_one_recv(q, wr);
		if (err) {
			*bad = wr;
			break;
		}
	}
	pump();
	unlock();
	return err;
}

/* ---- fault injection ----------------------------------------------- */

void kvf__fake_set_device_errno(int err)
{
	lock();
	fab.device_errno = err;
	unlock();
}

void kvf__fake_set_inline_cap(uint32_t cap)
{
	lock();
	fab.inline_cap = cap;
	unlock();
}

/* Run @fn on QP @qpn under the lock, then let the fabric move. */
static int with_qp(uint32_t qpn, void (*fn)(struct fake_qp *, uint32_t),
		   uint32_t arg)
{
	struct fake_qp *q;

	lock();
	q = find_qp(qpn);
	if (q) {
		fn(q, arg);
		pump();
	}
	unlock();
	return q ? 0 : ENOENT;
}

static void do_vanish(struct fake_qp *q, uint32_t arg)
{
	(void)arg;
	q->vanished = true;
}

static void do_fail_next(struct fake_qp *q, uint32_t st)
{
	q->fail_next = (enum ibv_wc_status)st;
}

static void do_clip(struct fake_qp *q, uint32_t len)
{
	q->recv_clip = len;
}

static void do_error(struct fake_qp *q, uint32_t arg)
{
	(void)arg;
	qp_to_error(q);
}

int kvf__fake_vanish(uint32_t qpn)
{
	return with_qp(qpn, do_vanish, 0);
}

int kvf__fake_fail_next_send(uint32_t qpn, enum ibv_wc_status status)
{
	return with_qp(qpn, do_fail_next, status);
}

int kvf__fake_clip_recvs(uint32_t qpn, uint32_t len)
{
	return with_qp(qpn, do_clip, len);
}

int kvf__fake_force_error(uint32_t qpn)
{
	return with_qp(qpn, do_error, 0);
}

int kvf__fake_qp_state(uint32_t qpn)
{
	struct fake_qp *q;
	int st;

	lock();
	q = find_qp(qpn);
	st = q ? (int)q->state : -1;
	unlock();
	return st;
}

long kvf__fake_live_objects(void)
{
	long n;

	lock();
	n = fab.live;
	unlock();
	return n;
}

static const struct kvf__verbs_ops fake_ops = {
	.name = "fake",
	.get_device_list = fake_get_device_list,
	.free_device_list = fake_free_device_list,
	.get_device_name = fake_get_device_name,
	.open_device = fake_open_device,
	.close_device = fake_close_device,
	.query_device = fake_query_device,
	.query_port = fake_query_port,
	.query_gid_ex = fake_query_gid_ex,
	.alloc_pd = fake_alloc_pd,
	.dealloc_pd = fake_dealloc_pd,
	.reg_mr = fake_reg_mr,
	.dereg_mr = fake_dereg_mr,
	.create_comp_channel = fake_create_comp_channel,
	.destroy_comp_channel = fake_destroy_comp_channel,
	.create_cq = fake_create_cq,
	.destroy_cq = fake_destroy_cq,
	.create_qp = fake_create_qp,
	.modify_qp = fake_modify_qp,
	.destroy_qp = fake_destroy_qp,
	.post_send = fake_post_send,
	.post_recv = fake_post_recv,
	.poll_cq = fake_poll_cq,
	.req_notify_cq = fake_req_notify_cq,
	.get_cq_event = fake_get_cq_event,
	.ack_cq_events = fake_ack_cq_events,
};

const struct kvf__verbs_ops *kvf__verbs_fake(void)
{
	return &fake_ops;
}
