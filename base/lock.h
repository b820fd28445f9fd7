/* SPDX-License-Identifier: MIT */
/*
 * base/lock.h - mutexes for short critical sections.
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

#endif /* KVF_BASE_LOCK_H */
