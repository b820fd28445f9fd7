/* SPDX-License-Identifier: MIT */
/*
 * engine/segment.c - clients, segments, mount/unmount and client expiry.
 *
 * Design: the mounted segments form a small copy-on-write table published
 * with RCU (struct kvf__seg_table), so placement and lookups read it with
 * no lock. Every change (mount, unmount, client add/remove, expiry) is
 * serialised by e->seg_lock; these are rare control-plane operations.
 * Clients live in a cds_lfht keyed by id: heartbeats are lock-free.
 *
 * Unmount, the delicate one:
 *  1. mark the segment dead and publish a table without it, then wait a
 *     grace period: every put_start that picked the segment from the old
 *     table has inserted its record by then (it picks and inserts inside
 *     one read-side section);
 *  2. drop the segment's replicas from their records (copy-on-write; a
 *     record left with none is removed). The records are found from the
 *     segment's own allocator: each block carries its owner's key hash,
 *     and the index finds a record by hash plus "has this replica". So an
 *     unmount (and a dead client's cleanup) costs what the segment held,
 *     never a walk of the whole table, and runs in slices of DROP_SLICE
 *     blocks per read-side section; readers are never stalled. A complete
 *     object's change is journaled in chunks, and until its chunk is
 *     journaled the object is held against other writers (the new record
 *     is HELD, a removed one REMOVING, engine/objstate.h): a put_end or
 *     remove of the same key cannot be journaled before the drop it
 *     follows, which replay would apply to the wrong object;
 *  3. wait another grace period, then free the allocator and the segment:
 *     no reader can still hold a record that points to it.
 */
#include "config.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "base/die.h"
#include "engine/internal.h"
#include "engine/mutation.h"
#include "engine/objstate.h"
#include "metadata/hash.h"

#define KVF_MIN_SEGMENT_SIZE (1ULL << 20)

struct kvf__seg_table *kvf__segs(struct kvf_engine *e)
{
	return kvf__rcu_deref(e->segs);
}

struct kvf__segment *kvf__seg_find(struct kvf__seg_table *t, uint64_t id,
				   uint32_t *slot)
{
	for (uint32_t i = 0; i < t->nr; i++) {
		if (t->seg[i]->id == id) {
			if (slot)
				*slot = i;
			return t->seg[i];
		}
	}
	return NULL;
}

/* ---- the segment table ------------------------------------------------ */

static struct kvf__seg_table *table_new(uint32_t nr)
{
	struct kvf__seg_table *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->nr = nr;
	t->seg = calloc(nr ? nr : 1, sizeof(*t->seg));
	t->alloc = calloc(nr ? nr : 1, sizeof(*t->alloc));
	if (!t->seg || !t->alloc) {
		free(t->seg);
		free(t->alloc);
		free(t);
		return NULL;
	}
	return t;
}

static void table_free(struct kvf__seg_table *t)
{
	free(t->seg);
	free(t->alloc);
	free(t);
}

static void table_free_rcu(struct rcu_head *head)
{
	kvf__rcu_callback_enter();
	table_free(caa_container_of(head, struct kvf__seg_table, rcu));
}

static void table_publish(struct kvf_engine *e, struct kvf__seg_table *t)
{
	struct kvf__seg_table *old = e->segs;

	kvf__rcu_publish(e->segs, t);
	kvf__rcu_call(&old->rcu, table_free_rcu);
}

/* Publish the current table plus @seg. Caller holds seg_lock. */
static int table_add(struct kvf_engine *e, struct kvf__segment *seg)
{
	struct kvf__seg_table *old = e->segs, *t = table_new(old->nr + 1);

	if (!t)
		return KVF_ERR_NO_MEMORY;
	for (uint32_t i = 0; i < old->nr; i++) {
		t->seg[i] = old->seg[i];
		t->alloc[i] = old->alloc[i];
	}
	t->seg[old->nr] = seg;
	t->alloc[old->nr] = seg->alloc;
	table_publish(e, t);
	return KVF_OK;
}

/* Publish the current table minus slot @slot. Caller holds seg_lock. */
static int table_del(struct kvf_engine *e, uint32_t slot)
{
	struct kvf__seg_table *old = e->segs, *t = table_new(old->nr - 1);
	uint32_t j = 0;

	if (!t)
		return KVF_ERR_NO_MEMORY;
	for (uint32_t i = 0; i < old->nr; i++) {
		if (i == slot)
			continue;
		t->seg[j] = old->seg[i];
		t->alloc[j++] = old->alloc[i];
	}
	table_publish(e, t);
	return KVF_OK;
}

/* ---- clients ------------------------------------------------------------ */

static int match_client(struct cds_lfht_node *node, const void *key)
{
	return caa_container_of(node, struct kvf__client, node)->id ==
	       *(const uint64_t *)key;
}

static unsigned long client_hash(uint64_t id)
{
	return (unsigned long)(id * 0x9e3779b97f4a7c15ULL);
}

/* Call inside a read-side section. */
static struct kvf__client *client_find(struct kvf_engine *e, uint64_t id)
{
	struct cds_lfht_iter iter;
	struct cds_lfht_node *node;

	cds_lfht_lookup(e->clients, client_hash(id), match_client, &id, &iter);
	node = cds_lfht_iter_get_node(&iter);
	if (!node)
		return NULL;
	kvf__tsan_acquire(node);
	return caa_container_of(node, struct kvf__client, node);
}

bool kvf__client_known(struct kvf_engine *e, uint64_t client_id)
{
	return client_find(e, client_id) != NULL;
}

/* Find or add @id. Caller holds seg_lock and the read lock. */
static struct kvf__client *client_get_or_add(struct kvf_engine *e, uint64_t id)
{
	struct kvf__client *c = client_find(e, id);

	if (c)
		return c;
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->id = id;
	c->last_seen_ns = kvf__now(e);
	kvf__tsan_release(&c->node);
	cds_lfht_add(e->clients, client_hash(id), &c->node);
	return c;
}

static void client_free_rcu(struct rcu_head *head)
{
	kvf__rcu_callback_enter();
	free(caa_container_of(head, struct kvf__client, rcu));
}

static void client_touch(struct kvf_engine *e, struct kvf__client *c)
{
	__atomic_store_n(&c->last_seen_ns, kvf__now(e), __ATOMIC_RELAXED);
}

enum kvf_status kvf_client_heartbeat(struct kvf_engine *e, uint64_t client_id)
{
	struct kvf__client *c;

	if (!e)
		return KVF_ERR_INVALID_ARGUMENT;
	kvf__rcu_ensure_registered();
	kvf__rcu_read_lock();
	c = client_find(e, client_id);
	if (c)
		client_touch(e, c);
	kvf__rcu_read_unlock();
	return c ? KVF_OK : KVF_ERR_CLIENT_NOT_FOUND;
}

enum kvf_status kvf_client_register(struct kvf_engine *e, uint64_t client_id)
{
	struct kvf__client *c;

	if (!e || !client_id)
		return KVF_ERR_INVALID_ARGUMENT;
	kvf__rcu_ensure_registered();
	/* Fast path: a known client is only touched, as by a heartbeat. */
	if (kvf_client_heartbeat(e, client_id) == KVF_OK)
		return KVF_OK;
	/* seg_lock serialises adds with mounts, expiry and unregister. */
	pthread_mutex_lock(&e->seg_lock);
	kvf__rcu_read_lock();
	c = client_get_or_add(e, client_id);
	if (c)
		client_touch(e, c);
	kvf__rcu_read_unlock();
	pthread_mutex_unlock(&e->seg_lock);
	return c ? KVF_OK : KVF_ERR_NO_MEMORY;
}

/* ---- mount -------------------------------------------------------------- */

static int check_desc(const struct kvf_segment_desc *d)
{
	if (!d->id || d->size < KVF_MIN_SEGMENT_SIZE ||
	    d->base + d->size < d->base)
		return KVF_ERR_INVALID_PARAMS;
	if (!d->name || strlen(d->name) > KVF_SEGMENT_NAME_MAX)
		return KVF_ERR_INVALID_PARAMS;
	if (d->endpoint && strlen(d->endpoint) > KVF_ENDPOINT_MAX)
		return KVF_ERR_INVALID_PARAMS;
	return KVF_OK;
}

static bool overlaps_mounted(struct kvf__seg_table *t, uint64_t client_id,
			     uint64_t base, uint64_t size)
{
	/* Ranges are in one client's address space: only compare its own. */
	for (uint32_t i = 0; i < t->nr; i++) {
		const struct kvf__segment *s = t->seg[i];

		if (s->client_id == client_id && base < s->base + s->size &&
		    s->base < base + size)
			return true;
	}
	return false;
}

static int segment_new(struct kvf_engine *e, uint64_t client_id,
		       const struct kvf_segment_desc *d,
		       struct kvf__segment **out)
{
	struct kvf__segment *seg = calloc(1, sizeof(*seg));
	int ret;

	if (!seg)
		return KVF_ERR_NO_MEMORY;
	/* A segment smaller than one aligned block is a parameter error. */
	ret = kvf__segalloc_create(d->size, e->cfg.alloc_alignment,
				   &seg->alloc);
	if (ret) {
		free(seg);
		return ret;
	}
	seg->id = d->id;
	seg->client_id = client_id;
	seg->base = d->base;
	seg->size = d->size;
	strcpy(seg->name, d->name);
	if (d->endpoint)
		strcpy(seg->endpoint, d->endpoint);
	*out = seg;
	return KVF_OK;
}

static void segment_free(struct kvf__segment *seg)
{
	kvf__segalloc_destroy(seg->alloc);
	free(seg);
}

static void mount_mutation(struct kvf__mutation *r, uint64_t client_id,
		       const struct kvf_segment_desc *d)
{
	memset(r, 0, sizeof(*r));
	r->type = KVF__MUT_SEGMENT_MOUNT;
	r->segment_id = d->id;
	r->client_id = client_id;
	r->base = d->base;
	r->size = d->size;
	r->name = d->name;
	r->endpoint = d->endpoint ? d->endpoint : "";
}

/*
 * Mount with seg_lock held. @journal false during recovery (the record is
 * already in the journal).
 */
int kvf__segment_mount_locked(struct kvf_engine *e, uint64_t client_id,
			      const struct kvf_segment_desc *d, bool journal,
			      struct kvf__segment **out)
{
	struct kvf__segment *seg;
	struct kvf__client *c;
	struct kvf__mutation rec;
	int ret;

	kvf__rcu_read_lock();
	if (kvf__seg_find(e->segs, d->id, NULL)) {
		ret = KVF_ERR_SEGMENT_EXISTS;
		goto out_unlock;
	}
	if (overlaps_mounted(e->segs, client_id, d->base, d->size)) {
		ret = KVF_ERR_SEGMENT_OVERLAP;
		goto out_unlock;
	}
	ret = segment_new(e, client_id, d, &seg);
	if (ret)
		goto out_unlock;
	if (journal) {
		mount_mutation(&rec, client_id, d);
		ret = kvf__engine_journal(e, &rec, 1);
		if (ret)
			goto err_seg;
	}
	ret = KVF_ERR_NO_MEMORY;
	c = client_get_or_add(e, client_id);
	if (!c)
		goto err_seg;
	client_touch(e, c);
	ret = table_add(e, seg);
	if (ret)
		goto err_seg;
	if (out)
		*out = seg;
out_unlock:
	kvf__rcu_read_unlock();
	return ret;
err_seg:
	segment_free(seg);
	goto out_unlock;
}

enum kvf_status kvf_segment_mount(struct kvf_engine *e, uint64_t client_id,
				  const struct kvf_segment_desc *seg)
{
	int ret;

	if (!e || !seg)
		return KVF_ERR_INVALID_ARGUMENT;
	if (!client_id)
		return KVF_ERR_INVALID_PARAMS;
	ret = check_desc(seg);
	if (ret)
		return ret;
	kvf__rcu_ensure_registered();
	pthread_mutex_lock(&e->seg_lock);
	ret = kvf__segment_mount_locked(e, client_id, seg, true, NULL);
	pthread_mutex_unlock(&e->seg_lock);
	return ret;
}

/* ---- unmount ------------------------------------------------------------ */

static int replica_index(const struct kvf__object *o,
			 const struct kvf__segment *seg)
{
	const struct kvf__replica *r = kvf__object_replicas_const(o);

	for (int i = 0; i < o->nr_replicas; i++)
		if (r[i].seg == seg)
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

/* Object changes of one unmount are journaled in chunks of this size. */
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

struct drop_ctx {
	struct kvf_engine *e;
	struct kvf__segment *seg;
	/*
	 * Records this unmount unpublished: freed by this thread after its
	 * own grace periods (drop_free), not by the call_rcu worker, whose
	 * burst of frees would be one more runnable thread preempting
	 * readers on a small machine. rc is the fallback when the list
	 * cannot grow.
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

/* Free @o after a grace period (see struct drop_ctx). */
static void drop_retire(struct drop_ctx *c, struct kvf__object *o)
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
static void drop_finish_remove(struct drop_ctx *c, struct drop_pending *p)
{
	if (kvf__index_remove(c->e->index, p->obj, p->hash) != KVF_OK)
		kvf__die("removing record vanished from the index");
	kvf__obj_set(p->obj, KVF__OBJ_DEAD);
	kvf__count_add(&c->e->nr_complete, -1);
	drop_retire(c, p->obj);
}

/*
 * Journal the collected object changes, then let other writers at the
 * objects (inside the walk's read section, so the records are still
 * there). A journal error is kept for the caller, but the changes stand:
 * the segment goes away regardless (see unmount_locked()).
 */
static void drop_flush(struct drop_ctx *c)
{
	int ret;

	if (!c->nr)
		return;
	ret = c->journal ? kvf__engine_journal(c->e, c->muts, c->nr) : KVF_OK;
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

static void drop_note(struct drop_ctx *c, enum kvf__mutation_type type,
		      struct kvf__object *o, uint64_t hash)
{
	c->muts[c->nr] = (struct kvf__mutation){ .type = type, .obj = o };
	c->pend[c->nr++] = (struct drop_pending){ o, hash };
	if (c->nr == DROP_CHUNK)
		drop_flush(c);
}

/* Wait a grace period, then free the retired records. Call outside a
 * read-side section: afterwards no reader can hold one. */
static void drop_free(struct drop_ctx *c)
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
 * Lock @o for a drop. Before any wait, the changes this unmount still
 * holds are journaled and released: the owner of an ENDING or REMOVING
 * record may itself be waiting for one of them (a batch claims its items
 * one by one). Returns false with *base DEAD or REPLACED.
 */
static bool drop_lock(struct drop_ctx *c, struct kvf__object *o,
		      uint32_t *base)
{
	unsigned spins = 0;

	if (kvf__obj_load(o) & KVF__OBJ_HELD)
		drop_flush(c); /* only this thread holds records */
	while (!kvf__obj_lock(o, base)) {
		if (*base == KVF__OBJ_DEAD || *base == KVF__OBJ_REPLACED)
			return false;
		drop_flush(c);
		kvf__obj_pause(&spins); /* ENDING or REMOVING: wait */
	}
	return true;
}

/*
 * Publish a copy of locked @o (base state @base) without replica @drop, in
 * state @state, and retire @o. NULL (and @o unlocked as it was) when the
 * copy cannot be allocated.
 */
static struct kvf__object *drop_by_copy(struct drop_ctx *c,
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
static enum drop_result drop_processing(struct drop_ctx *c,
					struct kvf__object *o, int drop,
					uint64_t hash)
{
	if (o->nr_replicas == 1) {
		kvf__obj_set(o, KVF__OBJ_DEAD);
		kvf__count_add(&c->e->nr_processing, -1);
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
static enum drop_result drop_complete(struct drop_ctx *c, struct kvf__object *o,
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
static enum drop_result drop_replica(struct drop_ctx *c, struct kvf__object *o,
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
static void drop_block(struct drop_ctx *c, const struct kvf__segalloc_block *b)
{
	struct kvf__replica_ref ref = { c->seg, b->offset };
	struct kvf__object *o;
	enum drop_result r = DROP_AGAIN;

	while (r != DROP_DONE) {
		o = kvf__index_lookup_hash(c->e->index, b->tag,
					   kvf__object_has_replica, &ref);
		if (!o)
			return; /* a pre-empted put's buffer, or already gone */
		r = drop_replica(c, o, b->tag);
		if (r == DROP_NO_MEMORY) {
			drop_flush(c); /* hold nothing while we wait */
			sched_yield(); /* the segment cannot go while o uses it */
		}
	}
}

/* Blocks handled per read-side section: grace periods keep flowing. */
#define DROP_SLICE 1024
/* Retired records freed per grace period the unmount waits for itself
 * (a synchronize costs 0.1-0.35 ms: a few per 100K objects). */
#define DROP_FREE_BATCH 16384

/*
 * Drop every replica living in @c->seg. The segment's allocator knows its
 * blocks and their owners' key hashes, so this costs what the segment
 * holds, not what the engine holds.
 */
static int drop_segment_replicas(struct drop_ctx *c)
{
	struct kvf__segalloc_block *blocks;
	size_t n;
	int ret;

	ret = kvf__segalloc_used_blocks(c->seg->alloc, &blocks, &n);
	if (ret)
		return ret;
	for (size_t s = 0; s < n; s += DROP_SLICE) {
		size_t end = n - s < DROP_SLICE ? n : s + DROP_SLICE;

		kvf__rcu_read_lock();
		for (size_t i = s; i < end; i++)
			drop_block(c, &blocks[i]);
		drop_flush(c);
		kvf__reclaim_flush(&c->rc);
		kvf__rcu_read_unlock();
		if (c->nr_retired >= DROP_FREE_BATCH)
			drop_free(c);
	}
	drop_free(c);
	free(blocks);
	return KVF_OK;
}

static void segment_free_rcu(struct rcu_head *head)
{
	kvf__rcu_callback_enter();
	segment_free(caa_container_of(head, struct kvf__segment, rcu));
}

/*
 * Unmount slot @slot of the current table. Caller holds seg_lock. The
 * objects' changes are journaled before the unmount itself, so every
 * prefix of the journal is consistent (no object refers to an unmounted
 * segment). A journal error is reported, but the segment is gone in
 * memory regardless: its owner is leaving and its memory with it.
 */
static int unmount_locked(struct kvf_engine *e, struct kvf__segment *seg,
			  uint32_t slot, bool journal)
{
	struct drop_ctx *ctx = calloc(1, sizeof(*ctx));
	struct kvf__mutation rec = { .type = KVF__MUT_SEGMENT_UNMOUNT,
				     .segment_id = seg->id };
	int ret;

	if (!ctx)
		return KVF_ERR_NO_MEMORY;
	ctx->e = e;
	ctx->seg = seg;
	ctx->journal = journal;
	__atomic_store_n(&seg->dead, 1, __ATOMIC_SEQ_CST);
	ret = table_del(e, slot);
	if (ret) {
		__atomic_store_n(&seg->dead, 0, __ATOMIC_SEQ_CST);
		free(ctx);
		return ret;
	}
	kvf__rcu_synchronize();
	while (drop_segment_replicas(ctx) == KVF_ERR_NO_MEMORY)
		sched_yield(); /* the snapshot; the segment must empty first */
	ret = ctx->err;
	if (journal && !ret)
		ret = kvf__engine_journal(e, &rec, 1);
	free(ctx->retired);
	free(ctx);
	kvf__deferred_forget_segment(e, seg);
	kvf__rcu_call(&seg->rcu, segment_free_rcu);
	return ret;
}

int kvf__segment_unmount_locked(struct kvf_engine *e, uint64_t client_id,
				uint64_t segment_id, bool journal)
{
	struct kvf__segment *seg;
	uint32_t slot;

	seg = kvf__seg_find(e->segs, segment_id, &slot);
	if (!seg)
		return KVF_ERR_SEGMENT_NOT_FOUND;
	if (client_id && seg->client_id != client_id)
		return KVF_ERR_ILLEGAL_CLIENT;
	return unmount_locked(e, seg, slot, journal);
}

enum kvf_status kvf_segment_unmount(struct kvf_engine *e, uint64_t client_id,
				    uint64_t segment_id)
{
	int ret;

	if (!e)
		return KVF_ERR_INVALID_ARGUMENT;
	if (!client_id)
		return KVF_ERR_INVALID_PARAMS;
	kvf__rcu_ensure_registered();
	pthread_mutex_lock(&e->seg_lock);
	ret = kvf__segment_unmount_locked(e, client_id, segment_id, true);
	pthread_mutex_unlock(&e->seg_lock);
	return ret;
}

int kvf__segment_query(struct kvf_engine *e, uint64_t segment_id,
		       struct kvf_segment_info *info)
{
	struct kvf__segment *seg;
	int ret = KVF_ERR_SEGMENT_NOT_FOUND;

	if (!e || !info)
		return KVF_ERR_INVALID_ARGUMENT;
	kvf__rcu_ensure_registered();
	kvf__rcu_read_lock();
	seg = kvf__seg_find(kvf__segs(e), segment_id, NULL);
	if (seg) {
		memset(info, 0, sizeof(*info));
		info->id = seg->id;
		info->client_id = seg->client_id;
		info->base = seg->base;
		info->size = seg->size;
		info->free_bytes = kvf__segalloc_free_bytes(seg->alloc);
		info->used_bytes = kvf__segalloc_used_bytes(seg->alloc);
		info->largest_free = kvf__segalloc_largest_free(seg->alloc);
		strcpy(info->name, seg->name);
		strcpy(info->endpoint, seg->endpoint);
		ret = KVF_OK;
	}
	kvf__rcu_read_unlock();
	return ret;
}

/* ---- client removal and expiry ------------------------------------------ */

/* Unmount all of @c's segments and forget it. Caller holds seg_lock. */
static int client_remove_locked(struct kvf_engine *e, struct kvf__client *c,
				bool journal)
{
	struct kvf__mutation rec;
	struct kvf__segment *seg;
	int ret;

	for (;;) {
		uint32_t slot = UINT32_MAX;

		for (uint32_t i = 0; i < e->segs->nr; i++)
			if (e->segs->seg[i]->client_id == c->id)
				slot = i;
		if (slot == UINT32_MAX)
			break;
		seg = e->segs->seg[slot];
		ret = unmount_locked(e, seg, slot, journal);
		if (ret)
			return ret;
	}
	if (journal) {
		memset(&rec, 0, sizeof(rec));
		rec.type = KVF__MUT_CLIENT_REMOVE;
		rec.client_id = c->id;
		ret = kvf__engine_journal(e, &rec, 1);
		if (ret)
			return ret;
	}
	kvf__rcu_read_lock();
	cds_lfht_del(e->clients, &c->node);
	kvf__rcu_read_unlock();
	kvf__rcu_call(&c->rcu, client_free_rcu);
	return KVF_OK;
}

int kvf__client_forget_locked(struct kvf_engine *e, uint64_t client_id)
{
	struct kvf__client *c;

	kvf__rcu_read_lock();
	c = client_find(e, client_id);
	kvf__rcu_read_unlock();
	return c ? client_remove_locked(e, c, false) : KVF_OK;
}

enum kvf_status kvf_client_unregister(struct kvf_engine *e, uint64_t client_id)
{
	struct kvf__client *c;
	int ret;

	if (!e)
		return KVF_ERR_INVALID_ARGUMENT;
	kvf__rcu_ensure_registered();
	pthread_mutex_lock(&e->seg_lock);
	kvf__rcu_read_lock();
	c = client_find(e, client_id);
	kvf__rcu_read_unlock();
	/* seg_lock keeps @c alive: only seg_lock holders free clients. */
	ret = c ? client_remove_locked(e, c, true) : KVF_ERR_CLIENT_NOT_FOUND;
	pthread_mutex_unlock(&e->seg_lock);
	return ret;
}

int kvf__expire_clients(struct kvf_engine *e)
{
	uint64_t now = kvf__now(e);
	struct cds_lfht_iter iter;
	struct kvf__client *c;
	int ret = KVF_OK;

	pthread_mutex_lock(&e->seg_lock);
	for (;;) {
		struct kvf__client *dead = NULL;

		kvf__rcu_read_lock();
		cds_lfht_for_each_entry(e->clients, &iter, c, node) {
			uint64_t seen = __atomic_load_n(&c->last_seen_ns,
							__ATOMIC_RELAXED);

			if (seen + e->client_ttl_ns < now) {
				dead = c;
				break;
			}
		}
		kvf__rcu_read_unlock();
		if (!dead)
			break;
		ret = client_remove_locked(e, dead, true);
		if (ret)
			break;
		__atomic_fetch_add(&e->nr_expired, 1, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&e->seg_lock);
	return ret;
}

/* ---- accounting audit --------------------------------------------------- */

static uint64_t block_bytes(const struct kvf__segment *seg, uint64_t size)
{
	uint64_t mask = kvf__segalloc_alignment(seg->alloc) - 1;

	return (size + mask) & ~mask;
}

static void audit_visit(struct kvf__object *o, void *arg)
{
	struct kvf__audit *a = arg;
	const struct kvf__replica *r = kvf__object_replicas_const(o);
	uint32_t base = kvf__obj_base(kvf__obj_load(o));

	if (base == KVF__OBJ_DEAD || base == KVF__OBJ_REPLACED)
		return;
	a->complete += base == KVF__OBJ_COMPLETE;
	a->processing += base == KVF__OBJ_PROCESSING;
	for (unsigned i = 0; i < o->nr_replicas; i++)
		a->live_bytes += block_bytes(r[i].seg, o->size);
}

void kvf__engine_audit(struct kvf_engine *e, struct kvf__audit *out)
{
	struct kvf__seg_table *t;

	memset(out, 0, sizeof(*out));
	kvf__rcu_ensure_registered();
	kvf__rcu_read_lock();
	t = kvf__segs(e);
	for (uint32_t i = 0; i < t->nr; i++)
		out->used_bytes += kvf__segalloc_used_bytes(t->alloc[i]);
	kvf__index_foreach(e->index, audit_visit, out);
	pthread_mutex_lock(&e->deferred_lock);
	for (size_t i = 0; i < e->nr_deferred; i++)
		out->deferred_bytes += block_bytes(e->deferred[i].seg,
						   e->deferred[i].size);
	pthread_mutex_unlock(&e->deferred_lock);
	kvf__rcu_read_unlock();
	out->nr_complete = __atomic_load_n(&e->nr_complete, __ATOMIC_RELAXED);
	out->nr_processing = __atomic_load_n(&e->nr_processing,
					     __ATOMIC_RELAXED);
}

/* ---- init / fini -------------------------------------------------------- */

int kvf__segments_init(struct kvf_engine *e)
{
	e->segs = table_new(0);
	if (!e->segs)
		return KVF_ERR_NO_MEMORY;
	e->clients = cds_lfht_new_flavor(64, 64, 0,
					 CDS_LFHT_AUTO_RESIZE |
						 CDS_LFHT_ACCOUNTING,
					 kvf__rcu_flavor(), NULL);
	if (!e->clients) {
		table_free(e->segs);
		return KVF_ERR_NO_MEMORY;
	}
	return KVF_OK;
}

/* At close: no other thread, index already empty. */
void kvf__segments_fini(struct kvf_engine *e)
{
	struct cds_lfht_iter iter;
	struct kvf__client *c;

	if (e->clients) {
		kvf__rcu_read_lock();
		cds_lfht_for_each_entry(e->clients, &iter, c, node) {
			cds_lfht_del(e->clients, &c->node);
			kvf__rcu_call(&c->rcu, client_free_rcu);
		}
		kvf__rcu_read_unlock();
	}
	kvf__rcu_barrier();
	if (e->clients && cds_lfht_destroy(e->clients, NULL))
		kvf__die("clients table not empty at close");
	if (e->segs) {
		for (uint32_t i = 0; i < e->segs->nr; i++)
			segment_free(e->segs->seg[i]);
		table_free(e->segs);
	}
}
