/* SPDX-License-Identifier: MIT */
/*
 * rdma/report.c - kvf_rdma_probe(): run the backend, say once why not.
 *
 * The backend (verbs.c or none.c, chosen by the build) does the looking,
 * into this library's full struct; this file owns the public call, the
 * copy out to the caller's struct (whatever header it was built with) and
 * the once-per-process message, so a master that probes on every mount
 * does not flood its log.
 */
#include "config.h"

#include <string.h>

#include <kvforge/rdma.h>

#include "base/abi.h"
#include "base/die.h"
#include "rdma/rdma.h"

static int said; /* atomic */

enum kvf_status kvf_rdma_probe_sized(struct kvf_rdma_info *info, size_t size,
				     kvf_log_fn log, void *log_ctx)
{
	struct kvf_rdma_info all;

	if (!info)
		return KVF_ERR_INVALID_ARGUMENT;
	if (size < KVF_RDMA_INFO_SIZE_MIN)
		return KVF_ERR_INVALID_PARAMS;
	memset(&all, 0, sizeof(all));
	kvf__rdma_backend_probe(&all);
	if (!all.available &&
	    !__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
		kvf__log(log, log_ctx, KVF_LOG_INFO, "rdma unavailable: %s",
			 all.reason);
	kvf__abi_copy_out(info, size, &all, sizeof(all));
	return KVF_OK;
}
