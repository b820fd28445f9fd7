/* SPDX-License-Identifier: MIT */
/*
 * metadata/hugemem.c - 2 MiB-aligned anonymous mappings advised for THP.
 *
 * mmap() only promises page alignment, and THP can back only the 2 MiB-
 * aligned parts of a mapping, so a large request maps one huge page more
 * than it needs and trims the misaligned head and tail. The advice is a
 * hint: EINVAL (THP compiled out) or a kernel that declines leaves the
 * mapping with small pages, which is still correct.
 *
 * Mappings come zero-filled and are faulted in lazily, so a table or a
 * chunk costs memory only as it is used.
 *
 * Growable arrays (kvf__huge_grow()) live in malloc()'s memory while
 * small and move into a mapping of their own at KVF__HUGE_ARRAY_MIN bytes:
 * a doubling copies the contents into a new mapping rather than
 * mremap()ing the old one, which could land unaligned and lose its huge
 * pages. The copies sum to less than the final size; the 4 KiB faults
 * they save (each ~10 µs on this VM) cost far more: a checkpoint of 1M
 * puts and a reopen of its image took 67,132 page faults with the
 * rewrite's and recovery's arrays in malloc()'s memory and 29,912 with
 * these (`perf stat -e page-faults kvforge-bench --workload recovery`).
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/grow.h"
#include "metadata/hugemem.h"

static size_t round_up(size_t size, size_t to)
{
	return (size + to - 1) & ~(to - 1);
}

static size_t mapped_size(size_t size)
{
	return size >= KVF__HUGE_PAGE ? round_up(size, KVF__HUGE_PAGE) :
					round_up(size, 4096);
}

static void *map_aligned(size_t len)
{
	size_t span = len + KVF__HUGE_PAGE;
	char *raw, *start;
	size_t head, tail;

	raw = mmap(NULL, span, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (raw == MAP_FAILED)
		return NULL;
	start = (char *)round_up((uintptr_t)raw, KVF__HUGE_PAGE);
	head = (size_t)(start - raw);
	tail = span - head - len;
	if (head)
		munmap(raw, head);
	if (tail)
		munmap(start + len, tail);
	return start;
}

void *kvf__huge_alloc(size_t size)
{
	size_t len = mapped_size(size);
	void *p;

	if (!size || len < size)
		return NULL;
	if (len < KVF__HUGE_PAGE) {
		p = mmap(NULL, len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		return p == MAP_FAILED ? NULL : p;
	}
	p = map_aligned(len);
	if (p)
		(void)madvise(p, len, MADV_HUGEPAGE);
	return p;
}

size_t kvf__huge_presize_budget(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);

	if (pages <= 0 || psize <= 0)
		return 0;
	return (size_t)pages / 8 * (size_t)psize;
}

void kvf__huge_populate(void *p, size_t size)
{
#ifdef MADV_POPULATE_WRITE
	if (p && size && size <= kvf__huge_presize_budget())
		(void)madvise(p, mapped_size(size), MADV_POPULATE_WRITE);
#else
	(void)p;
	(void)size;
#endif
}

size_t kvf__huge_size(size_t size)
{
	return mapped_size(size);
}

void kvf__huge_free(void *p, size_t size)
{
	if (p)
		munmap(p, mapped_size(size));
}

/* Release @bytes of a kvf__huge_grow() array, from where it lives. */
static void array_release(void *arr, size_t bytes)
{
	if (bytes < KVF__HUGE_ARRAY_MIN)
		free(arr);
	else
		kvf__huge_free(arr, bytes);
}

void *kvf__huge_grow(void *arr, size_t *cap, size_t need, size_t size,
		     size_t first)
{
	size_t ncap, old = *cap * size;
	void *p;

	if (need <= *cap)
		return arr;
	ncap = kvf__grow_cap(*cap, need, size, first);
	if (!ncap || !size)
		return NULL;
	if (ncap * size < KVF__HUGE_ARRAY_MIN) {
		p = realloc(arr, ncap * size);
	} else {
		p = kvf__huge_alloc(ncap * size);
		if (p && arr) {
			memcpy(p, arr, old);
			array_release(arr, old);
		}
	}
	if (p)
		*cap = ncap;
	return p;
}

void kvf__huge_array_free(void *arr, size_t cap, size_t size)
{
	if (arr)
		array_release(arr, cap * size);
}
