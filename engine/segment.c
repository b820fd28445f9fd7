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
 *  2. drop the segment's replicas from their records (engine/replica_drop.c:
 *     copy-on-write, a record left with none is removed; found through the
 *     segment's allocator, so it costs what the segment held), journaled
 *     before the unmount record itself;
 *  3. wait another grace period, then free the allocator and the segment:
 *     no reader can still hold a record that points to it.
 * A client that unregisters or expires is unmounted segment by segment,
 * then forgotten.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "base/die.h"
#include "engine/internal.h"
#include "engine/mutation.h"
#include "engine/replica_drop.h"

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
	/* Its parks are noted by its slot (struct kvf__park_hint). */
	kvf__segalloc_set_park_hint(seg->alloc, &e->park_hint, old->nr);
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
		t->alloc[j] = old->alloc[i];
		if (j != i) /* moved down: its parks name its new slot */
			kvf__segalloc_set_park_hint(t->alloc[j], &e->park_hint,
						    j);
		j++;
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
	/* A replica holds a 48-bit offset (metadata/object.h). */
	if (!d->id || d->size < KVF_MIN_SEGMENT_SIZE ||
	    d->size - 1 > KVF__REPLICA_OFFSET_MAX ||
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

/* Whether @d may be mounted for @client_id. In a read-side section. */
static int mount_check(struct kvf_engine *e, uint64_t client_id,
		       const struct kvf_segment_desc *d)
{
	if (kvf__seg_find(e->segs, d->id, NULL))
		return KVF_ERR_SEGMENT_EXISTS;
	if (overlaps_mounted(e->segs, client_id, d->base, d->size))
		return KVF_ERR_SEGMENT_OVERLAP;
	return KVF_OK;
}

/*
 * Mount with seg_lock held. @journal false during recovery (the record is
 * already in the journal). seg_lock is what keeps the checks true until
 * the table is published (only its holders change the table and the
 * clients), so the journal append, which may wait for an fsync, runs
 * outside any read-side section.
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
	ret = mount_check(e, client_id, d);
	kvf__rcu_read_unlock();
	if (ret)
		return ret;
	ret = segment_new(e, client_id, d, &seg);
	if (ret)
		return ret;
	if (journal) {
		mount_mutation(&rec, client_id, d);
		ret = kvf__engine_journal(e, &rec, 1);
		if (ret)
			goto err_seg;
	}
	kvf__rcu_read_lock();
	ret = KVF_ERR_NO_MEMORY;
	c = client_get_or_add(e, client_id);
	if (c) {
		client_touch(e, c);
		ret = table_add(e, seg);
	}
	kvf__rcu_read_unlock();
	if (ret)
		goto err_seg;
	if (out)
		*out = seg;
	return KVF_OK;
err_seg:
	segment_free(seg);
	return ret;
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
	struct kvf__replica_drop *drop = kvf__replica_drop_prepare(e, seg,
								   journal);
	struct kvf__mutation rec = { .type = KVF__MUT_SEGMENT_UNMOUNT,
				     .segment_id = seg->id };
	int ret;

	if (!drop)
		return KVF_ERR_NO_MEMORY;
	__atomic_store_n(&seg->dead, 1, __ATOMIC_SEQ_CST);
	ret = table_del(e, slot);
	if (ret) {
		__atomic_store_n(&seg->dead, 0, __ATOMIC_SEQ_CST);
		kvf__replica_drop_cancel(drop);
		return ret;
	}
	kvf__rcu_synchronize();
	ret = kvf__replica_drop_segment(drop);
	if (journal && !ret)
		ret = kvf__engine_journal(e, &rec, 1);
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
