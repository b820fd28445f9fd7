#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The embedded engine's benchmark: set up, build, and run kvforge-bench's
# default workload (hicache) against an embedded engine whose journal lives in
# ./kvforge-data under the current folder. Extra arguments go to the bench.
# With --workload trace, Mooncake's conversation trace
# (tools/bench/traces/) is replayed unless --trace names another, against a
# memory-only engine (docs/benchmarks.md, "Real traces").
set -euo pipefail
here=$(pwd)
. "$(dirname "$0")/setup.sh"
kvf_setup_build
cd "$here"
workload= trace=
prev=
for a in "$@"; do
	case "$prev" in
	--workload) workload=$a ;;
	--trace) trace=$a ;;
	esac
	case "$a" in
	--workload=*) workload=${a#--workload=} ;;
	--trace=*) trace=${a#--trace=} ;;
	esac
	prev=$a
done
if [ "$workload" = trace ]; then
	if [ -z "$trace" ]; then
		set -- "$@" --trace "$KVF_TOP/tools/bench/traces/conversation_trace.jsonl"
	fi
	exec "$KVF_TOP/build/tools/kvforge-bench" "$@"
fi
exec "$KVF_TOP/build/tools/kvforge-bench" --data-dir "$here/kvforge-data" "$@"
