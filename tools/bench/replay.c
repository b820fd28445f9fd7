/* SPDX-License-Identifier: MIT */
/*
 * tools/bench/replay.c - a Mooncake request trace, replayed as SGLang
 * HiCache with its Mooncake backend drives a store.
 *
 * HiCache (python/sglang/srt/mem_cache/storage/mooncake_store/) names a
 * page's objects "<page hash>_<rank>_k" and "..._v": one K and one V
 * object per tensor-parallel rank, each holding that rank's share of the
 * page's KV bytes. Looking a prompt up, it asks BatchExistKey about its
 * pages' keys, takes the leading pages whose keys all exist (a page after
 * a miss is no use: its KV depends on the missing one), and reads them
 * (BatchGetReplicaList); after prefill it writes back the pages from there
 * on whose keys the store does not hold (BatchPutStart, BatchPutEnd). One
 * trace block is one page here (--page-tokens, 512 by default, as the
 * traces hash).
 *
 * Accounting. A block is served when it is in the served prefix; the hit
 * ratio is served blocks over blocks asked for, the figure
 * tools/bench/trace-sim.py computes offline for exact LRU and Belady's
 * MIN. With room for every block it must equal the trace's reuse ratio
 * (bench_trace.reuse_hits over its blocks), which the loader computes
 * independently of any store. Evictions are counted at the end without
 * asking the store how: every key ever put either is still there (a final
 * BatchExistKey sweep) or was evicted.
 *
 * Keys are 64 hex digits of a hash of (salt, copy, block id), so copies
 * are disjoint and a run against a master with a fresh salt never meets
 * an earlier run's objects. The replay is single-threaded, one call at a
 * time, as one HiCache rank's storage thread is.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/bench/replay.h"

#define KEY_CAP 80

/* ---- a set of ids (open addressing; an id is stored as id + 1) ---- */

struct idset {
	uint64_t *slot;
	size_t mask, n;
};

static int idset_init(struct idset *s, size_t expect)
{
	size_t cap = 1024;

	while (cap < expect * 2)
		cap <<= 1;
	s->slot = calloc(cap, sizeof(*s->slot));
	s->mask = cap - 1;
	s->n = 0;
	return s->slot ? KVF_OK : KVF_ERR_NO_MEMORY;
}

static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

/* Add @id; true if it was new. The set never fills: sized for every id. */
static bool idset_add(struct idset *s, uint64_t id)
{
	size_t i = mix(id) & s->mask;

	while (s->slot[i]) {
		if (s->slot[i] == id + 1)
			return false;
		i = (i + 1) & s->mask;
	}
	s->slot[i] = id + 1;
	s->n++;
	return true;
}

/* ---- the trace file ---- */

struct parser {
	const char *p;
	const char *why;
};

static void skip_ws(struct parser *ps)
{
	while (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\r' ||
	       *ps->p == '\n')
		ps->p++;
}

static bool expect(struct parser *ps, char c, const char *why)
{
	skip_ws(ps);
	if (*ps->p != c) {
		ps->why = why;
		return false;
	}
	ps->p++;
	return true;
}

/* A JSON number; *@integer tells whether it is a non-negative integer. */
static bool parse_number(struct parser *ps, uint64_t *v, bool *integer)
{
	const char *s;
	char *end;

	skip_ws(ps);
	s = ps->p;
	if (*s == '-')
		s++;
	if (!isdigit((unsigned char)*s)) {
		ps->why = "a number expected";
		return false;
	}
	*integer = *ps->p != '-';
	while (isdigit((unsigned char)*s))
		s++;
	if (*s == '.' || *s == 'e' || *s == 'E') {
		*integer = false;
		strtod(ps->p, &end);
		s = end;
	}
	if (*integer) {
		errno = 0;
		*v = strtoull(ps->p, &end, 10);
		if (errno == ERANGE || *v == UINT64_MAX) {
			ps->why = "number out of range";
			return false;
		}
	}
	ps->p = s;
	return true;
}

struct grow {
	uint64_t *v;
	size_t n, cap;
};

static int grow_push(struct grow *g, uint64_t x)
{
	if (g->n == g->cap) {
		size_t cap = g->cap ? g->cap * 2 : 4096;
		uint64_t *v = realloc(g->v, cap * sizeof(*v));

		if (!v)
			return KVF_ERR_NO_MEMORY;
		g->v = v;
		g->cap = cap;
	}
	g->v[g->n++] = x;
	return KVF_OK;
}

/*
 * One line: {"timestamp": N, ..., "hash_ids": [N, ...], ...}. The ids are
 * appended to @ids; false with ps->why set on a malformed line (ids
 * appended before the fault are the caller's to drop).
 */
static bool parse_line(struct parser *ps, uint64_t *ts, struct grow *ids,
		       int *oom)
{
	bool have_ts = false, have_ids = false, integer;
	uint64_t v;

	if (!expect(ps, '{', "'{' expected"))
		return false;
	skip_ws(ps);
	if (*ps->p == '}') {
		ps->why = "no \"timestamp\" and no \"hash_ids\"";
		return false;
	}
	for (;;) {
		const char *name;
		size_t len;

		if (!expect(ps, '"', "a member name expected"))
			return false;
		name = ps->p;
		while (*ps->p && *ps->p != '"' && *ps->p != '\\')
			ps->p++;
		if (*ps->p != '"') {
			ps->why = "unterminated or escaped member name";
			return false;
		}
		len = (size_t)(ps->p++ - name);
		if (!expect(ps, ':', "':' expected"))
			return false;
		if (len == 8 && !memcmp(name, "hash_ids", 8)) {
			if (have_ids) {
				ps->why = "\"hash_ids\" twice";
				return false;
			}
			have_ids = true;
			if (!expect(ps, '[', "\"hash_ids\" must be a list"))
				return false;
			skip_ws(ps);
			if (*ps->p == ']') {
				ps->p++;
			} else {
				do {
					if (!parse_number(ps, &v, &integer))
						return false;
					if (!integer) {
						ps->why = "a block id must be a "
							  "non-negative integer";
						return false;
					}
					if (grow_push(ids, v)) {
						*oom = 1;
						ps->why = "out of memory";
						return false;
					}
					skip_ws(ps);
				} while (*ps->p == ',' && ps->p++);
				if (!expect(ps, ']', "',' or ']' expected"))
					return false;
			}
		} else {
			bool is_ts = len == 9 && !memcmp(name, "timestamp", 9);

			if (!parse_number(ps, &v, &integer)) {
				ps->why = is_ts ? "\"timestamp\" must be a number"
						: "members other than "
						  "\"hash_ids\" must be numbers";
				return false;
			}
			if (is_ts) {
				if (!integer || have_ts) {
					ps->why = have_ts
						? "\"timestamp\" twice"
						: "\"timestamp\" must be a "
						  "non-negative integer (ms)";
					return false;
				}
				have_ts = true;
				*ts = v;
			}
		}
		skip_ws(ps);
		if (*ps->p == ',') {
			ps->p++;
			continue;
		}
		if (!expect(ps, '}', "',' or '}' expected"))
			return false;
		break;
	}
	skip_ws(ps);
	if (*ps->p) {
		ps->why = "text after the object";
		return false;
	}
	if (!have_ts || !have_ids) {
		ps->why = have_ts ? "no \"hash_ids\"" : "no \"timestamp\"";
		return false;
	}
	return true;
}

void bench_trace_free(struct bench_trace *t)
{
	free(t->ts_ms);
	free(t->first);
	free(t->len);
	free(t->ids);
	free(t->unique);
	memset(t, 0, sizeof(*t));
}

static int fail(char *err, size_t errlen, int ret, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int fail(char *err, size_t errlen, int ret, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return ret;
}

/* Unique ids and the blocks a store holding everything serves. */
static int count_reuse(struct bench_trace *t)
{
	struct idset seen;
	int ret = idset_init(&seen, t->nr_ids);

	if (ret)
		return ret;
	t->unique = malloc((t->nr_ids ? t->nr_ids : 1) * sizeof(*t->unique));
	if (!t->unique) {
		free(seen.slot);
		return KVF_ERR_NO_MEMORY;
	}
	for (size_t i = 0; i < t->nr_requests; i++) {
		bool prefix = true;

		for (uint32_t j = 0; j < t->len[i]; j++) {
			uint64_t id = t->ids[t->first[i] + j];

			if (!idset_add(&seen, id)) {
				t->reuse_hits += prefix;
				continue;
			}
			prefix = false;
			t->unique[t->nr_unique++] = id;
		}
	}
	free(seen.slot);
	return KVF_OK;
}

int bench_trace_load(const char *path, struct bench_trace *t, char *err,
		     size_t errlen)
{
	struct grow ts = { 0 }, first = { 0 }, len = { 0 }, ids = { 0 };
	char *line = NULL;
	size_t cap = 0, lineno = 0;
	FILE *f = fopen(path, "r");
	int ret = KVF_OK, oom = 0;

	memset(t, 0, sizeof(*t));
	if (!f)
		return fail(err, errlen, KVF_ERR_IO, "%s: %s", path,
			    strerror(errno));
	while (getline(&line, &cap, f) >= 0) {
		struct parser ps = { .p = line };
		size_t at = ids.n;
		uint64_t stamp = 0;

		lineno++;
		skip_ws(&ps);
		if (!*ps.p)
			continue;
		if (!parse_line(&ps, &stamp, &ids, &oom)) {
			ret = fail(err, errlen,
				   oom ? KVF_ERR_NO_MEMORY
				       : KVF_ERR_INVALID_ARGUMENT,
				   "%s:%zu: malformed trace line: %s", path,
				   lineno, ps.why);
			goto out;
		}
		if (ts.n && stamp < ts.v[ts.n - 1]) {
			ret = fail(err, errlen, KVF_ERR_INVALID_ARGUMENT,
				   "%s:%zu: malformed trace line: timestamp "
				   "%llu goes back (previous %llu)",
				   path, lineno, (unsigned long long)stamp,
				   (unsigned long long)ts.v[ts.n - 1]);
			goto out;
		}
		if (ids.n - at > UINT32_MAX / 256) {
			ret = fail(err, errlen, KVF_ERR_INVALID_ARGUMENT,
				   "%s:%zu: malformed trace line: too many "
				   "blocks", path, lineno);
			goto out;
		}
		if (grow_push(&ts, stamp) || grow_push(&first, at) ||
		    grow_push(&len, ids.n - at)) {
			ret = fail(err, errlen, KVF_ERR_NO_MEMORY,
				   "out of memory");
			goto out;
		}
	}
	if (ferror(f)) {
		ret = fail(err, errlen, KVF_ERR_IO, "%s: read error", path);
		goto out;
	}
	if (!ts.n) {
		ret = fail(err, errlen, KVF_ERR_INVALID_ARGUMENT,
			   "%s: no requests in the trace", path);
		goto out;
	}
	t->nr_requests = ts.n;
	t->ts_ms = ts.v;
	t->ids = ids.v;
	t->nr_ids = ids.n;
	t->first = malloc(first.n * sizeof(*t->first));
	t->len = malloc(len.n * sizeof(*t->len));
	ts.v = ids.v = NULL;
	if (!t->first || !t->len) {
		ret = fail(err, errlen, KVF_ERR_NO_MEMORY, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < t->nr_requests; i++) {
		t->first[i] = (size_t)first.v[i];
		t->len[i] = (uint32_t)len.v[i];
		if (t->len[i] > t->max_len)
			t->max_len = t->len[i];
	}
	ret = count_reuse(t);
	if (ret)
		fail(err, errlen, ret, "out of memory");
out:
	if (ret)
		bench_trace_free(t);
	free(ts.v);
	free(first.v);
	free(len.v);
	free(ids.v);
	free(line);
	fclose(f);
	return ret;
}

/* ---- the replay ---- */

struct replay {
	const struct bench_trace *t;
	const struct trace_params *p;
	const struct trace_target *tg;
	struct trace_stats *s;
	uint32_t kpb; /* keys per block */
	char *keybuf;
	struct kvf_key *keys, *sub;
	uint64_t *sizes;
	int32_t *codes, *sub_codes;
	size_t cap_calls[TRACE_NR_RPCS];
};

/* Key @k (rank k / 2, K or V) of block @id of copy @copy into @buf. */
static size_t block_key(const struct trace_params *p, uint32_t copy,
			uint64_t id, uint32_t k, char *buf)
{
	uint64_t h = mix(p->salt ^ mix(id) ^ ((uint64_t)copy << 56));
	int n = snprintf(buf, KEY_CAP, "%016llx%016llx%016llx%016llx_%u_%c",
			 (unsigned long long)h,
			 (unsigned long long)mix(h + 1),
			 (unsigned long long)mix(h + 2),
			 (unsigned long long)mix(h + 3), k / 2,
			 k % 2 ? 'v' : 'k');

	return n < 0 ? 0 : (size_t)n;
}

static int lat_add(struct replay *rp, enum bench_rpc op, uint64_t ns)
{
	struct trace_stats *s = rp->s;

	if (s->nr_lat[op] == rp->cap_calls[op]) {
		size_t cap = rp->cap_calls[op] ? rp->cap_calls[op] * 2 : 4096;
		double *v = realloc(s->lat_us[op], cap * sizeof(*v));

		if (!v)
			return KVF_ERR_NO_MEMORY;
		s->lat_us[op] = v;
		rp->cap_calls[op] = cap;
	}
	s->lat_us[op][s->nr_lat[op]++] = (double)ns / 1e3;
	return KVF_OK;
}

static int call(struct replay *rp, enum bench_rpc op,
		const struct kvf_key *keys, size_t n, int32_t *codes)
{
	uint64_t t0, ns;
	int ret;

	if (!n)
		return KVF_OK;
	t0 = bench_now_ns();
	ret = rp->tg->batch(rp->tg->ctx, op, keys,
			    op == BENCH_RPC_PUT_START ? rp->sizes : NULL, n,
			    codes);
	ns = bench_now_ns() - t0;
	rp->s->rpc_ns[op] += ns;
	rp->s->keys[op] += n;
	return ret ? ret : lat_add(rp, op, ns);
}

/*
 * Put sub[0..n): start, make room and start again what was refused for
 * space, end what started.
 */
static int put_missing(struct replay *rp, size_t n)
{
	struct trace_stats *s = rp->s;
	size_t started = 0, refused = 0;
	int ret = call(rp, BENCH_RPC_PUT_START, rp->sub, n, rp->sub_codes);

	if (ret)
		return ret;
	for (size_t i = 0; i < n; i++)
		refused += rp->sub_codes[i] == BENCH_MC_NO_AVAILABLE_HANDLE;
	if (refused && rp->tg->evict) {
		/* the refused ones first, then retried as one batch */
		size_t r = 0;

		for (size_t i = 0; i < n; i++) {
			if (rp->sub_codes[i] != BENCH_MC_NO_AVAILABLE_HANDLE)
				continue;
			struct kvf_key k = rp->sub[i];

			rp->sub[i] = rp->sub[r];
			rp->sub[r] = k;
			rp->sub_codes[i] = rp->sub_codes[r];
			rp->sub_codes[r++] = 0;
		}
		s->evict_calls++;
		ret = rp->tg->evict(rp->tg->ctx, refused * rp->p->key_size);
		if (!ret)
			ret = call(rp, BENCH_RPC_PUT_START, rp->sub, refused,
				   rp->sub_codes);
		if (ret)
			return ret;
	}
	for (size_t i = 0; i < n; i++) {
		if (!rp->sub_codes[i])
			rp->sub[started++] = rp->sub[i];
		else if (rp->sub_codes[i] == BENCH_MC_NO_AVAILABLE_HANDLE)
			s->refused_keys++;
		else
			s->put_errors++;
	}
	ret = call(rp, BENCH_RPC_PUT_END, rp->sub, started, rp->sub_codes);
	if (ret)
		return ret;
	for (size_t i = 0; i < started; i++) {
		if (!rp->sub_codes[i])
			s->put_keys++;
		else
			s->put_errors++;
	}
	return KVF_OK;
}

/* How many of @n blocks (@kpb codes each) lead with every code 0. */
static uint32_t leading_blocks(const int32_t *codes, uint32_t n, uint32_t kpb)
{
	uint32_t j = 0, k;

	for (; j < n; j++) {
		for (k = 0; k < kpb && !codes[(size_t)j * kpb + k]; k++)
			;
		if (k < kpb)
			break;
	}
	return j;
}

/* Request @i of copy @copy. */
static int one_request(struct replay *rp, size_t i, uint32_t copy)
{
	const struct bench_trace *t = rp->t;
	const uint64_t *ids = t->ids + t->first[i];
	uint32_t n = t->len[i], kpb = rp->kpb, lead, served;
	size_t nk = (size_t)n * kpb, m = 0;
	struct trace_stats *s = rp->s;
	int ret;

	for (uint32_t j = 0; j < n; j++)
		for (uint32_t k = 0; k < kpb; k++) {
			char *b = rp->keybuf + (j * kpb + k) * KEY_CAP;

			rp->keys[j * kpb + k] = (struct kvf_key){
				.data = b,
				.len = block_key(rp->p, copy, ids[j], k, b),
			};
		}
	ret = call(rp, BENCH_RPC_EXIST, rp->keys, nk, rp->codes);
	if (ret)
		return ret;
	lead = leading_blocks(rp->codes, n, kpb);
	ret = call(rp, BENCH_RPC_GET, rp->keys, (size_t)lead * kpb,
		   rp->sub_codes);
	if (ret)
		return ret;
	/* served: the leading blocks whose keys were all read */
	served = leading_blocks(rp->sub_codes, lead, kpb);
	s->requests++;
	s->blocks += n;
	s->hits += served;
	s->request_hit_sum += n ? (double)served / n : 0.0;
	for (size_t x = (size_t)served * kpb; x < nk; x++)
		if (rp->codes[x])
			rp->sub[m++] = rp->keys[x];
	return put_missing(rp, m);
}

/* Every block's keys, asked once more: how many keys are still held. */
static int sweep(struct replay *rp)
{
	const struct bench_trace *t = rp->t;
	size_t per = rp->t->max_len, n = 0;
	int ret = KVF_OK;

	for (uint32_t c = 0; c < rp->p->copies && !ret; c++)
		for (size_t u = 0; u <= t->nr_unique && !ret; u++) {
			if (u < t->nr_unique) {
				for (uint32_t k = 0; k < rp->kpb; k++) {
					char *b = rp->keybuf + n * KEY_CAP;

					rp->keys[n++] = (struct kvf_key){
						.data = b,
						.len = block_key(rp->p, c,
								 t->unique[u],
								 k, b),
					};
				}
				if (n < per * rp->kpb)
					continue;
			}
			ret = call(rp, BENCH_RPC_EXIST, rp->keys, n,
				   rp->codes);
			for (size_t x = 0; x < n && !ret; x++)
				rp->s->live_keys += !rp->codes[x];
			n = 0;
		}
	return ret;
}

void trace_stats_free(struct trace_stats *s)
{
	for (int i = 0; i < TRACE_NR_RPCS; i++)
		free(s->lat_us[i]);
	memset(s, 0, sizeof(*s));
}

int bench_trace_replay(const struct bench_trace *t,
		       const struct trace_params *p,
		       const struct trace_target *tg, struct trace_stats *s)
{
	struct replay rp = { .t = t, .p = p, .tg = tg, .s = s };
	size_t max_keys = (size_t)t->max_len * trace_keys_per_block(p);
	uint64_t start, t0;
	int ret = KVF_ERR_NO_MEMORY;

	memset(s, 0, sizeof(*s));
	rp.kpb = trace_keys_per_block(p);
	if (!max_keys)
		max_keys = rp.kpb;
	rp.keybuf = malloc(max_keys * KEY_CAP);
	rp.keys = calloc(max_keys, sizeof(*rp.keys));
	rp.sub = calloc(max_keys, sizeof(*rp.sub));
	rp.sizes = calloc(max_keys, sizeof(*rp.sizes));
	rp.codes = calloc(max_keys, sizeof(*rp.codes));
	rp.sub_codes = calloc(max_keys, sizeof(*rp.sub_codes));
	if (!rp.keybuf || !rp.keys || !rp.sub || !rp.sizes || !rp.codes ||
	    !rp.sub_codes)
		goto out;
	for (size_t i = 0; i < max_keys; i++)
		rp.sizes[i] = p->key_size;
	ret = KVF_OK;
	start = bench_now_ns();
	for (size_t i = 0; i < t->nr_requests && !ret; i++) {
		if (p->speed > 0)
			bench_sleep_until(start + (uint64_t)((double)t->ts_ms[i] *
						       1e6 / p->speed));
		for (uint32_t c = 0; c < p->copies && !ret; c++) {
			/* trace time, distinct and increasing per request */
			if (tg->set_time)
				tg->set_time(tg->ctx,
					     1000000000ull +
						     t->ts_ms[i] * 1000000ull +
						     i * p->copies + c);
			ret = one_request(&rp, i, c);
		}
	}
	s->wall_ns = bench_now_ns() - start;
	t0 = s->keys[BENCH_RPC_EXIST];
	if (!ret) {
		/* the sweep is not part of the replay's figures */
		uint64_t ns = s->rpc_ns[BENCH_RPC_EXIST];
		size_t calls = s->nr_lat[BENCH_RPC_EXIST];

		ret = sweep(&rp);
		s->rpc_ns[BENCH_RPC_EXIST] = ns;
		s->nr_lat[BENCH_RPC_EXIST] = calls;
		s->keys[BENCH_RPC_EXIST] = t0;
	}
out:
	free(rp.keybuf);
	free(rp.keys);
	free(rp.sub);
	free(rp.sizes);
	free(rp.codes);
	free(rp.sub_codes);
	if (ret)
		trace_stats_free(s);
	return ret;
}

/* ---- the in-process engine target ---- */

struct trace_engine {
	struct kvf_engine *e;
	uint64_t now_ns;
	struct kvf_replicas *out;
	enum kvf_status *st;
	size_t cap;
};

static uint64_t engine_clock(void *ctx)
{
	return __atomic_load_n(&((struct trace_engine *)ctx)->now_ns,
			       __ATOMIC_RELAXED);
}

static void engine_set_time(void *ctx, uint64_t ns)
{
	__atomic_store_n(&((struct trace_engine *)ctx)->now_ns, ns,
			 __ATOMIC_RELAXED);
}

static int32_t mc_code(enum kvf_status st)
{
	switch (st) {
	case KVF_OK:
		return 0;
	case KVF_ERR_OBJECT_NOT_FOUND:
		return BENCH_MC_OBJECT_NOT_FOUND;
	case KVF_ERR_OBJECT_ALREADY_EXISTS:
		return BENCH_MC_OBJECT_ALREADY_EXISTS;
	case KVF_ERR_NO_SPACE:
		return BENCH_MC_NO_AVAILABLE_HANDLE;
	default:
		return -1; /* INTERNAL_ERROR: counted, never expected */
	}
}

static int engine_batch(void *ctx, enum bench_rpc op,
			const struct kvf_key *keys, const uint64_t *sizes,
			size_t n, int32_t *codes)
{
	struct trace_engine *te = ctx;
	struct kvf_put_config cfg = { .replica_num = 1 };
	int ret = KVF_OK;

	if (n > te->cap) {
		size_t cap = n;
		struct kvf_replicas *out = realloc(te->out, cap * sizeof(*out));
		enum kvf_status *st;

		if (!out)
			return KVF_ERR_NO_MEMORY;
		te->out = out;
		st = realloc(te->st, cap * sizeof(*st));
		if (!st)
			return KVF_ERR_NO_MEMORY;
		te->st = st;
		te->cap = cap;
	}
	switch (op) {
	case BENCH_RPC_EXIST:
		ret = kvf_batch_exist(te->e, keys, n, te->st);
		break;
	case BENCH_RPC_GET:
		ret = kvf_batch_get(te->e, keys, n, te->out, te->st, NULL);
		break;
	case BENCH_RPC_PUT_START:
		ret = kvf_batch_put_start(te->e, 1, keys, sizes, n, &cfg,
					  te->out, te->st);
		break;
	case BENCH_RPC_PUT_END:
		ret = kvf_batch_put_end(te->e, 1, keys, n, te->st);
		break;
	}
	/* item errors are in the statuses; a call error fails the replay */
	if (ret != KVF_OK && ret != KVF_ERR_PARTIAL)
		return ret;
	for (size_t i = 0; i < n; i++)
		codes[i] = mc_code(te->st[i]);
	return KVF_OK;
}

static int engine_evict(void *ctx, uint64_t bytes)
{
	struct trace_engine *te = ctx;
	return kvf_engine_evict(te->e, bytes, NULL, NULL);
}

int trace_engine_open(const struct bench_opts *o, uint32_t segments,
		      uint64_t segment_size, struct trace_engine **out,
		      struct trace_target *tg)
{
	struct trace_engine *te = calloc(1, sizeof(*te));
	struct kvf_config cfg;
	int ret;

	if (!te)
		return KVF_ERR_NO_MEMORY;
	te->now_ns = 1000000000ull;
	kvf_config_init(&cfg);
	cfg.index = o->index;
	cfg.placement = o->placement;
	cfg.eviction_order = o->eviction_order;
	cfg.seed = o->seed;
	cfg.expected_objects = o->objects;
	cfg.background = false;
	cfg.clock = engine_clock;
	cfg.clock_ctx = te;
	/* a full store evicts when a put finds no room, not ahead of it */
	cfg.eviction_high_watermark = 1.0;
	cfg.client_ttl_ms = 24ULL * 3600 * 1000;
	ret = kvf_engine_open(&cfg, &te->e);
	if (ret) {
		free(te);
		return ret;
	}
	for (uint32_t i = 0; i < segments && !ret; i++) {
		char name[32];
		struct kvf_segment_desc d = { .id = i + 1,
					      .name = name,
					      .base = (uint64_t)(i + 1) << 49,
					      .size = segment_size,
					      .endpoint = "10.0.0.1:17812" };

		snprintf(name, sizeof(name), "trace-%u", i);
		ret = kvf_segment_mount(te->e, 1, &d);
	}
	if (ret) {
		trace_engine_close(te);
		return ret;
	}
	*tg = (struct trace_target){ .batch = engine_batch,
				     .evict = engine_evict,
				     .set_time = engine_set_time,
				     .ctx = te };
	*out = te;
	return KVF_OK;
}

struct kvf_engine *trace_engine_get(struct trace_engine *te)
{
	return te->e;
}

void trace_engine_close(struct trace_engine *te)
{
	if (!te)
		return;
	kvf_engine_close(te->e);
	free(te->out);
	free(te->st);
	free(te);
}
