/* SPDX-License-Identifier: MIT */
/*
 * batch/put_hint.h - put_end finding the records its put_start made.
 *
 * A thread's recent put_start batches leave, per accepted item, the
 * key's hash and the new record; a put_end of those keys in the same
 * order, by the same client on the same thread, checks each record
 * against the index instead of hashing and probing its keys
 * (batch/put_hint.c says why that is safe).
 */
#ifndef KVF_BATCH_PUT_HINT_H
#define KVF_BATCH_PUT_HINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "batch/batch.h"

struct kvf__put_hint;

/*
 * kvf__put_hint_open() - this thread's hint for a put_start batch of @n
 * keys, to fill with kvf__put_hint_note() and publish with
 * kvf__put_hint_publish(); NULL when @n is beyond what a hint holds or
 * there is no memory for the thread's hints (put_end then probes). It
 * takes the place of the thread's oldest hint. Takes no lock, never
 * blocks but for the thread's first allocation.
 */
struct kvf__put_hint *kvf__put_hint_open(size_t n);

/* Item @i's new record is @o (published in the index). */
void kvf__put_hint_note(struct kvf__put_hint *h, size_t i,
			struct kvf__object *o);

/*
 * kvf__put_hint_publish() - offer @h to this thread's next put_end of
 * the items of put_start batch @b by @client_id whose status is KVF_OK
 * (each noted), in their order. A batch with none leaves no hint.
 */
void kvf__put_hint_publish(struct kvf__put_hint *h, const struct kvf__batch *b,
			   uint64_t client_id);

/*
 * kvf__put_hint_claim() - take the hint of this thread's put_start that
 * @b's keys repeat, in order, by @client_id: on true every item of @b is
 * KVF_OK with its hash in b->hash and its record, present in the index
 * under that key, in b->obj (exactly what hashing, the duplicate check
 * and the probe would have given). On false nothing of @b was touched
 * but its scratch: hash, check and probe as usual. The hint is used up
 * either way. Inside the read-side section that will use b->obj.
 */
bool kvf__put_hint_claim(struct kvf__batch *b, uint64_t client_id);

/* Batches the calling thread's put_ends took from hints (for tests). */
uint64_t kvf__put_hint_claimed(void);

#endif /* KVF_BATCH_PUT_HINT_H */
