#!/bin/sh
# SPDX-License-Identifier: MIT
#
# tests/master/test_master_concurrent.sh - several clients on several
# connections and event-loop threads at once, and pipelined requests
# (also run under ThreadSanitizer). Run from the build directory.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
bin=${KVF_MASTER_BIN:-./kvforge-master}
if ! command -v python3 >/dev/null 2>&1; then
	echo "SKIP: python3 not found"
	exit 77
fi
exec python3 "$here/test_master_e2e.py" "$bin" concurrent pipeline flow
