/* SPDX-License-Identifier: MIT */
/*
 * engine/replay_sort.c - the image replicas' (segment, offset) sort.
 *
 * LSD radix sort on ten byte-wide digits: the offset's six low bytes,
 * then the slot's four. One pass counts every digit of every range at
 * once; each digit then costs a prefix sum and a stable scatter, and a
 * digit every range shares (a single segment's slot bytes, the low byte
 * of aligned offsets, the high bytes of offsets in small segments) costs
 * nothing. At 1M replicas that is a handful of linear passes where
 * qsort() made twenty compare-and-move rounds through a callback (a
 * tenth of an image recovery's samples).
 *
 * Stability is what makes LSD correct: each pass keeps the order the
 * lower digits left among equal digits.
 */
#include "config.h"

#include <stdlib.h>

#include "engine/replay_sort.h"

#define DIGITS 10
#define OFFSET_DIGITS 6

static unsigned digit_of(const struct kvf__replay_range *r, unsigned d)
{
	if (d < OFFSET_DIGITS)
		return (unsigned)(r->offset >> (8 * d)) & 255;
	return (r->slot >> (8 * (d - OFFSET_DIGITS))) & 255;
}

/* Turn @count (how many ranges have each value) into first positions. */
static void first_positions(size_t count[256])
{
	size_t at = 0;

	for (unsigned v = 0; v < 256; v++) {
		size_t c = count[v];

		count[v] = at;
		at += c;
	}
}

struct kvf__replay_range *kvf__replay_sort(struct kvf__replay_range *a,
					   struct kvf__replay_range *tmp,
					   size_t n)
{
	size_t(*count)[256];
	struct kvf__replay_range *src = a, *dst = tmp, *swap;

	if (n < 2)
		return a;
	count = calloc(DIGITS, sizeof(*count));
	if (!count)
		return NULL;
	for (size_t i = 0; i < n; i++)
		for (unsigned d = 0; d < DIGITS; d++)
			count[d][digit_of(&a[i], d)]++;
	for (unsigned d = 0; d < DIGITS; d++) {
		if (count[d][digit_of(&a[0], d)] == n)
			continue; /* every range has this digit */
		first_positions(count[d]);
		for (size_t i = 0; i < n; i++)
			dst[count[d][digit_of(&src[i], d)]++] = src[i];
		swap = src;
		src = dst;
		dst = swap;
	}
	free(count);
	return src;
}
