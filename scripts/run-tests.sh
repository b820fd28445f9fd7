#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The whole test suite, as CI runs it: make check plain, then under
# AddressSanitizer + UndefinedBehaviorSanitizer, then the concurrency tests
# under ThreadSanitizer, then a short libFuzzer run of the wire decoders
# (scripts/fuzz.sh, 20 s per harness; skipped without clang) and a bounded
# adversarial run against the master (tests/master/adversary.py), then `make
# distcheck` (the release tarball builds, passes make check and installs
# cleanly). Warnings are errors, and those tiers compile in the test-only
# fault hooks (--enable-fault-injection; without them the tests that need
# them skip). Before distcheck, the intree tier builds the way packagers
# and most users do: plain `./configure && make && make check` inside a
# copy of the checkout's tracked files (build-intree/; the configure
# script and Makefile.in files come from this tree's bootstrap), with no
# fault hooks and no configure options, so a test that needs either, or
# a tool that trips over files the build writes beside the sources,
# shows here. Set KVF_TEST_TIERS to a subset of "plain asan tsan fuzz
# intree dist" to run fewer.
set -euo pipefail
. "$(dirname "$0")/setup.sh"
kvf_install_deps
kvf_bootstrap

tiers=${KVF_TEST_TIERS:-plain asan tsan fuzz intree dist}
fault=--enable-fault-injection
failed=()

run_tier() {
	local name=$1 dir=$2
	shift 2
	kvf_log "tier $name"
	if ! kvf_build "$dir" "$@"; then
		failed+=("$name (build)")
		return
	fi
	if ! make -C "$KVF_TOP/$dir" -j"$KVF_JOBS" check; then
		failed+=("$name")
		# Show the failing tests' logs (test-suite.log gathers them).
		tail -n 200 "$KVF_TOP/$dir/test-suite.log" >&2 || true
	fi
}

# The tarball from the plain build directory, built and checked apart.
run_dist() {
	kvf_log "tier dist"
	if ! kvf_build build $fault; then
		failed+=("dist (build)")
		return
	fi
	if ! make -C "$KVF_TOP/build" -j"$KVF_JOBS" distcheck \
		DISTCHECK_CONFIGURE_FLAGS="--enable-werror $fault"; then
		failed+=("dist")
		# The unpacked tarball's test logs, as run_tier shows its own.
		find "$KVF_TOP/build" -path '*/_build/*' -name test-suite.log \
			-exec tail -n 200 {} + >&2 || true
	fi
}

# A bounded adversarial run against the master (tests/master/adversary.py:
# mutated fixture requests, floods, slow senders, hostile requests; about
# 45 s, loopback only), on the ASan build when the asan tier made one.
run_adversary() {
	local bin=$KVF_TOP/build-asan/kvforge-master

	kvf_log "tier fuzz: adversary"
	if [ ! -x "$bin" ]; then
		if ! kvf_build build $fault; then
			failed+=("fuzz adversary (build)")
			return
		fi
		bin=$KVF_TOP/build/kvforge-master
	fi
	python3 "$KVF_TOP/tests/master/adversary.py" "$bin" 45 ||
		failed+=("fuzz adversary")
}

# The tracked files (with their uncommitted edits: what `git add -u`
# would commit) plus the autotools output kvf_bootstrap made, configured
# and checked in place.
run_intree() {
	local dir=$KVF_TOP/build-intree gen
	kvf_log "tier intree"
	if ! git -C "$KVF_TOP" rev-parse --git-dir >/dev/null 2>&1; then
		kvf_log "tier intree skipped: not a git checkout"
		return
	fi
	rm -rf "$dir"
	mkdir -p "$dir"
	gen=(configure aclocal.m4 config.h.in build-aux m4)
	mapfile -t -O ${#gen[@]} gen < <(cd "$KVF_TOP" &&
		find . -name Makefile.in -not -path './build*' -printf '%P\n')
	if ! (cd "$KVF_TOP" &&
		{ git ls-files -z; printf '%s\0' "${gen[@]}"; } |
		tar --null -T - --ignore-failed-read -cf - 2>/dev/null) |
		tar -xf - -C "$dir"; then
		failed+=("intree (copy)")
		return
	fi
	if ! (cd "$dir" && ./configure >config.out 2>&1); then
		tail -30 "$dir/config.out" >&2
		failed+=("intree (configure)")
		return
	fi
	if ! make -C "$dir" -j"$KVF_JOBS" -s >/dev/null; then
		failed+=("intree (build)")
		return
	fi
	if ! make -C "$dir" -j"$KVF_JOBS" check; then
		failed+=("intree")
		tail -n 200 "$dir/test-suite.log" >&2 || true
	fi
}

ha_packaging="flags replication failover_loop"
for t in $tiers; do
	case $t in
	# The HA failover loop (tests/ha/test_ha_master.py failover_loop)
	# runs 50 leader SIGKILLs once, in the plain tier, where timing
	# varies the most from round to round. The sanitizers check the code
	# each round runs, the same from the fourth on (by then a leader
	# that joined as a replaced machine has been killed too): 4 there.
	# intree and dist, whose binaries are the plain tier's built
	# another way, catch packaging and build problems, not new
	# behaviour: they run the HA scenarios that start every kind of
	# process (masters, standbys, etcd, the bench, the captured client)
	# and the loop's steps once more, 2 rounds, not the whole suite.
	plain) KVF_HA_FAILOVERS=${KVF_HA_FAILOVERS:-50} run_tier plain build $fault ;;
	asan) KVF_HA_FAILOVERS=${KVF_HA_FAILOVERS:-4} run_tier asan build-asan $fault --enable-sanitizers=address,undefined ;;
	tsan) KVF_HA_FAILOVERS=${KVF_HA_FAILOVERS:-4} run_tier tsan build-tsan $fault --enable-sanitizers=thread ;;
	intree) KVF_HA_FAILOVERS=${KVF_HA_FAILOVERS:-2} \
		KVF_HA_SCENARIOS=${KVF_HA_SCENARIOS-$ha_packaging} run_intree ;;
	dist) KVF_HA_FAILOVERS=${KVF_HA_FAILOVERS:-2} \
		KVF_HA_SCENARIOS=${KVF_HA_SCENARIOS-$ha_packaging} run_dist ;;
	fuzz)
		if command -v clang >/dev/null; then
			kvf_log "tier fuzz"
			"$KVF_TOP/scripts/fuzz.sh" 20 || failed+=("fuzz")
		else
			kvf_log "tier fuzz skipped: no clang"
		fi
		run_adversary
		;;
	*) kvf_log "unknown tier $t"; exit 2 ;;
	esac
done

if [ ${#failed[@]} -ne 0 ]; then
	kvf_log "FAILED tiers: ${failed[*]}"
	exit 1
fi
kvf_log "all tiers passed: $tiers"
