#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# scripts/rdma-check.sh - the RDMA checks only a machine with a device can
# run: the libibverbs backend loaded at run time, device/port/GID choice,
# and the transport on two QPs of port 1 (every captured coro_rpc pair
# replayed byte-identical, a 600 KiB message, zero-length close).
#
# Exit status: 0 passed, 77 skipped (no libibverbs or no usable device:
# the reason is printed), anything else failed. Builds in build/ like
# scripts/run-tests.sh.
set -euo pipefail
. "$(dirname "$0")/setup.sh"
kvf_install_deps
kvf_bootstrap
kvf_build build

bin=$KVF_TOP/build/tests/unit
make -C "$KVF_TOP/build" -j"$KVF_JOBS" -s \
	tests/unit/test_rdma tests/unit/test_rdma_ibv tests/unit/test_rdma_hw >/dev/null

kvf_log "memlock limit: $(ulimit -l) KiB (each connection registers 1344 KiB by default)"
if [ -d /sys/class/infiniband ]; then
	kvf_log "devices: $(ls /sys/class/infiniband | tr '\n' ' ')"
fi

# Backend checks run everywhere; they skip only without libibverbs.
rc=0
"$bin/test_rdma_ibv" || rc=$?
case $rc in
0) ;;
77) kvf_log "SKIP: libibverbs.so.1 cannot be loaded on this machine"; exit 77 ;;
*) kvf_log "FAIL: test_rdma_ibv (exit $rc)"; exit 1 ;;
esac

rc=0
"$bin/test_rdma_hw" || rc=$?
case $rc in
0) kvf_log "PASS: RDMA transport verified on this machine's device" ;;
77) kvf_log "SKIP: no usable RDMA device here (see the reason above); nothing hardware-specific was verified"
    exit 77 ;;
*) kvf_log "FAIL: test_rdma_hw (exit $rc)"; exit 1 ;;
esac

# The probe must agree that RDMA is available.
"$bin/test_rdma"
