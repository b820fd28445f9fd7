#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The measurements behind docs/benchmarks.md: sequential, on an otherwise
# idle machine. Writes into OUTDIR, by default a new folder of
# docs/results named after the date and the measured commit
# (YYYY-MM-DD-HHMM-<commit>), as the other folders there are.
# Usage, from the repository root, after
# `mkdir -p build && cd build && ../configure --enable-werror && make -j2`:
#   docs/results/run.sh [OUTDIR]
set -u
B=$PWD/build/tools/kvforge-bench
OUT=${1:-$PWD/docs/results/$(date -u +%Y-%m-%d-%H%M)-$(git rev-parse --short HEAD)}
mkdir -p "$OUT" && cd "$OUT" || exit 1
rm -rf kd dur rec
for i in 1 2 3; do
  $B --objects 1000000 --json >> core.jsonl
  $B --objects 1000000 --data-dir "$OUT/kd" --json >> core_bounded.jsonl
done
for i in 1 2 3; do $B --objects 10000000 --json >> b10m.jsonl; done
for t in 1 2 1 2 1 2; do $B --objects 1000000 --threads $t --json >> threads.jsonl; done
$B --objects 1000000 --profile > profile.txt 2>&1
$B compare --rounds 2 --a "--index lfht" --b "--index bucket" -- --objects 1000000 > compare_index.txt 2>&1
$B --workload placement --rounds 3 --seed 42 --json > placement.json
$B --workload durability --objects 1000000 --rounds 5 --data-dir "$OUT/dur" --json > durability.json
$B --workload recovery --objects 1000000 --rounds 3 --data-dir "$OUT/rec" --json > recovery.json
$B --workload evict --rounds 5 --json > evict.json
$B --workload cleanup --rounds 5 --json > cleanup1m.json
$B --workload cleanup --rounds 3 --objects 8000000 --json > cleanup8m.json
echo done > done
