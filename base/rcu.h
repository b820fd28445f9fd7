/* SPDX-License-Identifier: MIT */
/*
 * base/rcu.h - the one place that names the liburcu flavour.
 *
 * KVForge uses urcu-memb: read lock/unlock cost ~1 ns, readers may block,
 * and no offline/online dance around blocking calls (qsbr would force one
 * around every fsync). Changing flavour means changing this file only.
 *
 * What may run inside a read-side section: lookups, claims of records,
 * index and allocator updates, short spin-waits on a record's writer lock
 * (metadata/objstate.h). Never blocking I/O, a journal append (it may wait
 * for an fsync), a sleep or a wait for a grace period: every grace period
 * (record and segment reclamation, unmounts) waits for the longest
 * section in progress. A batch journals its claimed records outside its
 * section (kvf__engine_journal_claimed); a walk over many records holds
 * one section per bounded window of them.
 *
 * ThreadSanitizer cannot see liburcu's grace periods or the ordering that
 * rcu_assign_pointer/rcu_dereference give, so publication points carry
 * kvf__tsan_release() before publishing and kvf__tsan_acquire() after
 * finding an object; both compile to nothing outside TSan builds.
 */
#ifndef KVF_BASE_RCU_H
#define KVF_BASE_RCU_H

#ifndef _LGPL_SOURCE
#define _LGPL_SOURCE
#endif
#include <urcu/urcu-memb.h>
#include <urcu/rculfhash.h>
#include <urcu/compiler.h>

#include "base/die.h"

#if defined(__SANITIZE_THREAD__)
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
#define kvf__tsan_acquire(p) __tsan_acquire((void *)(p))
#define kvf__tsan_release(p) __tsan_release((void *)(p))
#else
#define kvf__tsan_acquire(p) ((void)(p))
#define kvf__tsan_release(p) ((void)(p))
#endif

/**
 * kvf__rcu_ensure_registered() - make sure the calling thread is registered.
 *
 * A thread the host registered with urcu-memb itself is used as it is and
 * never unregistered by the library. Otherwise the first call registers
 * the thread (taking liburcu's registry lock) and installs a thread-exit
 * destructor that unregisters it; later calls cost one thread-local load.
 */
void kvf__rcu_ensure_registered(void);

/*
 * Grace periods for ThreadSanitizer: every read-side unlock releases one
 * token, and whatever runs after a grace period (a kvf__rcu_call callback,
 * code after kvf__rcu_synchronize) acquires it. That is exactly the
 * happens-before a grace period gives, so TSan neither reports the
 * reclamation as a race nor drowns in suppressed reports; a reader still
 * inside its section when memory is freed is still reported.
 */
extern char kvf__rcu_gp_token;

static inline void kvf__rcu_read_lock(void)
{
	urcu_memb_read_lock();
}

static inline void kvf__rcu_read_unlock(void)
{
	kvf__tsan_release(&kvf__rcu_gp_token);
	urcu_memb_read_unlock();
}

/* Call first in every callback given to kvf__rcu_call(). */
static inline void kvf__rcu_callback_enter(void)
{
	kvf__tsan_acquire(&kvf__rcu_gp_token);
}

/*
 * A wait for a grace period inside a read-side section never ends (or, for
 * a barrier, is refused by liburcu): the engine's own code never does it,
 * so one here comes from a host calling in from its own section.
 */
static inline void kvf__rcu_assert_outside_section(const char *what)
{
	if (__builtin_expect(urcu_memb_read_ongoing(), 0))
		kvf__die("%s inside an RCU read-side section: do not call the "
			 "engine while holding rcu_read_lock()",
			 what);
}

/* Wait for a grace period. Never call inside a read-side section. */
static inline void kvf__rcu_synchronize(void)
{
	kvf__rcu_assert_outside_section("grace period wait");
	urcu_memb_synchronize_rcu();
	kvf__tsan_acquire(&kvf__rcu_gp_token);
}

/* Run @fn(@head) after a grace period, on liburcu's call_rcu thread. */
static inline void kvf__rcu_call(struct rcu_head *head,
				 void (*fn)(struct rcu_head *head))
{
	urcu_memb_call_rcu(head, fn);
}

/* Wait until every callback queued so far by kvf__rcu_call() has run. */
static inline void kvf__rcu_barrier(void)
{
	kvf__rcu_assert_outside_section("call_rcu barrier");
	urcu_memb_barrier();
}

/*
 * Publish/read an RCU-protected pointer. Same ordering as
 * rcu_assign_pointer()/rcu_dereference() (release store, acquire load; on
 * x86 both are plain moves), but through compiler atomics that
 * ThreadSanitizer understands.
 */
#define kvf__rcu_publish(slot, val)                                            \
	do {                                                                   \
		kvf__tsan_release(val);                                        \
		__atomic_store_n(&(slot), (val), __ATOMIC_RELEASE);            \
	} while (0)
#define kvf__rcu_deref(slot) __atomic_load_n(&(slot), __ATOMIC_ACQUIRE)

static inline const struct rcu_flavor_struct *kvf__rcu_flavor(void)
{
	return &urcu_memb_flavor;
}

#endif /* KVF_BASE_RCU_H */
