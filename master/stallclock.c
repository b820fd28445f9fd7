// SPDX-License-Identifier: MIT
/*
 * master/stallclock.c - serving time: monotonic time minus the master's
 * own stalls.
 *
 * Design notes.
 *
 * Why: the engine expires a client silent for the client TTL, and the
 * registry a segment-less client not pinging for as long. Silence is
 * only the client's fault while the master was reading its socket: if a
 * loop thread spends seconds on one request (or waits that long for the
 * registry's lock or the disk), the Pings queued behind it are not the
 * client's silence. Every time rule of the engine (client TTL, leases,
 * put timeouts, soft pins) reads this clock, so a stall stretches them
 * all by its length: leases then last longer in real time, which is the
 * safe direction for all of them.
 *
 * Beacons: each loop thread owns one word, the monotonic time at which
 * it started handling its current wake-up (0 while in epoll_wait()), and
 * gives it back (zeroed) when it exits, so an RPC server stopped and
 * started again (a master that loses and regains leadership) reuses the
 * slots and no exited thread can hold the clock. A watchdog thread reads
 * them every TICK_NS; the master is stalled while any thread's word is
 * older than the threshold.
 *
 * The clock: one atomic word. Running, it holds the offset subtracted
 * from CLOCK_MONOTONIC; stopped (top bit set), the value at which it
 * stopped. Only the watchdog writes it: when a stall begins it stores
 * the current value, frozen; when the stall ends it stores the offset
 * that makes the clock resume from that value. A reader racing with a
 * store can see the clock a little ahead of the frozen value (it read
 * the running word, then the time, after the watchdog read the time);
 * a per-thread high-water mark keeps each thread's readings from going
 * backwards, which is what the engine needs (deadlines compare against
 * readings of the same clock).
 *
 * Granularity: a stall is noticed one threshold plus at most one tick
 * after it began; that much of it still counts as serving time. A
 * process that is not scheduled at all (SIGSTOP, a suspended VM) stops
 * the watchdog too, and is not discounted.
 */
#include "config.h"

#include "master/stallclock.h"

#include "base/clock.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include <kvforge/status.h>

#define TICK_NS (20ULL * 1000000ULL)
#define FROZEN (1ULL << 63)

struct kvf_stallclock {
	uint64_t word; /* atomic: offset, or FROZEN | value */
	uint64_t stall_ns;
	uint64_t beacons[KVF_STALLCLOCK_BEACONS]; /* atomic */
	bool taken[KVF_STALLCLOCK_BEACONS];	  /* atomic */
	uint64_t stalled_total;			  /* atomic */
	pthread_t thread;
	bool started;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool stop;
};

static __thread uint64_t high_water;

uint64_t kvf_stallclock_now(void *ctx)
{
	struct kvf_stallclock *sc = ctx;
	uint64_t w = __atomic_load_n(&sc->word, __ATOMIC_ACQUIRE);
	uint64_t v = w & FROZEN ? w & ~FROZEN : kvf__now_ns() - w;

	if (v < high_water)
		return high_water;
	high_water = v;
	return v;
}

uint64_t *kvf_stallclock_beacon(struct kvf_stallclock *sc)
{
	for (unsigned i = 0; i < KVF_STALLCLOCK_BEACONS; i++) {
		bool free_slot = false;

		if (__atomic_compare_exchange_n(&sc->taken[i], &free_slot, true,
						false, __ATOMIC_ACQ_REL,
						__ATOMIC_RELAXED)) {
			__atomic_store_n(&sc->beacons[i], 0, __ATOMIC_RELAXED);
			return &sc->beacons[i];
		}
	}
	return NULL;
}

void kvf_stallclock_release(struct kvf_stallclock *sc, uint64_t *beacon)
{
	if (!beacon)
		return;
	__atomic_store_n(beacon, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&sc->taken[beacon - sc->beacons], false,
			 __ATOMIC_RELEASE);
}

void kvf_stallclock_busy(uint64_t *beacon, uint64_t now_ns)
{
	if (beacon)
		__atomic_store_n(beacon, now_ns ? now_ns : 1, __ATOMIC_RELAXED);
}

void kvf_stallclock_idle(uint64_t *beacon)
{
	if (beacon)
		__atomic_store_n(beacon, 0, __ATOMIC_RELAXED);
}

uint64_t kvf_stallclock_stalled_ns(struct kvf_stallclock *sc)
{
	return __atomic_load_n(&sc->stalled_total, __ATOMIC_RELAXED);
}

static bool stalled(struct kvf_stallclock *sc, uint64_t now)
{
	for (unsigned i = 0; i < KVF_STALLCLOCK_BEACONS; i++) {
		uint64_t b = __atomic_load_n(&sc->beacons[i], __ATOMIC_RELAXED);

		if (b && b < now && now - b > sc->stall_ns)
			return true;
	}
	return false;
}

/* One watchdog round: stop or restart the clock. */
static void tick(struct kvf_stallclock *sc, uint64_t *frozen_at)
{
	uint64_t now = kvf__now_ns();
	uint64_t w = __atomic_load_n(&sc->word, __ATOMIC_RELAXED);
	bool st = stalled(sc, now);

	if (st && !(w & FROZEN)) {
		__atomic_store_n(&sc->word, FROZEN | (now - w),
				 __ATOMIC_RELEASE);
		*frozen_at = now;
	} else if (!st && (w & FROZEN)) {
		__atomic_store_n(&sc->word, now - (w & ~FROZEN),
				 __ATOMIC_RELEASE);
		__atomic_fetch_add(&sc->stalled_total, now - *frozen_at,
				   __ATOMIC_RELAXED);
	}
}

static void *watchdog(void *arg)
{
	struct kvf_stallclock *sc = arg;
	uint64_t frozen_at = 0;

	pthread_mutex_lock(&sc->lock);
	while (!sc->stop) {
		struct timespec ts;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_nsec += (long)TICK_NS;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_nsec -= 1000000000L;
			ts.tv_sec++;
		}
		pthread_cond_timedwait(&sc->cond, &sc->lock, &ts);
		if (!sc->stop)
			tick(sc, &frozen_at);
	}
	pthread_mutex_unlock(&sc->lock);
	return NULL;
}

int kvf_stallclock_new(uint32_t stall_ms, struct kvf_stallclock **out)
{
	struct kvf_stallclock *sc;
	pthread_condattr_t attr;

	if (!stall_ms || !out)
		return KVF_ERR_INVALID_ARGUMENT;
	sc = calloc(1, sizeof(*sc));
	if (!sc)
		return KVF_ERR_NO_MEMORY;
	sc->stall_ns = (uint64_t)stall_ms * 1000000ULL;
	pthread_mutex_init(&sc->lock, NULL);
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&sc->cond, &attr);
	pthread_condattr_destroy(&attr);
	*out = sc;
	return KVF_OK;
}

int kvf_stallclock_start(struct kvf_stallclock *sc)
{
	if (pthread_create(&sc->thread, NULL, watchdog, sc))
		return KVF_ERR_NO_MEMORY;
	sc->started = true;
	return KVF_OK;
}

void kvf_stallclock_free(struct kvf_stallclock *sc)
{
	if (!sc)
		return;
	if (sc->started) {
		pthread_mutex_lock(&sc->lock);
		sc->stop = true;
		pthread_cond_signal(&sc->cond);
		pthread_mutex_unlock(&sc->lock);
		pthread_join(sc->thread, NULL);
	}
	pthread_cond_destroy(&sc->cond);
	pthread_mutex_destroy(&sc->lock);
	free(sc);
}
