/* SPDX-License-Identifier: MIT */
/*
 * base/grow.h - growing an array by doubling, the one way every module
 * does it.
 */
#ifndef KVF_BASE_GROW_H
#define KVF_BASE_GROW_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/*
 * kvf__grow_cap() - the capacity an array of @cap elements growing to hold
 * @need elements of @size bytes moves to: @first (or 1), or twice @cap,
 * doubled until it holds @need. Returns 0 when that many bytes would
 * overflow a size_t.
 */
static inline size_t kvf__grow_cap(size_t cap, size_t need, size_t size,
				   size_t first)
{
	size_t ncap = cap ? 2 * cap : (first ? first : 1);

	while (ncap < need) {
		if (ncap > SIZE_MAX / 2)
			return 0;
		ncap *= 2;
	}
	return size && ncap > SIZE_MAX / size ? 0 : ncap;
}

/*
 * kvf__grow() - room for @need (>= 1) elements of @size bytes in @arr,
 * which has room for *@cap: reallocated to @first elements, or to twice
 * *@cap, doubled until they fit.
 *
 * Return: the array (moved or not; *@cap updated), or NULL when out of
 * memory or the bytes would overflow (@arr and *@cap unchanged, and still
 * the caller's).
 */
static inline void *kvf__grow(void *arr, size_t *cap, size_t need,
			      size_t size, size_t first)
{
	size_t ncap;
	void *p;

	if (need <= *cap)
		return arr;
	ncap = kvf__grow_cap(*cap, need, size, first);
	if (!ncap)
		return NULL;
	p = realloc(arr, ncap * size);
	if (p)
		*cap = ncap;
	return p;
}

#endif /* KVF_BASE_GROW_H */
