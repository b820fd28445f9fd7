/* SPDX-License-Identifier: MIT */
/*
 * tests/stress/audit.h - the accounting invariant concurrency tests check
 * after every run: every allocated byte is held by a live record (complete
 * or processing) or by a pre-empted put's buffer awaiting release, and the
 * engine's object counters match the records in the index.
 *
 * What the engine reports comes from its entry points
 * (kvf_engine_get_stats); what should hold it is counted here from the
 * index and the deferred-free list, which no entry point exposes.
 */
#ifndef KVF_TESTS_STRESS_AUDIT_H
#define KVF_TESTS_STRESS_AUDIT_H

#include "engine/internal.h"
#include "metadata/objstate.h"

struct audit_held {
	uint64_t live_bytes;     /* replicas of records in the index */
	uint64_t deferred_bytes; /* pre-empted buffers awaiting release */
	uint64_t complete;       /* complete records in the index */
	uint64_t processing;     /* processing records in the index */
};

/* A replica's footprint: its size rounded up to the allocator's unit. */
static inline uint64_t audit_block_bytes(const struct kvf__segment *seg,
					 uint64_t size)
{
	uint64_t mask = kvf__segalloc_alignment(seg->alloc) - 1;

	return (size + mask) & ~mask;
}

static inline void audit_visit(struct kvf__object *o, void *arg)
{
	struct audit_held *h = arg;
	const struct kvf__replica *r = kvf__object_replicas_const(o);
	uint32_t base = kvf__obj_base(kvf__obj_load(o));

	if (base == KVF__OBJ_DEAD || base == KVF__OBJ_REPLACED)
		return;
	h->complete += base == KVF__OBJ_COMPLETE;
	h->processing += base == KVF__OBJ_PROCESSING;
	for (unsigned i = 0; i < o->nr_replicas; i++)
		h->live_bytes += audit_block_bytes(kvf__replica_seg(&r[i]), o->size);
}

/* What should hold the segments' bytes. Not a consistent snapshot: call
 * with no engine call running on any thread. */
static inline struct audit_held audit_held(struct kvf_engine *e)
{
	struct audit_held h = { 0 };

	kvf__rcu_ensure_registered();
	kvf__rcu_read_lock();
	kvf__index_foreach(e->index, audit_visit, &h);
	pthread_mutex_lock(&e->deferred_lock);
	for (size_t i = 0; i < e->nr_deferred; i++)
		h.deferred_bytes += audit_block_bytes(e->deferred[i].seg,
						      e->deferred[i].size);
	pthread_mutex_unlock(&e->deferred_lock);
	kvf__rcu_read_unlock();
	return h;
}

/* Call with every worker thread joined. Needs cmocka (tests/unit/helpers.h). */
static inline void assert_accounting(struct kvf_engine *e)
{
	struct audit_held h = audit_held(e);
	struct kvf_engine_stats s;

	assert_int_equal(kvf_engine_get_stats(e, &s), KVF_OK);
	if (s.used_bytes != h.live_bytes + h.deferred_bytes)
		print_error("used %llu != live %llu + deferred %llu\n",
			    (unsigned long long)s.used_bytes,
			    (unsigned long long)h.live_bytes,
			    (unsigned long long)h.deferred_bytes);
	assert_int_equal(s.used_bytes, h.live_bytes + h.deferred_bytes);
	assert_int_equal(h.complete, s.objects);
	assert_int_equal(h.processing, s.processing);
}

#endif /* KVF_TESTS_STRESS_AUDIT_H */
