/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_rdma.c - the RDMA probe. Without a usable device the
 * whole binary is skipped (exit 77) after checking the probe reports why.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include <kvforge/rdma.h>
#include <kvforge/status.h>

int main(void)
{
	struct kvf_rdma_info info;

	if (kvf_rdma_probe(NULL) != KVF_ERR_INVALID_ARGUMENT)
		return 1;
	if (kvf_rdma_probe(&info) != KVF_OK)
		return 1;
	if (!info.available) {
		/* Unavailable must say why, and probing again must work. */
		if (!info.reason[0] || kvf_rdma_probe(&info) != KVF_OK)
			return 1;
		printf("1..0 # SKIP no usable RDMA device: %s\n", info.reason);
		return 77;
	}
	if (!info.device[0] || info.nr_devices < 1 || info.reason[0])
		return 1;
	printf("rdma device %s\n", info.device);
	return 0;
}
