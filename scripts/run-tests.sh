#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The whole test suite, as CI runs it: make check plain, then under
# AddressSanitizer + UndefinedBehaviorSanitizer, then the concurrency tests
# under ThreadSanitizer, then a short libFuzzer run of the wire decoders
# (scripts/fuzz.sh, 20 s per harness; skipped without clang), then `make
# distcheck` (the release tarball builds, passes make check and installs
# cleanly). Warnings are errors, and every tier compiles in the test-only
# fault hooks (--enable-fault-injection; without them the tests that need
# them skip). Set KVF_TEST_TIERS to a subset of "plain asan tsan fuzz
# dist" to run fewer.
set -euo pipefail
. "$(dirname "$0")/setup.sh"
kvf_install_deps
kvf_bootstrap

tiers=${KVF_TEST_TIERS:-plain asan tsan fuzz dist}
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

for t in $tiers; do
	case $t in
	plain) run_tier plain build $fault ;;
	asan) run_tier asan build-asan $fault --enable-sanitizers=address,undefined ;;
	tsan) run_tier tsan build-tsan $fault --enable-sanitizers=thread ;;
	dist) run_dist ;;
	fuzz)
		if command -v clang >/dev/null; then
			kvf_log "tier fuzz"
			"$KVF_TOP/scripts/fuzz.sh" 20 || failed+=("fuzz")
		else
			kvf_log "tier fuzz skipped: no clang"
		fi
		;;
	*) kvf_log "unknown tier $t"; exit 2 ;;
	esac
done

if [ ${#failed[@]} -ne 0 ]; then
	kvf_log "FAILED tiers: ${failed[*]}"
	exit 1
fi
kvf_log "all tiers passed: $tiers"
