#!/bin/sh
# SPDX-License-Identifier: MIT
#
# tests/ha/test_ha_master.sh [--part K/N] [SCENARIO...] - kvforge-master
# --enable_ha against a real etcd started on loopback (test_ha_master.py
# lists the scenarios and says what --part does). Run from the build
# directory; KVF_MASTER_BIN overrides ./kvforge-master, KVF_ETCD the etcd
# binary. Exits 77 (SKIP) without python3 or etcd.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
bin=${KVF_MASTER_BIN:-./kvforge-master}
etcd=${KVF_ETCD:-$(command -v etcd || true)}
if ! command -v python3 >/dev/null 2>&1; then
	echo "SKIP: python3 not found"
	exit 77
fi
if [ -z "$etcd" ] || [ ! -x "$etcd" ]; then
	echo "SKIP: no etcd binary (Debian: etcd-server)"
	exit 77
fi
exec python3 "$here/test_ha_master.py" "$bin" "$etcd" "$@"
