/* SPDX-License-Identifier: MIT */
/*
 * rdma/verbs.c - the libibverbs backend: list devices, find an active port.
 *
 * Two ways to have no RDMA, both handled: a kernel without RDMA support
 * (ibv_get_device_list returns NULL, errno ENOSYS) and a kernel with it
 * but no device (an empty list). A device is usable when one of its ports
 * is ACTIVE.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <infiniband/verbs.h>

#include "rdma/rdma.h"

static bool has_active_port(struct ibv_device *dev)
{
	struct ibv_context *ctx = ibv_open_device(dev);
	struct ibv_device_attr attr;
	bool active = false;

	if (!ctx)
		return false;
	if (!ibv_query_device(ctx, &attr)) {
		for (uint8_t p = 1; p <= attr.phys_port_cnt && !active; p++) {
			struct ibv_port_attr port;

			active = !ibv_query_port(ctx, p, &port) &&
				 port.state == IBV_PORT_ACTIVE;
		}
	}
	ibv_close_device(ctx);
	return active;
}

void kvf__rdma_backend_probe(struct kvf_rdma_info *info)
{
	struct ibv_device **list;
	int n = 0;

	errno = 0;
	list = ibv_get_device_list(&n);
	if (!list) {
		snprintf(info->reason, sizeof(info->reason),
			 "no RDMA support in this kernel (%s)",
			 strerror(errno ? errno : ENOSYS));
		return;
	}
	info->nr_devices = n;
	for (int i = 0; i < n && !info->available; i++) {
		if (!has_active_port(list[i]))
			continue;
		info->available = true;
		snprintf(info->device, sizeof(info->device), "%s",
			 ibv_get_device_name(list[i]));
	}
	ibv_free_device_list(list);
	if (!info->available)
		snprintf(info->reason, sizeof(info->reason), "%s",
			 n ? "no RDMA device has an active port" :
			     "no RDMA device found");
}
