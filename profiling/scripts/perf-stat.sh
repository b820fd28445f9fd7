#!/bin/sh
# SPDX-License-Identifier: MIT
#
# perf-stat.sh - run a command (typically a kvforge-bench workload) under
# `perf stat`, with hardware events where this machine has a PMU and
# software events otherwise.
#
#   profiling/scripts/perf-stat.sh [-o FILE] [-r N] [-e EVENTS] -- CMD...
#
#   -o FILE    write perf's report to FILE (default: stderr)
#   -r N       repeat the command N times (perf stat -r)
#   -e EVENTS  extra events, comma separated, added to the chosen set
#
# The probe runs `perf stat -x, -e cycles true`: without a PMU perf prints
# "<not supported>" for cycles (exit status 0), so the output is checked,
# not the status. KVF_PERF (default: perf) names the perf binary.
set -eu

. "$(cd "$(dirname "$0")" && pwd)/perf-common.sh"
out=
repeat=
extra=

usage() {
	sed -n '4,16p' "$0" | sed 's/^# \{0,1\}//'
	exit "${1:-2}"
}

while [ $# -gt 0 ]; do
	case $1 in
	-o) out=$2; shift 2 ;;
	-r) repeat=$2; shift 2 ;;
	-e) extra=$2; shift 2 ;;
	-h|--help) usage 0 ;;
	--) shift; break ;;
	*) break ;;
	esac
done
[ $# -gt 0 ] || usage

kvf_perf_require perf-stat.sh

tier=$(kvf_perf_tier)
if [ "$tier" = hardware ]; then
	events=task-clock,cycles,instructions,cache-misses,LLC-load-misses,dTLB-load-misses,page-faults,context-switches
else
	events=task-clock,page-faults,minor-faults,major-faults,context-switches,cpu-migrations
	echo "perf-stat.sh: no hardware PMU here (cycles not supported): software events only" >&2
fi
[ -n "$extra" ] && events=$events,$extra

set -- -e "$events" ${repeat:+-r "$repeat"} ${out:+-o "$out"} -- "$@"
exec "$PERF" stat "$@"
