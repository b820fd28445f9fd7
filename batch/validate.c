/* SPDX-License-Identifier: MIT */
/*
 * batch/validate.c - batch set-up: refusal rules, hashing, duplicates,
 * the probe stage, and the overall status.
 *
 * Duplicates are found from the already computed hashes: a bit filter
 * for batches up to KVF__BATCH_STACK keys, an open-addressing table of
 * item indices above that; every occurrence of a repeated key is
 * refused, so the outcome does not depend on order.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "batch/batch.h"
#include "base/die.h"
#include "metadata/hash.h"
#include "metadata/keyeq.h"

static void fill_status(enum kvf_status *status, size_t n, int err)
{
	if (!status)
		return;
	for (size_t i = 0; i < n; i++)
		status[i] = err;
}

int kvf__batch_refuse(enum kvf_status *status, size_t n, int err)
{
	fill_status(status, n, err);
	return err;
}

static int check_batch(struct kvf_engine *e, const struct kvf_key *keys,
		       size_t n, enum kvf_status *status)
{
	if (!e || !keys || !status)
		return KVF_ERR_INVALID_ARGUMENT;
	if (n == 0)
		return KVF_ERR_BATCH_EMPTY;
	if (n > e->cfg.max_batch)
		return KVF_ERR_BATCH_TOO_LARGE;
	return KVF_OK;
}

static int scratch_alloc(struct kvf__batch *b)
{
	if (b->n <= KVF__BATCH_STACK) {
		b->hash = b->stack_hash;
		b->obj = b->stack_obj;
		b->heap = NULL;
		return KVF_OK;
	}
	b->heap = malloc(b->n * (sizeof(*b->hash) + sizeof(*b->obj)));
	if (!b->heap)
		return KVF_ERR_NO_MEMORY;
	b->hash = b->heap;
	b->obj = (struct kvf__object **)(b->hash + b->n);
	return KVF_OK;
}

static bool same_key(const struct kvf_key *a, const struct kvf_key *b)
{
	return a->len == b->len && kvf__bytes_equal(a->data, b->data, a->len);
}

/* Takes part in the duplicate check: valid (or already a duplicate). */
static bool dup_candidate(const struct kvf__batch *b, size_t i)
{
	return b->status[i] == KVF_OK || b->status[i] == KVF_ERR_DUPLICATE_KEY;
}

/* Refuse @i and every earlier item with the same key. */
static void mark_earlier_twins(struct kvf__batch *b, size_t i)
{
	for (size_t j = 0; j < i; j++) {
		if (b->hash[j] != b->hash[i] || !dup_candidate(b, j) ||
		    !same_key(&b->keys[j], &b->keys[i]))
			continue;
		b->status[j] = KVF_ERR_DUPLICATE_KEY;
		b->status[i] = KVF_ERR_DUPLICATE_KEY;
	}
}

/*
 * A batch of up to KVF__BATCH_STACK keys: one bit per key, chosen by the
 * top bits of its hash, in a DUP_FILTER_BITS filter. A key whose bit is
 * already set may repeat an earlier one and is compared with every
 * earlier key (expected ~n^2/(2 * DUP_FILTER_BITS) such keys, one per
 * batch of 128); the rest cost a shift, a load and a store, with no
 * branch the predictor misses. With the open-addressing table below
 * for every batch, the check took more of a get's samples than hashing
 * the keys (perf: 10% against 7.8%).
 */
#define DUP_FILTER_BITS 8192
#define DUP_FILTER_SHIFT 51 /* 64 - log2(DUP_FILTER_BITS) */

static void mark_duplicates_small(struct kvf__batch *b)
{
	uint64_t filter[DUP_FILTER_BITS / 64];

	memset(filter, 0, sizeof(filter));
	for (size_t i = 0; i < b->n; i++) {
		uint64_t f = b->hash[i] >> DUP_FILTER_SHIFT;
		uint64_t bit = 1ULL << (f & 63), seen;

		if (!dup_candidate(b, i))
			continue;
		seen = filter[f >> 6] & bit;
		filter[f >> 6] |= bit;
		if (seen)
			mark_earlier_twins(b, i);
	}
}

/* Larger batches: an open-addressing table of item indices by hash. */
static int mark_duplicates_large(struct kvf__batch *b)
{
	size_t size = 2;
	uint32_t *slots;

	while (size < 2 * b->n)
		size <<= 1;
	slots = calloc(size, sizeof(*slots));
	if (!slots)
		return KVF_ERR_NO_MEMORY;
	for (size_t i = 0; i < b->n; i++) {
		size_t pos = b->hash[i] & (size - 1);

		if (!dup_candidate(b, i))
			continue;
		for (;; pos = (pos + 1) & (size - 1)) {
			uint32_t j = slots[pos];

			if (!j) {
				slots[pos] = (uint32_t)i + 1;
				break;
			}
			j--;
			if (b->hash[j] == b->hash[i] &&
			    same_key(&b->keys[j], &b->keys[i])) {
				b->status[j] = KVF_ERR_DUPLICATE_KEY;
				b->status[i] = KVF_ERR_DUPLICATE_KEY;
				break;
			}
		}
	}
	free(slots);
	return KVF_OK;
}

static int mark_duplicates(struct kvf__batch *b)
{
	if (b->n < 2)
		return KVF_OK;
	if (b->n <= KVF__BATCH_STACK) {
		mark_duplicates_small(b);
		return KVF_OK;
	}
	return mark_duplicates_large(b);
}

int kvf__batch_open(struct kvf__batch *b, struct kvf_engine *e,
		    enum kvf__op op, const struct kvf_key *keys, size_t n,
		    enum kvf_status *status)
{
	int ret = check_batch(e, keys, n, status);

	if (ret) {
		fill_status(status, n, ret);
		return ret;
	}
	kvf__rcu_ensure_registered();
	b->e = e;
	b->rc.blk = NULL;
	b->keys = keys;
	b->status = status;
	b->n = n;
	kvf__prof_begin(e->prof, &b->span, op, n);
	ret = scratch_alloc(b);
	return ret ? kvf__batch_fail(b, ret) : KVF_OK;
}

int kvf__batch_hash(struct kvf__batch *b)
{
	const struct kvf_key *keys = b->keys;
	enum kvf_status *status = b->status;
	int ret;

	for (size_t i = 0; i < b->n; i++)
		status[i] = kvf__batch_key_valid(b->e, &keys[i]) ?
				    KVF_OK :
				    KVF_ERR_INVALID_KEY;
	kvf__prof_mark(&b->span, KVF__STAGE_VALIDATE);
	for (size_t i = 0; i < b->n; i++)
		b->hash[i] = status[i] == KVF_OK ?
				     kvf__key_hash(keys[i].data, keys[i].len) :
				     0;
	ret = mark_duplicates(b);
	if (ret)
		return kvf__batch_fail(b, ret);
	kvf__prof_mark(&b->span, KVF__STAGE_HASH);
	return KVF_OK;
}

int kvf__batch_begin(struct kvf__batch *b, struct kvf_engine *e,
		     enum kvf__op op, const struct kvf_key *keys, size_t n,
		     enum kvf_status *status)
{
	int ret = kvf__batch_open(b, e, op, keys, n, status);

	return ret ? ret : kvf__batch_hash(b);
}

void kvf__batch_probe(struct kvf__batch *b)
{
	size_t refused = 0;

	for (size_t i = 0; i < b->n; i++)
		refused += b->status[i] != KVF_OK;
	if (!refused) {
		kvf__index_lookup_batch(b->e->index, b->n, b->hash, b->keys,
					b->obj);
	} else {
		/* Rare: keep refused keys (maybe NULL data) out of the index. */
		for (size_t i = 0; i < b->n; i++)
			b->obj[i] = b->status[i] == KVF_OK ?
					    kvf__batch_relookup(b, i) :
					    NULL;
	}
	kvf__prof_mark(&b->span, KVF__STAGE_PROBE);
}

struct kvf__object *kvf__batch_relookup(struct kvf__batch *b, size_t i)
{
	struct kvf__object *o;

	kvf__index_lookup_batch(b->e->index, 1, &b->hash[i], &b->keys[i], &o);
	return o;
}

int kvf__batch_end(struct kvf__batch *b, bool not_found_ok)
{
	int ret = KVF_OK;

	kvf__reclaim_flush(&b->rc);
	for (size_t i = 0; i < b->n; i++) {
		if (b->status[i] == KVF_OK ||
		    (not_found_ok && b->status[i] == KVF_ERR_OBJECT_NOT_FOUND))
			continue;
		ret = KVF_ERR_PARTIAL;
		break;
	}
	free(b->heap);
	kvf__prof_mark(&b->span, KVF__STAGE_REPLY);
	kvf__prof_end(&b->span);
	return ret;
}

int kvf__batch_fail(struct kvf__batch *b, int err)
{
	kvf__reclaim_flush(&b->rc);
	fill_status(b->status, b->n, err);
	free(b->heap);
	kvf__prof_end(&b->span);
	return err;
}

void kvf__replicas_describe(const struct kvf__object *o,
			    struct kvf_replicas *out)
{
	const struct kvf__replica *r = kvf__object_replicas_const(o);

	out->count = o->nr_replicas;
	for (unsigned i = 0; i < o->nr_replicas; i++) {
		const struct kvf__segment *seg = kvf__replica_seg(&r[i]);

		out->replica[i].segment_id = seg->id;
		out->replica[i].addr = seg->base + kvf__replica_offset(&r[i]);
		out->replica[i].size = o->size;
	}
}
