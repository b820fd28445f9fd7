/* SPDX-License-Identifier: MIT */
/*
 * rdma/stream.c - a byte stream over RC SEND/RECV, as coro_rpc's ibverbs
 * socket puts it on the wire.
 *
 * Wire rules (shared with the peer, not ours to change): every SEND
 * carries 1..max_send bytes of the stream, max_send = min(peer's
 * advertised buffer, ours); SEND boundaries mean nothing; a zero-length
 * SEND is close; PSN 0 both ways, GRH always, rnr_retry 7. There are no
 * credits: a SEND that finds no RECV posted is retried by the hardware
 * for ever (receiver-not-ready), which is the only back-pressure.
 *
 * Memory: one region of (recv_bufs + send_bufs) * buf_size per stream,
 * allocated and registered when the stream is created and reused for
 * every message; nothing is allocated on the data path. That bounds the
 * memory of a connection whatever the peer does.
 *
 * Receive: every RECV buffer starts posted. A completion queues the
 * buffer (index, length) in arrival order, which RC guarantees is the
 * stream order; read() copies from the oldest and re-posts it once fully
 * consumed. A zero-length completion queues an end-of-stream marker.
 *
 * Send: writev() copies into the "open" send buffer, posting it when
 * full; at the end of the call the open buffer is posted too unless
 * send_bufs - 1 SENDs are already in flight, in which case it stays open
 * and later bytes (also of later messages) coalesce into it until a send
 * completion posts it. No free buffer: the call accepts what it could,
 * or returns KVF_ERR_BUSY.
 *
 * Completions: wr_id holds the kind (RECV, SEND, CLOSE) in the high half
 * and the buffer index in the low half. The first failed completion makes
 * the stream failed (KVF_ERR_IO from then on); the QP is then in the
 * error state and flushes the rest, so every buffer comes back.
 *
 * Timeouts: a peer that vanishes is detected when a SEND exhausts its
 * transport retries (timeout 18 = 1.07 s per try, retry_cnt 5: about 6.4 s
 * on hardware, immediate on the fake fabric); a peer that only stops
 * sending is not detected here (the server's idle timeout covers it, as
 * for TCP). close() waits at most close_wait_ms for its close SEND.
 * The blocking handshake helpers take a timeout for the whole exchange.
 *
 * Concurrency: a stream belongs to one thread at a time.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <kvforge/status.h>

#include "base/clock.h"
#include "rdma/stream.h"

#define KVF_RDMA_PORT 1
#define WR_RECV 1ull
#define WR_SEND 2ull
#define WR_CLOSE 3ull
#define WR_ID(kind, idx) (((kind) << 32) | (uint32_t)(idx))
#define POLL_BATCH 16
#define EOF_MARK UINT32_MAX

/* coro_rpc's QP attributes; the PSNs and rnr_retry are part of the wire. */
#define QP_ACCESS                                                              \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |                     \
	 IBV_ACCESS_REMOTE_WRITE)
#define QP_MIN_RNR_TIMER 8 /* 0.16 ms */
#define QP_TIMEOUT 18	   /* 4.096 us << 18 = 1.07 s */
#define QP_RETRY_CNT 5
#define QP_RNR_RETRY 7 /* for ever */
#define QP_PSN 0

struct filled {
	uint32_t idx, len, off;
};

struct kvf__rdma_stream {
	struct kvf__rdma_dev *dev;
	struct kvf__rdma_cfg cfg;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *region; /* recv buffers, then send buffers */

	/* receive side */
	struct filled *rx; /* ring of recv_bufs + 1 (the end marker) */
	uint32_t rx_head, rx_count;

	/* send side */
	uint32_t *free_tx; /* stack of free send buffer indices */
	uint32_t nr_free_tx;
	uint32_t inflight, max_inflight;
	uint32_t open_idx, open_fill; /* open_fill 0: no open buffer */
	uint32_t max_send;

	/* readiness: an epoll set of the channel fd and an eventfd that is
	 * kept readable while received bytes (or an error) wait */
	int epfd, pend_fd;
	bool pend_set, want_read;

	bool connected, armed, eof, close_posted, close_done;
	int err;
	int wc_status;
};

void kvf__rdma_cfg_default(struct kvf__rdma_cfg *cfg)
{
	cfg->buf_size = 64 * 1024;
	cfg->recv_bufs = 16;
	cfg->send_bufs = 5;
	cfg->close_wait_ms = 1000;
}

static uint8_t *recv_buf(struct kvf__rdma_stream *s, uint32_t idx)
{
	return s->region + (size_t)idx * s->cfg.buf_size;
}

static uint8_t *send_buf(struct kvf__rdma_stream *s, uint32_t idx)
{
	return recv_buf(s, s->cfg.recv_bufs + idx);
}

static int fail(struct kvf__rdma_stream *s, int wc_status)
{
	if (!s->err) {
		s->err = KVF_ERR_IO;
		s->wc_status = wc_status;
	}
	return KVF_ERR_IO;
}

/* ---- posting -------------------------------------------------------- */

static int post_recv(struct kvf__rdma_stream *s, uint32_t idx)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)recv_buf(s, idx),
		.length = s->cfg.buf_size,
		.lkey = s->mr->lkey,
	};
	struct ibv_recv_wr wr = {.wr_id = WR_ID(WR_RECV, idx),
				 .sg_list = &sge,
				 .num_sge = 1},
			   *bad;

	if (s->dev->ops->post_recv(s->qp, &wr, &bad))
		return fail(s, IBV_WC_GENERAL_ERR);
	return KVF_OK;
}

/* Post @len bytes of send buffer @idx; @len 0 posts the close SEND. */
static int post_send(struct kvf__rdma_stream *s, uint64_t wr_id, uint32_t idx,
		     uint32_t len)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)send_buf(s, idx),
		.length = len,
		.lkey = s->mr->lkey,
	};
	struct ibv_send_wr wr = {.wr_id = wr_id,
				 .sg_list = len ? &sge : NULL,
				 .num_sge = len ? 1 : 0,
				 .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;

	if (s->dev->ops->post_send(s->qp, &wr, &bad))
		return fail(s, IBV_WC_GENERAL_ERR);
	return KVF_OK;
}

static int post_open(struct kvf__rdma_stream *s)
{
	int ret = post_send(s, WR_ID(WR_SEND, s->open_idx), s->open_idx,
			    s->open_fill);

	if (ret)
		return ret;
	s->inflight++;
	s->open_fill = 0;
	return KVF_OK;
}

/* ---- completions ---------------------------------------------------- */

static void rx_push(struct kvf__rdma_stream *s, uint32_t idx, uint32_t len)
{
	uint32_t cap = s->cfg.recv_bufs + 1u;
	struct filled *f = &s->rx[(s->rx_head + s->rx_count) % cap];

	f->idx = idx;
	f->len = len;
	f->off = 0;
	s->rx_count++;
}

static void on_send_done(struct kvf__rdma_stream *s, uint32_t idx)
{
	s->inflight--;
	s->free_tx[s->nr_free_tx++] = idx;
	if (s->open_fill && !s->err)
		post_open(s);
}

static void handle_wc(struct kvf__rdma_stream *s, const struct ibv_wc *wc)
{
	uint64_t kind = wc->wr_id >> 32;
	uint32_t idx = (uint32_t)wc->wr_id;

	switch (kind) {
	case WR_RECV:
		if (wc->status != IBV_WC_SUCCESS)
			break;
		if (wc->byte_len == 0)
			s->eof = true;
		rx_push(s, idx, wc->byte_len ? wc->byte_len : EOF_MARK);
		break;
	case WR_SEND:
		if (wc->status == IBV_WC_SUCCESS) {
			on_send_done(s, idx);
			return;
		}
		s->inflight--;
		s->free_tx[s->nr_free_tx++] = idx;
		break;
	case WR_CLOSE:
		s->close_done = true;
		break;
	}
	if (wc->status != IBV_WC_SUCCESS)
		fail(s, wc->status);
}

/*
 * Keep the pending eventfd readable exactly while the owner has something
 * to collect, so the stream's fd is level-triggered like a socket's even
 * though completions are signalled once.
 */
static void update_pending(struct kvf__rdma_stream *s)
{
	bool want = s->err || (s->want_read && s->rx_count);
	uint64_t v = 1;

	if (want == s->pend_set)
		return;
	if (want ? write(s->pend_fd, &v, sizeof(v)) == sizeof(v)
		 : read(s->pend_fd, &v, sizeof(v)) == sizeof(v))
		s->pend_set = want;
}

static int poll_all(struct kvf__rdma_stream *s)
{
	struct ibv_wc wc[POLL_BATCH];
	int n;

	do {
		n = s->dev->ops->poll_cq(s->cq, POLL_BATCH, wc);
		if (n < 0) {
			fail(s, IBV_WC_GENERAL_ERR);
			break;
		}
		for (int i = 0; i < n; i++)
			handle_wc(s, &wc[i]);
	} while (n == POLL_BATCH);
	update_pending(s);
	return s->err;
}

void kvf__rdma_stream_want_read(struct kvf__rdma_stream *s, bool want)
{
	s->want_read = want;
	update_pending(s);
}

int kvf__rdma_stream_progress(struct kvf__rdma_stream *s)
{
	const struct kvf__verbs_ops *ops = s->dev->ops;
	struct ibv_cq *cq;
	void *ctx;
	unsigned int events = 0;

	while (!ops->get_cq_event(s->ch, &cq, &ctx))
		events++;
	if (events) {
		ops->ack_cq_events(s->cq, events);
		s->armed = false;
	}
	/* Re-arm before polling: a completion landing in between still
	 * signals, so none is missed. */
	if (!s->armed && s->connected) {
		if (ops->req_notify_cq(s->cq, 0))
			return fail(s, IBV_WC_GENERAL_ERR);
		s->armed = true;
	}
	return poll_all(s);
}

/* ---- reading and writing ------------------------------------------- */

static int consume(struct kvf__rdma_stream *s, struct filled *f)
{
	s->rx_head = (s->rx_head + 1) % (s->cfg.recv_bufs + 1u);
	s->rx_count--;
	return post_recv(s, f->idx);
}

ssize_t kvf__rdma_stream_read(struct kvf__rdma_stream *s, void *buf, size_t len)
{
	uint8_t *dst = buf;
	size_t done = 0;

	if (poll_all(s))
		return KVF_ERR_IO;
	while (done < len && s->rx_count) {
		struct filled *f = &s->rx[s->rx_head];
		size_t n = f->len - f->off;

		if (f->len == EOF_MARK)
			break;
		if (n > len - done)
			n = len - done;
		memcpy(dst + done, recv_buf(s, f->idx) + f->off, n);
		f->off += (uint32_t)n;
		done += n;
		if (f->off == f->len && consume(s, f))
			return KVF_ERR_IO;
	}
	update_pending(s);
	if (done || !len)
		return (ssize_t)done;
	return s->eof && s->rx_count ? 0 : KVF_ERR_BUSY;
}

/* Copy what fits of @src into the open buffer, opening one if needed. */
static size_t fill_open(struct kvf__rdma_stream *s, const uint8_t *src,
			size_t len)
{
	size_t n;

	if (!s->open_fill) {
		if (!s->nr_free_tx)
			return 0;
		s->open_idx = s->free_tx[--s->nr_free_tx];
	}
	n = s->max_send - s->open_fill;
	if (n > len)
		n = len;
	memcpy(send_buf(s, s->open_idx) + s->open_fill, src, n);
	s->open_fill += (uint32_t)n;
	return n;
}

ssize_t kvf__rdma_stream_writev(struct kvf__rdma_stream *s,
				const struct iovec *iov, int iovcnt)
{
	size_t done = 0, want = 0, n;
	bool room = true;

	for (int i = 0; i < iovcnt; i++)
		want += iov[i].iov_len;
	if (!s->connected)
		return KVF_ERR_INVALID_ARGUMENT;
	if (poll_all(s) || s->eof || s->close_posted)
		return KVF_ERR_IO;
	for (int i = 0; i < iovcnt && room; i++) {
		const uint8_t *p = iov[i].iov_base;
		size_t left = iov[i].iov_len;

		while (left) {
			n = fill_open(s, p, left);
			if (!n) {
				room = false;
				break;
			}
			p += n;
			left -= n;
			done += n;
			if (s->open_fill == s->max_send &&
			    s->inflight < s->max_inflight && post_open(s))
				return KVF_ERR_IO;
			if (s->open_fill == s->max_send) {
				room = false;
				break;
			}
		}
	}
	if (s->open_fill && s->inflight < s->max_inflight && post_open(s))
		return KVF_ERR_IO;
	if (!done && want)
		return KVF_ERR_BUSY;
	return (ssize_t)done;
}

int kvf__rdma_stream_fd(const struct kvf__rdma_stream *s)
{
	return s->epfd;
}

uint32_t kvf__rdma_stream_qpn(const struct kvf__rdma_stream *s)
{
	return s->qp->qp_num;
}

int kvf__rdma_stream_wc_status(const struct kvf__rdma_stream *s)
{
	return s->wc_status;
}

/* ---- setup ---------------------------------------------------------- */

static bool cfg_ok(const struct kvf__rdma_cfg *c, uint64_t max_mr)
{
	uint64_t total = (uint64_t)c->buf_size * (c->recv_bufs + c->send_bufs);

	return c->buf_size && c->recv_bufs && c->send_bufs >= 2 &&
	       total <= max_mr;
}

static int to_init(struct kvf__rdma_stream *s)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.pkey_index = 0,
		.port_num = KVF_RDMA_PORT,
		.qp_access_flags = QP_ACCESS,
	};

	return s->dev->ops->modify_qp(s->qp, &a,
				      IBV_QP_STATE | IBV_QP_PKEY_INDEX |
					      IBV_QP_PORT |
					      IBV_QP_ACCESS_FLAGS);
}

static int create_qp(struct kvf__rdma_stream *s)
{
	struct ibv_qp_init_attr a = {
		.send_cq = s->cq,
		.recv_cq = s->cq,
		.cap =
			{
				.max_send_wr =
					s->cfg.send_bufs + 1u, /* + close */
				.max_recv_wr = s->cfg.recv_bufs,
				.max_send_sge = 1,
				.max_recv_sge = 1,
			},
		.qp_type = IBV_QPT_RC,
		.sq_sig_all = 1,
	};

	s->qp = s->dev->ops->create_qp(s->dev->pd, &a);
	return s->qp ? 0 : -1;
}

static int alloc_memory(struct kvf__rdma_stream *s)
{
	size_t nbufs = (size_t)s->cfg.recv_bufs + s->cfg.send_bufs;
	size_t bytes = nbufs * s->cfg.buf_size;

	s->rx = calloc(s->cfg.recv_bufs + 1u, sizeof(*s->rx));
	s->free_tx = calloc(s->cfg.send_bufs, sizeof(*s->free_tx));
	if (!s->rx || !s->free_tx ||
	    posix_memalign((void **)&s->region, 4096, bytes))
		return KVF_ERR_NO_MEMORY;
	for (uint32_t i = 0; i < s->cfg.send_bufs; i++)
		s->free_tx[i] = s->cfg.send_bufs - 1 - i;
	s->nr_free_tx = s->cfg.send_bufs;
	s->mr = s->dev->ops->reg_mr(s->dev->pd, s->region, bytes,
				    IBV_ACCESS_LOCAL_WRITE);
	return s->mr ? KVF_OK : KVF_ERR_IO;
}

/* Release in reverse order of creation; every pointer may be NULL. */
static void destroy(struct kvf__rdma_stream *s)
{
	const struct kvf__verbs_ops *ops = s->dev->ops;

	if (s->qp)
		ops->destroy_qp(s->qp);
	if (s->mr)
		ops->dereg_mr(s->mr);
	if (s->cq)
		ops->destroy_cq(s->cq);
	if (s->ch)
		ops->destroy_comp_channel(s->ch);
	if (s->epfd >= 0)
		close(s->epfd);
	if (s->pend_fd >= 0)
		close(s->pend_fd);
	free(s->region);
	free(s->free_tx);
	free(s->rx);
	free(s);
}

static int make_readiness(struct kvf__rdma_stream *s)
{
	struct epoll_event ev = {.events = EPOLLIN};

	s->pend_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	s->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (s->pend_fd < 0 || s->epfd < 0 ||
	    epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->ch->fd, &ev) ||
	    epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->pend_fd, &ev))
		return KVF_ERR_IO;
	return KVF_OK;
}

static int create_verbs(struct kvf__rdma_stream *s)
{
	const struct kvf__verbs_ops *ops = s->dev->ops;
	int cqe = s->cfg.recv_bufs + s->cfg.send_bufs + 1;
	int fl;

	s->ch = ops->create_comp_channel(s->dev->ctx);
	if (!s->ch)
		return KVF_ERR_IO;
	fl = fcntl(s->ch->fd, F_GETFL);
	if (fl < 0 || fcntl(s->ch->fd, F_SETFL, fl | O_NONBLOCK))
		return KVF_ERR_IO;
	s->cq = ops->create_cq(s->dev->ctx, cqe, s, s->ch, 0);
	if (!s->cq || create_qp(s) || to_init(s))
		return KVF_ERR_IO;
	return make_readiness(s);
}

int kvf__rdma_stream_create(struct kvf__rdma_dev *dev,
			    const struct kvf__rdma_cfg *cfg,
			    struct kvf__rdma_stream **out)
{
	struct kvf__rdma_stream *s;
	int ret;

	if (!dev || !out)
		return KVF_ERR_INVALID_ARGUMENT;
	s = calloc(1, sizeof(*s));
	if (!s)
		return KVF_ERR_NO_MEMORY;
	s->dev = dev;
	s->epfd = s->pend_fd = -1;
	s->want_read = true;
	if (cfg)
		s->cfg = *cfg;
	else
		kvf__rdma_cfg_default(&s->cfg);
	ret = KVF_ERR_INVALID_ARGUMENT;
	if (!cfg_ok(&s->cfg, dev->max_mr_size))
		goto err_destroy;
	s->max_inflight = s->cfg.send_bufs - 1u;
	ret = create_verbs(s);
	if (ret)
		goto err_destroy;
	ret = alloc_memory(s);
	if (ret)
		goto err_destroy;
	for (uint32_t i = 0; i < s->cfg.recv_bufs; i++)
		if (post_recv(s, i)) {
			ret = KVF_ERR_IO;
			goto err_destroy;
		}
	*out = s;
	return KVF_OK;

err_destroy:
	destroy(s);
	return ret;
}

void kvf__rdma_stream_local(const struct kvf__rdma_stream *s,
			    struct kvf__rdma_hs *hs)
{
	memcpy(hs->gid, s->dev->gid.raw, sizeof(hs->gid));
	hs->lid = s->dev->lid;
	hs->buffer_size = s->cfg.buf_size;
	hs->qp_num = s->qp->qp_num;
}

static int to_rtr(struct kvf__rdma_stream *s, const struct kvf__rdma_hs *p)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR,
		.path_mtu = s->dev->mtu,
		.dest_qp_num = p->qp_num,
		.rq_psn = QP_PSN,
		.max_dest_rd_atomic = 1,
		.min_rnr_timer = QP_MIN_RNR_TIMER,
		.ah_attr =
			{
				.is_global = 1,
				.dlid = p->lid,
				.sl = 0,
				.port_num = KVF_RDMA_PORT,
				.grh =
					{
						.sgid_index = s->dev->gid_index,
						.hop_limit = 1,
					},
			},
	};

	memcpy(a.ah_attr.grh.dgid.raw, p->gid, sizeof(p->gid));
	return s->dev->ops->modify_qp(
		s->qp, &a,
		IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
			IBV_QP_MIN_RNR_TIMER);
}

static int to_rts(struct kvf__rdma_stream *s)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTS,
		.sq_psn = QP_PSN,
		.timeout = QP_TIMEOUT,
		.retry_cnt = QP_RETRY_CNT,
		.rnr_retry = QP_RNR_RETRY,
		.max_rd_atomic = 1,
	};

	return s->dev->ops->modify_qp(
		s->qp, &a,
		IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
			IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			IBV_QP_MAX_QP_RD_ATOMIC);
}

int kvf__rdma_stream_connect(struct kvf__rdma_stream *s,
			     const struct kvf__rdma_hs *peer)
{
	if (s->connected)
		return KVF_ERR_INVALID_ARGUMENT;
	if (to_rtr(s, peer) || to_rts(s))
		return KVF_ERR_IO;
	s->max_send = peer->buffer_size < s->cfg.buf_size ? peer->buffer_size
							  : s->cfg.buf_size;
	if (s->dev->ops->req_notify_cq(s->cq, 0))
		return KVF_ERR_IO;
	s->armed = true;
	s->connected = true;
	return KVF_OK;
}

int kvf__rdma_accept(struct kvf__rdma_dev *dev, const struct kvf__rdma_cfg *cfg,
		     const uint8_t client[KVF_RDMA_HS_LEN],
		     uint8_t reply[KVF_RDMA_HS_LEN],
		     struct kvf__rdma_stream **out)
{
	struct kvf__rdma_hs peer, local;
	struct kvf__rdma_stream *s;
	int ret = kvf__rdma_hs_decode(client, &peer);

	if (ret)
		return ret;
	ret = kvf__rdma_stream_create(dev, cfg, &s);
	if (ret)
		return ret;
	ret = kvf__rdma_stream_connect(s, &peer);
	if (ret) {
		destroy(s);
		return ret;
	}
	kvf__rdma_stream_local(s, &local);
	kvf__rdma_hs_encode(&local, reply);
	*out = s;
	return KVF_OK;
}

/* ---- close ---------------------------------------------------------- */

/* Wait for the channel fd at most until @deadline; false when it passed. */
static bool wait_fd(int fd, uint64_t deadline)
{
	uint64_t now = kvf__now_ms();
	struct pollfd p = {.fd = fd, .events = POLLIN};

	if (now >= deadline)
		return false;
	poll(&p, 1, (int)(deadline - now));
	return true;
}

/* Flush queued bytes, then post the close SEND and wait for it. */
static void send_close(struct kvf__rdma_stream *s)
{
	uint64_t deadline = kvf__now_ms() + s->cfg.close_wait_ms;

	while (!s->err && !s->close_done) {
		/* The SQ has a slot for the close beside the data SENDs. */
		if (!s->close_posted && !s->open_fill) {
			if (post_send(s, WR_ID(WR_CLOSE, 0), 0, 0))
				break;
			s->close_posted = true;
		}
		if (s->open_fill && s->inflight < s->max_inflight &&
		    post_open(s))
			break;
		if (kvf__rdma_stream_progress(s) || s->close_done)
			break;
		if (!wait_fd(s->ch->fd, deadline))
			break;
	}
}

void kvf__rdma_stream_close(struct kvf__rdma_stream *s)
{
	struct ibv_qp_attr reset = {.qp_state = IBV_QPS_RESET};
	struct ibv_cq *cq;
	void *ctx;

	if (!s)
		return;
	if (s->connected && !s->eof && !s->err)
		send_close(s);
	/* RESET drops outstanding work without completions. */
	s->dev->ops->modify_qp(s->qp, &reset, IBV_QP_STATE);
	/* Take (and acknowledge) any event still in the channel, or
	 * destroying the CQ would wait for it. */
	while (!s->dev->ops->get_cq_event(s->ch, &cq, &ctx))
		s->dev->ops->ack_cq_events(s->cq, 1);
	destroy(s);
}

/* ---- blocking handshake over a TCP socket -------------------------- */

/* Move @len bytes over @fd (read or write) within @deadline. */
static int xfer(int fd, uint8_t *buf, size_t len, bool out, uint64_t deadline)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n =
			out ? send(fd, buf + done, len - done,
				   MSG_NOSIGNAL | MSG_DONTWAIT)
			    : recv(fd, buf + done, len - done, MSG_DONTWAIT);
		struct pollfd p = {.fd = fd, .events = out ? POLLOUT : POLLIN};
		uint64_t now;

		if (n > 0) {
			done += (size_t)n;
			continue;
		}
		if (n == 0 ||
		    (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
			return KVF_ERR_IO;
		now = kvf__now_ms();
		if (now >= deadline || poll(&p, 1, (int)(deadline - now)) < 0)
			return KVF_ERR_IO;
	}
	return KVF_OK;
}

int kvf__rdma_dial_fd(int fd, struct kvf__rdma_dev *dev,
		      const struct kvf__rdma_cfg *cfg, int timeout_ms,
		      struct kvf__rdma_stream **out)
{
	uint64_t deadline = kvf__now_ms() + (uint64_t)timeout_ms;
	uint8_t block[KVF_RDMA_HS_LEN];
	struct kvf__rdma_hs hs;
	struct kvf__rdma_stream *s;
	int ret = kvf__rdma_stream_create(dev, cfg, &s);

	if (ret)
		return ret;
	kvf__rdma_stream_local(s, &hs);
	kvf__rdma_hs_encode(&hs, block);
	ret = xfer(fd, block, sizeof(block), true, deadline);
	if (!ret)
		ret = xfer(fd, block, sizeof(block), false, deadline);
	if (!ret && kvf__rdma_hs_decode(block, &hs))
		ret = KVF_ERR_IO;
	if (!ret)
		ret = kvf__rdma_stream_connect(s, &hs);
	if (ret) {
		destroy(s);
		return ret;
	}
	*out = s;
	return KVF_OK;
}

int kvf__rdma_serve_fd(int fd, uint8_t first, struct kvf__rdma_dev *dev,
		       const struct kvf__rdma_cfg *cfg, int timeout_ms,
		       struct kvf__rdma_stream **out)
{
	uint64_t deadline = kvf__now_ms() + (uint64_t)timeout_ms;
	uint8_t block[KVF_RDMA_HS_LEN], reply[KVF_RDMA_HS_LEN];
	struct kvf__rdma_stream *s;
	int ret;

	block[0] = first;
	ret = xfer(fd, block + 1, sizeof(block) - 1, false, deadline);
	if (ret)
		return ret;
	ret = kvf__rdma_accept(dev, cfg, block, reply, &s);
	if (ret)
		return ret;
	ret = xfer(fd, reply, sizeof(reply), true, deadline);
	if (ret) {
		kvf__rdma_stream_close(s);
		return ret;
	}
	*out = s;
	return KVF_OK;
}
