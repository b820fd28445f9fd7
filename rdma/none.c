/* SPDX-License-Identifier: MIT */
/*
 * rdma/none.c - the backend of a build without libibverbs.
 */
#include "config.h"

#include <stdio.h>

#include "rdma/rdma.h"

void kvf__rdma_backend_probe(struct kvf_rdma_info *info)
{
	snprintf(info->reason, sizeof(info->reason),
		 "built without the RDMA transport (no infiniband/verbs.h at configure time)");
}
