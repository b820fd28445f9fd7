/* SPDX-License-Identifier: MIT */
/*
 * metadata/index_lfht.c - the object index on liburcu's cds_lfht.
 *
 * Design: records carry a cds_lfht_node in their hook prefix; the table
 * is presized to the expected count and created with AUTO_RESIZE together
 * with ACCOUNTING (AUTO_RESIZE alone lagged for seconds after a bulk load
 * on these machines). Lookups run under the caller's RCU read lock and take
 * no lock; add_unique/replace/del are lock-free. The split-ordered list
 * hides its buckets, so lookup_batch is a plain loop: this is the baseline
 * the bucketized index is measured against.
 *
 * The table is keyed by bits 32-63 of a key's hash (lfht_hash()), as the
 * bucket index homes records: an allocation tag keeps only those
 * (alloc/segalloc.h), and lookup_hash() from it must find the record.
 *
 * Destroy needs an empty table (cds_lfht_destroy refuses a non-empty
 * auto-resize table with -EPERM); the engine removes everything first.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>

#include <kvforge/status.h>

#include "base/die.h"
#include "base/rcu.h"
#include "metadata/index.h"

_Static_assert(sizeof(struct cds_lfht_node) == KVF__OBJ_HOOK_SIZE,
	       "the lfht node fills the record's hook prefix");

struct lfht_index {
	struct kvf__index base;
	struct cds_lfht *ht;
};

/* The table's hash of a key hash: its high half (see above). */
static inline unsigned long lfht_hash(uint64_t hash)
{
	return (unsigned long)(hash >> 32);
}

static struct cds_lfht *table_of(struct kvf__index *idx)
{
	return caa_container_of(idx, struct lfht_index, base)->ht;
}

static struct kvf__object *object_of(struct cds_lfht_node *node)
{
	return kvf__object_from_hook(node);
}

static struct cds_lfht_node *node_of(struct kvf__object *o)
{
	return kvf__object_hook(o);
}

struct key_ref {
	const char *data;
	size_t len;
};

static int match_key(struct cds_lfht_node *node, const void *arg)
{
	const struct key_ref *k = arg;
	const struct kvf__object *o = object_of(node);

	return kvf__object_has_key(o, k->data, k->len);
}

static unsigned long table_size_for(uint64_t expected)
{
	unsigned long size = 1;

	/* Power of two at or above expected / 0.75, at least 1024. */
	expected = expected + expected / 3;
	while (size < expected && size < (1UL << 40))
		size <<= 1;
	return size < 1024 ? 1024 : size;
}

static int lfht_create(uint64_t expected, struct kvf__index **out)
{
	struct lfht_index *li = calloc(1, sizeof(*li));

	if (!li)
		return KVF_ERR_NO_MEMORY;
	li->base.ops = &kvf__index_lfht_ops;
	li->ht = cds_lfht_new_flavor(table_size_for(expected), 1024, 0,
				     CDS_LFHT_AUTO_RESIZE | CDS_LFHT_ACCOUNTING,
				     kvf__rcu_flavor(), NULL);
	if (!li->ht) {
		free(li);
		return KVF_ERR_NO_MEMORY;
	}
	*out = &li->base;
	return KVF_OK;
}

static void lfht_destroy(struct kvf__index *idx)
{
	struct lfht_index *li = caa_container_of(idx, struct lfht_index, base);
	int ret;

	if (!idx)
		return;
	ret = cds_lfht_destroy(li->ht, NULL);
	if (ret)
		kvf__die("cds_lfht_destroy: %d (index not empty?)", ret);
	free(li);
}

static void lfht_lookup_batch(struct kvf__index *idx, size_t n,
			      const uint64_t *hashes, const struct kvf_key *keys,
			      struct kvf__object **out)
{
	struct cds_lfht *ht = table_of(idx);

	for (size_t i = 0; i < n; i++) {
		struct key_ref k = { keys[i].data, keys[i].len };
		struct cds_lfht_iter iter;
		struct cds_lfht_node *node;

		cds_lfht_lookup(ht, lfht_hash(hashes[i]), match_key, &k,
				&iter);
		node = cds_lfht_iter_get_node(&iter);
		out[i] = node ? object_of(node) : NULL;
		if (out[i])
			kvf__tsan_acquire(out[i]);
	}
}

static struct kvf__object *lfht_insert_unique(struct kvf__index *idx,
					      struct kvf__object *o,
					      uint64_t hash)
{
	struct key_ref k = { kvf__object_key(o), o->key_len };
	struct cds_lfht_node *node;

	kvf__tsan_release(o);
	node = cds_lfht_add_unique(table_of(idx), lfht_hash(hash),
				   match_key, &k, node_of(o));
	if (node == node_of(o))
		return NULL;
	kvf__tsan_acquire(object_of(node));
	return object_of(node);
}

static int lfht_replace(struct kvf__index *idx, struct kvf__object *old,
			struct kvf__object *new_obj, uint64_t hash)
{
	struct key_ref k = { kvf__object_key(new_obj), new_obj->key_len };
	struct cds_lfht_iter old_pos = { .node = node_of(old) };

	kvf__tsan_release(new_obj);
	if (cds_lfht_replace(table_of(idx), &old_pos, lfht_hash(hash),
			     match_key, &k, node_of(new_obj)))
		return KVF_ERR_OBJECT_NOT_FOUND;
	return KVF_OK;
}

static int lfht_remove(struct kvf__index *idx, struct kvf__object *o,
		       uint64_t hash)
{
	(void)hash;
	return cds_lfht_del(table_of(idx), node_of(o)) ?
		       KVF_ERR_OBJECT_NOT_FOUND :
		       KVF_OK;
}

struct pred_ref {
	kvf__index_match_fn match;
	void *arg;
};

static int match_pred(struct cds_lfht_node *node, const void *arg)
{
	const struct pred_ref *p = arg;

	return p->match(object_of(node), p->arg);
}

static struct kvf__object *lfht_lookup_hash(struct kvf__index *idx,
					    uint64_t hash,
					    kvf__index_match_fn match,
					    void *arg)
{
	struct pred_ref p = { match, arg };
	struct cds_lfht_iter iter;
	struct cds_lfht_node *node;

	cds_lfht_lookup(table_of(idx), lfht_hash(hash), match_pred, &p,
			&iter);
	node = cds_lfht_iter_get_node(&iter);
	if (!node)
		return NULL;
	kvf__tsan_acquire(object_of(node));
	return object_of(node);
}

static void lfht_foreach(struct kvf__index *idx, kvf__index_visit_fn fn,
			 void *arg)
{
	struct cds_lfht_iter iter;
	struct cds_lfht_node *node;

	cds_lfht_for_each(table_of(idx), &iter, node) {
		kvf__tsan_acquire(object_of(node));
		fn(object_of(node), arg);
	}
}

static uint64_t lfht_count(struct kvf__index *idx)
{
	long before, after;
	unsigned long count;

	cds_lfht_count_nodes(table_of(idx), &before, &count, &after);
	return count;
}

const struct kvf__index_ops kvf__index_lfht_ops = {
	.name = "lfht",
	.hooked = true,
	.create = lfht_create,
	.destroy = lfht_destroy,
	.lookup_batch = lfht_lookup_batch,
	.insert_unique = lfht_insert_unique,
	.replace = lfht_replace,
	.remove = lfht_remove,
	.lookup_hash = lfht_lookup_hash,
	.foreach = lfht_foreach,
	.count = lfht_count,
};
