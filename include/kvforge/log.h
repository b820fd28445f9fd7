/* SPDX-License-Identifier: MIT */
/*
 * kvforge/log.h - how the library reports what a return code cannot say.
 *
 * Every call that may report takes a kvf_log_fn and its context (an
 * engine's in &kvf_config.log, kvf_rdma_probe() as arguments). A NULL
 * callback means stderr, one line each, prefixed "kvforge: ". Only broken
 * internal invariants, which abort the process, always write to stderr.
 */
#ifndef KVFORGE_LOG_H
#define KVFORGE_LOG_H

#ifdef __cplusplus
extern "C" {
#endif

/**
 * enum kvf_log_level - severity of a line the library reports.
 *
 * The values are syslog's, so a callback can pass them on unchanged.
 */
enum kvf_log_level {
	/** An operation was refused or failed; the line says why (for
	 *  example which journal record made kvf_engine_open() refuse). */
	KVF_LOG_ERROR = 3,
	/** Working, but not as configured or asked. */
	KVF_LOG_WARNING = 4,
	/** What the library found or chose (for example the profiler's
	 *  counter tier and why faster tiers are unavailable). */
	KVF_LOG_INFO = 6,
};

/**
 * typedef kvf_log_fn - receives the lines the library reports.
 * @ctx: the context given with the callback (&kvf_config.log_ctx).
 * @level: an &enum kvf_log_level.
 * @msg: one line, NUL-terminated, without a trailing newline; valid only
 *       during the call.
 *
 * Called on whichever thread hit the condition, possibly from several at
 * once (must be thread-safe), and possibly inside kvf_engine_open()
 * before it returns. Must not call back into the library.
 */
typedef void (*kvf_log_fn)(void *ctx, int level, const char *msg);

#ifdef __cplusplus
}
#endif
#endif /* KVFORGE_LOG_H */
