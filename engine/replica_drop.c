/* SPDX-License-Identifier: MIT */
/*
 * engine/replica_drop.c - dropping a segment's replicas from their records.
 *
 * A segment that goes (unmount, a client unregistered or expired) takes
 * its replicas with it. Each record with a replica there is replaced by a
 * copy without it, copy-on-write, so readers holding the old record are
 * unaffected; a record left with no replica is removed. The records are
 * found from the segment's own allocator: each used block carries its
 * owner's key hash, and the index finds a record by hash plus "has this
 * replica". So a drop costs what the segment held, never a walk of the
 * whole table, and runs in slices of DROP_SLICE blocks per read-side
 * section: grace periods keep flowing and readers are never stalled.
 *
 * Ordering with the journal. A processing object's drop journals nothing
 * (its put was never journaled). A complete object's change is journaled
 * in chunks of DROP_CHUNK, and until its chunk is journaled the object is
 * held against other writers: the new record is HELD, a removed one stays
 * REMOVING (metadata/objstate.h). So a put_end or remove of the same key
 * cannot be journaled before the drop it follows, which replay would
 * apply to the wrong object. Before this thread waits for anything (an
 * ENDING or REMOVING owner, memory), it journals and releases what it
 * holds: that owner may itself be waiting for one of our objects (a
 * batch claims its items one by one), so nobody waits in a cycle.
 *
 * Records this drop unpublished are freed by this thread after its own
 * grace periods, in batches of DROP_FREE_BATCH, not by the call_rcu
 * worker, whose burst of frees would be one more runnable thread
 * preempting readers on a small machine.
 */
#include "config.h"

#include <sched.h>
#include <stdlib.h>

#include "base/die.h"
#include "engine/internal.h"
#include "engine/mutation.h"
#include "engine/replica_drop.h"
#include "metadata/objstate.h"

/* Which replica of @o lives in @seg (a record has at most one), or -1. */
static int replica_index(const struct kvf__object *o,
			 const struct kvf__segment *seg)
{
	const struct kvf__replica *r = kvf__object_replicas_const(o);

	for (int i = 0; i < o->nr_replicas; i++)
		if (kvf__replica_seg(&r[i]) == seg)
			return i;
	return -1;
}

/* A copy of locked @o without replica @drop, in state @state. */
static struct kvf__object *copy_without(struct kvf_engine *e,
					const struct kvf__object *o, int drop,
					uint32_t state)
{
	const struct kvf__replica *r = kvf__object_replicas_const(o);
	struct kvf__replica *nr;
	struct kvf__object *n;
	int j = 0;

	n = kvf__index_object_new(e->index, e->arena, kvf__object_key(o),
				  o->key_len, o->nr_replicas - 1u);
	if (!n)
		return NULL;
	n->size = o->size;
	kvf__object_set_putter(n, kvf__object_putter(o));
	n->stamp = o->stamp;
	n->flags = (uint8_t)((o->flags & ~KVF__OBJ_HOOKED) |
			     (n->flags & KVF__OBJ_HOOKED));
	/* Client or lease, whichever the state makes it (read after LOCKED:
	 * the lease half of the Dekker pair with readers). */
	n->owner = kvf__obj_lease(o);
	nr = kvf__object_replicas(n);
	for (int i = 0; i < o->nr_replicas; i++)
		if (i != drop)
			nr[j++] = r[i];
	n->state = state;
	return n;
}

/* Object changes of one drop are journaled in chunks of this size. */
#define DROP_CHUNK 256

/*
 * A complete object's change, made in memory but not yet journaled: the
 * new record is HELD (REPLICAS) or the old one REMOVING (REMOVE), so no
 * other writer can journal anything about the object before it.
 */
struct drop_pending {
	struct kvf__object *obj;
	uint64_t hash;
};

struct kvf__replica_drop {
	struct kvf_engine *e;
	struct kvf__segment *seg;
	/*
	 * Records this drop unpublished, freed by drop_free() (see the note
	 * at the top); rc is the fallback when the list cannot grow.
	 */
	struct kvf__object **retired;
	size_t nr_retired, cap_retired;
	struct kvf__reclaim rc;
	bool journal;
	int err;      /* first journal error */
	size_t nr;
	struct kvf__mutation muts[DROP_CHUNK];
	struct drop_pending pend[DROP_CHUNK];
};

/* Free @o after a grace period (see struct kvf__replica_drop). */
static void drop_retire(struct kvf__replica_drop *c, struct kvf__object *o)
{
	if (c->nr_retired == c->cap_retired) {
		size_t cap = c->cap_retired ? 2 * c->cap_retired : 4096;
		struct kvf__object **v = realloc(c->retired, cap * sizeof(*v));

		if (!v) {
			kvf__reclaim_add(&c->rc, o);
			return;
		}
		c->retired = v;
		c->cap_retired = cap;
	}
	c->retired[c->nr_retired++] = o;
}

/* A complete object lost its last replica: unlink it, now journaled. */
static void drop_finish_remove(struct kvf__replica_drop *c, struct drop_pending *p)
{
	if (kvf__index_remove(c->e->index, p->obj, p->hash) != KVF_OK)
		kvf__die("removing record vanished from the index");
	kvf__obj_set(p->obj, KVF__OBJ_DEAD);
	kvf__count_add(&c->e->nr_complete, -1);
	if (kvf__soft_pinned(p->obj))
		kvf__count_add(&c->e->nr_soft_pinned, -1);
	drop_retire(c, p->obj);
}

/*
 * Journal the collected object changes, then let other writers at the
 * objects. The append may wait for an fsync, so it runs outside the walk's
 * read section (left and entered again: call at exactly one level). The
 * pending records stay valid meanwhile: this drop owns every one of them
 * (REMOVING, or HELD, which every other writer waits out), so nobody else
 * can unlink them. Any other record looked up before must be looked up
 * again afterwards. A journal error is kept for the caller, but the
 * changes stand: the segment goes away regardless (engine/segment.c:
 * unmount_locked()).
 */
static void drop_flush(struct kvf__replica_drop *c)
{
	int ret = KVF_OK;

	if (!c->nr)
		return;
	if (c->journal) {
		kvf__rcu_read_unlock();
		ret = kvf__engine_journal(c->e, c->muts, c->nr);
		kvf__rcu_read_lock();
	}
	if (ret && !c->err)
		c->err = ret;
	for (size_t i = 0; i < c->nr; i++) {
		if (c->muts[i].type == KVF__MUT_OBJECT_REMOVE)
			drop_finish_remove(c, &c->pend[i]);
		else
			kvf__obj_set(c->pend[i].obj, KVF__OBJ_COMPLETE);
	}
	c->nr = 0;
}

static void drop_note(struct kvf__replica_drop *c, enum kvf__mutation_type type,
		      struct kvf__object *o, uint64_t hash)
{
	c->muts[c->nr] = (struct kvf__mutation){ .type = type, .obj = o };
	c->pend[c->nr++] = (struct drop_pending){ o, hash };
	if (c->nr == DROP_CHUNK)
		drop_flush(c);
}

/* Wait a grace period, then free the retired records. Call outside a
 * read-side section: afterwards no reader can hold one. */
static void drop_free(struct kvf__replica_drop *c)
{
	if (!c->nr_retired)
		return;
	kvf__rcu_synchronize();
	for (size_t i = 0; i < c->nr_retired; i++)
		kvf__object_free(c->retired[i]);
	c->nr_retired = 0;
}

enum drop_result { DROP_DONE, DROP_AGAIN, DROP_NO_MEMORY };

/*
 * Lock @o for a drop. Before any wait, the changes this drop still
 * holds are journaled and released: the owner of an ENDING or REMOVING
 * record may itself be waiting for one of them (a batch claims its items
 * one by one). Returns false with *base DEAD, or REPLACED when @o must be
 * looked up again (it was, or a flush left the read section meanwhile and
 * @o, not ours, may be gone).
 */
static bool drop_lock(struct kvf__replica_drop *c, struct kvf__object *o,
		      uint32_t *base)
{
	unsigned spins = 0;

	if (kvf__obj_load(o) & KVF__OBJ_HELD)
		drop_flush(c); /* @o is ours: HELD kept it in the index */
	while (!kvf__obj_lock(o, base)) {
		if (*base == KVF__OBJ_DEAD || *base == KVF__OBJ_REPLACED)
			return false;
		if (c->nr) {
			drop_flush(c);
			*base = KVF__OBJ_REPLACED;
			return false;
		}
		kvf__obj_pause(&spins); /* ENDING or REMOVING: wait */
	}
	return true;
}

/*
 * Publish a copy of locked @o (base state @base) without replica @drop, in
 * state @state, and retire @o. NULL (and @o unlocked as it was) when the
 * copy cannot be allocated.
 */
static struct kvf__object *drop_by_copy(struct kvf__replica_drop *c,
					struct kvf__object *o, int drop,
					uint64_t hash, uint32_t base,
					uint32_t state)
{
	struct kvf__object *n = copy_without(c->e, o, drop, state);

	if (!n) {
		kvf__obj_set(o, base);
		return NULL;
	}
	if (kvf__index_replace(c->e->index, o, n, hash) != KVF_OK)
		kvf__die("locked record vanished from the index");
	kvf__obj_set(o, KVF__OBJ_REPLACED);
	drop_retire(c, o);
	return n;
}

/* Drop processing @o's replica @drop: nothing was journaled about it. */
static enum drop_result drop_processing(struct kvf__replica_drop *c,
					struct kvf__object *o, int drop,
					uint64_t hash)
{
	if (o->nr_replicas == 1) {
		kvf__obj_set(o, KVF__OBJ_DEAD);
		kvf__count_add(&c->e->nr_processing, -1);
		if (kvf__soft_pinned(o))
			kvf__count_add(&c->e->nr_soft_pinned, -1);
		if (kvf__index_remove(c->e->index, o, hash) != KVF_OK)
			kvf__die("locked record vanished from the index");
		drop_retire(c, o);
		return DROP_DONE;
	}
	return drop_by_copy(c, o, drop, hash, KVF__OBJ_PROCESSING,
			    KVF__OBJ_PROCESSING) ?
		       DROP_DONE :
		       DROP_NO_MEMORY;
}

/*
 * Drop complete @o's replica @drop. The change is visible to readers at
 * once but held against writers until drop_flush() journaled it: a put
 * or remove of the key that follows is journaled after it, so replay
 * meets them in the order they happened.
 */
static enum drop_result drop_complete(struct kvf__replica_drop *c, struct kvf__object *o,
				      int drop, uint64_t hash)
{
	struct kvf__object *n;

	if (o->nr_replicas == 1) {
		kvf__obj_set(o, KVF__OBJ_REMOVING);
		drop_note(c, KVF__MUT_OBJECT_REMOVE, o, hash);
		return DROP_DONE;
	}
	n = drop_by_copy(c, o, drop, hash, KVF__OBJ_COMPLETE,
			 KVF__OBJ_COMPLETE | KVF__OBJ_HELD);
	if (!n)
		return DROP_NO_MEMORY;
	drop_note(c, KVF__MUT_OBJECT_REPLICAS, n, hash);
	return DROP_DONE;
}

/*
 * Drop @seg's replica from @o (key hash @hash). The record is locked for a
 * memcpy only. ENDING/REMOVING owners finish on their own; we wait for
 * their verdict. DROP_AGAIN: @o was replaced meanwhile, look it up again.
 */
static enum drop_result drop_replica(struct kvf__replica_drop *c, struct kvf__object *o,
				     uint64_t hash)
{
	uint32_t base;
	int drop = replica_index(o, c->seg);

	if (drop < 0)
		return DROP_DONE;
	if (!drop_lock(c, o, &base))
		return base == KVF__OBJ_DEAD ? DROP_DONE : DROP_AGAIN;
	if (base == KVF__OBJ_PROCESSING)
		return drop_processing(c, o, drop, hash);
	return drop_complete(c, o, drop, hash);
}

/* Drop the replica in block @b (tagged with its owner's key hash). */
static void drop_block(struct kvf__replica_drop *c, const struct kvf__segalloc_block *b)
{
	struct kvf__replica_ref ref = { c->seg, b->offset };
	struct kvf__object *o;
	enum drop_result r = DROP_AGAIN;

	while (r != DROP_DONE) {
		o = kvf__index_lookup_hash(c->e->index, b->tag,
					   kvf__object_has_replica, &ref);
		if (!o)
			return; /* a pre-empted put's buffer, or already gone */
		/* The tag may hold the hash's high half only (segalloc.h). */
		r = drop_replica(c, o, kvf__object_hash(o));
		if (r == DROP_NO_MEMORY) {
			drop_flush(c); /* hold nothing while we wait */
			sched_yield(); /* the segment cannot go while o uses it */
		}
	}
}

/* Blocks handled per read-side section: grace periods keep flowing. */
#define DROP_SLICE 1024
/* Retired records freed per grace period the drop waits for itself
 * (a synchronize costs 0.1-0.35 ms: a few per 100K objects). */
#define DROP_FREE_BATCH 16384

/*
 * Drop every replica living in @c->seg. The segment's allocator knows its
 * blocks and their owners' key hashes, so this costs what the segment
 * holds, not what the engine holds. The blocks are read a slice at a time
 * in address order (kvf__segalloc_scan()), not copied out whole first: a
 * dying segment takes no new blocks, and the ones a slice drops are freed
 * behind the cursor, so each block is seen once; a whole copy cost 24
 * bytes per block at once (page faults: unmounting 200,000 objects took
 * the master more CPU than putting them).
 */
static void drop_segment_replicas(struct kvf__replica_drop *c)
{
	struct kvf__segalloc_block blocks[DROP_SLICE];
	uint64_t from = 0, cap = kvf__segalloc_capacity(c->seg->alloc);

	while (from < cap) {
		size_t n = kvf__segalloc_scan(c->seg->alloc, from, blocks,
					      DROP_SLICE, &from);

		kvf__rcu_read_lock();
		for (size_t i = 0; i < n; i++)
			drop_block(c, &blocks[i]);
		drop_flush(c);
		kvf__reclaim_flush(&c->rc);
		kvf__rcu_read_unlock();
		if (c->nr_retired >= DROP_FREE_BATCH)
			drop_free(c);
	}
	drop_free(c);
}

struct kvf__replica_drop *kvf__replica_drop_prepare(struct kvf_engine *e,
						    struct kvf__segment *seg,
						    bool journal)
{
	struct kvf__replica_drop *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->e = e;
	c->seg = seg;
	c->journal = journal;
	return c;
}

int kvf__replica_drop_segment(struct kvf__replica_drop *c)
{
	int ret;

	drop_segment_replicas(c);
	ret = c->err;
	free(c->retired);
	free(c);
	return ret;
}

void kvf__replica_drop_cancel(struct kvf__replica_drop *c)
{
	free(c);
}
