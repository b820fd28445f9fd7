/* SPDX-License-Identifier: MIT */
/*
 * engine/die.c - the single exit for broken internal invariants.
 *
 * An invariant that does not hold means memory or metadata can no longer be
 * trusted: continuing could hand out overlapping buffers. So we print where
 * and abort (leaving a core for the post-mortem) instead of returning.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "engine/die.h"

void kvf__die_at(const char *file, const char *func, int line, const char *fmt,
		 ...)
{
	va_list ap;

	fprintf(stderr, "kvforge: fatal: %s:%d (%s): ", file, line, func);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	abort();
}
