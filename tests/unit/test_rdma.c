/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_rdma.c - the RDMA probe. Without a usable device the
 * whole binary is skipped (exit 77) after checking the probe reports why,
 * through the caller's log callback, once per process.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include <kvforge/rdma.h>
#include <kvforge/status.h>

struct heard {
	int lines;
	int level;
	char msg[256];
};

static void hear(void *ctx, int level, const char *msg)
{
	struct heard *h = ctx;

	h->lines++;
	h->level = level;
	snprintf(h->msg, sizeof(h->msg), "%s", msg);
}

int main(void)
{
	struct kvf_rdma_info info;
	struct heard h = {0};

	if (kvf_rdma_probe(NULL, hear, &h) != KVF_ERR_INVALID_ARGUMENT ||
	    h.lines)
		return 1;
	/* A struct smaller than this release's: refused before probing. */
	if (kvf_rdma_probe_sized(&info, KVF_RDMA_INFO_SIZE_MIN - 1, hear, &h) !=
		    KVF_ERR_INVALID_PARAMS ||
	    h.lines)
		return 1;
	if (kvf_rdma_probe(&info, hear, &h) != KVF_OK ||
	    info.struct_size != sizeof(info))
		return 1;
	if (!info.available) {
		/* Unavailable must say why, to the callback, not stderr. */
		if (!info.reason[0] || h.lines != 1 ||
		    h.level != KVF_LOG_INFO || !strstr(h.msg, info.reason))
			return 1;
		/* Probing again works and stays quiet. */
		if (kvf_rdma_probe(&info, hear, &h) != KVF_OK || h.lines != 1)
			return 1;
		printf("1..0 # SKIP no usable RDMA device: %s\n", info.reason);
		return 77;
	}
	if (!info.device[0] || info.nr_devices < 1 || info.reason[0] || h.lines)
		return 1;
	printf("rdma device %s\n", info.device);
	return 0;
}
