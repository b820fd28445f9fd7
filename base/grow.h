/* SPDX-License-Identifier: MIT */
/*
 * base/grow.h - growing an array by doubling, the one way every module
 * does it.
 */
#ifndef KVF_BASE_GROW_H
#define KVF_BASE_GROW_H

#include <stddef.h>
#include <stdlib.h>

/*
 * kvf__grow() - room for @need (>= 1) elements of @size bytes in @arr,
 * which has room for *@cap: reallocated to @first elements, or to twice
 * *@cap, doubled until they fit.
 *
 * Return: the array (moved or not; *@cap updated), or NULL when out of
 * memory (@arr and *@cap unchanged, and still the caller's).
 */
static inline void *kvf__grow(void *arr, size_t *cap, size_t need,
			      size_t size, size_t first)
{
	size_t ncap = *cap ? 2 * *cap : first;
	void *p;

	if (need <= *cap)
		return arr;
	while (ncap < need)
		ncap *= 2;
	p = realloc(arr, ncap * size);
	if (p)
		*cap = ncap;
	return p;
}

#endif /* KVF_BASE_GROW_H */
