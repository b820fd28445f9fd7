#!/bin/bash
# Final measurements, sequential, on a quiet machine.
B=/work/main/build/tools/kvforge-bench
cd /tmp/final
rm -rf /tmp/final/kd
for i in 1 2 3; do
  $B --objects 1000000 --json >> core.jsonl
  $B --objects 1000000 --data-dir /tmp/final/kd --json >> core.jsonl
done
for i in 1 2; do $B --objects 10000000 --json >> b10m.jsonl; done
for t in 1 2 1 2; do $B --objects 1000000 --threads $t --json >> threads.jsonl; done
$B --objects 1000000 --profile > profile.txt 2>&1
$B --workload placement --rounds 3 --seed 42 --json > placement.json
$B --workload durability --objects 1000000 --rounds 3 --data-dir /tmp/final/dur --json > durability.json
$B --workload recovery --objects 1000000 --rounds 3 --data-dir /tmp/final/rec --json > recovery.json
$B --workload cleanup --rounds 3 --objects 8000000 --json > cleanup8m.json
$B --workload cleanup --rounds 5 --json > cleanup1m.json
$B --workload evict --rounds 5 --json > evict.json
echo done > done
