/* SPDX-License-Identifier: MIT */
/*
 * base/lock.c - the contended path of the spin locks (base/lock.h).
 *
 * A waiter reads the word until it looks free (no exchange while it is
 * held, so the holder keeps its line), then tries to take it. The first
 * KVF__SPIN_LIMIT rounds pause; later ones give the CPU away, because the
 * holder may be a preempted thread that needs it.
 */
#include "config.h"

#include <sched.h>

#include <urcu/arch.h>

#include "base/lock.h"

void kvf__spin_wait(uint32_t *lock)
{
	unsigned int rounds = 0;

	do {
		while (__atomic_load_n(lock, __ATOMIC_RELAXED)) {
			if (rounds < KVF__SPIN_LIMIT) {
				rounds++;
				caa_cpu_relax(); /* PAUSE on x86 */
			} else {
				sched_yield();
			}
		}
	} while (!kvf__spin_trylock(lock));
}
