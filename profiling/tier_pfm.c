/* SPDX-License-Identifier: MIT */
/*
 * profiling/tier_pfm.c - hardware counters named through libpfm4.
 *
 * libpfm4 turns portable event names into perf_event_attr encodings, so
 * the same names work on every CPU it knows. Encoding needs no PMU: on a
 * machine without one (this VM) "perf::cycles" encodes fine and only
 * perf_event_open() fails (ENOENT), which kvf__ctr_probe() reports. The
 * cycles event leads the group; the others are dropped individually if the
 * CPU lacks them. Built only with HAVE_PFM (tier_pfm_none.c otherwise).
 *
 * pfm_initialize() is idempotent and called under the profiler's mutex at
 * tier discovery only.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <perfmon/pfmlib_perf_event.h>

#include "profiling/tier.h"

static const struct {
	const char *label; /* name shown in tables */
	const char *pfm;   /* libpfm4 event string */
} hw_events[] = {
	{"cycles", "perf::cycles"},
	{"instructions", "perf::instructions"},
	{"llc-misses", "perf::PERF_COUNT_HW_CACHE_LL:READ:MISS"},
	{"dtlb-misses", "perf::PERF_COUNT_HW_CACHE_DTLB:READ:MISS"},
};

/* Encode @name; the exclude_* bits are left to kvf__ctr_probe(). */
static int encode(const char *name, struct kvf__ctr_event *ev)
{
	struct perf_event_attr attr;
	pfm_perf_encode_arg_t arg;
	int ret;

	memset(&attr, 0, sizeof(attr));
	memset(&arg, 0, sizeof(arg));
	arg.attr = &attr;
	arg.size = sizeof(arg);
	ret = pfm_get_os_event_encoding(name, PFM_PLM0 | PFM_PLM3,
					PFM_OS_PERF_EVENT_EXT, &arg);
	ev->type = attr.type;
	ev->config = attr.config;
	ev->config1 = attr.config1;
	ev->config2 = attr.config2;
	return ret;
}

int kvf__tier_pfm_events(struct kvf__ctr_set *set, char *why, size_t cap)
{
	int ret = pfm_initialize();

	memset(set, 0, sizeof(*set));
	why[0] = '\0';
	if (ret != PFM_SUCCESS) {
		snprintf(why, cap, "libpfm4: %s", pfm_strerror(ret));
		return -ENODEV;
	}
	for (size_t i = 0; i < sizeof(hw_events) / sizeof(hw_events[0]); i++) {
		ret = encode(hw_events[i].pfm, &set->ev[set->n]);
		if (ret != PFM_SUCCESS) {
			if (i == 0) {
				snprintf(why, cap, "%s: %s", hw_events[i].pfm,
					 pfm_strerror(ret));
				return -ENOENT;
			}
			continue; /* optional event unknown to this CPU */
		}
		set->names[set->n++] = hw_events[i].label;
	}
	return 0;
}
