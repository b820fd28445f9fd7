/* SPDX-License-Identifier: MIT */
/*
 * batch/commit.c - the journal step every mutating batch shares.
 *
 * A mutating batch first claims its items (each record moved to a state
 * only this thread may leave: ENDING, REMOVING), then journals all claimed
 * items in one append, then either commits each claim or, when the
 * journal refused the batch, rolls each back and reports the journal's
 * status. Nothing of a refused batch becomes visible.
 */
#include "config.h"

#include <stdlib.h>

#include "batch/batch.h"
#include "engine/mutation.h"

size_t kvf__batch_commit(struct kvf__batch *b, enum kvf__mutation_type type,
			 kvf__batch_item_fn commit, kvf__batch_item_fn rollback)
{
	struct kvf__mutation muts_stack[KVF__BATCH_STACK], *muts = NULL;
	size_t nr = 0;
	int ret = KVF_OK;

	for (size_t i = 0; i < b->n; i++)
		nr += b->status[i] == KVF_OK;
	if (nr && b->e->journal) {
		muts = nr <= KVF__BATCH_STACK ? muts_stack :
						malloc(nr * sizeof(*muts));
		if (!muts)
			ret = KVF_ERR_NO_MEMORY;
		for (size_t i = 0, k = 0; muts && i < b->n; i++)
			if (b->status[i] == KVF_OK)
				muts[k++] = (struct kvf__mutation){
					.type = type, .obj = b->obj[i] };
		if (muts)
			ret = kvf__engine_journal(b->e, muts, nr);
		if (muts != muts_stack)
			free(muts);
	}
	kvf__prof_mark(&b->span, KVF__STAGE_JOURNAL);
	for (size_t i = 0; i < b->n; i++) {
		if (b->status[i] != KVF_OK)
			continue;
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
