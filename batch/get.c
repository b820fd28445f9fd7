/* SPDX-License-Identifier: MIT */
/*
 * batch/get.c - batch get and exist: the read side.
 *
 * Readers take no lock. For each found record: wait out a writer's brief
 * lock, require COMPLETE, raise the lease, then re-read the state (the
 * Dekker pair with remove, see engine/objstate.h). A REPLACED record means
 * a newer one holds the key: look it up again. Replica lists are
 * immutable, so copying them needs no lock either.
 *
 * Probe, lease and copy are one pass over the batch: the index hands
 * each record over as soon as its key compare found it (lookup_visit),
 * so its lines are read once, while in cache, and no stage walks the
 * whole batch's records a second time.
 *
 * A record that is not visible still says why: a put not yet ended
 * (PROCESSING, or ENDING while its put_end is journaled) makes get answer
 * "not ready", as remove does; exist folds that into "not found". The state
 * is read anyway, so telling them apart costs the hit path nothing.
 */
#include "config.h"

#include "batch/batch.h"
#include "engine/objstate.h"

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

/* Lease key @i (status KVF_OK) and, for get (@out), copy its replicas. */
static void lease_one(struct kvf__batch *b, size_t i, uint64_t deadline,
		      struct kvf_replicas *out)
{
	enum kvf_status why;
	struct kvf__object *o = lease_visible(b, i, deadline, &why);

	if (!o) {
		/* exist (no @out) answers only "there or not" */
		b->status[i] = out ? why : KVF_ERR_OBJECT_NOT_FOUND;
		return;
	}
	if (out)
		kvf__replicas_describe(o, &out[i]);
}

static uint64_t lease_deadline(const struct kvf__batch *b)
{
	return kvf__now(b->e) + b->e->lease_ttl_ns;
}

static void lease_all(struct kvf__batch *b, struct kvf_replicas *out)
{
	uint64_t deadline = lease_deadline(b);

	for (size_t i = 0; i < b->n; i++)
		if (b->status[i] == KVF_OK)
			lease_one(b, i, deadline, out);
	kvf__prof_mark(&b->span, KVF__STAGE_PUBLISH);
}

struct lease_ctx {
	struct kvf__batch *b;
	struct kvf_replicas *out;
	uint64_t deadline;
};

static void lease_found(void *arg, size_t i, struct kvf__object *o)
{
	struct lease_ctx *c = arg;

	(void)o; /* also in b->obj[i], where lease_visible() reads it */
	lease_one(c->b, i, c->deadline, c->out);
}

/*
 * Probe, lease and copy in one pass (the index hands each record over as
 * its key compare finds it, metadata/index.h lookup_visit): the record's
 * lines are read once, while they are in cache. The profile counts it
 * all as "probe". A batch with refused keys takes the staged path, which
 * keeps them out of the index.
 */
static void probe_and_lease(struct kvf__batch *b, struct kvf_replicas *out)
{
	struct lease_ctx c = {b, out, 0};

	for (size_t i = 0; i < b->n; i++) {
		if (b->status[i] != KVF_OK) {
			kvf__batch_probe(b);
			lease_all(b, out);
			return;
		}
	}
	c.deadline = lease_deadline(b);
	kvf__index_lookup_visit(b->e->index, b->n, b->hash, b->keys, b->obj,
				lease_found, &c);
	kvf__prof_mark(&b->span, KVF__STAGE_PROBE);
	kvf__prof_mark(&b->span, KVF__STAGE_PUBLISH);
}

int kvf_batch_get(struct kvf_engine *e, const struct kvf_key *keys, size_t n,
		  struct kvf_replicas *out, enum kvf_status *status,
		  uint64_t *lease_ttl_ms)
{
	struct kvf__batch b;
	int ret;

	if (!out)
		return kvf__batch_refuse(status, n, KVF_ERR_INVALID_ARGUMENT);
	ret = kvf__batch_begin(&b, e, KVF__OP_GET, keys, n, status);
	if (ret)
		return ret;
	kvf__rcu_read_lock();
	probe_and_lease(&b, out);
	kvf__rcu_read_unlock();
	if (lease_ttl_ms)
		*lease_ttl_ms = e->cfg.lease_ttl_ms;
	return kvf__batch_end(&b, false);
}

int kvf_batch_exist(struct kvf_engine *e, const struct kvf_key *keys,
		    size_t n, enum kvf_status *status)
{
	struct kvf__batch b;
	int ret;

	ret = kvf__batch_begin(&b, e, KVF__OP_EXIST, keys, n, status);
	if (ret)
		return ret;
	kvf__rcu_read_lock();
	probe_and_lease(&b, NULL);
	kvf__rcu_read_unlock();
	return kvf__batch_end(&b, true);
}
