# SPDX-License-Identifier: MIT
libkvforge_core_la_SOURCES += alloc/segalloc.h alloc/segalloc.c \
	alloc/placement.h alloc/placement.c alloc/lanes.h alloc/lanes.c

if HAVE_CMOCKA
check_PROGRAMS += tests/unit/test_segalloc tests/unit/test_placement \
	tests/unit/test_lanes tests/stress/test_segalloc_concurrent
UNIT_TESTS += tests/unit/test_segalloc tests/unit/test_placement
CONCURRENCY_TESTS += tests/stress/test_segalloc_concurrent tests/unit/test_lanes

tests_unit_test_segalloc_CFLAGS = $(KVF_TEST_CFLAGS)
tests_unit_test_segalloc_LDADD = $(KVF_TEST_LIBS)
tests_unit_test_placement_CFLAGS = $(KVF_TEST_CFLAGS)
tests_unit_test_placement_LDADD = $(KVF_TEST_LIBS)
tests_unit_test_lanes_CFLAGS = $(KVF_TEST_CFLAGS)
tests_unit_test_lanes_LDADD = $(KVF_TEST_LIBS)
tests_stress_test_segalloc_concurrent_CFLAGS = $(KVF_TEST_CFLAGS)
tests_stress_test_segalloc_concurrent_LDADD = $(KVF_TEST_LIBS)

# The same allocator tests against a self-checking build of the allocator
# (KVF_SEGALLOC_CHECK): after every change each node's summaries and the
# tiling are verified, and each fast path (first fit's leaf tail, a batch
# of frees' deferred summaries) against the computation it skips. Not in
# sanitized builds: what a sanitizer checks is the allocator's code,
# which test_segalloc runs there the same way, and the checks after every
# change make this the slowest test of the ASan tier.
if !SANITIZED
check_PROGRAMS += tests/unit/test_segalloc_checked
UNIT_TESTS += tests/unit/test_segalloc_checked
endif
tests_unit_test_segalloc_checked_SOURCES = tests/unit/test_segalloc.c \
	alloc/segalloc.c
tests_unit_test_segalloc_checked_CFLAGS = $(KVF_TEST_CFLAGS) \
	-DKVF_SEGALLOC_CHECK
tests_unit_test_segalloc_checked_LDADD = $(KVF_TEST_LIBS)

# The allocator's address-order scan (eviction's clock hands).
check_PROGRAMS += tests/unit/test_segalloc_scan
UNIT_TESTS += tests/unit/test_segalloc_scan
tests_unit_test_segalloc_scan_CFLAGS = $(KVF_TEST_CFLAGS)
tests_unit_test_segalloc_scan_LDADD = $(KVF_TEST_LIBS)
endif
