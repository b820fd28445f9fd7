/* SPDX-License-Identifier: MIT */
/*
 * tools/bench/clock.c - the benchmark's clock, on its own so that pieces
 * of kvforge-bench tested alone (syncprobe.c) link without main.c.
 */
#include "config.h"

#include <errno.h>
#include <time.h>

#include "tools/bench/bench.h"

uint64_t bench_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

void bench_sleep_until(uint64_t ns)
{
	struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000u),
			       .tv_nsec = (long)(ns % 1000000000u) };

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) ==
	       EINTR)
		;
}
