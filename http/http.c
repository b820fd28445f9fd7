/* SPDX-License-Identifier: MIT */
/*
 * http/http.c - a small HTTP/1.1 server and kvforge-master's two uses.
 *
 * Shape. Each server is one thread running a poll() loop over a listening
 * socket, an eventfd that kvf_http_stop() signals, and at most
 * HTTP_MAX_CONNS non-blocking connections. Traffic is a scraper every few
 * seconds and a handful of transfer engines writing their descriptors at
 * start-up, so one thread and poll() are plenty, and the server never
 * shares a thread with the RPC workers: a slow or hostile HTTP client
 * cannot delay an RPC.
 *
 * A connection owns an input buffer, HTTP_MAX_HEAD bytes until a parsed
 * head announces a larger body; it then grows to hold that one request
 * (at most the server's body limit, and only while all connections'
 * buffers stay within HTTP_BUFFER_BUDGET) and shrinks back once it is
 * answered. It also owns an output buffer. Requests are answered one at
 * a time, in order: a connection is read only while it has nothing left
 * to write, so a client that pipelines requests without reading answers
 * stalls only itself, and memory per connection stays bounded.
 *
 * What it refuses, and how (a refused request closes the connection after
 * the answer, because the stream may be out of step):
 *   400  malformed request line or header, bad Content-Length, bytes after
 *        the body that are not a request;
 *   413  a body larger than the server's limit (before reading it);
 *   431  a head over HTTP_MAX_HEAD bytes or HTTP_MAX_HEADERS lines;
 *   501  Transfer-Encoding (bodies must carry Content-Length);
 *   417  an Expect other than 100-continue;
 *   503  a connection beyond HTTP_MAX_CONNS (answered, then closed), or a
 *        body that would take the buffers past HTTP_BUFFER_BUDGET;
 *   507  a metadata PUT that would take the store past its byte limit
 *        (the connection stays open).
 * Well-formed requests for an unknown path get 404 and for a known path
 * with another method 405 with Allow; the connection stays open.
 * Connections idle (or stuck mid-request) for the idle timeout (60 s by
 * default) are closed, and a request's head must be complete within
 * HTTP_HEAD_MS of its first byte (a client trickling a byte at a time is
 * active, never idle). When every slot is taken, a new client takes the
 * slot of the longest-waiting slow head, else of the longest-idle
 * keep-alive connection; it gets 503 only if every connection is busy
 * with a request. So slow or abandoned clients cannot hold the slots.
 *
 * Routes are functions of (server, request) -> response: the metrics
 * server renders through http/metrics.c, the metadata server reads and
 * writes http/metastore.c with upstream's paths, codes and bodies.
 */
#include "config.h"

#include "http/http.h"

#include "base/clock.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <kvforge/status.h>

#include "http/metastore.h"
#include "http/metrics.h"

#define HTTP_MAX_CONNS 128
#define HTTP_MAX_HEAD (16 * 1024)
#define HTTP_MAX_HEADERS 64
#define HTTP_IDLE_MS_DEFAULT 60000
/* A request's head must arrive whole within this (or the idle timeout, if
 * shorter) of its first byte. */
#define HTTP_HEAD_MS 10000
#define HTTP_DRAIN_MS 2000
#define HTTP_POLL_MS 1000
#define HTTP_ACCEPT_BACKOFF_MS 100
/* Input buffers of one server together, beyond each one's first head. */
#define HTTP_BUFFER_BUDGET (64 * 1024 * 1024)
/* Metrics requests carry no body worth keeping. */
#define HTTP_METRICS_MAX_BODY (64 * 1024)
/* A transfer engine's segment descriptor is JSON of a few KiB to MiBs. */
#define HTTP_METADATA_MAX_BODY (8 * 1024 * 1024)

enum http_method {
	HTTP_GET,
	HTTP_HEAD,
	HTTP_PUT,
	HTTP_DELETE,
	HTTP_POST,
	HTTP_OTHER,
};

struct http_request {
	enum http_method method;
	const char *path; /* up to '?' */
	size_t path_len;
	const char *query; /* after '?', may be empty */
	size_t query_len;
	const char *body;
	size_t body_len;
};

struct http_response {
	int status;
	const char *content_type; /* NULL: no Content-Type header */
	const char *allow;	  /* for 405 */
	char *body;		  /* malloc()ed, or NULL with a static @text */
	const char *text;	  /* static body when @body is NULL */
	size_t body_len;
};

struct kvf_http_server;
typedef void (*http_route_fn)(struct kvf_http_server *srv,
			      const struct http_request *req,
			      struct http_response *resp);

struct http_conn {
	int fd;
	char *in;
	size_t in_len;
	size_t in_cap;
	char *out;
	size_t out_len;
	size_t out_sent;
	size_t out_cap;
	uint64_t last_active_ms;
	uint64_t head_start_ms; /* first byte of a head not complete yet, or 0 */
	bool close_after_write;
	bool sent_continue; /* "100 Continue" already sent for this request */
	bool peer_eof;	    /* the client shut down its side */
	/*
	 * Answer sent, write side shut down: read and discard until the
	 * client closes (or HTTP_DRAIN_MS), so that closing with unread
	 * bytes does not reset the connection before the client reads the
	 * answer.
	 */
	bool draining;
	uint64_t drain_until_ms;
};

struct kvf_http_server {
	int listen_fd;
	int wake_fd;
	uint16_t port;
	pthread_t thread;
	http_route_fn route;
	size_t max_body;
	uint64_t idle_ms;
	uint64_t head_ms;	     /* a head must be complete this soon */
	int poll_ms;		     /* wakes often enough to enforce idle_ms */
	struct kvf_metrics *metrics; /* metrics server */
	struct kvf_metastore *store; /* metadata server, owned */
	struct http_conn *conns[HTTP_MAX_CONNS];
	unsigned nconns;
	uint64_t accept_resume_ms; /* accepting paused until then */
	size_t in_bytes;	   /* sum of the connections' in_cap */
};

/* ---- responses ---- */

static const char *reason_phrase(int status)
{
	switch (status) {
	case 100:
		return "Continue";
	case 200:
		return "OK";
	case 400:
		return "Bad Request";
	case 404:
		return "Not Found";
	case 405:
		return "Method Not Allowed";
	case 413:
		return "Payload Too Large";
	case 417:
		return "Expectation Failed";
	case 431:
		return "Request Header Fields Too Large";
	case 500:
		return "Internal Server Error";
	case 501:
		return "Not Implemented";
	case 503:
		return "Service Unavailable";
	case 507:
		return "Insufficient Storage";
	default:
		return "Unknown";
	}
}

static void set_text(struct http_response *resp, int status, const char *text)
{
	resp->status = status;
	resp->body = NULL;
	resp->text = text;
	resp->body_len = strlen(text);
}

static bool out_reserve(struct http_conn *c, size_t more)
{
	size_t need = c->out_len + more, cap = c->out_cap ? c->out_cap : 1024;
	char *p;

	if (need <= c->out_cap)
		return true;
	while (cap < need)
		cap *= 2;
	p = realloc(c->out, cap);
	if (!p)
		return false;
	c->out = p;
	c->out_cap = cap;
	return true;
}

static bool out_append(struct http_conn *c, const void *p, size_t n)
{
	if (!out_reserve(c, n))
		return false;
	memcpy(c->out + c->out_len, p, n);
	c->out_len += n;
	return true;
}

/*
 * Queue @resp on @c. Without a body for HEAD (the headers still give the
 * GET's length). On allocation failure the connection is closed: there is
 * no way to answer.
 */
static void queue_response(struct http_conn *c, const struct http_response *r,
			   bool head_only)
{
	char hdr[512], date[64];
	time_t now = time(NULL);
	struct tm tm;
	int n;

	gmtime_r(&now, &tm);
	strftime(date, sizeof(date), "%a, %d %b %Y %H:%M:%S GMT", &tm);
	n = snprintf(hdr, sizeof(hdr),
		     "HTTP/1.1 %d %s\r\nServer: kvforge-master\r\n"
		     "Date: %s\r\nContent-Length: %zu\r\n%s%s%s%s%s%s%s\r\n",
		     r->status, reason_phrase(r->status), date, r->body_len,
		     r->content_type ? "Content-Type: " : "",
		     r->content_type ? r->content_type : "",
		     r->content_type ? "\r\n" : "", r->allow ? "Allow: " : "",
		     r->allow ? r->allow : "", r->allow ? "\r\n" : "",
		     c->close_after_write ? "Connection: close\r\n" : "");
	if (n < 0 || (size_t)n >= sizeof(hdr) ||
	    !out_append(c, hdr, (size_t)n) ||
	    (!head_only &&
	     !out_append(c, r->body ? r->body : r->text, r->body_len))) {
		c->out_len = c->out_sent = 0;
		c->close_after_write = true;
	}
}

/* A refusal: answer @status with a short text and close afterwards. */
static void refuse(struct http_conn *c, int status, const char *text)
{
	struct http_response r = {.content_type = "text/plain"};

	set_text(&r, status, text);
	c->close_after_write = true;
	queue_response(c, &r, false);
}

/* ---- request parsing ---- */

struct http_head {
	size_t len; /* bytes of request line + headers + blank */
	enum http_method method;
	const char *target;
	size_t target_len;
	bool http10;
	bool keep_alive; /* after Connection: and the version */
	bool expect_continue;
	size_t content_length;
};

/* Outcome of parsing: 0 complete, 1 incomplete, else an HTTP status. */
#define HEAD_COMPLETE 0
#define HEAD_INCOMPLETE 1

static bool is_tchar(unsigned char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
	       (ch >= '0' && ch <= '9') ||
	       (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

/* One line of @p[0..end), without its LF (and CR); NULL when incomplete. */
static const char *next_line(const char *p, const char *end, size_t *len,
			     const char **after)
{
	const char *lf = memchr(p, '\n', (size_t)(end - p));

	if (!lf)
		return NULL;
	*len = (size_t)(lf - p);
	if (*len && p[*len - 1] == '\r')
		(*len)--;
	*after = lf + 1;
	return p;
}

static enum http_method parse_method(const char *m, size_t n)
{
	static const struct {
		const char *name;
		enum http_method method;
	} known[] = {
		{"GET", HTTP_GET},	 {"HEAD", HTTP_HEAD}, {"PUT", HTTP_PUT},
		{"DELETE", HTTP_DELETE}, {"POST", HTTP_POST},
	};

	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		if (strlen(known[i].name) == n && !memcmp(known[i].name, m, n))
			return known[i].method;
	return HTTP_OTHER;
}

/*
 * Length of the token that @l[0..n) starts with, ended by @delim; 0 when
 * there is no @delim, the token is empty or holds a byte tokens may not.
 */
static size_t token_until(const char *l, size_t n, char delim)
{
	const char *d = memchr(l, delim, n);

	if (!d)
		return 0;
	for (const char *p = l; p < d; p++)
		if (!is_tchar((unsigned char)*p))
			return 0;
	return (size_t)(d - l);
}

static int parse_request_line(const char *l, size_t n, struct http_head *h)
{
	size_t mlen = token_until(l, n, ' ');
	const char *sp1 = l + mlen, *sp2, *end = l + n;

	if (mlen == 0)
		return 400;
	sp2 = memchr(sp1 + 1, ' ', (size_t)(end - sp1 - 1));
	if (!sp2 || sp2 == sp1 + 1 || sp1[1] != '/')
		return 400;
	for (const char *p = sp1 + 1; p < sp2; p++)
		if ((unsigned char)*p <= 0x20 || *p == 0x7f)
			return 400;
	if ((size_t)(end - sp2 - 1) != 8 || memcmp(sp2 + 1, "HTTP/1.", 7) ||
	    (sp2[8] != '0' && sp2[8] != '1'))
		return 400;
	h->method = parse_method(l, mlen);
	h->target = sp1 + 1;
	h->target_len = (size_t)(sp2 - sp1 - 1);
	h->http10 = sp2[8] == '0';
	h->keep_alive = !h->http10;
	return HEAD_COMPLETE;
}

static bool token_in(const char *v, size_t n, const char *token)
{
	size_t tl = strlen(token);

	/* Comma-separated list, case-insensitive, optional spaces. */
	while (n) {
		while (n && (*v == ' ' || *v == '\t' || *v == ',')) {
			v++;
			n--;
		}
		size_t i = 0;

		while (i < n && v[i] != ',')
			i++;
		size_t e = i;

		while (e && (v[e - 1] == ' ' || v[e - 1] == '\t'))
			e--;
		if (e == tl && !strncasecmp(v, token, tl))
			return true;
		v += i;
		n -= i;
	}
	return false;
}

static int parse_content_length(const char *v, size_t n, size_t *out)
{
	size_t x = 0;

	if (n == 0 || n > 15)
		return 400;
	for (size_t i = 0; i < n; i++) {
		if (v[i] < '0' || v[i] > '9')
			return 400;
		x = x * 10 + (size_t)(v[i] - '0');
	}
	*out = x;
	return HEAD_COMPLETE;
}

static bool name_is(const char *name, size_t n, const char *want)
{
	return strlen(want) == n && !strncasecmp(name, want, n);
}

static int parse_header(const char *l, size_t n, struct http_head *h,
			bool *have_length)
{
	size_t nlen = token_until(l, n, ':'), vlen, len;
	const char *v = l + nlen + 1;
	int ret;

	if (nlen == 0)
		return 400;
	vlen = n - nlen - 1;
	while (vlen && (*v == ' ' || *v == '\t')) {
		v++;
		vlen--;
	}
	while (vlen && (v[vlen - 1] == ' ' || v[vlen - 1] == '\t'))
		vlen--;
	for (size_t i = 0; i < vlen; i++)
		if (((unsigned char)v[i] < 0x20 && v[i] != '\t') ||
		    v[i] == 0x7f)
			return 400;

	if (name_is(l, nlen, "Content-Length")) {
		ret = parse_content_length(v, vlen, &len);
		if (ret != HEAD_COMPLETE)
			return ret;
		if (*have_length && len != h->content_length)
			return 400;
		*have_length = true;
		h->content_length = len;
	} else if (name_is(l, nlen, "Transfer-Encoding")) {
		return 501;
	} else if (name_is(l, nlen, "Connection")) {
		if (token_in(v, vlen, "close"))
			h->keep_alive = false;
		else if (token_in(v, vlen, "keep-alive"))
			h->keep_alive = true;
	} else if (name_is(l, nlen, "Expect")) {
		if (vlen != 12 || strncasecmp(v, "100-continue", 12))
			return 417;
		h->expect_continue = true;
	}
	return HEAD_COMPLETE;
}

/*
 * Parse the head at the start of @buf. Returns HEAD_COMPLETE with @h
 * filled, HEAD_INCOMPLETE, or the status to refuse the request with.
 */
static int parse_head(const char *buf, size_t len, struct http_head *h)
{
	const char *p = buf,
		   *end = buf + (len < HTTP_MAX_HEAD ? len : HTTP_MAX_HEAD);
	const char *line, *after;
	bool have_length = false;
	unsigned nheaders = 0;
	size_t n;
	int ret;

	memset(h, 0, sizeof(*h));
	/* Tolerate blank lines before a request (RFC 9112 2.2). */
	while ((line = next_line(p, end, &n, &after)) && n == 0)
		p = after;
	if (!line)
		goto incomplete;
	ret = parse_request_line(line, n, h);
	if (ret != HEAD_COMPLETE)
		return ret;
	p = after;
	for (;;) {
		line = next_line(p, end, &n, &after);
		if (!line)
			goto incomplete;
		p = after;
		if (n == 0)
			break;
		if (*line == ' ' || *line == '\t') /* obsolete line folding */
			return 400;
		if (++nheaders > HTTP_MAX_HEADERS)
			return 431;
		ret = parse_header(line, n, h, &have_length);
		if (ret != HEAD_COMPLETE)
			return ret;
	}
	h->len = (size_t)(p - buf);
	return HEAD_COMPLETE;

incomplete:
	return len >= HTTP_MAX_HEAD ? 431 : HEAD_INCOMPLETE;
}

/* ---- connections ---- */

static void conn_free(struct http_conn *c)
{
	close(c->fd);
	free(c->in);
	free(c->out);
	free(c);
}

static void dispatch(struct kvf_http_server *srv, struct http_conn *c,
		     const struct http_head *h)
{
	struct http_request req = {
		.method = h->method,
		.path = h->target,
		.body = c->in + h->len,
		.body_len = h->content_length,
	};
	struct http_response resp = {0};
	const char *q = memchr(h->target, '?', h->target_len);

	req.path_len = q ? (size_t)(q - h->target) : h->target_len;
	req.query = q ? q + 1 : h->target + h->target_len;
	req.query_len = h->target_len - req.path_len - (q ? 1 : 0);
	if (!h->keep_alive)
		c->close_after_write = true;
	srv->route(srv, &req, &resp);
	queue_response(c, &resp, h->method == HTTP_HEAD);
	free(resp.body);
}

/* Resize @c's input buffer to @cap bytes, keeping the server's total. */
static bool conn_resize(struct kvf_http_server *srv, struct http_conn *c,
			size_t cap)
{
	char *p = realloc(c->in, cap);

	if (!p)
		return false;
	srv->in_bytes = srv->in_bytes - c->in_cap + cap;
	c->in = p;
	c->in_cap = cap;
	return true;
}

/*
 * Make room for a whole request of @total bytes, within the budget all
 * connections share, so that a burst of large uploads cannot take more
 * than HTTP_BUFFER_BUDGET.
 */
static bool conn_fit(struct kvf_http_server *srv, struct http_conn *c,
		     size_t total)
{
	if (total <= c->in_cap)
		return true;
	if (srv->in_bytes - c->in_cap + total > HTTP_BUFFER_BUDGET)
		return false;
	return conn_resize(srv, c, total);
}

/* Give back a large request's buffer once it has been answered. */
static void conn_shrink(struct kvf_http_server *srv, struct http_conn *c)
{
	if (c->in_cap > HTTP_MAX_HEAD && c->in_len <= HTTP_MAX_HEAD)
		conn_resize(srv, c, HTTP_MAX_HEAD);
}

/*
 * Answer the complete requests at the front of @c->in, one at a time and
 * only while nothing is waiting to be written.
 */
static void conn_process(struct kvf_http_server *srv, struct http_conn *c)
{
	while (c->out_len == 0 && !c->close_after_write && c->in_len) {
		struct http_head h;
		size_t total;
		int ret = parse_head(c->in, c->in_len, &h);

		if (ret == HEAD_INCOMPLETE) {
			if (!c->head_start_ms)
				c->head_start_ms = kvf__now_ms();
			return;
		}
		c->head_start_ms = 0;
		if (ret != HEAD_COMPLETE) {
			refuse(c, ret, reason_phrase(ret));
			return;
		}
		if (h.content_length > srv->max_body) {
			refuse(c, 413, "request body too large");
			return;
		}
		total = h.len + h.content_length;
		if (!conn_fit(srv, c, total)) {
			refuse(c, 503, "too many large requests at once");
			return;
		}
		if (c->in_len < total) {
			if (h.expect_continue && !c->sent_continue) {
				static const char cont[] =
					"HTTP/1.1 100 Continue\r\n\r\n";

				c->sent_continue = true;
				if (!out_append(c, cont, sizeof(cont) - 1))
					c->close_after_write = true;
			}
			return;
		}
		dispatch(srv, c, &h);
		memmove(c->in, c->in + total, c->in_len - total);
		c->in_len -= total;
		c->sent_continue = false;
		conn_shrink(srv, c);
	}
}

/*
 * Read what is available. False on a socket error; an orderly shutdown
 * by the client sets @c->peer_eof and returns true, so that the requests
 * it sent before are still answered.
 */
static bool conn_read(struct kvf_http_server *srv, struct http_conn *c)
{
	/*
	 * The buffer holds one head (HTTP_MAX_HEAD) until conn_fit() makes
	 * it as large as the request it parsed; reading stops when it is
	 * full, and the parser then always has a decision to make.
	 */
	if (!c->in && !conn_resize(srv, c, HTTP_MAX_HEAD))
		return false;
	while (c->in_len < c->in_cap) {
		ssize_t n = recv(c->fd, c->in + c->in_len,
				 c->in_cap - c->in_len, 0);

		if (n > 0) {
			c->in_len += (size_t)n;
			c->last_active_ms = kvf__now_ms();
			continue;
		}
		if (n == 0) {
			c->peer_eof = true;
			return true;
		}
		if (errno == EINTR)
			continue;
		return errno == EAGAIN || errno == EWOULDBLOCK;
	}
	return true;
}

/* Discard input while draining; false once the client is gone. */
static bool conn_drain(struct http_conn *c)
{
	char sink[4096];

	for (;;) {
		ssize_t n = recv(c->fd, sink, sizeof(sink), 0);

		if (n > 0)
			continue;
		if (n < 0 && errno == EINTR)
			continue;
		return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
	}
}

/* Write what the socket takes; false when the connection is finished. */
static bool conn_write(struct http_conn *c)
{
	while (c->out_sent < c->out_len) {
		ssize_t n = send(c->fd, c->out + c->out_sent,
				 c->out_len - c->out_sent, MSG_NOSIGNAL);

		if (n > 0) {
			c->out_sent += (size_t)n;
			c->last_active_ms = kvf__now_ms();
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
	}
	c->out_len = c->out_sent = 0;
	if (c->close_after_write && !c->draining) {
		if (c->peer_eof || shutdown(c->fd, SHUT_WR) < 0)
			return false;
		c->draining = true;
		c->drain_until_ms = kvf__now_ms() + HTTP_DRAIN_MS;
	}
	return true;
}

/* Handle one connection's poll events; false when it should be closed. */
static bool conn_serve(struct kvf_http_server *srv, struct http_conn *c,
		       short revents)
{
	if (c->draining)
		return (revents & POLLIN) && conn_drain(c) &&
		       kvf__now_ms() < c->drain_until_ms;
	if (revents & POLLIN) {
		if (!conn_read(srv, c))
			return false;
		conn_process(srv, c);
		if (c->peer_eof) {
			if (c->out_len == 0)
				return false;
			c->close_after_write = true;
		}
	} else if (revents & (POLLERR | POLLHUP | POLLNVAL)) {
		return false;
	}
	/*
	 * Write, and while the socket takes every answer whole, answer the
	 * next pipelined request already buffered (no event will announce
	 * it).
	 */
	while (c->out_len) {
		if (!conn_write(c))
			return false;
		if (c->out_len)
			break; /* socket full: POLLOUT resumes */
		conn_process(srv, c);
	}
	/* To close with nothing to send: an answer that could not be queued. */
	return !(c->close_after_write && !c->draining && !c->out_len);
}

static void drop_conn(struct kvf_http_server *srv, unsigned i);

/*
 * All slots taken and a new client waits: close the connection that has
 * been sending one head for the longest (a slow sender), else the one
 * idle between requests for the longest. Connections with an answer in
 * flight, a body arriving or draining are kept. False if none qualifies
 * (the new client then gets 503).
 */
static bool evict_one(struct kvf_http_server *srv)
{
	unsigned best = HTTP_MAX_CONNS;
	uint64_t best_t = UINT64_MAX;
	bool best_head = false;

	for (unsigned i = 0; i < srv->nconns; i++) {
		const struct http_conn *c = srv->conns[i];
		bool head = c->head_start_ms != 0;
		uint64_t t = head ? c->head_start_ms : c->last_active_ms;

		if (c->out_len || c->draining || c->close_after_write ||
		    (!head && c->in_len))
			continue;
		if ((head && !best_head) || (head == best_head && t < best_t)) {
			best = i;
			best_t = t;
			best_head = head;
		}
	}
	if (best == HTTP_MAX_CONNS)
		return false;
	drop_conn(srv, best);
	return true;
}

static void accept_all(struct kvf_http_server *srv)
{
	static const char busy[] =
		"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n"
		"Connection: close\r\n\r\n";

	for (;;) {
		int fd = accept4(srv->listen_fd, NULL, NULL,
				 SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct http_conn *c;

		if (fd < 0) {
			/*
			 * Out of descriptors or memory: the listener stays
			 * readable, so stop polling it for a moment rather
			 * than spin. Other errors concern one connection.
			 */
			if (errno == EMFILE || errno == ENFILE ||
			    errno == ENOBUFS || errno == ENOMEM)
				srv->accept_resume_ms =
					kvf__now_ms() + HTTP_ACCEPT_BACKOFF_MS;
			return;
		}
		if (srv->nconns == HTTP_MAX_CONNS && !evict_one(srv)) {
			ssize_t ignored =
				send(fd, busy, sizeof(busy) - 1, MSG_NOSIGNAL);

			(void)ignored;
			close(fd);
			continue;
		}
		c = calloc(1, sizeof(*c));
		if (!c) {
			close(fd);
			continue;
		}
		c->fd = fd;
		c->last_active_ms = kvf__now_ms();
		srv->conns[srv->nconns++] = c;
	}
}

static void drop_conn(struct kvf_http_server *srv, unsigned i)
{
	srv->in_bytes -= srv->conns[i]->in_cap;
	conn_free(srv->conns[i]);
	srv->conns[i] = srv->conns[--srv->nconns];
}

/*
 * Milliseconds from @since to @now, 0 when @since is later: serving a
 * connection stamps it after @now was read, and an unsigned difference
 * would then wrap and look like an expired deadline.
 */
static uint64_t ms_since(uint64_t now, uint64_t since)
{
	return now > since ? now - since : 0;
}

static void *server_thread(void *arg)
{
	struct kvf_http_server *srv = arg;
	struct pollfd fds[HTTP_MAX_CONNS + 2];
	struct http_conn *polled[HTTP_MAX_CONNS];

	for (;;) {
		unsigned n = srv->nconns, i;
		uint64_t now;

		fds[0] = (struct pollfd){.fd = srv->wake_fd, .events = POLLIN};
		/* A negative fd is ignored by poll(): accepting paused. */
		fds[1] = (struct pollfd){.fd = kvf__now_ms() < srv->accept_resume_ms
						       ? -1
						       : srv->listen_fd,
					 .events = POLLIN};
		for (i = 0; i < n; i++) {
			struct http_conn *c = srv->conns[i];

			polled[i] = c;
			fds[i + 2] = (struct pollfd){
				.fd = c->fd,
				.events = c->out_len ? POLLOUT : POLLIN,
			};
		}
		if (poll(fds, n + 2, srv->poll_ms) < 0 && errno != EINTR)
			break;
		if (fds[0].revents)
			break;
		/* Serve before accepting: the array may be reordered by drops.
		 */
		now = kvf__now_ms();
		for (i = n; i-- > 0;) {
			struct http_conn *c = polled[i];
			bool keep = true;

			if (fds[i + 2].revents)
				keep = conn_serve(srv, c, fds[i + 2].revents);
			else if (c->draining)
				keep = now < c->drain_until_ms;
			else if (ms_since(now, c->last_active_ms) > srv->idle_ms)
				keep = false;
			/* Trickling a head keeps a connection active, not
			 * alive: its head has a deadline of its own. */
			if (keep && c->head_start_ms &&
			    ms_since(now, c->head_start_ms) > srv->head_ms)
				keep = false;
			if (!keep)
				drop_conn(srv, i);
		}
		if (fds[1].revents & POLLIN)
			accept_all(srv);
	}
	return NULL;
}

/* ---- lifecycle ---- */

/*
 * Resolve @opts->host (numeric, or a name such as "localhost": the first
 * address getaddrinfo() gives) and listen there.
 */
static int bind_listener(const struct kvf_http_options *opts, int *fd_out,
			 uint16_t *port_out)
{
	const char *host = opts->host && *opts->host ? opts->host : "127.0.0.1";
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
	struct addrinfo *ai;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char port[8];
	int fd, one = 1, ret;

	snprintf(port, sizeof(port), "%u", opts->port);
	if (getaddrinfo(host, port, &hints, &ai) != 0)
		return KVF_ERR_INVALID_ARGUMENT;
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
		    0);
	if (fd < 0) {
		ret = KVF_ERR_IO;
		goto err_free;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
		ret = errno == EADDRINUSE || errno == EACCES ? KVF_ERR_BUSY
							     : KVF_ERR_IO;
		goto err_close;
	}
	if (listen(fd, 128) < 0 ||
	    getsockname(fd, (struct sockaddr *)&ss, &sl) < 0) {
		ret = KVF_ERR_IO;
		goto err_close;
	}
	*port_out = ntohs(ss.ss_family == AF_INET
				  ? ((struct sockaddr_in *)&ss)->sin_port
				  : ((struct sockaddr_in6 *)&ss)->sin6_port);
	*fd_out = fd;
	freeaddrinfo(ai);
	return KVF_OK;

err_close:
	close(fd);
err_free:
	freeaddrinfo(ai);
	return ret;
}

static int server_start(const struct kvf_http_options *opts,
			http_route_fn route, size_t max_body,
			struct kvf_http_server *srv)
{
	int ret;

	srv->route = route;
	srv->max_body = max_body;
	srv->idle_ms = opts->idle_timeout_ms ? opts->idle_timeout_ms
					     : HTTP_IDLE_MS_DEFAULT;
	srv->head_ms = srv->idle_ms < HTTP_HEAD_MS ? srv->idle_ms : HTTP_HEAD_MS;
	srv->poll_ms = srv->idle_ms / 4 < HTTP_POLL_MS
			       ? (int)srv->idle_ms / 4 + 1
			       : HTTP_POLL_MS;
	ret = bind_listener(opts, &srv->listen_fd, &srv->port);
	if (ret != KVF_OK)
		return ret;
	srv->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (srv->wake_fd < 0) {
		ret = KVF_ERR_IO;
		goto err_listen;
	}
	if (pthread_create(&srv->thread, NULL, server_thread, srv)) {
		ret = KVF_ERR_NO_MEMORY;
		goto err_wake;
	}
	return KVF_OK;

err_wake:
	close(srv->wake_fd);
err_listen:
	close(srv->listen_fd);
	return ret;
}

uint16_t kvf_http_port(const struct kvf_http_server *srv)
{
	return srv ? srv->port : 0;
}

void kvf_http_stop(struct kvf_http_server *srv)
{
	uint64_t one = 1;
	ssize_t ignored;

	if (!srv)
		return;
	ignored = write(srv->wake_fd, &one, sizeof(one));
	(void)ignored;
	pthread_join(srv->thread, NULL);
	while (srv->nconns)
		drop_conn(srv, srv->nconns - 1);
	close(srv->listen_fd);
	close(srv->wake_fd);
	kvf__metastore_free(srv->store);
	free(srv);
}

/* ---- routes shared by both servers ---- */

static bool path_is(const struct http_request *req, const char *path)
{
	return strlen(path) == req->path_len &&
	       !memcmp(req->path, path, req->path_len);
}

static void not_found(struct http_response *resp)
{
	resp->content_type = "text/plain";
	set_text(resp, 404, "not found");
}

static void method_not_allowed(struct http_response *resp, const char *allow)
{
	resp->content_type = "text/plain";
	resp->allow = allow;
	set_text(resp, 405, "method not allowed");
}

/* ---- the metrics server ---- */

typedef int (*render_fn)(struct kvf_metrics *m, char **out, size_t *len);

static void render_into(struct kvf_metrics *m, render_fn render,
			const char *content_type, struct http_response *resp)
{
	if (render(m, &resp->body, &resp->body_len) != KVF_OK) {
		resp->content_type = "text/plain";
		set_text(resp, 500, "out of memory");
		return;
	}
	resp->status = 200;
	resp->content_type = content_type;
}

static void metrics_route(struct kvf_http_server *srv,
			  const struct http_request *req,
			  struct http_response *resp)
{
	static const struct {
		const char *path;
		render_fn render;
		const char *content_type;
	} pages[] = {
		{"/metrics", kvf_metrics_render_prometheus,
		 "text/plain; version=0.0.4"},
		{"/metrics/summary", kvf_metrics_render_summary,
		 "text/plain; charset=utf-8"},
		{"/health", kvf_metrics_render_health,
		 "application/json; charset=utf-8"},
	};

	for (size_t i = 0; i < sizeof(pages) / sizeof(pages[0]); i++) {
		if (!path_is(req, pages[i].path))
			continue;
		if (req->method != HTTP_GET && req->method != HTTP_HEAD) {
			method_not_allowed(resp, "GET, HEAD");
			return;
		}
		render_into(srv->metrics, pages[i].render,
			    pages[i].content_type, resp);
		return;
	}
	not_found(resp);
}

int kvf_http_metrics_start(const struct kvf_http_options *opts,
			   struct kvf_metrics *metrics,
			   struct kvf_http_server **out)
{
	struct kvf_http_server *srv;
	int ret;

	if (!opts || !metrics || !out)
		return KVF_ERR_INVALID_ARGUMENT;
	srv = calloc(1, sizeof(*srv));
	if (!srv)
		return KVF_ERR_NO_MEMORY;
	srv->metrics = metrics;
	ret = server_start(opts, metrics_route, HTTP_METRICS_MAX_BODY, srv);
	if (ret != KVF_OK) {
		free(srv);
		return ret;
	}
	*out = srv;
	return KVF_OK;
}

/* ---- the metadata server ---- */

static int hex_digit(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

/*
 * URL-decode @n bytes of @src into @dst (at least @n bytes): %XX escapes
 * and '+' for a space, as form-encoded queries write them. False on a
 * broken escape.
 */
static bool url_decode(const char *src, size_t n, char *dst, size_t *out_len)
{
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		if (src[i] == '+') {
			dst[o++] = ' ';
		} else if (src[i] != '%') {
			dst[o++] = src[i];
		} else {
			int hi = i + 2 < n ? hex_digit(src[i + 1]) : -1;
			int lo = i + 2 < n ? hex_digit(src[i + 2]) : -1;

			if (hi < 0 || lo < 0)
				return false;
			dst[o++] = (char)(hi << 4 | lo);
			i += 2;
		}
	}
	*out_len = o;
	return true;
}

/*
 * The decoded "key" parameter of @req, malloc()ed into @key. Returns
 * false with @key NULL when it is missing, empty or badly escaped, which
 * upstream answers alike.
 */
static bool query_key(const struct http_request *req, char **key, size_t *klen)
{
	const char *p = req->query, *end = req->query + req->query_len;

	*key = NULL;
	while (p < end) {
		const char *amp = memchr(p, '&', (size_t)(end - p));
		const char *stop = amp ? amp : end;

		if (stop - p >= 4 && !memcmp(p, "key=", 4)) {
			size_t n = (size_t)(stop - p - 4);

			*key = malloc(n + 1);
			if (!*key || !url_decode(p + 4, n, *key, klen) ||
			    *klen == 0) {
				free(*key);
				*key = NULL;
				return false;
			}
			return true;
		}
		p = stop + (amp ? 1 : 0);
	}
	return false;
}

static void metadata_get(struct kvf_metastore *s, const char *key, size_t klen,
			 struct http_response *resp)
{
	int ret =
		kvf__metastore_get(s, key, klen, &resp->body, &resp->body_len);

	if (ret == KVF_OK) {
		resp->status = 200;
		resp->content_type = "application/json";
	} else if (ret == KVF_ERR_OBJECT_NOT_FOUND) {
		set_text(resp, 404, "metadata not found");
	} else {
		set_text(resp, 500, "out of memory");
	}
}

static void metadata_put(struct kvf_metastore *s, const char *key, size_t klen,
			 const struct http_request *req,
			 struct http_response *resp)
{
	int ret = kvf__metastore_put(s, key, klen, req->body, req->body_len);

	if (ret == KVF_OK)
		set_text(resp, 200, "metadata updated");
	else if (ret == KVF_ERR_OBJECT_ALREADY_EXISTS)
		set_text(resp, 400, "Duplicate rpc_meta key not allowed");
	else if (ret == KVF_ERR_NO_SPACE)
		set_text(resp, 507, "metadata store full");
	else
		set_text(resp, 500, "out of memory");
}

static void metadata_delete(struct kvf_metastore *s, const char *key,
			    size_t klen, struct http_response *resp)
{
	if (kvf__metastore_remove(s, key, klen) == KVF_OK)
		set_text(resp, 200, "metadata deleted");
	else
		set_text(resp, 404, "metadata not found");
}

static void metadata_route(struct kvf_http_server *srv,
			   const struct http_request *req,
			   struct http_response *resp)
{
	char *key;
	size_t klen = 0;

	if (path_is(req, "/health")) {
		if (req->method == HTTP_GET || req->method == HTTP_HEAD)
			set_text(resp, 200, "OK");
		else
			method_not_allowed(resp, "GET, HEAD");
		return;
	}
	if (!path_is(req, "/metadata")) {
		not_found(resp);
		return;
	}
	if (req->method != HTTP_GET && req->method != HTTP_HEAD &&
	    req->method != HTTP_PUT && req->method != HTTP_DELETE) {
		method_not_allowed(resp, "GET, HEAD, PUT, DELETE");
		return;
	}
	if (!query_key(req, &key, &klen)) {
		set_text(resp, 400, "Missing key parameter");
		return;
	}
	if (req->method == HTTP_PUT)
		metadata_put(srv->store, key, klen, req, resp);
	else if (req->method == HTTP_DELETE)
		metadata_delete(srv->store, key, klen, resp);
	else
		metadata_get(srv->store, key, klen, resp);
	free(key);
}

struct kvf_metastore *kvf_http_metadata_store(struct kvf_http_server *srv)
{
	return srv->store;
}

int kvf_http_metadata_start(const struct kvf_http_options *opts,
			    struct kvf_http_server **out)
{
	struct kvf_http_server *srv;
	int ret;

	if (!opts || !out)
		return KVF_ERR_INVALID_ARGUMENT;
	srv = calloc(1, sizeof(*srv));
	if (!srv)
		return KVF_ERR_NO_MEMORY;
	ret = kvf__metastore_new(&srv->store);
	if (ret != KVF_OK)
		goto err_free;
	kvf__metastore_set_limit(srv->store, opts->max_store_bytes);
	if (opts->on_change)
		kvf__metastore_set_hook(srv->store, opts->on_change,
					opts->on_change_ctx);
	ret = server_start(opts, metadata_route, HTTP_METADATA_MAX_BODY, srv);
	if (ret != KVF_OK)
		goto err_store;
	*out = srv;
	return KVF_OK;

err_store:
	kvf__metastore_free(srv->store);
err_free:
	free(srv);
	return ret;
}
