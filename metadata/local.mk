# SPDX-License-Identifier: MIT
libkvforge_core_la_SOURCES += \
	metadata/hash.h metadata/hash.c metadata/keyeq.h \
	metadata/object.h \
	metadata/objstate.h \
	metadata/pin.h \
	metadata/object.c \
	metadata/arena.h \
	metadata/arena.c \
	metadata/hugemem.h \
	metadata/hugemem.c \
	metadata/index.h \
	metadata/index_lfht.c \
	metadata/index_bucket.c

if HAVE_CMOCKA
check_PROGRAMS += tests/unit/test_index tests/stress/test_index_concurrent \
	tests/unit/test_keyeq tests/unit/test_hash tests/unit/test_hugemem
UNIT_TESTS += tests/unit/test_index tests/unit/test_keyeq tests/unit/test_hash \
	tests/unit/test_hugemem
tests_unit_test_hugemem_CFLAGS = $(KVF_TEST_CFLAGS)
tests_unit_test_hugemem_LDADD = $(KVF_TEST_LIBS)
tests_unit_test_keyeq_CFLAGS = $(KVF_TEST_CFLAGS)
tests_unit_test_keyeq_LDADD = $(KVF_TEST_LIBS)
tests_unit_test_hash_CFLAGS = $(KVF_TEST_CFLAGS)
tests_unit_test_hash_LDADD = $(KVF_TEST_LIBS) -lm
CONCURRENCY_TESTS += tests/stress/test_index_concurrent
tests_unit_test_index_CFLAGS = $(KVF_TEST_CFLAGS)
tests_unit_test_index_LDADD = $(KVF_TEST_LIBS)
tests_stress_test_index_concurrent_CFLAGS = $(KVF_TEST_CFLAGS)
tests_stress_test_index_concurrent_LDADD = $(KVF_TEST_LIBS)
endif

if HAVE_CMOCKA
check_PROGRAMS += tests/unit/test_arena
CONCURRENCY_TESTS += tests/unit/test_arena
tests_unit_test_arena_CFLAGS = $(KVF_TEST_CFLAGS)
tests_unit_test_arena_LDADD = $(KVF_TEST_LIBS)
endif
