# SPDX-License-Identifier: MIT
bin_PROGRAMS += tools/kvforge-bench
tools_kvforge_bench_SOURCES = \
	tools/bench/bench.h \
	tools/bench/results.h \
	tools/bench/main.c \
	tools/bench/json.c \
	tools/bench/hicache.c \
	tools/bench/placement.c \
	tools/bench/durability.c \
	tools/bench/syncprobe.h \
	tools/bench/syncprobe.c \
	tools/bench/recovery.c \
	tools/bench/lifecycle.c \
	tools/bench/compare.c
tools_kvforge_bench_LDADD = libkvforge-core.la
