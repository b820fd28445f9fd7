/* SPDX-License-Identifier: MIT */
/*
 * profiling/stats.h - the include path tools/bench/compare.c still names;
 * the code is tools/lib/stats.h, in the tools convenience library
 * (tools/lib/local.mk), not in libkvforge. Nothing else includes this.
 */
#include "tools/lib/stats.h"
