/* SPDX-License-Identifier: MIT */
/*
 * rdma/rdma.h - the backend a build links: verbs.c with libibverbs,
 * none.c without. Each fills @info; report.c adds the say-once.
 */
#ifndef KVF_RDMA_RDMA_H
#define KVF_RDMA_RDMA_H

#include <kvforge/rdma.h>

void kvf__rdma_backend_probe(struct kvf_rdma_info *info);

#endif /* KVF_RDMA_RDMA_H */
