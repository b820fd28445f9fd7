/* SPDX-License-Identifier: MIT */
/*
 * rdma/device.c - pick the device, port and GID the transport uses, and
 * kvf_rdma_probe()'s discovery.
 *
 * The choice follows coro_rpc's ibverbs transport, because the GID a side
 * advertises must be the one its peer can reach: the first device that
 * opens and whose port 1 and GID table can be queried; port 1 only; the
 * first GID that is RoCE v2 with an IPv4-mapped address or of type IB,
 * else index 0. Path MTU is the port's own active MTU (never exchanged),
 * so both ends must agree by configuration.
 *
 * No RDMA at all is an ordinary outcome, not an error to shout about: a
 * kernel without RDMA support fails the device listing with ENOSYS, one
 * with it but no device returns an empty list. Both return
 * KVF_ERR_UNAVAILABLE with the reason; the caller logs it once.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvforge/status.h>

#include "rdma/rdma.h"

#define KVF_RDMA_PORT 1

static void say(char *why, size_t len, const char *fmt, const char *arg)
{
	if (why && len)
		snprintf(why, len, fmt, arg);
}

static bool ipv4_mapped(const union ibv_gid *g)
{
	static const uint8_t prefix[12] = {[10] = 0xff, [11] = 0xff};

	return !memcmp(g->raw, prefix, sizeof(prefix));
}

/* The "best" GID of port 1: see the design note. */
static int pick_gid(struct kvf__rdma_dev *d, int tbl_len)
{
	struct ibv_gid_entry e;

	for (int i = 0; i < tbl_len; i++) {
		if (d->ops->query_gid_ex(d->ctx, KVF_RDMA_PORT, (uint32_t)i,
					 &e))
			continue;
		if ((e.gid_type == IBV_GID_TYPE_ROCE_V2 &&
		     ipv4_mapped(&e.gid)) ||
		    e.gid_type == IBV_GID_TYPE_IB) {
			d->gid_index = (uint8_t)i;
			d->gid = e.gid;
			return 0;
		}
	}
	if (d->ops->query_gid_ex(d->ctx, KVF_RDMA_PORT, 0, &e))
		return -1;
	d->gid_index = 0;
	d->gid = e.gid;
	return 0;
}

/* Fill @d from an opened context; 0 when port 1 and a GID answer. */
static int describe(struct kvf__rdma_dev *d)
{
	struct ibv_port_attr port;
	struct ibv_device_attr attr;

	if (d->ops->query_port(d->ctx, KVF_RDMA_PORT, &port))
		return -1;
	if (pick_gid(d, port.gid_tbl_len))
		return -1;
	d->lid = port.lid;
	d->mtu = port.active_mtu;
	d->max_mr_size = UINT32_MAX;
	if (!d->ops->query_device(d->ctx, &attr) &&
	    attr.max_mr_size < d->max_mr_size)
		d->max_mr_size = attr.max_mr_size;
	return 0;
}

static int open_first(struct kvf__rdma_dev *d, struct ibv_device **list, int n)
{
	for (int i = 0; i < n; i++) {
		d->ctx = d->ops->open_device(list[i]);
		if (!d->ctx)
			continue;
		if (!describe(d)) {
			snprintf(d->name, sizeof(d->name), "%s",
				 d->ops->get_device_name(list[i]));
			return 0;
		}
		d->ops->close_device(d->ctx);
		d->ctx = NULL;
	}
	return -1;
}

int kvf__rdma_dev_open(const struct kvf__verbs_ops *ops,
		       struct kvf__rdma_dev **out, char *why, size_t len)
{
	struct kvf__rdma_dev *d;
	struct ibv_device **list;
	int n = 0, ret;

	errno = 0;
	list = ops->get_device_list(&n);
	if (!list) {
		say(why, len, "no RDMA support in this kernel (%s)",
		    strerror(errno ? errno : ENOSYS));
		return KVF_ERR_UNAVAILABLE;
	}
	d = calloc(1, sizeof(*d));
	if (!d) {
		ret = KVF_ERR_NO_MEMORY;
		goto err_list;
	}
	d->ops = ops;
	ret = KVF_ERR_UNAVAILABLE;
	if (open_first(d, list, n)) {
		say(why, len, "%s",
		    n ? "no RDMA device with a queryable port 1 and GID"
		      : "no RDMA device found");
		goto err_free;
	}
	d->pd = ops->alloc_pd(d->ctx);
	if (!d->pd) {
		say(why, len, "ibv_alloc_pd failed on %s", d->name);
		goto err_close;
	}
	ops->free_device_list(list);
	*out = d;
	return KVF_OK;

err_close:
	ops->close_device(d->ctx);
err_free:
	free(d);
err_list:
	ops->free_device_list(list);
	return ret;
}

void kvf__rdma_dev_close(struct kvf__rdma_dev *dev)
{
	if (!dev)
		return;
	dev->ops->dealloc_pd(dev->pd);
	dev->ops->close_device(dev->ctx);
	free(dev);
}

static bool has_active_port(const struct kvf__verbs_ops *ops,
			    struct ibv_device *dev)
{
	struct ibv_context *ctx = ops->open_device(dev);
	struct ibv_device_attr attr;
	bool active = false;

	if (!ctx)
		return false;
	if (!ops->query_device(ctx, &attr)) {
		for (uint8_t p = 1; p <= attr.phys_port_cnt && !active; p++) {
			struct ibv_port_attr port;

			active = !ops->query_port(ctx, p, &port) &&
				 port.state == IBV_PORT_ACTIVE;
		}
	}
	ops->close_device(ctx);
	return active;
}

void kvf__rdma_probe_ops(const struct kvf__verbs_ops *ops,
			 struct kvf_rdma_info *info)
{
	struct ibv_device **list;
	int n = 0;

	errno = 0;
	list = ops->get_device_list(&n);
	if (!list) {
		snprintf(info->reason, sizeof(info->reason),
			 "no RDMA support in this kernel (%s)",
			 strerror(errno ? errno : ENOSYS));
		return;
	}
	info->nr_devices = n;
	for (int i = 0; i < n && !info->available; i++) {
		if (!has_active_port(ops, list[i]))
			continue;
		info->available = true;
		snprintf(info->device, sizeof(info->device), "%s",
			 ops->get_device_name(list[i]));
	}
	ops->free_device_list(list);
	if (!info->available)
		snprintf(info->reason, sizeof(info->reason), "%s",
			 n ? "no RDMA device has an active port"
			   : "no RDMA device found");
}

void kvf__rdma_backend_probe(struct kvf_rdma_info *info)
{
	const struct kvf__verbs_ops *ops =
		kvf__verbs_ibv(info->reason, sizeof(info->reason));

	if (ops)
		kvf__rdma_probe_ops(ops, info);
}
