#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# scripts/bench-ha.sh - put throughput of an HA leader with synchronous
# standbys against a plain master, same run, on loopback:
#
#   A: kvforge-master --data-dir (bounded durability), no HA;
#   B: an etcd, a leader and STANDBYS standbys (--enable_ha
#      --ha_sync_standbys=SYNC), driven through etcd://.
#
# Both get --rpc_thread_num THREADS. kvforge-bench --master runs against
# A and B in turns, A B then B A, ROUNDS times (--rounds 1 each: put,
# get, exist, remove of OBJECTS keys); the script prints the put rate and
# BatchPutEnd p50 of every run, the ratio B/A of each pair, their median
# with a bootstrap 95% interval of the median, and the leader's
# replication lag (kvforge_ha_replication_lag_records and _bytes on
# /metrics) sampled every 100 ms during the B runs: p50, p99 and maximum
# (KVF_BENCH_HA_LAG=0: not sampled; each /metrics read costs the leader
# CPU, about 0.25 us per key put in these runs).
#
# CPU: each run also records the CPU time (utime + stime of every thread
# from /proc, before and after) of the processes of its side (A: the
# plain master; B: the leader, the standbys and etcd) and of
# kvforge-bench (the shell's children times); the script prints, per
# side, the CPU microseconds per key of the whole run (mount, the phases
# run, clean-up), masters and bench apart and then per process, the
# median over the runs. $TMP/{a,b}-R.threads0/1 keep the per-thread
# figures (KVF_KEEP=1 keeps $TMP).
#
# With --baseline DIR, A is instead the same HA set-up (its own cluster
# id, same etcd) run from DIR's kvforge-master and tools/kvforge-bench
# (an older build, or copies of its binaries): the ratio B/A is then a
# paired before/after of the HA rate itself.
#
#   scripts/bench-ha.sh [--rounds R] [--objects N] [--threads T]
#                       [--standbys S] [--sync N] [--baseline DIR]
#                       [-- BENCH_ARGS]
#
# Defaults: 4 rounds, 200000 objects, 4 RPC threads, 1 standby, sync 1;
# the bench arguments default to --batch 128 --connections 2 --depth 4.
# Runs the binaries in build/ (or KVF_PREBUILT=DIR); needs etcd
# (Debian: etcd-server) and python3.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/scripts/setup.sh"
rounds=4
objects=200000
threads=4
standbys=1
sync=1
baseline=
while [ $# -gt 0 ]; do
	case $1 in
	--rounds) rounds=$2; shift 2 ;;
	--objects) objects=$2; shift 2 ;;
	--threads) threads=$2; shift 2 ;;
	--standbys) standbys=$2; shift 2 ;;
	--sync) sync=$2; shift 2 ;;
	--baseline) baseline=$(cd "$2" && pwd); shift 2 ;;
	--) shift; break ;;
	*) echo "usage: $0 [--rounds R] [--objects N] [--threads T] [--standbys S] [--sync N] [--baseline DIR] [-- BENCH_ARGS]" >&2
	   exit 2 ;;
	esac
done
extra=("$@")
[ ${#extra[@]} -gt 0 ] || extra=(--batch 128 --connections 2 --depth 4)
build=${KVF_PREBUILT:-$top/build}
master=$build/kvforge-master
bench=$build/tools/kvforge-bench
etcd_bin=$(command -v etcd || true)
[ -n "$etcd_bin" ] || { echo "bench-ha.sh: no etcd binary (Debian: etcd-server)" >&2; exit 1; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/kvf-bench-ha.XXXXXX")
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	[ -z "${KVF_KEEP:-}" ] || { echo "kept $tmp" >&3; return; }
	rm -rf "$tmp"
} 3>&2 2>/dev/null
trap cleanup EXIT

free_port() { kvf_free_port; }

# wait_line FILE SED_EXPR: print the first match, within 30 s.
wait_line() {
	local v
	for _ in $(seq 1 300); do
		v=$(sed -n "$2" "$1" 2>/dev/null | head -1) # may not exist yet
		[ -n "$v" ] && { echo "$v"; return 0; }
		sleep 0.1
	done
	echo "bench-ha.sh: timed out waiting in $1:" >&2
	tail -20 "$1" >&2
	return 1
}

kvf_start_etcd "$tmp" "$etcd_bin"
pids+=("$etcd_pid")
a_pids=() b_pids=("$etcd_pid")
echo "$etcd_pid etcd" >"$tmp/roles"

common=(--rpc_thread_num "$threads" --metrics_port 0 --client_ttl 600)
if [ -z "$baseline" ]; then
	"$master" --rpc_port 0 --data-dir "$tmp/plain" "${common[@]}" \
		>"$tmp/plain.log" 2>&1 &
	pids+=($!)
	a_pids=($!)
	echo "$! plain" >>"$tmp/roles"
	plain=$(wait_line "$tmp/plain.log" 's/.*RPC listening on \([^ ]*\).*/\1/p')
fi

for _ in $(seq 1 30); do # etcd up?
	curl -s -o /dev/null -X POST -d '{}' "http://127.0.0.1:$ecp/v3/kv/range" && break
	sleep 0.2
done
# ha_up PREFIX MASTER CLUSTER_ID: a leader and the standbys, in sync.
ha_up() {
	local i n set_line members port
	local ha=(--enable_ha --etcd_endpoints "127.0.0.1:$ecp" --cluster_id "$3"
		  --ha_sync_standbys "$sync" "${common[@]}")
	for i in $(seq 0 "$standbys"); do
		local name=$1standby$i
		[ "$i" = 0 ] && name=$1leader
		port=$(free_port)
		"$2" --rpc_port "$port" --data-dir "$tmp/$name" "${ha[@]}" \
			>"$tmp/$name.log" 2>&1 &
		pids+=($!)
		if [ "$1" = a- ]; then a_pids+=($!); else b_pids+=($!); fi
		echo "$! $name" >>"$tmp/roles"
		if [ "$i" = 0 ]; then
			wait_line "$tmp/$name.log" 's/.*\(RPC listening on\).*/\1/p' >/dev/null
		else
			wait_line "$tmp/$name.log" 's/.*\(following the leader\).*/\1/p' >/dev/null
		fi
	done
	[ "$sync" -gt 0 ] || return 0
	for _ in $(seq 1 300); do
		n=$(grep -c "sync set now \[" "$tmp/$1leader.log" || true)
		set_line=$(grep "sync set now \[" "$tmp/$1leader.log" | tail -1)
		members=$(echo "$set_line" | tr -cd ',' | wc -c)
		[ "$n" -gt 0 ] && [ $((members + 1)) -ge "$standbys" ] && break
		sleep 0.1
	done
}
if [ -n "$baseline" ]; then
	a_pids=("$etcd_pid")
	ha_up a- "$baseline/kvforge-master" kvf_bench_ha_a
fi
ha_up "" "$master" kvf_bench_ha
mport=$(wait_line "$tmp/leader.log" 's/.*metrics listening on [^ ]*:\([0-9]*\).*/\1/p')

# Sample the leader's lag while the runs go on (only B moves it).
(
	while :; do
		[ ! -e "$tmp/sampling" ] ||
			curl -s "http://127.0.0.1:$mport/metrics" |
			awk '/^kvforge_ha_replication_lag_(records|bytes) / { printf "%s ", $2 } END { print "" }'
		sleep 0.1
	done
) >>"$tmp/lag" 2>/dev/null &
pids+=($!)

a_is="plain master ${plain:-}"
[ -z "$baseline" ] || a_is="the same HA set-up from $baseline"
echo "A: $a_is; B: HA leader via etcd://127.0.0.1:$ecp ($standbys standby(s), --ha_sync_standbys $sync, $threads RPC threads)"
# cpu_ticks PID...: their utime + stime, in clock ticks.
cpu_ticks() {
	local t=0 p f
	for p in "$@"; do
		f=$(sed 's/.*) //' "/proc/$p/stat") # fields from 3 on
		set -- $f
		t=$((t + ${12} + ${13}))
	done
	echo "$t"
}
# thread_ticks PID...: "pid/tid name ticks" of each of their threads.
thread_ticks() {
	local p t f
	for p in "$@"; do
		for t in /proc/$p/task/*; do
			f=$(sed 's/.*) //' "$t/stat" 2>/dev/null) || continue
			set -- $f
			echo "$p/${t##*/} $(tr ' ' _ <"$t/comm") $((${12} + ${13}))"
		done
	done
}
run() { # $1: a|b, $2: round
	local m=${plain:-} b=$bench c0 c1 side_pids
	export MC_STORE_CLUSTER_ID=kvf_bench_ha # masters and client
	[ "$1" = b ] && m=etcd://127.0.0.1:$ecp
	if [ "$1" = a ] && [ -n "$baseline" ]; then
		m=etcd://127.0.0.1:$ecp b=$baseline/tools/kvforge-bench
		export MC_STORE_CLUSTER_ID=kvf_bench_ha_a
	fi
	[ "$1" = b ] && echo "# start" >>"$tmp/lag"
	[ "$1" != b ] || [ "${KVF_BENCH_HA_LAG:-1}" = 0 ] || : >"$tmp/sampling"
	side_pids=("${a_pids[@]}")
	[ "$1" = b ] && side_pids=("${b_pids[@]}")
	thread_ticks "${side_pids[@]}" >"$tmp/$1-$2.threads0"
	c0=$(cpu_ticks "${side_pids[@]}")
	times >"$tmp/$1-$2.time" # no fork: the shell's and its children's
	"$b" --master "$m" --objects "$objects" "${extra[@]}" --rounds 1 \
		--json >"$tmp/$1-$2.json" 2>"$tmp/$1-$2.err" || {
		cat "$tmp/$1-$2.err" >&2
		return 1
	}
	times >>"$tmp/$1-$2.time"
	c1=$(cpu_ticks "${side_pids[@]}")
	thread_ticks "${side_pids[@]}" >"$tmp/$1-$2.threads1"
	echo "$((c1 - c0)) $(getconf CLK_TCK)" >"$tmp/$1-$2.cpu"
	rm -f "$tmp/sampling"
	[ "$1" = b ] && echo "# end" >>"$tmp/lag"
	return 0
}
for r in $(seq 1 "$rounds"); do # A B, then B A
	if [ $((r % 2)) = 1 ]; then run a "$r"; run b "$r"; else run b "$r"; run a "$r"; fi
	echo "round $r/$rounds done" >&2
done

a_name=plain
[ -z "$baseline" ] || a_name=A
python3 - "$tmp" "$rounds" "$a_name" "$objects" <<'EOF'
import json, random, statistics, sys
tmp, rounds, an, objects = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
bn = "HA" if an == "plain" else "B"
def load(side, r):
    res = json.load(open("%s/%s-%d.json" % (tmp, side, r)))["results"]
    return (res["put"]["keys_per_sec"], res["batch_put_end"]["p50_us"],
            res["put"]["failed_items"])
a = [load("a", r) for r in range(1, rounds + 1)]
b = [load("b", r) for r in range(1, rounds + 1)]
ratios = [y[0] / x[0] for x, y in zip(a, b)]
med = statistics.median(ratios)
rng = random.Random(1)
boot = sorted(statistics.median(rng.choices(ratios, k=len(ratios)))
              for _ in range(2000))
print("put keys/s         %-6s %s" % (an + ":", " ".join("%.0f" % x[0] for x in a)))
print("put keys/s         %-6s %s" % (bn + ":", " ".join("%.0f" % y[0] for y in b)))
print("BatchPutEnd p50 us %-6s %s" % (an + ":", " ".join("%.0f" % x[1] for x in a)))
print("BatchPutEnd p50 us %-6s %s" % (bn + ":", " ".join("%.0f" % y[1] for y in b)))
print("failed puts: %s %d, %s %d" % (an, sum(x[2] for x in a), bn, sum(y[2] for y in b)))
print("ratio %s/%s per pair: %s" % (bn, an, " ".join("%.3f" % r for r in ratios)))
print("ratio median %.3f, bootstrap 95%% CI of the median [%.3f, %.3f] (%d pairs)"
      % (med, boot[50], boot[1949], len(ratios)))
def cpu(side, r):
    ticks, hz = map(int, open("%s/%s-%d.cpu" % (tmp, side, r)).read().split())
    def secs(t):  # bash's times: 1m2.345s
        m, s = t.rstrip("s").split("m")
        return int(m) * 60 + float(s)
    lines = open("%s/%s-%d.time" % (tmp, side, r)).read().split("\n")
    c0, c1 = lines[1].split(), lines[3].split()  # children's user, sys
    bench = secs(c1[0]) + secs(c1[1]) - secs(c0[0]) - secs(c0[1])
    return ticks / hz * 1e6 / objects, bench * 1e6 / objects
for side, name in (("a", an), ("b", bn)):
    c = [cpu(side, r) for r in range(1, rounds + 1)]
    print("CPU us per key     %-6s masters%s %.2f, bench %.2f (medians; runs: %s)"
          % (name + ":", "" if side == "a" and an == "plain" else " + etcd",
             statistics.median(x[0] for x in c),
             statistics.median(x[1] for x in c),
             " ".join("%.2f+%.2f" % x for x in c)))
roles = dict(l.split() for l in open(tmp + "/roles"))
for side, name in (("a", an), ("b", bn)):
    per = {}
    for r in range(1, rounds + 1):
        t0 = {}
        for l in open("%s/%s-%d.threads0" % (tmp, side, r)):
            k, _, v = l.split()
            t0[k] = int(v)
        for l in open("%s/%s-%d.threads1" % (tmp, side, r)):
            k, _, v = l.split()
            role = roles.get(k.split("/")[0], "?")
            per.setdefault(role, [0] * rounds)[r - 1] += int(v) - t0.get(k, 0)
    hz = int(open("%s/%s-1.cpu" % (tmp, side)).read().split()[1])
    print("CPU us per key     %-6s %s" % (name + ":", ", ".join(
        "%s %.2f" % (role, statistics.median(v) / hz * 1e6 / objects)
        for role, v in sorted(per.items()))))
lag, inside = [], False
for line in open(tmp + "/lag"):
    if line.startswith("# "):
        inside = line.strip() == "# start"
        continue
    f = line.split()
    if inside and len(f) == 2:
        lag.append((int(f[0]), int(f[1])))
if lag:
    rec = sorted(x[0] for x in lag)
    byt = sorted(x[1] for x in lag)
    print("replication lag during the HA runs (leader /metrics every 100 ms,"
          " %d samples): records p50 %d p99 %d max %d; bytes p50 %d max %d"
          % (len(lag), rec[len(rec) // 2],
             rec[min(len(rec) - 1, len(rec) * 99 // 100)], rec[-1],
             byt[len(byt) // 2], byt[-1]))
EOF
