/* SPDX-License-Identifier: MIT */
/*
 * rdma/verbs.c - the libibverbs backend, loaded at run time.
 *
 * The library is opened with dlopen("libibverbs.so.1") on first use, so a
 * machine without rdma-core runs everything else (the master serves TCP)
 * and nothing links against libibverbs. Exported functions are resolved
 * with dlsym; the data-path calls that verbs.h implements as inlines
 * (post_send/recv, poll_cq, req_notify_cq) go through the context's
 * provider ops, which the inlines only dereference, so they are used as
 * they are. ibv_query_port is a macro that prefers the extended context's
 * query_port and falls back to the exported (compat) symbol: the same
 * order is kept here.
 *
 * Two ways to have no RDMA, both handled by callers of the table: a
 * kernel without RDMA support (ibv_get_device_list returns NULL with
 * errno ENOSYS) and a kernel with it but no device (an empty list).
 */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "rdma/ops.h"

/*
 * Exported functions whose signature is the table's: their addresses go
 * straight into the table. The compat ibv_query_port and
 * _ibv_query_gid_ex are kept aside for the two wrappers below.
 */
#define SYM(field, name)                                                       \
	{                                                                      \
		offsetof(struct kvf__verbs_ops, field), name                   \
	}
static const struct {
	size_t offset;
	const char *name;
} direct[] = {
	SYM(get_device_list, "ibv_get_device_list"),
	SYM(free_device_list, "ibv_free_device_list"),
	SYM(get_device_name, "ibv_get_device_name"),
	SYM(open_device, "ibv_open_device"),
	SYM(close_device, "ibv_close_device"),
	SYM(query_device, "ibv_query_device"),
	SYM(alloc_pd, "ibv_alloc_pd"),
	SYM(dealloc_pd, "ibv_dealloc_pd"),
	SYM(reg_mr, "ibv_reg_mr"),
	SYM(dereg_mr, "ibv_dereg_mr"),
	SYM(create_comp_channel, "ibv_create_comp_channel"),
	SYM(destroy_comp_channel, "ibv_destroy_comp_channel"),
	SYM(create_cq, "ibv_create_cq"),
	SYM(destroy_cq, "ibv_destroy_cq"),
	SYM(create_qp, "ibv_create_qp"),
	SYM(modify_qp, "ibv_modify_qp"),
	SYM(destroy_qp, "ibv_destroy_qp"),
	SYM(get_cq_event, "ibv_get_cq_event"),
	SYM(ack_cq_events, "ibv_ack_cq_events"),
};
#undef SYM

static int (*compat_query_port)(struct ibv_context *, uint8_t, void *);
static int (*query_gid_ex_sym)(struct ibv_context *, uint32_t, uint32_t,
			       struct ibv_gid_entry *, uint32_t, size_t);

static int query_port_op(struct ibv_context *ctx, uint8_t port,
			 struct ibv_port_attr *attr)
{
	struct verbs_context *vctx = verbs_get_ctx_op(ctx, query_port);

	if (vctx)
		return vctx->query_port(ctx, port, attr, sizeof(*attr));
	/* The compat struct is a prefix of ibv_port_attr. */
	memset(attr, 0, sizeof(*attr));
	return compat_query_port(ctx, port, attr);
}

static int query_gid_ex_op(struct ibv_context *ctx, uint32_t port,
			   uint32_t index, struct ibv_gid_entry *e)
{
	return query_gid_ex_sym(ctx, port, index, e, 0, sizeof(*e));
}

static int post_send_op(struct ibv_qp *qp, struct ibv_send_wr *wr,
			struct ibv_send_wr **bad)
{
	return ibv_post_send(qp, wr, bad);
}

static int post_recv_op(struct ibv_qp *qp, struct ibv_recv_wr *wr,
			struct ibv_recv_wr **bad)
{
	return ibv_post_recv(qp, wr, bad);
}

static int poll_cq_op(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
	return ibv_poll_cq(cq, n, wc);
}

static int req_notify_cq_op(struct ibv_cq *cq, int solicited_only)
{
	return ibv_req_notify_cq(cq, solicited_only);
}

static struct kvf__verbs_ops ibv_ops = {
	.name = "libibverbs",
	.query_port = query_port_op,
	.query_gid_ex = query_gid_ex_op,
	.post_send = post_send_op,
	.post_recv = post_recv_op,
	.poll_cq = poll_cq_op,
	.req_notify_cq = req_notify_cq_op,
};

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static char load_error[160];
static bool loaded;

static void *resolve(void *h, const char *name)
{
	void *p = dlsym(h, name);

	if (!p)
		snprintf(load_error, sizeof(load_error),
			 "libibverbs.so.1 lacks %s", name);
	return p;
}

static void load(void)
{
	void *h = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);

	if (!h) {
		snprintf(load_error, sizeof(load_error),
			 "libibverbs.so.1 not loadable (%s)", dlerror());
		return;
	}
	for (size_t i = 0; i < sizeof(direct) / sizeof(*direct); i++) {
		void *p = resolve(h, direct[i].name);

		if (!p)
			goto err_close;
		memcpy((char *)&ibv_ops + direct[i].offset, &p, sizeof(p));
	}
	*(void **)&compat_query_port = resolve(h, "ibv_query_port");
	*(void **)&query_gid_ex_sym = resolve(h, "_ibv_query_gid_ex");
	if (!compat_query_port || !query_gid_ex_sym)
		goto err_close;
	loaded = true;
	return;

err_close:
	dlclose(h);
}

const struct kvf__verbs_ops *kvf__verbs_ibv(char *why, size_t len)
{
	pthread_once(&load_once, load);
	if (loaded)
		return &ibv_ops;
	if (why && len)
		snprintf(why, len, "%s", load_error);
	return NULL;
}
