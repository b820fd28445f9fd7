/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_hash.c - the in-memory key hash (metadata/hash.h).
 *
 * Whichever function this CPU uses: every byte and the length count (one
 * flipped bit anywhere, or one byte more, changes the hash, and about
 * half its bits), no read past the key (exact-size copies, which
 * AddressSanitizer checks), and the bits the index uses (home and tag,
 * 32-63; the stripe, the low half) spread evenly over HiCache-shaped
 * keys with no 64-bit collision among 2^20 of them. On AES-NI the AES
 * path is also the one kvf__key_hash() takes. The image hash stays
 * XXH3-64 (the on-disk format).
 */
#include "config.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/xorshift.h"
#include "metadata/hash.h"

#define MAX_LEN 300
#define NR_KEYS (1u << 20)
#define BINS 4096

static void fill_random(char *p, size_t n, uint64_t seed)
{
	uint64_t x = seed | 1;

	for (size_t i = 0; i < n; i++)
		p[i] = (char)(kvf__xorshift64s(&x) >> 56);
}

/* A copy of @src in a block of exactly @len bytes: reads past it trap. */
static uint64_t hash_exact(const char *src, size_t len)
{
	char *p = malloc(len ? len : 1);
	uint64_t h;

	assert_non_null(p);
	memcpy(p, src, len);
	h = kvf__key_hash(p, len);
	free(p);
	return h;
}

static void test_every_bit_and_length_counts(void **state)
{
	static char key[MAX_LEN + 1];
	uint64_t flips = 0, changed = 0;

	(void)state;
	fill_random(key, sizeof(key), 42);
	for (size_t len = 0; len <= MAX_LEN; len++) {
		uint64_t h = hash_exact(key, len);

		assert_int_equal(h, kvf__key_hash(key, len));
		if (len < MAX_LEN)
			assert_int_not_equal(h, hash_exact(key, len + 1));
		for (size_t bit = 0; bit < 8 * len; bit++) {
			uint64_t g;

			key[bit / 8] ^= (char)(1u << (bit % 8));
			g = hash_exact(key, len);
			key[bit / 8] ^= (char)(1u << (bit % 8));
			assert_int_not_equal(g, h);
			changed += (uint64_t)__builtin_popcountll(g ^ h);
			flips++;
		}
	}
	/* Avalanche: a flipped input bit flips about half the output. */
	assert_true(changed > flips * 30 && changed < flips * 34);
}

static void test_zero_keys_of_each_length_differ(void **state)
{
	static const char zeros[MAX_LEN] = { 0 };
	uint64_t *h = calloc(MAX_LEN + 1, sizeof(*h));

	(void)state;
	assert_non_null(h);
	for (size_t len = 0; len <= MAX_LEN; len++) {
		h[len] = kvf__key_hash(zeros, len);
		for (size_t j = 0; j < len; j++)
			assert_int_not_equal(h[j], h[len]);
	}
	free(h);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Pearson's chi-square of @count over BINS bins, against uniform. */
static double chi_square(const uint32_t *count, uint64_t n)
{
	double want = (double)n / BINS, sum = 0;

	for (unsigned i = 0; i < BINS; i++)
		sum += ((double)count[i] - want) * ((double)count[i] - want) /
		       want;
	return sum;
}

/*
 * 2^20 keys of a HiCache rank ("<64 hex digits>_<rank>_k|v": a few bytes
 * change between neighbours): no collision, and bits 32-43 (home), 48-59
 * (tag) and 0-11 (stripe) uniform: chi-square with 4095 degrees of
 * freedom stays under 4095 + 6 * sqrt(2 * 4095) (~4479) by far for
 * uniform bins, and ends in the tens of thousands for a biased hash.
 */
static void test_hicache_keys_spread(void **state)
{
	uint64_t *h = malloc(NR_KEYS * sizeof(*h));
	uint32_t *home = calloc(BINS, sizeof(uint32_t));
	uint32_t *tag = calloc(BINS, sizeof(uint32_t));
	uint32_t *stripe = calloc(BINS, sizeof(uint32_t));
	double bound = 4095 + 6 * sqrt(2 * 4095.0);
	char key[96];

	(void)state;
	assert_non_null(h);
	assert_non_null(home);
	assert_non_null(tag);
	assert_non_null(stripe);
	for (uint32_t i = 0; i < NR_KEYS; i++) {
		unsigned long long page = i / 2;
		int len = snprintf(key, sizeof(key),
				   "%016llx%016llx%016llx%016llx_%u_%c",
				   page * 0x9e3779b97f4a7c15ULL, page, 0ULL,
				   page >> 3, (unsigned)(page % 8),
				   i % 2 ? 'v' : 'k');

		h[i] = kvf__key_hash(key, (size_t)len);
		home[(h[i] >> 32) % BINS]++;
		tag[(h[i] >> 48) % BINS]++;
		stripe[h[i] % BINS]++;
	}
	assert_true(chi_square(home, NR_KEYS) < bound);
	assert_true(chi_square(tag, NR_KEYS) < bound);
	assert_true(chi_square(stripe, NR_KEYS) < bound);
	qsort(h, NR_KEYS, sizeof(*h), cmp_u64);
	for (uint32_t i = 1; i < NR_KEYS; i++)
		assert_int_not_equal(h[i - 1], h[i]);
	free(stripe);
	free(tag);
	free(home);
	free(h);
}

static void test_dispatch_and_image_hash(void **state)
{
	static const char key[] = "0123456789abcdef0123456789abcdef"
				  "0123456789abcdef0123456789abcdef_3_k";
	size_t len = sizeof(key) - 1;

	(void)state;
	assert_int_equal(kvf__image_key_hash(key, len), XXH3_64bits(key, len));
#ifdef KVF_HASH_AES
	if (kvf__hash_aes) {
		assert_int_equal(kvf__key_hash(key, len),
				 kvf__key_hash_aes(key, len));
		return;
	}
#endif
	assert_int_equal(kvf__key_hash(key, len), XXH3_64bits(key, len));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_bit_and_length_counts),
		cmocka_unit_test(test_zero_keys_of_each_length_differ),
		cmocka_unit_test(test_hicache_keys_spread),
		cmocka_unit_test(test_dispatch_and_image_hash),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
