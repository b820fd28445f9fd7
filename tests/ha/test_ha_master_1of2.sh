#!/bin/sh
# SPDX-License-Identifier: MIT
# make check's share 1 of 2 of the HA scenarios (test_ha_master.sh); share
# 2 runs beside it (ha/local.mk).
exec "$(dirname "$0")/test_ha_master.sh" --part 1/2 "$@"
