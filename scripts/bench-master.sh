#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# scripts/bench-master.sh - kvforge-master under kvforge-bench --master, on
# this machine over loopback, the figures docs/benchmarks.md quotes:
#   1. peak: batch-128 put, get, exist, remove with 2 connections x 8 in
#      flight over OBJECTS objects (memory-only master);
#   2. latency at half the peak get rate (open loop, --rate);
#   3. the master's RSS per object after the fill, against the embedded
#      engine's bytes_per_object (kvforge-bench hicache) in the same run.
# Results go to docs/results/<date>-<commit>/ (or $1). Runs the build in
# build/ (./scripts/run-tests.sh or run-master.sh make it).
#
# Against an upstream mooncake_master: start it, then run
#   kvforge-bench --master HOST:PORT --objects N --seconds 3 --connections 2 --depth 8
# against each master in turns (the generator speaks the same protocol).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
objects=${OBJECTS:-1000000}
out=${1:-$top/docs/results/$(date -u +%Y-%m-%d-%H%M)-$(git -C "$top" rev-parse --short HEAD)}
master=$top/build/kvforge-master
bench=$top/build/tools/kvforge-bench
mkdir -p "$out"
log=$(mktemp)
trap 'kill $pid 2>/dev/null || true; rm -f "$log"' EXIT

start_master() {
	"$master" --rpc_port 0 --enable_metric_reporting=false "$@" >"$log" 2>&1 &
	pid=$!
	addr=
	for _ in $(seq 1 100); do
		addr=$(sed -n 's/.*RPC listening on \([^ ]*\).*/\1/p' "$log")
		[ -n "$addr" ] && return 0
		sleep 0.1
	done
	cat "$log" >&2
	return 1
}

stop_master() {
	kill -TERM "$pid"
	wait "$pid" || true
}

rss_kb() { awk '/VmRSS/ { print $2 }' "/proc/$1/status"; }

# 1. Peak.
start_master
"$bench" --master "$addr" --objects "$objects" --seconds 3 --connections 2 \
	--depth 8 --json >"$out/master-peak.json"
stop_master
peak=$(python3 -c 'import json,sys; print(int(json.load(open(sys.argv[1]))["results"]["get"]["keys_per_sec"]))' "$out/master-peak.json")

# 2. Half the peak get rate, open loop.
start_master
"$bench" --master "$addr" --objects "$objects" --seconds 3 --connections 2 \
	--depth 8 --rate $((peak / 2)) --json >"$out/master-half-rate.json"
stop_master

# 3. RSS per object: a master sized for nothing is the process baseline; a
# master presized for the run's objects, as the embedded benchmark's
# engine is, is sampled while the generator fills and reads it.
start_master --expected_objects=1
base=$(rss_kb "$pid")
stop_master
start_master --expected_objects="$objects"
"$bench" --master "$addr" --objects "$objects" --seconds 4 --json \
	>"$out/master-rss-run.json" &
gen=$!
# The highest RSS while it runs: after the fill (removes return records
# to the engine's free lists, not to the kernel).
filled=0
while kill -0 "$gen" 2>/dev/null; do
	cur=$(rss_kb "$pid")
	[ "$cur" -gt "$filled" ] && filled=$cur
	sleep 0.2
done
wait "$gen" || true
stop_master
"$bench" --objects "$objects" --json >"$out/embedded-hicache.json"

python3 - "$out" "$base" "$filled" "$objects" <<'EOF'
import json, sys
out, base, filled, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
peak = json.load(open(out + "/master-peak.json"))["results"]
half = json.load(open(out + "/master-half-rate.json"))["results"]
emb = json.load(open(out + "/embedded-hicache.json"))
per_obj = (filled - base) * 1024 / n
lines = [
    "objects %d" % n,
    "master get  keys/s %.0f" % peak["get"]["keys_per_sec"],
    "master exist keys/s %.0f" % peak["exist"]["keys_per_sec"],
    "master put (start+end) keys/s %.0f" % peak["put"]["keys_per_sec"],
    "master remove keys/s %.0f" % peak["remove"]["keys_per_sec"],
    "half rate get p50/p99 us %.1f / %.1f" % (
        half["batch_get_replica_list"]["p50_us"],
        half["batch_get_replica_list"]["p99_us"]),
    "master rss bytes/object %.1f" % per_obj,
    "embedded bytes_per_object %.1f" % emb["bytes_per_object"],
    "master / embedded memory %.3f" % (per_obj / emb["bytes_per_object"]),
]
open(out + "/summary.txt", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
EOF
