/* SPDX-License-Identifier: MIT */
/*
 * engine/journal_glue.c - the engine's side of the journal.
 *
 * Translates engine mutations into journal records and appends them as one
 * batch, which the journal's writer merges with concurrent callers' batches
 * into one transaction (group commit). Without a journal
 * (KVF_DURABILITY_NONE) every call succeeds at once.
 *
 * The records of one call are all-or-nothing: the callers make the
 * affected objects visible (or gone) only after this returns KVF_OK.
 *
 * A batch's claimed objects are journaled outside the caller's read-side
 * section (kvf__engine_journal_claimed): an append may wait for an fsync,
 * and a section held across it would stall every grace period. The
 * records stay meanwhile because a claimed record (ENDING, REMOVING) is
 * moved on by its owner alone, and an unmount waits for that verdict
 * before it lets the record's segments go.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "engine/internal.h"
#include "engine/mutation.h"
#include "engine/replication.h"
#include "journal/journal.h"

/* Batches up to this size translate on the stack. */
#define GLUE_STACK 128

static void object_jrec(const struct kvf_engine *e, const struct kvf__object *o,
			enum kvf__jrec_type type, struct kvf__jrec *r)
{
	r->type = type;
	r->obj.key = kvf__object_key(o);
	r->obj.key_len = o->key_len;
	if (type == KVF__JREC_OBJECT_REMOVE)
		return;
	r->obj.flags = o->flags & (KVF__OBJ_HARD_PIN | KVF__OBJ_SOFT_PIN);
	r->obj.size = o->size;
	/*
	 * The object's stamp, which replay restores: a soft pin's deadline
	 * (put_end sets it as it publishes), else the put time, which
	 * eviction ranks a never-read object by.
	 */
	r->obj.soft_pin_deadline_ns = o->stamp;
	if (o->flags & KVF__OBJ_SOFT_PIN)
		r->obj.soft_pin_deadline_ns = kvf__now(e) + e->soft_pin_ns;
	r->obj.nr_replicas = o->nr_replicas;
	for (unsigned i = 0; i < o->nr_replicas; i++) {
		const struct kvf__replica *rep = kvf__object_replicas_const(o);

		r->obj.replicas[i].segment_id = kvf__replica_seg(&rep[i])->id;
		r->obj.replicas[i].offset = kvf__replica_offset(&rep[i]);
	}
}

/*
 * Object records (nearly all of them) set every field the encoder reads
 * (object_jrec()); clearing the whole record first, ~120 bytes each,
 * showed up on the put path. The rare others are cleared.
 */
static void translate(const struct kvf_engine *e, const struct kvf__mutation *m,
		      struct kvf__jrec *r)
{
	if (m->type != KVF__MUT_OBJECT_PUT &&
	    m->type != KVF__MUT_OBJECT_REPLICAS &&
	    m->type != KVF__MUT_OBJECT_REMOVE)
		memset(r, 0, sizeof(*r));
	switch (m->type) {
	case KVF__MUT_SEGMENT_MOUNT:
		r->type = KVF__JREC_SEGMENT_MOUNT;
		r->mount.segment_id = m->segment_id;
		r->mount.client_id = m->client_id;
		r->mount.base = m->base;
		r->mount.size = m->size;
		r->mount.name = m->name;
		r->mount.name_len = (uint16_t)strlen(m->name);
		r->mount.endpoint = m->endpoint;
		r->mount.endpoint_len = (uint16_t)strlen(m->endpoint);
		break;
	case KVF__MUT_SEGMENT_UNMOUNT:
		r->type = KVF__JREC_SEGMENT_UNMOUNT;
		r->unmount.segment_id = m->segment_id;
		break;
	case KVF__MUT_CLIENT_REMOVE:
		r->type = KVF__JREC_CLIENT_REMOVE;
		r->client.client_id = m->client_id;
		break;
	case KVF__MUT_OBJECT_PUT:
		object_jrec(e, m->obj, KVF__JREC_OBJECT_PUT, r);
		break;
	case KVF__MUT_OBJECT_REPLICAS:
		object_jrec(e, m->obj, KVF__JREC_OBJECT_REPLICAS, r);
		break;
	case KVF__MUT_OBJECT_REMOVE:
		object_jrec(e, m->obj, KVF__JREC_OBJECT_REMOVE, r);
		break;
	}
}

/*
 * Out of line: inlined into kvf__engine_journal_claimed(), GCC cannot see
 * that translate() sets every field the encoder reads of an object
 * record, and warns that the records may be used uninitialised.
 */
__attribute__((noinline)) int kvf__engine_journal(struct kvf_engine *e,
						  const struct kvf__mutation *m,
						  size_t n)
{
	struct kvf__jrec stack[GLUE_STACK], *recs = stack;
	int ret;

	if (!e->journal || !n)
		return KVF_OK;
	if (n > GLUE_STACK) {
		recs = malloc(n * sizeof(*recs));
		if (!recs)
			return KVF_ERR_NO_MEMORY;
	}
	for (size_t i = 0; i < n; i++)
		translate(e, &m[i], &recs[i]);
	ret = kvf__journal_append(e->journal, recs, n);
	if (recs != stack)
		free(recs);
	return ret;
}

int kvf__engine_journal_claimed(struct kvf_engine *e,
				enum kvf__mutation_type type,
				struct kvf__object *const *obj,
				const enum kvf_status *status, size_t n)
{
	struct kvf__mutation stack[GLUE_STACK], *muts = stack;
	size_t nr = 0;
	int ret;

	if (!e->journal)
		return KVF_OK;
	for (size_t i = 0; i < n; i++)
		nr += status[i] == KVF_OK;
	if (!nr)
		return KVF_OK;
	if (nr > GLUE_STACK) {
		muts = malloc(nr * sizeof(*muts));
		if (!muts)
			return KVF_ERR_NO_MEMORY;
	}
	for (size_t i = 0, k = 0; i < n; i++)
		if (status[i] == KVF_OK)
			muts[k++] = (struct kvf__mutation){ .type = type,
							    .obj = obj[i] };
	kvf__rcu_read_unlock();
	ret = kvf__engine_journal(e, muts, nr);
	kvf__rcu_read_lock();
	if (muts != stack)
		free(muts);
	return ret;
}

struct kvf__journal *kvf__engine_journal_of(struct kvf_engine *e)
{
	return e->journal;
}
