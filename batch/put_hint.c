/* SPDX-License-Identifier: MIT */
/*
 * batch/put_hint.c - put_end finding the records its put_start made.
 *
 * A put is two calls with the same keys: put_start makes and inserts the
 * records, put_end looks every key up again (hash, duplicate check,
 * probe) to find them, about two thirds of put_end's instructions. A
 * writer, and a master's connection, ends what it started, in order, on
 * the thread that started it: every item put_start accepted, the
 * refused ones left out (Mooncake's client ends the keys whose start
 * succeeded). So each thread keeps a ring of its last HINT_BATCHES
 * put_start batches: per accepted item, in order, the key's hash and
 * the record it made. A put_end whose first key, client, size and engine
 * match a ring entry takes that entry and checks each item:
 *
 *   1. the record is in the index under the item's hash now (the
 *      bucket index scans the home range for that record's address;
 *      no key compare), and
 *   2. the item's key is that record's key (length, then the bytes).
 *
 * Only after (1) is the record read: found in the index inside this
 * read-side section, it is a live record whatever happened since
 * put_start (removed, revoked, pre-empted and even its memory reused by
 * another put), and it stays readable until the section ends. The index
 * holds one record per key, so (1) and (2) make it the record a probe of
 * the key would have found; distinct records mean distinct keys, so the
 * batch has no duplicates. Every item passing gives put_end exactly what
 * hashing and probing would have; any item failing sends the whole batch
 * the usual way. What the record's state and owner say is then checked
 * by put_end as for any probed record.
 *
 * The ring is per thread and never shared: no lock, no atomics; about
 * 33 KiB, allocated on a thread's first put_start, freed at its exit. A
 * put_end on another thread, in another order, of a subset, or after
 * HINT_BATCHES later put_starts of its thread, finds no entry and
 * probes. A ring entry names its engine only by address: an entry that
 * outlives its engine points at records no index holds, which (1)
 * rejects without reading them.
 */
#include "config.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "batch/put_hint.h"
#include "base/die.h"
#include "base/prefetch.h"

/* put_start batches a thread keeps: a master's connection has up to
 * eight in flight (kvforge-bench --master --depth 8), a loop thread
 * serves one or two. */
#define HINT_BATCHES 16
#define HINT_ITEMS KVF__BATCH_STACK

struct kvf__put_hint {
	const struct kvf_engine *e;
	uint64_t client_id;
	size_t n; /* 0: empty or used up */
	uint64_t hash[HINT_ITEMS];
	struct kvf__object *obj[HINT_ITEMS];
};

struct put_hints {
	unsigned next; /* the entry the next put_start takes */
	struct kvf__put_hint h[HINT_BATCHES];
};

static __thread struct put_hints *hints;
static __thread uint64_t claimed;
static pthread_key_t hints_key;
static pthread_once_t hints_once = PTHREAD_ONCE_INIT;

/* At thread exit; a later destructor's put_start makes a new ring. */
static void hints_free(void *ring)
{
	free(ring);
	hints = NULL;
}

static void hints_key_create(void)
{
	if (pthread_key_create(&hints_key, hints_free))
		kvf__die("put hints: no thread key");
}

/* This thread's ring, made on its first put_start; NULL without memory. */
static struct put_hints *thread_hints(void)
{
	if (hints)
		return hints;
	pthread_once(&hints_once, hints_key_create);
	hints = calloc(1, sizeof(*hints));
	if (hints)
		pthread_setspecific(hints_key, hints); /* freed at exit */
	return hints;
}

struct kvf__put_hint *kvf__put_hint_open(size_t n)
{
	struct put_hints *ring;
	struct kvf__put_hint *h;

	if (n > HINT_ITEMS || !(ring = thread_hints()))
		return NULL;
	h = &ring->h[ring->next];
	ring->next = (ring->next + 1) % HINT_BATCHES;
	h->n = 0;
	return h;
}

void kvf__put_hint_note(struct kvf__put_hint *h, size_t i,
			struct kvf__object *o)
{
	h->obj[i] = o;
}

void kvf__put_hint_publish(struct kvf__put_hint *h, const struct kvf__batch *b,
			   uint64_t client_id)
{
	size_t k = 0;

	/* The accepted items, in order: what a client ends (obj[] noted
	 * only for those, and k <= i). */
	for (size_t i = 0; i < b->n; i++) {
		if (b->status[i] != KVF_OK)
			continue;
		h->hash[k] = b->hash[i];
		h->obj[k++] = h->obj[i];
	}
	h->e = b->e;
	h->client_id = client_id;
	h->n = k;
}

/* The ring entry @b may repeat (newest first), or NULL. */
static struct kvf__put_hint *find_entry(const struct kvf__batch *b,
					uint64_t client_id)
{
	const struct kvf_key *k = &b->keys[0];
	uint64_t h0;

	if (!kvf__batch_key_valid(b->e, k))
		return NULL;
	h0 = kvf__key_hash(k->data, k->len);
	for (unsigned j = 1; j <= HINT_BATCHES; j++) {
		struct kvf__put_hint *h =
			&hints->h[(hints->next + HINT_BATCHES - j) %
				  HINT_BATCHES];

		if (h->n == b->n && h->hash[0] == h0 && h->e == b->e &&
		    h->client_id == client_id)
			return h;
	}
	return NULL;
}

/* Check (2) of the design note for item @i, after (1). */
static bool same_key(const struct kvf__object *o, const struct kvf_key *k)
{
	return k->data && kvf__object_has_key(o, k->data, k->len);
}

bool kvf__put_hint_claim(struct kvf__batch *b, uint64_t client_id)
{
	struct kvf__index *idx = b->e->index;
	struct kvf__put_hint *h;

	if (!hints || b->n > HINT_ITEMS)
		return false;
	h = find_entry(b, client_id);
	if (!h)
		return false;
	h->n = 0;
	/* Prefetches never fault: the records need not be there. put_end
	 * locks each record next (its state word). */
	for (size_t i = 0; i < b->n; i++) {
		kvf__prefetch_for_write(h->obj[i]);
		__builtin_prefetch((const char *)h->obj[i] + 64);
	}
	if (!kvf__index_holds_batch(idx, b->n, h->hash, h->obj))
		return false;
	for (size_t i = 0; i < b->n; i++)
		if (!same_key(h->obj[i], &b->keys[i]))
			return false;
	memcpy(b->hash, h->hash, b->n * sizeof(*b->hash));
	memcpy(b->obj, h->obj, b->n * sizeof(*b->obj));
	for (size_t i = 0; i < b->n; i++)
		b->status[i] = KVF_OK;
	claimed++;
	return true;
}

uint64_t kvf__put_hint_claimed(void)
{
	return claimed;
}
