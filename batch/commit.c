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
	struct kvf__mutation *muts;
	size_t nr = 0;
	int ret;

	muts = malloc(b->n * sizeof(*muts));
	for (size_t i = 0; muts && i < b->n; i++)
		if (b->status[i] == KVF_OK)
			muts[nr++] = (struct kvf__mutation){ .type = type,
							     .obj = b->obj[i] };
	ret = !muts ? KVF_ERR_NO_MEMORY :
	      nr    ? kvf__engine_journal(b->e, muts, nr) :
		      KVF_OK;
	free(muts);
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
