/* SPDX-License-Identifier: MIT */
/*
 * engine/segment.c - clients, segments, mount/unmount and client expiry.
 *
 * Design: the mounted segments form a copy-on-write table published with
 * RCU (struct kvf__seg_table), so placement and lookups read it with no
 * lock. Every change (mount, unmount, client add/remove, expiry) is
 * serialised by e->seg_lock; these are rare control-plane operations.
 * The table carries its slots sorted by id and by (client, base), so a
 * lookup by id and a mount's overlap check are binary searches, and a
 * batch mount (a client remounting thousands of segments) checks each
 * item in O(log n + log k), then journals once and publishes once:
 * O(n + k log k) in all, where a mount per item cost O(k n) and k
 * appends. Clients live in a cds_lfht keyed by id: heartbeats are
 * lock-free.
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

/* by_base's order: client id, then base. */
static int base_order(const struct kvf__segment *s, uint64_t client_id,
		      uint64_t base)
{
	if (s->client_id != client_id)
		return s->client_id < client_id ? -1 : 1;
	if (s->base != base)
		return s->base < base ? -1 : 1;
	return 0;
}

struct kvf__segment *kvf__seg_find(struct kvf__seg_table *t, uint64_t id,
				   uint32_t *slot)
{
	uint32_t lo = 0, hi = t->nr;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (t->seg[t->by_id[mid]]->id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == t->nr || t->seg[t->by_id[lo]]->id != id)
		return NULL;
	if (slot)
		*slot = t->by_id[lo];
	return t->seg[t->by_id[lo]];
}

/* How many entries of by_base sort before (@client_id, @base). */
static uint32_t base_rank(const struct kvf__seg_table *t, uint64_t client_id,
			  uint64_t base)
{
	uint32_t lo = 0, hi = t->nr;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (base_order(t->seg[t->by_base[mid]], client_id, base) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* ---- the segment table ------------------------------------------------ */

static struct kvf__seg_table *table_new(uint32_t nr)
{
	struct kvf__seg_table *t = calloc(1, sizeof(*t));
	size_t cap = nr ? nr : 1;

	if (!t)
		return NULL;
	t->nr = nr;
	t->seg = calloc(cap, sizeof(*t->seg));
	t->alloc = calloc(cap, sizeof(*t->alloc));
	t->by_id = calloc(cap, sizeof(*t->by_id));
	t->by_base = calloc(cap, sizeof(*t->by_base));
	if (!t->seg || !t->alloc || !t->by_id || !t->by_base) {
		free(t->seg);
		free(t->alloc);
		free(t->by_id);
		free(t->by_base);
		free(t);
		return NULL;
	}
	return t;
}

static void table_free(struct kvf__seg_table *t)
{
	free(t->seg);
	free(t->alloc);
	free(t->by_id);
	free(t->by_base);
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

/* qsort_r orders of slots of table @arg. */
static int slot_id_cmp(const void *a, const void *b, void *arg)
{
	const struct kvf__seg_table *t = arg;
	uint64_t x = t->seg[*(const uint32_t *)a]->id;
	uint64_t y = t->seg[*(const uint32_t *)b]->id;

	return x < y ? -1 : x > y;
}

static int slot_base_cmp(const void *a, const void *b, void *arg)
{
	const struct kvf__seg_table *t = arg;
	const struct kvf__segment *y = t->seg[*(const uint32_t *)b];

	return base_order(t->seg[*(const uint32_t *)a], y->client_id, y->base);
}

/* Merge sorted slot lists @x and @y of @t into @out. */
static void merge_slots(struct kvf__seg_table *t, const uint32_t *x,
			uint32_t nx, const uint32_t *y, uint32_t ny,
			int (*cmp)(const void *, const void *, void *),
			uint32_t *out)
{
	uint32_t i = 0, j = 0, k = 0;

	while (i < nx && j < ny)
		out[k++] = cmp(&x[i], &y[j], t) <= 0 ? x[i++] : y[j++];
	while (i < nx)
		out[k++] = x[i++];
	while (j < ny)
		out[k++] = y[j++];
}

/*
 * A copy of the current table plus @news (appended, so the slots of the
 * mounted ones and their park hints stay), not yet published: O(n + k log
 * k). Caller holds seg_lock until it publishes or frees it.
 */
static struct kvf__seg_table *
table_with(struct kvf_engine *e, struct kvf__segment *const *news, uint32_t k)
{
	struct kvf__seg_table *old = e->segs, *t = table_new(old->nr + k);
	uint32_t *add = calloc(k, sizeof(*add));

	if (!t || !add) {
		if (t)
			table_free(t);
		free(add);
		return NULL;
	}
	memcpy(t->seg, old->seg, old->nr * sizeof(*t->seg));
	memcpy(t->alloc, old->alloc, old->nr * sizeof(*t->alloc));
	for (uint32_t j = 0; j < k; j++) {
		t->seg[old->nr + j] = news[j];
		t->alloc[old->nr + j] = news[j]->alloc;
		add[j] = old->nr + j;
		/* Its parks are noted by its slot (struct kvf__park_hint). */
		kvf__segalloc_set_park_hint(news[j]->alloc, &e->park_hint,
					    old->nr + j);
	}
	qsort_r(add, k, sizeof(*add), slot_id_cmp, t);
	merge_slots(t, old->by_id, old->nr, add, k, slot_id_cmp, t->by_id);
	qsort_r(add, k, sizeof(*add), slot_base_cmp, t);
	merge_slots(t, old->by_base, old->nr, add, k, slot_base_cmp,
		    t->by_base);
	free(add);
	return t;
}

/* @sorted without @slot, the slots above it moved down by one. */
static void drop_slot(const uint32_t *sorted, uint32_t nr, uint32_t slot,
		      uint32_t *out)
{
	for (uint32_t i = 0, j = 0; i < nr; i++)
		if (sorted[i] != slot)
			out[j++] = sorted[i] - (sorted[i] > slot);
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
	drop_slot(old->by_id, old->nr, slot, t->by_id);
	drop_slot(old->by_base, old->nr, slot, t->by_base);
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

/* Make @c (zeroed, unpublished) client @id. Caller holds seg_lock and the
 * read lock. */
static void client_insert(struct kvf_engine *e, struct kvf__client *c,
			  uint64_t id)
{
	c->id = id;
	c->last_seen_ns = kvf__now(e);
	kvf__tsan_release(&c->node);
	cds_lfht_add(e->clients, client_hash(id), &c->node);
}

/* Find or add @id. Caller holds seg_lock and the read lock. */
static struct kvf__client *client_get_or_add(struct kvf_engine *e, uint64_t id)
{
	struct kvf__client *c = client_find(e, id);

	if (c)
		return c;
	c = calloc(1, sizeof(*c));
	if (c)
		client_insert(e, c, id);
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
	/*
	 * Ranges are in one client's address space: only its own count. Its
	 * mounted ranges are disjoint, so of those that start before
	 * base + size the last one in by_base ends furthest: only it can
	 * reach past @base.
	 */
	uint32_t r = base_rank(t, client_id, base + size);
	const struct kvf__segment *s;

	if (!r)
		return false;
	s = t->seg[t->by_base[r - 1]];
	return s->client_id == client_id && s->base + s->size > base;
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
 * Batch mount. Items are decided in order, exactly as one mount after the
 * other would decide them: an item is refused when its id is mounted or
 * was taken by an earlier item of the batch, or when its range overlaps
 * a mounted segment of the client or an earlier item the batch took. Both
 * checks against the batch are O(log k): the items sorted by (id, index)
 * name each item's first holder of its id, and a Fenwick tree over the
 * items sorted by base answers "the taken item with the largest base
 * below this end", the only one that can overlap (taken ranges are
 * disjoint). Then one journal append for the taken items and one table
 * published with all of them.
 */
struct mount_scratch {
	const struct kvf_segment_desc *d;
	uint32_t *id_order;   /* candidates by (id, index) */
	uint32_t *first;      /* per item: first candidate with its id */
	bool *id_taken;	      /* per item: its id was taken (first ones) */
	uint32_t *base_order; /* candidates by base */
	uint32_t *pos;	      /* per item: its place in base_order */
	uint32_t *fen;	      /* 1-based prefix maxima of taken places + 1 */
	uint32_t nc;	      /* candidates */
	uint32_t *taken;      /* the items taken, in order */
	struct kvf__segment **news; /* their segments */
	struct kvf__mutation *muts;
};

/* Items by @kx and @ky, then by their index @x and @y. */
static int key_then_index(uint64_t kx, uint64_t ky, uint32_t x, uint32_t y)
{
	if (kx != ky)
		return kx < ky ? -1 : 1;
	return x < y ? -1 : x > y;
}

static int item_id_cmp(const void *a, const void *b, void *arg)
{
	const struct kvf_segment_desc *d = arg;
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return key_then_index(d[x].id, d[y].id, x, y);
}

static int item_base_cmp(const void *a, const void *b, void *arg)
{
	const struct kvf_segment_desc *d = arg;
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return key_then_index(d[x].base, d[y].base, x, y);
}

static void scratch_free(struct mount_scratch *m)
{
	free(m->id_order);
	free(m->first);
	free(m->id_taken);
	free(m->base_order);
	free(m->pos);
	free(m->fen);
	free(m->taken);
	free(m->news);
	free(m->muts);
}

static int scratch_init(struct mount_scratch *m,
			const struct kvf_segment_desc *d, size_t n,
			const enum kvf_status *status)
{
	size_t cap = n ? n : 1;

	memset(m, 0, sizeof(*m));
	m->d = d;
	m->id_order = calloc(cap, sizeof(*m->id_order));
	m->first = calloc(cap, sizeof(*m->first));
	m->id_taken = calloc(cap, sizeof(*m->id_taken));
	m->base_order = calloc(cap, sizeof(*m->base_order));
	m->pos = calloc(cap, sizeof(*m->pos));
	m->fen = calloc(cap + 1, sizeof(*m->fen));
	m->taken = calloc(cap, sizeof(*m->taken));
	m->news = calloc(cap, sizeof(*m->news));
	m->muts = calloc(cap, sizeof(*m->muts));
	if (!m->id_order || !m->first || !m->id_taken || !m->base_order ||
	    !m->pos || !m->fen || !m->taken || !m->news || !m->muts) {
		scratch_free(m);
		return KVF_ERR_NO_MEMORY;
	}
	for (uint32_t i = 0; i < n; i++)
		if (status[i] == KVF_OK)
			m->id_order[m->nc++] = i;
	memcpy(m->base_order, m->id_order, m->nc * sizeof(*m->base_order));
	qsort_r(m->id_order, m->nc, sizeof(*m->id_order), item_id_cmp,
		(void *)d);
	for (uint32_t k = 0; k < m->nc; k++) {
		uint32_t i = m->id_order[k];

		m->first[i] = k && d[m->id_order[k - 1]].id == d[i].id
				      ? m->first[m->id_order[k - 1]]
				      : i;
	}
	qsort_r(m->base_order, m->nc, sizeof(*m->base_order), item_base_cmp,
		(void *)d);
	for (uint32_t k = 0; k < m->nc; k++)
		m->pos[m->base_order[k]] = k;
	return KVF_OK;
}

/* Whether @i overlaps an item the batch took. */
static bool overlaps_taken(const struct mount_scratch *m, uint32_t i)
{
	const struct kvf_segment_desc *d = m->d;
	uint64_t end = d[i].base + d[i].size;
	uint32_t lo = 0, hi = m->nc, best = 0, x;

	/* lo: how many candidates start before @end. */
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (d[m->base_order[mid]].base < end)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (x = lo; x; x &= x - 1)
		if (m->fen[x] > best)
			best = m->fen[x];
	if (!best)
		return false;
	x = m->base_order[best - 1];
	return d[x].base + d[x].size > d[i].base;
}

static void take(struct mount_scratch *m, uint32_t i)
{
	m->id_taken[m->first[i]] = true;
	for (uint32_t x = m->pos[i] + 1; x <= m->nc; x += x & (~x + 1))
		if (m->fen[x] < m->pos[i] + 1)
			m->fen[x] = m->pos[i] + 1;
}

/* Why @d may not be mounted now for @client_id (KVF_OK: it may). */
static int mount_check(struct kvf_engine *e, const struct mount_scratch *m,
		       uint64_t client_id, uint32_t i)
{
	const struct kvf_segment_desc *d = &m->d[i];

	if (m->id_taken[m->first[i]] || kvf__seg_find(e->segs, d->id, NULL))
		return KVF_ERR_SEGMENT_EXISTS;
	if (overlaps_taken(m, i) ||
	    overlaps_mounted(e->segs, client_id, d->base, d->size))
		return KVF_ERR_SEGMENT_OVERLAP;
	return KVF_OK;
}

/* Undo the taken items: each gets @ret, its segment is freed. */
static void untake(struct mount_scratch *m, uint32_t nr,
		   enum kvf_status *status, int ret)
{
	for (uint32_t k = 0; k < nr; k++) {
		status[m->taken[k]] = ret;
		segment_free(m->news[k]);
	}
}

int kvf__segment_mount_batch_locked(struct kvf_engine *e, uint64_t client_id,
				    const struct kvf_segment_desc *d, size_t n,
				    enum kvf_status *status, bool journal)
{
	struct kvf__client *c, *fresh = NULL;
	struct kvf__seg_table *t;
	struct mount_scratch m;
	uint32_t nr = 0;
	int ret;

	ret = scratch_init(&m, d, n, status);
	if (ret)
		return ret;
	/* seg_lock keeps the table as checked until it is replaced. */
	kvf__rcu_read_lock();
	for (uint32_t k = 0; k < n; k++) {
		if (status[k] != KVF_OK)
			continue;
		ret = mount_check(e, &m, client_id, k);
		if (!ret)
			ret = segment_new(e, client_id, &d[k], &m.news[nr]);
		status[k] = ret;
		if (ret)
			continue;
		take(&m, k);
		mount_mutation(&m.muts[nr], client_id, &d[k]);
		m.taken[nr++] = k;
	}
	c = client_find(e, client_id);
	kvf__rcu_read_unlock();
	if (!nr)
		goto out;
	/* Everything that can fail for want of memory comes first: once
	 * journaled, the mounts are published. */
	t = table_with(e, m.news, nr);
	if (t && !c)
		c = fresh = calloc(1, sizeof(*fresh));
	if (!t || !c) {
		if (t)
			table_free(t);
		untake(&m, nr, status, KVF_ERR_NO_MEMORY);
		goto out;
	}
	/* The append may wait for an fsync: outside any read-side section. */
	ret = journal ? kvf__engine_journal(e, m.muts, nr) : KVF_OK;
	if (ret) {
		table_free(t);
		free(fresh);
		untake(&m, nr, status, ret);
		goto out;
	}
	kvf__rcu_read_lock();
	if (fresh)
		client_insert(e, fresh, client_id);
	client_touch(e, c);
	table_publish(e, t);
	kvf__rcu_read_unlock();
out:
	scratch_free(&m);
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
			      const struct kvf_segment_desc *d, bool journal)
{
	enum kvf_status status = KVF_OK;
	int ret = kvf__segment_mount_batch_locked(e, client_id, d, 1, &status,
						  journal);

	return ret ? ret : status;
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
	ret = kvf__segment_mount_locked(e, client_id, seg, true);
	pthread_mutex_unlock(&e->seg_lock);
	return ret;
}

enum kvf_status kvf_segment_mount_batch(struct kvf_engine *e,
					uint64_t client_id,
					const struct kvf_segment_desc *segs,
					size_t n, enum kvf_status *status)
{
	int ret = KVF_OK;

	if (!e || (n && (!segs || !status)))
		return KVF_ERR_INVALID_ARGUMENT;
	if (!client_id || n > KVF_SEGMENT_BATCH_MAX)
		ret = KVF_ERR_INVALID_PARAMS;
	for (size_t i = 0; i < n; i++)
		status[i] = ret ? ret : check_desc(&segs[i]);
	if (ret || !n)
		return ret;
	kvf__rcu_ensure_registered();
	pthread_mutex_lock(&e->seg_lock);
	ret = kvf__segment_mount_batch_locked(e, client_id, segs, n, status,
					      true);
	pthread_mutex_unlock(&e->seg_lock);
	if (ret) { /* no scratch space: nothing was tried */
		for (size_t i = 0; i < n; i++)
			status[i] = ret;
		return ret;
	}
	for (size_t i = 0; i < n; i++)
		if (status[i])
			return KVF_ERR_PARTIAL;
	return KVF_OK;
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
