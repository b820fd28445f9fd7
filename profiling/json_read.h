/* SPDX-License-Identifier: MIT */
/*
 * profiling/json_read.h - the include path tools/bench/compare.c still names;
 * the code is tools/lib/json_read.h, in the tools convenience library
 * (tools/lib/local.mk), not in libkvforge. Nothing else includes this.
 */
#include "tools/lib/json_read.h"
