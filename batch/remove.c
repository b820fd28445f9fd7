/* SPDX-License-Identifier: MIT */
/*
 * batch/remove.c - remove, remove_all and remove by prefix.
 *
 * A remover locks the record, reads the lease (the other half of the
 * reader's Dekker pair, engine/objstate.h) and either refuses or moves it
 * to REMOVING, which readers treat as gone. The batch's removals are
 * journaled in one append; only then are records unlinked and buffers
 * freed. On a journal failure the records return to COMPLETE.
 *
 * The buffers are freed after all of the batch's records are unlinked,
 * grouped by segment: one hold of each allocator's lock per batch instead
 * of one per replica, and the allocator's free summaries published once.
 * The records are already DEAD then, which readers treat as gone, and the
 * batch is still inside its read-side section, so every segment and its
 * allocator are still there (engine/buffers.c).
 *
 * remove_all and remove_prefix walk the index (readers are never stalled)
 * collecting keys in chunks and feed each chunk through the batch path, so
 * there is one code path for removal.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "batch/batch.h"
#include "engine/mutation.h"
#include "engine/objstate.h"

#define SWEEP_CHUNK 1024
/* Replica frees a batch collects on the stack before it needs the heap. */
#define FREES_STACK (2 * KVF__BATCH_STACK)

/* Claim key @i for removal (state REMOVING) or return the item's error. */
static int claim(struct kvf__batch *b, size_t i, bool force, uint64_t now,
		 struct kvf__object **out)
{
	struct kvf__object *o = b->obj[i];
	uint32_t base;

	while (o) {
		if (!kvf__obj_lock(o, &base)) {
			if (base == KVF__OBJ_ENDING)
				return KVF_ERR_OBJECT_NOT_READY;
			if (base == KVF__OBJ_REMOVING)
				return KVF_ERR_OBJECT_NOT_FOUND;
			o = kvf__batch_relookup(b, i);
			continue;
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
		kvf__obj_set(o, KVF__OBJ_REMOVING);
		*out = o;
		return KVF_OK;
	}
	return KVF_ERR_OBJECT_NOT_FOUND;
}

/* The removal is journaled: unlink; free_removed() frees the buffers. */
static void retire_removed(struct kvf__batch *b, size_t i)
{
	struct kvf__object *o = b->obj[i];

	kvf__object_retire(b->e, o, b->hash[i], &b->rc);
	kvf__obj_set(o, KVF__OBJ_DEAD);
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

/* Free the replicas of every removed item, one allocator call per segment. */
static void free_removed(struct kvf__batch *b)
{
	struct kvf__segment *segs_stack[2 * FREES_STACK], **segs = segs_stack;
	struct kvf__segalloc_range r_stack[2 * FREES_STACK], *r = r_stack;
	void *heap = NULL;
	size_t cap = 0, m = 0;

	for (size_t i = 0; i < b->n; i++)
		if (b->status[i] == KVF_OK)
			cap += b->obj[i]->nr_replicas;
	if (cap > FREES_STACK) {
		heap = malloc(2 * cap * (sizeof(*segs) + sizeof(*r)));
		if (!heap) {
			/* No room to group them: free one by one. */
			for (size_t i = 0; i < b->n; i++)
				if (b->status[i] == KVF_OK)
					kvf__replicas_free(b->obj[i]);
			return;
		}
		r = heap;
		segs = (struct kvf__segment **)(r + 2 * cap);
	}
	for (size_t i = 0; i < b->n; i++) {
		const struct kvf__object *o = b->obj[i];
		const struct kvf__replica *rep;

		if (b->status[i] != KVF_OK)
			continue;
		rep = kvf__object_replicas_const(o);
		for (unsigned k = 0; k < o->nr_replicas; k++, m++) {
			segs[m] = rep[k].seg;
			r[m] = (struct kvf__segalloc_range){ rep[k].offset,
							     o->size };
		}
	}
	/* The second halves are group_segment()'s scratch. */
	for (size_t from = 0, to; from < m; from = to) {
		to = group_segment(segs, r, segs + cap, r + cap, from, m);
		kvf__segalloc_free_many(segs[from]->alloc, r + from, to - from);
	}
	free(heap);
}

/* The journal refused the removal: the object stays. */
static void back_to_complete(struct kvf__batch *b, size_t i)
{
	kvf__obj_set(b->obj[i], KVF__OBJ_COMPLETE);
}

enum kvf_status kvf_batch_remove(struct kvf_engine *e,
				 const struct kvf_key *keys, size_t n,
				 bool force, enum kvf_status *status)
{
	struct kvf__batch b;
	size_t removed;
	uint64_t now;
	int ret;

	ret = kvf__batch_begin(&b, e, KVF__OP_REMOVE, keys, n, status);
	if (ret)
		return ret;
	kvf__rcu_read_lock();
	kvf__batch_probe(&b);
	now = kvf__now(e);
	for (size_t i = 0; i < n; i++) {
		struct kvf__object *o;

		if (status[i] != KVF_OK)
			continue;
		status[i] = claim(&b, i, force, now, &o);
		if (status[i] == KVF_OK)
			b.obj[i] = o;
	}
	kvf__prof_mark(&b.span, KVF__STAGE_VALIDATE);
	removed = kvf__batch_commit(&b, KVF__MUT_OBJECT_REMOVE, retire_removed,
				    back_to_complete);
	if (removed)
		free_removed(&b);
	kvf__count_add(&e->nr_complete, -(int64_t)removed);
	kvf__rcu_read_unlock();
	return kvf__batch_end(&b, false);
}

/* ---- sweeps ----------------------------------------------------------- */

struct sweep {
	struct kvf_engine *e;
	const char *prefix;
	size_t prefix_len;
	bool force;
	uint64_t removed;
	int err;
	size_t nr;
	struct kvf_key keys[SWEEP_CHUNK];
	enum kvf_status status[SWEEP_CHUNK];
	char *copies[SWEEP_CHUNK];
};

static void sweep_flush(struct sweep *s)
{
	int ret;

	if (!s->nr)
		return;
	ret = kvf_batch_remove(s->e, s->keys, s->nr, s->force, s->status);
	if (ret == KVF_OK || ret == KVF_ERR_PARTIAL) {
		for (size_t i = 0; i < s->nr; i++) {
			s->removed += s->status[i] == KVF_OK;
			if (s->status[i] == KVF_ERR_JOURNAL ||
			    s->status[i] == KVF_ERR_JOURNAL_NO_SPACE ||
			    s->status[i] == KVF_ERR_IO)
				s->err = s->status[i];
		}
	} else {
		s->err = ret;
	}
	for (size_t i = 0; i < s->nr; i++)
		free(s->copies[i]);
	s->nr = 0;
}

static void sweep_visit(struct kvf__object *o, void *arg)
{
	struct sweep *s = arg;
	char *copy;

	if (kvf__obj_base(kvf__obj_load(o)) != KVF__OBJ_COMPLETE)
		return;
	if (s->prefix_len && (o->key_len < s->prefix_len ||
			      memcmp(kvf__object_key(o), s->prefix,
				     s->prefix_len)))
		return;
	copy = malloc(o->key_len);
	if (!copy) {
		s->err = KVF_ERR_NO_MEMORY;
		return;
	}
	memcpy(copy, kvf__object_key(o), o->key_len);
	s->copies[s->nr] = copy;
	s->keys[s->nr++] = (struct kvf_key){ copy, o->key_len };
	/* Still inside the walk's read-side section: remove nests in it. */
	if (s->nr == SWEEP_CHUNK)
		sweep_flush(s);
}

static int sweep(struct kvf_engine *e, const char *prefix, size_t len,
		 bool force, uint64_t *removed)
{
	struct sweep *s = calloc(1, sizeof(*s));
	int ret;

	if (!s)
		return KVF_ERR_NO_MEMORY;
	s->e = e;
	s->prefix = prefix;
	s->prefix_len = len;
	s->force = force;
	kvf__rcu_ensure_registered();
	kvf__rcu_read_lock();
	kvf__index_foreach(e->index, sweep_visit, s);
	kvf__rcu_read_unlock();
	sweep_flush(s);
	if (removed)
		*removed = s->removed;
	ret = s->err;
	free(s);
	return ret;
}

enum kvf_status kvf_remove_all(struct kvf_engine *e, bool force,
			       uint64_t *removed)
{
	if (!e)
		return KVF_ERR_INVALID_ARGUMENT;
	return sweep(e, NULL, 0, force, removed);
}

enum kvf_status kvf_remove_prefix(struct kvf_engine *e,
				  const struct kvf_key *prefix, bool force,
				  uint64_t *removed)
{
	if (!e || !prefix)
		return KVF_ERR_INVALID_ARGUMENT;
	if (!prefix->len || !prefix->data || prefix->len > e->cfg.max_key_len)
		return KVF_ERR_INVALID_KEY;
	return sweep(e, prefix->data, prefix->len, force, removed);
}
