# SPDX-License-Identifier: MIT
EXTRA_DIST += tests/unit/helpers.h

if HAVE_CMOCKA
check_PROGRAMS += tests/unit/test_batch tests/unit/test_lifecycle \
	tests/stress/test_engine_concurrent
UNIT_TESTS += tests/unit/test_batch tests/unit/test_lifecycle
CONCURRENCY_TESTS += tests/stress/test_engine_concurrent

tests_unit_test_batch_CFLAGS = $(KVF_TEST_CFLAGS)
tests_unit_test_batch_LDADD = $(KVF_TEST_LIBS)
tests_unit_test_lifecycle_CFLAGS = $(KVF_TEST_CFLAGS)
tests_unit_test_lifecycle_LDADD = $(KVF_TEST_LIBS)
tests_stress_test_engine_concurrent_CFLAGS = $(KVF_TEST_CFLAGS)
tests_stress_test_engine_concurrent_LDADD = $(KVF_TEST_LIBS)
endif
