#!/bin/sh
# SPDX-License-Identifier: MIT
# make check's share 2 of 2 of the HA scenarios (test_ha_master.sh); share
# 1 runs beside it (ha/local.mk).
exec "$(dirname "$0")/test_ha_master.sh" --part 2/2 "$@"
