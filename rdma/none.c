/* SPDX-License-Identifier: MIT */
/*
 * rdma/none.c - a build without the RDMA transport (no infiniband/verbs.h
 * at configure time): the probe says so, and the listener is never ready,
 * so a server started with RDMA requested serves TCP and closes RDMA
 * handshakes, after one log line.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include <kvforge/status.h>

#include "base/die.h"
#include "rdma/listener.h"
#include "rdma/rdma.h"

/* Never allocated: only ever NULL or the one static instance. */
struct kvf__rdma_listener {
	char unused;
};

static struct kvf__rdma_listener none;

void kvf__rdma_backend_probe(struct kvf_rdma_info *info)
{
	snprintf(info->reason, sizeof(info->reason),
		 "built without the RDMA transport (no infiniband/verbs.h at "
		 "configure time)");
}

int kvf__rdma_listener_open(const struct kvf__verbs_ops *ops, kvf_log_fn log,
			    void *log_ctx, struct kvf__rdma_listener **out)
{
	(void)ops;
	kvf__log(log, log_ctx, KVF_LOG_WARNING,
		 "RDMA requested but this build has no RDMA transport: "
		 "serving TCP only, closing RDMA handshakes");
	*out = &none;
	return KVF_OK;
}

void kvf__rdma_listener_close(struct kvf__rdma_listener *l)
{
	(void)l;
}

bool kvf__rdma_listener_ready(const struct kvf__rdma_listener *l)
{
	(void)l;
	return false;
}

int kvf__rdma_listener_accept(struct kvf__rdma_listener *l, int fd,
			      int timeout_ms, struct kvf__rdma_stream **out)
{
	(void)l;
	(void)timeout_ms;
	(void)out;
	kvf__rdma_refuse(fd);
	return KVF_ERR_UNAVAILABLE;
}

/* No stream can exist in this build. */
ssize_t kvf__rdma_recv(struct kvf__rdma_stream *s, void *buf, size_t len)
{
	(void)s;
	(void)buf;
	(void)len;
	errno = ENOTSUP;
	return -1;
}

ssize_t kvf__rdma_send(struct kvf__rdma_stream *s, const void *buf, size_t len)
{
	(void)s;
	(void)buf;
	(void)len;
	errno = ENOTSUP;
	return -1;
}

int kvf__rdma_fd(const struct kvf__rdma_stream *s)
{
	(void)s;
	return -1;
}

void kvf__rdma_want_read(struct kvf__rdma_stream *s, bool want)
{
	(void)s;
	(void)want;
}

void kvf__rdma_drop(struct kvf__rdma_stream *s)
{
	(void)s;
}
