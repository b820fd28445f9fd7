/* SPDX-License-Identifier: MIT */
/*
 * tests/stress/check.h - CHECK() for the crash harnesses' child and
 * checker roles, which run outside cmocka (they must exit, not longjmp).
 */
#ifndef KVF_TESTS_STRESS_CHECK_H
#define KVF_TESTS_STRESS_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#define CHECK(c)                                                               \
	do {                                                                   \
		if (!(c)) {                                                    \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, \
				__LINE__, #c);                                 \
			exit(1);                                               \
		}                                                              \
	} while (0)

#endif /* KVF_TESTS_STRESS_CHECK_H */
