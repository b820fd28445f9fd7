#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The main job: set up, build, and start kvforge-master (a drop-in
# Mooncake Store master) on loopback with its journal in ./kvforge-data,
# drive it once with `kvforge-bench --master` so you see it answer, then
# leave it serving in the foreground until Ctrl-C.
#
# Extra arguments go to kvforge-master (mooncake_master's flags work, see
# docs/master.md), e.g. ./scripts/run-master.sh --rpc_port=50052.
# KVF_BENCH_OBJECTS sets the size of the first drive (default 20000;
# 0 skips it).
set -euo pipefail
here=$(pwd)
. "$(dirname "$0")/setup.sh"
kvf_setup_build
cd "$here"

bin=$KVF_TOP/build/kvforge-master
bench=$KVF_TOP/build/tools/kvforge-bench
log=$(mktemp "${TMPDIR:-/tmp}/kvforge-master.XXXXXX")
trap 'rm -f "$log"' EXIT

"$bin" --data-dir "$here/kvforge-data" "$@" >"$log" &
master=$!
# Ctrl-C / SIGTERM reach the master, which flushes its journal and exits.
trap 'kill -TERM $master 2>/dev/null || true' INT TERM

addr=
for _ in $(seq 1 300); do
	addr=$(sed -n 's/.*RPC listening on \([^ ]*\).*/\1/p' "$log")
	[ -n "$addr" ] && break
	if ! kill -0 $master 2>/dev/null; then
		wait $master || exit $?
		exit 1
	fi
	sleep 0.1
done
cat "$log"
[ -n "$addr" ] || { kvf_log "kvforge-master did not start"; exit 1; }
# A wildcard bind is still reached through loopback.
case $addr in 0.0.0.0:* | ::*) addr=127.0.0.1:${addr##*:} ;; esac

objects=${KVF_BENCH_OBJECTS:-20000}
if [ "$objects" != 0 ]; then
	kvf_log "driving kvforge-master at $addr once: kvforge-bench --master $addr"
	"$bench" --master "$addr" --objects "$objects" --seconds 1 ||
		kvf_log "kvforge-bench --master failed (the master keeps serving)"
fi

kvf_log "kvforge-master serving on $addr (data in $here/kvforge-data); Ctrl-C to stop"
status=0
wait $master || status=$?
# A wait interrupted by the trap: wait for the master itself to finish.
while kill -0 $master 2>/dev/null; do wait $master || status=$?; done
exit $status
