# SPDX-License-Identifier: MIT
bin_PROGRAMS += tools/kvforge-bench
tools_kvforge_bench_SOURCES = \
	tools/bench/bench.h \
	tools/bench/results.h \
	tools/bench/main.c \
	tools/bench/clock.c \
	tools/bench/json.c \
	tools/bench/hicache.c \
	tools/bench/placement.c \
	tools/bench/durability.c \
	tools/bench/syncprobe.h \
	tools/bench/syncprobe.c \
	tools/bench/recovery.c \
	tools/bench/lifecycle.c \
	tools/bench/compare.c \
	tools/bench/master.c
tools_kvforge_bench_LDADD = libkvforge-wire.la libkvforge-core.la

if HAVE_CMOCKA
# The group-commit probe of the durability workload, alone.
check_PROGRAMS += tests/unit/test_syncprobe
CONCURRENCY_TESTS += tests/unit/test_syncprobe
tests_unit_test_syncprobe_SOURCES = tests/unit/test_syncprobe.c \
	tools/bench/syncprobe.c tools/bench/clock.c
tests_unit_test_syncprobe_CFLAGS = $(KVF_TEST_CFLAGS)
tests_unit_test_syncprobe_LDADD = $(KVF_TEST_LIBS)
endif
