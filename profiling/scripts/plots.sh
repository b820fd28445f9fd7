#!/bin/sh
# SPDX-License-Identifier: MIT
#
# plots.sh - throughput, latency CDF and stage breakdown PNGs in one go.
#
#   profiling/scripts/plots.sh BENCH.json OUTDIR [--lat FILE]
#       plot existing results (see plots.py for the JSON it reads)
#   profiling/scripts/plots.sh --sweep OUTDIR [-b "16 32 64 128 256 512 1024"]
#       -- BENCH ARGS...
#       run kvforge-bench once per batch size (with --json --profile, and
#       the latency dump on the batch-128 run), collect OUTDIR/bench.json
#       and OUTDIR/bench.json.lat, then plot them
#
# KVF_BENCH names the bench binary (default: kvforge-bench in PATH, else
# ./tools/kvforge-bench). Needs gnuplot and python3.
set -eu

here=$(cd "$(dirname "$0")" && pwd)

if [ "${1:-}" != --sweep ]; then
	[ $# -ge 2 ] || { sed -n '4,16p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
	exec python3 "$here/plots.py" "$@"
fi

shift
[ $# -ge 1 ] || { echo "plots.sh: --sweep needs OUTDIR" >&2; exit 2; }
out=$1
shift
batches="16 32 64 128 256 512 1024"
if [ "${1:-}" = -b ]; then
	batches=$2
	shift 2
fi
[ "${1:-}" = -- ] && shift

bench=${KVF_BENCH:-}
if [ -z "$bench" ]; then
	bench=$(command -v kvforge-bench || echo ./tools/kvforge-bench)
fi
mkdir -p "$out"
: >"$out/bench.json"
rm -f "$out/bench.json.lat"
for b in $batches; do
	echo "plots.sh: batch $b" >&2
	if [ "$b" = 128 ]; then
		KVF_BENCH_LATENCY_DUMP=$out/bench.json.lat \
			"$bench" "$@" --batch "$b" --json --profile >>"$out/bench.json"
	else
		"$bench" "$@" --batch "$b" --json --profile >>"$out/bench.json"
	fi
done
exec python3 "$here/plots.py" "$out/bench.json" "$out"
