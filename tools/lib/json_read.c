/* SPDX-License-Identifier: MIT */
/*
 * tools/lib/json_read.c - recursive-descent JSON reader (RFC 8259 subset:
 * \u escapes outside ASCII become '?').
 *
 * The parser keeps the current path in one buffer, appending ".key" on the
 * way down an object and truncating on the way back, so flattening costs
 * no allocation. Recursion depth is bounded (32) so hostile input cannot
 * exhaust the stack.
 */
#include "config.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/lib/json_read.h"

#define JSON_MAX_DEPTH 32
#define JSON_MAX_PATH 256

struct jr {
	const char *s;
	size_t len;
	size_t pos;
	char path[JSON_MAX_PATH];
	size_t plen;
	kvf__json_cb cb;
	void *ctx;
	char str[JSON_MAX_PATH * 4];
};

static void skip_ws(struct jr *j)
{
	while (j->pos < j->len && strchr(" \t\r\n", j->s[j->pos]) &&
	       j->s[j->pos])
		j->pos++;
}

static int peek(struct jr *j)
{
	skip_ws(j);
	return j->pos < j->len ? (unsigned char)j->s[j->pos] : -1;
}

static bool eat(struct jr *j, char c)
{
	if (peek(j) != (unsigned char)c)
		return false;
	j->pos++;
	return true;
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Parse a string into j->str. Return: 0 or -1. */
static int parse_string(struct jr *j)
{
	size_t o = 0;

	if (!eat(j, '"'))
		return -1;
	while (j->pos < j->len) {
		unsigned char c = (unsigned char)j->s[j->pos++];

		if (c == '"') {
			j->str[o] = '\0';
			return 0;
		}
		if (c < 0x20 || o + 1 >= sizeof(j->str))
			return -1;
		if (c == '\\') {
			if (j->pos >= j->len)
				return -1;
			c = (unsigned char)j->s[j->pos++];
			switch (c) {
			case '"':
			case '\\':
			case '/':
				break;
			case 'b':
				c = '\b';
				break;
			case 'f':
				c = '\f';
				break;
			case 'n':
				c = '\n';
				break;
			case 'r':
				c = '\r';
				break;
			case 't':
				c = '\t';
				break;
			case 'u': {
				int v = 0;

				if (j->pos + 4 > j->len)
					return -1;
				for (int i = 0; i < 4; i++) {
					int h = hexval(j->s[j->pos++]);

					if (h < 0)
						return -1;
					v = v * 16 + h;
				}
				c = v < 0x80 && v > 0 ? (unsigned char)v : '?';
				break;
			}
			default:
				return -1;
			}
		}
		j->str[o++] = (char)c;
	}
	return -1;
}

/* Strict number grammar, then strtod on a bounded copy. */
static int parse_number(struct jr *j, double *out)
{
	size_t st = j->pos, p = j->pos;
	char buf[64];
	bool digits = false;

	if (p < j->len && j->s[p] == '-')
		p++;
	while (p < j->len && j->s[p] >= '0' && j->s[p] <= '9') {
		p++;
		digits = true;
	}
	if (p < j->len && j->s[p] == '.') {
		p++;
		digits = false;
		while (p < j->len && j->s[p] >= '0' && j->s[p] <= '9') {
			p++;
			digits = true;
		}
	}
	if (digits && p < j->len && (j->s[p] == 'e' || j->s[p] == 'E')) {
		p++;
		if (p < j->len && (j->s[p] == '+' || j->s[p] == '-'))
			p++;
		digits = false;
		while (p < j->len && j->s[p] >= '0' && j->s[p] <= '9') {
			p++;
			digits = true;
		}
	}
	if (!digits || p - st >= sizeof(buf))
		return -1;
	memcpy(buf, j->s + st, p - st);
	buf[p - st] = '\0';
	*out = strtod(buf, NULL);
	j->pos = p;
	return 0;
}

static bool literal(struct jr *j, const char *word)
{
	size_t n = strlen(word);

	if (j->pos + n > j->len || memcmp(j->s + j->pos, word, n))
		return false;
	j->pos += n;
	return true;
}

/* Append ".seg" (or "seg" at the root) to the path. */
static int push(struct jr *j, const char *seg, size_t *saved)
{
	int n = snprintf(j->path + j->plen, sizeof(j->path) - j->plen, "%s%s",
			 j->plen ? "." : "", seg);

	*saved = j->plen;
	if (n < 0 || (size_t)n >= sizeof(j->path) - j->plen)
		return -1;
	j->plen += (size_t)n;
	return 0;
}

static void pop(struct jr *j, size_t saved)
{
	j->plen = saved;
	j->path[saved] = '\0';
}

static int parse_value(struct jr *j, int depth);

/* Parse the value of member or element @seg, one level below @depth. */
static int parse_under(struct jr *j, const char *seg, int depth)
{
	size_t saved;
	int ret;

	if (push(j, seg, &saved))
		return -1;
	ret = parse_value(j, depth + 1);
	pop(j, saved);
	return ret;
}

static int parse_object(struct jr *j, int depth)
{
	if (eat(j, '}'))
		return 0;
	do {
		int ret;

		if (parse_string(j) || !eat(j, ':'))
			return -1;
		ret = parse_under(j, j->str, depth);
		if (ret)
			return ret;
	} while (eat(j, ','));
	return eat(j, '}') ? 0 : -1;
}

static int parse_array(struct jr *j, int depth)
{
	unsigned idx = 0;

	if (eat(j, ']'))
		return 0;
	do {
		char seg[16];
		int ret;

		snprintf(seg, sizeof(seg), "%u", idx++);
		ret = parse_under(j, seg, depth);
		if (ret)
			return ret;
	} while (eat(j, ','));
	return eat(j, ']') ? 0 : -1;
}

static int parse_value(struct jr *j, int depth)
{
	double num = 0;
	int c = peek(j);

	if (depth > JSON_MAX_DEPTH)
		return -1;
	switch (c) {
	case '{':
		j->pos++;
		return parse_object(j, depth);
	case '[':
		j->pos++;
		return parse_array(j, depth);
	case '"':
		if (parse_string(j))
			return -1;
		return j->cb(j->ctx, j->path, KVF__JSON_STRING, 0, j->str);
	case 't':
	case 'f':
		if (!literal(j, c == 't' ? "true" : "false"))
			return -1;
		return j->cb(j->ctx, j->path, KVF__JSON_BOOL, c == 't', NULL);
	case 'n':
		if (!literal(j, "null"))
			return -1;
		return j->cb(j->ctx, j->path, KVF__JSON_NULL, 0, NULL);
	default:
		if (parse_number(j, &num))
			return -1;
		return j->cb(j->ctx, j->path, KVF__JSON_NUMBER, num, NULL);
	}
}

int kvf__json_flatten(const char *text, size_t len, kvf__json_cb cb, void *ctx,
		      size_t *err_off)
{
	struct jr *j = calloc(1, sizeof(*j));
	int ret;

	if (!j)
		return -1;
	j->s = text;
	j->len = len;
	j->cb = cb;
	j->ctx = ctx;
	ret = parse_value(j, 0);
	if (!ret && peek(j) != -1)
		ret = -1; /* trailing garbage */
	if (ret == -1 && err_off)
		*err_off = j->pos;
	free(j);
	return ret;
}

struct find_ctx {
	const char *path;
	double *out;
};

static int find_cb(void *ctx, const char *path, enum kvf__json_kind kind,
		   double num, const char *str)
{
	struct find_ctx *f = ctx;

	if (kind != KVF__JSON_NUMBER || strcmp(path, f->path))
		return 0;
	*f->out = num;
	return 2; /* found: stop */
}

int kvf__json_number(const char *text, size_t len, const char *path,
		     double *out)
{
	struct find_ctx f = {path, out};
	int ret = kvf__json_flatten(text, len, find_cb, &f, NULL);

	return ret == 2 ? 0 : ret == 0 ? 1 : -1;
}
