#!/bin/sh
# SPDX-License-Identifier: MIT
#
# perf-record.sh - sample a command (typically a kvforge-bench workload)
# with call graphs, then fold the samples into a flame graph SVG.
#
#   profiling/scripts/perf-record.sh [-o DIR] [-F HZ] [-g fp|dwarf] -- CMD...
#
#   -o DIR   output directory (default: perf-out): perf.data, the folded
#            stacks (stacks.folded) and flame.svg
#   -F HZ    sampling frequency (default 999)
#   -g MODE  call-graph mode: fp (frame pointers, default; build with
#            CFLAGS=-fno-omit-frame-pointer for whole stacks) or dwarf
#
# Samples on "cycles" when this machine has a PMU and on the software
# "cpu-clock" event otherwise (probe: `perf stat -e cycles true`).
# KVF_PERF names the perf binary (default: perf).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
. "$here/perf-common.sh"
dir=perf-out
freq=999
graph=fp

usage() {
	sed -n '4,18p' "$0" | sed 's/^# \{0,1\}//'
	exit "${1:-2}"
}

while [ $# -gt 0 ]; do
	case $1 in
	-o) dir=$2; shift 2 ;;
	-F) freq=$2; shift 2 ;;
	-g) graph=$2; shift 2 ;;
	-h|--help) usage 0 ;;
	--) shift; break ;;
	*) break ;;
	esac
done
[ $# -gt 0 ] || usage

kvf_perf_require perf-record.sh

if [ "$(kvf_perf_tier)" = hardware ]; then
	event=cycles
else
	event=cpu-clock
	echo "perf-record.sh: no hardware PMU here: sampling cpu-clock" >&2
fi

mkdir -p "$dir"
"$PERF" record -e "$event" -F "$freq" --call-graph "$graph" \
	-o "$dir/perf.data" -- "$@"
"$PERF" script -i "$dir/perf.data" 2>/dev/null |
	python3 "$here/flamegraph.py" --fold >"$dir/stacks.folded"
python3 "$here/flamegraph.py" --title "$* ($event)" \
	<"$dir/stacks.folded" >"$dir/flame.svg"
echo "perf-record.sh: $dir/flame.svg ($(wc -l <"$dir/stacks.folded") distinct stacks)" >&2
