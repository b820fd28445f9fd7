/* SPDX-License-Identifier: MIT */
/*
 * engine/replay_sort.h - putting an image's replicas in address order.
 *
 * Recovery reserves an image's replicas only once the whole image has
 * been read, in (segment, offset) order (engine/recovery.c says why).
 * That order is a sort of one entry per replica, up to millions of them.
 */
#ifndef KVF_ENGINE_REPLAY_SORT_H
#define KVF_ENGINE_REPLAY_SORT_H

#include <stddef.h>
#include <stdint.h>

/*
 * struct kvf__replay_range - an image replica waiting to be reserved.
 * @offset: its offset in its segment (at most 48 bits are sorted on).
 * @size: its size.
 * @tag: the allocator tag to reserve it with (its object's key hash).
 * @slot: its segment's index in the segment table.
 */
struct kvf__replay_range {
	uint64_t offset;
	uint64_t size;
	uint64_t tag;
	uint32_t slot;
};

/**
 * kvf__replay_sort() - sort ranges by (@slot, @offset), stably.
 * @a: the @n ranges.
 * @tmp: room for @n ranges; its contents on entry do not matter.
 * @n: how many; 0 is fine.
 *
 * An LSD radix sort on the offset's low six bytes and the slot's four,
 * one scatter pass per byte the ranges do not all share. The sorted
 * ranges end up in @a or in @tmp, whichever is returned; the other holds
 * garbage. Offsets must be below 2^48 (a replica's offset always is).
 *
 * Return: the sorted array, or NULL if out of memory (@a unchanged).
 * Context: any; allocates 20 KiB of counters; touches nothing shared.
 */
struct kvf__replay_range *kvf__replay_sort(struct kvf__replay_range *a,
					   struct kvf__replay_range *tmp,
					   size_t n);

#endif /* KVF_ENGINE_REPLAY_SORT_H */
