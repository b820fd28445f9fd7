#!/bin/sh
# SPDX-License-Identifier: MIT
#
# tests/master/test_master_e2e.sh - kvforge-master end to end with the
# reference Python client: the client flow, pipelining, bad input and
# limits, a restart with a data directory, a dead client's cleanup, and
# the captured upstream run replayed. Run from the build directory.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
bin=${KVF_MASTER_BIN:-./kvforge-master}
if ! command -v python3 >/dev/null 2>&1; then
	echo "SKIP: python3 not found"
	exit 77
fi
exec python3 "$here/test_master_e2e.py" "$bin" \
	flow pipeline bad_input restart dead_client replay
