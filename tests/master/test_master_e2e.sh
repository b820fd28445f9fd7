#!/bin/sh
# SPDX-License-Identifier: MIT
#
# tests/master/test_master_e2e.sh [SCENARIO...] - kvforge-master end to
# end with the reference Python client. Without arguments: the client
# flow, pipelining, bad input and limits, a restart with a data
# directory, a dead client's cleanup, the captured upstream runs
# replayed, the metrics of answered RPCs, and a client of the older
# tabled Mooncake revision (test_master_e2e.py lists the scenarios). Run
# from the build directory; KVF_MASTER_BIN overrides ./kvforge-master.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
bin=${KVF_MASTER_BIN:-./kvforge-master}
if ! command -v python3 >/dev/null 2>&1; then
	echo "SKIP: python3 not found"
	exit 77
fi
[ $# -gt 0 ] || set -- flow pipeline bad_input restart dead_client replay \
	metrics old_abi
exec python3 "$here/test_master_e2e.py" "$bin" "$@"
