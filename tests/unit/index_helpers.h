/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/index_helpers.h - driving an index directly in tests.
 *
 * Records do not store their hash: these wrappers recompute it, as the
 * index's rare paths do. record_hooked tells kvf__object_new() whether the
 * index under test wants a hook prefix.
 */
#ifndef KVF_TESTS_INDEX_HELPERS_H
#define KVF_TESTS_INDEX_HELPERS_H

#include <stdbool.h>

#include "metadata/hash.h"
#include "metadata/index.h"

static bool record_hooked;

static inline uint64_t rec_hash(const struct kvf__object *o)
{
	return kvf__key_hash(kvf__object_key(o), o->key_len);
}

static inline struct kvf__object *ins(struct kvf__index *idx,
				      struct kvf__object *o)
{
	return kvf__index_insert_unique(idx, o, rec_hash(o));
}

static inline int rem(struct kvf__index *idx, struct kvf__object *o)
{
	return kvf__index_remove(idx, o, rec_hash(o));
}

static inline int repl(struct kvf__index *idx, struct kvf__object *old,
		       struct kvf__object *n)
{
	return kvf__index_replace(idx, old, n, rec_hash(n));
}

/* Free @o after a grace period (it was unpublished). */
static inline void free_after_gp(struct kvf__object *o)
{
	struct kvf__reclaim rc = { NULL };

	kvf__reclaim_add(&rc, o);
	kvf__reclaim_flush(&rc);
}

#endif /* KVF_TESTS_INDEX_HELPERS_H */
