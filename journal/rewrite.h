/* SPDX-License-Identifier: MIT */
/*
 * journal/rewrite.h - checkpoints that rewrite the image (rewrite.c): the
 * image's objects merged with a window of the log into the other object
 * database, in key order, then switched to with one meta write. No
 * threads, no locks: the pipeline's writer runs the steps, each inside a
 * write transaction it holds the slot for.
 */
#ifndef KVF_JOURNAL_REWRITE_H
#define KVF_JOURNAL_REWRITE_H

#include <stdbool.h>
#include <stdint.h>

#include "journal/store.h"

struct kvf__rewrite;

/*
 * kvf__rewrite_wanted() - should a checkpoint folding @window log records
 * into an image of @objects objects rewrite the image rather than fold in
 * place? True once the window is large enough that folding in place would
 * dirty most of the image's leaf pages anyway.
 */
bool kvf__rewrite_wanted(uint64_t window, uint64_t objects);

/*
 * kvf__rewrite_new() - plan a rewrite folding the log up to @target
 * (rounded up to the end of the frame holding it) into the image, as of
 * the state @st. @chunk: records decoded, or entries written, per step.
 * @budget: bytes of the window's records kept in memory at a time (the
 * window is read once per slice of the hash space that fits). NULL when
 * out of memory.
 */
struct kvf__rewrite *kvf__rewrite_new(uint64_t target, uint64_t chunk,
				      uint64_t budget,
				      const struct kvf__store_state *st);
void kvf__rewrite_free(struct kvf__rewrite *rw);

/*
 * kvf__rewrite_step() - one step inside the write transaction @txn: clear
 * the spare object database, read part of the window, write part of the
 * new image, or switch to it. The switch (the last step) applies the
 * window's segment and client records, deletes the window from the log,
 * makes the new image current, empties the old one and advances the
 * checkpoint sequence, all in @txn; only then is @st changed (to the
 * state after) and *@done set. An LMDB/errno code.
 *
 * After @txn ends, call kvf__rewrite_settle(): a step whose transaction
 * failed is undone and runs again.
 */
int kvf__rewrite_step(MDB_txn *txn, const struct kvf__store_dbs *dbs,
		      struct kvf__rewrite *rw, struct kvf__store_state *st,
		      bool *done);
void kvf__rewrite_settle(struct kvf__rewrite *rw, bool committed);

#endif /* KVF_JOURNAL_REWRITE_H */
