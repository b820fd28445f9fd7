/* SPDX-License-Identifier: MIT */
/*
 * metadata/object.h - the per-object record the index points at.
 *
 * One heap block per object: a fixed header, the replicas, then the key
 * bytes inline (no separate key allocation, so a lookup touches one
 * block). Use the accessors below, never the layout: the batch-pipelined
 * index may move fields to shave cache lines.
 *
 * Immutable after publication: key, hash, size, client_id, replicas,
 * nr_replicas, flags. A change to the replica set is copy-on-write: a new
 * record replaces the old one in the index (old one goes REPLACED).
 * Mutable, atomically: @state (the per-object state machine, also a short
 * writer lock, see engine/objstate.c) and @lease_deadline (readers raise it
 * with an atomic max, lock-free).
 */
#ifndef KVF_METADATA_OBJECT_H
#define KVF_METADATA_OBJECT_H

#include <stddef.h>
#include <stdint.h>

#include "engine/rcu.h"

struct kvf__segment;

/* Object states. BUSY is held by one writer for a few instructions. */
enum kvf__obj_state {
	KVF__OBJ_PROCESSING = 1, /* put started, invisible to readers */
	KVF__OBJ_COMPLETE = 2,   /* readable */
	KVF__OBJ_BUSY = 3,       /* a writer is deciding; readers re-check */
	KVF__OBJ_DEAD = 4,       /* removed from the index, freed after GP */
	KVF__OBJ_REPLACED = 5,   /* superseded by a newer record: look again */
};

enum kvf__obj_flags {
	KVF__OBJ_HARD_PIN = 1u << 0,
	KVF__OBJ_SOFT_PIN = 1u << 1,
};

struct kvf__replica {
	struct kvf__segment *seg; /* RCU-protected; outlives every record */
	uint64_t offset;          /* from the segment base */
};

/*
 * The hook is owned by the index implementation (cds_lfht_node for the
 * lfht index). Nothing else touches it.
 */
union kvf__index_hook {
	struct cds_lfht_node lfht;
	void *words[2];
};

struct kvf__object {
	union kvf__index_hook hook;
	struct rcu_head rcu;
	uint64_t hash;
	uint64_t size;
	uint64_t lease_deadline; /* ns on the engine clock; atomic */
	uint64_t client_id;      /* the putter */
	uint64_t stamp;          /* put start (ns); soft pin deadline later */
	uint32_t state;          /* enum kvf__obj_state; atomic */
	uint16_t key_len;
	uint8_t nr_replicas;
	uint8_t flags;           /* enum kvf__obj_flags */
	struct kvf__replica replicas[];
	/* followed by key_len key bytes */
};

static inline const char *kvf__object_key(const struct kvf__object *o)
{
	return (const char *)&o->replicas[o->nr_replicas];
}

static inline size_t kvf__object_alloc_size(size_t nr_replicas, size_t key_len)
{
	return sizeof(struct kvf__object) +
	       nr_replicas * sizeof(struct kvf__replica) + key_len;
}

/*
 * kvf__object_new() - allocate a record with key and hash filled in,
 * state PROCESSING, everything else zero. NULL on allocation failure.
 */
struct kvf__object *kvf__object_new(const char *key, size_t key_len,
				    uint64_t hash, unsigned nr_replicas);

/* Free now: only for records never published, or with no readers left. */
void kvf__object_free(struct kvf__object *o);

/* Free after a grace period (the record was unpublished). */
void kvf__object_free_rcu(struct kvf__object *o);

#endif /* KVF_METADATA_OBJECT_H */
