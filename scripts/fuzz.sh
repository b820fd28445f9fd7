#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Fuzz the Mooncake wire decoders with libFuzzer (Debian's clang):
#   scripts/fuzz.sh [SECONDS]     (default 20 per harness)
# Builds tests/fuzz/*.c with -fsanitize=fuzzer,address,undefined into
# build-fuzz/, seeds each corpus from the captured fixtures
# (tests/master/fixtures/*/index.jsonl), runs every harness for SECONDS
# and prints the CPU time used. A crash leaves its input in
# build-fuzz/crashes/ and makes the script fail. The corpus is kept
# between runs (build-fuzz/corpus/), so long runs accumulate.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
secs=${1:-20}
out=${KVF_FUZZ_DIR:-$top/build-fuzz}
cc=${KVF_FUZZ_CC:-clang}
harnesses=(fuzz_request fuzz_response)
sources=(wire/frame.c wire/spack.c wire/md5.c wire/abi.c
	wire/abi_3b5a5941.c wire/abi_v0_3_12_post1.c wire/msg.c)

command -v "$cc" >/dev/null || { echo "fuzz.sh: $cc not found" >&2; exit 77; }
mkdir -p "$out/crashes"

for h in "${harnesses[@]}"; do
	srcs=("$top/tests/fuzz/$h.c")
	for s in "${sources[@]}"; do srcs+=("$top/$s"); done
	"$cc" -std=gnu11 -O1 -g -fsanitize=fuzzer,address,undefined \
		-fno-sanitize-recover=undefined -I"$top/include" -I"$top" \
		"${srcs[@]}" -o "$out/$h"
done

# Seeds: byte 0 = the RPC's index in wire/rpc_list.h, then the captured
# header and body of each request (fuzz_request) and response
# (fuzz_response).
python3 - "$top" "$out" <<'PY'
import json, os, re, sys
top, out = sys.argv[1], sys.argv[2]
names = re.findall(r"X\((\w+)\)", open(f"{top}/wire/rpc_list.h").read())
idx = {n: i for i, n in enumerate(names)}
for kind in ("request", "response"):
    d = f"{out}/corpus/fuzz_{kind}"
    os.makedirs(d, exist_ok=True)
    fx = f"{top}/tests/master/fixtures"
    for s in sorted(os.listdir(fx)):
        p = f"{fx}/{s}/index.jsonl"
        if not os.path.exists(p):
            continue
        for line in open(p):
            e = json.loads(line)
            sel = idx.get(e["rpc"], 0)
            data = bytes([sel]) + bytes.fromhex(e[kind]["hex"])
            open(f"{d}/{s}-{e['n']:03d}", "wb").write(data)
PY

start=$(date +%s)
rc=0
for h in "${harnesses[@]}"; do
	echo "fuzz.sh: $h for ${secs}s"
	if ! "$out/$h" -max_total_time="$secs" -rss_limit_mb=2048 \
		-max_len=65536 -print_final_stats=1 \
		-artifact_prefix="$out/crashes/$h-" "$out/corpus/$h" \
		2>"$out/$h.log"; then
		echo "fuzz.sh: $h FAILED, see $out/$h.log and $out/crashes/" >&2
		tail -n 40 "$out/$h.log" >&2
		rc=1
	fi
	grep -E "stat::number_of_executed_units|stat::new_units_added" \
		"$out/$h.log" | sed "s/^/  $h: /" || true
done
echo "fuzz.sh: wall $(( $(date +%s) - start ))s; CPU time: this shell, then the harnesses (user sys):"
times
exit $rc
