/* SPDX-License-Identifier: MIT */
/*
 * base/abi.h - handing a growable public struct to a caller built against
 * another header version.
 *
 * The library fills its own full struct, then copies out only what the
 * caller's struct holds: the bytes both know, and zeroes for the fields of
 * a newer header that this library does not know. Such structs lead with a
 * size_t size, set here to the bytes the library filled, so a newer caller
 * can tell an unknown field from a zero one. Fields are only ever
 * appended, past the previous struct's end.
 */
#ifndef KVF_BASE_ABI_H
#define KVF_BASE_ABI_H

#include <stddef.h>
#include <string.h>

/*
 * Copy @known bytes of the library's struct @src (whose first member is a
 * size_t) into the caller's @dst of @size bytes. Returns the bytes filled.
 */
static inline size_t kvf__abi_copy_out(void *dst, size_t size,
				       const void *src, size_t known)
{
	size_t filled = size < known ? size : known;

	memcpy(dst, src, filled);
	if (size > known)
		memset((char *)dst + known, 0, size - known);
	memcpy(dst, &filled, sizeof(filled));
	return filled;
}

#endif /* KVF_BASE_ABI_H */
