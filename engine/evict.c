/* SPDX-License-Identifier: MIT */
/*
 * engine/evict.c - making room: a clock-hand, windowed, approximately-LRU
 * eviction whose cost per evicted object does not grow with the table.
 *
 * Policy. "Recently used" is the last read: a get or exist leaves lease
 * deadline = read time + lease TTL; an object never read counts from its
 * put (a soft-pinned one counts as oldest once it may go at all). The
 * rank (rank()) adds a quarter of the age bar (below) for an object read
 * since its put, and among equal uses takes the later-placed block first
 * (a prefix's deeper blocks before its head). Every segment has a clock
 * hand (kvf__segment.evict_hand, an offset). A step
 * of a hand reads a WINDOW of EVICT_WINDOW used blocks in address order
 * from the allocator (kvf__segalloc_scan), finds each block's owner (the
 * block's tag is the owner's key hash) and evicts the oldest 1/EVICT_DIV
 * of the window's evictable owners; the hand moves past the window. So
 * each victim is the oldest among ~EVICT_DIV neighbours, as a sampled LRU
 * with EVICT_DIV samples per victim (Redis draws 5, the previous version
 * here 8 random ones), and every object is looked at once per turn of the
 * hand, as in CLOCK. Within a window, at least window/EVICT_DIV objects
 * older than a recently read one must be evictable before it can go. The
 * count is 1/EVICT_DIV of the blocks read with the remainder carried
 * over, so a short window (a segment's last few blocks) is not a license
 * to evict its one recently read object.
 *
 * The age bar. Neighbours were put together, so a window's ages are
 * alike and its oldest eighth need not be old for the table. The engine
 * keeps a running age (e->evict_bar) of each window's 1/EVICT_DIV-th
 * oldest, and a window gives those of its oldest 1/EVICT_CAP_DIV that are
 * at least that old: none from a window of recently read objects, up to
 * a quarter from a window of old ones. A phase dry for EVICT_BAR_DRY
 * blocks goes back to the rank alone, so the bar never stops a pass that
 * would have evicted. On Mooncake's traces (kvforge-bench --workload
 * trace, docs/benchmarks.md) it raised the hit ratio by 0.4 to 2.5
 * points at 10/25/50% of capacity.
 *
 * Why windows of neighbours and not random samples. A random sample is a
 * chain of dependent misses (allocator leaf, index bucket, record); at
 * 100K objects they hit the L3, at 4M they do not, and a pass cost 2.5-3.5x
 * more at 4M. A window's allocator leaves are read in sequence (one
 * descent per window, the next leaf prefetched), and its owners are found
 * by a software pipeline over the window that keeps about EVICT_AHEAD
 * misses in flight: a block's index bucket is prefetched; EVICT_AHEAD
 * blocks later that bucket, now cached, gives the record carrying the
 * block's tag and a prefetch of its header (state, flags, lease, stamp:
 * all that ranking reads). Ownership (the record has a replica at this
 * block) is checked only for the victims, after prefetching their replica
 * lines: tags can collide, or outlive their record's key in a pre-empted
 * put's buffers, so a stranger may be ranked by mistake (a little LRU
 * accuracy) but is never evicted for the block. A stranger found out is
 * dropped and the next oldest candidate takes its place (take_oldest):
 * a pre-empted put's buffer ranks exactly as old as its key's live
 * block, the same record met twice, and must not stand in for it. A
 * window whose candidates are all strangers counts as one without
 * candidates for its hand's turn, or a phase of nothing but strangers
 * would last EVICT_DRY_BLOCKS and the next one would take soft-pinned
 * objects while evictable ones remain elsewhere. That leaves about two
 * misses per block read, overlapped, instead of a dependent chain of
 * three to five. The batch remove that follows touches the leaves,
 * buckets and records just read, so it does not grow with the table
 * either. Measured (kvforge-bench --workload evict, 5000 victims a pass,
 * medians of 25 passes, 2-vCPU VM): 2.09 / 2.18 / 2.35 ms at 100K / 1M /
 * 4M objects, against 5.7 / 11.9 / 18.1 ms with random samples.
 *
 * Which segment. Each step serves the segment with the highest used
 * fraction whose hand has not gone a full turn in this phase without
 * finding anything evictable, so a pass spreads over equally full
 * segments and relieves the fullest first (where puts fail). Victims are
 * queued for up to EVICT_BATCH removals; within one batch a hand never
 * passes the point where the batch found it, so no block is read twice.
 * A queued victim is already claimed (REMOVING), so an object with
 * several replicas, met again in another segment, is no longer ranked.
 *
 * Never evicted: processing objects, objects under lease, hard-pinned
 * ones. Soft-pinned objects (pin not yet expired) are skipped in a first
 * phase and considered only in a second one, when the first found
 * nothing more. A phase ends when every hand went a full turn without an
 * evictable owner, or after EVICT_DRY_BLOCKS blocks read since the last
 * successful eviction (a pass over a hot table gives up after bounded
 * work, never scanning more than one turn of the hands for nothing).
 *
 * Victims are claimed as they are picked, without force, inside the
 * section that read them (kvf__remove_claim: the lease/remove protocol of
 * metadata/objstate.h), and removed by the engine's one removal path
 * (engine/remove.c), which journals them outside the section: a victim
 * that got leased after it was ranked is simply not claimed. Eviction is
 * not profiled as a client's remove. A batch is cut where its bytes reach
 * what is still wanted, so a pass does not overshoot by a batch. Readers
 * never wait for any of this. Two passes may run at once (the background
 * thread and a caller): a hand is a relaxed atomic hint, and a victim
 * both picked is claimed by one of them.
 *
 * Triggers (kvf_engine_tick): used capacity above the high watermark, or
 * a failed allocation (put_start raises e->evict_requested and wakes the
 * background thread). Each pass aims at eviction_ratio of capacity.
 */
#include "config.h"

#include <stdlib.h>

#include "engine/internal.h"
#include "engine/remove.h"
#include "metadata/objstate.h"

/* Used blocks one step of a hand reads. */
#define EVICT_WINDOW 256
/* A step evicts the oldest 1/EVICT_DIV of its window's evictable owners. */
#define EVICT_DIV 8
/* ... and up to 1/EVICT_CAP_DIV when they clear the age bar. */
#define EVICT_CAP_DIV 4
#define EVICT_TAKE_MAX ((EVICT_WINDOW + EVICT_CAP_DIV - 1) / EVICT_CAP_DIV)
/* The bar moves 1/EVICT_BAR_GAIN of the way to each window's quantile. */
#define EVICT_BAR_GAIN 16
/* A phase dry for this many blocks evicts by rank alone, bar or not. */
#define EVICT_BAR_DRY (8 * EVICT_WINDOW)
/* A read object ranks 1/EVICT_READ_BONUS_DIV of the bar younger. */
#define EVICT_READ_BONUS_DIV 4
#define EVICT_BATCH 128
/* Pipeline distance of the owner lookups (misses in flight per stage). */
#define EVICT_AHEAD 32
/* A phase gives up after reading this many blocks without evicting. */
#define EVICT_DRY_BLOCKS (256 * EVICT_WINDOW)
/* Steps per RCU read-side section (keeps a writer's grace period short). */
#define EVICT_STEPS_PER_SECTION 16

/* Claimed victims (REMOVING), with what kvf__remove_claimed() needs. */
struct victims {
	size_t n;
	uint64_t bytes_sum;
	struct kvf__object *obj[EVICT_BATCH];
	uint64_t hash[EVICT_BATCH];
	enum kvf_status status[EVICT_BATCH];
	uint64_t bytes[EVICT_BATCH];
};

struct cand {
	struct kvf__object *o;
	uint64_t use;
	size_t blk; /* its block in the window */
};

/*
 * A hand's progress in a pass, per slot of the segment table: @left
 * counts the blocks before its turn is over in vain; @start is where it
 * stood when the current batch first stepped it, @done that it came back
 * round to there (a batch never reads a block twice, so never queues a
 * victim twice).
 */
struct turn {
	uint64_t left;
	uint64_t start;
	uint32_t batch;
	bool done;
};

/* One pass's state. */
struct pass {
	struct kvf_engine *e;
	uint64_t now;
	bool soft_ok;
	uint32_t batch; /* which batch choose() is filling */
	uint64_t dry;   /* blocks read since the last successful eviction */
	size_t carry;   /* blocks read but not yet counted for a victim */
	/*
	 * What @turn's slots refer to: a table seen in an earlier read-side
	 * section, compared, never dereferenced (it may be gone; a new table
	 * at the same address with as many slots only misleads a heuristic).
	 */
	const struct kvf__seg_table *t;
	uint32_t t_nr;
	struct turn *turn;
	uint32_t turn_cap;
	struct victims v;
	struct kvf__prof_span span; /* off: eviction is not a client remove */
	struct kvf__segalloc_block blk[EVICT_WINDOW];
	struct kvf__object *own[EVICT_WINDOW];
	struct cand cand[EVICT_WINDOW];
};

/* When @o was last used, for LRU ordering (smaller = older). */
static uint64_t last_use(const struct kvf_engine *e, const struct kvf__object *o)
{
	uint64_t lease = kvf__obj_lease(o);

	if (lease)
		return lease > e->lease_ttl_ns ? lease - e->lease_ttl_ns : 0;
	return (o->flags & KVF__OBJ_SOFT_PIN) ? 0 : o->stamp;
}

/*
 * The rank eviction orders candidates by, smaller first: the last use,
 * plus @bonus (a share of the age bar) for an object read since its put,
 * minus @blk, its place in the window read. A block asked for again is
 * likelier to be asked for once more (on Mooncake's traces 42-84% of the
 * blocks used twice are used again, 24-42% of those used once). Among
 * equal uses (a batch put or read at one time) the later block in the
 * segment goes first: a batch's keys are placed in order, and a prefix's
 * deeper blocks are worth less than its head, on which every later one
 * depends (one nanosecond per place: it never reorders distinct uses of
 * a real clock's batches, which are microseconds apart).
 */
static uint64_t rank(const struct kvf_engine *e, const struct kvf__object *o,
		     uint64_t bonus, size_t blk)
{
	uint64_t use = last_use(e, o);

	if (e->cfg.eviction_order == KVF_EVICTION_AGE)
		return use;

	if (kvf__obj_lease(o))
		use += bonus;
	return use > blk ? use - blk : 0;
}

static bool evictable(const struct kvf_engine *e, const struct kvf__object *o,
		      uint64_t now, bool soft_ok)
{
	if (kvf__obj_read_state(o) != KVF__OBJ_COMPLETE)
		return false;
	if (o->flags & KVF__OBJ_HARD_PIN)
		return false;
	if (kvf__obj_lease(o) > now)
		return false;
	if ((o->flags & KVF__OBJ_SOFT_PIN) && o->stamp > now && !soft_ok)
		return false;
	return true;
}

/*
 * Queue @o (key hash @hash) as a victim if it can still be claimed: it
 * may have been leased, removed or replaced since it was ranked.
 */
static void claim_victim(struct pass *p, struct kvf__object *o, uint64_t hash)
{
	struct victims *v = &p->v;

	if (kvf__remove_claim(o, false, p->now) != KVF_OK)
		return;
	v->obj[v->n] = o;
	v->hash[v->n] = hash;
	v->status[v->n] = KVF_OK;
	v->bytes[v->n] = o->size * o->nr_replicas;
	v->bytes_sum += v->bytes[v->n++];
}

/*
 * Order @c[0..@n) so that its @k (1 <= k <= n) smallest uses come first
 * (quickselect with Hoare partitioning; expected O(n)).
 */
static void select_oldest(struct cand *c, size_t n, size_t k)
{
	ptrdiff_t lo = 0, hi = (ptrdiff_t)n - 1, kth = (ptrdiff_t)k - 1;

	while (lo < hi) {
		uint64_t pivot = c[lo + (hi - lo) / 2].use;
		ptrdiff_t i = lo, j = hi;

		while (i <= j) {
			while (c[i].use < pivot)
				i++;
			while (c[j].use > pivot)
				j--;
			if (i <= j) {
				struct cand tmp = c[i];

				c[i++] = c[j];
				c[j--] = tmp;
			}
		}
		/* Now [lo, j] <= pivot <= [i, hi], and (j, i) == pivot. */
		if (kth <= j)
			hi = j;
		else if (kth >= i)
			lo = i;
		else
			return;
	}
}

/*
 * A lookup "match" that takes the first record carrying the block's tag
 * (its owner, unless tags collide: see verify_owner) and starts fetching
 * the record's header, which is all that ranking reads.
 */
static bool first_tagged(const struct kvf__object *o, void *arg)
{
	(void)arg;
	__builtin_prefetch(o);
	__builtin_prefetch((const char *)o + sizeof(*o) - 1);
	return true;
}

/*
 * Read the next window of @s's hand into p->blk and move the hand past
 * it. A window that reaches the segment's end goes on from offset 0, up
 * to where the hand stood when this batch first stepped it (@tr->start);
 * the hand is then done for this batch. Returns the blocks read.
 */
static size_t read_window(struct pass *p, struct kvf__segment *s,
			  struct turn *tr)
{
	uint64_t h0 = __atomic_load_n(&s->evict_hand, __ATOMIC_RELAXED), next;
	size_t n, m;

	if (tr->batch != p->batch) {
		tr->batch = p->batch;
		tr->start = h0;
		tr->done = false;
	}
	n = kvf__segalloc_scan(s->alloc, h0, p->blk, EVICT_WINDOW, &next);
	if (next >= kvf__segalloc_capacity(s->alloc)) {
		tr->done = true;
		next = 0;
		if (n < EVICT_WINDOW && tr->start > 0) {
			m = kvf__segalloc_scan(s->alloc, 0, p->blk + n,
					       EVICT_WINDOW - n, &next);
			while (m && p->blk[n + m - 1].offset >= tr->start) {
				m--;
				next = tr->start;
			}
			n += m;
		}
	}
	__atomic_store_n(&s->evict_hand, next, __ATOMIC_RELAXED);
	return n;
}

/*
 * The window's evictable owners, into p->cand; returns how many. A
 * software pipeline over the window (see the note at the top): block i's
 * index bucket is prefetched while block i - EVICT_AHEAD's bucket, now in
 * cache, gives its tagged record and prefetches that record's header.
 */
static size_t find_owners(struct pass *p, size_t n)
{
	struct kvf__index *idx = p->e->index;
	uint64_t bonus = __atomic_load_n(&p->e->evict_bar, __ATOMIC_RELAXED) /
			 EVICT_READ_BONUS_DIV;
	size_t nc = 0;

	for (size_t i = 0; i < n + EVICT_AHEAD; i++) {
		if (i < n)
			kvf__index_prefetch_hash(idx, p->blk[i].tag);
		if (i >= EVICT_AHEAD)
			p->own[i - EVICT_AHEAD] = kvf__index_lookup_hash(
				idx, p->blk[i - EVICT_AHEAD].tag, first_tagged,
				NULL);
	}
	for (size_t i = 0; i < n; i++) {
		struct kvf__object *o = p->own[i];

		/* A victim this batch queued is REMOVING: not evictable. */
		if (!o || !evictable(p->e, o, p->now, p->soft_ok))
			continue;
		p->cand[nc++] = (struct cand){ o, rank(p->e, o, bonus, i), i };
	}
	return nc;
}

/*
 * Does candidate @c really own its block? The tag is the owner's key
 * hash, but a record with another key can carry the same tag (the bucket
 * index compares 16 bits of it), and a pre-empted put's buffers keep the
 * tag of a key whose record is now a newer one. Only the victims are
 * checked (their replica lines are prefetched first): a stranger ranked
 * by mistake costs a little LRU accuracy, never a wrong eviction.
 */
static bool verify_owner(const struct pass *p, struct kvf__segment *s,
			 const struct cand *c)
{
	struct kvf__replica_ref ref = { s, p->blk[c->blk].offset };

	return kvf__object_has_replica(c->o, &ref);
}

/*
 * Claim the oldest 1/EVICT_DIV of the @n blocks just read among their
 * @nc (> 0) evictable owners (in p->cand) that own their blocks in @s,
 * until the victims hold @want bytes. A candidate that does not own its
 * block (verify_owner) is dropped and the next oldest takes its place: a
 * stale tag, such as a pre-empted put's buffer ranked as its key's live
 * record (the same record, as old, met twice in the window), never hides
 * the real block. Returns whether some candidate owns its block, claimed
 * or not (when none is due, one is looked for): a window of strangers
 * only does not keep its hand's turn going.
 */
static bool take_oldest(struct pass *p, struct kvf__segment *s, size_t n,
			size_t nc, uint64_t want)
{
	struct cand *c = p->cand;
	size_t take, cap, sel, got = 0, owned = 0;
	uint64_t bar = __atomic_load_n(&p->e->evict_bar, __ATOMIC_RELAXED);
	uint64_t q, limit;

	/*
	 * The rank: 1/EVICT_DIV of the blocks read, the remainder carried
	 * to the next window (a short window, a segment's last few blocks,
	 * must not let its one recently read object go as "the oldest of
	 * the window"). The bar: the running age of that rank's last
	 * victim over the windows read, so a victim is old for the whole
	 * table, not only among its neighbours (who were put, and so are
	 * as old, together). A window takes those of its oldest
	 * 1/EVICT_CAP_DIV that clear the bar: none from a window of
	 * recently read objects, more from a window of old ones. A phase
	 * that has gone dry for EVICT_BAR_DRY blocks takes the rank alone.
	 */
	take = (n + p->carry) / EVICT_DIV;
	p->carry = (n + p->carry) % EVICT_DIV;
	cap = n / EVICT_CAP_DIV > take ? n / EVICT_CAP_DIV : take;
	if (p->dry >= EVICT_BAR_DRY)
		cap = take; /* the rank alone */
	/*
	 * One selection of the window's cap oldest, then the rank's among
	 * them (at most EVICT_TAKE_MAX): c[kt - 1] is the take-th oldest.
	 */
	sel = cap < nc ? cap : nc;
	if (sel)
		select_oldest(c, nc, sel);
	if (take) {
		size_t kt = take < sel ? take : sel;

		if (kt < sel)
			select_oldest(c, sel, kt);
		q = p->now > c[kt - 1].use ? p->now - c[kt - 1].use : 0;
		bar = bar ? bar - bar / EVICT_BAR_GAIN + q / EVICT_BAR_GAIN : q;
		__atomic_store_n(&p->e->evict_bar, bar, __ATOMIC_RELAXED);
	}
	limit = p->dry >= EVICT_BAR_DRY || p->now < bar ? UINT64_MAX
							  : p->now - bar;
	while (got < cap && nc && p->v.bytes_sum < want) {
		size_t k = cap - got < nc ? cap - got : nc;

		if (k != sel) /* a later round, after strangers */
			select_oldest(c, nc, k);
		sel = 0;
		for (size_t i = 0; i < k; i++)
			__builtin_prefetch(kvf__object_replicas_const(c[i].o));
		for (size_t i = 0; i < k; i++) {
			if (!verify_owner(p, s, &c[i]))
				continue;
			owned++;
			if (c[i].use > limit && p->dry < EVICT_BAR_DRY)
				continue;
			/* Its hash: a tag may keep the high half only. */
			if (p->v.bytes_sum < want)
				claim_victim(p, c[i].o,
					     kvf__object_hash(c[i].o));
			got++;
		}
		c += k;
		nc -= k;
		if (owned > got)
			break; /* the rest is younger than one that missed the bar */
	}
	for (size_t i = 0; !owned && i < nc; i++)
		owned = verify_owner(p, s, &c[i]);
	return owned;
}

/* Restart every hand's turn for a new phase or a new segment table. */
static int reset_turns(struct pass *p, const struct kvf__seg_table *t)
{
	if (t->nr > p->turn_cap) {
		struct turn *turn = realloc(p->turn, t->nr * sizeof(*turn));

		if (!turn)
			return KVF_ERR_NO_MEMORY;
		p->turn = turn;
		p->turn_cap = t->nr;
	}
	for (uint32_t i = 0; i < t->nr; i++)
		p->turn[i] = (struct turn){
			.left = kvf__segalloc_nr_allocs(t->alloc[i]) };
	p->t = t;
	p->t_nr = t->nr;
	return KVF_OK;
}

/* next_segment(): no hand has a turn left in this phase / in this batch. */
#define NO_SEGMENT -1
#define NO_SEGMENT_IN_BATCH -2

/*
 * The fullest segment (by used fraction) whose turn is not over and that
 * this batch has not taken round yet.
 */
static int64_t next_segment(const struct pass *p,
			    const struct kvf__seg_table *t)
{
	double best_fill = -1.0;
	int64_t best = NO_SEGMENT;

	for (uint32_t i = 0; i < t->nr; i++) {
		const struct turn *tr = &p->turn[i];
		uint64_t cap = kvf__segalloc_pub(t->alloc[i])->capacity;
		double fill;

		if (!tr->left || !cap)
			continue;
		if (tr->batch == p->batch && tr->done) {
			if (best == NO_SEGMENT)
				best = NO_SEGMENT_IN_BATCH;
			continue;
		}
		fill = (double)(cap - kvf__segalloc_free_fast(t->alloc[i])) /
		       (double)cap;
		if (fill > best_fill) {
			best_fill = fill;
			best = i;
		}
	}
	return best;
}

/* step(): every hand went round once in this batch; remove, then go on. */
#define BATCH_ROUND 1

/*
 * One step of one hand: read a window, claim its oldest evictable owners
 * as victims (no more than @want bytes' worth beyond what is queued).
 * Returns KVF_OK, BATCH_ROUND, KVF_ERR_OBJECT_NOT_FOUND when the phase is
 * over, or KVF_ERR_NO_MEMORY. Call inside an RCU read-side section.
 */
static int step(struct pass *p, struct kvf__seg_table *t, uint64_t want)
{
	struct turn *tr;
	int64_t slot;
	size_t n, nc;
	int ret;

	if (t != p->t || t->nr != p->t_nr) {
		ret = reset_turns(p, t);
		if (ret)
			return ret;
	}
	if (p->dry >= EVICT_DRY_BLOCKS)
		return KVF_ERR_OBJECT_NOT_FOUND;
	slot = next_segment(p, t);
	if (slot == NO_SEGMENT_IN_BATCH)
		return BATCH_ROUND;
	if (slot < 0)
		return KVF_ERR_OBJECT_NOT_FOUND;
	tr = &p->turn[slot];
	n = read_window(p, t->seg[slot], tr);
	p->dry += n ? n : 1;
	nc = find_owners(p, n);
	if (!nc || !take_oldest(p, t->seg[slot], n, nc, want)) {
		/* Nothing here is evictable (n == 0: emptied since). */
		tr->left -= n && n < tr->left ? n : tr->left;
		return KVF_OK;
	}
	tr->left = kvf__segalloc_nr_allocs(t->alloc[slot]);
	return KVF_OK;
}

/*
 * Remove the claimed victims (inside the section that claimed them); adds
 * what went to @freed and @count. A journal error stops the pass.
 */
static int remove_victims(struct pass *p, uint64_t *freed, uint64_t *count)
{
	struct victims *v = &p->v;
	int ret;

	if (!v->n)
		return KVF_OK;
	ret = kvf__remove_claimed(p->e, v->obj, v->hash, v->status, v->n,
				  &p->span, NULL);
	for (size_t i = 0; i < v->n; i++) {
		if (v->status[i] != KVF_OK)
			continue; /* the journal refused the batch: ret */
		*freed += v->bytes[i];
		(*count)++;
		p->dry = 0;
	}
	return ret;
}

/*
 * One batch, in one read-side section: claim victims for @want more
 * bytes (steps until the batch is full, holds @want bytes, every hand
 * came round in it, or after EVICT_STEPS_PER_SECTION steps), then remove
 * them. Returns KVF_OK, KVF_ERR_OBJECT_NOT_FOUND (phase over), or
 * KVF_ERR_NO_MEMORY or a journal error.
 */
static int evict_batch(struct pass *p, uint64_t want, uint64_t *freed,
		       uint64_t *count)
{
	int found = KVF_OK, ret;

	p->v.n = 0;
	p->v.bytes_sum = 0;
	p->batch++;
	kvf__rcu_read_lock();
	p->now = kvf__now(p->e);
	for (int i = 0; i < EVICT_STEPS_PER_SECTION && !found &&
		     p->v.n + EVICT_TAKE_MAX <= EVICT_BATCH &&
		     p->v.bytes_sum < want;
	     i++)
		found = step(p, kvf__segs(p->e), want);
	ret = remove_victims(p, freed, count);
	kvf__rcu_read_unlock();
	if (found == BATCH_ROUND)
		found = KVF_OK;
	return ret ? ret : found;
}

enum kvf_status kvf_engine_evict(struct kvf_engine *e, uint64_t bytes,
				 uint64_t *freed_bytes, uint64_t *evicted)
{
	uint64_t freed = 0, count = 0;
	struct pass *p;
	int ret = KVF_OK;

	if (!e)
		return KVF_ERR_INVALID_ARGUMENT;
	kvf__rcu_ensure_registered();
	p = calloc(1, sizeof(*p));
	if (!p)
		return KVF_ERR_NO_MEMORY;
	p->e = e;
	for (int phase = 0; phase < 2 && freed < bytes && !ret; phase++) {
		p->soft_ok = phase == 1;
		p->t = NULL; /* every hand starts a new turn */
		p->dry = 0;
		do
			ret = evict_batch(p, bytes - freed, &freed, &count);
		while (!ret && freed < bytes);
		if (ret == KVF_ERR_OBJECT_NOT_FOUND)
			ret = KVF_OK;
	}
	free(p->turn);
	free(p);
	__atomic_fetch_add(&e->nr_evicted, count, __ATOMIC_RELAXED);
	if (bytes) { /* a pass, as upstream's attempted/successful evictions */
		__atomic_fetch_add(&e->nr_evict_passes, 1, __ATOMIC_RELAXED);
		__atomic_fetch_add(&e->nr_evict_successes, count ? 1 : 0,
				   __ATOMIC_RELAXED);
		__atomic_fetch_add(&e->evicted_bytes, freed, __ATOMIC_RELAXED);
	}
	if (freed_bytes)
		*freed_bytes = freed;
	if (evicted)
		*evicted = count;
	return ret;
}

/* Used bytes and capacity over mounted segments (lock-free reads). */
static void usage(struct kvf_engine *e, uint64_t *used, uint64_t *cap)
{
	struct kvf__seg_table *t;

	*used = *cap = 0;
	kvf__rcu_read_lock();
	t = kvf__segs(e);
	for (uint32_t i = 0; i < t->nr; i++) {
		*cap += t->seg[i]->size;
		*used += kvf__segalloc_used_bytes(t->alloc[i]);
	}
	kvf__rcu_read_unlock();
}

int kvf__evict_if_needed(struct kvf_engine *e)
{
	bool requested = __atomic_exchange_n(&e->evict_requested, 0,
					     __ATOMIC_ACQ_REL);
	uint64_t used, cap;

	usage(e, &used, &cap);
	if (!cap || !(e->cfg.eviction_ratio > 0))
		return KVF_OK; /* nothing mounted, or eviction off */
	if (!requested && (double)used <= e->cfg.eviction_high_watermark *
						   (double)cap)
		return KVF_OK;
	return kvf_engine_evict(e, (uint64_t)(e->cfg.eviction_ratio *
					      (double)cap),
				NULL, NULL);
}
