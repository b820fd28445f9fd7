/* SPDX-License-Identifier: MIT */
/*
 * engine/replica_drop.h - dropping the replicas a segment holds from the
 * records that point into it (engine/replica_drop.c). Unmount, and with
 * it a dead or unregistered client's cleanup, goes through here.
 */
#ifndef KVF_ENGINE_REPLICA_DROP_H
#define KVF_ENGINE_REPLICA_DROP_H

#include <stdbool.h>

struct kvf_engine;
struct kvf__segment;

struct kvf__replica_drop;

/*
 * kvf__replica_drop_prepare() - what a drop of @seg's replicas needs,
 * allocated before anything changes. NULL: no memory (nothing changed).
 * Hand it to kvf__replica_drop_segment() or kvf__replica_drop_cancel(),
 * which free it.
 */
struct kvf__replica_drop *kvf__replica_drop_prepare(struct kvf_engine *e,
						    struct kvf__segment *seg,
						    bool journal);

/*
 * kvf__replica_drop_segment() - drop every replica living in the prepared
 * segment from its record: copy-on-write to a record without it, or
 * removal of a record left with none. Complete objects' changes are
 * journaled (when prepared with @journal) before any other writer may
 * journal about those objects. Frees @d.
 *
 * Call with e->seg_lock held, outside a read-side section, after the
 * segment left the published segment table and a grace period passed (no
 * put can still place into it). May block: grace periods, journal
 * appends, and a wait for memory (the segment must empty before it can
 * go). Returns KVF_OK or the first journal error; the replicas are
 * dropped in memory either way.
 */
int kvf__replica_drop_segment(struct kvf__replica_drop *d);

/* Free a prepared drop that will not run (the unmount failed first). */
void kvf__replica_drop_cancel(struct kvf__replica_drop *d);

#endif /* KVF_ENGINE_REPLICA_DROP_H */
