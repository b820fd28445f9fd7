/* SPDX-License-Identifier: MIT */
/*
 * base/die.c - the library's only writes to the embedder: log lines and
 * the single exit for broken internal invariants.
 *
 * Log lines go to &kvf_config.log when the embedder set one, so a store
 * master that owns its own logging (and maybe no stderr at all) sees them;
 * the default keeps the library usable without configuring anything. The
 * line is formatted on the stack, so logging allocates nothing and can
 * report an allocation failure.
 *
 * An invariant that does not hold means memory or metadata can no longer be
 * trusted: continuing could hand out overlapping buffers. So we print where
 * and abort (leaving a core for the post-mortem) instead of returning.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/die.h"

#define LOG_LINE_MAX 1024

void kvf__log(void (*fn)(void *ctx, int level, const char *msg), void *ctx,
	      int level, const char *fmt, ...)
{
	char msg[LOG_LINE_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (fn)
		fn(ctx, level, msg);
	else
		fprintf(stderr, "kvforge: %s\n", msg);
}

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
