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
	profiling/render.c
if HAVE_PFM
libkvforge_core_la_SOURCES += profiling/tier_pfm.c
else
libkvforge_core_la_SOURCES += profiling/tier_pfm_none.c
endif

dist_noinst_SCRIPTS += \
	profiling/scripts/perf-common.sh \
	profiling/scripts/perf-stat.sh \
	profiling/scripts/perf-record.sh \
	profiling/scripts/flamegraph.py \
	profiling/scripts/plots.sh \
	profiling/scripts/plots.py

if HAVE_CMOCKA
check_PROGRAMS += tests/unit/test_profile tests/unit/test_profile_threads
UNIT_TESTS += tests/unit/test_profile
CONCURRENCY_TESTS += tests/unit/test_profile_threads

tests_unit_test_profile_SOURCES = tests/unit/test_profile.c
tests_unit_test_profile_CFLAGS = $(KVF_TEST_CFLAGS)
# The JSON reader checks the profile table's JSON form.
tests_unit_test_profile_LDADD = $(KVF_TOOLS_LIB) $(KVF_TEST_LIBS)

tests_unit_test_profile_threads_SOURCES = tests/unit/test_profile_threads.c
tests_unit_test_profile_threads_CFLAGS = $(KVF_TEST_CFLAGS)
tests_unit_test_profile_threads_LDADD = $(KVF_TEST_LIBS)
endif
