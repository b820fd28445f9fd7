/* SPDX-License-Identifier: MIT */
/*
 * metadata/object.c - allocation and deferred freeing of object records.
 *
 * A record is one malloc block (header, replicas, key). Unpublished records
 * are freed after a grace period through call_rcu, so a reader that found
 * the record in its read-side section can still read it.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "metadata/object.h"

struct kvf__object *kvf__object_new(const char *key, size_t key_len,
				    uint64_t hash, unsigned nr_replicas)
{
	struct kvf__object *o;

	o = calloc(1, kvf__object_alloc_size(nr_replicas, key_len));
	if (!o)
		return NULL;
	o->hash = hash;
	o->key_len = (uint16_t)key_len;
	o->nr_replicas = (uint8_t)nr_replicas;
	o->state = KVF__OBJ_PROCESSING;
	memcpy((char *)kvf__object_key(o), key, key_len);
	return o;
}

void kvf__object_free(struct kvf__object *o)
{
	free(o);
}

static void free_after_grace(struct rcu_head *head)
{
	kvf__rcu_callback_enter();
	free(caa_container_of(head, struct kvf__object, rcu));
}

void kvf__object_free_rcu(struct kvf__object *o)
{
	kvf__rcu_call(&o->rcu, free_after_grace);
}
