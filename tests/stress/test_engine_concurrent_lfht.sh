#!/bin/sh
# SPDX-License-Identifier: MIT
# test_engine_concurrent on the lfht index; the program run as it is takes the
# default index (bucket). Run from the top build directory, as make check does.
KVF_TEST_INDEX=lfht exec ./tests/stress/test_engine_concurrent "$@"
