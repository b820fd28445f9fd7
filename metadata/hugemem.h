/* SPDX-License-Identifier: MIT */
/*
 * metadata/hugemem.h - large zeroed mappings backed by transparent huge
 * pages where the kernel allows it.
 *
 * The index's bucket table and the record arena are touched at random, one
 * cache line per key; with 4 KiB pages every such touch at 10M objects is
 * also a TLB miss and a page walk. A 2 MiB-aligned mapping advised
 * MADV_HUGEPAGE (THP in "madvise" or "always" mode) removes most of them.
 * Where THP is off the mapping still works, with small pages.
 */
#ifndef KVF_METADATA_HUGEMEM_H
#define KVF_METADATA_HUGEMEM_H

#include <stddef.h>

/* The huge page size the mappings are aligned to. */
#define KVF__HUGE_PAGE ((size_t)2 << 20)

/*
 * kvf__huge_alloc() - @size bytes of zeroed memory, page aligned; sizes of
 * at least KVF__HUGE_PAGE are 2 MiB aligned and advised for huge pages.
 * Returns NULL if the mapping fails. Never blocks beyond mmap itself.
 * Release with kvf__huge_free() and the same @size.
 */
void *kvf__huge_alloc(size_t size);

/*
 * kvf__huge_populate() - fault in the first @size bytes of a
 * kvf__huge_alloc() mapping now (MADV_POPULATE_WRITE, huge pages where
 * advised), so the first writes into it do not fault. Best effort: a
 * kernel without it, no memory now, or @size beyond
 * kvf__huge_presize_budget() leaves the mapping lazy. Blocks while the
 * kernel zeroes the pages.
 */
void kvf__huge_populate(void *p, size_t size);

/*
 * kvf__huge_presize_budget() - how many bytes one presize may fault in
 * ahead of use: an eighth of physical memory (expected sizes are guesses,
 * and a guess far beyond the machine must not take its memory).
 */
size_t kvf__huge_presize_budget(void);

/*
 * kvf__huge_size() - the bytes a kvf__huge_alloc(@size) mapping takes:
 * @size rounded up to 2 MiB from KVF__HUGE_PAGE on, to 4 KiB below it. A
 * caller that sizes a table by it uses all the memory it pays for.
 */
size_t kvf__huge_size(size_t size);

/* kvf__huge_free() - unmap what kvf__huge_alloc(@size) returned. */
void kvf__huge_free(void *p, size_t size);

/*
 * Large arrays written once, front to back (the journal's checkpoint
 * buffers, recovery's lists): on this VM every 4 KiB page's first touch
 * is a fault of ~10 µs, against ~0.25 µs a 4 KiB for a 2 MiB page, and
 * with THP in "madvise" mode (Debian's default) malloc()'s memory never
 * gets huge pages. Below KVF__HUGE_ARRAY_MIN bytes an array is malloc()'s;
 * from it on, a kvf__huge_alloc() mapping of its own.
 */
#define KVF__HUGE_ARRAY_MIN ((size_t)4 << 20)

/*
 * kvf__huge_grow() - kvf__grow() (base/grow.h) for an array that may
 * grow large: room for @need (>= 1) elements of @size bytes in @arr,
 * which has room for *@cap, to @first elements or twice *@cap, doubled
 * until they fit. Once KVF__HUGE_ARRAY_MIN bytes or more, the array moves
 * to a mapping advised for huge pages (its contents copied).
 *
 * Return: the array (moved or not; *@cap updated), or NULL when out of
 * memory (@arr and *@cap unchanged, and still the caller's). Release with
 * kvf__huge_array_free() and the capacity it ended with. May block in
 * mmap()/munmap().
 */
void *kvf__huge_grow(void *arr, size_t *cap, size_t need, size_t size,
		     size_t first);

/* kvf__huge_array_free() - release a kvf__huge_grow() array (or NULL). */
void kvf__huge_array_free(void *arr, size_t cap, size_t size);

#endif /* KVF_METADATA_HUGEMEM_H */
