/* SPDX-License-Identifier: MIT */
/*
 * kvforge/rdma.h - what RDMA this machine offers the store.
 *
 * The master never moves object bytes, but it hands out descriptors whose
 * transport endpoint a client must reach, and a master that runs beside
 * its clients reports whether RDMA is usable here. The probe runs at run
 * time (libibverbs when built with it), says why RDMA is unavailable, and
 * never fails: callers fall back to TCP endpoints.
 */
#ifndef KVFORGE_RDMA_H
#define KVFORGE_RDMA_H

#include <stdbool.h>

#include <kvforge/log.h>
#include <kvforge/status.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * struct kvf_rdma_info - result of kvf_rdma_probe().
 * @available: at least one RDMA device with an active port.
 * @nr_devices: RDMA devices found (active or not).
 * @device: name of the first device with an active port, or "".
 * @reason: why RDMA is unavailable ("" when available).
 *
 * Stable layout within a major version.
 */
struct kvf_rdma_info {
	bool available;
	int nr_devices;
	char device[64];
	char reason[160];
};

/**
 * kvf_rdma_probe() - discover RDMA devices.
 * @info: filled on return.
 * @log: where the reason RDMA is unavailable goes (%KVF_LOG_INFO); NULL:
 *       stderr ("kvforge: rdma unavailable: ...").
 * @log_ctx: argument passed to @log.
 *
 * Only the first call in the process that finds RDMA unavailable reports
 * it, so a master that probes on every mount does not flood its log;
 * @info->reason always says why.
 *
 * Context: any thread; may block briefly (opens device files).
 * Return: %KVF_OK (also when RDMA is unavailable: see @info->available),
 * %KVF_ERR_INVALID_ARGUMENT.
 */
enum kvf_status kvf_rdma_probe(struct kvf_rdma_info *info, kvf_log_fn log,
			       void *log_ctx);

#ifdef __cplusplus
}
#endif
#endif /* KVFORGE_RDMA_H */
