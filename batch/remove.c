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

/* The removal is journaled: unlink and free. */
static void retire_removed(struct kvf__batch *b, size_t i)
{
	struct kvf__object *o = b->obj[i];

	kvf__object_retire(b->e, o, b->hash[i], &b->rc);
	kvf__obj_set(o, KVF__OBJ_DEAD);
	kvf__replicas_free(o);
}

/* The journal refused the removal: the object stays. */
static void back_to_complete(struct kvf__batch *b, size_t i)
{
	kvf__obj_set(b->obj[i], KVF__OBJ_COMPLETE);
}

int kvf_batch_remove(struct kvf_engine *e, const struct kvf_key *keys,
		     size_t n, bool force, enum kvf_status *status)
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

int kvf_remove_all(struct kvf_engine *e, bool force, uint64_t *removed)
{
	if (!e)
		return KVF_ERR_INVALID_ARGUMENT;
	return sweep(e, NULL, 0, force, removed);
}

int kvf_remove_prefix(struct kvf_engine *e, const struct kvf_key *prefix,
		      bool force, uint64_t *removed)
{
	if (!e || !prefix)
		return KVF_ERR_INVALID_ARGUMENT;
	if (!prefix->len || !prefix->data || prefix->len > e->cfg.max_key_len)
		return KVF_ERR_INVALID_KEY;
	return sweep(e, prefix->data, prefix->len, force, removed);
}
