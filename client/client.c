// SPDX-License-Identifier: MIT
/*
 * client/client.c - a pipelined client connection to a Mooncake master.
 *
 * Design: the socket is non-blocking after a blocking connect. Requests are
 * encoded straight into one output buffer (header reserved, body encoded,
 * header patched) and written opportunistically; the receive buffer holds
 * whole frames and is compacted only when a frame does not fit behind the
 * consumed bytes, so a response body handed to the caller stays put until
 * the next receive. Outstanding requests live in a power-of-two table
 * indexed by seq_num: seq numbers are issued consecutively and at most
 * table-size are outstanding, so a slot is never reused while busy and a
 * lookup is one index plus a seq check.
 *
 * Transport: over RDMA (coro_rpc's ibverbs socket) the TCP connection only
 * carries the handshake and is closed; the same frames then flow through
 * the stream's recv/send (socket conventions, rdma/listener.h) and the
 * client waits on the stream's fd, which has no POLLOUT: room to write
 * comes back as a completion, so pending output is retried on every wake.
 */
#include "config.h"

#include "client/client.h"

#include "base/clock.h"

#include "rdma/listener.h"
#include "rdma/rdma.h"
#if HAVE_VERBS
#include "rdma/ops.h"
#include "rdma/stream.h"
#endif

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* Largest response accepted: a batch answer of a few thousand items. */
#define CLIENT_MAX_FRAME (64u << 20)
/* The whole RDMA handshake (the master bounds its side by 1 s). */
#define CLIENT_DIAL_MS 5000

struct pending {
	bool busy;
	uint8_t rpc;
	uint32_t seq;
	uint64_t tag;
	uint64_t sent_ns;
};

struct kvf_client {
	int fd; /* -1 over RDMA */
	struct kvf__rdma_stream *rdma;
	const struct kvf_abi *abi;
	uint32_t next_seq;
	unsigned outstanding;
	unsigned mask;
	struct pending *slots;
	struct kvf_wbuf out;
	size_t out_done; /* bytes of @out already written */
	uint8_t *in;
	size_t in_cap, in_head, in_tail;
	size_t consumed; /* frame returned last, dropped on the next recv */
};

uint64_t kvf_client_now_ns(void)
{
	return kvf__now_ns();
}

static int connect_to(const char *host, uint16_t port)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM};
	struct addrinfo *res, *ai;
	char portstr[8];
	int fd = -1, one = 1, err = -EHOSTUNREACH;

	snprintf(portstr, sizeof(portstr), "%u", port);
	if (getaddrinfo(host, portstr, &hints, &res))
		return -EHOSTUNREACH;
	for (ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC,
			    ai->ai_protocol);
		if (fd < 0) {
			err = -errno;
			continue;
		}
		if (!connect(fd, ai->ai_addr, ai->ai_addrlen))
			break;
		err = -errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0)
		return err;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)) {
		err = -errno;
		close(fd);
		return err;
	}
	return fd;
}

/* The RDMA handshake over the fresh socket, which is closed either way. */
static int dial_rdma(struct kvf_client *c, struct kvf__rdma_dev *dev)
{
#if HAVE_VERBS
	int rc = kvf__rdma_dial_fd(c->fd, dev, NULL, CLIENT_DIAL_MS, &c->rdma);

	close(c->fd);
	c->fd = -1;
	return rc ? -ECONNREFUSED : 0;
#else
	(void)dev;
	close(c->fd);
	c->fd = -1;
	return -ENOTSUP;
#endif
}

int kvf_client_connect_via(const char *host, uint16_t port,
			   const struct kvf_abi *abi, unsigned max_outstanding,
			   struct kvf__rdma_dev *dev, struct kvf_client **out)
{
	struct kvf_client *c;
	unsigned n = 1;
	int rc;

	while (n < max_outstanding && n < (1u << 20))
		n <<= 1;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->fd = -1;
	c->slots = calloc(n, sizeof(*c->slots));
	c->in_cap = 1 << 16;
	c->in = malloc(c->in_cap);
	rc = -ENOMEM;
	if (!c->slots || !c->in)
		goto err_free;
	c->mask = n - 1;
	c->abi = abi;
	kvf_wbuf_init(&c->out);
	rc = connect_to(host, port);
	if (rc < 0)
		goto err_free;
	c->fd = rc;
	if (dev) {
		rc = dial_rdma(c, dev);
		if (rc)
			goto err_free;
	}
	*out = c;
	return 0;

err_free:
	free(c->slots);
	free(c->in);
	free(c);
	return rc;
}

int kvf_client_connect(const char *host, uint16_t port,
		       const struct kvf_abi *abi, unsigned max_outstanding,
		       struct kvf_client **out)
{
	return kvf_client_connect_via(host, port, abi, max_outstanding, NULL,
				      out);
}

int kvf_client_rdma_open(struct kvf__rdma_dev **dev, char *why, size_t len)
{
#if HAVE_VERBS
	const struct kvf__verbs_ops *ops = kvf__verbs_ibv(why, len);

	if (!ops)
		return KVF_ERR_UNAVAILABLE;
	return kvf__rdma_dev_open(ops, dev, why, len);
#else
	*dev = NULL;
	snprintf(why, len, "built without the RDMA transport");
	return KVF_ERR_UNAVAILABLE;
#endif
}

void kvf_client_rdma_close(struct kvf__rdma_dev *dev)
{
#if HAVE_VERBS
	kvf__rdma_dev_close(dev);
#else
	(void)dev;
#endif
}

void kvf_client_close(struct kvf_client *c)
{
	if (!c)
		return;
	kvf__rdma_drop(c->rdma); /* NULL over TCP: ignored */
	if (c->fd >= 0)
		close(c->fd);
	kvf_wbuf_free(&c->out);
	free(c->slots);
	free(c->in);
	free(c);
}

const struct kvf_abi *kvf_client_abi(const struct kvf_client *c)
{
	return c->abi;
}

unsigned kvf_client_outstanding(const struct kvf_client *c)
{
	return c->outstanding;
}

int kvf_client_send(struct kvf_client *c, const struct kvf_msg_req *req,
		    uint64_t tag, uint32_t *seq)
{
	struct pending *p = &c->slots[c->next_seq & c->mask];
	size_t at;
	int rc;

	if ((unsigned)req->rpc >= KVF_RPC__COUNT)
		return KVF_WIRE_ERR_UNKNOWN_RPC;
	if (p->busy)
		return -EBUSY;
	at = kvf_frame_req_begin(&c->out);
	rc = kvf_msg_req_encode(&c->out, c->abi, req);
	if (rc) {
		c->out.len = at;
		c->out.failed = false;
		return rc == KVF_WIRE_ERR_NO_MEMORY ? -ENOMEM : rc;
	}
	kvf_frame_req_end(&c->out, at, c->next_seq,
			  c->abi->rpc[req->rpc].function_id);
	*p = (struct pending){.busy = true,
			      .rpc = (uint8_t)req->rpc,
			      .seq = c->next_seq,
			      .tag = tag,
			      .sent_ns = kvf_client_now_ns()};
	if (seq)
		*seq = c->next_seq;
	c->next_seq++;
	c->outstanding++;
	return 0;
}

/* The transport's send/recv/poll fd: the socket, or the RDMA stream. */
static ssize_t client_send(struct kvf_client *c, const void *buf, size_t len)
{
	return c->rdma ? kvf__rdma_send(c->rdma, buf, len)
		       : send(c->fd, buf, len, MSG_NOSIGNAL);
}

static ssize_t client_recv(struct kvf_client *c, void *buf, size_t len)
{
	return c->rdma ? kvf__rdma_recv(c->rdma, buf, len)
		       : recv(c->fd, buf, len, 0);
}

static struct pollfd client_pollfd(const struct kvf_client *c)
{
	struct pollfd pfd = {.events = POLLIN};

	if (c->rdma) {
		pfd.fd = kvf__rdma_fd(c->rdma);
		return pfd;
	}
	pfd.fd = c->fd;
	if (c->out_done < c->out.len)
		pfd.events |= POLLOUT;
	return pfd;
}

int kvf_client_flush(struct kvf_client *c)
{
	while (c->out_done < c->out.len) {
		ssize_t n = client_send(c, c->out.data + c->out_done,
					c->out.len - c->out_done);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return errno == EAGAIN ? 0 : -errno;
		}
		c->out_done += (size_t)n;
	}
	kvf_wbuf_reset(&c->out);
	c->out_done = 0;
	return 0;
}

/* A whole frame at in_head? Returns its total length or 0. */
static size_t frame_ready(struct kvf_client *c, struct kvf_frame_resp *h)
{
	size_t have = c->in_tail - c->in_head;
	uint64_t total;

	if (have < KVF_FRAME_RESP_LEN)
		return 0;
	kvf_frame_resp_parse(c->in + c->in_head, h);
	total = (uint64_t)KVF_FRAME_RESP_LEN + h->length + h->attach_length;
	if (total > CLIENT_MAX_FRAME)
		return SIZE_MAX;
	return have >= total ? (size_t)total : 0;
}

/* Room to read: compact, or grow to hold a frame of @need bytes. */
static int make_room(struct kvf_client *c, size_t need)
{
	size_t have = c->in_tail - c->in_head;

	if (c->in_head &&
	    (c->in_cap - c->in_tail < 4096 || c->in_cap - c->in_head < need)) {
		memmove(c->in, c->in + c->in_head, have);
		c->in_head = 0;
		c->in_tail = have;
	}
	if (c->in_cap < need || c->in_cap - c->in_tail < 1024) {
		size_t cap = c->in_cap * 2 > need ? c->in_cap * 2 : need;
		uint8_t *p = realloc(c->in, cap);

		if (!p)
			return -ENOMEM;
		c->in = p;
		c->in_cap = cap;
	}
	return 0;
}

/* Wait for input (or output room) until @deadline_ns (UINT64_MAX: none). */
static int wait_io(struct kvf_client *c, uint64_t deadline_ns)
{
	struct pollfd pfd = client_pollfd(c);
	struct timespec ts, *tsp = NULL;
	int n;

	if (deadline_ns != UINT64_MAX) {
		uint64_t now = kvf_client_now_ns();
		uint64_t left = deadline_ns > now ? deadline_ns - now : 0;

		ts.tv_sec = (time_t)(left / 1000000000u);
		ts.tv_nsec = (long)(left % 1000000000u);
		tsp = &ts;
	}
	n = ppoll(&pfd, 1, tsp, NULL);
	if (n < 0)
		return errno == EINTR ? 0 : -errno;
	return n ? 0 : -ETIMEDOUT;
}

static int read_some(struct kvf_client *c, size_t need)
{
	ssize_t n;
	int rc = make_room(c, need);

	if (rc)
		return rc;
	n = client_recv(c, c->in + c->in_tail, c->in_cap - c->in_tail);
	if (n == 0)
		return -ECONNRESET;
	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? -EAGAIN : -errno;
	c->in_tail += (size_t)n;
	return 0;
}

static int take_frame(struct kvf_client *c, const struct kvf_frame_resp *h,
		      size_t total, struct kvf_client_resp *out)
{
	struct pending *p = &c->slots[h->seq_num & c->mask];

	if (!p->busy || p->seq != h->seq_num)
		return -EPROTO;
	p->busy = false;
	c->outstanding--;
	*out = (struct kvf_client_resp){
		.rpc = (enum kvf_rpc)p->rpc,
		.tag = p->tag,
		.seq = p->seq,
		.err_code = h->err_code,
		.body = c->in + c->in_head + KVF_FRAME_RESP_LEN,
		.len = h->length,
		.sent_ns = p->sent_ns,
	};
	c->consumed = total;
	return 0;
}

int kvf_client_recv_by(struct kvf_client *c, uint64_t deadline_ns,
		       struct kvf_client_resp *out)
{
	struct kvf_frame_resp h;
	int rc;

	c->in_head += c->consumed;
	c->consumed = 0;
	if (c->in_head == c->in_tail)
		c->in_head = c->in_tail = 0;
	for (;;) {
		size_t total = frame_ready(c, &h);

		if (total == SIZE_MAX)
			return -EPROTO;
		if (total)
			return take_frame(c, &h, total, out);
		rc = kvf_client_flush(c);
		if (rc)
			return rc;
		rc = read_some(c, c->in_tail - c->in_head >= KVF_FRAME_RESP_LEN
					  ? KVF_FRAME_RESP_LEN + h.length
					  : KVF_FRAME_RESP_LEN);
		if (!rc)
			continue;
		if (rc != -EAGAIN)
			return rc;
		if (kvf_client_now_ns() >= deadline_ns)
			return -ETIMEDOUT;
		rc = wait_io(c, deadline_ns);
		if (rc)
			return rc;
	}
}

int kvf_client_recv(struct kvf_client *c, int timeout_ms,
		    struct kvf_client_resp *out)
{
	return kvf_client_recv_by(
		c,
		timeout_ms < 0
			? UINT64_MAX
			: kvf_client_now_ns() + (uint64_t)timeout_ms * 1000000u,
		out);
}

int kvf_client_call(struct kvf_client *c, const struct kvf_msg_req *req,
		    int timeout_ms, struct kvf_msg_resp *resp)
{
	struct kvf_client_resp r;
	int rc;

	if (c->outstanding)
		return -EBUSY;
	rc = kvf_client_send(c, req, 0, NULL);
	if (!rc)
		rc = kvf_client_recv(c, timeout_ms, &r);
	if (rc)
		return rc;
	if (r.err_code)
		return r.err_code;
	return kvf_msg_resp_decode(c->abi, req->rpc, r.body, r.len, resp);
}
