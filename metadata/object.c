/* SPDX-License-Identifier: MIT */
/*
 * metadata/object.c - allocation and batched reclamation of records.
 *
 * A record is one block of the engine's arena (metadata/arena.h: huge-page
 * slabs, no per-block header): optional index hook, header, key,
 * replicas. The block finds its arena by itself, so freeing needs no
 * engine. Unpublished records are collected per operation and freed
 * together after one grace period: one call_rcu (~150-300 ns here) per
 * batch instead of per record, and no 16-byte rcu_head in every record.
 *
 * If a reclaim block cannot be allocated the record is leaked (and
 * counted) rather than freed early: a reader may still hold it, and we
 * cannot wait for a grace period inside a read-side section.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "base/prefetch.h"
#include "metadata/arena.h"
#include "metadata/object.h"
#include "metadata/objstate.h"

#define RECLAIM_BATCH 256
/* Entries of a reclaim block's array per cache line, and how far ahead
 * of the entry written its line is asked for (two lines). */
#define RECLAIM_PER_LINE (64 / sizeof(struct kvf__object *))
#define RECLAIM_AHEAD (2 * RECLAIM_PER_LINE)

struct kvf__reclaim_block {
	struct rcu_head rcu;
	unsigned n;
	void *block[RECLAIM_BATCH]; /* the records' arena blocks */
};

static uint64_t reclaim_leaks;

struct kvf__object *kvf__object_new(struct kvf__arena *arena, const char *key,
				    size_t key_len, unsigned nr_replicas,
				    bool hooked)
{
	size_t prefix = hooked ? KVF__OBJ_HOOK_SIZE : 0;
	size_t size = kvf__object_bytes(key_len, nr_replicas);
	char *block = kvf__arena_alloc(arena, prefix + size);
	struct kvf__object *o;

	if (!block)
		return NULL;
	o = (struct kvf__object *)(block + prefix);
	o->key_len = (uint16_t)key_len;
	o->nr_replicas = (uint8_t)nr_replicas;
	o->flags = hooked ? KVF__OBJ_HOOKED : 0;
	o->state = KVF__OBJ_PROCESSING;
	memcpy(o->key, key, key_len);
	return o;
}

/* The arena block that holds @o (its hook first, for hooked records). */
static void *object_block(struct kvf__object *o)
{
	return (o->flags & KVF__OBJ_HOOKED) ? kvf__object_hook(o) : (void *)o;
}

void kvf__object_free(struct kvf__object *o)
{
	if (o)
		kvf__arena_free(object_block(o));
}

static void reclaim_after_grace(struct rcu_head *head)
{
	struct kvf__reclaim_block *b =
		caa_container_of(head, struct kvf__reclaim_block, rcu);

	kvf__rcu_callback_enter();
	/* a lock per class, not per record; no record is read */
	kvf__arena_free_many(b->block, b->n);
	free(b);
}

void kvf__reclaim_flush(struct kvf__reclaim *rc)
{
	if (!rc->blk)
		return;
	kvf__rcu_call(&rc->blk->rcu, reclaim_after_grace);
	rc->blk = NULL;
}

void kvf__reclaim_add(struct kvf__reclaim *rc, struct kvf__object *o)
{
	if (rc->blk && rc->blk->n == RECLAIM_BATCH)
		kvf__reclaim_flush(rc);
	if (!rc->blk) {
		rc->blk = malloc(sizeof(*rc->blk));
		if (!rc->blk) {
			__atomic_fetch_add(&reclaim_leaks, 1, __ATOMIC_RELAXED);
			return;
		}
		rc->blk->n = 0;
	}
	/* The array's next line, ahead of the writes that need it. */
	if (rc->blk->n % RECLAIM_PER_LINE == 0 &&
	    rc->blk->n + RECLAIM_AHEAD < RECLAIM_BATCH)
		kvf__prefetch_for_write(
			&rc->blk->block[rc->blk->n + RECLAIM_AHEAD]);
	/* Its block now, while @o is in the caller's cache: the callback
	 * after the grace period then touches no record. */
	rc->blk->block[rc->blk->n++] = object_block(o);
}

uint64_t kvf__reclaim_leaked(void)
{
	return __atomic_load_n(&reclaim_leaks, __ATOMIC_RELAXED);
}
