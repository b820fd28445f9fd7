#!/bin/sh
# SPDX-License-Identifier: MIT
# test_profile's software tier alone: exits 77 (SKIP) where this machine lacks
# it. Run from the top build directory, as make check does.
KVF_TEST_PROFILE_TIER=software exec ./tests/unit/test_profile "$@"
