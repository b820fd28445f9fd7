// SPDX-License-Identifier: MIT
/*
 * wire/md5.c - MD5 (RFC 1321).
 *
 * Only ever hashes short identifiers (method names, type literals) at
 * start-up and in tests, so it is written for clarity: one block function
 * with the four rounds table-driven, little-endian words loaded bytewise
 * (no alignment or host-order assumptions).
 */
#include "wire/md5.h"

#include <string.h>

/* Per-step shift amounts, four per round. */
static const uint8_t shift[4][4] = {
	{7, 12, 17, 22},
	{5, 9, 14, 20},
	{4, 11, 16, 23},
	{6, 10, 15, 21},
};

/* floor(abs(sin(i + 1)) * 2^32). */
static const uint32_t sine[64] = {
	0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a,
	0xa8304613, 0xfd469501, 0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be,
	0x6b901122, 0xfd987193, 0xa679438e, 0x49b40821, 0xf61e2562, 0xc040b340,
	0x265e5a51, 0xe9b6c7aa, 0xd62f105d, 0x02441453, 0xd8a1e681, 0xe7d3fbc8,
	0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed, 0xa9e3e905, 0xfcefa3f8,
	0x676f02d9, 0x8d2a4c8a, 0xfffa3942, 0x8771f681, 0x6d9d6122, 0xfde5380c,
	0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70, 0x289b7ec6, 0xeaa127fa,
	0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665,
	0xf4292244, 0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92,
	0xffeff47d, 0x85845dd1, 0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1,
	0xf7537e82, 0xbd3af235, 0x2ad7d2bb, 0xeb86d391,
};

static uint32_t rotl(uint32_t x, unsigned n)
{
	return (x << n) | (x >> (32 - n));
}

static void md5_block(uint32_t s[4], const uint8_t *p)
{
	uint32_t w[16];
	uint32_t a = s[0], b = s[1], c = s[2], d = s[3];

	for (int i = 0; i < 16; i++)
		w[i] = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 |
		       (uint32_t)p[4 * i + 2] << 16 |
		       (uint32_t)p[4 * i + 3] << 24;
	for (int i = 0; i < 64; i++) {
		uint32_t f;
		int g;

		switch (i / 16) {
		case 0:
			f = (b & c) | (~b & d);
			g = i;
			break;
		case 1:
			f = (d & b) | (~d & c);
			g = (5 * i + 1) % 16;
			break;
		case 2:
			f = b ^ c ^ d;
			g = (3 * i + 5) % 16;
			break;
		default:
			f = c ^ (b | ~d);
			g = (7 * i) % 16;
			break;
		}
		f += a + sine[i] + w[g];
		a = d;
		d = c;
		c = b;
		b += rotl(f, shift[i / 16][i % 4]);
	}
	s[0] += a;
	s[1] += b;
	s[2] += c;
	s[3] += d;
}

void kvf_md5_init(struct kvf_md5 *m)
{
	m->s[0] = 0x67452301;
	m->s[1] = 0xefcdab89;
	m->s[2] = 0x98badcfe;
	m->s[3] = 0x10325476;
	m->nbytes = 0;
}

void kvf_md5_update(struct kvf_md5 *m, const void *data, size_t len)
{
	const uint8_t *p = data;
	size_t used = m->nbytes % 64;

	m->nbytes += len;
	if (used) {
		size_t take = 64 - used < len ? 64 - used : len;

		memcpy(m->block + used, p, take);
		p += take;
		len -= take;
		if (used + take < 64)
			return;
		md5_block(m->s, m->block);
	}
	for (; len >= 64; p += 64, len -= 64)
		md5_block(m->s, p);
	memcpy(m->block, p, len);
}

void kvf_md5_final(struct kvf_md5 *m, uint8_t digest[16])
{
	static const uint8_t pad[64] = {0x80};
	uint64_t bits = m->nbytes * 8;
	uint8_t len_le[8];
	size_t used = m->nbytes % 64;

	for (int i = 0; i < 8; i++)
		len_le[i] = (uint8_t)(bits >> (8 * i));
	kvf_md5_update(m, pad, used < 56 ? 56 - used : 120 - used);
	kvf_md5_update(m, len_le, 8);
	for (int i = 0; i < 4; i++)
		for (int j = 0; j < 4; j++)
			digest[4 * i + j] = (uint8_t)(m->s[i] >> (8 * j));
}

void kvf_md5_digest(const void *data, size_t len, uint8_t digest[16])
{
	struct kvf_md5 m;

	kvf_md5_init(&m);
	kvf_md5_update(&m, data, len);
	kvf_md5_final(&m, digest);
}

uint32_t kvf_md5_u32(const void *data, size_t len)
{
	uint8_t d[16];

	kvf_md5_digest(data, len, d);
	return (uint32_t)d[0] << 24 | (uint32_t)d[1] << 16 |
	       (uint32_t)d[2] << 8 | d[3];
}
