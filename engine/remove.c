/* SPDX-License-Identifier: MIT */
/*
 * engine/remove.c - removal of records already found: claim, journal,
 * unlink, free, reclaim. A client's batch remove, eviction and the
 * remove_all/remove_prefix sweep find their records each their own way
 * (by key, by an allocator block's tag, by a walk of the segments) and
 * share everything after that.
 *
 * Claim. A remover locks the record, reads the lease (the other half of
 * the reader's Dekker pair, metadata/objstate.h) and either refuses or
 * moves it to REMOVING, which readers treat as gone and which no other
 * writer moves on.
 *
 * Journal. The batch's removals go in one append, outside the caller's
 * read-side section (kvf__engine_journal_claimed): a STRICT append waits
 * for an fsync. On a journal error the records return to COMPLETE.
 *
 * Unlink, then free. Back inside the section, every removed record is
 * unlinked (DEAD) and queued for freeing after a grace period; then the
 * buffers are freed grouped by segment: one hold of each allocator's lock
 * per batch instead of one per replica, and the allocator's free
 * summaries published once. The records are DEAD by then, which readers
 * treat as gone. Their segments are still there: an unmount waits for the
 * verdict on a REMOVING record before it finishes, and frees the segment
 * only a grace period later, which this section holds up
 * (engine/buffers.c).
 *
 * The sweep (remove_all, remove_prefix) walks the segments' used blocks,
 * as an unmount does, rather than the index: a position in a segment (its
 * id and an offset) survives leaving the read-side section, an index
 * iterator does not. Each window of SWEEP_WINDOW blocks is one section:
 * find each block's owner by its tag (the owner's key hash), claim the
 * matching complete ones, remove them. An object with several replicas is
 * met once per replica and claimed at the first.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "engine/mutation.h"
#include "metadata/objstate.h"
#include "engine/remove.h"

/* Replica frees a batch groups on the stack before it needs the heap. */
#define FREES_STACK 256
/* Used blocks the sweep handles per read-side section. */
#define SWEEP_WINDOW 256

int kvf__remove_claim(struct kvf__object *o, bool force, uint64_t now)
{
	uint32_t base;

	if (!kvf__obj_lock(o, &base)) {
		if (base == KVF__OBJ_ENDING)
			return KVF_ERR_OBJECT_NOT_READY;
		if (base == KVF__OBJ_REMOVING)
			return KVF_ERR_OBJECT_NOT_FOUND;
		return KVF__CLAIM_STALE;
	}
	if (base == KVF__OBJ_PROCESSING) {
		kvf__obj_set(o, base);
		return KVF_ERR_OBJECT_NOT_READY;
	}
	if (!force && kvf__obj_lease(o) > now) {
		kvf__obj_set(o, base);
		return KVF_ERR_OBJECT_HAS_LEASE;
	}
	if (!force && (o->flags & KVF__OBJ_HARD_PIN)) {
		kvf__obj_set(o, base);
		return KVF_ERR_OBJECT_PINNED;
	}
	kvf__obj_release(o, KVF__OBJ_REMOVING);
	return KVF_OK;
}

/*
 * Move the entries of [@from, @m) whose segment is segs[@from] to the
 * front of that range, keeping the order within the group and within the
 * rest (a fill's neighbours are often removed in address order, and
 * frees in that order merge in place); returns the end of the group.
 * @tmp_segs and @tmp hold m - from entries.
 */
static size_t group_segment(struct kvf__segment **segs,
			    struct kvf__segalloc_range *r,
			    struct kvf__segment **tmp_segs,
			    struct kvf__segalloc_range *tmp, size_t from,
			    size_t m)
{
	struct kvf__segment *seg = segs[from];
	size_t k = from + 1, rest = 0;

	for (size_t j = k; j < m; j++) {
		if (segs[j] == seg) {
			segs[k] = seg;
			r[k++] = r[j];
		} else {
			tmp_segs[rest] = segs[j];
			tmp[rest++] = r[j];
		}
	}
	memcpy(segs + k, tmp_segs, rest * sizeof(*segs));
	memcpy(r + k, tmp, rest * sizeof(*r));
	return k;
}

/*
 * Start loading the allocator lines the free of @o's replicas reads first
 * (a slab directory's cell each), while the batch is still unlinking: in
 * a master's steady state they are cold, and the free under the
 * allocator's lock would wait for each in turn.
 */
static void prefetch_frees(const struct kvf__object *o)
{
	const struct kvf__replica *rep = kvf__object_replicas_const(o);

	for (unsigned k = 0; k < o->nr_replicas; k++)
		kvf__segalloc_prefetch_free(kvf__replica_seg(&rep[k])->alloc,
					    kvf__replica_offset(&rep[k]));
}

/* Free the replicas of every removed item, one allocator call per segment. */
static void free_removed(struct kvf__object *const *obj,
			 const enum kvf_status *status, size_t n)
{
	struct kvf__segment *segs_stack[2 * FREES_STACK], **segs = segs_stack;
	struct kvf__segalloc_range r_stack[2 * FREES_STACK], *r = r_stack;
	void *heap = NULL;
	size_t cap = 0, m = 0;

	for (size_t i = 0; i < n; i++)
		if (status[i] == KVF_OK)
			cap += obj[i]->nr_replicas;
	if (cap > FREES_STACK) {
		heap = malloc(2 * cap * (sizeof(*segs) + sizeof(*r)));
		if (!heap) {
			/* No room to group them: free one by one. */
			for (size_t i = 0; i < n; i++)
				if (status[i] == KVF_OK)
					kvf__replicas_free(obj[i]);
			return;
		}
		r = heap;
		segs = (struct kvf__segment **)(r + 2 * cap);
	}
	for (size_t i = 0; i < n; i++) {
		const struct kvf__object *o = obj[i];
		const struct kvf__replica *rep;

		if (status[i] != KVF_OK)
			continue;
		rep = kvf__object_replicas_const(o);
		for (unsigned k = 0; k < o->nr_replicas; k++, m++) {
			segs[m] = kvf__replica_seg(&rep[k]);
			r[m] = (struct kvf__segalloc_range){
				kvf__replica_offset(&rep[k]), o->size };
		}
	}
	/* The second halves are group_segment()'s scratch. */
	for (size_t from = 0, to; from < m; from = to) {
		to = group_segment(segs, r, segs + cap, r + cap, from, m);
		kvf__segalloc_free_many(segs[from]->alloc, r + from, to - from);
	}
	free(heap);
}

int kvf__remove_claimed(struct kvf_engine *e, struct kvf__object **obj,
			const uint64_t *hash, enum kvf_status *status, size_t n,
			struct kvf__prof_span *span, size_t *removed_out)
{
	struct kvf__reclaim rc = { NULL };
	size_t removed = 0;
	int64_t pinned = 0;
	int ret;

	ret = kvf__engine_journal_claimed(e, KVF__MUT_OBJECT_REMOVE, obj,
					  status, n);
	kvf__prof_mark(span, KVF__STAGE_JOURNAL);
	for (size_t i = 0; i < n; i++) {
		if (!ret && i + KVF__INDEX_WRITE_AHEAD < n)
			kvf__index_prefetch_write(
				e->index, hash[i + KVF__INDEX_WRITE_AHEAD]);
		if (status[i] != KVF_OK)
			continue;
		if (ret) {
			kvf__obj_set(obj[i], KVF__OBJ_COMPLETE);
			status[i] = ret;
			continue;
		}
		kvf__object_retire(e, obj[i], hash[i], &rc);
		prefetch_frees(obj[i]);
		kvf__obj_release(obj[i], KVF__OBJ_DEAD);
		pinned += kvf__soft_pinned(obj[i]);
		removed++;
	}
	kvf__reclaim_flush(&rc);
	kvf__count_add(&e->nr_complete, -(int64_t)removed);
	if (pinned)
		kvf__count_add(&e->nr_soft_pinned, -pinned);
	kvf__prof_mark(span, KVF__STAGE_PUBLISH);
	/* The frees are the allocator's work: its stage, apart in profiles. */
	if (removed)
		free_removed(obj, status, n);
	kvf__prof_mark(span, KVF__STAGE_ALLOCATE);
	if (removed_out)
		*removed_out = removed;
	return ret;
}

/* ---- the sweep ---------------------------------------------------------- */

struct sweep {
	struct kvf_engine *e;
	const char *prefix;
	size_t prefix_len;
	bool force;
	uint64_t removed;
	int err;
	struct kvf__prof_span span; /* off: a sweep is not a client batch */
	struct kvf__segalloc_block blk[SWEEP_WINDOW];
	struct kvf__object *obj[SWEEP_WINDOW];
	uint64_t hash[SWEEP_WINDOW];
	enum kvf_status status[SWEEP_WINDOW];
};

static bool sweep_matches(const struct sweep *s, const struct kvf__object *o)
{
	return !s->prefix_len ||
	       (o->key_len >= s->prefix_len &&
		!memcmp(kvf__object_key(o), s->prefix, s->prefix_len));
}

/*
 * Claim the owner of block @b of @seg if the sweep takes it: the item's
 * status is KVF_OK with the record in @o, or why it stays.
 */
static int sweep_claim(struct sweep *s, struct kvf__segment *seg,
		       const struct kvf__segalloc_block *b, uint64_t now,
		       struct kvf__object **o)
{
	struct kvf__replica_ref ref = { seg, b->offset };
	int ret = KVF__CLAIM_STALE;

	while (ret == KVF__CLAIM_STALE) {
		*o = kvf__index_lookup_hash(s->e->index, b->tag,
					    kvf__object_has_replica, &ref);
		/* No owner: a pre-empted put's buffer, or gone meanwhile. */
		if (!*o || !sweep_matches(s, *o))
			return KVF_ERR_OBJECT_NOT_FOUND;
		ret = kvf__remove_claim(*o, s->force, now);
	}
	return ret;
}

/*
 * One window of segment @id from @offset, in one read-side section.
 * Returns where the next window starts, or UINT64_MAX when the segment
 * is done (walked to its end, or unmounted).
 */
static uint64_t sweep_window(struct sweep *s, uint64_t id, uint64_t offset)
{
	struct kvf__segment *seg;
	uint64_t next = UINT64_MAX, now;
	size_t n, removed;
	int ret;

	kvf__rcu_read_lock();
	seg = kvf__seg_find(kvf__segs(s->e), id, NULL);
	if (!seg)
		goto out; /* unmounted: its objects went with it */
	n = kvf__segalloc_scan(seg->alloc, offset, s->blk, SWEEP_WINDOW, &next);
	if (next >= kvf__segalloc_capacity(seg->alloc))
		next = UINT64_MAX;
	for (size_t i = 0; i < n; i++)
		kvf__index_prefetch_hash(s->e->index, s->blk[i].tag);
	now = kvf__now(s->e);
	for (size_t i = 0; i < n; i++) {
		s->status[i] = sweep_claim(s, seg, &s->blk[i], now, &s->obj[i]);
		/* The record's hash: a tag may keep its high half only. */
		s->hash[i] = s->status[i] == KVF_OK ?
				     kvf__object_hash(s->obj[i]) :
				     0;
	}
	ret = kvf__remove_claimed(s->e, s->obj, s->hash, s->status, n,
				  &s->span, &removed);
	s->removed += removed;
	if (ret)
		s->err = ret;
out:
	kvf__rcu_read_unlock();
	return next;
}

/* The ids of the mounted segments (*@ids malloc'd, NULL when none). */
static int segment_ids(struct kvf_engine *e, uint64_t **ids, uint32_t *nr)
{
	struct kvf__seg_table *t;
	int ret = KVF_OK;

	kvf__rcu_read_lock();
	t = kvf__segs(e);
	*nr = t->nr;
	*ids = t->nr ? malloc(t->nr * sizeof(**ids)) : NULL;
	if (*ids)
		for (uint32_t i = 0; i < t->nr; i++)
			(*ids)[i] = t->seg[i]->id;
	else if (t->nr)
		ret = KVF_ERR_NO_MEMORY;
	kvf__rcu_read_unlock();
	return ret;
}

int kvf__remove_sweep(struct kvf_engine *e, const char *prefix, size_t len,
		      bool force, uint64_t *removed)
{
	struct sweep *s;
	uint64_t *ids;
	uint32_t nr;
	int ret;

	kvf__rcu_ensure_registered();
	s = calloc(1, sizeof(*s));
	if (!s)
		return KVF_ERR_NO_MEMORY;
	ret = segment_ids(e, &ids, &nr);
	if (ret)
		goto out;
	s->e = e;
	s->prefix = prefix;
	s->prefix_len = len;
	s->force = force;
	for (uint32_t i = 0; i < nr; i++)
		for (uint64_t off = 0; off != UINT64_MAX;)
			off = sweep_window(s, ids[i], off);
	ret = s->err;
	free(ids);
out:
	if (removed)
		*removed = s->removed;
	free(s);
	return ret;
}
