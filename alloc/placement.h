/* SPDX-License-Identifier: MIT */
/*
 * alloc/placement.h - choosing segments for an object's replicas.
 *
 * Placement works on an array of allocators (the engine's current segment
 * snapshot, or a benchmark's), so it can be measured without an engine.
 * Replicas always land in distinct segments; preferred segments are tried
 * first, in order. On failure nothing stays allocated.
 */
#ifndef KVF_ALLOC_PLACEMENT_H
#define KVF_ALLOC_PLACEMENT_H

#include <stdint.h>

#include <kvforge/batch.h>
#include <kvforge/engine.h>

#include "alloc/segalloc.h"

struct kvf__place_request {
	uint64_t size;               /* bytes per replica, > 0 */
	uint32_t replica_num;        /* 1..KVF_MAX_REPLICAS */
	const uint32_t *preferred;   /* indices into segs[], may be NULL */
	uint32_t nr_preferred;
	uint64_t tag;                /* kept with each block (see segalloc.h) */
};

/*
 * One placer's state, kept by the caller across kvf__place() calls (the
 * engine keeps one per put batch): its RNG and its lane. With @lanes > 1,
 * best fit looks first at the segments of lane @lane only (index mod
 * @lanes), and at the others only when none of those fits. The engine
 * gives each thread putting at the same time its own lane
 * (alloc/lanes.h): best fit would otherwise send concurrent fills to the
 * same few tight segments, whose allocator trees then pass between the
 * cores on every allocation (two put threads ran no faster than one). A
 * lone placer has one lane: every segment.
 *
 * fragmentation_aware's choices are remembered per size and replica index
 * (the last KVF__PLACER_MEMO of them) and reused without its pass while
 * the segment still fits and no allocation of this placer elsewhere made
 * another segment the tighter fit. That is best fit's own answer only
 * while nothing was freed into @segs and @segs is the same array: a
 * caller that keeps a placer across frees or a changed segment table
 * calls kvf__placer_forget() (or starts a new placer, as the engine does
 * each batch). Changing @lane or @lanes forgets by itself.
 *
 * With @hint set (the struct kvf__park_hint the segments' allocators
 * write, kvf__segalloc_set_park_hint), fragmentation_aware first takes a
 * block of exactly the request's size parked in the lane's segment the
 * hint names, without its pass: an exact fit is a best fit.
 */
#define KVF__PLACER_MEMO 4

struct kvf__placer {
	uint64_t rng;   /* xorshift state, never zero (kvf__placer_init) */
	uint32_t lane;  /* < lanes */
	uint32_t lanes; /* 0 or 1: one lane, every segment */
	/*
	 * The segment best fit last chose for a size and replica index (size
	 * 0: unused), for the lane it chose in (memo_lane of memo_lanes).
	 */
	struct kvf__placer_memo {
		uint64_t size;
		uint32_t replica;
		uint32_t seg;
	} memo[KVF__PLACER_MEMO];
	uint32_t memo_next;
	uint32_t memo_lane, memo_lanes;
	/* Where the segments park blocks (NULL: no exact-fit fast path). */
	const struct kvf__park_hint *hint;
};

struct kvf__place_result {
	uint32_t seg[KVF_MAX_REPLICAS];    /* indices into segs[] */
	uint64_t offset[KVF_MAX_REPLICAS];
	uint32_t count;
	/* Every replica went to the strategy's first choice. */
	uint8_t first_choice;
	/* How many times the strategy fell back (e.g. to random). */
	uint32_t fallbacks;
};

/*
 * kvf__place() - allocate @req->replica_num replicas of @req->size bytes in
 * distinct segments among @segs[0..nr_segs).
 * @p: the caller's placer state (rng non-zero), advanced by the call.
 *
 * Returns KVF_OK (result filled), KVF_ERR_NOT_ENOUGH_SEGMENTS (fewer
 * segments than replicas), KVF_ERR_NO_SPACE (no eligible segment set fits;
 * nothing allocated), KVF_ERR_INVALID_PARAMS (fewer than replica_num
 * segments could hold @req->size even empty), KVF_ERR_NO_MEMORY.
 * Thread-safe; takes only the chosen allocators' locks.
 */
int kvf__place(enum kvf_placement_strategy strategy,
	       struct kvf__segalloc *const *segs, uint32_t nr_segs,
	       const struct kvf__place_request *req, struct kvf__placer *p,
	       struct kvf__place_result *res);

/*
 * kvf__place_run() - place up to @n objects of @size bytes, one replica
 * each, no preferred segments (object k tagged @tags[k]), as @n calls of
 * kvf__place() under @strategy would one after another, but with one
 * best-fit decision and one hold of the chosen allocator's lock for as
 * many of them as that segment holds; an exact fit's segment (blocks of
 * the size parked there) gives all it has parked under one hold. Only
 * fragmentation_aware is run this way (other strategies place nothing
 * here).
 * @seg, @offset: where object k went, for k below the result.
 *
 * Returns how many were placed, a prefix of the run: it stops where
 * kvf__place() would have to fall back (a busy allocator, no candidate
 * in the window, an allocation that failed), and leaves the rest, and
 * any error, to kvf__place(), one object at a time. What it placed is
 * the caller's to free (kvf__segalloc_free). Thread-safe as
 * kvf__place().
 */
uint32_t kvf__place_run(enum kvf_placement_strategy strategy,
			struct kvf__segalloc *const *segs, uint32_t nr_segs,
			uint64_t size, uint32_t n, const uint64_t *tags,
			struct kvf__placer *p, uint32_t *seg, uint64_t *offset);

/*
 * kvf__placer_init() - a fresh one-lane placer for stream @stream of
 * @seed: the same seed and stream give the same sequence of choices (for
 * one thread); distinct streams of one seed are independent. Pure.
 */
void kvf__placer_init(struct kvf__placer *p, uint64_t seed, uint64_t stream);

/*
 * kvf__placer_forget() - drop @p's remembered best fits (struct
 * kvf__placer's memo): call it after freeing into the segments @p places
 * in, when @p lives on. Pure.
 */
void kvf__placer_forget(struct kvf__placer *p);

/* Free what kvf__place() allocated (e.g. when a later step failed). */
void kvf__place_undo(struct kvf__segalloc *const *segs,
		     const struct kvf__place_request *req,
		     const struct kvf__place_result *res);

#endif /* KVF_ALLOC_PLACEMENT_H */
