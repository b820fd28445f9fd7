/* SPDX-License-Identifier: MIT */
/*
 * batch/get.c - batch get and exist: the read side.
 *
 * Readers take no lock. For each found record: wait out a writer's brief
 * lock, require COMPLETE, raise the lease, then re-read the state (the
 * Dekker pair with remove, see metadata/objstate.h). A REPLACED record means
 * a newer one holds the key: look it up again. Replica lists are
 * immutable, so copying them needs no lock either.
 *
 * A record that is not visible still says why: a put not yet ended
 * (PROCESSING, or ENDING while its put_end is journaled) makes get answer
 * "not ready", as remove does; exist folds that into "not found". The state
 * is read anyway, so telling them apart costs the hit path nothing.
 */
#include "config.h"

#include "batch/batch.h"
#include "metadata/objstate.h"

/* Why a record in base state @s is invisible to readers. */
static enum kvf_status invisible_status(uint32_t s)
{
	if (s == KVF__OBJ_PROCESSING || s == KVF__OBJ_ENDING)
		return KVF_ERR_OBJECT_NOT_READY;
	return KVF_ERR_OBJECT_NOT_FOUND;
}

/*
 * Grant the lease on key @i and return its visible record, or NULL with
 * *@why set. The caller is inside a read-side section; the record stays
 * valid until it leaves it.
 */
static struct kvf__object *lease_visible(struct kvf__batch *b, size_t i,
					 uint64_t deadline,
					 enum kvf_status *why)
{
	struct kvf__object *o = b->obj[i];

	*why = KVF_ERR_OBJECT_NOT_FOUND;
	while (o) {
		uint32_t s = kvf__obj_read_state(o);

		if (s == KVF__OBJ_REPLACED) {
			o = kvf__batch_relookup(b, i);
			continue;
		}
		if (s != KVF__OBJ_COMPLETE) {
			*why = invisible_status(s);
			return NULL;
		}
		kvf__obj_extend_lease(o, deadline);
		s = kvf__obj_read_state(o);
		if (s == KVF__OBJ_COMPLETE)
			return o;
		if (s != KVF__OBJ_REPLACED) {
			*why = invisible_status(s);
			return NULL;
		}
		o = kvf__batch_relookup(b, i);
	}
	return NULL;
}

static void lease_all(struct kvf__batch *b, struct kvf_replicas *out)
{
	uint64_t deadline = kvf__now(b->e) + b->e->lease_ttl_ns;

	for (size_t i = 0; i < b->n; i++) {
		struct kvf__object *o;
		enum kvf_status why;

		if (b->status[i] != KVF_OK)
			continue;
		o = lease_visible(b, i, deadline, &why);
		if (!o) {
			/* exist (no @out) answers only "there or not" */
			b->status[i] = out ? why : KVF_ERR_OBJECT_NOT_FOUND;
			continue;
		}
		if (out)
			kvf__replicas_describe(o, &out[i]);
	}
	kvf__prof_mark(&b->span, KVF__STAGE_PUBLISH);
}

enum kvf_status kvf_batch_get(struct kvf_engine *e, const struct kvf_key *keys,
			      size_t n, struct kvf_replicas *out,
			      enum kvf_status *status, uint64_t *lease_ttl_ms)
{
	struct kvf__batch b;
	int ret;

	if (!out)
		return kvf__batch_refuse(status, n, KVF_ERR_INVALID_ARGUMENT);
	ret = kvf__batch_begin(&b, e, KVF__OP_GET, keys, n, status);
	if (ret)
		return ret;
	kvf__rcu_read_lock();
	kvf__batch_probe(&b);
	lease_all(&b, out);
	kvf__rcu_read_unlock();
	if (lease_ttl_ms)
		*lease_ttl_ms = e->cfg.lease_ttl_ms;
	return kvf__batch_end(&b, false);
}

enum kvf_status kvf_batch_exist(struct kvf_engine *e,
				const struct kvf_key *keys, size_t n,
				enum kvf_status *status)
{
	struct kvf__batch b;
	int ret;

	ret = kvf__batch_begin(&b, e, KVF__OP_EXIST, keys, n, status);
	if (ret)
		return ret;
	kvf__rcu_read_lock();
	kvf__batch_probe(&b);
	lease_all(&b, NULL);
	kvf__rcu_read_unlock();
	return kvf__batch_end(&b, true);
}
