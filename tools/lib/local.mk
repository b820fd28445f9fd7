# SPDX-License-Identifier: MIT
#
# Code only the tools use (kvforge-bench compare, kvf-prof-overhead): a
# convenience library of its own, so none of it is linked into
# libkvforge. It depends on libc and libm only, never on the engine.
noinst_LTLIBRARIES += tools/lib/libkvforge-tools.la
tools_lib_libkvforge_tools_la_SOURCES = \
	tools/lib/json_read.h \
	tools/lib/json_read.c \
	tools/lib/stats.h \
	tools/lib/stats.c
tools_lib_libkvforge_tools_la_LIBADD = -lm
KVF_TOOLS_LIB = tools/lib/libkvforge-tools.la

if HAVE_CMOCKA
check_PROGRAMS += tests/unit/test_stats tests/unit/test_compare
UNIT_TESTS += tests/unit/test_stats tests/unit/test_compare

tests_unit_test_stats_SOURCES = tests/unit/test_stats.c
tests_unit_test_stats_CFLAGS = $(KVF_TEST_CFLAGS)
tests_unit_test_stats_LDADD = $(KVF_TOOLS_LIB) $(KVF_TEST_LIBS)

# compare.c is also linked into kvforge-bench (tools/local.mk); here it
# runs against a fake bench script.
tests_unit_test_compare_SOURCES = tests/unit/test_compare.c \
	tools/bench/compare.c
tests_unit_test_compare_CFLAGS = $(KVF_TEST_CFLAGS)
tests_unit_test_compare_LDADD = $(KVF_TOOLS_LIB) $(KVF_TEST_LIBS)
endif
