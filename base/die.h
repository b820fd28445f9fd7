/* SPDX-License-Identifier: MIT */
/*
 * base/die.h - how the library speaks: log lines through the embedder's
 * callback, broken internal invariants abort here and never return.
 */
#ifndef KVF_BASE_DIE_H
#define KVF_BASE_DIE_H

/*
 * Report one line at @level (enum kvf_log_level) to @fn(@ctx, ...) (a
 * kvf_log_fn, spelled out so the base layer needs no public header), or to
 * stderr prefixed "kvforge: " when @fn is NULL (&kvf_config.log unset).
 * The message has no trailing newline; one longer than 1 KiB is cut.
 * Never blocks beyond the callback itself; safe from any thread.
 */
__attribute__((format(printf, 4, 5))) void
kvf__log(void (*fn)(void *ctx, int level, const char *msg), void *ctx,
	 int level, const char *fmt, ...);

__attribute__((noreturn, format(printf, 4, 5))) void
kvf__die_at(const char *file, const char *func, int line, const char *fmt, ...);

/*
 * Fatal: no engine (hence no log callback) is known where invariants
 * break, and the process aborts anyway, so this always writes to stderr.
 */
#define kvf__die(...) kvf__die_at(__FILE__, __func__, __LINE__, __VA_ARGS__)

/* Abort with the failed condition if @cond is false, in every build. */
#define kvf__assert(cond)                                                      \
	do {                                                                   \
		if (__builtin_expect(!(cond), 0))                              \
			kvf__die("assertion failed: %s", #cond);              \
	} while (0)

#endif /* KVF_BASE_DIE_H */
