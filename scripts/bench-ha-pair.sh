#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# scripts/bench-ha-pair.sh - the HA put rate of two builds side by side:
# one etcd on loopback, and for each build a leader and one standby
# (--enable_ha --ha_sync_standbys 1 --rpc_thread_num 4, each pair its own
# cluster id), both up for the whole run. kvforge-bench --master etcd://
# runs against A and B in turns, A B then B A, ROUNDS times (put, get,
# exist, remove of OBJECTS keys); the script prints the put rate and
# BatchPutEnd p50 of every run, the ratio B/A of each pair and their
# median with a bootstrap 95% interval of the median. Pairing the runs
# keeps a shared machine's drifting load out of the comparison.
#
#   scripts/bench-ha-pair.sh [--rounds R] [--objects N] DIR_A DIR_B
#                            [-- BENCH_ARGS]
#
# DIR_A and DIR_B hold kvforge-master and tools/kvforge-bench (a build
# directory, or copies of an older build's binaries). Defaults: 8 rounds,
# 200000 objects, --batch 128 --connections 2 --depth 4. Needs etcd
# (Debian: etcd-server) and python3.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/scripts/setup.sh"
rounds=8
objects=200000
while [ $# -gt 0 ]; do
	case $1 in
	--rounds) rounds=$2; shift 2 ;;
	--objects) objects=$2; shift 2 ;;
	--) shift; break ;;
	-*) echo "usage: $0 [--rounds R] [--objects N] DIR_A DIR_B [-- BENCH_ARGS]" >&2
	    exit 2 ;;
	*) [ -z "${dir_a:-}" ] && dir_a=$1 || dir_b=$1; shift ;;
	esac
done
[ -n "${dir_a:-}" ] && [ -n "${dir_b:-}" ] || {
	echo "usage: $0 [--rounds R] [--objects N] DIR_A DIR_B [-- BENCH_ARGS]" >&2
	exit 2
}
extra=("$@")
[ ${#extra[@]} -gt 0 ] || extra=(--batch 128 --connections 2 --depth 4)
etcd_bin=$(command -v etcd || true)
[ -n "$etcd_bin" ] || { echo "bench-ha-pair.sh: no etcd binary (Debian: etcd-server)" >&2; exit 1; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/kvf-bench-ha-pair.XXXXXX")
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$tmp"
} 2>/dev/null
trap cleanup EXIT

# wait_for FILE TEXT: within 60 s.
wait_for() {
	for _ in $(seq 1 600); do
		grep -q "$2" "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	echo "bench-ha-pair.sh: timed out waiting for '$2' in $1:" >&2
	tail -20 "$1" >&2
	return 1
}

kvf_start_etcd "$tmp" "$etcd_bin"
pids+=("$etcd_pid")
for _ in $(seq 1 30); do # etcd up?
	curl -s -o /dev/null -X POST -d '{}' "http://127.0.0.1:$ecp/v3/kv/range" && break
	sleep 0.2
done
common=(--enable_ha --etcd_endpoints "127.0.0.1:$ecp" --ha_sync_standbys 1
	--rpc_thread_num 4 --metrics_port 0 --client_ttl 600)
for side in a b; do
	bin=$dir_a
	[ "$side" = b ] && bin=$dir_b
	for role in leader standby; do
		"$bin/kvforge-master" --rpc_port "$(kvf_free_port)" \
			--data-dir "$tmp/$side-$role" --cluster_id "kvf_pair_$side" \
			"${common[@]}" >"$tmp/$side-$role.log" 2>&1 &
		pids+=($!)
		[ "$role" = leader ] && wait_for "$tmp/$side-leader.log" "RPC listening"
	done
	wait_for "$tmp/$side-leader.log" "sync set now \[."
done
echo "A: $dir_a, B: $dir_b; one leader + one sync standby each, 4 RPC threads"
run() { # $1: a|b, $2: round
	local bin=$dir_a
	[ "$1" = b ] && bin=$dir_b
	MC_STORE_CLUSTER_ID=kvf_pair_$1 "$bin/tools/kvforge-bench" \
		--master "etcd://127.0.0.1:$ecp" --objects "$objects" \
		"${extra[@]}" --rounds 1 --json >"$tmp/$1-$2.json" 2>"$tmp/$1-$2.err" || {
		cat "$tmp/$1-$2.err" >&2
		return 1
	}
}
for r in $(seq 1 "$rounds"); do
	if [ $((r % 2)) = 1 ]; then run a "$r"; run b "$r"; else run b "$r"; run a "$r"; fi
	echo "round $r/$rounds done" >&2
done

python3 - "$tmp" "$rounds" <<'PY'
import json, random, statistics, sys
tmp, rounds = sys.argv[1], int(sys.argv[2])
def load(side, r):
    res = json.load(open("%s/%s-%d.json" % (tmp, side, r)))["results"]
    return res["put"]["keys_per_sec"], res["batch_put_end"]["p50_us"]
a = [load("a", r) for r in range(1, rounds + 1)]
b = [load("b", r) for r in range(1, rounds + 1)]
ratios = [y[0] / x[0] for x, y in zip(a, b)]
rng = random.Random(1)
boot = sorted(statistics.median(rng.choices(ratios, k=len(ratios)))
              for _ in range(2000))
print("put keys/s         A: %s" % " ".join("%.0f" % x[0] for x in a))
print("put keys/s         B: %s" % " ".join("%.0f" % y[0] for y in b))
print("BatchPutEnd p50 us A: %s" % " ".join("%.0f" % x[1] for x in a))
print("BatchPutEnd p50 us B: %s" % " ".join("%.0f" % y[1] for y in b))
print("ratio B/A per pair: %s" % " ".join("%.3f" % r for r in ratios))
print("ratio median %.3f, bootstrap 95%% CI of the median [%.3f, %.3f] "
      "(%d pairs); median put keys/s A %.0f, B %.0f"
      % (statistics.median(ratios), boot[50], boot[1949], len(ratios),
         statistics.median(x[0] for x in a),
         statistics.median(y[0] for y in b)))
PY
