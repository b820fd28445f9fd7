/* SPDX-License-Identifier: MIT */
/*
 * engine/die.h - broken internal invariants abort here, never return.
 */
#ifndef KVF_ENGINE_DIE_H
#define KVF_ENGINE_DIE_H

__attribute__((noreturn, format(printf, 4, 5))) void
kvf__die_at(const char *file, const char *func, int line, const char *fmt, ...);

#define kvf__die(...) kvf__die_at(__FILE__, __func__, __LINE__, __VA_ARGS__)

/* Abort with the failed condition if @cond is false, in every build. */
#define kvf__assert(cond)                                                      \
	do {                                                                   \
		if (__builtin_expect(!(cond), 0))                              \
			kvf__die("assertion failed: %s", #cond);              \
	} while (0)

#endif /* KVF_ENGINE_DIE_H */
