/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/index_helpers.h - driving an index directly in tests.
 *
 * Records do not store their hash: these wrappers recompute it, as the
 * index's rare paths do. record_hooked tells kvf__object_new() whether the
 * index under test wants a hook prefix; records come from one arena that
 * lives as long as the test process.
 */
#ifndef KVF_TESTS_INDEX_HELPERS_H
#define KVF_TESTS_INDEX_HELPERS_H

#include <stdbool.h>
#include <stdlib.h>

#include "metadata/arena.h"
#include "metadata/hash.h"
#include "metadata/index.h"

static bool record_hooked;

static inline struct kvf__object *test_record_new(const char *key,
						  size_t len)
{
	static struct kvf__arena *arena;

	if (!__atomic_load_n(&arena, __ATOMIC_ACQUIRE)) {
		struct kvf__arena *a, *none = NULL;

		if (kvf__arena_create(false, 0, &a) != KVF_OK)
			abort();
		if (!__atomic_compare_exchange_n(&arena, &none, a, false,
						 __ATOMIC_ACQ_REL,
						 __ATOMIC_ACQUIRE))
			kvf__arena_destroy(a);
	}
	return kvf__object_new(arena, key, len, 1, record_hooked);
}

static inline uint64_t rec_hash(const struct kvf__object *o)
{
	return kvf__object_hash(o);
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
