/* SPDX-License-Identifier: MIT */
/*
 * metadata/arena.h - the engine's record allocator.
 *
 * Records (metadata/object.h) are small, variable-sized, allocated on the
 * put path and freed in batches after a grace period. The arena carves
 * them from 2 MiB huge-page chunks in 8-byte size classes, so a lookup at
 * 10M objects pays a cache miss but rarely a TLB miss, and there is no
 * per-block malloc header or rounding to 16.
 */
#ifndef KVF_METADATA_ARENA_H
#define KVF_METADATA_ARENA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct kvf__arena;

/* Largest block the arena hands out, bytes. */
#define KVF__ARENA_MAX_BLOCK ((size_t)128 << 10)

/*
 * kvf__arena_create() - an empty arena. With @prefault, the arena starts a
 * thread that keeps a few chunks faulted in ahead of need (see arena.c),
 * so allocating callers rarely take a page fault; and while fewer than
 * @ahead_blocks fresh blocks have been handed out, it keeps chunks for
 * the rest faulted in too, at the average block size so far (96 bytes
 * before the first; at most an eighth of physical memory), handed out
 * before any other chunk is mapped. Without @prefault, @ahead_blocks is
 * ignored. Returns KVF_OK or KVF_ERR_NO_MEMORY. Maps nothing in the
 * caller's thread.
 */
int kvf__arena_create(bool prefault, uint64_t ahead_blocks,
		      struct kvf__arena **out);

/*
 * kvf__arena_destroy() - unmap every chunk: blocks still allocated are
 * forgotten with it. No other thread may use the arena or its blocks.
 */
void kvf__arena_destroy(struct kvf__arena *a);

/*
 * kvf__arena_alloc() - @size (1..KVF__ARENA_MAX_BLOCK) zeroed bytes,
 * 8-byte aligned (64-byte aligned when the size class is a multiple of
 * 64). NULL when out of memory or @size is out of range. Thread-safe:
 * usually lock-free (from the calling thread's run of its size class, or
 * the freed blocks it took last); otherwise takes the class's lock to
 * take up to 128 freed blocks at once (the newest first, then lowest
 * address first within a chunk), or carve the next run, and may map a
 * new chunk (mmap) under it. A thread's first take of freed blocks of a
 * class allocates the array it keeps them in (malloc(), about 1 KiB,
 * freed when the thread moves on). A thread that moves to another arena,
 * or exits, gives the rest of its runs and freed blocks back.
 */
void *kvf__arena_alloc(struct kvf__arena *a, size_t size);

/*
 * kvf__arena_free() - give back a block of any arena (found from the
 * block's address): onto its class's stack of freed blocks, or when that
 * is full into its chunk's free map. Thread-safe; never blocks beyond the
 * class lock; never writes into the block; allocates only the class's
 * stack, once (malloc(), 512 KiB). Callers guarantee no reader still
 * holds the block (RCU grace period) and free each block once.
 */
void kvf__arena_free(void *p);

/*
 * kvf__arena_free_many() - kvf__arena_free() of the @n blocks @p (NULLs
 * skipped), taking a class's lock once per run of consecutive blocks of
 * that class (the free-map lines of what goes into the maps asked for
 * first). Same guarantees as kvf__arena_free().
 */
void kvf__arena_free_many(void *const *p, size_t n);

/*
 * kvf__arena_chunk_blocks() - how many blocks of @size (1..
 * KVF__ARENA_MAX_BLOCK; else 0) one chunk holds: the chunk's 2 MiB less
 * its header and its free map (a bit per block).
 */
uint64_t kvf__arena_chunk_blocks(size_t size);

/*
 * Bytes of faulted-in chunks waiting in the reserve for a size class to
 * need one (not counted in kvf__arena_mapped_bytes()).
 */
uint64_t kvf__arena_reserved_bytes(struct kvf__arena *a);

/* Bytes of chunks mapped so far (monotonic until destroy). */
uint64_t kvf__arena_mapped_bytes(const struct kvf__arena *a);

#endif /* KVF_METADATA_ARENA_H */
