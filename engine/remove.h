/* SPDX-License-Identifier: MIT */
/*
 * engine/remove.h - removing objects whose records are already in hand.
 *
 * Every removal goes through here: a client's batch remove (batch/remove.c
 * finds the records by key), eviction (by an allocator block's tag) and
 * remove_all/remove_prefix (by a walk of the segments). The caller claims
 * each record (kvf__remove_claim), then hands the claimed batch to
 * kvf__remove_claimed, which journals, unlinks and frees.
 */
#ifndef KVF_ENGINE_REMOVE_H
#define KVF_ENGINE_REMOVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/internal.h"

/* kvf__remove_claim(): the record was replaced or unlinked; look again. */
#define KVF__CLAIM_STALE 1

/**
 * kvf__remove_claim() - claim complete record @o for removal.
 * @o: a record found in the index.
 * @force: claim it even if leased or hard-pinned.
 * @now: the engine clock, for the lease.
 *
 * On success @o is REMOVING, owned by the caller until kvf__remove_claimed
 * moves it on; readers treat it as gone.
 *
 * Return: %KVF_OK; %KVF__CLAIM_STALE when @o is DEAD or REPLACED (the key
 * may have a newer record); or the item's error: %KVF_ERR_OBJECT_NOT_READY
 * (processing, or its put_end in flight), %KVF_ERR_OBJECT_NOT_FOUND (being
 * removed by someone else), %KVF_ERR_OBJECT_HAS_LEASE or
 * %KVF_ERR_OBJECT_PINNED (without @force).
 * Context: inside a read-side section; waits only for another writer's
 * brief lock or an unmount's hold on @o (metadata/objstate.h).
 */
int kvf__remove_claim(struct kvf__object *o, bool force, uint64_t now);

/**
 * kvf__remove_claimed() - remove a batch of claimed records.
 * @e: the engine.
 * @obj: @n records; item i is claimed (by kvf__remove_claim) iff
 *       @status[i] == %KVF_OK, the others are skipped.
 * @hash: @n key hashes (kvf__key_hash() of each claimed record's key).
 * @status: @n item statuses; a claimed item's becomes the journal's error
 *          when the journal refuses the batch (the object then stays).
 * @n: batch size.
 * @span: stage marks (journal; publish: the unlinks; allocate: the
 *        frees); a span that is off for none.
 *
 * Journals the claimed items in one append, then unlinks them and frees
 * their buffers, one allocator lock hold per segment; the records are
 * freed after a grace period. Adjusts the complete-object count.
 *
 * @removed: if not NULL, receives how many were removed.
 *
 * Return: %KVF_OK, or the journal's error (every claimed item's status
 * then holds it too, and nothing was removed).
 * Context: inside exactly one read-side section level, which this leaves
 * for the journal append (it may wait for an fsync) and enters again
 * before it returns: records other than the claimed ones that the caller
 * looked up before the call must not be used after it. May block on the
 * journal.
 */
int kvf__remove_claimed(struct kvf_engine *e, struct kvf__object **obj,
			const uint64_t *hash, enum kvf_status *status, size_t n,
			struct kvf__prof_span *span, size_t *removed);

/**
 * kvf__remove_sweep() - remove every complete object whose key starts
 * with @prefix (@len 0: every one), leased and hard-pinned ones only with
 * @force. Objects put after the call began may or may not be removed.
 * @removed: if not NULL, how many were removed.
 *
 * Return: %KVF_OK, %KVF_ERR_NO_MEMORY, or the last journal error (the
 * sweep goes on past it; the objects it refused stay).
 * Context: outside any read-side section; holds one for a bounded window
 * of blocks at a time, never across a journal wait. May block on the
 * journal.
 */
int kvf__remove_sweep(struct kvf_engine *e, const char *prefix, size_t len,
		      bool force, uint64_t *removed);

#endif /* KVF_ENGINE_REMOVE_H */
