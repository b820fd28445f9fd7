/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_keyeq.c - kvf__bytes_equal() against memcmp(): every
 * length up to 200, equal buffers at every alignment, and one differing
 * byte (one bit) at every position.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "base/xorshift.h"
#include "metadata/keyeq.h"

#define MAX_LEN 200

static void test_against_memcmp(void **state)
{
	static char a[MAX_LEN + 16], b[MAX_LEN + 16];
	uint64_t x = 0x9e3779b97f4a7c15ULL;

	(void)state;
	for (size_t i = 0; i < sizeof(a); i++)
		a[i] = (char)kvf__xorshift64s(&x);
	for (size_t len = 0; len <= MAX_LEN; len++) {
		for (size_t shift = 0; shift < 8; shift++) {
			const char *p = a + shift;
			char *q = b + (7 - shift);

			memcpy(q, p, len);
			assert_true(kvf__bytes_equal(p, q, len));
			for (size_t at = 0; at < len; at++) {
				q[at] ^= (char)(1u << (at % 8));
				assert_false(kvf__bytes_equal(p, q, len));
				assert_int_not_equal(memcmp(p, q, len), 0);
				q[at] ^= (char)(1u << (at % 8));
			}
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_against_memcmp),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
