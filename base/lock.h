/* SPDX-License-Identifier: MIT */
/*
 * base/lock.h - mutexes and spin locks for short critical sections.
 *
 * The allocator, index stripe and arena class locks are held for a few
 * hundred nanoseconds. With a default mutex, a thread that finds one taken
 * sleeps in futex_wait at once, and the holder pays a futex_wake system
 * call and the sleeper a context switch, each several microseconds: with
 * two remove threads freeing into the same segments, a third of their
 * time went there (perf, kvforge-bench --threads 2). An adaptive mutex
 * spins for a short, bounded while before it sleeps, which covers such
 * sections; it is still a pthread mutex (ThreadSanitizer understands it).
 */
#ifndef KVF_BASE_LOCK_H
#define KVF_BASE_LOCK_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

/* pthread_mutex_init() for a lock held only briefly; returns its result. */
static inline int kvf__mutex_init_short(pthread_mutex_t *m)
{
	pthread_mutexattr_t attr;
	int rc = pthread_mutexattr_init(&attr);

	if (rc)
		return rc;
	pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ADAPTIVE_NP);
	rc = pthread_mutex_init(m, &attr);
	pthread_mutexattr_destroy(&attr);
	return rc;
}

/*
 * Spin locks: one 32-bit word (0 free, 1 held), for critical sections of
 * a few dozen instructions on lines the holder already owns (the index's
 * stripes). What they save over a mutex is the unlock's locked
 * instruction: unlocking is a plain release store. On x86 a locked
 * instruction first waits for every earlier store to reach the cache,
 * and a stripe's unlock came right after an insert's slot and sequence
 * stores (perf, batch fill: ~88% of the mutex unlock's samples on its
 * locked decrement, 7.5% of the phase). The price is that no unlock wakes
 * anyone, so a waiter never sleeps in the kernel: it spins with PAUSE,
 * and after KVF__SPIN_LIMIT rounds yields the CPU between tries
 * (kvf__spin_wait()), so a holder preempted on a shared machine costs its
 * waiter yields, not a burnt time slice. ThreadSanitizer sees the
 * acquire exchange and the release store, so it orders the sections.
 */

/* Rounds a waiter spins before it starts yielding the CPU. */
#define KVF__SPIN_LIMIT 256

/**
 * kvf__spin_trylock() - take @lock if it is free.
 * @lock: a lock word (zero-initialised: free)
 *
 * Returns: true with @lock held. Never blocks.
 */
static inline bool kvf__spin_trylock(uint32_t *lock)
{
	return __atomic_exchange_n(lock, 1, __ATOMIC_ACQUIRE) == 0;
}

/* The contended path of kvf__spin_lock() (base/lock.c). */
void kvf__spin_wait(uint32_t *lock);

/**
 * kvf__spin_lock() - take @lock, waiting (spinning, then yielding) while
 * another thread holds it. Not recursive.
 * @lock: a lock word
 */
static inline void kvf__spin_lock(uint32_t *lock)
{
	if (__builtin_expect(!kvf__spin_trylock(lock), 0))
		kvf__spin_wait(lock);
}

/**
 * kvf__spin_unlock() - release @lock, held by the caller. A release
 * store; never blocks, wakes no one.
 * @lock: a lock word
 */
static inline void kvf__spin_unlock(uint32_t *lock)
{
	__atomic_store_n(lock, 0, __ATOMIC_RELEASE);
}

#endif /* KVF_BASE_LOCK_H */
