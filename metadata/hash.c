/* SPDX-License-Identifier: MIT */
/*
 * metadata/hash.c - the in-memory key hash on AES-NI.
 *
 * Every batch call hashes each of its keys once, and a HiCache key is 68
 * bytes: XXH3-64 took ~76 instructions for one (callgrind), a fifth of a
 * batch exist's instructions per key and 8% of a put's two calls. AES
 * rounds mix 16 bytes in one instruction each, so this hash absorbs a key
 * 32 bytes at a time into two independent states (one round per 16-byte
 * block, the block XORed in first; the last 32 bytes are read from the
 * end, overlapping, so no load passes the key's end), the length having
 * been mixed into the first state, and then gives the two states three
 * more rounds together: after two rounds every output byte depends on
 * every byte of both states. A 68-byte key takes ~48 instructions
 * (callgrind).
 *
 * What it is for: the index's home bucket and tag (bits 32-63), its
 * stripe (the low half), the allocator's owner tags. Its round keys are
 * fixed constants, as XXH3 without a seed is: like it, it is a hash for
 * tables, not a defence against keys chosen to collide. It is never
 * stored (metadata/hash.h), so machines without AES-NI use XXH3-64.
 *
 * Read once, before main (a constructor), like base/prefetch.c's flag.
 */
#include "config.h"

#include <string.h>

#include "metadata/hash.h"

#ifdef KVF_HASH_AES

#include <cpuid.h>
#include <wmmintrin.h>

bool kvf__hash_aes;

__attribute__((constructor)) static void detect_aes(void)
{
	unsigned int a, b, c, d;

	if (__get_cpuid(1, &a, &b, &c, &d))
		kvf__hash_aes = (c & bit_AES) != 0;
}

#define AES __attribute__((target("aes")))

/* Round keys: hexadecimal digits of pi, any fixed unstructured values. */
#define K0_HI UINT64_C(0x243f6a8885a308d3)
#define K0_LO UINT64_C(0x13198a2e03707344)
#define K1_HI UINT64_C(0xa4093822299f31d0)
#define K1_LO UINT64_C(0x082efa98ec4e6c89)
#define K2_HI UINT64_C(0x452821e638d01377)
#define K2_LO UINT64_C(0xbe5466cf34e90c6c)

static inline __m128i load16(const char *p)
{
	return _mm_loadu_si128((const __m128i *)(const void *)p);
}

/* Up to 16 bytes, zero-padded, reading none past @len. */
static inline __m128i load_short(const char *p, size_t len)
{
	char buf[16] = { 0 };

	if (len)
		memcpy(buf, p, len);
	return load16(buf);
}

AES static inline __m128i absorb(__m128i state, __m128i block, __m128i k)
{
	return _mm_aesenc_si128(_mm_xor_si128(state, block), k);
}

AES uint64_t kvf__key_hash_aes(const char *key, size_t len)
{
	const __m128i k0 = _mm_set_epi64x((long long)K0_HI, (long long)K0_LO);
	const __m128i k1 = _mm_set_epi64x((long long)K1_HI, (long long)K1_LO);
	const __m128i k2 = _mm_set_epi64x((long long)K2_HI, (long long)K2_LO);
	__m128i a = _mm_xor_si128(k0, _mm_set_epi64x(0, (long long)len));
	__m128i b = k1, x;

	if (len <= 16) {
		a = absorb(a, load_short(key, len), k1);
	} else if (len <= 32) {
		a = absorb(a, load16(key), k1);
		b = absorb(b, load16(key + len - 16), k0);
	} else {
		const char *p = key, *last = key + len - 32;

		for (; p < last; p += 32) {
			a = absorb(a, load16(p), k1);
			b = absorb(b, load16(p + 16), k0);
		}
		a = absorb(a, load16(last), k1);
		b = absorb(b, load16(last + 16), k0);
	}
	x = _mm_aesenc_si128(a, b);
	x = _mm_aesenc_si128(x, k2);
	x = _mm_aesenc_si128(x, k0);
	return (uint64_t)_mm_cvtsi128_si64(x) ^
	       (uint64_t)_mm_cvtsi128_si64(_mm_unpackhi_epi64(x, x));
}

#endif /* KVF_HASH_AES */
