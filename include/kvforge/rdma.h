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
#include <stddef.h>

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
 * Growable: later releases only append fields. kvf_rdma_probe() passes the
 * caller's sizeof; the library fills what both know, zeroes the rest.
 */
struct kvf_rdma_info {
	/** Bytes the library filled: the smaller of the caller's and the
	 *  library's sizeof (a field at or past it reads zero). */
	size_t struct_size;
	bool available;
	int nr_devices;
	char device[64];
	char reason[160];
};

/* Smallest struct kvf_rdma_info accepted: this release's layout. */
#define KVF_RDMA_INFO_SIZE_MIN (offsetof(struct kvf_rdma_info, reason) + 160)

/**
 * kvf_rdma_probe_sized() - what kvf_rdma_probe() calls.
 * @info: receives @size bytes.
 * @size: sizeof(*@info) as the caller was compiled.
 * @log: as for kvf_rdma_probe().
 * @log_ctx: argument passed to @log.
 *
 * Context: any thread; may block briefly (opens device files).
 * Return: as kvf_rdma_probe(), and %KVF_ERR_INVALID_PARAMS (@size below
 * %KVF_RDMA_INFO_SIZE_MIN; @info untouched).
 */
enum kvf_status kvf_rdma_probe_sized(struct kvf_rdma_info *info, size_t size,
				     kvf_log_fn log, void *log_ctx);

/**
 * kvf_rdma_probe() - discover RDMA devices.
 * @info: filled on return (&kvf_rdma_info.struct_size included).
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
static inline enum kvf_status kvf_rdma_probe(struct kvf_rdma_info *info,
					     kvf_log_fn log, void *log_ctx)
{
	return kvf_rdma_probe_sized(info, sizeof(*info), log, log_ctx);
}

#ifdef __cplusplus
}
#endif
#endif /* KVFORGE_RDMA_H */
