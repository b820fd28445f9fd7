/* SPDX-License-Identifier: MIT */
/*
 * engine/buffers.c - returning replica buffers to segment allocators.
 *
 * Immediate frees (remove, revoke) happen inside the caller's read-side
 * section: the segment, even if being unmounted, is freed only after a
 * grace period, so its allocator is still there.
 *
 * Deferred frees: a pre-empted put's writer may still be writing into its
 * buffers, so they are released only at put start + release timeout. The
 * list holds segment pointers; a segment being unmounted purges its
 * entries (kvf__deferred_forget_segment) and, because that happens after
 * seg->dead is set and both sides take deferred_lock, no entry for a dead
 * segment can be added after the purge.
 *
 * For upstream's PutStart discard metrics the list also counts, under
 * deferred_lock, the puts pre-empted, those all of whose buffers are gone
 * (released, or purged with their segment), and the bytes still held.
 */
#include "config.h"

#include <stdlib.h>

#include "base/die.h"
#include "engine/internal.h"

void kvf__replicas_free(struct kvf__object *o)
{
	const struct kvf__replica *r = kvf__object_replicas(o);

	for (unsigned i = 0; i < o->nr_replicas; i++)
		kvf__segalloc_free(kvf__replica_seg(&r[i])->alloc,
				   kvf__replica_offset(&r[i]), o->size);
}

bool kvf__object_has_replica(const struct kvf__object *o, void *arg)
{
	const struct kvf__replica_ref *ref = arg;
	const struct kvf__replica *r = kvf__object_replicas_const(o);

	for (unsigned i = 0; i < o->nr_replicas; i++)
		if (kvf__replica_seg(&r[i]) == ref->seg &&
		    kvf__replica_offset(&r[i]) == ref->offset)
			return true;
	return false;
}

void kvf__object_retire(struct kvf_engine *e, struct kvf__object *o,
			uint64_t hash, struct kvf__reclaim *rc)
{
	if (kvf__index_remove(e->index, o, hash) != KVF_OK)
		kvf__die("retiring a record that is not in the index");
	kvf__reclaim_add(rc, o);
}

static bool deferred_grow(struct kvf_engine *e)
{
	size_t cap = e->cap_deferred ? 2 * e->cap_deferred : 64;
	struct kvf__deferred_free *d;

	d = realloc(e->deferred, cap * sizeof(*d));
	if (!d)
		return false;
	e->deferred = d;
	e->cap_deferred = cap;
	return true;
}

void kvf__defer_free(struct kvf_engine *e, struct kvf__object *o)
{
	const struct kvf__replica *r = kvf__object_replicas(o);
	uint64_t at = o->stamp + e->release_ns, put;
	size_t first;

	pthread_mutex_lock(&e->deferred_lock);
	put = e->nr_discarded_puts++;
	first = e->nr_deferred;
	for (unsigned i = 0; i < o->nr_replicas; i++) {
		struct kvf__segment *seg = kvf__replica_seg(&r[i]);

		if (__atomic_load_n(&seg->dead, __ATOMIC_SEQ_CST))
			continue;
		if (e->nr_deferred == e->cap_deferred && !deferred_grow(e)) {
			/* Cannot remember it: free now rather than leak. */
			kvf__segalloc_free(seg->alloc,
					   kvf__replica_offset(&r[i]), o->size);
			continue;
		}
		e->deferred[e->nr_deferred++] = (struct kvf__deferred_free){
			.seg = seg,
			.offset = kvf__replica_offset(&r[i]),
			.size = o->size,
			.release_at_ns = at,
			.put = put,
		};
		e->deferred_bytes += o->size;
	}
	/* Nothing held (dead segments, or freed at once): released now. */
	if (e->nr_deferred == first)
		e->nr_released_puts++;
	pthread_mutex_unlock(&e->deferred_lock);
}

/*
 * Drop the entries @drop picks, keeping the others in order, and count
 * the puts whose last entry went. A put's entries are adjacent (see
 * struct kvf__deferred_free), so one pass sees each put as one run.
 * Caller holds deferred_lock.
 */
static void deferred_compact(struct kvf_engine *e,
			     bool (*drop)(struct kvf_engine *e,
					  const struct kvf__deferred_free *d,
					  const void *arg),
			     const void *arg)
{
	size_t j = 0;
	bool kept_some = false;

	for (size_t i = 0; i < e->nr_deferred; i++) {
		struct kvf__deferred_free *d = &e->deferred[i];

		if (i && d->put != e->deferred[i - 1].put)
			kept_some = false; /* a new put's run */
		if (drop(e, d, arg)) {
			e->deferred_bytes -= d->size;
		} else {
			e->deferred[j++] = *d;
			kept_some = true;
		}
		if (!kept_some && (i + 1 == e->nr_deferred ||
				   e->deferred[i + 1].put != d->put))
			e->nr_released_puts++; /* the run ended, all dropped */
	}
	e->nr_deferred = j;
}

struct release_arg {
	uint64_t now;
	bool all;
};

static bool release_due(struct kvf_engine *e,
			const struct kvf__deferred_free *d, const void *arg)
{
	const struct release_arg *a = arg;

	(void)e;
	if (!a->all && d->release_at_ns > a->now)
		return false;
	kvf__segalloc_free(d->seg->alloc, d->offset, d->size);
	return true;
}

static bool on_segment(struct kvf_engine *e,
		       const struct kvf__deferred_free *d, const void *seg)
{
	(void)e;
	return d->seg == seg;
}

void kvf__deferred_release(struct kvf_engine *e, bool all)
{
	struct release_arg a = { .now = kvf__now(e), .all = all };

	pthread_mutex_lock(&e->deferred_lock);
	deferred_compact(e, release_due, &a);
	pthread_mutex_unlock(&e->deferred_lock);
}

void kvf__deferred_forget_segment(struct kvf_engine *e,
				  struct kvf__segment *seg)
{
	pthread_mutex_lock(&e->deferred_lock);
	deferred_compact(e, on_segment, seg);
	pthread_mutex_unlock(&e->deferred_lock);
}
