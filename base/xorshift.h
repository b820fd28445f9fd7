/* SPDX-License-Identifier: MIT */
/*
 * base/xorshift.h - the one cheap pseudo-random sequence: xorshift64*.
 *
 * Placement draws its samples from it (a few cycles a draw, inlined on
 * the put path), and the benchmark and the tests use it for sequences
 * that must repeat from a seed. Not for anything an attacker could
 * exploit. The state must not be 0 (0 stays 0).
 */
#ifndef KVF_BASE_XORSHIFT_H
#define KVF_BASE_XORSHIFT_H

#include <stdint.h>

/* The next number of the sequence kept in *@state (nonzero). */
static inline uint64_t kvf__xorshift64s(uint64_t *state)
{
	uint64_t x = *state;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*state = x;
	return x * 0x2545f4914f6cdd1dULL;
}

#endif /* KVF_BASE_XORSHIFT_H */
