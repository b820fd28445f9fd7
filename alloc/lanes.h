/* SPDX-License-Identifier: MIT */
/*
 * alloc/lanes.h - placement lanes: concurrent placers on distinct segments.
 *
 * Best fit sends every placer to the same few tightest segments. When two
 * threads fill at once, each allocation then pulls that segment's
 * allocator tree (its lock, its summaries, the leaf being filled) over
 * from the other core: two put threads ran no faster than one. Lanes
 * split the segments among the threads placing right now: each active
 * thread gets a lane (its rank among them), and its placer looks at its
 * lane's segments first (struct kvf__placer). A thread alone has one
 * lane, every segment, so single-threaded placement is unchanged.
 *
 * A thread holds one of 64 bits from its first placement on and stamps
 * it at each batch; a bit not stamped for KVF__LANE_IDLE_NS is idle (it
 * counts for nobody's lanes) and is given back by whichever thread sees
 * it first; its thread, when it places again, finds the bit gone or
 * claimed by another thread and claims one anew. Lanes are a hint: a
 * race (two threads briefly on one bit) only costs locality.
 */
#ifndef KVF_ALLOC_LANES_H
#define KVF_ALLOC_LANES_H

#include <stdint.h>

#include "alloc/placement.h"

#define KVF__LANE_BITS 64
/*
 * A bit unstamped this long is idle: its thread stopped placing. Long
 * enough to outlast a putting thread's time off its CPU on a loaded
 * machine: at 10 ms, kvforge-bench --threads 2 at load 8-11 had one
 * thread's lanes collapse to every segment whenever the other was kept
 * off its CPU that long, and it filled the other's segments: a fifth of
 * each thread's removes then freed into segments the other was freeing
 * into, passing their allocators' trees between the CPUs (perf: the
 * removes' kvf__segalloc_free_many 5x one thread's samples per key).
 * A thread that did stop keeps its share of the segments for this
 * long; best fit still looks at every segment when its own share has
 * nothing that fits.
 */
#define KVF__LANE_IDLE_NS (UINT64_C(1000) * 1000 * 1000)

struct kvf__lanes {
	uint64_t held; /* bits owned by threads; atomic */
	/*
	 * Each bit's last stamp (ns) and the thread that claimed it last
	 * (an address unique to a live thread); atomic, a line's worth each.
	 */
	struct {
		uint64_t ns;
		uint64_t owner;
		uint64_t pad[6];
	} seen[KVF__LANE_BITS];
};

/*
 * kvf__lanes_join() - stamp the calling thread's bit in @l (claiming one
 * if it has none) and set @p's lane and lane count for a batch starting
 * at @now (monotonic ns): the bit's rank among the bits active at @now.
 * Gives back bits idle at @now. Lock-free, never blocks; @l zeroed is
 * a valid empty set.
 */
void kvf__lanes_join(struct kvf__lanes *l, uint64_t now, struct kvf__placer *p);

#endif /* KVF_ALLOC_LANES_H */
