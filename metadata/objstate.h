/* SPDX-License-Identifier: MIT */
/*
 * metadata/objstate.h - the per-object state machine: every state, every
 * bit of the state word, the transitions and the writer lock. The one
 * definition; object records (metadata/object.h) carry the word, the
 * engine and the batch operations move it.
 *
 * The state word is a base state (the low byte, enum kvf__obj_state) plus
 * the LOCKED and HELD bits. A writer sets LOCKED with a CAS, decides, and
 * stores the next state. It never does I/O or waits on anything while
 * holding LOCKED, so readers that see COMPLETE|LOCKED spin for a few
 * instructions at most.
 *
 *   PROCESSING -end-> ENDING -journal ok-> COMPLETE   (fail: PROCESSING)
 *   PROCESSING -revoke-> DEAD;  PROCESSING -pre-empted-> REPLACED
 *   COMPLETE -remove-> REMOVING -journal ok-> DEAD    (fail: COMPLETE)
 *   PROCESSING|COMPLETE -replica dropped-> REPLACED (new record) or DEAD
 *
 * ENDING and REMOVING are owned by the thread that set them, which alone
 * moves them on (after the journal); other writers wait or give up, they
 * never hold a lock while waiting, so there is no deadlock.
 *
 * HELD (a bit beside the base state, set only on COMPLETE): a replica
 * drop (engine/replica_drop.c) replaced the record copy-on-write and has
 * not journaled the new replica set yet. Readers see the object as
 * complete; writers wait (kvf__obj_lock) until the drop journaled the
 * change and cleared the bit, so whatever they journal about the object
 * comes after it. The dropping thread clears its HELD records before it
 * waits for anything itself.
 *
 * Leases against removal (a Dekker pair, both sides seq_cst): a reader
 * raises the lease deadline (the owner word), then re-reads the state; a
 * remover sets LOCKED, then reads the lease. Either the remover sees the
 * new lease, or the reader sees the lock and waits for the remover's
 * verdict.
 */
#ifndef KVF_METADATA_OBJSTATE_H
#define KVF_METADATA_OBJSTATE_H

#include <sched.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/rcu.h"
#include "metadata/object.h"

/* Base states: the low byte of the state word. */
enum kvf__obj_state {
	KVF__OBJ_PROCESSING = 1, /* put started, invisible to readers */
	KVF__OBJ_COMPLETE = 2,   /* readable */
	KVF__OBJ_DEAD = 4,       /* removed from the index, freed after GP */
	KVF__OBJ_REPLACED = 5,   /* superseded by a newer record: look again */
	KVF__OBJ_ENDING = 6,     /* put_end journaling; owned by one thread */
	KVF__OBJ_REMOVING = 7,   /* remove journaling; owned by one thread */
};

/* Bits beside the base state; the whole word is 16 bits (object.h). */
#define KVF__OBJ_STATE_MASK 0xffu
#define KVF__OBJ_LOCKED 0x100u /* a writer decides; no I/O, no waits */
#define KVF__OBJ_HELD 0x200u   /* a replica drop not journaled yet */

static inline uint32_t kvf__obj_load(const struct kvf__object *o)
{
	return __atomic_load_n(&o->state, __ATOMIC_SEQ_CST);
}

static inline uint32_t kvf__obj_base(uint32_t s)
{
	return s & KVF__OBJ_STATE_MASK;
}

static inline void kvf__obj_pause(unsigned *spins)
{
	if (++*spins < 256)
		caa_cpu_relax();
	else
		sched_yield();
}

/*
 * Reader view: wait out a brief writer lock on a complete object and return
 * the base state. PROCESSING/ENDING/REMOVING/DEAD mean "not visible".
 */
static inline uint32_t kvf__obj_read_state(const struct kvf__object *o)
{
	unsigned spins = 0;
	uint32_t s = kvf__obj_load(o);

	while (s == (KVF__OBJ_COMPLETE | KVF__OBJ_LOCKED)) {
		kvf__obj_pause(&spins);
		s = kvf__obj_load(o);
	}
	return kvf__obj_base(s);
}

/*
 * Writer lock; waits out LOCKED and HELD. Returns true with *base = the
 * state it locked from (PROCESSING or COMPLETE). Returns false with
 * *base = the state that stopped it (DEAD, REPLACED, ENDING or REMOVING)
 * without locking.
 */
static inline bool kvf__obj_lock(struct kvf__object *o, uint32_t *base)
{
	unsigned spins = 0;
	uint32_t s = kvf__obj_load(o);
	uint16_t want;

	for (;;) {
		if (s & (KVF__OBJ_LOCKED | KVF__OBJ_HELD)) {
			kvf__obj_pause(&spins);
			s = kvf__obj_load(o);
			continue;
		}
		if (s != KVF__OBJ_PROCESSING && s != KVF__OBJ_COMPLETE) {
			*base = s;
			return false;
		}
		want = (uint16_t)s;
		if (__atomic_compare_exchange_n(&o->state, &want,
						(uint16_t)(s | KVF__OBJ_LOCKED),
						false, __ATOMIC_SEQ_CST,
						__ATOMIC_SEQ_CST)) {
			*base = s;
			return true;
		}
		s = want;
	}
}

/* Leave the lock (or an owned ENDING/REMOVING) in state @next. */
static inline void kvf__obj_set(struct kvf__object *o, uint32_t next)
{
	__atomic_store_n(&o->state, (uint16_t)next, __ATOMIC_SEQ_CST);
}

/*
 * kvf__obj_release() - kvf__obj_set() as a release store: a plain store
 * on x86 where the seq_cst one is a locked exchange, which waits for every
 * store before it to drain (perf, remove at 1M objects: ~12% of the
 * phase's samples sat on the two exchanges per removed record). For
 * put_end's PROCESSING|LOCKED -> ENDING -> COMPLETE (and back to
 * PROCESSING), and a remover's verdict (LOCKED -> REMOVING) and its
 * REMOVING -> DEAD once the record is out of the index: readers acquire
 * the record's contents (and, for DEAD, the unlink before it) with their
 * load of the state, and no Dekker pair involves these stores (the lease
 * pair is a reader's RMW of the lease against a remover's CAS of the
 * state, which stays seq_cst), so nothing needs them in the single total
 * order of seq_cst operations.
 */
static inline void kvf__obj_release(struct kvf__object *o, uint32_t next)
{
	__atomic_store_n(&o->state, (uint16_t)next, __ATOMIC_RELEASE);
}

/* The putting client of a processing record; read it under the lock. */
static inline uint64_t kvf__obj_client(const struct kvf__object *o)
{
	return __atomic_load_n(&o->owner, __ATOMIC_RELAXED);
}

/* Raise the lease to @deadline (never lowers it). Lock-free. */
static inline void kvf__obj_extend_lease(struct kvf__object *o,
					 uint64_t deadline)
{
	uint64_t cur = __atomic_load_n(&o->owner, __ATOMIC_RELAXED);

	while (cur < deadline &&
	       !__atomic_compare_exchange_n(&o->owner, &cur, deadline,
					    true, __ATOMIC_SEQ_CST,
					    __ATOMIC_RELAXED))
		;
	/*
	 * Nothing stored (the lease was already longer): still order the
	 * caller's state re-check after this point. An RMW rather than a
	 * fence, because ThreadSanitizer does not model fences.
	 */
	if (cur >= deadline)
		__atomic_fetch_add(&o->owner, 0, __ATOMIC_SEQ_CST);
}

/* The lease deadline: the owner word of a complete (or removing) record. */
static inline uint64_t kvf__obj_lease(const struct kvf__object *o)
{
	return __atomic_load_n(&o->owner, __ATOMIC_SEQ_CST);
}

#endif /* KVF_METADATA_OBJSTATE_H */
