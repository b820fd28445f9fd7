/* SPDX-License-Identifier: MIT */
/*
 * batch/remove.c - a client's batch remove, remove_all and remove by
 * prefix: the public entry points.
 *
 * A batch remove validates and hashes its keys, probes the index, claims
 * each record found (kvf__remove_claim, retrying a key whose record was
 * replaced meanwhile) and hands the claimed batch to the engine's one
 * removal path (engine/remove.c), which journals, unlinks and frees.
 * remove_all and remove_prefix are the engine's sweep.
 */
#include "config.h"

#include "batch/batch.h"
#include "engine/remove.h"

/* Claim key @i's record for removal, or return the item's error. */
static int claim(struct kvf__batch *b, size_t i, bool force, uint64_t now)
{
	for (struct kvf__object *o = b->obj[i]; o;
	     o = kvf__batch_relookup(b, i)) {
		int ret = kvf__remove_claim(o, force, now);

		if (ret != KVF__CLAIM_STALE) {
			b->obj[i] = o;
			return ret;
		}
	}
	return KVF_ERR_OBJECT_NOT_FOUND;
}

enum kvf_status kvf_batch_remove(struct kvf_engine *e,
				 const struct kvf_key *keys, size_t n,
				 bool force, enum kvf_status *status)
{
	struct kvf__batch b;
	uint64_t now;
	int ret;

	ret = kvf__batch_begin(&b, e, KVF__OP_REMOVE, keys, n, status);
	if (ret)
		return ret;
	kvf__rcu_read_lock();
	kvf__batch_probe(&b);
	now = kvf__now(e);
	for (size_t i = 0; i < n; i++)
		if (status[i] == KVF_OK)
			status[i] = claim(&b, i, force, now);
	kvf__prof_mark(&b.span, KVF__STAGE_VALIDATE);
	kvf__remove_claimed(e, b.obj, b.hash, status, n, &b.span, NULL);
	kvf__rcu_read_unlock();
	return kvf__batch_end(&b, false);
}

enum kvf_status kvf_remove_all(struct kvf_engine *e, bool force,
			       uint64_t *removed)
{
	if (!e)
		return KVF_ERR_INVALID_ARGUMENT;
	return kvf__remove_sweep(e, NULL, 0, force, removed);
}

enum kvf_status kvf_remove_prefix(struct kvf_engine *e,
				  const struct kvf_key *prefix, bool force,
				  uint64_t *removed)
{
	if (!e || !prefix)
		return KVF_ERR_INVALID_ARGUMENT;
	if (!prefix->len || !prefix->data || prefix->len > e->cfg.max_key_len)
		return KVF_ERR_INVALID_KEY;
	return kvf__remove_sweep(e, prefix->data, prefix->len, force, removed);
}
