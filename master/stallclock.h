/* SPDX-License-Identifier: MIT */
/*
 * master/stallclock.h - the master's serving clock: monotonic time that
 * stops while the master itself is stalled.
 *
 * Client liveness is silence measured on this clock (the engine's client
 * TTL, the registry's TTL for clients without segments), so a client is
 * never expired because its Pings were waiting behind the master's own
 * work: while an event-loop thread has been busy with one wake-up for
 * longer than the stall threshold (a long request, a wait for the
 * registry's lock or the disk), the clock does not advance, and resumes
 * from where it stopped once every thread is back in epoll_wait().
 */
#ifndef KVF_SERVER_STALLCLOCK_H
#define KVF_SERVER_STALLCLOCK_H

#include <stdint.h>

/** Most threads that can report being busy. */
#define KVF_STALLCLOCK_BEACONS 256

struct kvf_stallclock;

/**
 * kvf_stallclock_new() - create a serving clock (running, not stalled).
 * @stall_ms: a thread busy with one wake-up for longer than this stalls
 *	the master (the clock stops); at least 1.
 * @out: receives the clock.
 *
 * Context: any thread. Return: %KVF_OK, %KVF_ERR_INVALID_ARGUMENT or
 * %KVF_ERR_NO_MEMORY.
 */
int kvf_stallclock_new(uint32_t stall_ms, struct kvf_stallclock **out);

/**
 * kvf_stallclock_start() - start the watchdog thread that notices stalls
 * (it wakes every few tens of milliseconds). Before it runs, the clock
 * never stops.
 * Context: any thread, once. Return: %KVF_OK or %KVF_ERR_NO_MEMORY.
 */
int kvf_stallclock_start(struct kvf_stallclock *sc);

/**
 * kvf_stallclock_free() - stop the watchdog and free the clock; nothing
 * may read it or report on it any more. NULL is ignored.
 */
void kvf_stallclock_free(struct kvf_stallclock *sc);

/**
 * kvf_stallclock_now() - the serving clock, in ns (a kvf_clock_fn; @ctx
 * is the struct kvf_stallclock).
 *
 * Never goes backwards within a thread. Context: any thread; lock-free
 * (one atomic load and a CLOCK_MONOTONIC read).
 */
uint64_t kvf_stallclock_now(void *ctx);

/**
 * kvf_stallclock_beacon() - a slot for one thread to report through.
 * Return: the slot (a thread-private word, idle), or NULL when all
 * %KVF_STALLCLOCK_BEACONS are taken (the thread then cannot stall the
 * clock). Give it back with kvf_stallclock_release(). Context: any
 * thread.
 */
uint64_t *kvf_stallclock_beacon(struct kvf_stallclock *sc);

/**
 * kvf_stallclock_release() - give back @beacon (NULL is ignored); the
 * thread stops reporting. Context: the beacon's thread, as it exits.
 */
void kvf_stallclock_release(struct kvf_stallclock *sc, uint64_t *beacon);

/**
 * kvf_stallclock_busy() / kvf_stallclock_idle() - the owning thread
 * starts handling a wake-up at monotonic time @now_ns / is waiting for
 * work again. NULL @beacon is ignored. Context: the beacon's thread.
 */
void kvf_stallclock_busy(uint64_t *beacon, uint64_t now_ns);
void kvf_stallclock_idle(uint64_t *beacon);

/**
 * kvf_stallclock_stalled_ns() - total time the clock stood still so far
 * (for metrics and tests). Context: any thread.
 */
uint64_t kvf_stallclock_stalled_ns(struct kvf_stallclock *sc);

#endif /* KVF_SERVER_STALLCLOCK_H */
