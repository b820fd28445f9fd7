#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The embedded engine's benchmark: set up, build, and run kvforge-bench's
# default workload (hicache) against an embedded engine whose journal lives in
# ./kvforge-data under the current folder. Extra arguments go to the bench.
set -euo pipefail
here=$(pwd)
. "$(dirname "$0")/setup.sh"
kvf_setup_build
cd "$here"
exec "$KVF_TOP/build/tools/kvforge-bench" --data-dir "$here/kvforge-data" "$@"
