/* SPDX-License-Identifier: MIT */
/*
 * engine/evict.c - making room: sampled, approximately-LRU eviction.
 *
 * A victim is chosen by sampling: EVICT_SAMPLES used blocks are drawn at
 * random from random segments' allocators (each block carries its owner's
 * key hash, so the index finds the owner by hash), and the least recently
 * used evictable owner among them is taken. "Recently used" is the last
 * read: a get or exist leaves lease deadline = read time + lease TTL; an
 * object never read counts from its put. This is the sampled-LRU policy of
 * Redis and of upstream samplers, and it costs O(samples) per victim: a
 * pass that evicts k objects costs the same whether the engine holds 100K
 * or 10M objects, and it never scans the table.
 *
 * Never evicted: processing objects, objects under lease, hard-pinned
 * ones. Soft-pinned objects (pin not yet expired) are skipped in a first
 * phase and considered only when sampling finds nothing else.
 *
 * Victims are removed through the ordinary batch remove without force, so
 * the lease/remove protocol (engine/objstate.h) and the journal apply
 * unchanged: a victim that got leased after it was sampled is simply not
 * removed. Readers never wait for any of this.
 *
 * Triggers (kvf_engine_tick): used capacity above the high watermark, or
 * a failed allocation (put_start raises e->evict_requested and wakes the
 * background thread). Each pass aims at eviction_ratio of capacity.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "batch/batch.h"
#include "engine/internal.h"
#include "engine/objstate.h"

#define EVICT_SAMPLES 8
#define EVICT_BATCH 128
/*
 * Give up a phase after this many victim slots found nothing (or, in a
 * phase that keeps finding victims that then cannot be removed, after
 * this many batches' worth of failures).
 */
#define EVICT_MAX_MISSES 64

struct victims {
	size_t n;
	struct kvf_key keys[EVICT_BATCH];
	uint64_t bytes[EVICT_BATCH];
	const struct kvf__object *picked[EVICT_BATCH];
	char *keybuf;
	size_t keybuf_len, keybuf_cap;
};

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* When @o was last used, for LRU ordering (smaller = older). */
static uint64_t last_use(const struct kvf_engine *e, const struct kvf__object *o)
{
	uint64_t lease = kvf__obj_lease(o);

	if (lease)
		return lease > e->lease_ttl_ns ? lease - e->lease_ttl_ns : 0;
	return (o->flags & KVF__OBJ_SOFT_PIN) ? 0 : o->stamp;
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

static bool already_picked(const struct victims *v, const struct kvf__object *o)
{
	for (size_t i = 0; i < v->n; i++)
		if (v->picked[i] == o)
			return true;
	return false;
}

/*
 * The least recently used evictable owner among EVICT_SAMPLES random used
 * blocks, or NULL. Done in passes so the samples' misses overlap: draw all
 * blocks, prefetch all their index buckets, look all owners up (and
 * prefetch them), then compare.
 */
static const struct kvf__object *pick(struct kvf_engine *e,
				      struct kvf__seg_table *t,
				      const struct victims *v, uint64_t now,
				      bool soft_ok, uint64_t *rng)
{
	struct kvf__segalloc_block blk[EVICT_SAMPLES];
	struct kvf__segment *seg[EVICT_SAMPLES];
	struct kvf__object *own[EVICT_SAMPLES];
	const struct kvf__object *best = NULL;
	uint64_t best_use = UINT64_MAX;
	int n = 0;

	for (int s = 0; s < EVICT_SAMPLES && t->nr; s++) {
		seg[n] = t->seg[xorshift(rng) % t->nr];
		if (kvf__segalloc_sample(seg[n]->alloc, rng, &blk[n]) == KVF_OK)
			n++;
	}
	for (int s = 0; s < n; s++)
		kvf__index_prefetch_hash(e->index, blk[s].tag);
	for (int s = 0; s < n; s++) {
		struct kvf__replica_ref ref = { seg[s], blk[s].offset };

		own[s] = kvf__index_lookup_hash(e->index, blk[s].tag,
						kvf__object_has_replica, &ref);
		if (own[s])
			__builtin_prefetch(own[s]);
	}
	for (int s = 0; s < n; s++) {
		const struct kvf__object *o = own[s];
		uint64_t use;

		if (!o || !evictable(e, o, now, soft_ok) || already_picked(v, o))
			continue;
		use = last_use(e, o);
		if (use < best_use) {
			best = o;
			best_use = use;
		}
	}
	return best;
}

static int keep_key(struct victims *v, const struct kvf__object *o)
{
	if (v->keybuf_len + o->key_len > v->keybuf_cap) {
		size_t cap = v->keybuf_cap ? 2 * v->keybuf_cap : 16384;
		char *buf;

		while (cap < v->keybuf_len + o->key_len)
			cap *= 2;
		buf = realloc(v->keybuf, cap);
		if (!buf)
			return KVF_ERR_NO_MEMORY;
		/* Keys point into the buffer: re-point them after a move. */
		for (size_t i = 0; i < v->n; i++)
			v->keys[i].data = buf + (v->keys[i].data - v->keybuf);
		v->keybuf = buf;
		v->keybuf_cap = cap;
	}
	memcpy(v->keybuf + v->keybuf_len, kvf__object_key(o), o->key_len);
	v->keys[v->n] = (struct kvf_key){ v->keybuf + v->keybuf_len,
					  o->key_len };
	v->bytes[v->n] = o->size * o->nr_replicas;
	v->picked[v->n++] = o;
	v->keybuf_len += o->key_len;
	return KVF_OK;
}

/* Choose up to @want victims; returns how many slots found nothing. */
static size_t choose(struct kvf_engine *e, struct victims *v, size_t want,
		     bool soft_ok, uint64_t *rng)
{
	uint64_t now = kvf__now(e);
	struct kvf__seg_table *t;
	size_t misses = 0;

	v->n = 0;
	v->keybuf_len = 0;
	kvf__rcu_read_lock();
	t = kvf__segs(e);
	for (size_t i = 0; i < want; i++) {
		const struct kvf__object *o = pick(e, t, v, now, soft_ok, rng);

		if (!o)
			misses++;
		else if (keep_key(v, o) != KVF_OK)
			break;
	}
	kvf__rcu_read_unlock();
	return misses;
}

int kvf_engine_evict(struct kvf_engine *e, uint64_t bytes,
		     uint64_t *freed_bytes, uint64_t *evicted)
{
	static __thread uint64_t rng;
	enum kvf_status status[EVICT_BATCH];
	struct victims *v;
	uint64_t freed = 0, count = 0;
	size_t misses = 0;
	bool soft_ok = false;
	int ret = KVF_OK;

	if (!e)
		return KVF_ERR_INVALID_ARGUMENT;
	kvf__rcu_ensure_registered();
	if (!rng)
		rng = (e->cfg.seed ? e->cfg.seed : kvf__now(e)) | 1;
	v = calloc(1, sizeof(*v));
	if (!v)
		return KVF_ERR_NO_MEMORY;
	while (freed < bytes) {
		uint64_t left = bytes - freed;

		misses += choose(e, v, EVICT_BATCH, soft_ok, &rng);
		if (!v->n || misses >= EVICT_MAX_MISSES * EVICT_BATCH) {
			if (misses < EVICT_MAX_MISSES)
				continue;
			if (soft_ok)
				break; /* nothing evictable left */
			soft_ok = true;
			misses = 0;
			continue;
		}
		/* Do not overshoot by a whole batch. */
		for (size_t i = 0, sum = 0; i < v->n; i++) {
			sum += v->bytes[i];
			if (sum >= left) {
				v->n = i + 1;
				break;
			}
		}
		ret = kvf_batch_remove(e, v->keys, v->n, false, status);
		if (ret != KVF_OK && ret != KVF_ERR_PARTIAL)
			break;
		ret = KVF_OK;
		for (size_t i = 0; i < v->n; i++) {
			if (status[i] != KVF_OK) {
				misses++; /* leased or removed since sampled */
				continue;
			}
			freed += v->bytes[i];
			count++;
		}
	}
	free(v->keybuf);
	free(v);
	__atomic_fetch_add(&e->nr_evicted, count, __ATOMIC_RELAXED);
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
		*used += t->seg[i]->size - kvf__segalloc_free_bytes(t->alloc[i]);
	}
	kvf__rcu_read_unlock();
}

int kvf__evict_if_needed(struct kvf_engine *e)
{
	bool requested = __atomic_exchange_n(&e->evict_requested, 0,
					     __ATOMIC_ACQ_REL);
	uint64_t used, cap;

	usage(e, &used, &cap);
	if (!cap)
		return KVF_OK;
	if (!requested && (double)used <= e->cfg.eviction_high_watermark *
						   (double)cap)
		return KVF_OK;
	return kvf_engine_evict(e, (uint64_t)(e->cfg.eviction_ratio *
					      (double)cap),
				NULL, NULL);
}
