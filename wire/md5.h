/* SPDX-License-Identifier: MIT */
/*
 * wire/md5.h - MD5 (RFC 1321), for coro_rpc function ids and struct_pack
 * type hashes: both are the first four digest bytes read big-endian.
 */
#ifndef KVF_SERVER_MD5_H
#define KVF_SERVER_MD5_H

#include <stddef.h>
#include <stdint.h>

struct kvf_md5 {
	uint32_t s[4];
	uint64_t nbytes;
	uint8_t block[64];
};

void kvf_md5_init(struct kvf_md5 *m);
void kvf_md5_update(struct kvf_md5 *m, const void *data, size_t len);
void kvf_md5_final(struct kvf_md5 *m, uint8_t digest[16]);

/** kvf_md5_digest() - the digest of @len bytes at @data, in one call. */
void kvf_md5_digest(const void *data, size_t len, uint8_t digest[16]);

/**
 * kvf_md5_u32() - the first four digest bytes of @data as a big-endian
 * u32: a coro_rpc function id when @data is the qualified method name; a
 * struct_pack type hash after clearing bit 0 when @data is a type literal.
 */
uint32_t kvf_md5_u32(const void *data, size_t len);

#endif /* KVF_SERVER_MD5_H */
