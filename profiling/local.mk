# SPDX-License-Identifier: MIT
#
# Per-stage profiler. Backends are chosen by file: the hardware tier is
# tier_pfm.c with libpfm4, tier_pfm_none.c (always unavailable) without.
libkvforge_core_la_SOURCES += \
	profiling/stage.h \
	profiling/tier.h \
	profiling/tier_clock.c \
	profiling/tier_perf_sw.c \
	profiling/profile.c \
	profiling/render.c \
	profiling/stats.h \
	profiling/stats.c \
	profiling/json_read.h \
	profiling/json_read.c
if HAVE_PFM
libkvforge_core_la_SOURCES += profiling/tier_pfm.c
else
libkvforge_core_la_SOURCES += profiling/tier_pfm_none.c
endif

# Measures profiling overhead against a live engine (not run by make check).
noinst_PROGRAMS += profiling/kvf-prof-overhead
profiling_kvf_prof_overhead_SOURCES = profiling/overhead.c
profiling_kvf_prof_overhead_LDADD = libkvforge-core.la

dist_noinst_SCRIPTS += \
	profiling/scripts/perf-common.sh \
	profiling/scripts/perf-stat.sh \
	profiling/scripts/perf-record.sh \
	profiling/scripts/flamegraph.py \
	profiling/scripts/plots.sh \
	profiling/scripts/plots.py

if HAVE_CMOCKA
check_PROGRAMS += tests/unit/test_profile tests/unit/test_stats \
	tests/unit/test_compare tests/unit/test_profile_threads
UNIT_TESTS += tests/unit/test_profile tests/unit/test_stats \
	tests/unit/test_compare
CONCURRENCY_TESTS += tests/unit/test_profile_threads

tests_unit_test_profile_SOURCES = tests/unit/test_profile.c
tests_unit_test_profile_CFLAGS = $(KVF_TEST_CFLAGS)
tests_unit_test_profile_LDADD = $(KVF_TEST_LIBS)

tests_unit_test_profile_threads_SOURCES = tests/unit/test_profile_threads.c
tests_unit_test_profile_threads_CFLAGS = $(KVF_TEST_CFLAGS)
tests_unit_test_profile_threads_LDADD = $(KVF_TEST_LIBS)

tests_unit_test_stats_SOURCES = tests/unit/test_stats.c
tests_unit_test_stats_CFLAGS = $(KVF_TEST_CFLAGS)
tests_unit_test_stats_LDADD = $(KVF_TEST_LIBS)

# compare.c is also linked into kvforge-bench (tools/local.mk); here it
# runs against a fake bench script.
tests_unit_test_compare_SOURCES = tests/unit/test_compare.c \
	tools/bench/compare.c
tests_unit_test_compare_CFLAGS = $(KVF_TEST_CFLAGS)
tests_unit_test_compare_LDADD = $(KVF_TEST_LIBS)
endif
