/* SPDX-License-Identifier: MIT */
/*
 * rdma/report.c - kvf_rdma_probe(): run the backend, say once why not.
 *
 * The backend (verbs.c or none.c, chosen by the build) does the looking;
 * this file owns the public call and the once-per-process message, so a
 * master that probes on every mount does not flood its log.
 */
#include "config.h"

#include <string.h>

#include <kvforge/rdma.h>

#include "base/die.h"
#include "rdma/rdma.h"

static int said; /* atomic */

enum kvf_status kvf_rdma_probe(struct kvf_rdma_info *info, kvf_log_fn log,
			       void *log_ctx)
{
	if (!info)
		return KVF_ERR_INVALID_ARGUMENT;
	memset(info, 0, sizeof(*info));
	kvf__rdma_backend_probe(info);
	if (!info->available &&
	    !__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
		kvf__log(log, log_ctx, KVF_LOG_INFO, "rdma unavailable: %s",
			 info->reason);
	return KVF_OK;
}
