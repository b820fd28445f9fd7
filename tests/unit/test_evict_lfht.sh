#!/bin/sh
# SPDX-License-Identifier: MIT
# test_evict on the lfht index; the program run as it is takes the
# default index (bucket). Run from the top build directory, as make check does.
KVF_TEST_INDEX=lfht exec ./tests/unit/test_evict "$@"
