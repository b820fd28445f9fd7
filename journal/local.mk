# SPDX-License-Identifier: MIT
libkvforge_core_la_SOURCES += \
	journal/journal.h \
	journal/error.h \
	journal/error.c \
	journal/record.h \
	journal/record.c \
	journal/store.h \
	journal/store.c \
	journal/image.c \
	journal/rewrite.h \
	journal/rewrite.c \
	journal/sidelog.h \
	journal/sidelog.c \
	journal/pipeline.h \
	journal/journal.c \
	journal/writer.c \
	journal/sidelog_flow.c \
	journal/snapshot.c

bin_PROGRAMS += tools/kvforge-inspect
tools_kvforge_inspect_SOURCES = tools/kvforge-inspect.c
tools_kvforge_inspect_LDADD = libkvforge-core.la

if HAVE_CMOCKA
check_PROGRAMS += tests/unit/test_journal_record tests/unit/test_journal
UNIT_TESTS += tests/unit/test_journal_record tests/unit/test_journal
tests_unit_test_journal_record_CFLAGS = $(KVF_TEST_CFLAGS)
tests_unit_test_journal_record_LDADD = $(KVF_TEST_LIBS)
tests_unit_test_journal_CFLAGS = $(KVF_TEST_CFLAGS)
tests_unit_test_journal_LDADD = $(KVF_TEST_LIBS)
# Image rewrites against in-place folds; kills a rewriting child.
check_PROGRAMS += tests/unit/test_journal_rewrite
UNIT_TESTS += tests/unit/test_journal_rewrite
tests_unit_test_journal_rewrite_CFLAGS = $(KVF_TEST_CFLAGS)
tests_unit_test_journal_rewrite_LDADD = $(KVF_TEST_LIBS)
endif
EXTRA_DIST += tests/unit/test_journal_model.h

if HAVE_CMOCKA
check_PROGRAMS += tests/unit/test_journal_concurrent
CONCURRENCY_TESTS += tests/unit/test_journal_concurrent
tests_unit_test_journal_concurrent_CFLAGS = $(KVF_TEST_CFLAGS)
tests_unit_test_journal_concurrent_LDADD = $(KVF_TEST_LIBS)
# Batch sizes straddling the side log's direct threshold.
check_PROGRAMS += tests/unit/test_journal_mixed
CONCURRENCY_TESTS += tests/unit/test_journal_mixed
tests_unit_test_journal_mixed_CFLAGS = $(KVF_TEST_CFLAGS)
tests_unit_test_journal_mixed_LDADD = $(KVF_TEST_LIBS)
# Snapshots read while appending, copies, staged installs.
check_PROGRAMS += tests/unit/test_journal_snapshot
CONCURRENCY_TESTS += tests/unit/test_journal_snapshot
tests_unit_test_journal_snapshot_CFLAGS = $(KVF_TEST_CFLAGS)
tests_unit_test_journal_snapshot_LDADD = $(KVF_TEST_LIBS)
endif

# Crash/recovery harness: a few iterations in make check, more with
# KVF_STRESS_ITERATIONS. Not under TSan (it forks and SIGKILLs).
check_PROGRAMS += tests/stress/test_journal_crash
UNIT_TESTS += tests/stress/test_journal_crash
tests_stress_test_journal_crash_LDADD = libkvforge-core.la

# kvforge-inspect, driven by a shell test on journals it builds.
check_PROGRAMS += tests/unit/test_journal_mkinspect
tests_unit_test_journal_mkinspect_LDADD = libkvforge-core.la
dist_check_SCRIPTS = tests/unit/test_inspect.sh
UNIT_TESTS += tests/unit/test_inspect.sh

# Throughput benchmark (never run by make check).
noinst_PROGRAMS += journal/kvforge-journal-bench
journal_kvforge_journal_bench_SOURCES = journal/bench.c
journal_kvforge_journal_bench_LDADD = libkvforge-core.la
