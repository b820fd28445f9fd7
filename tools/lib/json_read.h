/* SPDX-License-Identifier: MIT */
/*
 * tools/lib/json_read.h - a small strict JSON reader that flattens a
 * document into (path, scalar) pairs: {"a":{"b":[1,2]}} gives "a.b.0" = 1
 * and "a.b.1" = 2. Enough for bench results and profile tables; not a
 * general-purpose DOM. Internal: kvf__json_*.
 */
#ifndef KVF_TOOLS_LIB_JSON_READ_H
#define KVF_TOOLS_LIB_JSON_READ_H

#include <stddef.h>

enum kvf__json_kind {
	KVF__JSON_NUMBER,
	KVF__JSON_STRING,
	KVF__JSON_BOOL, /* num is 0 or 1 */
	KVF__JSON_NULL,
};

/* Called per scalar; a non-zero return stops the walk and is returned. */
typedef int (*kvf__json_cb)(void *ctx, const char *path,
			    enum kvf__json_kind kind, double num,
			    const char *str);

/*
 * Parse @text (@len bytes, one value plus whitespace) and call @cb for
 * every scalar in document order. Paths longer than 255 bytes or nesting
 * deeper than 32 are errors. Return: 0, -1 on malformed input (@err_off,
 * if not NULL, receives the byte offset), or the callback's non-zero.
 */
int kvf__json_flatten(const char *text, size_t len, kvf__json_cb cb, void *ctx,
		      size_t *err_off);

/* The number at @path. Return: 0, -1 (malformed) or 1 (absent). */
int kvf__json_number(const char *text, size_t len, const char *path,
		     double *out);

#endif /* KVF_TOOLS_LIB_JSON_READ_H */
