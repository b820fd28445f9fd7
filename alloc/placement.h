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
 * @rng: per-caller xorshift state (non-zero), advanced by the call.
 *
 * Returns KVF_OK (result filled), KVF_ERR_NOT_ENOUGH_SEGMENTS (fewer
 * segments than replicas), KVF_ERR_NO_SPACE (no eligible segment set fits;
 * nothing allocated), KVF_ERR_INVALID_PARAMS (fewer than replica_num
 * segments could hold @req->size even empty), KVF_ERR_NO_MEMORY.
 * Thread-safe; takes only the chosen allocators' locks.
 */
int kvf__place(enum kvf_placement_strategy strategy,
	       struct kvf__segalloc *const *segs, uint32_t nr_segs,
	       const struct kvf__place_request *req, uint64_t *rng,
	       struct kvf__place_result *res);

/*
 * kvf__place_rng_init() - a kvf__place() RNG state (never zero) for
 * stream @stream of @seed. The same seed and stream give the same
 * sequence; distinct streams of one seed are independent. Pure.
 */
uint64_t kvf__place_rng_init(uint64_t seed, uint64_t stream);

/* Free what kvf__place() allocated (e.g. when a later step failed). */
void kvf__place_undo(struct kvf__segalloc *const *segs,
		     const struct kvf__place_request *req,
		     const struct kvf__place_result *res);

#endif /* KVF_ALLOC_PLACEMENT_H */
