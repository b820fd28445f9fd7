/* SPDX-License-Identifier: MIT */
/*
 * batch/commit.c - the journal step every mutating batch shares.
 *
 * A mutating batch first claims its items (each record moved to a state
 * only this thread may leave: ENDING, REMOVING), then journals all claimed
 * items in one append, outside its read-side section
 * (kvf__engine_journal_claimed), then either commits each claim or, when
 * the journal refused the batch, rolls each back and reports the
 * journal's status. Nothing of a refused batch becomes visible.
 */
#include "config.h"

#include "batch/batch.h"
#include "engine/mutation.h"

size_t kvf__batch_commit(struct kvf__batch *b, enum kvf__mutation_type type,
			 kvf__batch_item_fn commit, kvf__batch_item_fn rollback)
{
	int ret = kvf__engine_journal_claimed(b->e, type, b->obj, b->status,
					      b->n);
	size_t nr = 0;

	kvf__prof_mark(&b->span, KVF__STAGE_JOURNAL);
	for (size_t i = 0; i < b->n; i++) {
		if (b->status[i] != KVF_OK)
			continue;
		nr++;
		if (ret) {
			rollback(b, i);
			b->status[i] = ret;
		} else {
			commit(b, i);
		}
	}
	kvf__prof_mark(&b->span, KVF__STAGE_PUBLISH);
	return ret ? 0 : nr;
}
