/* SPDX-License-Identifier: MIT */
/*
 * profiling/tier.h - counter tiers and the clock behind the profiler.
 *
 * A tier is a set of perf_event_attr (hardware: tier_pfm.c through
 * libpfm4, or tier_pfm_none.c when built without it; software:
 * tier_perf_sw.c) opened as one perf group per thread, so that a single
 * read() returns every counter. The clock (tier_clock.c) is always there.
 */
#ifndef KVF_PROFILING_TIER_H
#define KVF_PROFILING_TIER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "base/clock.h"
#include "profiling/stage.h"

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define KVF__HAVE_RDTSC 1
#endif

enum kvf__tier {
	KVF__TIER_HARDWARE,
	KVF__TIER_SOFTWARE,
	KVF__TIER_CLOCK,
	KVF__TIER_COUNT
};

/*
 * One perf event, as perf_event_attr fields. Kept neutral because
 * libpfm4 ships its own copy of <linux/perf_event.h>, which cannot be
 * mixed with the kernel's in one translation unit.
 */
struct kvf__ctr_event {
	uint32_t type;
	uint64_t config;
	uint64_t config1;
	uint64_t config2;
};

/* The events of one tier; fixed once discovered. */
struct kvf__ctr_set {
	unsigned n;
	const char *names[KVF__PROF_MAX_COUNTERS];
	struct kvf__ctr_event ev[KVF__PROF_MAX_COUNTERS];
	bool user_only; /* exclude_kernel had to be set (EACCES) */
};

/*
 * Fill @set with the hardware events (cycles, instructions, LLC and dTLB
 * misses). Return: 0, or a negative errno with @why filled.
 */
int kvf__tier_pfm_events(struct kvf__ctr_set *set, char *why, size_t cap);
/* Fill @set with task-clock, page-faults, context-switches. */
int kvf__tier_sw_events(struct kvf__ctr_set *set, char *why, size_t cap);

/*
 * Open @set once on the calling thread to see whether it works: retries
 * user-only on EACCES (updating @set) and drops members that cannot be
 * opened (noted in @why). The leader must open. Return: 0 or -errno.
 */
int kvf__ctr_probe(struct kvf__ctr_set *set, char *why, size_t cap);
/* Open @set as a group counting the calling thread. Return: leader fd. */
int kvf__ctr_open(const struct kvf__ctr_set *set, int *fds);
/* One read() of the group. Return: 0, or -1 if the group is unusable. */
int kvf__ctr_read(int leader, unsigned n, uint64_t *vals);
void kvf__ctr_close(int *fds, unsigned n);

/* Clock: rdtsc when the TSC is invariant, otherwise CLOCK_MONOTONIC. */
void kvf__clock_init(void);
const char *kvf__clock_name(void);
/* Ticks per nanosecond (1.0 for CLOCK_MONOTONIC). */
double kvf__clock_ghz(void);
uint64_t kvf__clock_to_ns(uint64_t ticks);

/* Written once by kvf__clock_init() before any profiler is ready. */
extern bool kvf__clock_use_tsc;

static inline uint64_t kvf__clock_mono_ns(void)
{
	return kvf__now_ns();
}

static inline uint64_t kvf__clock_ticks(void)
{
#ifdef KVF__HAVE_RDTSC
	if (__builtin_expect(kvf__clock_use_tsc, 1))
		return __rdtsc();
#endif
	return kvf__clock_mono_ns();
}

#endif /* KVF_PROFILING_TIER_H */
