/* SPDX-License-Identifier: MIT */
/*
 * alloc/lanes.c - placement lanes (see alloc/lanes.h).
 *
 * Each thread remembers which bit it holds in each of the last MY_SETS
 * sets it joined (thread locals; one set per engine), so a thread that
 * feeds two engines keeps one bit in each instead of claiming anew at
 * every switch; a bit it forgets goes idle and is given back.
 * The owner stamps its bit before it checks that it still holds it (the
 * bit held, and by it: the claimer's address is kept with the stamp), and
 * a claimer stamps a bit before its compare-and-swap takes it, so a bit
 * is never both held and stale for longer than a race window. Every word
 * is accessed atomically (relaxed: nothing else is published through
 * them).
 */
#include "config.h"

#include <stdbool.h>

#include "alloc/lanes.h"

/* Sets a thread remembers its bit in: a thread may feed a few engines. */
#define MY_SETS 4

/*
 * A new set takes the least recently joined slot: a closed engine's
 * slot is never joined again, so up to MY_SETS engines fed in turn keep
 * theirs. (Taking slots in turn evicted a live engine's when a new one
 * came while a closed one's slot lingered: the thread then claimed a
 * second bit there and, until the first went idle, placed as if two
 * threads were putting.)
 */
static __thread struct {
	const struct kvf__lanes *set;
	uint64_t bit;
	uint64_t joined; /* my_next when last joined */
} my_bits[MY_SETS];
static __thread uint64_t my_next;

static void stamp(struct kvf__lanes *l, uint64_t bit, uint64_t now)
{
	__atomic_store_n(&l->seen[__builtin_ctzll(bit)].ns, now,
			 __ATOMIC_RELAXED);
}

/* An address no other live thread has. */
static uint64_t me(void)
{
	return (uint64_t)(uintptr_t)&my_next;
}

static uint64_t owner_of(const struct kvf__lanes *l, uint64_t bit)
{
	return __atomic_load_n(&l->seen[__builtin_ctzll(bit)].owner,
			       __ATOMIC_RELAXED);
}

/* Take the lowest free bit; 0 when all 64 are held. */
static uint64_t claim(struct kvf__lanes *l, uint64_t now)
{
	uint64_t held = __atomic_load_n(&l->held, __ATOMIC_RELAXED), bit;

	do {
		if (!~held)
			return 0;
		bit = ~held & (held + 1);
		stamp(l, bit, now);
		__atomic_store_n(&l->seen[__builtin_ctzll(bit)].owner, me(),
				 __ATOMIC_RELAXED);
	} while (!__atomic_compare_exchange_n(&l->held, &held, held | bit, true,
					      __ATOMIC_RELAXED,
					      __ATOMIC_RELAXED));
	return bit;
}

/* The calling thread's entry for @l, made (replacing the oldest) if new. */
static uint64_t *my_entry(const struct kvf__lanes *l)
{
	unsigned k, lru = 0;

	my_next++;
	for (k = 0; k < MY_SETS; k++) {
		if (my_bits[k].set == l) {
			my_bits[k].joined = my_next;
			return &my_bits[k].bit;
		}
		if (my_bits[k].joined < my_bits[lru].joined)
			lru = k;
	}
	my_bits[lru].set = l;
	my_bits[lru].bit = 0;
	my_bits[lru].joined = my_next;
	return &my_bits[lru].bit;
}

/* The calling thread's bit in @l, stamped at @now; 0 if none is free. */
static uint64_t own_bit(struct kvf__lanes *l, uint64_t now)
{
	uint64_t *bit = my_entry(l);

	if (*bit) {
		stamp(l, *bit, now);
		/* Given back while this thread was idle, maybe taken since. */
		if ((__atomic_load_n(&l->held, __ATOMIC_RELAXED) & *bit) &&
		    owner_of(l, *bit) == me())
			return *bit;
	}
	*bit = claim(l, now);
	return *bit;
}

static bool idle(const struct kvf__lanes *l, uint64_t bit, uint64_t now)
{
	uint64_t seen = __atomic_load_n(&l->seen[__builtin_ctzll(bit)].ns,
					__ATOMIC_RELAXED);

	/* A stamp after @now (another thread's later clock) is active. */
	return seen < now && now - seen >= KVF__LANE_IDLE_NS;
}

/* The held bits active at @now; idle ones other than @mine given back. */
static uint64_t active_bits(struct kvf__lanes *l, uint64_t mine, uint64_t now)
{
	uint64_t held = __atomic_load_n(&l->held, __ATOMIC_RELAXED);
	uint64_t active = mine;

	for (uint64_t rest = held & ~mine; rest; rest &= rest - 1) {
		uint64_t bit = rest & -rest;

		if (!idle(l, bit, now))
			active |= bit;
		else
			__atomic_fetch_and(&l->held, ~bit, __ATOMIC_RELAXED);
	}
	return active;
}

void kvf__lanes_join(struct kvf__lanes *l, uint64_t now, struct kvf__placer *p)
{
	uint64_t mine = own_bit(l, now), active;

	p->lane = 0;
	p->lanes = 1;
	if (!mine)
		return;
	active = active_bits(l, mine, now);
	p->lane = (uint32_t)__builtin_popcountll(active & (mine - 1));
	p->lanes = (uint32_t)__builtin_popcountll(active);
}
