// SPDX-License-Identifier: MIT
/*
 * master/conn.c - framing, bounded buffers and flushing for one connection.
 *
 * Design notes.
 *
 * Input: bytes are read into one receive buffer; every complete request
 * in it is answered in place (the service decodes keys as views into
 * it), then the unanswered tail (at most one partial request) moves to
 * the front. An oversized request (--max_request_bytes) is refused from
 * its header, before anything is allocated for it; a large one grows the
 * buffer by doubling as its bytes arrive, so a header alone cannot make
 * the server allocate. After a large request the buffer shrinks back,
 * so an idle connection holds KVF_CONN_RBUF_MIN bytes.
 *
 * Output: every answer is encoded straight into one per-connection
 * buffer behind its header, so the answers to everything one read
 * brought in leave in a single send() (pipelined requests cost one
 * system call per burst, not per request); there is nothing separate to
 * gather, so a writev() would carry one iovec.
 *
 * Bounded memory: while more than KVF_CONN_OUT_HIGH bytes of answers are
 * unsent, no further request is answered and the connection is not read
 * (the loop drops EPOLLIN), so a client that pipelines without reading
 * its answers stalls itself, not the server. The output can exceed the
 * mark by one answer (a batch's, bounded by the engine's batch limit).
 *
 * Once everything queued has been sent, an output buffer grown past
 * KVF_CONN_OUT_KEEP (a large batch's answer: tens of MB for 65,536 keys)
 * is freed, so an idle connection does not keep its largest answer's
 * memory until it closes.
 *
 * Answers go out in request order; clients match them by seq_num anyway.
 *
 * Parking (HA leader with sync standbys): the answers of one wake-up's
 * burst that wait for the standbys' acknowledgement are parked in @out
 * (kvf_repl_hold_park(): the records went out, nothing waits) and the
 * thread goes back to its other connections and to this one's next
 * requests, whose answers queue behind them, so one acknowledgement
 * covers what a client pipelined meanwhile. Nothing from the oldest
 * parked burst on is sent until it is released (kvf_conn_unpark(), on
 * the waiter's eventfd), so a later answer, even one that waited for
 * nothing, never overtakes a parked one. A burst whose wait fails closes
 * the connection: it and everything after it are never sent. Parked
 * bytes count as unsent, so the output bound above holds them too.
 *
 * Closing after an answer (a refused oversized request): the client may
 * still be sending that request's body. Closing a TCP socket with unread
 * bytes sends a reset, which can reach the client before it has read the
 * answer (its send or receive then fails with ECONNRESET). So, as HTTP
 * servers do, the write side is shut down once the answer has left and
 * input is discarded until the client closes or DRAIN_NS passes.
 */
#include "config.h"

#include "master/conn.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ha/replication.h"
#include "rdma/listener.h"
#include "wire/frame.h"

/* How long a connection closing after an answer discards input. */
#define DRAIN_NS (2ULL * 1000000000ULL)

struct kvf_conn *kvf_conn_new(int fd, uint64_t now_ns)
{
	struct kvf_conn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->rbuf = malloc(KVF_CONN_RBUF_MIN);
	if (!c->rbuf) {
		free(c);
		return NULL;
	}
	c->rcap = KVF_CONN_RBUF_MIN;
	c->fd = fd;
	c->last_active_ns = now_ns;
	kvf_wbuf_init(&c->out);
	return c;
}

void kvf_conn_free(struct kvf_conn *c)
{
	if (!c)
		return;
	if (c->rdma)
		kvf__rdma_drop(c->rdma);
	else
		close(c->fd);
	kvf_wbuf_free(&c->out);
	free(c->rbuf);
	free(c);
}

static size_t unsent(const struct kvf_conn *c)
{
	return c->out.len - c->sent;
}

/* Output that may leave now: up to the oldest parked burst. */
static size_t sendable(const struct kvf_conn *c)
{
	return (c->nparked ? c->park[0].start : c->out.len) - c->sent;
}

bool kvf_conn_wants_read(const struct kvf_conn *c)
{
	return c->draining || (!c->closing && unsent(c) <= KVF_CONN_OUT_HIGH);
}

bool kvf_conn_wants_write(const struct kvf_conn *c)
{
	return sendable(c) > 0;
}

bool kvf_conn_expired(const struct kvf_conn *c, uint64_t now_ns,
		      uint64_t idle_ns, uint64_t partial_ns)
{
	if (c->draining && now_ns > c->drain_until_ns)
		return true;
	if (c->frame_start_ns && now_ns - c->frame_start_ns > partial_ns)
		return true;
	return now_ns - c->last_active_ns > idle_ns;
}

static int resize_rbuf(struct kvf_conn *c, size_t cap)
{
	uint8_t *p = realloc(c->rbuf, cap);

	if (!p)
		return -1;
	c->rbuf = p;
	c->rcap = cap;
	return 0;
}

/* Refuse a request larger than the limit, from its header alone. */
static void refuse_oversized(struct kvf_conn *c, const struct kvf_frame_req *h)
{
	kvf_frame_resp_error(&c->out, h->seq_num,
			     KVF_RPC_ERRC_MESSAGE_TOO_LARGE,
			     "the rpc message is too large");
	c->closing = true;
	c->rlen = 0;
	c->frame_start_ns = 0;
}

/*
 * Size the buffer for the partial request at its front (its length was
 * checked when its header was first seen), or shrink it back when only
 * a few bytes are left after a large request. A full buffer doubles, up
 * to the request's size: memory follows the bytes that actually arrived,
 * not what a header announces.
 */
static enum kvf_conn_rc fit_rbuf(struct kvf_conn *c)
{
	struct kvf_frame_req h;
	size_t total;

	if (c->rlen < KVF_FRAME_REQ_LEN) {
		if (c->rcap > KVF_CONN_RBUF_MIN)
			resize_rbuf(c, KVF_CONN_RBUF_MIN); /* else keep it */
		return KVF_CONN_KEEP;
	}
	if (c->rlen < c->rcap)
		return KVF_CONN_KEEP;
	if (kvf_frame_req_parse(c->rbuf, &h))
		return KVF_CONN_CLOSE;
	total = KVF_FRAME_REQ_LEN + (size_t)h.length + h.attach_length;
	if (total > c->rcap &&
	    resize_rbuf(c, total < 2 * c->rcap ? total : 2 * c->rcap))
		return KVF_CONN_CLOSE;
	return KVF_CONN_KEEP;
}

/*
 * Answer every complete request in the buffer (until the output backs
 * up), keep the partial tail. Returns KVF_CONN_CLOSE on a bad header.
 */
static enum kvf_conn_rc answer_buffered(struct kvf_conn *c,
					const struct kvf_conn_env *env,
					uint64_t now)
{
	size_t off = 0;

	while (!c->closing && unsent(c) <= KVF_CONN_OUT_HIGH) {
		struct kvf_frame_req h;
		uint64_t body, total;

		if (c->rlen - off < KVF_FRAME_REQ_LEN)
			break;
		if (kvf_frame_req_parse(c->rbuf + off, &h))
			return KVF_CONN_CLOSE;
		body = (uint64_t)h.length + h.attach_length;
		if (body > env->max_request_bytes) {
			refuse_oversized(c, &h);
			return KVF_CONN_KEEP;
		}
		total = KVF_FRAME_REQ_LEN + body;
		if (c->rlen - off < total)
			break; /* the rest has not arrived */
		kvf_service_handle(env->service, env->scratch, &h,
				   c->rbuf + off + KVF_FRAME_REQ_LEN, &c->out,
				   now, &c->hash_logged);
		if (c->out.failed)
			return KVF_CONN_CLOSE;
		off += total;
	}
	if (off) {
		memmove(c->rbuf, c->rbuf + off, c->rlen - off);
		c->rlen -= off;
		c->frame_start_ns = 0; /* progress: the tail starts now */
	}
	if (!c->rlen || c->closing)
		c->frame_start_ns = 0;
	else if (!c->frame_start_ns)
		c->frame_start_ns = now;
	return c->closing ? KVF_CONN_KEEP : fit_rbuf(c);
}

/* The transport's recv/send: the socket, or the RDMA stream. */
static ssize_t conn_recv(struct kvf_conn *c, void *buf, size_t len)
{
	return c->rdma ? kvf__rdma_recv(c->rdma, buf, len)
		       : recv(c->fd, buf, len, MSG_DONTWAIT);
}

static ssize_t conn_send(struct kvf_conn *c, const void *buf, size_t len)
{
	return c->rdma ? kvf__rdma_send(c->rdma, buf, len)
		       : send(c->fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/*
 * Parked answers stay in @out after what was sent: once the sent prefix
 * is as large as the rest, move the rest to the front (each byte moves
 * at most as often as it was preceded by as many sent ones).
 */
static void compact(struct kvf_conn *c)
{
	size_t s = c->sent;

	if (!s || s < c->out.len - s)
		return;
	memmove(c->out.data, c->out.data + s, c->out.len - s);
	c->out.len -= s;
	for (unsigned i = 0; i < c->nparked; i++) {
		c->park[i].start -= s;
		c->park[i].end -= s;
	}
	c->sent = 0;
}

/* Send queued answers until done, parked or the socket is full. */
static enum kvf_conn_rc flush(struct kvf_conn *c, uint64_t now)
{
	while (sendable(c)) {
		ssize_t n = conn_send(c, c->out.data + c->sent, sendable(c));

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return KVF_CONN_KEEP;
			return KVF_CONN_CLOSE;
		}
		c->sent += (size_t)n;
		c->last_active_ns = now;
	}
	if (unsent(c)) { /* parked */
		compact(c);
		return KVF_CONN_KEEP;
	}
	kvf_wbuf_reset(&c->out);
	if (c->out.cap > KVF_CONN_OUT_KEEP)
		kvf_wbuf_free(&c->out); /* a large answer's buffer */
	c->sent = 0;
	/* An answer that ends the connection has left: drain, then close. */
	if (!c->closing || c->draining)
		return KVF_CONN_KEEP;
	if (c->rdma || shutdown(c->fd, SHUT_WR) < 0)
		return KVF_CONN_CLOSE;
	c->draining = true;
	c->drain_until_ns = now + DRAIN_NS;
	return KVF_CONN_KEEP;
}

/* Discard what arrives while draining; close at EOF or the deadline. */
static enum kvf_conn_rc drain(struct kvf_conn *c, uint64_t now)
{
	if (now > c->drain_until_ns)
		return KVF_CONN_CLOSE;
	/* A few reads per wake-up, as for requests. */
	for (int round = 0; round < 8;) {
		ssize_t n = recv(c->fd, c->rbuf, c->rcap, MSG_DONTWAIT);

		if (n > 0) {
			round++;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return KVF_CONN_KEEP;
		return KVF_CONN_CLOSE;
	}
	return KVF_CONN_KEEP;
}

/* Read and answer, a few reads per wake-up (answers are not sent). */
static enum kvf_conn_rc read_and_answer(struct kvf_conn *c,
					const struct kvf_conn_env *env,
					uint64_t now)
{
	/* A few reads per wake-up, so one busy client cannot starve the
	 * thread's other connections. */
	for (int round = 0; round < 8 && kvf_conn_wants_read(c); round++) {
		ssize_t n;

		if (c->rlen == c->rcap && fit_rbuf(c))
			return KVF_CONN_CLOSE;
		if (c->rlen == c->rcap)
			break; /* complete requests wait for the output */
		n = conn_recv(c, c->rbuf + c->rlen, c->rcap - c->rlen);
		if (n == 0)
			return KVF_CONN_CLOSE;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			return KVF_CONN_CLOSE;
		}
		c->rlen += (size_t)n;
		c->last_active_ns = now;
		if (answer_buffered(c, env, now))
			return KVF_CONN_CLOSE;
	}
	return KVF_CONN_KEEP;
}

/* Release the oldest parked bursts the standbys now hold. */
static enum kvf_conn_rc release(struct kvf_conn *c,
				const struct kvf_conn_env *env)
{
	while (c->nparked) {
		int rc = kvf_repl_park_check(env->waiter, &c->park[0].pk);

		if (rc == KVF_REPL_PARKED)
			return KVF_CONN_KEEP;
		if (rc)
			return KVF_CONN_CLOSE;
		c->nparked--;
		memmove(&c->park[0], &c->park[1],
			c->nparked * sizeof(c->park[0]));
	}
	return KVF_CONN_KEEP;
}

/*
 * The answers of one wake-up, from @start on, are held
 * (kvf_repl_hold_begin()) for the sync standbys' acknowledgement of
 * every record they journaled: one wait for the burst, not one per
 * mutation. They are parked (see the design notes), or, without a
 * waiter, waited for here. If that wait fails none of them leaves (the
 * connection closes: nothing was acknowledged).
 */
static enum kvf_conn_rc settle(struct kvf_conn *c,
			       const struct kvf_conn_env *env, size_t start,
			       enum kvf_conn_rc rc)
{
	struct kvf_repl_park pk;
	struct kvf_conn_parked *last;

	if (rc == KVF_CONN_CLOSE) {
		kvf_repl_hold_drop();
		return rc;
	}
	if (kvf_repl_hold_park(env->waiter, &pk))
		return KVF_CONN_CLOSE;
	if (!pk.l)
		return rc; /* queued behind any parked burst */
	if (c->nparked == KVF_CONN_PARK_MAX) {
		/* the same leader: its sequences only grow */
		last = &c->park[c->nparked - 1];
		last->end = c->out.len;
		if (pk.seq > last->pk.seq)
			last->pk.seq = pk.seq;
	} else {
		c->park[c->nparked++] = (struct kvf_conn_parked){
			.start = start, .end = c->out.len, .pk = pk};
	}
	return release(c, env) ? KVF_CONN_CLOSE : rc;
}

enum kvf_conn_rc kvf_conn_readable(struct kvf_conn *c,
				   const struct kvf_conn_env *env)
{
	uint64_t now = kvf_service_now_ns();

	size_t start = c->out.len;

	if (c->draining)
		return drain(c, now);
	kvf_repl_hold_begin();
	if (settle(c, env, start, read_and_answer(c, env, now)))
		return KVF_CONN_CLOSE;
	return flush(c, now);
}

enum kvf_conn_rc kvf_conn_writable(struct kvf_conn *c,
				   const struct kvf_conn_env *env)
{
	uint64_t now = kvf_service_now_ns();

	if (flush(c, now))
		return KVF_CONN_CLOSE;
	/* Requests held back while the output was backed up. */
	if (!unsent(c) && c->rlen) {
		size_t start = c->out.len;

		kvf_repl_hold_begin();
		if (settle(c, env, start, answer_buffered(c, env, now)))
			return KVF_CONN_CLOSE;
		return flush(c, now);
	}
	return KVF_CONN_KEEP;
}

enum kvf_conn_rc kvf_conn_unpark(struct kvf_conn *c,
				 const struct kvf_conn_env *env)
{
	if (release(c, env))
		return KVF_CONN_CLOSE;
	return kvf_conn_writable(c, env);
}

void kvf_conn_finish_parked(struct kvf_conn *c)
{
	/* sequences only grow: the last burst's covers the others */
	if (!c->nparked || kvf_repl_park_wait(&c->park[c->nparked - 1].pk))
		return;
	c->nparked = 0;
	flush(c, kvf_service_now_ns());
}
