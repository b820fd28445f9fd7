# SPDX-License-Identifier: MIT
bin_PROGRAMS += tools/kvforge-bench
tools_kvforge_bench_SOURCES = \
	tools/bench/bench.h \
	tools/bench/results.h \
	tools/bench/main.c \
	tools/bench/clock.c \
	tools/bench/json.c \
	tools/bench/hicache.c \
	tools/bench/floor.c \
	tools/bench/util.c \
	tools/bench/procio.c \
	tools/bench/placement.c \
	tools/bench/durability.c \
	tools/bench/syncprobe.h \
	tools/bench/syncprobe.c \
	tools/bench/recovery.c \
	tools/bench/lifecycle.c \
	tools/bench/compare.c \
	tools/bench/master.c \
	tools/bench/replay.h \
	tools/bench/replay.c \
	tools/bench/trace.c
tools_kvforge_bench_LDADD = $(KVF_TOOLS_LIB) libkvforge-client.la \
	libkvforge-core.la

# Measures profiling overhead against a live engine (not run by make check).
noinst_PROGRAMS += tools/kvf-prof-overhead
tools_kvf_prof_overhead_SOURCES = tools/prof-overhead.c
tools_kvf_prof_overhead_LDADD = $(KVF_TOOLS_LIB) libkvforge-core.la

dist_man1_MANS = tools/man/kvforge-bench.1 tools/man/kvforge-inspect.1

# The perf wrappers, flame graph and plots (docs/profiling.md), installed
# under $(pkgdatadir)/perf (profiling/local.mk distributes them); they
# find each other through their own path.
kvfperfdir = $(pkgdatadir)/perf
kvfperf_SCRIPTS = profiling/scripts/perf-common.sh \
	profiling/scripts/perf-record.sh profiling/scripts/perf-stat.sh \
	profiling/scripts/plots.sh profiling/scripts/flamegraph.py \
	profiling/scripts/plots.py

if HAVE_CMOCKA
# The group-commit probe of the durability workload, alone.
check_PROGRAMS += tests/unit/test_syncprobe
CONCURRENCY_TESTS += tests/unit/test_syncprobe
tests_unit_test_syncprobe_SOURCES = tests/unit/test_syncprobe.c \
	tools/bench/syncprobe.c tools/bench/clock.c
tests_unit_test_syncprobe_CFLAGS = $(KVF_TEST_CFLAGS)
tests_unit_test_syncprobe_LDADD = $(KVF_TEST_LIBS)

# The memory-floor probe of the hicache workload, alone.
check_PROGRAMS += tests/unit/test_floor
UNIT_TESTS += tests/unit/test_floor
tests_unit_test_floor_SOURCES = tests/unit/test_floor.c \
	tools/bench/floor.c tools/bench/util.c tools/bench/json.c \
	tools/bench/clock.c
tests_unit_test_floor_CFLAGS = $(KVF_TEST_CFLAGS)
tests_unit_test_floor_LDADD = $(KVF_TEST_LIBS)

# The storage traffic counter of the journaled workloads.
check_PROGRAMS += tests/unit/test_procio
UNIT_TESTS += tests/unit/test_procio
tests_unit_test_procio_SOURCES = tests/unit/test_procio.c \
	tools/bench/procio.c
tests_unit_test_procio_CFLAGS = $(KVF_TEST_CFLAGS)
tests_unit_test_procio_LDADD = $(KVF_TEST_LIBS)

# kvforge-bench's storage traffic figures, end to end.
dist_check_SCRIPTS += tests/unit/test_bench_writes.sh
UNIT_TESTS += tests/unit/test_bench_writes.sh

# The trace workload's replay and loader, on 200-request cuts of the
# traces (tools/bench/traces/ is not distributed).
check_PROGRAMS += tests/unit/test_trace
UNIT_TESTS += tests/unit/test_trace
tests_unit_test_trace_SOURCES = tests/unit/test_trace.c \
	tools/bench/replay.c tools/bench/clock.c
tests_unit_test_trace_CFLAGS = $(KVF_TEST_CFLAGS) \
	-DKVF_TRACE_DATA='"$(abs_top_srcdir)/tests/unit/data"'
tests_unit_test_trace_LDADD = $(KVF_TEST_LIBS)
EXTRA_DIST += tests/unit/data/trace_conversation_200.jsonl \
	tests/unit/data/trace_synthetic_200.jsonl

# kvforge-bench --json: one object per results group, read back strictly.
check_PROGRAMS += tests/unit/test_bench_json
UNIT_TESTS += tests/unit/test_bench_json
tests_unit_test_bench_json_SOURCES = tests/unit/test_bench_json.c \
	tools/bench/json.c
tests_unit_test_bench_json_CFLAGS = $(KVF_TEST_CFLAGS)
tests_unit_test_bench_json_LDADD = $(KVF_TOOLS_LIB) $(KVF_TEST_LIBS)
endif

# The offline references of --workload trace (docs/benchmarks.md). The
# traces themselves (tools/bench/traces/, 4 MB) stay in the repository:
# the tests carry their own 200-request cuts.
dist_noinst_SCRIPTS += tools/bench/trace-sim.py tools/bench/trace-plot.py
# How long one ReMountSegment holds kvforge-master's loop (docs/master.md).
dist_noinst_SCRIPTS += tools/bench/remount.py
