/* SPDX-License-Identifier: MIT */
/*
 * metadata/keyeq.h - key equality: a record against a key (both indexes'
 * lookups, through kvf__object_has_key()) and a batch's duplicate check.
 *
 * Every found key is compared once in full against its record. Keys are
 * tens of bytes (HiCache: 68), where a call to the C library's memcmp
 * (a dispatch through the PLT, then a size switch) costs more than the
 * compare: 16 bytes at a time with unaligned word loads OR-ed into one
 * difference, the last 16 bytes overlapping, is branch-free but for the
 * loop, and answers only "equal or not", which is all a lookup needs.
 */
#ifndef KVF_METADATA_KEYEQ_H
#define KVF_METADATA_KEYEQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline uint64_t kvf__load64(const char *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

/* The 16 bytes at @a and @b differ in these bits (0: equal). */
static inline uint64_t kvf__diff16(const char *a, const char *b)
{
	return (kvf__load64(a) ^ kvf__load64(b)) |
	       (kvf__load64(a + 8) ^ kvf__load64(b + 8));
}

/* Whether the @len bytes at @a and @b are equal. Pure. */
static inline bool kvf__bytes_equal(const char *a, const char *b, size_t len)
{
	uint64_t diff = 0;
	size_t i;

	if (len < 16)
		return memcmp(a, b, len) == 0;
	for (i = 0; i + 16 <= len; i += 16)
		diff |= kvf__diff16(a + i, b + i);
	if (i < len)
		diff |= kvf__diff16(a + len - 16, b + len - 16);
	return diff == 0;
}

#endif /* KVF_METADATA_KEYEQ_H */
