/* SPDX-License-Identifier: MIT */
/*
 * tests/master/test_http_util.h - a blocking HTTP/1.1 test client and a
 * Prometheus text-format checker, shared by the HTTP and metrics tests.
 *
 * The client is deliberately independent of http/http.c: it frames
 * answers by Content-Length only, and every socket has a receive timeout
 * so a server that stops answering fails the test instead of hanging it.
 */
#ifndef KVF_TESTS_MASTER_HTTP_UTIL_H
#define KVF_TESTS_MASTER_HTTP_UTIL_H

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

/* ---- client ---- */

static inline int http_connect(uint16_t port)
{
	struct sockaddr_in sin = {.sin_family = AF_INET,
				  .sin_port = htons(port)};
	struct timeval tv = {.tv_sec = 10};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static inline bool http_send_all(int fd, const void *p, size_t n)
{
	const char *c = p;

	while (n) {
		ssize_t w = send(fd, c, n, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return false;
		c += w;
		n -= (size_t)w;
	}
	return true;
}

struct http_reply {
	int status;
	char head[8192]; /* status line and headers, NUL-terminated */
	char *body;	 /* malloc()ed, NUL-terminated */
	size_t body_len;
};

/*
 * Per-connection read state: bytes received past the previous answer
 * (pipelined answers arrive together).
 */
struct http_conn_buf {
	int fd;
	char buf[65536];
	size_t len;
};

static inline bool http_fill(struct http_conn_buf *cb)
{
	ssize_t n;

	if (cb->len == sizeof(cb->buf))
		return false;
	do
		n = recv(cb->fd, cb->buf + cb->len, sizeof(cb->buf) - cb->len,
			 0);
	while (n < 0 && errno == EINTR);
	if (n <= 0)
		return false;
	cb->len += (size_t)n;
	return true;
}

/* Value of header @name in @head (case-insensitive), copied into @out. */
static inline bool http_header(const char *head, const char *name, char *out,
			       size_t cap)
{
	size_t nl = strlen(name);
	const char *p = strchr(head, '\n');

	while (p && *++p) {
		const char *eol = strstr(p, "\r\n");

		if (!eol)
			break;
		if ((size_t)(eol - p) > nl && p[nl] == ':' &&
		    !strncasecmp(p, name, nl)) {
			const char *v = p + nl + 1;
			size_t n;

			while (*v == ' ')
				v++;
			n = (size_t)(eol - v);
			if (n >= cap)
				n = cap - 1;
			memcpy(out, v, n);
			out[n] = '\0';
			return true;
		}
		p = eol + 1;
	}
	return false;
}

/*
 * Read one answer. @head_only: the request was HEAD, so no body follows
 * whatever Content-Length says. Returns false on EOF or timeout before a
 * whole answer.
 */
static inline bool http_read_reply(struct http_conn_buf *cb, bool head_only,
				   struct http_reply *r)
{
	char *end;
	size_t hlen, clen = 0;
	char v[64];

	memset(r, 0, sizeof(*r));
	for (;;) {
		end = memmem(cb->buf, cb->len, "\r\n\r\n", 4);
		if (end)
			break;
		if (!http_fill(cb))
			return false;
	}
	hlen = (size_t)(end - cb->buf) + 4;
	if (hlen >= sizeof(r->head))
		return false;
	memcpy(r->head, cb->buf, hlen);
	r->head[hlen] = '\0';
	if (sscanf(r->head, "HTTP/1.1 %d", &r->status) != 1)
		return false;
	if (http_header(r->head, "Content-Length", v, sizeof(v)))
		clen = strtoul(v, NULL, 10);
	if (head_only || r->status == 100)
		clen = 0;
	r->body = malloc(clen + 1);
	if (!r->body)
		return false;
	while (cb->len < hlen + clen) {
		/* Bodies larger than the buffer are moved out as they come. */
		if (cb->len == sizeof(cb->buf)) {
			size_t have = cb->len - hlen;

			memcpy(r->body + r->body_len, cb->buf + hlen, have);
			r->body_len += have;
			clen -= have;
			cb->len = hlen;
		}
		if (!http_fill(cb)) {
			free(r->body);
			r->body = NULL;
			return false;
		}
	}
	memcpy(r->body + r->body_len, cb->buf + hlen, clen);
	r->body_len += clen;
	r->body[r->body_len] = '\0';
	memmove(cb->buf, cb->buf + hlen + clen, cb->len - hlen - clen);
	cb->len -= hlen + clen;
	return true;
}

static inline void http_reply_free(struct http_reply *r)
{
	free(r->body);
	r->body = NULL;
}

/* True when the peer has closed: EOF with nothing more to read. */
static inline bool http_peer_closed(struct http_conn_buf *cb)
{
	return cb->len == 0 && !http_fill(cb);
}

/* One request on a fresh connection; the connection is closed after. */
static inline bool http_once(uint16_t port, const char *req, bool head_only,
			     struct http_reply *r)
{
	struct http_conn_buf *cb = calloc(1, sizeof(*cb));
	bool ok;

	if (!cb)
		return false;
	cb->fd = http_connect(port);
	ok = cb->fd >= 0 && http_send_all(cb->fd, req, strlen(req)) &&
	     http_read_reply(cb, head_only, r);
	if (cb->fd >= 0)
		close(cb->fd);
	free(cb);
	return ok;
}

/* GET @path on a fresh connection; the body, or NULL. */
static inline char *http_get_body(uint16_t port, const char *path, int *status)
{
	char req[512];
	struct http_reply r;

	snprintf(req, sizeof(req),
		 "GET %s HTTP/1.1\r\nHost: localhost\r\nConnection: "
		 "close\r\n\r\n",
		 path);
	if (!http_once(port, req, false, &r))
		return NULL;
	*status = r.status;
	return r.body;
}

/* ---- Prometheus text format ---- */

static inline bool prom_name_char(char c, bool first)
{
	return isalpha((unsigned char)c) || c == '_' || c == ':' ||
	       (!first && isdigit((unsigned char)c));
}

/* Parse "{a=\"x\",b=\"y\"}" at @p; returns the end, NULL if malformed. */
static inline const char *prom_labels(const char *p)
{
	if (*p != '{')
		return p;
	p++;
	while (*p != '}') {
		if (!(isalpha((unsigned char)*p) || *p == '_'))
			return NULL;
		while (isalnum((unsigned char)*p) || *p == '_')
			p++;
		if (*p++ != '=' || *p++ != '"')
			return NULL;
		while (*p != '"') {
			if (*p == '\0' || *p == '\n')
				return NULL;
			if (*p == '\\') {
				p++;
				if (*p != '\\' && *p != '"' && *p != 'n')
					return NULL;
			}
			p++;
		}
		p++;
		if (*p == ',')
			p++;
		else if (*p != '}')
			return NULL;
	}
	return p + 1;
}

static inline bool prom_value_ok(const char *v, size_t n)
{
	char buf[64], *end;

	if (n == 0 || n >= sizeof(buf))
		return false;
	memcpy(buf, v, n);
	buf[n] = '\0';
	if (!strcmp(buf, "+Inf") || !strcmp(buf, "-Inf") || !strcmp(buf, "NaN"))
		return true;
	strtod(buf, &end);
	return *end == '\0';
}

/*
 * Check that every line of @text is a "# HELP"/"# TYPE" comment or a
 * sample "name{labels} value", that every sample belongs to a family
 * declared by an earlier TYPE line, and that the text ends with a
 * newline. On failure, copy the offending line into @bad.
 */
static inline bool prom_check(const char *text, char *bad, size_t badcap)
{
	char family[256] = "";
	const char *line = text;

	if (!*text || text[strlen(text) - 1] != '\n') {
		snprintf(bad, badcap, "(text does not end with a newline)");
		return false;
	}
	while (*line) {
		const char *eol = strchr(line, '\n'), *p = line;
		size_t n = (size_t)(eol - line);
		bool ok = true;

		if (!strncmp(line, "# TYPE ", 7)) {
			const char *name = line + 7,
				   *sp = memchr(name, ' ', n - 7);

			ok = sp && (size_t)(sp - name) < sizeof(family);
			if (ok) {
				memcpy(family, name, (size_t)(sp - name));
				family[sp - name] = '\0';
				ok = !strncmp(sp, " counter\n", 9) ||
				     !strncmp(sp, " gauge\n", 7) ||
				     !strncmp(sp, " histogram\n", 11) ||
				     !strncmp(sp, " summary\n", 9) ||
				     !strncmp(sp, " untyped\n", 9);
			}
		} else if (!strncmp(line, "# HELP ", 7)) {
			ok = n > 7 && prom_name_char(line[7], true);
		} else if (*line == '#') {
			ok = true;
		} else {
			size_t fl = strlen(family);
			const char *lab, *val;

			ok = prom_name_char(*p, true);
			while (ok && prom_name_char(*p, false))
				p++;
			/* The sample must be the family or a histogram part. */
			ok = ok && fl && !strncmp(line, family, fl) &&
			     (p == line + fl ||
			      ((size_t)(p - line - fl) == 7 &&
			       !strncmp(line + fl, "_bucket", 7)) ||
			      ((size_t)(p - line - fl) == 4 &&
			       !strncmp(line + fl, "_sum", 4)) ||
			      ((size_t)(p - line - fl) == 6 &&
			       !strncmp(line + fl, "_count", 6)));
			lab = ok ? prom_labels(p) : NULL;
			ok = lab && *lab == ' ';
			if (ok) {
				val = lab + 1;
				ok = prom_value_ok(val, (size_t)(eol - val));
			}
		}
		if (!ok) {
			snprintf(bad, badcap, "%.*s", (int)n, line);
			return false;
		}
		line = eol + 1;
	}
	return true;
}

/*
 * The value of the sample whose "name{labels}" is exactly @series, or
 * -1 when there is none.
 */
static inline double prom_value(const char *text, const char *series)
{
	size_t sl = strlen(series);
	const char *p = text;

	while ((p = strstr(p, series))) {
		if ((p == text || p[-1] == '\n') && p[sl] == ' ')
			return strtod(p + sl + 1, NULL);
		p += sl;
	}
	return -1;
}

#endif /* KVF_TESTS_MASTER_HTTP_UTIL_H */
