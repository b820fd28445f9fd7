/* SPDX-License-Identifier: MIT */
/*
 * batch/batch.h - what every batch operation shares.
 *
 * A batch runs in stages, each one pass over all keys (validate, hash,
 * probe, then the operation's own), so the memory accesses of different
 * keys overlap instead of forming one dependent chain per key.
 */
#ifndef KVF_BATCH_BATCH_H
#define KVF_BATCH_BATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/internal.h"

/* Batches up to this size keep their scratch arrays on the stack. */
#define KVF__BATCH_STACK 128

struct kvf__batch {
	struct kvf_engine *e;
	const struct kvf_key *keys;
	enum kvf_status *status;
	size_t n;
	uint64_t *hash;
	struct kvf__object **obj;
	void *heap; /* scratch for large batches */
	struct kvf__reclaim rc; /* records this batch unpublished */
	struct kvf__prof_span span;
	uint64_t stack_hash[KVF__BATCH_STACK];
	struct kvf__object *stack_obj[KVF__BATCH_STACK];
};

/*
 * kvf__batch_begin() - check the batch as a whole, then each key: validity,
 * hashing, duplicates. Items that fail get their status; valid ones get
 * KVF_OK. Returns KVF_OK or the batch-level error (then every status holds
 * it, and the caller returns it as is: nothing ran).
 * kvf__batch_open() then kvf__batch_hash(), the same two steps apart.
 */
int kvf__batch_begin(struct kvf__batch *b, struct kvf_engine *e,
		     enum kvf__op op, const struct kvf_key *keys, size_t n,
		     enum kvf_status *status);

/* The batch-level checks and scratch of kvf__batch_begin(), no key seen. */
int kvf__batch_open(struct kvf__batch *b, struct kvf_engine *e,
		    enum kvf__op op, const struct kvf_key *keys, size_t n,
		    enum kvf_status *status);

/* Each key of an opened batch: validity, hashing, duplicates. */
int kvf__batch_hash(struct kvf__batch *b);

/* Whether @k is a key @e accepts: 1..max_key_len bytes, with data. */
static inline bool kvf__batch_key_valid(const struct kvf_engine *e,
					const struct kvf_key *k)
{
	return k->len && k->len <= e->cfg.max_key_len && k->data;
}

/* Look up every valid key (stage "probe"); obj[i] NULL when absent. */
void kvf__batch_probe(struct kvf__batch *b);

/* Look key @i up again (its record was replaced). */
struct kvf__object *kvf__batch_relookup(struct kvf__batch *b, size_t i);

/*
 * kvf__batch_end() - free scratch, close the profile span, and return the
 * overall status: KVF_OK if every item is KVF_OK (or, with @not_found_ok,
 * KVF_ERR_OBJECT_NOT_FOUND), else KVF_ERR_PARTIAL.
 */
int kvf__batch_end(struct kvf__batch *b, bool not_found_ok);

/* Refuse a batch before begin: every status (if any) = @err; returns @err. */
int kvf__batch_refuse(enum kvf_status *status, size_t n, int err);

/* Fail every item with @err (a batch-level refusal after begin). */
int kvf__batch_fail(struct kvf__batch *b, int err);

typedef void (*kvf__batch_item_fn)(struct kvf__batch *b, size_t i);

/*
 * kvf__batch_commit() - journal every claimed item (status KVF_OK, record
 * in b->obj[i]) as one mutation of @type each, in one append; then
 * @commit each, or, if the journal refused the batch, @rollback each and
 * set its status to the journal's error. Call inside the read-side
 * section that claimed the items (one level): the journal append runs
 * outside it (kvf__engine_journal_claimed), so records of the batch that
 * were not claimed must not be used after. Returns how many were
 * committed.
 */
enum kvf__mutation_type;
size_t kvf__batch_commit(struct kvf__batch *b, enum kvf__mutation_type type,
			 kvf__batch_item_fn commit, kvf__batch_item_fn rollback);

/* Copy @o's replica descriptors out. */
void kvf__replicas_describe(const struct kvf__object *o,
			    struct kvf_replicas *out);

#endif /* KVF_BATCH_BATCH_H */
