#!/bin/sh
# SPDX-License-Identifier: MIT
# kvforge-bench's storage traffic figures: a journaled hicache run reports
# write_bytes_per_key for its mutating phases and write_bytes_per_record,
# at least the bytes of the records the journal must write (an OBJECT_PUT
# of a 68-byte key is ~85 bytes, in the side log at the least); a run
# without a journal reports none; the durability workload reports
# write_bytes_per_put for bounded and strict, not for none. Skips (77)
# where the kernel counts no write_bytes or the directory is tmpfs.
set -u
top=${abs_top_builddir:-$(pwd)}
bench=$top/tools/kvforge-bench
tmp=$(mktemp -d "${KVF_TEST_TMPDIR:-${TMPDIR:-/tmp}}/benchw-XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

grep -q '^write_bytes:' /proc/self/io 2>/dev/null ||
	{ echo "SKIP: no write_bytes in /proc/self/io"; exit 77; }
case $(stat -f -c %T "$tmp") in
tmpfs|ramfs) echo "SKIP: $tmp is in memory"; exit 77 ;;
esac
command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 77; }

"$bench" --objects 20000 --rounds 1 --durability bounded \
	--data-dir "$tmp/j" --json >"$tmp/bounded.json" ||
	fail "bounded hicache run exited $?"
"$bench" --objects 20000 --rounds 1 --durability none \
	--json >"$tmp/none.json" || fail "none hicache run exited $?"
"$bench" --workload durability --objects 5000 --rounds 1 \
	--data-dir "$tmp/d" --json >"$tmp/durability.json" ||
	fail "durability run exited $?"

python3 - "$tmp" <<'PY' || exit 1
import json, sys

d = sys.argv[1]
bounded = json.load(open(f"{d}/bounded.json"))
none = json.load(open(f"{d}/none.json"))
dur = json.load(open(f"{d}/durability.json"))
bad = []
for ph in ("put", "remove", "refill", "churn"):
    v = bounded["results"][ph].get("write_bytes_per_key")
    print(f"bounded {ph}: {v} bytes a key")
    if v is None:
        bad.append(f"bounded {ph}: no write_bytes_per_key")
for ph in ("exist", "get", "churn_remove"):
    if "write_bytes_per_key" in bounded["results"][ph]:
        bad.append(f"bounded {ph}: journals nothing of its own")
if bounded["results"]["put"].get("write_bytes_per_key", 0) < 80:
    bad.append("bounded put wrote less than its records")
per_record = bounded.get("write_bytes_per_record")
print(f"bounded run: {per_record} bytes a record")
if per_record is None or per_record < 80:
    bad.append("bounded run: write_bytes_per_record missing or too small")
if "write_bytes_per_record" in none or any(
        "write_bytes_per_key" in r for r in none["results"].values()):
    bad.append("a run without a journal reports storage traffic")
for mode in ("bounded", "strict"):
    for t in ("1t", "2t"):
        v = dur["results"][f"{mode}/{t}"].get("write_bytes_per_put")
        print(f"durability {mode}/{t}: {v} bytes a put")
        if v is None or v < 80:
            bad.append(f"durability {mode}/{t}: write_bytes_per_put {v}")
for t in ("1t", "2t"):
    if "write_bytes_per_put" in dur["results"][f"none/{t}"]:
        bad.append(f"durability none/{t} reports storage traffic")
for b in bad:
    print("FAIL:", b)
sys.exit(1 if bad else 0)
PY
