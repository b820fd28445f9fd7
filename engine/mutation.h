/* SPDX-License-Identifier: MIT */
/*
 * engine/mutation.h - a metadata mutation as the engine reports it to the
 * journal. engine/journal_glue.c translates these into journal records.
 * Pointers borrow the caller's memory for the duration of the call.
 */
#ifndef KVF_ENGINE_MUTATION_H
#define KVF_ENGINE_MUTATION_H

#include <stdint.h>

struct kvf__object;

enum kvf__mutation_type {
	KVF__MUT_SEGMENT_MOUNT = 1,
	KVF__MUT_SEGMENT_UNMOUNT,
	KVF__MUT_CLIENT_REMOVE,
	KVF__MUT_OBJECT_PUT,      /* a put ended: @obj is complete */
	KVF__MUT_OBJECT_REPLICAS, /* @obj's replica set changed */
	KVF__MUT_OBJECT_REMOVE,   /* @obj removed, evicted or expired */
};

struct kvf__mutation {
	enum kvf__mutation_type type;
	uint64_t segment_id;
	uint64_t client_id;
	uint64_t base;
	uint64_t size;
	const char *name;
	const char *endpoint;
	const struct kvf__object *obj;
};

#endif /* KVF_ENGINE_MUTATION_H */
