/* SPDX-License-Identifier: MIT */
/*
 * rdma/listener.c - RDMA on a TCP RPC port, for a server's event loop.
 *
 * Upstream's master shares one listener between both transports and
 * tells them apart by the first byte; a machine without a device still
 * serves TCP, and (unlike upstream, which crashes there) closes RDMA
 * handshakes. The device is opened once at start-up; its absence is
 * logged there, on one line, and refused handshakes are not logged again.
 *
 * The first byte is peeked, not read: on the TCP path it is the magic of
 * the request header the connection code parses; on the RDMA path the
 * handshake reads it with the rest of the block.
 *
 * The handshake runs on the loop thread with a short bound: the client
 * writes its 32 bytes at once, so they are normally all there, and our
 * reply fits any socket buffer.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <kvforge/status.h>

#include "base/die.h"
#include "rdma/listener.h"
#include "rdma/stream.h"

struct kvf__rdma_listener {
	struct kvf__rdma_dev *dev; /* NULL: no device, refuse */
	char why[160];
};

int kvf__rdma_listener_open(const struct kvf__verbs_ops *ops, kvf_log_fn log,
			    void *log_ctx, struct kvf__rdma_listener **out)
{
	struct kvf__rdma_listener *l = calloc(1, sizeof(*l));
	int ret;

	if (!l)
		return KVF_ERR_NO_MEMORY;
	if (!ops)
		ops = kvf__verbs_ibv(l->why, sizeof(l->why));
	ret = ops ? kvf__rdma_dev_open(ops, &l->dev, l->why, sizeof(l->why))
		  : KVF_ERR_UNAVAILABLE;
	if (ret == KVF_ERR_NO_MEMORY) {
		free(l);
		return ret;
	}
	if (ret)
		kvf__log(log, log_ctx, KVF_LOG_WARNING,
			 "RDMA requested but unavailable (%s): serving TCP "
			 "only, closing RDMA handshakes",
			 l->why);
	*out = l;
	return KVF_OK;
}

void kvf__rdma_listener_close(struct kvf__rdma_listener *l)
{
	if (!l)
		return;
	kvf__rdma_dev_close(l->dev);
	free(l);
}

bool kvf__rdma_listener_ready(const struct kvf__rdma_listener *l)
{
	return l && l->dev;
}

int kvf__rdma_listener_accept(struct kvf__rdma_listener *l, int fd,
			      int timeout_ms, struct kvf__rdma_stream **out)
{
	uint8_t first;

	if (!l->dev) {
		kvf__rdma_refuse(fd); /* said once, at open */
		return KVF_ERR_UNAVAILABLE;
	}
	if (recv(fd, &first, 1, MSG_DONTWAIT) != 1)
		return KVF_ERR_IO;
	return kvf__rdma_serve_fd(fd, first, l->dev, NULL, timeout_ms, out);
}

/* A stream result as recv(2)/send(2) would give it. */
static ssize_t as_errno(ssize_t r)
{
	if (r >= 0)
		return r;
	errno = r == KVF_ERR_BUSY ? EAGAIN : ECONNRESET;
	return -1;
}

ssize_t kvf__rdma_recv(struct kvf__rdma_stream *s, void *buf, size_t len)
{
	if (kvf__rdma_stream_progress(s))
		return as_errno(KVF_ERR_IO);
	return as_errno(kvf__rdma_stream_read(s, buf, len));
}

ssize_t kvf__rdma_send(struct kvf__rdma_stream *s, const void *buf, size_t len)
{
	struct iovec v = {(void *)buf, len};

	if (kvf__rdma_stream_progress(s))
		return as_errno(KVF_ERR_IO);
	return as_errno(kvf__rdma_stream_writev(s, &v, 1));
}

int kvf__rdma_fd(const struct kvf__rdma_stream *s)
{
	return kvf__rdma_stream_fd(s);
}

void kvf__rdma_want_read(struct kvf__rdma_stream *s, bool want)
{
	kvf__rdma_stream_want_read(s, want);
}

void kvf__rdma_drop(struct kvf__rdma_stream *s)
{
	kvf__rdma_stream_close(s);
}
