/* SPDX-License-Identifier: MIT */
/*
 * alloc/placement.c - choosing segments for an object's replicas.
 *
 * Every strategy places replicas one at a time, each in a segment not yet
 * used by the object. Preferred segments are tried first, in order; they
 * are a hint, so one that cannot fit is skipped without counting against
 * the strategy. Then:
 *
 *  - RANDOM (upstream Mooncake): walk the segments from a random start and
 *    take the first whose allocator succeeds.
 *  - FREE_RATIO_FIRST: look at up to SAMPLE segments, try the one with the
 *    highest free ratio; if that allocation fails, walk like RANDOM. The
 *    free ratio says nothing about contiguity, which is its weakness.
 *  - FRAGMENTATION_AWARE: gather up to SAMPLE segments whose largest free
 *    region holds the request (a lock-free read of the allocator's
 *    published maximum), looking at no more than SCAN_LIMIT segments from
 *    a random start, and try the best fit: the smallest largest-region
 *    that still fits. Large regions elsewhere stay whole for large
 *    requests, so fragmentation does not turn into "no space". If the
 *    window holds no candidate, scan every segment (a fallback). Inside
 *    the chosen segment the allocator does address-ordered first fit, as
 *    for every strategy. If the chosen segment's allocator is busy
 *    (another thread is allocating there: best fit sends concurrent puts
 *    to the same tightest segment), the best fit of a fresh window
 *    without it is taken instead (place_contended()). A placer with
 *    lanes (struct kvf__placer) looks at its own lane's segments first
 *    and at all of them only when none of its own fits.
 *    Best fit for every request matters: sending
 *    requests that fit a random segment's largest region 2-16 times over
 *    to that segment instead (cheaper: no pass) gives the utilisation at
 *    first failure of random (wide mix 0.90 against 0.97, bimodal 0.975
 *    against 0.9997): small requests must fill the tight segments too.
 *
 * Cost per replica is bounded by SCAN_LIMIT reads of published atomics plus
 * one allocation, whatever the number of segments; the full scan runs only
 * when the window holds nothing that fits. Published maxima may be stale:
 * if the chosen allocation fails, the fallback walks every segment that
 * might fit, so NO_SPACE means no segment could fit.
 *
 * The pass is branch-free (a mask per segment, selects for the best; the
 * only data-dependent exit is the SAMPLE-th candidate): ~18 instructions
 * per segment looked at. A vector form (AVX2, with or without gathers)
 * had fewer instructions and was slower: the allocation waits for the
 * pass, and its chain of vector steps is longer (docs/placement.md).
 *
 * A placer remembers fragmentation_aware's last choices per size and
 * replica index (struct kvf__placer's memo) and goes straight back while
 * the segment still fits: that segment only shrank, so it is still the
 * tightest, unless the placer's own allocations elsewhere made another
 * segment tighter for that size (memo_after_alloc() drops it then) or
 * something was freed (the caller forgets, or starts a new placer).
 * Skipping the pass took 8% off an engine put (docs/placement.md).
 *
 * A replica that did not land on its strategy's first choice counts one
 * fallback. On any failure everything allocated so far is freed.
 * Thread-safe: only the allocators' own locks are taken, one at a time.
 */
#include "config.h"

#include <kvforge/status.h>

#include "alloc/placement.h"
#include "base/xorshift.h"

/* Segments examined per replica by the sampling strategies. */
#define SAMPLE 8

static uint64_t rng_init(uint64_t seed, uint64_t stream)
{
	/* splitmix64's finaliser: neighbouring streams start far apart. */
	uint64_t z = seed + (stream + 1) * 0x9e3779b97f4a7c15ULL;

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	z ^= z >> 31;
	return z ? z : 0x9e3779b97f4a7c15ULL; /* xorshift's one dead state */
}

void kvf__placer_init(struct kvf__placer *p, uint64_t seed, uint64_t stream)
{
	*p = (struct kvf__placer){ .rng = rng_init(seed, stream) };
}

void kvf__placer_forget(struct kvf__placer *p)
{
	for (uint32_t k = 0; k < KVF__PLACER_MEMO; k++)
		p->memo[k].size = 0;
}

/* Uniform-enough index in [0, n) from 32 random bits (multiply-shift). */
static inline uint32_t pick(uint32_t bits, uint32_t n)
{
	return (uint32_t)(((uint64_t)bits * n) >> 32);
}

/* A random index in [0, @n) from the placer's stream. */
static inline uint32_t pick_random(uint64_t *rng, uint32_t n)
{
	return pick((uint32_t)(kvf__xorshift64s(rng) >> 32), n);
}

/* Segments first, first + step, ... (< nr): count of them. */
struct lane {
	uint32_t first, step, count;
};

struct ctx {
	struct kvf__segalloc *const *segs;
	uint32_t nr;
	uint64_t size;
	uint64_t *rng;
	struct lane lane; /* the placer's lane (struct kvf__placer) */
	struct kvf__place_result *res;
	uint64_t tag;
	struct kvf__placer *placer;
};

static bool taken(const struct ctx *c, uint32_t i)
{
	for (uint32_t k = 0; k < c->res->count; k++)
		if (c->res->seg[k] == i)
			return true;
	return false;
}

/* Usable for the next replica: mounted and not used by this object. */
static inline bool usable(const struct ctx *c, uint32_t i)
{
	return c->segs[i] && !taken(c, i);
}

/*
 * Segment @i just shrank: a remembered best fit elsewhere stays the best
 * fit for its size unless @i's largest region now holds that size and is
 * tighter than the remembered segment's.
 */
static inline __attribute__((always_inline)) void
memo_after_alloc(struct ctx *c, uint32_t i)
{
	struct kvf__placer *p = c->placer;
	uint64_t largest = kvf__segalloc_largest_fast(c->segs[i]);

	for (uint32_t k = 0; k < KVF__PLACER_MEMO; k++) {
		struct kvf__placer_memo *m = &p->memo[k];

		if (!m->size || m->seg == i)
			continue;
		if (m->seg >= c->nr || !c->segs[m->seg] ||
		    (largest >= m->size &&
		     largest < kvf__segalloc_largest_fast(c->segs[m->seg])))
			m->size = 0;
	}
}

/* The next replica is at @off in segment @i (inline: random's hot path). */
static inline __attribute__((always_inline)) void
add_replica(struct ctx *c, uint32_t i, uint64_t off)
{
	c->res->seg[c->res->count] = i;
	c->res->offset[c->res->count] = off;
	c->res->count++;
	memo_after_alloc(c, i);
}

/*
 * Allocate in segment @i; on success record the replica. Without @wait,
 * KVF_ERR_BUSY at once if another thread holds @i's allocator.
 */
static int alloc_in(struct ctx *c, uint32_t i, bool wait)
{
	uint64_t off;
	int rc = wait ? kvf__segalloc_alloc_tagged(c->segs[i], c->size,
						   c->tag, &off) :
			kvf__segalloc_try_alloc_tagged(c->segs[i], c->size,
						       c->tag, &off);

	if (rc == KVF_OK)
		add_replica(c, i, off);
	return rc;
}

static int try_seg(struct ctx *c, uint32_t i)
{
	return alloc_in(c, i, true);
}

/*
 * Walk every segment from a random start; with @check_fit skip those whose
 * published maximum already says no. Returns KVF_OK, KVF_ERR_NO_SPACE or
 * an allocator error. *@attempts counts failed allocations.
 */
static int walk(struct ctx *c, bool check_fit, uint32_t *attempts)
{
	uint32_t i = pick_random(c->rng, c->nr);

	for (uint32_t k = 0; k < c->nr; k++, i = i + 1 == c->nr ? 0 : i + 1) {
		int rc;

		if (!usable(c, i) ||
		    (check_fit && !kvf__segalloc_may_fit(c->segs[i], c->size)))
			continue;
		rc = try_seg(c, i);
		if (rc != KVF_ERR_NO_SPACE)
			return rc;
		(*attempts)++;
	}
	return KVF_ERR_NO_SPACE;
}

static int place_random(struct ctx *c)
{
	uint32_t failed = 0;
	int rc = walk(c, false, &failed);

	if (failed)
		c->res->fallbacks++;
	return rc;
}

/*
 * Up to SAMPLE segment indices: all of them (rotated) when there are at
 * most SAMPLE segments, else SAMPLE random draws (repeats are harmless).
 */
static uint32_t sample(struct ctx *c, uint32_t *idx)
{
	uint32_t n = 0;

	if (c->nr <= SAMPLE) {
		uint32_t i = pick_random(c->rng, c->nr);

		for (; n < c->nr; n++, i = i + 1 == c->nr ? 0 : i + 1)
			idx[n] = i;
		return n;
	}
	for (; n < SAMPLE; n += 2) {
		uint64_t r = kvf__xorshift64s(c->rng);

		idx[n] = pick((uint32_t)r, c->nr);
		idx[n + 1] = pick((uint32_t)(r >> 32), c->nr);
	}
	return n;
}

static int place_free_ratio(struct ctx *c)
{
	uint32_t idx[SAMPLE], n = sample(c, idx), best = UINT32_MAX;
	double best_ratio = -1.0;
	uint32_t failed = 0;
	int rc;

	for (uint32_t k = 0; k < n; k++) {
		const struct kvf__segalloc *a;
		double ratio;

		if (!usable(c, idx[k]))
			continue;
		a = c->segs[idx[k]];
		ratio = (double)kvf__segalloc_free_fast(a) /
			(double)kvf__segalloc_pub(a)->capacity;
		if (ratio > best_ratio) {
			best_ratio = ratio;
			best = idx[k];
		}
	}
	if (best != UINT32_MAX) {
		rc = try_seg(c, best);
		if (rc != KVF_ERR_NO_SPACE)
			return rc;
	}
	c->res->fallbacks++;
	return walk(c, false, &failed);
}

/*
 * Fragmentation-aware choice: walk from a random start over at most
 * SCAN_LIMIT segments, consider the first SAMPLE whose published largest
 * free region holds the request, and return the one whose largest region
 * is the smallest (best fit), or UINT32_MAX. One pass, no sorting: the cost
 * is a few loads of published atomics per segment looked at. A random
 * start is a random sample because segment state does not depend on its
 * index.
 */
#define SCAN_LIMIT (4 * SAMPLE)

static inline __attribute__((always_inline)) uint32_t
best_fit_scan(const struct ctx *c, struct lane lane, bool check_taken,
	      bool has_skip, uint32_t skip)
{
	struct kvf__segalloc *const *segs = c->segs;
	const uint64_t size = c->size;
	const uint32_t nr = c->nr, step = lane.step;
	const uint32_t limit = lane.count < SCAN_LIMIT ? lane.count : SCAN_LIMIT;
	const uint32_t start = lane.first + pick_random(c->rng, lane.count) * step;
	uint32_t best = UINT32_MAX, m = 0, i = start;
	uint64_t best_largest = UINT64_MAX;

	/*
	 * Whether a segment fits and whether it beats the best so far are
	 * coin flips to the branch predictor (each mispredict costs more than
	 * the loop body): a mask (cmp, sbb) makes the candidate and selects
	 * (cmov) keep the best, and the loop's one data-dependent exit is
	 * the SAMPLE-th candidate. Blocks are aligned, so a maximum >= size
	 * also holds size rounded up to the alignment: no rounding. There is
	 * no early stop on an exact fit (an exact fit is the smallest
	 * maximum that fits, so it still wins, the first one in the
	 * window): callgrind, wide mix, per placement, 283 instructions and
	 * 1.0 mispredicts in kvf__place against 430 and 2.6 with one; medians
	 * uniform and bimodal -9..-11 ns, wide unchanged (its time is in
	 * the allocator's cache misses).
	 */
	for (uint32_t k = 0; k < limit; k++) {
		const struct kvf__segalloc *a = segs[i];
		uint64_t largest = a ? kvf__segalloc_largest_fast(a) : 0, cand;
		/* All ones when it does not fit (cmp, sbb: no branch). */
		uint64_t miss = 0 - (uint64_t)(largest < size);
		bool better;

		if (check_taken)
			miss |= 0 - (uint64_t)taken(c, i);
		if (has_skip)
			miss |= 0 - (uint64_t)(i == skip);
		cand = largest | miss;
		better = cand < best_largest;
		best = better ? i : best;
		best_largest = better ? cand : best_largest;
		m += (uint32_t)(miss + 1);
		if (m >= SAMPLE)
			break;
		i = i + step >= nr ? lane.first : i + step;
	}
	return best;
}

/* Every one of @nr segments, as one lane. */
static struct lane all_of(uint32_t nr)
{
	return (struct lane){ 0, 1, nr };
}

/* The best fit in @lane; the first replica cannot clash with another. */
static uint32_t best_fit_in(const struct ctx *c, struct lane lane)
{
	return c->res->count ? best_fit_scan(c, lane, true, false, 0) :
			       best_fit_scan(c, lane, false, false, 0);
}

/* The best fit in the placer's lane, else in every segment. */
static uint32_t best_fit_segment(const struct ctx *c)
{
	uint32_t best = best_fit_in(c, c->lane);

	if (best == UINT32_MAX && c->lane.count < c->nr)
		best = best_fit_in(c, all_of(c->nr));
	return best;
}

/*
 * The best fit's allocator was busy: another put is allocating there.
 * Best fit sends concurrent puts to the same tightest segment, where
 * they would queue on its lock (2 put threads would run slower than 1,
 * 16% of their time in futex wait/wake). Take the best fit of a fresh
 * window without that segment instead, and queue on the first choice
 * only if nothing else fits. A lone thread never gets here (the
 * try-lock always succeeds), so single-threaded placement is unchanged.
 */
static int place_contended(struct ctx *c, uint32_t busy)
{
	uint32_t alt = best_fit_scan(c, all_of(c->nr), c->res->count, true,
				     busy);
	int rc;

	if (alt != UINT32_MAX) {
		rc = try_seg(c, alt);
		if (rc != KVF_ERR_NO_SPACE)
			return rc;
	}
	return try_seg(c, busy);
}

static struct kvf__placer_memo *memo_find(struct ctx *c)
{
	struct kvf__placer *p = c->placer;

	for (uint32_t k = 0; k < KVF__PLACER_MEMO; k++)
		if (p->memo[k].size == c->size &&
		    p->memo[k].replica == c->res->count)
			return &p->memo[k];
	return NULL;
}

static void memo_note(struct ctx *c, struct kvf__placer_memo *m,
		      uint32_t replica, uint32_t seg)
{
	struct kvf__placer *p = c->placer;

	if (!m)
		m = &p->memo[p->memo_next++ % KVF__PLACER_MEMO];
	/* memo_after_alloc() may have dropped @m meanwhile. */
	*m = (struct kvf__placer_memo){ c->size, replica, seg };
}

/*
 * fragmentation_aware's fast path: a block of exactly the request's size
 * parked in a segment's reuse list is a best fit by definition (no
 * remainder, nothing taken from any free region), and the allocator
 * hands it out without a descent. In steady state a put follows removes
 * of its size, so one was likely just parked: the placer's hint names
 * where (struct kvf__park_hint). Take it if that segment is in the
 * placer's lane, usable, and still holds one; else KVF_ERR_NO_SPACE
 * (nothing taken: a stale hint, a busy allocator) and the pass chooses.
 * O(1): one slot of the hint, one segment's published sizes.
 */
static __attribute__((noinline)) int exact_fit(struct ctx *c)
{
	const struct kvf__park_hint *h = c->placer->hint;
	const struct lane lane = c->lane;
	uint64_t off;
	uint32_t i;

	if (!h)
		return KVF_ERR_NO_SPACE;
	i = kvf__park_hint_get(h, c->size);
	if (i >= c->nr || i < lane.first || (i - lane.first) % lane.step ||
	    !usable(c, i) || !kvf__segalloc_has_parked(c->segs[i], c->size) ||
	    kvf__segalloc_try_take_parked(c->segs[i], c->size, c->tag, &off))
		return KVF_ERR_NO_SPACE;
	add_replica(c, i, off);
	return KVF_OK;
}

static int place_frag_aware(struct ctx *c)
{
	struct kvf__placer_memo *m = memo_find(c);
	uint32_t best, failed = 0;
	int rc;

	if (m && m->seg < c->nr && usable(c, m->seg) &&
	    kvf__segalloc_may_fit(c->segs[m->seg], c->size) &&
	    alloc_in(c, m->seg, false) == KVF_OK)
		return KVF_OK;
	if (exact_fit(c) == KVF_OK)
		return KVF_OK;
	best = best_fit_segment(c);
	if (best != UINT32_MAX) {
		uint32_t r = c->res->count;

		rc = alloc_in(c, best, false);
		if (rc == KVF_ERR_BUSY)
			rc = place_contended(c, best);
		if (rc == KVF_OK)
			memo_note(c, m, r, c->res->seg[r]);
		if (rc != KVF_ERR_NO_SPACE)
			return rc;
	}
	/*
	 * Nothing fit in the window, or a stale maximum made the choice
	 * fail: look everywhere.
	 */
	c->res->fallbacks++;
	return walk(c, true, &failed);
}

/* Preferred segments first, in order; KVF_ERR_NO_SPACE if none took it. */
static int place_preferred(struct ctx *c, const struct kvf__place_request *req)
{
	for (uint32_t k = 0; k < req->nr_preferred; k++) {
		uint32_t i = req->preferred[k];
		int rc;

		if (i >= c->nr || !usable(c, i) ||
		    !kvf__segalloc_may_fit(c->segs[i], c->size))
			continue;
		rc = try_seg(c, i);
		if (rc != KVF_ERR_NO_SPACE)
			return rc;
	}
	return KVF_ERR_NO_SPACE;
}

/*
 * Whether fewer than @replica_num segments could hold @size even empty:
 * then the request is a parameter error, not memory pressure (eviction
 * cannot help it). Only asked after a failure, so it costs nothing on
 * the success path.
 */
static bool never_fits(struct kvf__segalloc *const *segs, uint32_t nr,
		       uint64_t size, uint32_t replica_num)
{
	uint32_t could = 0;

	for (uint32_t i = 0; i < nr && could < replica_num; i++)
		could += segs[i] && size <= kvf__segalloc_pub(segs[i])->capacity;
	return could < replica_num;
}

/*
 * @p's lane among @nr segments: lanes of at least two segments each (a
 * lane of one would turn best fit into "that segment"), so with many
 * placers some share a lane.
 */
static struct lane placer_lane(const struct kvf__placer *p, uint32_t nr)
{
	uint32_t lanes = p->lanes < nr / 2 ? p->lanes : nr / 2, first;

	if (lanes <= 1)
		return all_of(nr);
	first = p->lane % lanes;
	return (struct lane){ first, lanes, (nr - first + lanes - 1) / lanes };
}

/* @c places for @p: its lane, its memo still of that lane. */
static void placer_enter(struct ctx *c, struct kvf__placer *p)
{
	c->rng = &p->rng;
	c->placer = p;
	c->lane = placer_lane(p, c->nr);
	if (p->memo_lane != p->lane || p->memo_lanes != p->lanes) {
		kvf__placer_forget(p);
		p->memo_lane = p->lane;
		p->memo_lanes = p->lanes;
	}
}

int kvf__place(enum kvf_placement_strategy strategy,
	       struct kvf__segalloc *const *segs, uint32_t nr_segs,
	       const struct kvf__place_request *req, struct kvf__placer *p,
	       struct kvf__place_result *res)
{
	struct ctx c = { .segs = segs, .nr = nr_segs, .res = res };
	int rc = KVF_OK;

	if (!req || !res || !p || !p->rng || (nr_segs && !segs) ||
	    !req->size || !req->replica_num ||
	    req->replica_num > KVF_MAX_REPLICAS ||
	    (req->nr_preferred && !req->preferred))
		return KVF_ERR_INVALID_PARAMS;
	c.size = req->size;
	c.tag = req->tag;
	placer_enter(&c, p);
	res->count = 0;
	res->fallbacks = 0;
	if (nr_segs < req->replica_num)
		return KVF_ERR_NOT_ENOUGH_SEGMENTS;
	while (res->count < req->replica_num) {
		rc = place_preferred(&c, req);
		if (rc != KVF_ERR_NO_SPACE)
			goto next;
		switch (strategy) {
		case KVF_PLACEMENT_RANDOM:
			rc = place_random(&c);
			break;
		case KVF_PLACEMENT_FREE_RATIO_FIRST:
			rc = place_free_ratio(&c);
			break;
		case KVF_PLACEMENT_FRAGMENTATION_AWARE:
		default:
			rc = place_frag_aware(&c);
			break;
		}
next:
		if (rc != KVF_OK)
			goto err_undo;
	}
	res->first_choice = res->fallbacks == 0;
	return KVF_OK;

err_undo:
	kvf__place_undo(segs, req, res);
	res->count = 0;
	res->first_choice = 0;
	if (rc == KVF_ERR_NO_SPACE &&
	    never_fits(segs, nr_segs, req->size, req->replica_num))
		rc = KVF_ERR_INVALID_PARAMS;
	return rc;
}

void kvf__place_undo(struct kvf__segalloc *const *segs,
		     const struct kvf__place_request *req,
		     const struct kvf__place_result *res)
{
	for (uint32_t k = 0; k < res->count; k++)
		kvf__segalloc_free(segs[res->seg[k]], res->offset[k], req->size);
}

/*
 * A run of one-replica objects of one size, as place_frag_aware() would
 * place them one after another: the remembered best fit while it fits,
 * else an exact fit (its segment then gives the run every block of the
 * size it has parked, kvf__segalloc_try_take_parked_many()), else the
 * pass. Each segment the pass chooses takes as many of the run as it
 * holds under one hold of its lock (kvf__segalloc_try_alloc_many()): it
 * stays the best fit while it fits, since it only shrinks. Everything
 * that is not a first choice (a busy allocator, a window that holds
 * nothing, a stale maximum) ends the run: kvf__place() knows those
 * fallbacks.
 */
uint32_t kvf__place_run(enum kvf_placement_strategy strategy,
			struct kvf__segalloc *const *segs, uint32_t nr_segs,
			uint64_t size, uint32_t n, const uint64_t *tags,
			struct kvf__placer *p, uint32_t *seg, uint64_t *offset)
{
	struct kvf__place_result one = { .count = 0 };
	struct ctx c = { .segs = segs, .nr = nr_segs, .size = size,
			 .res = &one };
	uint32_t done = 0;

	if (strategy != KVF_PLACEMENT_FRAGMENTATION_AWARE || !p || !p->rng ||
	    !size || !nr_segs || !segs || (n && (!tags || !seg || !offset)))
		return 0;
	placer_enter(&c, p);
	while (done < n) {
		struct kvf__placer_memo *m = memo_find(&c);
		bool remembered = m && m->seg < nr_segs && segs[m->seg] &&
				  kvf__segalloc_may_fit(segs[m->seg], size);
		uint32_t i;
		int got;

		if (remembered) {
			i = m->seg;
		} else {
			/*
			 * An exact fit: its segment gives the run every
			 * block of the size it has parked, under one hold
			 * of its lock (in the steady state a remove batch
			 * parked a few in each segment). One take per
			 * object inside the run measured slower
			 * (docs/placement.md, "Runs of one size").
			 */
			c.tag = tags[done];
			if (exact_fit(&c) == KVF_OK) {
				i = one.seg[0];
				seg[done] = i;
				offset[done++] = one.offset[0];
				one.count = 0;
				got = kvf__segalloc_try_take_parked_many(
					segs[i], size, n - done, tags + done,
					offset + done);
				for (int k = 0; k < got; k++)
					seg[done + (uint32_t)k] = i;
				done += got > 0 ? (uint32_t)got : 0;
				continue;
			}
			i = best_fit_segment(&c);
			if (i == UINT32_MAX)
				break;
		}
		got = kvf__segalloc_try_alloc_many(segs[i], size, n - done,
						   tags + done, offset + done);
		if (got <= 0)
			break;
		for (uint32_t k = 0; k < (uint32_t)got; k++)
			seg[done + k] = i;
		done += (uint32_t)got;
		memo_after_alloc(&c, i);
		if (!remembered)
			memo_note(&c, m, 0, i);
	}
	return done;
}
