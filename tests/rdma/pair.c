/* SPDX-License-Identifier: MIT */
/*
 * tests/rdma/pair.c - see pair.h. The fixture reader knows just enough of
 * index.jsonl: in each line, the first "hex" after "request" and the first
 * after "response" (the capture tool writes header, hex, body in that
 * order).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvforge/status.h>

#include "rdma/fake.h"
#include "tests/rdma/pair.h"

#define REQ_HDR 20
#define RESP_HDR 16
#define STALL_TURNS 100000

static uint32_t le32(const uint8_t *p)
{
	return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

/* Decode a hex string into a fresh buffer. */
static int unhex(const char *hex, uint8_t **out, size_t *len)
{
	size_t n = strlen(hex) / 2;

	if (strlen(hex) % 2)
		return -1;
	*out = malloc(n ? n : 1);
	if (!*out)
		return -1;
	for (size_t i = 0; i < n; i++)
		if (sscanf(hex + 2 * i, "%2hhx", &(*out)[i]) != 1)
			return -1;
	*len = n;
	return 0;
}

/* Decode the "hex" string that follows @key in @line. */
static int hex_after(const char *line, const char *key, uint8_t **out,
		     size_t *len)
{
	const char *p = strstr(line, key), *end;
	char *hex;
	int ret;

	if (!p || !(p = strstr(p, "\"hex\": \"")))
		return -1;
	p += strlen("\"hex\": \"");
	end = strchr(p, '"');
	if (!end)
		return -1;
	hex = strndup(p, (size_t)(end - p));
	if (!hex)
		return -1;
	ret = unhex(hex, out, len);
	free(hex);
	return ret;
}

static int parse_line(const char *line, struct fixture *f)
{
	const char *r = strstr(line, "\"rpc\": \"");

	memset(f, 0, sizeof(*f));
	if (r)
		sscanf(r + strlen("\"rpc\": \""), "%47[^\"]", f->rpc);
	if (hex_after(line, "\"request\"", &f->req, &f->req_len) ||
	    hex_after(line, "\"response\"", &f->resp, &f->resp_len))
		return -1;
	return 0;
}

int fixtures_load(const char *dir, struct fixture_set *set)
{
	char path[512], *line = NULL;
	size_t cap = 0;
	FILE *fp;
	int ret = 0;

	snprintf(path, sizeof(path), "%s/%s/index.jsonl", KVF_RDMA_FIXTURES,
		 dir);
	fp = fopen(path, "r");
	if (!fp)
		return -1;
	memset(set, 0, sizeof(*set));
	while (getline(&line, &cap, fp) > 0) {
		struct fixture *f = realloc(set->f, (set->n + 1) * sizeof(*f));

		if (!f) {
			ret = -1;
			break;
		}
		set->f = f;
		if (parse_line(line, &f[set->n])) {
			free(f[set->n].req);
			free(f[set->n].resp);
			ret = -1;
			break;
		}
		set->n++;
	}
	free(line);
	fclose(fp);
	if (!set->n)
		ret = -1;
	return ret;
}

void fixtures_free(struct fixture_set *set)
{
	for (size_t i = 0; i < set->n; i++) {
		free(set->f[i].req);
		free(set->f[i].resp);
	}
	free(set->f);
	memset(set, 0, sizeof(*set));
}

int fake_dev_setup(void **state)
{
	static struct kvf__rdma_dev *dev;
	char why[160];

	if (kvf__rdma_dev_open(kvf__verbs_fake(), &dev, why, sizeof(why)))
		return -1;
	*state = dev;
	return 0;
}

int fake_dev_teardown(void **state)
{
	kvf__rdma_dev_close(*state);
	return kvf__fake_live_objects() ? -1 : 0;
}

int pair_connect(struct kvf__rdma_dev *dev, const struct kvf__rdma_cfg *ccfg,
		 const struct kvf__rdma_cfg *scfg, struct kvf__rdma_stream **c,
		 struct kvf__rdma_stream **s)
{
	uint8_t hello[KVF_RDMA_HS_LEN], reply[KVF_RDMA_HS_LEN];
	struct kvf__rdma_hs hs;
	int ret = kvf__rdma_stream_create(dev, ccfg, c);

	if (ret)
		return ret;
	kvf__rdma_stream_local(*c, &hs);
	kvf__rdma_hs_encode(&hs, hello);
	ret = kvf__rdma_accept(dev, scfg, hello, reply, s);
	if (!ret)
		ret = kvf__rdma_hs_decode(reply, &hs);
	if (!ret)
		ret = kvf__rdma_stream_connect(*c, &hs);
	if (ret) {
		kvf__rdma_stream_close(*c);
		*c = NULL;
	}
	return ret;
}

/* ---- queues ---------------------------------------------------------- */

void outq_push(struct outq *q, const void *p, size_t len)
{
	if (q->head + q->n >= OUTQ_MAX)
		abort(); /* test bug: queue sized for the fixtures */
	q->iov[q->head + q->n].iov_base = (void *)p;
	q->iov[q->head + q->n].iov_len = len;
	q->n++;
}

bool outq_empty(const struct outq *q)
{
	return !q->n;
}

int outq_flush(struct outq *q, struct kvf__rdma_stream *s)
{
	while (q->n) {
		struct iovec v[64];
		int cnt = q->n < 64 ? (int)q->n : 64;
		ssize_t w;

		memcpy(v, &q->iov[q->head], cnt * sizeof(*v));
		v[0].iov_base = (uint8_t *)v[0].iov_base + q->off;
		v[0].iov_len -= q->off;
		w = kvf__rdma_stream_writev(s, v, cnt);
		if (w == KVF_ERR_BUSY)
			return 0;
		if (w < 0)
			return (int)w;
		while (w > 0) {
			size_t left = q->iov[q->head].iov_len - q->off;

			if ((size_t)w < left) {
				q->off += (size_t)w;
				break;
			}
			w -= (ssize_t)left;
			q->off = 0;
			q->head++;
			q->n--;
		}
	}
	q->head = 0;
	return 0;
}

int inq_fill(struct inq *q, struct kvf__rdma_stream *s, size_t chunk)
{
	for (;;) {
		ssize_t r;

		if (q->cap - q->len < chunk) {
			size_t cap = q->cap ? q->cap * 2 : 4096;
			uint8_t *b;

			while (cap - q->len < chunk)
				cap *= 2;
			b = realloc(q->buf, cap);
			if (!b)
				return KVF_ERR_NO_MEMORY;
			q->buf = b;
			q->cap = cap;
		}
		r = kvf__rdma_stream_read(s, q->buf + q->len, chunk);
		if (r == KVF_ERR_BUSY)
			return 0;
		if (r < 0)
			return (int)r;
		if (r == 0) {
			q->eof = true;
			return 0;
		}
		q->len += (size_t)r;
	}
}

size_t inq_frame(const struct inq *q, bool request)
{
	size_t hdr = request ? REQ_HDR : RESP_HDR, total;

	if (q->len < hdr)
		return 0;
	total = hdr + le32(q->buf + hdr - 8) + le32(q->buf + hdr - 4);
	return q->len >= total ? total : 0;
}

void inq_drop(struct inq *q, size_t n)
{
	memmove(q->buf, q->buf + n, q->len - n);
	q->len -= n;
}

void inq_free(struct inq *q)
{
	free(q->buf);
	memset(q, 0, sizeof(*q));
}

/* ---- replay ---------------------------------------------------------- */

void replay_init(struct replay *r, struct kvf__rdma_stream *c,
		 struct kvf__rdma_stream *s, const struct fixture_set *set,
		 size_t read_chunk)
{
	memset(r, 0, sizeof(*r));
	r->c = c;
	r->s = s;
	r->set = set;
	r->read_chunk = read_chunk;
	/* The client writes header and body as one buffer, pipelined. */
	for (size_t i = 0; i < set->n; i++)
		outq_push(&r->cout, set->f[i].req, set->f[i].req_len);
}

int replay_step_client(struct replay *r)
{
	size_t len;

	if (kvf__rdma_stream_progress(r->c) || outq_flush(&r->cout, r->c) ||
	    inq_fill(&r->cin, r->c, r->read_chunk))
		return -1;
	while ((len = inq_frame(&r->cin, false))) {
		const struct fixture *f;

		if (r->checked == r->set->n)
			return -1; /* more responses than requests */
		f = &r->set->f[r->checked++];

		if (len != f->resp_len || memcmp(r->cin.buf, f->resp, len))
			r->bad_client++;
		inq_drop(&r->cin, len);
	}
	return r->checked < r->set->n ? 1 : 0;
}

int replay_step_server(struct replay *r)
{
	size_t len;

	if (kvf__rdma_stream_progress(r->s) ||
	    inq_fill(&r->sin, r->s, r->read_chunk))
		return -1;
	while ((len = inq_frame(&r->sin, true))) {
		const struct fixture *f;

		if (r->answered == r->set->n)
			return -1; /* more requests than were sent */
		f = &r->set->f[r->answered++];

		if (len != f->req_len || memcmp(r->sin.buf, f->req, len))
			r->bad_server++;
		inq_drop(&r->sin, len);
		/* Header and body as two buffers in one write. */
		outq_push(&r->sout, f->resp, RESP_HDR);
		if (f->resp_len > RESP_HDR)
			outq_push(&r->sout, f->resp + RESP_HDR,
				  f->resp_len - RESP_HDR);
	}
	return outq_flush(&r->sout, r->s) ? -1 : 1;
}

long replay_run(struct replay *r)
{
	for (long turn = 0; turn < STALL_TURNS; turn++) {
		int c = replay_step_client(r);

		if (c <= 0)
			return c < 0 ? -1
				     : (long)(r->bad_client + r->bad_server);
		if (replay_step_server(r) < 0)
			return -1;
	}
	return -1;
}

void replay_free(struct replay *r)
{
	inq_free(&r->cin);
	inq_free(&r->sin);
}
