#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# kvforge-master's high availability on one machine: set up, build, start
# a local etcd (loopback, a temporary data directory) and three
# `kvforge-master --enable_ha` on loopback (each with its own --data-dir
# under ./kvforge-ha/), drive them with `kvforge-bench --master
# etcd://127.0.0.1:PORT` writing objects, SIGKILL the leader and measure
# the failover time: from the SIGKILL to the first batch the new leader
# answers. Then serve until Ctrl-C (the killed master is restarted as a
# standby after each failover).
#
#   scripts/run-ha.sh [--failovers N] [--ttl S] [--signal KILL|TERM]
#                     [--no-serve] [-- MASTER_FLAGS]
#
#   --failovers N  kill the leader N times (default 1) and print the
#                  failover time of each, then min/p50/p99/max
#   --ttl S        --ha_lease_ttl of the masters (default 5)
#   --signal TERM  stop the leader with SIGTERM instead (a graceful
#                  hand-over: it closes its port and revokes its lease)
#   --no-serve     stop everything after the measurement
#
# Flags after -- go to every kvforge-master. KVF_PREBUILT=DIR uses the
# binaries of an existing build directory instead of setting up and
# building build/. Only loopback addresses are used.
#
# The masters replicate (docs/ha.md): before each SIGKILL a second client
# (the reference Python client, tests/master/mc_wire_pyclient.py) puts
# 200 objects through the leader and keeps those acknowledged; after the
# failover it checks every one of them on the new leader and the script
# prints how many were checked and lost (0). The killed master comes back
# as a standby with an emptied --data-dir (its journal may end with
# records the new leader's history does not have). The masters run with
# --client_ttl 3600: the checking client does not ping, and a client the
# master counts dead loses its segments and their objects.
set -euo pipefail
here=$(pwd)
failovers=1
ttl=5
serve=1
sig=KILL
while [ $# -gt 0 ]; do
	case $1 in
	--failovers) failovers=$2; shift 2 ;;
	--ttl) ttl=$2; shift 2 ;;
	--signal) sig=$2; shift 2 ;;
	--no-serve) serve=0; shift ;;
	--) shift; break ;;
	*) echo "usage: $0 [--failovers N] [--ttl S] [--signal KILL|TERM] [--no-serve] [-- MASTER_FLAGS]" >&2
	   exit 2 ;;
	esac
done
case $sig in
KILL|TERM) ;;
*) echo "run-ha.sh: --signal takes KILL or TERM" >&2; exit 2 ;;
esac
case $failovers$ttl in
*[!0-9]*) echo "run-ha.sh: --failovers and --ttl take whole numbers" >&2; exit 2 ;;
esac

. "$(dirname "$0")/setup.sh"
kvf_ha_binaries
cd "$here"

work=$here/kvforge-ha
mkdir -p "$work"
rm -rf "$work"/m[0-9] "$work"/m[0-9].log # an earlier run's (its etcd's views)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kvforge-ha.XXXXXX")
cluster=kvforge_ha_demo
key=mooncake-store/$cluster/master_view
export MC_STORE_CLUSTER_ID=$cluster

free_port() { kvf_free_port; }

pids=()
etcd_pid=
bench_pid=
sleep_pid=
cleanup() {
	set +e # every step runs, whatever failed before
	trap - EXIT INT TERM
	if [ -n "$sleep_pid" ]; then kill "$sleep_pid"; fi
	if [ -n "$bench_pid" ]; then kill "$bench_pid"; fi
	for p in "${pids[@]}"; do kill -TERM "$p"; done
	for p in "${pids[@]}"; do wait "$p"; done
	if [ -n "$etcd_pid" ]; then
		kill "$etcd_pid"
		wait "$etcd_pid"
	fi
	rm -rf "$tmp"
} 2>/dev/null
trap cleanup EXIT
trap 'exit 130' INT TERM

kvf_start_etcd "$tmp" "$etcd_bin"

# The election key: "host:port create_revision", or nothing.
leader() {
	curl -s -m 2 -X POST "http://127.0.0.1:$ecp/v3/kv/range" \
		-d "{\"key\":\"$(printf %s "$key" | base64 -w0)\"}" 2>/dev/null |
		python3 -c 'import base64, json, sys
kvs = json.load(sys.stdin).get("kvs") or []
if kvs:
    print(base64.b64decode(kvs[0]["value"]).decode(), kvs[0]["create_revision"])' 2>/dev/null || true
}
for _ in $(seq 1 100); do
	curl -s -m 1 -X POST "http://127.0.0.1:$ecp/v3/kv/range" -d '{"key":"eA=="}' \
		>/dev/null 2>&1 && break
	sleep 0.1
done

extra=("$@")
ports=()
start_master() { # index: start (or restart) master $1 on its port
	local i=$1
	shift
	"$bin" --enable_ha --etcd_endpoints "127.0.0.1:$ecp" \
		--cluster_id "$cluster" --ha_lease_ttl "$ttl" \
		--rpc_address 127.0.0.1 --rpc_port "${ports[$i]}" \
		--metrics_port 0 --data-dir "$work/m$i" --client_ttl 3600 "$@" \
		>>"$work/m$i.log" 2>&1 &
	pids[$i]=$!
}
for i in 0 1 2; do
	ports[$i]=$(free_port)
	start_master $i "${extra[@]+"${extra[@]}"}"
done
for _ in $(seq 1 $((ttl * 20 + 100))); do
	[ -n "$(leader)" ] && break
	kill -0 "${pids[0]}" 2>/dev/null || { cat "$work/m0.log" >&2; exit 1; }
	sleep 0.1
done
read -r addr view < <(leader) || { kvf_log "no leader elected"; exit 1; }
kvf_log "etcd on 127.0.0.1:$ecp; masters on 127.0.0.1:${ports[0]}, :${ports[1]}, :${ports[2]} (TTL $ttl s); leader $addr (view $view)"

# One paced writer: 1000 keys/s in batches of 5 (a batch every 5 ms, the
# resolution of the measurement), keys enough for the whole run.
objects=$(( (120 + failovers * (3 * ttl + 10)) * 1000 ))
"$bench" --master "etcd://127.0.0.1:$ecp" --objects "$objects" \
	--batch 5 --rate 1000 --connections 1 --depth 4 --rounds 1 \
	>/dev/null 2>"$work/bench.log" &
bench_pid=$!

wait_line() { # file pattern seconds
	local n=$(( $3 * 10 ))
	while [ $n -gt 0 ]; do
		grep -q -- "$2" "$1" 2>/dev/null && return 0
		kill -0 "$bench_pid" 2>/dev/null || return 1
		sleep 0.1
		n=$((n - 1))
	done
	return 1
}
wait_line "$work/bench.log" "view $view\$" 60 ||
	{ cat "$work/bench.log" >&2; kvf_log "kvforge-bench did not start"; exit 1; }

# ha_objects put|check ADDR ROUND: put 200 objects through the leader at
# ADDR and list the acknowledged ones in $work/acked-ROUND.txt, or check
# that every listed one exists on ADDR (prints "checked lost").
ha_objects() {
	python3 - "$1" "$2" "$3" "$work" "$KVF_TOP/tests/master" <<'PY'
import os, sys
op, addr, rnd, work, lib = sys.argv[1:6]
sys.path.insert(0, lib)
import mc_wire_pyclient as mc
mc._here = os.path.join(lib, "fixtures")
c = mc.Client(addr)
path = os.path.join(work, "acked-%s.txt" % rnd)
if op == "put":
    me = [0x5151, int(rnd) + 1]
    seg = [[0x5252, int(rnd) + 1], "ha-check-%s" % rnd,
           0x100000000000 * (int(rnd) + 1), 64 << 20, "127.0.0.1:1", "tcp", ""]
    c.call("MountSegment", seg, me)
    cfg = [1, 0, 0, 0, None, False, [], "", [], False, 0, "", None]
    acked = []
    for i in range(200):
        k = "ha-check-%s-%d" % (rnd, i)
        r = c.call("PutStart", me, k, 4096, cfg, "default")
        if "ok" in r["decoded"] and "ok" in c.call(
                "PutEnd", me, [k, None], 0, "default")["decoded"]:
            acked.append(k)
    open(path, "w").write("\n".join(acked) + "\n")
    print(len(acked))
else:
    keys = [x for x in open(path).read().split() if x]
    r = c.call("BatchExistKey", keys, "default")
    found = [x.get("ok") for x in r["decoded"]]
    print(len(keys), sum(1 for f in found if f is not True))
PY
}

results=$work/failover-ms.txt
: >"$results"
checked_total=0
lost_total=0
for k in $(seq 1 "$failovers"); do
	read -r addr view < <(leader) || { kvf_log "no leader"; exit 1; }
	li=
	for i in 0 1 2; do
		[ "$addr" = "127.0.0.1:${ports[$i]}" ] && li=$i
	done
	[ -n "$li" ] || { kvf_log "leader $addr is none of ours"; exit 1; }
	# steady state: the bench writes to this leader, both others stand by
	wait_line "$work/bench.log" "view $view\( \|\$\)" 60 ||
		{ tail "$work/bench.log" >&2; kvf_log "the bench left"; exit 1; }
	for i in 0 1 2; do
		[ "$i" = "$li" ] && continue
		for _ in $(seq 1 600); do
			grep -q "ha: standby" "$work/m$i.log" && break
			kill -0 "${pids[$i]}" 2>/dev/null ||
				{ cat "$work/m$i.log" >&2; exit 1; }
			sleep 0.1
		done
	done
	# both standbys in the leader's sync set: either may take over
	for _ in $(seq 1 600); do
		grep "sync set now" "$work/m$li.log" | tail -1 |
			grep -q "${ports[$(( (li + 1) % 3 ))]}.*${ports[$(( (li + 2) % 3 ))]}\|${ports[$(( (li + 2) % 3 ))]}.*${ports[$(( (li + 1) % 3 ))]}" && break
		sleep 0.1
	done
	n_put=$(ha_objects put "$addr" "$k") ||
		{ kvf_log "could not put the objects to check"; exit 1; }
	sleep 1
	t_kill=$(date +%s.%N)
	kill -"$sig" "${pids[$li]}"
	wait "${pids[$li]}" 2>/dev/null || true
	# the bench's line for the next view
	line=
	for _ in $(seq 1 $(( (ttl * 3 + 30) * 10 ))); do
		line=$(sed -n "s/.*failover: view \([0-9]*\) first answer at \([0-9.]*\),.*/\1 \2/p" \
			"$work/bench.log" | awk -v v="$view" '$1 > v' | head -1)
		[ -n "$line" ] && break
		sleep 0.1
	done
	[ -n "$line" ] || { tail "$work/bench.log" >&2; kvf_log "no failover seen"; exit 1; }
	read -r nview t_ok <<<"$line"
	ms=$(python3 -c "print('%.1f' % ((float('$t_ok') - float('$t_kill')) * 1000))")
	echo "$ms" >>"$results"
	kvf_log "failover $k/$failovers: leader $addr (view $view) SIG$sig; new leader's first answer to the bench after $ms ms (view $nview)"
	read -r naddr _ < <(leader) || { kvf_log "no leader"; exit 1; }
	read -r n_checked n_lost < <(ha_objects check "$naddr" "$k") ||
		{ kvf_log "could not check the objects"; exit 1; }
	checked_total=$((checked_total + n_checked))
	lost_total=$((lost_total + n_lost))
	kvf_log "failover $k/$failovers: $n_put objects acknowledged by the killed leader, $n_checked checked on the new leader $naddr: $n_lost lost"
	rm -rf "$work/m$li"
	start_master "$li" "${extra[@]+"${extra[@]}"}"
done

python3 - "$results" "$ttl" "$sig" <<'EOF'
import math, sys
v = sorted(float(x) for x in open(sys.argv[1]) if x.strip())
def q(p):
    return v[max(0, math.ceil(p * len(v)) - 1)]  # nearest rank
print("failover (leader SIG%s -> first batch answered by the new leader), "
      "--ha_lease_ttl %s, %d failovers: min %.0f ms, p50 %.0f ms, "
      "p99 %.0f ms, max %.0f ms" % (sys.argv[3], sys.argv[2], len(v), v[0],
                                    q(0.5), q(0.99), v[-1]))
EOF
seen=$(grep -c "failover: view" "$work/bench.log" || true)
kvf_log "acknowledged objects checked after the failovers: $checked_total, lost: $lost_total. The bench saw $seen failovers (its batches in flight at each kill got no answer and were not retried)."
[ "$lost_total" = 0 ] || exit 1

if [ "$serve" = 1 ]; then
	read -r addr view < <(leader) || true
	kvf_log "serving: etcd://127.0.0.1:$ecp (MC_STORE_CLUSTER_ID=$cluster), leader $addr; logs in $work; Ctrl-C to stop"
	# wait, not a foreground sleep: Ctrl-C runs the trap at once
	sleep infinity &
	sleep_pid=$!
	wait "$sleep_pid" || true
fi
