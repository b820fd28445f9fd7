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

#ifdef __cplusplus
extern "C" {
#endif

/**
 * struct kvf_rdma_info - result of kvf_rdma_probe().
 * @available: at least one RDMA device with an active port.
 * @nr_devices: RDMA devices found (active or not).
 * @device: name of the first device with an active port, or "".
 * @reason: why RDMA is unavailable ("" when available).
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
 *
 * The first call that finds RDMA unavailable prints the reason once on
 * stderr ("kvforge: rdma unavailable: ..."); later calls are silent.
 *
 * Context: any thread; may block briefly (opens device files).
 * Return: %KVF_OK (also when RDMA is unavailable: see @info->available),
 * %KVF_ERR_INVALID_ARGUMENT.
 */
int kvf_rdma_probe(struct kvf_rdma_info *info);

#ifdef __cplusplus
}
#endif
#endif /* KVFORGE_RDMA_H */
