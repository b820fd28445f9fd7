/* SPDX-License-Identifier: MIT */
/*
 * profiling/tier_clock.c - the time source of every tier.
 *
 * rdtsc costs ~12 ns here against ~26 ns for CLOCK_MONOTONIC, and a batch
 * reads the clock once per stage, so the TSC is used whenever the CPU says
 * it is invariant (constant_tsc and nonstop_tsc in /proc/cpuinfo). Ticks
 * are accumulated raw and converted to nanoseconds only in snapshots, with
 * a frequency calibrated once against CLOCK_MONOTONIC over ~5 ms.
 * KVF_PROFILE_CLOCK=monotonic forces CLOCK_MONOTONIC.
 *
 * Concurrency: kvf__clock_init() runs under pthread_once; its results are
 * published to batch threads by the profiler's release store of "ready".
 */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profiling/tier.h"

bool kvf__clock_use_tsc;
static double clock_ghz = 1.0;
static pthread_once_t clock_once = PTHREAD_ONCE_INIT;

#ifdef KVF__HAVE_RDTSC
static bool cpu_has_invariant_tsc(void)
{
	char line[4096];
	bool constant = false, nonstop = false;
	FILE *f = fopen("/proc/cpuinfo", "r");

	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "flags", 5))
			continue;
		constant = strstr(line, " constant_tsc") != NULL;
		nonstop = strstr(line, " nonstop_tsc") != NULL;
		break;
	}
	fclose(f);
	return constant && nonstop;
}

/* Ticks per ns: the median of three 5/3 ms windows resists a preemption. */
static double calibrate_tsc(void)
{
	double r[3];

	for (int i = 0; i < 3; i++) {
		uint64_t n0 = kvf__clock_mono_ns(), t0 = __rdtsc(), n1;

		do
			n1 = kvf__clock_mono_ns();
		while (n1 - n0 < 5000000 / 3);
		r[i] = (double)(__rdtsc() - t0) / (double)(n1 - n0);
	}
	for (int pass = 0; pass < 2; pass++) {
		for (int i = 0; i + 1 < 3; i++) {
			if (r[i] > r[i + 1]) {
				double t = r[i];

				r[i] = r[i + 1];
				r[i + 1] = t;
			}
		}
	}
	return r[1];
}
#endif

static void clock_init_once(void)
{
#ifdef KVF__HAVE_RDTSC
	const char *force = getenv("KVF_PROFILE_CLOCK");

	if (force && !strcmp(force, "monotonic"))
		return;
	if (!cpu_has_invariant_tsc())
		return;
	clock_ghz = calibrate_tsc();
	kvf__clock_use_tsc = clock_ghz > 0.01;
	if (!kvf__clock_use_tsc)
		clock_ghz = 1.0;
#endif
}

void kvf__clock_init(void)
{
	pthread_once(&clock_once, clock_init_once);
}

const char *kvf__clock_name(void)
{
	return kvf__clock_use_tsc ? "rdtsc" : "CLOCK_MONOTONIC";
}

double kvf__clock_ghz(void)
{
	return clock_ghz;
}

uint64_t kvf__clock_to_ns(uint64_t ticks)
{
	if (!kvf__clock_use_tsc)
		return ticks;
	return (uint64_t)((double)ticks / clock_ghz + 0.5);
}
