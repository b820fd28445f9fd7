/* SPDX-License-Identifier: MIT */
/*
 * profiling/tier_pfm_none.c - the hardware tier when built without
 * libpfm4: always unavailable, with the reason, so the profiler moves on
 * to the software tier.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "profiling/tier.h"

int kvf__tier_pfm_events(struct kvf__ctr_set *set, char *why, size_t cap)
{
	memset(set, 0, sizeof(*set));
	snprintf(why, cap, "built without libpfm4 (configure --with-pfm)");
	return -ENOSYS;
}
