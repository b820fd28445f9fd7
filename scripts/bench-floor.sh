#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# scripts/bench-floor.sh - the embedded hot paths against the machine's
# memory floor, the figures docs/benchmarks.md quotes ("Against the memory
# floor"): kvforge-bench's hicache workload (batch 128, 68-byte keys in a
# request buffer, durability none unless named) at each object count in
# OBJECTS, 1 and 2 threads, plus a bounded-journal run at the first count,
# repeated RUNS times with the variants interleaved within each repetition
# (this machine's memory speed drifts between minutes). Every run measures
# its own floor (results.floor.ns_per_key) and quotes each operation as a
# ratio to it (results.<op>.vs_floor).
#
#   scripts/bench-floor.sh [OUT]     OBJECTS="1000000 10000000" RUNS=3
#   SUMMARY_ONLY=1 scripts/bench-floor.sh OUT   summarise the runs in OUT
#                  (OBJECTS names the counts to summarise; OUT may hold
#                  sets taken by separate runs)
#
# Writes one JSON per run and summary.md (medians: vs_floor per operation,
# 2-thread / 1-thread throughput, bounded / none put throughput and the
# bounded run's storage bytes per journaled record, bytes per object beyond
# the key) into OUT (default docs/results/<date>-<commit>-floor).
# Uses the build in build/ (./scripts/run-tests.sh or run-bench.sh make it).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
objects=${OBJECTS:-"1000000 10000000"}
runs=${RUNS:-3}
out=${1:-$top/docs/results/$(date -u +%Y-%m-%d-%H%M)-$(git -C "$top" rev-parse --short HEAD)-floor}
bench=$top/build/tools/kvforge-bench
data=$(mktemp -d "${TMPDIR:-/tmp}/kvf-floor.XXXXXX")
trap 'rm -rf "$data"' EXIT
mkdir -p "$out"

first=${objects%% *}
[ -n "${SUMMARY_ONLY:-}" ] && runs=0
for r in $(seq 1 "$runs"); do
	for n in $objects; do
		for t in 1 2; do
			echo "run $r: $n objects, $t thread(s), durability none" >&2
			"$bench" --objects "$n" --threads "$t" --durability none \
				--json >"$out/none-$n-${t}t-run$r.json"
		done
	done
	echo "run $r: $first objects, 1 thread, durability bounded" >&2
	rm -rf "$data/j"
	"$bench" --objects "$first" --threads 1 --durability bounded \
		--data-dir "$data/j" --json >"$out/bounded-$first-1t-run$r.json"
done

python3 - "$out" "$first" $objects <<'PY' | tee "$out/summary.md"
import glob, json, os, statistics, sys

out, first, counts = sys.argv[1], sys.argv[2], sys.argv[3:]
ops = ["put", "get", "exist", "remove", "refill", "churn", "churn_remove"]
KEY = 68

def runs(kind, n, t):
    files = sorted(glob.glob(os.path.join(out, f"{kind}-{n}-{t}t-run*.json")))
    return [json.load(open(f)) for f in files]

def med(xs):
    return statistics.median(xs) if xs else float("nan")

print("| objects | op | vs_floor (median) | runs | 2t/1t keys/s |")
print("|---|---|---|---|---|")
for n in counts:
    one, two = runs("none", n, 1), runs("none", n, 2)
    for op in ops:
        ratios = [r["results"][op]["vs_floor"] for r in one if op in r["results"]]
        scale = [b["results"][op]["keys_per_sec"] / a["results"][op]["keys_per_sec"]
                 for a, b in zip(one, two) if op in a["results"]]
        if not ratios:
            continue
        print(f"| {n} | {op} | {med(ratios):.2f}x | "
              f"{', '.join(f'{x:.2f}' for x in ratios)} | "
              f"{f'{med(scale):.2f}' if scale else '-'} |")
print()
for n in counts:
    one = runs("none", n, 1)
    if not one:
        continue
    floor = [r["results"]["floor"]["ns_per_key"] for r in one]
    extra = [r["bytes_per_object"] - KEY for r in one]
    print(f"- {n} objects: floor {min(floor):.1f}-{max(floor):.1f} ns per key; "
          f"key + {med(extra):.1f} bytes per object")
    scaling = [r["results"]["floor"]["thread_scaling"] for r in runs("none", n, 2)
               if "thread_scaling" in r["results"].get("floor", {})]
    if scaling:
        print(f"- {n} objects: the floor probe on 2 threads at once reaches "
              f"{med(scaling):.2f}x one thread's keys per second "
              f"({', '.join(f'{x:.2f}' for x in scaling)})")
# Every count with bounded runs: a folder may hold sets taken apart.
for n in counts:
    bounded, none = runs("bounded", n, 1), runs("none", n, 1)
    if not bounded:
        continue
    ratio = [b["results"]["put"]["keys_per_sec"] / a["results"]["put"]["keys_per_sec"]
             for a, b in zip(none, bounded)]
    print(f"- bounded journal put / none, {n} objects: {med(ratio):.2f} "
          f"({', '.join(f'{x:.2f}' for x in ratio)})")
    written = [b["write_bytes_per_record"] for b in bounded
               if "write_bytes_per_record" in b]
    if written:
        print(f"- bounded journal storage traffic, {n} objects: "
              f"{med(written):.0f} bytes dirtied per journaled record "
              f"({', '.join(f'{x:.0f}' for x in written)})")
PY
