/* SPDX-License-Identifier: MIT */
/*
 * engine/internal.h - the engine's state, shared by engine/ and batch/.
 */
#ifndef KVF_ENGINE_INTERNAL_H
#define KVF_ENGINE_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <kvforge.h>

#include "alloc/lanes.h"
#include "alloc/placement.h"
#include "alloc/segalloc.h"
#include "base/rcu.h"
#include "metadata/arena.h"
#include "metadata/index.h"
#include "metadata/object.h"
#include "profiling/stage.h"

struct kvf__journal;

/*
 * A mounted segment. Immutable after mount except @dead and @evict_hand.
 * Freed after a grace period once unmounted and every replica in it was
 * dropped, so a reader holding a record that still points here can read
 * it safely.
 */
struct kvf__segment {
	uint64_t id;
	uint64_t client_id;
	uint64_t base;
	uint64_t size;
	struct kvf__segalloc *alloc;
	int dead; /* atomic: unmount started; placement skips it */
	/* Atomic, relaxed: where eviction's clock hand is (engine/evict.c). */
	uint64_t evict_hand;
	struct rcu_head rcu;
	char name[KVF_SEGMENT_NAME_MAX + 1];
	char endpoint[KVF_ENDPOINT_MAX + 1];
};

/*
 * The set of mounted segments, published with RCU. Copy-on-write: mount
 * and unmount build a new table under seg_lock and publish it (a batch
 * mount publishes one table for the whole batch).
 * alloc[i] == seg[i]->alloc, kept as a flat array for kvf__place().
 * by_id and by_base hold every slot once, sorted by segment id and by
 * (client id, base): a lookup by id and a client's overlap check are
 * binary searches, so a mount costs O(log n) checks plus one copy.
 */
struct kvf__seg_table {
	struct rcu_head rcu;
	uint32_t nr;
	struct kvf__segment **seg;
	struct kvf__segalloc **alloc;
	uint32_t *by_id;
	uint32_t *by_base;
};

/* A known client; in the clients hash (RCU), keyed by id. */
struct kvf__client {
	struct cds_lfht_node node;
	struct rcu_head rcu;
	uint64_t id;
	uint64_t last_seen_ns; /* atomic */
};

/*
 * Buffers of a pre-empted put, released once the writer surely stopped.
 * A put's entries are appended together and the list is only ever
 * compacted in order, so they stay adjacent: @put tells them apart from
 * the next put's, and a put counts as released when its last one goes.
 */
struct kvf__deferred_free {
	struct kvf__segment *seg;
	uint64_t offset;
	uint64_t size;
	uint64_t release_at_ns;
	uint64_t put; /* which pre-empted put (e->nr_discarded_puts then) */
};

struct kvf_engine {
	struct kvf_config cfg;
	char *data_dir;
	uint64_t lease_ttl_ns;
	uint64_t client_ttl_ns;
	uint64_t discard_ns;
	uint64_t release_ns;
	uint64_t soft_pin_ns;

	struct kvf__index *index;
	struct kvf__arena *arena; /* the records (metadata/arena.h) */
	struct kvf_profiler *prof;
	struct kvf__journal *journal; /* NULL with KVF_DURABILITY_NONE */

	/*
	 * Placement randomness: every put batch has its own placer
	 * (kvf__placer_init) on its own stream of this engine's seed, numbered by
	 * @place_streams (atomic), so a seed replays per engine whatever
	 * other engines of the process do, and threads never share a state.
	 */
	uint64_t place_seed;
	uint64_t place_streams;
	/* Threads putting now, each on its own segments (alloc/lanes.h). */
	struct kvf__lanes put_lanes;
	/*
	 * Where the mounted segments' allocators last parked a block of each
	 * size, as slots of the current table (struct kvf__park_hint): put
	 * batches' placers go there for an exact fit.
	 */
	struct kvf__park_hint park_hint;

	/* Serialises mount, unmount, client add/remove and expiry. */
	pthread_mutex_t seg_lock;
	struct kvf__seg_table *segs; /* RCU */
	struct cds_lfht *clients;

	pthread_mutex_t deferred_lock;
	struct kvf__deferred_free *deferred;
	size_t nr_deferred;
	size_t cap_deferred;
	/* Under deferred_lock: pre-empted puts, those whose buffers are all
	 * released (or gone with their segment), and the bytes still held. */
	uint64_t nr_discarded_puts;
	uint64_t nr_released_puts;
	uint64_t deferred_bytes;

	/* Counters (atomic, relaxed). */
	int64_t nr_complete;
	int64_t nr_processing;
	uint64_t nr_evicted;
	uint64_t nr_evict_passes;     /* kvf_engine_evict() calls with work */
	uint64_t nr_evict_successes;  /* ... that evicted something */
	uint64_t evicted_bytes;       /* replica bytes those freed */
	uint64_t nr_alloc_failures;   /* put items no placement could hold */
	int64_t nr_soft_pinned;       /* soft-pinned records, any state */
	int evict_requested; /* atomic: an allocation failed */
	/* Relaxed atomic, engine/evict.c: running age (ns) of the oldest
	 * 1/EVICT_DIV of the windows read, the bar a victim must clear. */
	uint64_t evict_bar;
	uint64_t nr_expired;
	uint64_t recovered_objects;
	uint64_t recovery_ns;

	/* Background housekeeping thread. */
	pthread_t bg_thread;
	bool bg_started;
	bool bg_stop;
	pthread_mutex_t bg_lock;
	pthread_cond_t bg_cond;
	pthread_mutex_t tick_lock;
};

/* The engine clock, in ns. */
static inline uint64_t kvf__now(const struct kvf_engine *e)
{
	return e->cfg.clock(e->cfg.clock_ctx);
}

static inline void kvf__count_add(int64_t *ctr, int64_t delta)
{
	__atomic_fetch_add(ctr, delta, __ATOMIC_RELAXED);
}

/* 1 if @o is soft-pinned: what it adds to e->nr_soft_pinned. */
static inline int64_t kvf__soft_pinned(const struct kvf__object *o)
{
	return (o->flags & KVF__OBJ_SOFT_PIN) ? 1 : 0;
}

/* Segments (engine/segment.c). Call inside an RCU read-side section. */
struct kvf__seg_table *kvf__segs(struct kvf_engine *e);
struct kvf__segment *kvf__seg_find(struct kvf__seg_table *t, uint64_t id,
				   uint32_t *slot);
bool kvf__client_known(struct kvf_engine *e, uint64_t client_id);
int kvf__segments_init(struct kvf_engine *e);
/* kvf_segment_query_sized()'s work, on this library's full struct. */
int kvf__segment_query(struct kvf_engine *e, uint64_t segment_id,
		       struct kvf_segment_info *info);
void kvf__segments_fini(struct kvf_engine *e);
int kvf__expire_clients(struct kvf_engine *e);

/* Buffers (engine/buffers.c). */

/* A replica by place: the owner of a tagged block is the record that has
 * it (kvf__object_has_replica, a kvf__index_match_fn). */
struct kvf__replica_ref {
	const struct kvf__segment *seg;
	uint64_t offset;
};
bool kvf__object_has_replica(const struct kvf__object *o, void *ref);

void kvf__replicas_free(struct kvf__object *o);
void kvf__defer_free(struct kvf_engine *e, struct kvf__object *o);
void kvf__deferred_release(struct kvf_engine *e, bool all);
void kvf__deferred_forget_segment(struct kvf_engine *e,
				  struct kvf__segment *seg);

/* Unlink @o (key hash @hash); @rc frees it after a grace period. */
void kvf__object_retire(struct kvf_engine *e, struct kvf__object *o,
			uint64_t hash, struct kvf__reclaim *rc);

/* Journal hook (engine/journal_glue.c): KVF_OK without a journal. */
struct kvf__mutation;
int kvf__engine_journal(struct kvf_engine *e, const struct kvf__mutation *m,
			size_t n);

/*
 * kvf__engine_journal_claimed() - journal, in one append, a mutation of
 * @type for each @obj[i] whose @status[i] is KVF_OK: records this thread
 * claimed (ENDING or REMOVING). KVF_OK at once without a journal or
 * claimed item. Call inside exactly one read-side section level: it is
 * left for the append (which may wait for an fsync) and entered again, so
 * other records looked up before must not be used after.
 */
enum kvf__mutation_type;
int kvf__engine_journal_claimed(struct kvf_engine *e,
				enum kvf__mutation_type type,
				struct kvf__object *const *obj,
				const enum kvf_status *status, size_t n);

/* Mount/unmount with seg_lock held; @journal false while recovering. */
int kvf__segment_mount_locked(struct kvf_engine *e, uint64_t client_id,
			      const struct kvf_segment_desc *d, bool journal);
/*
 * Mount the items of @d whose @status is KVF_OK on entry (the others are
 * left alone), as kvf_segment_mount_batch() describes; seg_lock held.
 * Returns KVF_OK, or KVF_ERR_NO_MEMORY for the scratch space (nothing
 * changed, @status untouched).
 */
int kvf__segment_mount_batch_locked(struct kvf_engine *e, uint64_t client_id,
				    const struct kvf_segment_desc *d, size_t n,
				    enum kvf_status *status, bool journal);
int kvf__segment_unmount_locked(struct kvf_engine *e, uint64_t client_id,
				uint64_t segment_id, bool journal);
/* Forget a client without journaling (replay). Caller holds seg_lock. */
int kvf__client_forget_locked(struct kvf_engine *e, uint64_t client_id);

/* Evict if above the watermark or asked to (engine/evict.c). */
int kvf__evict_if_needed(struct kvf_engine *e);
/* Ask for an eviction pass soon (a put could not be placed). */
void kvf__request_eviction(struct kvf_engine *e);

/* Replay the journal into a fresh engine (engine/recovery.c). */
int kvf__engine_recover(struct kvf_engine *e);

#endif /* KVF_ENGINE_INTERNAL_H */
