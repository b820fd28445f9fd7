/* SPDX-License-Identifier: MIT */
/*
 * metadata/hash.h - key hashing.
 *
 * Two functions, for two jobs:
 *  - kvf__key_hash(): the in-memory hash of a key, which the index (home
 *    bucket, tag, stripe) and the allocator's owner tags are made with.
 *    Never stored: every process computes it again (recovery rebuilds the
 *    index and the tags), so it may differ between machines. On x86-64
 *    with AES-NI it is an AES-round hash (metadata/hash.c), else XXH3-64.
 *  - kvf__image_key_hash(): XXH3-64, the hash the journal's image stores
 *    in its object keys (journal/image.c). Part of the on-disk format:
 *    fixed whatever the in-memory hash is.
 */
#ifndef KVF_METADATA_HASH_H
#define KVF_METADATA_HASH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#if defined(__x86_64__)
#define KVF_HASH_AES 1
/* Set once before main when the CPU has AES-NI (metadata/hash.c). */
extern bool kvf__hash_aes;
uint64_t kvf__key_hash_aes(const char *key, size_t len);
#endif

/*
 * kvf__key_hash() - the in-memory hash of @len bytes at @key.
 *
 * Pure, lock-free, never blocks. Equal keys hash equal within a process;
 * nothing may store the value across processes (kvf__image_key_hash()).
 */
static inline uint64_t kvf__key_hash(const char *key, size_t len)
{
#ifdef KVF_HASH_AES
	if (__builtin_expect(kvf__hash_aes, 1))
		return kvf__key_hash_aes(key, len);
#endif
	return XXH3_64bits(key, len);
}

/*
 * kvf__image_key_hash() - XXH3-64 of @len bytes at @key, as the journal's
 * image keys its objects (on-disk format; never changes).
 */
static inline uint64_t kvf__image_key_hash(const char *key, size_t len)
{
	return XXH3_64bits(key, len);
}

#endif /* KVF_METADATA_HASH_H */
