/* SPDX-License-Identifier: MIT */
/*
 * base/clock.h - the library's one monotonic clock.
 *
 * Everything that measures a wait, stamps a put or arms a deadline reads
 * CLOCK_MONOTONIC through kvf__now_ns(), so stamps taken in different
 * modules compare, and condition variables that wait on them are set up
 * with pthread_condattr_setclock(CLOCK_MONOTONIC). A reboot resets this
 * clock; what outlives a process (journal stamps) is clamped on replay.
 * The profiler's cycle counter (profiling/tier.h) is a different thing: a
 * tick source for stage timing, calibrated against this clock.
 */
#ifndef KVF_BASE_CLOCK_H
#define KVF_BASE_CLOCK_H

#include <stdint.h>
#include <time.h>

#define KVF__NS_PER_SEC 1000000000ull
#define KVF__NS_PER_MS 1000000ull

/* CLOCK_MONOTONIC in nanoseconds. Never blocks; any thread. */
static inline uint64_t kvf__now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * KVF__NS_PER_SEC + (uint64_t)ts.tv_nsec;
}

/* CLOCK_MONOTONIC in milliseconds. */
static inline uint64_t kvf__now_ms(void)
{
	return kvf__now_ns() / KVF__NS_PER_MS;
}

/* @ns of CLOCK_MONOTONIC (kvf__now_ns()) as an absolute timespec. */
static inline void kvf__deadline_ts(uint64_t ns, struct timespec *ts)
{
	ts->tv_sec = (time_t)(ns / KVF__NS_PER_SEC);
	ts->tv_nsec = (long)(ns % KVF__NS_PER_SEC);
}

#endif /* KVF_BASE_CLOCK_H */
