/* SPDX-License-Identifier: MIT */
/*
 * alloc/segalloc.h - the per-segment range allocator.
 *
 * Hands out [offset, offset + size) ranges inside a segment of @size bytes.
 * All bookkeeping lives outside the segment: the master never touches
 * segment memory. Every call is thread-safe. free_bytes and largest_free
 * are exact and readable in O(1) without the allocator's lock, so placement
 * can reject a segment cheaply.
 */
#ifndef KVF_ALLOC_SEGALLOC_H
#define KVF_ALLOC_SEGALLOC_H

#include <stdint.h>

struct kvf__segalloc;

/*
 * kvf__segalloc_create() - allocator for a segment of @size bytes (1 MiB to
 * at least 1 TiB), handing out offsets aligned to @alignment (a power of
 * two, >= 8). Returns KVF_OK, KVF_ERR_INVALID_PARAMS or KVF_ERR_NO_MEMORY.
 */
int kvf__segalloc_create(uint64_t size, uint64_t alignment,
			 struct kvf__segalloc **out);

/* Free the allocator; outstanding allocations are simply forgotten. */
void kvf__segalloc_destroy(struct kvf__segalloc *a);

/*
 * kvf__segalloc_alloc() - allocate @size bytes (> 0). On KVF_OK, *offset is
 * the start (aligned). KVF_ERR_NO_SPACE when no free region fits,
 * KVF_ERR_NO_MEMORY if bookkeeping could not grow. O(1) or O(log n).
 */
int kvf__segalloc_alloc(struct kvf__segalloc *a, uint64_t size,
			uint64_t *offset);

/*
 * kvf__segalloc_free() - return the range that alloc gave for (@offset,
 * @size). Coalesces with free neighbours. Freeing anything else aborts
 * (kvf__die): it is a broken invariant, not an input error.
 */
void kvf__segalloc_free(struct kvf__segalloc *a, uint64_t offset,
			uint64_t size);

/* Free bytes, exact, lock-free. */
uint64_t kvf__segalloc_free_bytes(const struct kvf__segalloc *a);

/* Size of the largest free region, exact, lock-free. */
uint64_t kvf__segalloc_largest_free(const struct kvf__segalloc *a);

/* The segment size given at create. */
uint64_t kvf__segalloc_size(const struct kvf__segalloc *a);

#endif /* KVF_ALLOC_SEGALLOC_H */
