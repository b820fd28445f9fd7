#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# A standby joining after N objects: how long it takes to catch up from a
# snapshot of the leader's journal. Starts a local etcd (loopback, a
# temporary data directory) and one `kvforge-master --enable_ha` that
# leads alone (--ha_sync_degrade: it acknowledges without standbys), puts
# N objects through it with `kvforge-bench --master` (killed once the
# leader's journal holds them, so the objects stay), then starts a second
# master with an empty --data-dir and measures, from its start:
#   - the leader's read of the snapshot (its log: "read in X ms"),
#   - the standby's install (its log: "installed ... in X ms"),
#   - the time until the standby is in the leader's sync set (it may
#     then take over), the catch-up time.
# The leader keeps --ha_replication_backlog_bytes small (1 MiB) so its
# backlog cannot hold the history and the snapshot path is taken.
#
#   scripts/bench-ha-catchup.sh [--objects N] [-- MASTER_FLAGS]
#
# --objects N: objects put before the standby starts (default 1000000).
# KVF_PREBUILT=DIR uses the binaries of an existing build directory
# instead of setting up and building build/. Work files go to a
# temporary directory, removed at the end.
set -euo pipefail
here=$(pwd)
objects=1000000
while [ $# -gt 0 ]; do
	case $1 in
	--objects) objects=$2; shift 2 ;;
	--) shift; break ;;
	*) echo "usage: $0 [--objects N] [-- MASTER_FLAGS]" >&2; exit 2 ;;
	esac
done
case $objects in
'' | *[!0-9]*) echo "bench-ha-catchup.sh: --objects takes a whole number" >&2; exit 2 ;;
esac

. "$(dirname "$0")/setup.sh"
kvf_ha_binaries
cd "$here"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/kvforge-catchup.XXXXXX")
cluster=kvforge_catchup
export MC_STORE_CLUSTER_ID=$cluster

free_port() { kvf_free_port; }

pids=()
cleanup() {
	set +e
	trap - EXIT INT TERM
	for p in "${pids[@]}"; do kill -KILL "$p"; done
	for p in "${pids[@]}"; do wait "$p"; done
	rm -rf "$tmp"
} 2>/dev/null
trap cleanup EXIT
trap 'exit 130' INT TERM

kvf_start_etcd "$tmp" "$etcd_bin"
pids+=("$etcd_pid")
for _ in $(seq 1 100); do
	curl -s -m 1 -X POST "http://127.0.0.1:$ecp/v3/kv/range" -d '{"key":"eA=="}' \
		>/dev/null 2>&1 && break
	sleep 0.1
done

now() { date +%s.%N; }
wait_line() { # file pattern seconds
	local n=$(($3 * 10))
	while [ $n -gt 0 ]; do
		grep -q -- "$2" "$1" 2>/dev/null && return 0
		sleep 0.1
		n=$((n - 1))
	done
	return 1
}
start_master() { # name port: its log is $tmp/NAME.log
	"$bin" --enable_ha --etcd_endpoints "127.0.0.1:$ecp" \
		--cluster_id "$cluster" --rpc_address 127.0.0.1 --rpc_port "$2" \
		--metrics_port 0 --data-dir "$tmp/$1" --client_ttl 3600 \
		--ha_sync_degrade --ha_sync_timeout_ms 200 \
		--ha_replication_backlog_bytes $((1 << 20)) "${@:3}" \
		>"$tmp/$1.log" 2>&1 &
	pids+=($!)
}
last_seq() { # metrics port of a master: its journal's last sequence
	curl -s -m 2 "http://127.0.0.1:$1/health" |
		python3 -c 'import json, sys; print(json.load(sys.stdin)["replication"]["last_seq"])' 2>/dev/null || echo 0
}
metrics_port() {
	sed -n 's/.*metrics listening on [^:]*:\([0-9]*\).*/\1/p' "$tmp/$1.log" | head -1
}

p1=$(free_port)
start_master m1 "$p1" "$@"
wait_line "$tmp/m1.log" "RPC listening" 60 || { cat "$tmp/m1.log" >&2; exit 1; }
mp1=$(metrics_port m1)
kvf_log "leader on 127.0.0.1:$p1; putting $objects objects"
t0=$(now)
"$bench" --master "127.0.0.1:$p1" --objects "$objects" --batch 128 \
	--connections 2 --depth 4 --rounds 1 --seconds 3600 \
	>/dev/null 2>"$tmp/bench.log" &
bench_pid=$!
pids+=($bench_pid)
# every put is one record (PutEnd); the mount and the client add a few
while [ "$(last_seq "$mp1")" -lt "$objects" ]; do
	kill -0 "$bench_pid" 2>/dev/null || { cat "$tmp/bench.log" >&2; exit 1; }
	sleep 0.5
done
kill -KILL "$bench_pid" # its objects stay: the client is live for an hour
wait "$bench_pid" 2>/dev/null || true
seq=$(last_seq "$mp1")
kvf_log "$objects objects in $(python3 -c "print('%.1f' % ($(now) - $t0))") s; leader at sequence $seq"

p2=$(free_port)
t_start=$(now)
start_master m2 "$p2" "$@"
wait_line "$tmp/m1.log" "sync set now \[127.0.0.1:$p2\]" 600 ||
	{ tail -20 "$tmp/m1.log" "$tmp/m2.log" >&2; kvf_log "the standby did not catch up"; exit 1; }
t_joined=$(now)
read_ms=$(sed -n 's/.*catches up from a snapshot: .* read in \([0-9]*\) ms/\1/p' "$tmp/m1.log" | tail -1)
inst=$(sed -n 's/.*installed a snapshot of \([0-9]*\) records up to sequence [0-9]* in \([0-9]*\) ms/\1 \2/p' "$tmp/m2.log" | tail -1)
[ -n "$inst" ] || { kvf_log "no snapshot was installed (the backlog held the history?)"; exit 1; }
read -r recs inst_ms <<<"$inst"
total=$(python3 -c "print('%.2f' % ($t_joined - $t_start))")
kvf_log "snapshot: $recs records; leader's read ${read_ms} ms; standby's receive and install ${inst_ms} ms"
echo "catch-up: standby start to the leader's sync set: $total s ($objects objects, sequence $seq)"
