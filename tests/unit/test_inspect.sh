#!/bin/sh
# SPDX-License-Identifier: MIT
# kvforge-inspect: summary and --json on a good journal, --verify passes on
# it and fails, naming the problem, on inconsistent ones.
set -u
top=${abs_top_builddir:-$(pwd)}
mk=$top/tests/unit/test_journal_mkinspect
inspect=$top/tools/kvforge-inspect
tmp=$(mktemp -d "${KVF_TEST_TMPDIR:-/tmp}/inspect-XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$mk" "$tmp/good" good || fail "could not build the good journal"
out=$("$inspect" "$tmp/good") || fail "summary exited $?"
echo "$out"
echo "$out" | grep -q "^format version: *4$" || fail "no format version"
echo "$out" | grep -q '^checkpoint: *seq [1-9]' || fail "no checkpoint"
# Its checkpoint rewrote the image into the other object database.
echo "$out" | grep -q '^image database: *objs\.1 (objs: 0 entries)$' ||
	fail "no image database line"
"$inspect" --json "$tmp/good" |
	grep -q '"image_db": "objs.1", "spare_entries": 0' ||
	fail "--json: no image database"
"$inspect" --verify "$tmp/good" || fail "--verify rejected a good journal"
"$inspect" --verify --json "$tmp/good" | grep -q '"ok": true' ||
	fail "--json"

for kind in unmounted overlap outside; do
	"$mk" "$tmp/$kind" "$kind" || fail "could not build $kind"
	msg=$("$inspect" --verify "$tmp/$kind" 2>&1 >/dev/null)
	rc=$?
	echo "$kind: exit $rc: $msg"
	[ $rc -eq 1 ] || fail "$kind: --verify exited $rc, expected 1"
	echo "$msg" | grep -q "bad-$kind" || fail "$kind: message names no key"
done
case $(echo "$("$inspect" --verify "$tmp/overlap" 2>&1)") in
*overlaps*) ;; *) fail "overlap not reported as such" ;;
esac
# A crashed BOUNDED journal: acknowledged records may be only in the side
# log; the summary counts them and --verify replays them.
total=$("$mk" "$tmp/crashed" crashed) || fail "could not build crashed"
out=$("$inspect" "$tmp/crashed") || fail "crashed: summary exited $?"
echo "$out"
last=$(echo "$out" | sed -n 's/^last sequence: *//p')
pend=$(echo "$out" | sed -n 's/^side log pending: *\([0-9]*\) records$/\1/p')
[ -n "$last" ] && [ -n "$pend" ] || fail "crashed: no last sequence or side log line"
[ $((last + pend)) -eq "$total" ] ||
	fail "crashed: $last in LMDB + $pend pending != $total acknowledged"
"$inspect" --verify "$tmp/crashed" || fail "--verify rejected the crashed journal"

# Damage: --verify runs open's own recovery on a copy, so it fails exactly
# where open would, with open's reason; the directory is left untouched.
# Building it needs the fault hooks (exit 77 without them: case skipped).
"$mk" "$tmp/damaged" damaged
rc=$?
if [ $rc -eq 77 ]; then
	echo "# SKIP damaged case: no fault hooks (--enable-fault-injection)"
else
	[ $rc -eq 0 ] || fail "could not build damaged"
	msg=$("$inspect" --verify "$tmp/damaged" 2>&1 >/dev/null)
	rc=$?
	echo "damaged: exit $rc: $msg"
	[ $rc -eq 1 ] || fail "damaged side log: --verify exited $rc, expected 1"
	echo "$msg" | grep -q "follows a damaged or missing frame" ||
		fail "damaged side log: the frame is not named"
	"$inspect" "$tmp/damaged" | grep -q "then refused" ||
		fail "damaged side log: the summary does not say so"
fi
# Garbage appended to a side log file: refused by open, so by --verify.
cp -r "$tmp/crashed" "$tmp/extended"
head -c 65536 /dev/urandom >> "$tmp/extended/wal-0.log"
msg=$("$inspect" --verify "$tmp/extended" 2>&1 >/dev/null)
rc=$?
echo "extended: exit $rc: $msg"
[ $rc -eq 1 ] || fail "extended side log: --verify exited $rc, expected 1"
echo "$msg" | grep -q "extended or truncated" || fail "extended: no reason"
# A truncated data.mdb: refused, never a crash (SIGBUS) of the tool.
cp -r "$tmp/good" "$tmp/truncated"
truncate -s 8192 "$tmp/truncated/data.mdb"
msg=$("$inspect" --verify "$tmp/truncated" 2>&1 >/dev/null)
rc=$?
echo "truncated: exit $rc: $msg"
[ $rc -eq 1 ] || fail "truncated data.mdb: --verify exited $rc, expected 1"
# data.mdb missing beside side log files: refused.
cp -r "$tmp/crashed" "$tmp/nodata"
rm "$tmp/nodata/data.mdb"
"$inspect" --verify "$tmp/nodata" >/dev/null 2>&1
[ $? -eq 1 ] || fail "missing data.mdb: --verify did not fail"

"$inspect" --verify "$tmp/nonexistent" >/dev/null 2>&1
[ $? -ne 0 ] || fail "a missing directory verified"
echo "PASS"
