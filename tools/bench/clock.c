/* SPDX-License-Identifier: MIT */
/*
 * tools/bench/clock.c - the benchmark's clock, on its own so that pieces
 * of kvforge-bench tested alone (syncprobe.c) link without main.c.
 */
#include "config.h"

#include <time.h>

#include "tools/bench/bench.h"

uint64_t bench_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}
