/* SPDX-License-Identifier: MIT */
/*
 * alloc/segalloc.h - the per-segment range allocator.
 *
 * Hands out [offset, offset + size) ranges inside a segment of @size bytes.
 * All bookkeeping lives outside the segment: the master never touches
 * segment memory. Every call is thread-safe. free_bytes and largest_free
 * are exact and readable in O(1) without the allocator's lock, so placement
 * can reject a segment cheaply. Freed blocks of the sizes being allocated
 * may be kept for the next alloc of their size (reuse lists, see
 * segalloc.c); they count as free everywhere.
 */
#ifndef KVF_ALLOC_SEGALLOC_H
#define KVF_ALLOC_SEGALLOC_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct kvf__segalloc;
struct kvf__park_hint;

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
 * kvf__segalloc_free() - return the range that alloc gave for (@offset,
 * @size). Coalesces with free neighbours. Freeing anything else aborts
 * (kvf__die): it is a broken invariant, not an input error.
 */
void kvf__segalloc_free(struct kvf__segalloc *a, uint64_t offset,
			uint64_t size);

/* One range alloc gave, as kvf__segalloc_free() takes it. */
struct kvf__segalloc_range {
	uint64_t offset;
	uint64_t size;
};

/*
 * kvf__segalloc_free_many() - kvf__segalloc_free() of the @n ranges @r, in
 * order, under one hold of the allocator's lock; free_bytes and
 * largest_free are published once, at the end. The result is that of @n
 * single frees in the same order. A range that alloc did not give aborts
 * (kvf__die), like kvf__segalloc_free(), after the ranges before it were
 * freed.
 */
void kvf__segalloc_free_many(struct kvf__segalloc *a,
			     const struct kvf__segalloc_range *r, size_t n);

/*
 * kvf__segalloc_prefetch_free() - start loading what a free of @offset
 * will read first: the slab directory's cell that says whether a slab
 * holds it (nothing for a segment without slabs). A batch remove calls it
 * while it unlinks the batch's records, so that kvf__segalloc_free_many()
 * later finds the cells cached. A hint only: takes no lock, reads nothing
 * the lock guards, never blocks; @a must stay mounted meanwhile.
 */
void kvf__segalloc_prefetch_free(const struct kvf__segalloc *a,
				 uint64_t offset);

/*
 * kvf__segalloc_release() - kvf__segalloc_free() for ranges that come from
 * outside the engine (a journal being replayed): KVF_OK, or
 * KVF_ERR_INVALID_PARAMS with nothing changed when (@offset, @size) is not
 * exactly one used block.
 */
int kvf__segalloc_release(struct kvf__segalloc *a, uint64_t offset,
			  uint64_t size);

/*
 * kvf__segalloc_alloc_tagged() - allocate @size bytes (> 0), remembering
 * @tag (the engine uses the owning object's key hash) with the block, so
 * the owners of a segment's blocks can be enumerated
 * (kvf__segalloc_used_blocks, kvf__segalloc_scan) without any other index.
 * Only bits 32-63 of a tag are sure to be kept: a block held in a slab
 * reads back with the tag's low half 0 (a key hash's top 32 bits are what
 * the bucket index finds a record by).
 * On KVF_OK, *@offset is the start (aligned). KVF_ERR_NO_SPACE when no free
 * region fits, KVF_ERR_NO_MEMORY if bookkeeping could not grow.
 * KVF_ERR_INVALID_PARAMS for size 0 or a NULL @offset. O(log n).
 */
int kvf__segalloc_alloc_tagged(struct kvf__segalloc *a, uint64_t size,
			       uint64_t tag, uint64_t *offset);

/*
 * kvf__segalloc_try_alloc_tagged() - kvf__segalloc_alloc_tagged() unless
 * another thread holds the allocator's lock: then KVF_ERR_BUSY at once,
 * nothing changed. Placement uses it to go elsewhere instead of queueing
 * behind a concurrent put on the same segment.
 */
int kvf__segalloc_try_alloc_tagged(struct kvf__segalloc *a, uint64_t size,
				   uint64_t tag, uint64_t *offset);

/*
 * kvf__segalloc_try_alloc_many() - what @n calls of
 * kvf__segalloc_try_alloc_tagged() of @size bytes would give, one after
 * another (block k tagged @tags[k], its offset in @offsets[k]), under one
 * hold of the lock and one publish of the allocator's figures. Stops at
 * the first block that cannot be allocated (no space, no memory for
 * bookkeeping: that call changes nothing). Returns how many were
 * allocated (0..@n, a prefix), KVF_ERR_BUSY at once, nothing changed,
 * if another thread holds the lock, KVF_ERR_INVALID_PARAMS for size 0 or
 * NULL arrays. O(@n log blocks).
 */
int kvf__segalloc_try_alloc_many(struct kvf__segalloc *a, uint64_t size,
				 uint32_t n, const uint64_t *tags,
				 uint64_t *offsets);

/*
 * kvf__segalloc_try_take_parked() - the fast path of alloc alone: hand
 * @tag's owner a block of exactly @size rounded up to the alignment from
 * its reuse list, the newest parked one. KVF_ERR_NO_SPACE, nothing
 * changed, when none is parked (no first fit is tried: the caller may
 * find a better place); KVF_ERR_BUSY at once if another thread holds the
 * allocator's lock. A block it gives is freed like alloc's. O(1).
 */
int kvf__segalloc_try_take_parked(struct kvf__segalloc *a, uint64_t size,
				  uint64_t tag, uint64_t *offset);

/*
 * kvf__segalloc_try_take_parked_many() - what @n calls of
 * kvf__segalloc_try_take_parked() would give, one after another (block k
 * for @tags[k]'s owner, its offset in @offsets[k]), under one hold of the
 * lock and one publish. Returns how many were taken (0..@n, stopping
 * when none of the size is left), KVF_ERR_BUSY at once, nothing changed,
 * if another thread holds the lock, KVF_ERR_INVALID_PARAMS for size 0
 * or NULL arrays. O(@n).
 */
int kvf__segalloc_try_take_parked_many(struct kvf__segalloc *a, uint64_t size,
				       uint32_t n, const uint64_t *tags,
				       uint64_t *offsets);

/*
 * kvf__segalloc_set_park_hint() - from now on, record in @h (NULL: none)
 * each block @a parks, as parked by allocator @index of the set @h
 * serves. @h's alignment must be @a's; @h must outlive @a or the next
 * call. The set's owner calls it again when @a's index changes; a park
 * racing with the call may still note the old one (it only misleads a
 * hint). Lock-free, O(1).
 */
void kvf__segalloc_set_park_hint(struct kvf__segalloc *a,
				 struct kvf__park_hint *h, uint32_t index);

/*
 * kvf__segalloc_reserve_tagged() - mark exactly [@offset, @offset + @size)
 * used, as if alloc had returned it with @tag (journal recovery rebuilds
 * allocators from the recorded replicas). @offset must be aligned; @size is
 * rounded up to the alignment like alloc does, and the range is released with
 * kvf__segalloc_free(a, @offset, @size). Returns KVF_OK,
 * KVF_ERR_INVALID_PARAMS (size 0, unaligned offset, outside the segment),
 * KVF_ERR_NO_SPACE (some part of the range is not free) or
 * KVF_ERR_NO_MEMORY. O(log n), takes the allocator's lock.
 */
int kvf__segalloc_reserve_tagged(struct kvf__segalloc *a, uint64_t offset,
				 uint64_t size, uint64_t tag);

/*
 * A used block: offset, size (rounded up to the alignment), tag (bits
 * 32-63 of the one given; the low half too for a block outside a slab).
 */
struct kvf__segalloc_block {
	uint64_t offset;
	uint64_t size;
	uint64_t tag;
};

/*
 * kvf__segalloc_used_blocks() - snapshot of every used block, in address
 * order. *@out is malloc'd (the caller frees it), *@n its length. Cost
 * proportional to the blocks of this segment; takes the lock once.
 * Returns KVF_OK or KVF_ERR_NO_MEMORY.
 */
int kvf__segalloc_used_blocks(struct kvf__segalloc *a,
			      struct kvf__segalloc_block **out, size_t *n);

/*
 * kvf__segalloc_set_reuse_limit() - bound the bytes the exact-size reuse
 * lists may hold (freed blocks kept, still counted free, for the next
 * alloc of their size: the fast path of alloc). 0 turns the lists off and
 * gives their blocks back: alloc is then address-ordered first fit only.
 * The default is the capacity / 16. Takes the allocator's lock.
 */
void kvf__segalloc_set_reuse_limit(struct kvf__segalloc *a, uint64_t bytes);

/* Bytes parked in the reuse lists now (free to every other reader). */
uint64_t kvf__segalloc_reuse_bytes(struct kvf__segalloc *a);

/*
 * kvf__segalloc_nr_slabs() - slabs the allocator holds now (see segalloc.c,
 * "Slabs"): used blocks of the tree each holding objects of one size in a
 * bitmap. @broken, if not NULL, gets how many were broken up so far (a
 * slab with free slots whose objects became plain blocks and its free
 * slots free space of the tree, because an allocation found no room in
 * the tree or its size lost its slot). Takes the allocator's lock; for
 * tests and statistics.
 */
uint64_t kvf__segalloc_nr_slabs(struct kvf__segalloc *a, uint64_t *broken);

/*
 * Bytes of the allocator's own bookkeeping: its struct and its tree's
 * nodes (spares included), as asked of malloc (malloc's per-chunk header
 * not counted). Lock-free, exact as of the last change.
 */
uint64_t kvf__segalloc_meta_bytes(const struct kvf__segalloc *a);

/* Free bytes, exact, lock-free. */
uint64_t kvf__segalloc_free_bytes(const struct kvf__segalloc *a);

/* Size of the largest free region, exact, lock-free. */
uint64_t kvf__segalloc_largest_free(const struct kvf__segalloc *a);

/* The segment size given at create. */
uint64_t kvf__segalloc_size(const struct kvf__segalloc *a);

/*
 * Bytes handed out (sizes rounded up to the alignment), exact, lock-free:
 * kvf__segalloc_capacity() - kvf__segalloc_free_bytes().
 */
uint64_t kvf__segalloc_used_bytes(const struct kvf__segalloc *a);

/*
 * Bytes the allocator manages: the segment size rounded down to the
 * alignment (an unaligned tail, shorter than the alignment, is never used).
 */
uint64_t kvf__segalloc_capacity(const struct kvf__segalloc *a);

/* The alignment given at create. */
uint64_t kvf__segalloc_alignment(const struct kvf__segalloc *a);

/* Live allocations (alloc + reserve - free), exact, lock-free. */
uint64_t kvf__segalloc_nr_allocs(const struct kvf__segalloc *a);

/*
 * The published part of an allocator: the first member of every struct
 * kvf__segalloc, written (release) by the lock holder after each change and
 * read here without the lock. Placement reads it inline for many segments
 * per call, so it must not cost a function call. Read it only through the
 * helpers below.
 */
/* Sizes of reuse lists an allocator keeps (struct kvf__segalloc_pub). */
#define KVF__SEGALLOC_REUSE_SIZES 4

struct kvf__segalloc_pub {
	_Atomic uint64_t free_bytes;
	_Atomic uint64_t largest_free;
	uint64_t align_mask;          /* alignment - 1, constant */
	uint64_t capacity;            /* managed bytes, constant */
	/* Sizes whose reuse list holds a block (0: none), any order. */
	_Atomic uint64_t parked[KVF__SEGALLOC_REUSE_SIZES];
};

static inline const struct kvf__segalloc_pub *
kvf__segalloc_pub(const struct kvf__segalloc *a)
{
	return (const struct kvf__segalloc_pub *)(const void *)a;
}

/*
 * kvf__segalloc_may_fit() - lock-free hint: could alloc(@size) succeed now?
 * True iff the largest free region holds @size rounded up to the alignment.
 * The answer may be stale by the time alloc runs.
 */
static inline bool kvf__segalloc_may_fit(const struct kvf__segalloc *a,
					 uint64_t size)
{
	const struct kvf__segalloc_pub *p = kvf__segalloc_pub(a);
	uint64_t need = (size + p->align_mask) & ~p->align_mask;

	return need >= size &&
	       atomic_load_explicit(&p->largest_free, memory_order_relaxed) >=
		       need;
}

/*
 * struct kvf__park_hint - where the allocators of one segment set last
 * parked a block, per size: KVF__PARK_HINT_SLOTS slots, a size's slot
 * chosen by hashing it, each the size and the parking allocator's index
 * in the set (kvf__segalloc_set_park_hint). Placement reads it lock-free
 * to go straight to an exact fit instead of looking at every segment. A
 * hint only: stale, overwritten by another size, or torn between its two
 * fields, so the reader checks the segment (kvf__segalloc_has_parked)
 * and takes with kvf__segalloc_try_take_parked, which gives nothing else.
 */
#define KVF__PARK_HINT_SLOTS 4

struct kvf__park_hint {
	uint64_t align_mask; /* alignment - 1 of every writer, constant */
	struct {
		_Atomic uint64_t size; /* rounded up to the alignment */
		_Atomic uint32_t seg;
	} slot[KVF__PARK_HINT_SLOTS];
};

/* An empty hint for allocators of @alignment (a power of two). */
void kvf__park_hint_init(struct kvf__park_hint *h, uint64_t alignment);

/* @need's slot in a struct kvf__park_hint (Fibonacci hashing). */
static inline unsigned kvf__park_hint_slot(uint64_t need)
{
	return (unsigned)((need * 0x9e3779b97f4a7c15ULL) >> 62);
}

/*
 * The index of the allocator that last parked a block of @size (rounded
 * up to the alignment) as @h remembers it, or UINT32_MAX. Lock-free.
 */
static inline uint32_t kvf__park_hint_get(const struct kvf__park_hint *h,
					  uint64_t size)
{
	uint64_t need = (size + h->align_mask) & ~h->align_mask;
	unsigned k = kvf__park_hint_slot(need);

	if (atomic_load_explicit(&h->slot[k].size, memory_order_relaxed) !=
	    need)
		return UINT32_MAX;
	return atomic_load_explicit(&h->slot[k].seg, memory_order_relaxed);
}

/*
 * kvf__segalloc_has_parked() - lock-free hint: does a reuse list hold a
 * block of exactly @size rounded up to the alignment (an exact fit that
 * kvf__segalloc_try_take_parked() would hand out)? May be stale.
 */
static inline bool kvf__segalloc_has_parked(const struct kvf__segalloc *a,
					    uint64_t size)
{
	const struct kvf__segalloc_pub *p = kvf__segalloc_pub(a);
	uint64_t need = (size + p->align_mask) & ~p->align_mask;
	bool hit = false;

	for (unsigned k = 0; k < KVF__SEGALLOC_REUSE_SIZES; k++)
		hit |= atomic_load_explicit(&p->parked[k],
					    memory_order_relaxed) == need;
	return hit && need >= size;
}

/* Inline kvf__segalloc_largest_free() for hot loops. */
static inline uint64_t kvf__segalloc_largest_fast(const struct kvf__segalloc *a)
{
	return atomic_load_explicit(&kvf__segalloc_pub(a)->largest_free,
				    memory_order_relaxed);
}

/* Inline kvf__segalloc_free_bytes() for hot loops. */
static inline uint64_t kvf__segalloc_free_fast(const struct kvf__segalloc *a)
{
	return atomic_load_explicit(&kvf__segalloc_pub(a)->free_bytes,
				    memory_order_relaxed);
}

/*
 * kvf__segalloc_scan() - up to @max used blocks whose offsets are >=
 * @from, in address order, into @out. *@next is where a following scan
 * should start: just past the last block returned when @max were found,
 * else the capacity (the walk reached the segment's end; wrapping to 0 is
 * the caller's business). Returns how many were stored.
 *
 * One descent plus a sequential walk of the leaves: O(log n + @max) under
 * the allocator's lock, which it takes once; it neither allocates nor
 * blocks beyond that lock. The blocks are a snapshot: any of them may be
 * freed once the call returns. Eviction's clock hands use it.
 */
size_t kvf__segalloc_scan(struct kvf__segalloc *a, uint64_t from,
			  struct kvf__segalloc_block *out, size_t max,
			  uint64_t *next);

#endif /* KVF_ALLOC_SEGALLOC_H */
