/* SPDX-License-Identifier: MIT */
/*
 * engine/recovery.c - rebuilding the engine from its journal at open.
 *
 * The journal streams its image (segments, then objects) and then the log
 * tail, in order; each record is applied with the rules journal/journal.h
 * states (a mount or a put replaces what has the same id or key; changing
 * or removing something absent does nothing), so replay is idempotent.
 *
 * Allocators are rebuilt by reserving exactly the recorded ranges: a
 * replica outside its segment, in an unknown segment, or overlapping
 * another is a damaged journal and refuses the open. Puts that were
 * started but never ended were never journaled: their space is free.
 *
 * Time does not survive a restart (the engine clock is monotonic and
 * per-process): recovered objects have no lease, soft pins restart their
 * full TTL, and every owner of a mounted segment gets a fresh client TTL
 * to heartbeat.
 *
 * Runs single-threaded inside kvf_engine_open(), before the background
 * thread starts, with seg_lock held for the helpers that expect it.
 */
#include "config.h"

#include <string.h>

#include "engine/die.h"
#include "engine/internal.h"
#include "engine/objstate.h"
#include "journal/journal.h"
#include "metadata/hash.h"

struct replay {
	struct kvf_engine *e;
	uint64_t objects;
	struct kvf__reclaim rc;
};

static struct kvf__object *find(struct kvf_engine *e, const char *key,
				size_t len, uint64_t hash)
{
	struct kvf_key k = { key, len };
	struct kvf__object *o;

	kvf__index_lookup_batch(e->index, 1, &hash, &k, &o);
	return o;
}

static void drop_object(struct replay *rp, struct kvf__object *o,
			uint64_t hash)
{
	struct kvf_engine *e = rp->e;

	kvf__object_retire(e, o, hash, &rp->rc);
	kvf__obj_set(o, KVF__OBJ_DEAD);
	kvf__replicas_free(o);
	kvf__count_add(&e->nr_complete, -1);
}

static int apply_mount(struct kvf_engine *e, const struct kvf__jrec *r)
{
	char name[KVF_SEGMENT_NAME_MAX + 1], endpoint[KVF_ENDPOINT_MAX + 1];
	struct kvf_segment_desc d = { .id = r->mount.segment_id,
				      .name = name,
				      .base = r->mount.base,
				      .size = r->mount.size,
				      .endpoint = endpoint };

	if (r->mount.name_len > KVF_SEGMENT_NAME_MAX ||
	    r->mount.endpoint_len > KVF_ENDPOINT_MAX)
		return KVF_ERR_JOURNAL_CORRUPT;
	memcpy(name, r->mount.name, r->mount.name_len);
	name[r->mount.name_len] = 0;
	memcpy(endpoint, r->mount.endpoint, r->mount.endpoint_len);
	endpoint[r->mount.endpoint_len] = 0;
	/* A mount replaces a segment with the same id. */
	kvf__segment_unmount_locked(e, 0, d.id, false);
	return kvf__segment_mount_locked(e, r->mount.client_id, &d, false,
					 NULL) ?
		       KVF_ERR_JOURNAL_CORRUPT :
		       KVF_OK;
}

/*
 * Fill @o's replicas from @r, reserving each range (tagged with the key
 * hash @hash, as put_start tags them) when @reserve. Returns
 * KVF_ERR_JOURNAL_CORRUPT for an unknown segment or a range not free; then
 * @o->nr_replicas counts the replicas filled (and reserved) so far, and
 * @o is only fit for kvf__replicas_free() and kvf__object_free().
 */
static int set_replicas(struct kvf_engine *e, struct kvf__object *o,
			const struct kvf__jrec *r, uint64_t hash, bool reserve)
{
	struct kvf__replica *rep = kvf__object_replicas(o);

	for (unsigned i = 0; i < r->obj.nr_replicas; i++) {
		struct kvf__segment *seg;

		seg = kvf__seg_find(e->segs, r->obj.replicas[i].segment_id,
				    NULL);
		if (!seg) {
			o->nr_replicas = (uint8_t)i; /* undo only these */
			return KVF_ERR_JOURNAL_CORRUPT;
		}
		if (reserve &&
		    kvf__segalloc_reserve_tagged(seg->alloc,
						 r->obj.replicas[i].offset,
						 o->size, hash) != KVF_OK) {
			o->nr_replicas = (uint8_t)i; /* undo only these */
			return KVF_ERR_JOURNAL_CORRUPT;
		}
		rep[i].seg = seg;
		rep[i].offset = r->obj.replicas[i].offset;
	}
	return KVF_OK;
}

static int apply_put(struct replay *rp, const struct kvf__jrec *r)
{
	struct kvf_engine *e = rp->e;
	uint64_t hash = kvf__key_hash(r->obj.key, r->obj.key_len);
	struct kvf__object *old, *o;
	int ret;

	old = find(e, r->obj.key, r->obj.key_len, hash);
	if (old)
		drop_object(rp, old, hash);
	o = kvf__index_object_new(e->index, r->obj.key, r->obj.key_len,
				  r->obj.nr_replicas);
	if (!o)
		return KVF_ERR_NO_MEMORY;
	o->size = r->obj.size;
	o->flags |= r->obj.flags & (KVF__OBJ_HARD_PIN | KVF__OBJ_SOFT_PIN);
	if (o->flags & KVF__OBJ_SOFT_PIN)
		o->stamp = kvf__now(e) + e->soft_pin_ns;
	ret = set_replicas(e, o, r, hash, true);
	if (ret) {
		kvf__replicas_free(o);
		kvf__object_free(o);
		return ret;
	}
	o->state = KVF__OBJ_COMPLETE;
	if (kvf__index_insert_unique(e->index, o, hash))
		kvf__die("replay: key present after it was dropped");
	kvf__count_add(&e->nr_complete, 1);
	rp->objects++;
	return KVF_OK;
}

/* The new replica set is a subset of the old: free what it left out. */
static int apply_replicas(struct replay *rp, const struct kvf__jrec *r)
{
	struct kvf_engine *e = rp->e;
	uint64_t hash = kvf__key_hash(r->obj.key, r->obj.key_len);
	const struct kvf__replica *orep, *nrep;
	struct kvf__object *old, *o;
	int ret;

	old = find(e, r->obj.key, r->obj.key_len, hash);
	if (!old)
		return KVF_OK;
	o = kvf__index_object_new(e->index, r->obj.key, r->obj.key_len,
				  r->obj.nr_replicas);
	if (!o)
		return KVF_ERR_NO_MEMORY;
	o->size = old->size;
	o->flags = old->flags;
	o->stamp = old->stamp;
	ret = set_replicas(e, o, r, hash, false);
	if (ret) {
		kvf__object_free(o);
		return ret;
	}
	orep = kvf__object_replicas_const(old);
	nrep = kvf__object_replicas_const(o);
	for (unsigned i = 0; i < old->nr_replicas; i++) {
		bool kept = false;

		for (unsigned j = 0; j < o->nr_replicas; j++)
			kept |= nrep[j].seg == orep[i].seg &&
				nrep[j].offset == orep[i].offset;
		if (!kept)
			kvf__segalloc_free(orep[i].seg->alloc, orep[i].offset,
					   old->size);
	}
	o->state = KVF__OBJ_COMPLETE;
	if (kvf__index_replace(e->index, old, o, hash) != KVF_OK)
		kvf__die("replay: record vanished");
	kvf__obj_set(old, KVF__OBJ_REPLACED);
	kvf__reclaim_add(&rp->rc, old);
	return KVF_OK;
}

static int apply_remove(struct replay *rp, const struct kvf__jrec *r)
{
	uint64_t hash = kvf__key_hash(r->obj.key, r->obj.key_len);
	struct kvf__object *o = find(rp->e, r->obj.key, r->obj.key_len, hash);

	if (o)
		drop_object(rp, o, hash);
	return KVF_OK;
}

static int apply_object(struct replay *rp, const struct kvf__jrec *r)
{
	int ret;

	kvf__rcu_read_lock();
	switch (r->type) {
	case KVF__JREC_OBJECT_PUT:
		ret = apply_put(rp, r);
		break;
	case KVF__JREC_OBJECT_REPLICAS:
		ret = apply_replicas(rp, r);
		break;
	default:
		ret = apply_remove(rp, r);
		break;
	}
	kvf__rcu_read_unlock();
	return ret;
}

static int apply_record(void *arg, const struct kvf__jrec *r, uint64_t seq)
{
	struct replay *rp = arg;
	struct kvf_engine *e = rp->e;
	int ret;

	(void)seq;
	switch (r->type) {
	case KVF__JREC_SEGMENT_MOUNT:
		return apply_mount(e, r);
	case KVF__JREC_SEGMENT_UNMOUNT:
		ret = kvf__segment_unmount_locked(e, 0, r->unmount.segment_id,
						  false);
		return ret == KVF_ERR_SEGMENT_NOT_FOUND ? KVF_OK : ret;
	case KVF__JREC_CLIENT_REMOVE:
		return kvf__client_forget_locked(e, r->client.client_id);
	case KVF__JREC_OBJECT_PUT:
	case KVF__JREC_OBJECT_REPLICAS:
	case KVF__JREC_OBJECT_REMOVE:
		return apply_object(rp, r);
	}
	return KVF_ERR_JOURNAL_CORRUPT;
}

int kvf__engine_recover(struct kvf_engine *e)
{
	static const struct kvf__journal_replay_ops ops = {
		.record = apply_record,
	};
	struct replay rp = { .e = e };
	uint64_t t0 = kvf__now(e);
	int ret;

	pthread_mutex_lock(&e->seg_lock);
	ret = kvf__journal_replay(e->journal, &ops, &rp);
	kvf__reclaim_flush(&rp.rc);
	pthread_mutex_unlock(&e->seg_lock);
	e->recovered_objects = (uint64_t)__atomic_load_n(&e->nr_complete,
							 __ATOMIC_RELAXED);
	e->recovery_ns = kvf__now(e) - t0;
	return ret;
}
