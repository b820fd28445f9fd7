# SPDX-License-Identifier: MIT
# profiling/scripts/perf-common.sh - sourced by the perf wrappers.

PERF=${KVF_PERF:-perf}

# kvf_perf_require NAME: exit with a hint when perf is missing.
kvf_perf_require() {
	command -v "$PERF" >/dev/null 2>&1 || {
		echo "$1: $PERF not found (Debian: apt-get install linux-perf)" >&2
		exit 1
	}
}

# Prints "hardware" when cycles can be counted here, else "software".
kvf_perf_tier() {
	if "$PERF" stat -x, -e cycles true 2>&1 >/dev/null |
		grep -q '^[0-9][0-9]*,.*cycles'; then
		echo hardware
	else
		echo software
	fi
}
