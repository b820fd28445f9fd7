// SPDX-License-Identifier: MIT
/*
 * tests/master/test_wire.c - the Mooncake wire codec against upstream's
 * bytes and its own type literals.
 *
 * Fixtures (tests/master/fixtures/<set>/index.jsonl, captured from a real
 * upstream master and client) are replayed: every request decodes to the
 * values in the capture's annotation (rendered here in the annotation's own
 * JSON form and compared as text) and encodes back to the same bytes in
 * the short form; every response decodes and encodes back to upstream's
 * short-form bytes (the debug-form captures are stripped of their literal
 * first, exactly as a release build would have written them). The ABI
 * tables are checked against the TSV copies and MD5. Every typed codec,
 * in both ABIs, is checked against the type literal it claims to
 * implement by validating its output with the literal-driven reader. Bad
 * input (truncation, lengths past the end, bad variant/bool, wrong hash,
 * too many keys) must be refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "wire/abi.h"
#include "wire/frame.h"
#include "wire/md5.h"
#include "wire/msg.h"
#include "wire/spack.h"

#ifndef KVF_FIXTURES_DIR
#error "KVF_FIXTURES_DIR must name tests/master/fixtures"
#endif

#define MAX_ITEMS 512

/* ---- small helpers ---- */

struct text {
	char *s;
	size_t len, cap;
};

static void tput(struct text *t, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void tput(struct text *t, const char *fmt, ...)
{
	va_list ap;
	int n;

	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(t->s + t->len, t->cap - t->len, fmt, ap);
		va_end(ap);
		assert_true(n >= 0);
		if ((size_t)n < t->cap - t->len)
			break;
		t->cap = (t->cap + (size_t)n) * 2 + 64;
		t->s = realloc(t->s, t->cap);
		assert_non_null(t->s);
	}
	t->len += (size_t)n;
}

static unsigned hexval(char c)
{
	if (c >= '0' && c <= '9')
		return (unsigned)(c - '0');
	if (c >= 'a' && c <= 'f')
		return (unsigned)(c - 'a' + 10);
	return (unsigned)(c - 'A' + 10);
}

static size_t unhex(const char *s, size_t n, uint8_t *out)
{
	for (size_t i = 0; i < n / 2; i++)
		out[i] =
			(uint8_t)(hexval(s[2 * i]) << 4 | hexval(s[2 * i + 1]));
	return n / 2;
}

static char *read_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	assert_non_null(f);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	assert_true(n >= 0);
	rewind(f);
	buf = malloc((size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = 0;
	fclose(f);
	return buf;
}

/* End of the JSON value starting at @p (strings, arrays, objects, atoms). */
static const char *json_end(const char *p)
{
	int depth = 0;

	do {
		if (*p == '"') {
			for (p++; *p != '"'; p++)
				if (*p == '\\')
					p++;
			p++;
		} else if (*p == '[' || *p == '{') {
			depth++;
			p++;
		} else if (*p == ']' || *p == '}') {
			depth--;
			p++;
		} else {
			while (*p && !strchr(",]}", *p))
				p++;
		}
		while (depth && (*p == ',' || *p == ' '))
			p++;
	} while (depth > 0 && *p);
	return p;
}

/* The raw JSON text of "@key": <value> found after @from (before @limit). */
static char *json_field(const char *from, const char *limit, const char *key)
{
	char pat[64];
	const char *p, *e;
	char *out;

	snprintf(pat, sizeof(pat), "\"%s\": ", key);
	p = strstr(from, pat);
	if (!p || (limit && p > limit))
		return NULL;
	p += strlen(pat);
	e = json_end(p);
	out = strndup(p, (size_t)(e - p));
	assert_non_null(out);
	return out;
}

/* ---- fixtures ---- */

struct fixture {
	char set[32];
	int n;
	char rpc[48];
	uint8_t *req;
	size_t req_len;
	uint8_t *resp;
	size_t resp_len;
	char *req_decoded; /* NULL if none */
	bool req_decode_error;
	char *resp_decoded;
};

static const char *const sets[] = {"py-reference", "cpp-client",
				   "cpp-client-release-form"};

static uint8_t *hex_field(const char *from, const char *limit, size_t *len)
{
	char *h = json_field(from, limit, "hex");
	size_t n;
	uint8_t *b;

	assert_non_null(h);
	n = strlen(h) - 2; /* quotes */
	b = malloc(n / 2 + 1);
	assert_non_null(b);
	*len = unhex(h + 1, n, b);
	free(h);
	return b;
}

static size_t load_set(const char *set, struct fixture *fx, size_t cap)
{
	char path[512];
	char *all, *line, *save = NULL;
	size_t n = 0;

	snprintf(path, sizeof(path), "%s/%s/index.jsonl", KVF_FIXTURES_DIR,
		 set);
	all = read_file(path);
	for (line = strtok_r(all, "\n", &save); line && n < cap;
	     line = strtok_r(NULL, "\n", &save)) {
		struct fixture *f = &fx[n++];
		const char *resp = strstr(line, "\"response\": ");
		char *rpc = json_field(line, NULL, "rpc");
		char *num = json_field(line, NULL, "n");

		assert_non_null(resp);
		memset(f, 0, sizeof(*f));
		snprintf(f->set, sizeof(f->set), "%s", set);
		f->n = atoi(num);
		snprintf(f->rpc, sizeof(f->rpc), "%.*s", (int)strlen(rpc) - 2,
			 rpc + 1);
		f->req = hex_field(line, resp, &f->req_len);
		f->req_decoded = json_field(line, resp, "decoded");
		f->req_decode_error = strstr(line, "\"decode_error\"") &&
				      strstr(line, "\"decode_error\"") < resp;
		f->resp = hex_field(resp, NULL, &f->resp_len);
		f->resp_decoded = json_field(resp, NULL, "decoded");
		free(rpc);
		free(num);
	}
	free(all);
	return n;
}

static void free_set(struct fixture *fx, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(fx[i].req);
		free(fx[i].resp);
		free(fx[i].req_decoded);
		free(fx[i].resp_decoded);
	}
}

/*
 * The short form of a struct_pack message: what a release build writes.
 * Drops an embedded literal; keeps the metainfo only for wide lengths.
 */
static size_t short_form(const uint8_t *in, size_t len, uint8_t *out)
{
	uint32_t hash;
	uint8_t meta = 0;
	size_t i = 4, o = 4;

	if (len < 4) {
		memcpy(out, in, len);
		return len;
	}
	memcpy(&hash, in, 4);
	if (hash & 1)
		meta = in[i++];
	if (meta & 4)
		i += strlen((const char *)in + i) + 1;
	meta &= (uint8_t)~4;
	hash = meta ? hash | 1 : hash & ~1u;
	memcpy(out, &hash, 4);
	if (meta)
		out[o++] = meta;
	memcpy(out + o, in + i, len - i);
	return o + len - i;
}

/* ---- rendering a decoded request like the annotations do ---- */

static void render_str(struct text *t, const char *s, size_t n)
{
	tput(t, "\"");
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '"' || c == '\\')
			tput(t, "\\%c", c);
		else if (c < 0x20 || c >= 0x7f)
			tput(t, "\\u%04x", c);
		else
			tput(t, "%c", c);
	}
	tput(t, "\"");
}

static void render_kstr(struct text *t, struct kvf_str s)
{
	render_str(t, s.data, s.len);
}

static void render_uuid(struct text *t, struct kvf_uuid u)
{
	tput(t, "[%llu, %llu]", (unsigned long long)u.first,
	     (unsigned long long)u.second);
}

static void render_strs(struct text *t, const struct kvf_msg_view *v)
{
	struct kvf_msg_view it = *v;
	struct kvf_str s;
	bool first = true;

	tput(t, "[");
	while (kvf_msg_view_str(&it, &s)) {
		tput(t, first ? "" : ", ");
		render_kstr(t, s);
		first = false;
	}
	tput(t, "]");
}

static void render_opt(struct text *t, bool has, uint64_t v)
{
	if (has)
		tput(t, "%llu", (unsigned long long)v);
	else
		tput(t, "null");
}

static void render_config(struct text *t, const struct kvf_abi *abi,
			  const struct kvf_msg_replicate_config *c)
{
	tput(t, "[%llu, %llu, ", (unsigned long long)c->replica_num,
	     (unsigned long long)c->nof_replica_num);
	if (abi->rc == KVF_ABI_RC_SOFT_PIN_ACTION) {
		tput(t, "%llu, %u, ", (unsigned long long)c->dfs_replica_num,
		     c->soft_pin_action);
		render_opt(t, c->has_soft_pin_ttl, c->soft_pin_ttl_ms);
		tput(t, ", ");
	} else {
		tput(t, "%s, ", c->with_soft_pin ? "true" : "false");
	}
	tput(t, "%s, ", c->with_hard_pin ? "true" : "false");
	render_strs(t, &c->preferred_segments);
	tput(t, ", ");
	render_kstr(t, c->preferred_segment);
	tput(t, ", ");
	render_strs(t, &c->preferred_nof_segments);
	tput(t, ", %s, %u, ", c->prefer_alloc_in_same_node ? "true" : "false",
	     c->data_type);
	render_kstr(t, c->host_id);
	tput(t, ", ");
	if (c->has_group_ids)
		render_strs(t, &c->group_ids);
	else
		tput(t, "null");
	tput(t, "]");
}

static void render_segment(struct text *t, const struct kvf_msg_segment *s)
{
	tput(t, "[");
	render_uuid(t, s->id);
	tput(t, ", ");
	render_kstr(t, s->name);
	tput(t, ", %llu, %llu, ", (unsigned long long)s->base,
	     (unsigned long long)s->size);
	render_kstr(t, s->te_endpoint);
	tput(t, ", ");
	render_kstr(t, s->protocol);
	tput(t, ", ");
	render_kstr(t, s->host_id);
	tput(t, "]");
}

static void render_keys(struct text *t, const struct kvf_msg_req *q, bool meta)
{
	tput(t, "[");
	for (size_t i = 0; i < q->nkeys; i++) {
		tput(t, i ? ", " : "");
		if (meta)
			tput(t, "[");
		render_str(t, q->keys[i].data, q->keys[i].len);
		if (meta) {
			tput(t, ", ");
			render_opt(t, q->has_val[i], q->vals[i]);
			tput(t, "]");
		}
	}
	tput(t, "]");
}

static void render_field(struct text *t, const struct kvf_abi *abi, char f,
			 const struct kvf_msg_req *q)
{
	struct kvf_msg_view it;
	struct kvf_msg_segment seg;
	struct kvf_uuid u;
	bool first = true;

	switch (f) {
	case 'c':
		render_uuid(t, q->client_id);
		break;
	case 's':
		render_uuid(t, q->segment_id);
		break;
	case 'k':
		render_kstr(t, q->key);
		break;
	case 't':
		render_kstr(t, q->tenant);
		break;
	case 'K':
		render_keys(t, q, false);
		break;
	case 'N':
		render_keys(t, q, abi->put_end_meta);
		break;
	case 'V':
		tput(t, "[");
		for (size_t i = 0; i < q->nvals; i++)
			tput(t, "%s%llu", i ? ", " : "",
			     (unsigned long long)q->vals[i]);
		tput(t, "]");
		break;
	case 'M':
		if (abi->put_end_meta)
			tput(t, "[");
		render_kstr(t, q->key);
		if (abi->put_end_meta) {
			tput(t, ", ");
			render_opt(t, q->has_checksum, q->checksum);
			tput(t, "]");
		}
		break;
	case 'r':
		tput(t, "%d", q->replica_type);
		break;
	case 'f':
		tput(t, "%s", q->force ? "true" : "false");
		break;
	case 'n':
		tput(t, "%llu", (unsigned long long)q->u64);
		break;
	case 'C':
		render_config(t, abi, &q->config);
		break;
	case 'G':
		render_segment(t, &q->segment);
		break;
	case 'S':
		it = q->segments;
		tput(t, "[");
		while (kvf_msg_view_segment(&it, &seg)) {
			tput(t, first ? "" : ", ");
			render_segment(t, &seg);
			first = false;
		}
		tput(t, "]");
		break;
	case 'I':
		it = q->uuids;
		tput(t, "[");
		while (kvf_msg_view_uuid(&it, &u)) {
			tput(t, first ? "" : ", ");
			render_uuid(t, u);
			first = false;
		}
		tput(t, "]");
		break;
	default:
		fail_msg("unknown field '%c'", f);
	}
}

static char *render_req(const struct kvf_abi *abi, const struct kvf_msg_req *q)
{
	const char *prog = kvf__msg_req_prog(q->rpc);
	struct text t = {0};
	size_t n = strlen(prog);

	tput(&t, "%s", n > 1 ? "[" : "");
	for (size_t i = 0; i < n; i++) {
		tput(&t, "%s", i ? ", " : "");
		render_field(&t, abi, prog[i], q);
	}
	tput(&t, "%s", n > 1 ? "]" : "");
	return t.s;
}

/* ---- per-test state ---- */

struct items {
	struct kvf_key keys[MAX_ITEMS];
	uint64_t vals[MAX_ITEMS];
	uint8_t has_val[MAX_ITEMS];
	struct kvf_msg_items it;
};

static void items_init(struct items *s, size_t cap)
{
	s->it.keys = s->keys;
	s->it.vals = s->vals;
	s->it.has_val = s->has_val;
	s->it.cap = cap;
}

static const struct kvf_abi *latest(void)
{
	const struct kvf_abi *abi = kvf_abi_find(NULL);

	assert_non_null(abi);
	return abi;
}

/* ---- tests ---- */

static void test_md5(void **state)
{
	static const struct {
		const char *in;
		const char *hex;
	} v[] = {
		{"", "d41d8cd98f00b204e9800998ecf8427e"},
		{"a", "0cc175b9c0f1b6a831c399e269772661"},
		{"abc", "900150983cd24fb0d6963f7d28e17f72"},
		{"message digest", "f96b697d7cb7938d525a2f31aaf161d0"},
		{"abcdefghijklmnopqrstuvwxyz",
		 "c3fcd3d76192e4007dfb496cca67e13b"},
		{"12345678901234567890123456789012345678901234567890123456789"
		 "012345678901234567890",
		 "57edf4a22be3c955ac49da2e2107b67a"},
	};
	struct kvf_md5 m;
	uint8_t d[16], d2[16];
	char hex[33];

	(void)state;
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		kvf_md5_digest(v[i].in, strlen(v[i].in), d);
		for (int j = 0; j < 16; j++)
			sprintf(hex + 2 * j, "%02x", d[j]);
		assert_string_equal(hex, v[i].hex);
		/* the same digest fed in uneven pieces */
		kvf_md5_init(&m);
		for (size_t j = 0; j < strlen(v[i].in); j += 7) {
			size_t k = strlen(v[i].in) - j;

			kvf_md5_update(&m, v[i].in + j, k < 7 ? k : 7);
		}
		kvf_md5_final(&m, d2);
		assert_memory_equal(d, d2, 16);
	}
	/* protocol.md's worked examples */
	assert_int_equal(
		kvf_md5_u32("mooncake::WrappedMasterService::Ping", 36),
		0xd6c2dae5u);
	assert_int_equal(kvf_md5_u32("\x80\x0c", 2) & ~1u, 0x9dcffa76u);
}

static uint32_t literal_hash(const char *hex)
{
	uint8_t b[512];
	size_t n = unhex(hex, strlen(hex), b);

	return kvf_md5_u32(b, n) & ~1u;
}

/* One ABI table against its TSV copy and against MD5. */
static void check_table(const struct kvf_abi *abi, const char *tsv)
{
	char path[512];
	char *all, *line, *save = NULL;
	size_t rows = 0, entries = 0;

	snprintf(path, sizeof(path), "%s/%s", KVF_FIXTURES_DIR, tsv);
	all = read_file(path);
	for (line = strtok_r(all, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		char name[64], req[1024], resp[1024], qualified[128];
		unsigned fid, nargs, rqh, rsh;
		enum kvf_rpc rpc;
		const struct kvf_abi_rpc *e;

		if (line[0] == '#')
			continue;
		assert_int_equal(sscanf(line, "%63s %x %u %x %1023s %x %1023s",
					name, &fid, &nargs, &rqh, req, &rsh,
					resp),
				 7);
		assert_true(kvf_abi_rpc_by_name(name, &rpc));
		e = &abi->rpc[rpc];
		rows++;
		assert_int_equal(e->function_id, fid);
		assert_int_equal(e->nargs, nargs);
		assert_int_equal(e->req_hash, rqh);
		assert_int_equal(e->resp_hash, rsh);
		assert_string_equal(e->req_literal,
				    strcmp(req, "-") ? req : "");
		assert_string_equal(e->resp_literal, resp);
		/* recomputed, not trusted */
		snprintf(qualified, sizeof(qualified),
			 "mooncake::WrappedMasterService::%s", name);
		assert_int_equal(kvf_md5_u32(qualified, strlen(qualified)),
				 fid);
		if (nargs)
			assert_int_equal(literal_hash(e->req_literal), rqh);
		assert_int_equal(literal_hash(e->resp_literal), rsh);
		/* the shape follows the response literal */
		assert_int_equal(e->shape,
				 !strncmp(resp, "84", 2) ? KVF_ABI_EXPECTED_VEC
				 : !strcmp(resp, "03")	 ? KVF_ABI_BARE_I64
							 : KVF_ABI_EXPECTED);
	}
	for (int i = 0; i < KVF_RPC__COUNT; i++)
		entries += abi->rpc[i].function_id != 0;
	assert_int_equal(rows, entries);
	free(all);
}

static void test_abi_tables(void **state)
{
	enum kvf_rpc rpc;

	(void)state;
	assert_int_equal(kvf_abi_count(), 2);
	assert_ptr_equal(kvf_abi_find("latest"), kvf_abi_at(0));
	assert_ptr_equal(kvf_abi_find("3b5a5941"), kvf_abi_at(0));
	assert_ptr_equal(kvf_abi_find("v0.3.12.post1"), kvf_abi_at(1));
	assert_null(kvf_abi_find("v9"));
	check_table(kvf_abi_find("3b5a5941"), "rpc_table.tsv");
	check_table(kvf_abi_find("v0.3.12.post1"),
		    "rpc_table_v0.3.12.post1.tsv");
	/* dispatch: a registered id, an unregistered one, an unknown one */
	assert_true(kvf_abi_rpc_of(latest(), 0xd6c2dae5u, &rpc));
	assert_int_equal(rpc, KVF_RPC_Ping);
	assert_false(kvf_abi_rpc_of(
		latest(), latest()->rpc[KVF_RPC_CalcCacheStats].function_id,
		&rpc));
	assert_false(kvf_abi_rpc_of(latest(), 0x12345678u, &rpc));
	assert_false(kvf_abi_rpc_of(
		kvf_abi_find("v0.3.12.post1"),
		latest()->rpc[KVF_RPC_DynamicReplicaCopyStart].function_id,
		&rpc));
	assert_string_equal(kvf_abi_rpc_name(KVF_RPC_BatchGetReplicaList),
			    "BatchGetReplicaList");
}

/* A transport error answer must equal upstream's (short form). */
static void check_transport_error(const struct fixture *f, uint8_t errc,
				  const char *msg)
{
	struct kvf_frame_req h;
	struct kvf_wbuf w;
	uint8_t want[512];
	size_t n;

	assert_int_equal(kvf_frame_req_parse(f->req, &h), KVF_WIRE_OK);
	assert_int_equal(f->resp[2], errc);
	memcpy(want, f->resp, KVF_FRAME_RESP_LEN);
	n = short_form(f->resp + KVF_FRAME_RESP_LEN,
		       f->resp_len - KVF_FRAME_RESP_LEN,
		       want + KVF_FRAME_RESP_LEN);
	want[8] = (uint8_t)n; /* short-form body length (< 256 here) */
	kvf_wbuf_init(&w);
	kvf_frame_resp_error(&w, h.seq_num, errc, msg);
	assert_false(w.failed);
	assert_int_equal(w.len, KVF_FRAME_RESP_LEN + n);
	assert_memory_equal(w.data, want, w.len);
	kvf_wbuf_free(&w);
}

static void replay_request(const struct fixture *f)
{
	const struct kvf_abi *abi = latest();
	static struct items s;
	static struct kvf_msg_segment segs[MAX_ITEMS];
	static struct kvf_uuid uuids[MAX_ITEMS];
	struct kvf_frame_req h;
	struct kvf_msg_req q;
	enum kvf_rpc rpc;
	uint32_t found;
	struct kvf_wbuf w;
	uint8_t *want;
	size_t at, n;
	char *text;
	int rc;

	assert_true(f->req_len >= KVF_FRAME_REQ_LEN);
	assert_int_equal(kvf_frame_req_parse(f->req, &h), KVF_WIRE_OK);
	assert_int_equal(h.length, f->req_len - KVF_FRAME_REQ_LEN);
	if (!kvf_abi_rpc_of(abi, h.function_id, &rpc)) {
		check_transport_error(f, KVF_RPC_ERRC_FUNCTION_NOT_REGISTERED,
				      KVF_FRAME_MSG_NOT_REGISTERED);
		return;
	}
	assert_string_equal(kvf_abi_rpc_name(rpc), f->rpc);
	items_init(&s, MAX_ITEMS);
	rc = kvf_msg_req_decode(abi, rpc, f->req + KVF_FRAME_REQ_LEN, h.length,
				&s.it, &q, &found);
	if (f->req_decode_error) {
		assert_int_equal(rc, KVF_WIRE_ERR_HASH);
		assert_int_equal(found, KVF_SPACK_HASH_STRING);
		check_transport_error(f, KVF_RPC_ERRC_INVALID_RPC_ARGUMENTS,
				      KVF_FRAME_MSG_INVALID_ARGS);
		return;
	}
	assert_int_equal(rc, KVF_WIRE_OK);
	assert_true(q.typed);
	if (f->req_decoded) {
		text = render_req(abi, &q);
		if (strcmp(text, f->req_decoded))
			fail_msg("%s %d %s:\n got  %s\n want %s", f->set, f->n,
				 f->rpc, text, f->req_decoded);
		free(text);
	} else {
		assert_int_equal(h.length, 0);
	}
	/* keys are views into the body, not copies */
	for (size_t i = 0; i < q.nkeys; i++)
		assert_true((const uint8_t *)q.keys[i].data >= f->req &&
			    (const uint8_t *)q.keys[i].data + q.keys[i].len <=
				    f->req + f->req_len);
	/*
	 * Encode it back: the short form of what the client sent, unless the
	 * client chose wider lengths than needed (py-reference 016), in
	 * which case the narrower encoding must decode to the same values.
	 */
	assert_true(kvf_msg_req_use_arrays(&q, segs, uuids, MAX_ITEMS));
	want = malloc(f->req_len);
	assert_non_null(want);
	n = h.length ? short_form(f->req + KVF_FRAME_REQ_LEN, h.length, want)
		     : 0;
	kvf_wbuf_init(&w);
	at = kvf_frame_req_begin(&w);
	assert_int_equal(kvf_msg_req_encode(&w, abi, &q), KVF_WIRE_OK);
	kvf_frame_req_end(&w, at, h.seq_num, h.function_id);
	assert_memory_equal(w.data, f->req, 12); /* magic .. function id */
	if (n > 4 && (want[0] & 1) &&
	    w.data[KVF_FRAME_REQ_LEN + 4] != want[4]) {
		struct kvf_msg_req again;

		assert_int_equal(kvf_msg_req_decode(abi, rpc,
						    w.data + KVF_FRAME_REQ_LEN,
						    w.len - KVF_FRAME_REQ_LEN,
						    &s.it, &again, NULL),
				 KVF_WIRE_OK);
		text = render_req(abi, &again);
		assert_string_equal(text, f->req_decoded);
		free(text);
	} else {
		assert_int_equal(w.len, KVF_FRAME_REQ_LEN + n);
		assert_memory_equal(w.data + KVF_FRAME_REQ_LEN, want, n);
	}
	free(want);
	kvf_wbuf_free(&w);
}

/* Run @fn on every captured pair of every set. */
static void for_each_fixture(void (*fn)(const struct fixture *f))
{
	static struct fixture fx[64];

	for (size_t si = 0; si < sizeof(sets) / sizeof(sets[0]); si++) {
		size_t n = load_set(sets[si], fx, 64);

		assert_true(n >= 20);
		for (size_t i = 0; i < n; i++)
			fn(&fx[i]);
		free_set(fx, n);
	}
}

static void test_fixture_requests(void **state)
{
	(void)state;
	for_each_fixture(replay_request);
}

struct resp_space {
	struct kvf_msg_replicas items[MAX_ITEMS];
	struct kvf_msg_desc descs[MAX_ITEMS];
	uint8_t bools[MAX_ITEMS];
	struct kvf_msg_resp r;
};

static void resp_init(struct resp_space *s)
{
	memset(&s->r, 0, sizeof(s->r));
	s->r.items = s->items;
	s->r.cap = MAX_ITEMS;
	s->r.descs = s->descs;
	s->r.desc_cap = MAX_ITEMS;
	s->r.bools = s->bools;
}

static void replay_response(const struct fixture *f)
{
	const struct kvf_abi *abi = latest();
	static struct resp_space s;
	struct kvf_frame_req rh;
	struct kvf_frame_resp h;
	enum kvf_rpc rpc;
	struct kvf_wbuf w;
	uint8_t *want;
	size_t at, n;

	kvf_frame_req_parse(f->req, &rh);
	kvf_frame_resp_parse(f->resp, &h);
	assert_int_equal(h.seq_num, rh.seq_num);
	assert_int_equal(h.length, f->resp_len - KVF_FRAME_RESP_LEN);
	if (h.err_code)
		return; /* transport errors: replay_request */
	assert_true(kvf_abi_rpc_of(abi, rh.function_id, &rpc));
	resp_init(&s);
	assert_int_equal(kvf_msg_resp_decode(abi, rpc,
					     f->resp + KVF_FRAME_RESP_LEN,
					     h.length, &s.r),
			 KVF_WIRE_OK);
	want = malloc(f->resp_len);
	assert_non_null(want);
	n = short_form(f->resp + KVF_FRAME_RESP_LEN, h.length, want);
	kvf_wbuf_init(&w);
	at = kvf_frame_resp_begin(&w);
	assert_int_equal(kvf_msg_resp_reencode(&w, abi, rpc, &s.r),
			 KVF_WIRE_OK);
	kvf_frame_resp_end(&w, at, h.seq_num, 0);
	assert_int_equal(w.len, KVF_FRAME_RESP_LEN + n);
	if (memcmp(w.data + KVF_FRAME_RESP_LEN, want, n))
		fail_msg("%s %d %s: response differs", f->set, f->n, f->rpc);
	assert_memory_equal(w.data, f->resp, 8); /* magic .. seq_num */
	free(want);
	kvf_wbuf_free(&w);
}

static void test_fixture_responses(void **state)
{
	(void)state;
	for_each_fixture(replay_response);
}

/* Every strict prefix of a typed request body is refused. */
static void truncate_request(const struct fixture *f)
{
	static struct items s;
	const struct kvf_abi *abi = latest();
	struct kvf_frame_req h;
	struct kvf_msg_req q;
	enum kvf_rpc rpc;

	kvf_frame_req_parse(f->req, &h);
	if (!h.length || f->req_decode_error ||
	    !kvf_abi_rpc_of(abi, h.function_id, &rpc))
		return;
	items_init(&s, MAX_ITEMS);
	for (size_t len = 0; len < h.length; len++) {
		/* a copy of exactly @len bytes, so ASan sees any overread */
		uint8_t *b = malloc(len ? len : 1);

		assert_non_null(b);
		memcpy(b, f->req + KVF_FRAME_REQ_LEN, len);
		assert_int_not_equal(
			kvf_msg_req_decode(abi, rpc, b, len, &s.it, &q, NULL),
			KVF_WIRE_OK);
		free(b);
	}
}

static void test_truncated(void **state)
{
	(void)state;
	for_each_fixture(truncate_request);
}

/* Encode a request with @abi and return the body in @w. */
static void encode_req(struct kvf_wbuf *w, const struct kvf_abi *abi,
		       const struct kvf_msg_req *q)
{
	kvf_wbuf_reset(w);
	assert_int_equal(kvf_msg_req_encode(w, abi, q), KVF_WIRE_OK);
	assert_false(w->failed);
}

static void test_bad_input(void **state)
{
	const struct kvf_abi *abi = latest();
	static struct items s;
	struct kvf_key keys[3] = {{"alpha", 5}, {"beta", 4}, {"c", 1}};
	struct kvf_msg_req q = {.rpc = KVF_RPC_BatchRemove,
				.keys = keys,
				.nkeys = 3,
				.force = true,
				.tenant = {"default", 7}};
	struct kvf_msg_req out;
	struct kvf_wbuf w;
	uint32_t found;
	uint8_t *b;

	(void)state;
	kvf_wbuf_init(&w);
	encode_req(&w, abi, &q);
	b = w.data;
	items_init(&s, MAX_ITEMS);
	assert_int_equal(
		kvf_msg_req_decode(abi, q.rpc, b, w.len, &s.it, &out, NULL),
		KVF_WIRE_OK);
	assert_int_equal(out.nkeys, 3);
	assert_true(out.force);

	/* too many keys for the caller's array */
	items_init(&s, 2);
	assert_int_equal(
		kvf_msg_req_decode(abi, q.rpc, b, w.len, &s.it, &out, NULL),
		KVF_WIRE_ERR_TOO_MANY);
	assert_int_equal(
		kvf_msg_req_decode(abi, q.rpc, b, w.len, NULL, &out, NULL),
		KVF_WIRE_ERR_TOO_MANY);
	items_init(&s, MAX_ITEMS);

	/* a key length past the end (body: hash, count, len "alpha" ...) */
	b[5] = 0xf0;
	assert_int_equal(
		kvf_msg_req_decode(abi, q.rpc, b, w.len, &s.it, &out, NULL),
		KVF_WIRE_ERR_LENGTH);
	b[5] = 5;
	/* a count past the end */
	b[4] = 0xff;
	assert_int_equal(
		kvf_msg_req_decode(abi, q.rpc, b, w.len, &s.it, &out, NULL),
		KVF_WIRE_ERR_LENGTH);
	b[4] = 3;
	/* force is a bool: 2 is not one */
	b[w.len - 9] = 2;
	assert_int_equal(
		kvf_msg_req_decode(abi, q.rpc, b, w.len, &s.it, &out, NULL),
		KVF_WIRE_ERR_VALUE);
	b[w.len - 9] = 1;
	/* the type hash of another revision or RPC: reported with both */
	b[1] ^= 0x10;
	assert_int_equal(
		kvf_msg_req_decode(abi, q.rpc, b, w.len, &s.it, &out, &found),
		KVF_WIRE_ERR_HASH);
	assert_int_equal(found >> 1, (abi->rpc[q.rpc].req_hash ^ 0x1000u) >> 1);
	b[1] ^= 0x10;
	/* bit 0 only announces metainfo: compared as hash >> 1 */
	b[0] |= 1;
	assert_int_not_equal(
		kvf_msg_req_decode(abi, q.rpc, b, w.len, &s.it, &out, NULL),
		KVF_WIRE_ERR_HASH);
	b[0] &= (uint8_t)~1;
	/* an unsupported metainfo (compatible size bits) */
	{
		uint8_t m[64];

		memcpy(m, b, 4);
		m[0] |= 1;
		m[4] = 0x01;
		memcpy(m + 5, b + 4, w.len - 4);
		assert_int_equal(kvf_msg_req_decode(abi, q.rpc, m, w.len + 1,
						    &s.it, &out, NULL),
				 KVF_WIRE_ERR_METAINFO);
		/* an embedded literal without its NUL */
		m[4] = 0x04;
		memset(m + 5, 0x7f, w.len - 4);
		assert_int_equal(kvf_msg_req_decode(abi, q.rpc, m, w.len + 1,
						    &s.it, &out, NULL),
				 KVF_WIRE_ERR_TRUNCATED);
	}
	/* an empty body where arguments are due (also as NULL) */
	assert_int_equal(kvf_msg_req_decode(abi, KVF_RPC_Ping, NULL, 0, &s.it,
					    &out, NULL),
			 KVF_WIRE_ERR_TRUNCATED);
	assert_int_equal(
		kvf_msg_req_decode(abi, KVF_RPC_Ping, b, 0, &s.it, &out, NULL),
		KVF_WIRE_ERR_TRUNCATED);
	/* but no body is needed without arguments */
	assert_int_equal(kvf_msg_req_decode(abi, KVF_RPC_ServiceReady, NULL, 0,
					    NULL, &out, NULL),
			 KVF_WIRE_OK);
	/* an RPC the revision does not register */
	assert_int_equal(kvf_msg_req_decode(abi, KVF_RPC_CalcCacheStats, b,
					    w.len, &s.it, &out, NULL),
			 KVF_WIRE_ERR_UNKNOWN_RPC);
	kvf_wbuf_free(&w);

	/* frame headers: magic, version, serialize type */
	{
		uint8_t hdr[KVF_FRAME_REQ_LEN] = {0x15};
		struct kvf_frame_req h;

		assert_int_equal(kvf_frame_req_parse(hdr, &h), KVF_WIRE_OK);
		hdr[1] = 1;
		assert_int_equal(kvf_frame_req_parse(hdr, &h),
				 KVF_WIRE_ERR_VERSION);
		hdr[1] = 0;
		hdr[2] = 1;
		assert_int_equal(kvf_frame_req_parse(hdr, &h),
				 KVF_WIRE_ERR_SERIALIZE);
		hdr[0] = 0x16;
		assert_int_equal(kvf_frame_req_parse(hdr, &h),
				 KVF_WIRE_ERR_MAGIC);
	}
}

/* Sample descriptors of every kind the revision has. */
static size_t sample_descs(const struct kvf_abi *abi, struct kvf_msg_desc *d)
{
	size_t n = abi->desc_variants;

	for (size_t i = 0; i < n; i++) {
		d[i] = (struct kvf_msg_desc){
			.id = 10 + i,
			.kind = (uint8_t)i,
			.status = 3,
			.size = 4096,
			.addr = 0x7f0000001000ull,
			.protocol = {"tcp", 3},
			.endpoint = {"127.0.0.1:15952", 15},
			.path = {"/mnt/x", 6},
			.client_id = {1, 2},
			.offset = 64,
			.aligned_size = 8192,
			.shard_idx = 1,
		};
	}
	return n;
}

/* @w's last message must be exactly one value of @rpc's response type. */
static void check_by_literal(const uint8_t *b, size_t len, uint32_t hash,
			     const char *hex)
{
	uint8_t lit[1024];
	size_t n = unhex(hex, strlen(hex), lit);
	const uint8_t *p = lit;
	struct kvf_spack_r r;

	if (kvf_spack_r_begin(&r, b, len, hash) ||
	    kvf_spack_r_skip(&r, &p, lit + n))
		fail_msg("%s: %s", hex, kvf_wire_strerror(r.err));
	assert_ptr_equal(p, lit + n);
	assert_ptr_equal(r.p, b + len);
}

static void check_resp(struct kvf_wbuf *w, const struct kvf_abi *abi,
		       enum kvf_rpc rpc)
{
	static struct resp_space s;
	struct kvf_wbuf again;

	assert_false(w->failed);
	check_by_literal(w->data, w->len, abi->rpc[rpc].resp_hash,
			 abi->rpc[rpc].resp_literal);
	/* and it decodes and encodes back identically */
	resp_init(&s);
	assert_int_equal(kvf_msg_resp_decode(abi, rpc, w->data, w->len, &s.r),
			 0);
	kvf_wbuf_init(&again);
	if (kvf_msg_resp_reencode(&again, abi, rpc, &s.r) == 0) {
		assert_int_equal(again.len, w->len);
		assert_memory_equal(again.data, w->data, w->len);
	}
	kvf_wbuf_free(&again);
	kvf_wbuf_reset(w);
}

/* A client reads the error back from any RPC's generic error answer. */
static void check_error_answer(struct kvf_wbuf *w, const struct kvf_abi *abi,
			       enum kvf_rpc rpc)
{
	static struct resp_space s;

	resp_init(&s);
	assert_int_equal(kvf_msg_resp_decode(abi, rpc, w->data, w->len, &s.r),
			 0);
	switch (abi->rpc[rpc].shape) {
	case KVF_ABI_BARE_I64:
		assert_int_equal(s.r.i64, KVF_MC_NOT_SUPPORTED);
		break;
	case KVF_ABI_EXPECTED_VEC:
		assert_int_equal(s.r.n, 3);
		for (size_t i = 0; i < 3; i++)
			assert_int_equal(s.r.items[i].code,
					 KVF_MC_NOT_SUPPORTED);
		break;
	default:
		assert_int_equal(s.r.code, KVF_MC_NOT_SUPPORTED);
		break;
	}
}

/* A request with every field set, for @rpc. */
static void sample_req(struct kvf_msg_req *q, enum kvf_rpc rpc,
		       struct kvf_key *keys, uint64_t *vals, uint8_t *has,
		       struct kvf_msg_segment *segs, struct kvf_uuid *uuids,
		       const uint8_t *prefs, size_t prefs_len)
{
	memset(q, 0, sizeof(*q));
	q->rpc = rpc;
	q->client_id = (struct kvf_uuid){7, 8};
	q->segment_id = (struct kvf_uuid){9, 10};
	q->key = (struct kvf_str){"key-1", 5};
	q->tenant = (struct kvf_str){"default", 7};
	q->keys = keys;
	q->nkeys = 2;
	q->vals = vals;
	q->has_val = has;
	q->nvals = 2;
	q->u64 = 4096;
	q->has_checksum = true;
	q->checksum = 99;
	q->replica_type = 4;
	q->force = true;
	q->config = (struct kvf_msg_replicate_config){
		.replica_num = 1,
		.dfs_replica_num = 1,
		.soft_pin_action = KVF_MC_SOFT_PIN_ENABLE,
		.with_soft_pin = true,
		.has_soft_pin_ttl = true,
		.soft_pin_ttl_ms = 5000,
		.with_hard_pin = true,
		.preferred_segment = {"seg", 3},
		.data_type = 2,
		.host_id = {"h", 1},
		.has_group_ids = true,
	};
	q->config.preferred_segments = (struct kvf_msg_view){
		.at = prefs, .end = prefs + prefs_len, .n = 2, .width = 1};
	q->config.group_ids = q->config.preferred_segments;
	q->segment = segs[0];
	q->segment_array = segs;
	q->nsegments = 2;
	q->uuid_array = uuids;
	q->nuuids = 2;
}

/* Every typed codec, in every revision, writes what its literal says. */
static void test_codecs_match_literals(void **state)
{
	static const uint8_t prefs[] = {2, 's', '1', 3, 's', '2', '2'};
	struct kvf_key keys[2] = {{"k1", 2}, {"key-two", 7}};
	uint64_t vals[2] = {100, 200};
	uint8_t has[2] = {1, 0};
	struct kvf_msg_segment segs[2] = {
		{.id = {1, 2},
		 .name = {"127.0.0.1:17813", 15},
		 .base = 0x7f0000000000ull,
		 .size = 1 << 25,
		 .te_endpoint = {"127.0.0.1:15952", 15},
		 .protocol = {"tcp", 3}},
		{.id = {3, 4}, .name = {"n2", 2}},
	};
	struct kvf_uuid uuids[2] = {{1, 2}, {3, 4}};
	static struct items s;
	static struct kvf_msg_segment segs2[MAX_ITEMS];
	static struct kvf_uuid uuids2[MAX_ITEMS];
	struct kvf_msg_desc descs[5];
	struct kvf_wbuf w, again;

	(void)state;
	kvf_wbuf_init(&w);
	kvf_wbuf_init(&again);
	for (size_t ai = 0; ai < kvf_abi_count(); ai++) {
		const struct kvf_abi *abi = kvf_abi_at(ai);
		size_t nd = sample_descs(abi, descs);
		int32_t codes[3] = {0, -704, 0};
		uint8_t bools[3] = {1, 0, 0};
		struct kvf_msg_replicas reps[3] = {
			{.descs = descs,
			 .n = nd,
			 .lease_ttl_ms = 500,
			 .has_checksum = true,
			 .checksum = 5},
			{.code = -704},
			{.descs = descs, .n = 1, .lease_ttl_ms = 500},
		};
		struct kvf_str ips[2] = {{"10.0.0.1", 8}, {"::1", 3}};
		struct kvf_msg_client_ips ipm = {{5, 6}, ips, 2};
		struct kvf_msg_key_replicas km = {{"k", 1}, descs, nd};
		struct kvf_msg_storage_config sc = {{"/fs", 3}, true, 1};

		for (int rpc = 0; rpc < KVF_RPC__COUNT; rpc++) {
			const struct kvf_abi_rpc *e = &abi->rpc[rpc];
			struct kvf_msg_req q, out;

			if (!e->registered)
				continue;
			kvf_wbuf_reset(&w);
			/* the generic error answer, in every RPC's shape */
			kvf_msg_enc_error(&w, abi, rpc, KVF_MC_NOT_SUPPORTED,
					  3);
			check_error_answer(&w, abi, rpc);
			check_resp(&w, abi, rpc);
			if (!kvf__msg_req_prog(rpc))
				continue;
			sample_req(&q, rpc, keys, vals, has, segs, uuids, prefs,
				   sizeof(prefs));
			encode_req(&w, abi, &q);
			if (e->nargs)
				check_by_literal(w.data, w.len, e->req_hash,
						 e->req_literal);
			items_init(&s, MAX_ITEMS);
			assert_int_equal(kvf_msg_req_decode(abi, rpc, w.data,
							    w.len, &s.it, &out,
							    NULL),
					 0);
			assert_true(kvf_msg_req_use_arrays(&out, segs2, uuids2,
							   MAX_ITEMS));
			kvf_wbuf_reset(&again);
			assert_int_equal(kvf_msg_req_encode(&again, abi, &out),
					 0);
			assert_int_equal(again.len, w.len);
			assert_memory_equal(again.data, w.data, w.len);
		}
		kvf_wbuf_reset(&w);
		kvf_msg_enc_ok(&w, abi, KVF_RPC_MountSegment);
		check_resp(&w, abi, KVF_RPC_MountSegment);
		kvf_msg_enc_str(&w, abi, KVF_RPC_ServiceReady,
				(struct kvf_str){"2.0.0", 5});
		check_resp(&w, abi, KVF_RPC_ServiceReady);
		kvf_msg_enc_bool(&w, abi, KVF_RPC_ExistKey, true);
		check_resp(&w, abi, KVF_RPC_ExistKey);
		kvf_msg_enc_i32(&w, abi, KVF_RPC_QuerySegmentStatus, 2);
		check_resp(&w, abi, KVF_RPC_QuerySegmentStatus);
		kvf_msg_enc_i64(&w, abi, KVF_RPC_RemoveByRegex, 12);
		check_resp(&w, abi, KVF_RPC_RemoveByRegex);
		kvf_msg_enc_i64(&w, abi, KVF_RPC_RemoveAll, 12);
		check_resp(&w, abi, KVF_RPC_RemoveAll);
		kvf_msg_enc_ping(&w, abi, 1, KVF_MC_CLIENT_OK);
		check_resp(&w, abi, KVF_RPC_Ping);
		kvf_msg_enc_storage_config(&w, abi, &sc);
		check_resp(&w, abi, KVF_RPC_GetStorageConfig);
		kvf_msg_enc_codes(&w, abi, KVF_RPC_BatchPutEnd, codes, 3);
		check_resp(&w, abi, KVF_RPC_BatchPutEnd);
		kvf_msg_enc_bools(&w, abi, KVF_RPC_BatchExistKey, codes, bools,
				  3);
		check_resp(&w, abi, KVF_RPC_BatchExistKey);
		kvf_msg_enc_replicas(&w, abi, KVF_RPC_PutStart, &reps[0]);
		check_resp(&w, abi, KVF_RPC_PutStart);
		kvf_msg_enc_replicas(&w, abi, KVF_RPC_GetReplicaList, &reps[0]);
		check_resp(&w, abi, KVF_RPC_GetReplicaList);
		kvf_msg_enc_replicas_vec(&w, abi, KVF_RPC_BatchPutStart, reps,
					 3);
		check_resp(&w, abi, KVF_RPC_BatchPutStart);
		kvf_msg_enc_replicas_vec(&w, abi, KVF_RPC_BatchGetReplicaList,
					 reps, 3);
		check_resp(&w, abi, KVF_RPC_BatchGetReplicaList);
		kvf_msg_enc_regex_map(&w, abi, &km, 1);
		check_resp(&w, abi, KVF_RPC_GetReplicaListByRegex);
		kvf_msg_enc_ip_map(&w, abi, &ipm, 1);
		check_resp(&w, abi, KVF_RPC_BatchQueryIp);
		kvf_msg_enc_empty_vec(&w, abi, KVF_RPC_FetchTasks);
		check_resp(&w, abi, KVF_RPC_FetchTasks);
	}
	kvf_wbuf_free(&w);
	kvf_wbuf_free(&again);
}

/* Descriptor variant indexes beyond the revision's are refused. */
static void test_bad_variant(void **state)
{
	static struct resp_space s;
	struct kvf_msg_desc d[5];
	struct kvf_wbuf w;

	(void)state;
	kvf_wbuf_init(&w);
	for (size_t ai = 0; ai < kvf_abi_count(); ai++) {
		const struct kvf_abi *abi = kvf_abi_at(ai);
		struct kvf_msg_replicas rep = {
			.descs = d, .n = 1, .lease_ttl_ms = 1};
		size_t idx = 4 + 1 + 1 + 8; /* hash, has_value, count, id */

		sample_descs(abi, d);
		kvf_wbuf_reset(&w);
		kvf_msg_enc_replicas(&w, abi, KVF_RPC_GetReplicaList, &rep);
		assert_int_equal(w.data[idx], KVF_MC_DESC_MEMORY);
		w.data[idx] = abi->desc_variants;
		resp_init(&s);
		assert_int_equal(kvf_msg_resp_decode(abi,
						     KVF_RPC_GetReplicaList,
						     w.data, w.len, &s.r),
				 KVF_WIRE_ERR_VARIANT);
	}
	kvf_wbuf_free(&w);
}

/*
 * The compact memory-replica encoder writes what the general one writes
 * for the same answer: both ABIs, put and get forms, error items, runs of
 * replicas on one segment and alternating ones, a segment tail longer
 * than the fast copy, strings too long for the one-byte form and batches
 * too long for it.
 */
#define MEM_ITEMS 300

static void check_mem_replicas(const struct kvf_abi *abi, enum kvf_rpc rpc,
			       const struct kvf_msg_mem_seg *segs, size_t nsegs,
			       size_t n, uint64_t seed)
{
	static struct kvf_msg_mem_replicas mi[MEM_ITEMS];
	static struct kvf_msg_mem_desc md[MEM_ITEMS * KVF_MAX_REPLICAS];
	static struct kvf_msg_replicas gi[MEM_ITEMS];
	static struct kvf_msg_desc gd[MEM_ITEMS * KVF_MAX_REPLICAS];
	int32_t status = rpc == KVF_RPC_BatchGetReplicaList
				 ? KVF_MC_REPLICA_COMPLETE
				 : KVF_MC_REPLICA_PROCESSING;
	uint64_t lease = rpc == KVF_RPC_BatchGetReplicaList ? 5000 : 0;
	struct kvf_wbuf a, b;

	kvf_wbuf_init(&a);
	kvf_wbuf_init(&b);
	for (size_t i = 0; i < n; i++) {
		uint64_t x = seed ^ (i * 0x9e3779b97f4a7c15ULL);
		uint32_t nr = (uint32_t)((x >> 7) % (KVF_MAX_REPLICAS + 1));

		x ^= x >> 31;
		x *= 0xbf58476d1ce4e5b9ULL;
		if (x % 5 == 0) {
			mi[i] = (struct kvf_msg_mem_replicas){.code = -704};
			gi[i] = (struct kvf_msg_replicas){.code = -704};
			continue;
		}
		for (uint32_t r = 0; r < nr; r++) {
			size_t k = i * KVF_MAX_REPLICAS + r;
			const struct kvf_msg_mem_seg *sg =
				&segs[(x >> (8 + 2 * r)) % 4 < 3
					      ? 0
					      : (x >> 20) % nsegs];

			md[k] = (struct kvf_msg_mem_desc){.id = x + r,
							  .size = 4096 + r,
							  .addr = (x << 12) + r,
							  .seg = sg};
			gd[k] = (struct kvf_msg_desc){
				.id = x + r,
				.kind = KVF_MC_DESC_MEMORY,
				.status = status,
				.size = 4096 + r,
				.addr = (x << 12) + r,
				.protocol = sg->protocol,
				.endpoint = sg->endpoint};
		}
		mi[i] = (struct kvf_msg_mem_replicas){
			.n = nr, .descs = &md[i * KVF_MAX_REPLICAS]};
		gi[i] = (struct kvf_msg_replicas){
			.descs = &gd[i * KVF_MAX_REPLICAS],
			.n = nr,
			.lease_ttl_ms = lease};
	}
	kvf_msg_enc_replicas_vec(&a, abi, rpc, gi, n);
	kvf_msg_enc_mem_replicas_vec(&b, abi, rpc, mi, n, status, lease);
	assert_false(a.failed);
	assert_false(b.failed);
	assert_int_equal(b.len, a.len);
	assert_memory_equal(b.data, a.data, a.len);
	kvf_wbuf_free(&a);
	kvf_wbuf_free(&b);
}

static void test_mem_replicas(void **state)
{
	static char longest[300];
	const enum kvf_rpc rpcs[] = {KVF_RPC_BatchPutStart,
				     KVF_RPC_BatchUpsertStart,
				     KVF_RPC_BatchGetReplicaList};
	struct kvf_msg_mem_seg segs[] = {
		{{"tcp", 3}, {"127.0.0.1:12345", 15}},
		{{"rdma", 4}, {"10.0.0.2:17777", 14}},
		{{"tcp", 3},
		 {"a-rather-long-host-name.example.internal:65535", 46}},
		/* protocol, endpoint and status take the fast copy's 32 */
		{{"tcp", 3}, {"host-of-23-bytes.a:1234", 23}},
		{{"tcp", 3}, {NULL, 0}},
		{{"tcp", 3}, {longest, sizeof(longest)}},
	};

	(void)state;
	memset(longest, 'h', sizeof(longest));
	for (size_t ai = 0; ai < kvf_abi_count(); ai++) {
		const struct kvf_abi *abi = kvf_abi_at(ai);

		for (size_t r = 0; r < sizeof(rpcs) / sizeof(rpcs[0]); r++) {
			/* one-byte form: short strings, a tail over 32 */
			for (uint64_t seed = 1; seed <= 20; seed++)
				check_mem_replicas(abi, rpcs[r], segs, 5,
						   1 + seed * 11 % 200, seed);
			/* 256+ items, and a string over 255 bytes */
			check_mem_replicas(abi, rpcs[r], segs, 5, MEM_ITEMS, 7);
			check_mem_replicas(abi, rpcs[r], segs, 6, 64, 9);
			check_mem_replicas(abi, rpcs[r], segs, 1, 0, 3);
		}
	}
}

/* Length widths are chosen as upstream does: by the largest length. */
static void test_width(void **state)
{
	const struct kvf_abi *abi = latest();
	static int32_t codes[300];
	static struct resp_space s;
	struct kvf_wbuf w;
	char *big;

	(void)state;
	kvf_wbuf_init(&w);
	kvf_msg_enc_codes(&w, abi, KVF_RPC_BatchRemove, codes, 255);
	assert_int_equal(w.data[0] & 1, 0);
	assert_int_equal(w.len, 4 + 1 + 255);
	kvf_wbuf_reset(&w);
	kvf_msg_enc_codes(&w, abi, KVF_RPC_BatchRemove, codes, 300);
	assert_int_equal(w.data[0] & 1, 1);
	assert_int_equal(w.data[4], 0x08);
	assert_int_equal(w.len, 4 + 1 + 2 + 300);
	resp_init(&s);
	assert_int_equal(kvf_msg_resp_decode(abi, KVF_RPC_BatchRemove, w.data,
					     w.len, &s.r),
			 0);
	assert_int_equal(s.r.n, 300);
	kvf_wbuf_reset(&w);
	big = calloc(1, 70000);
	assert_non_null(big);
	kvf_msg_enc_str(&w, abi, KVF_RPC_GetFsdir,
			(struct kvf_str){big, 70000});
	assert_int_equal(w.data[4], 0x10);
	assert_int_equal(w.len, 4 + 1 + 1 + 4 + 70000);
	free(big);
	kvf_wbuf_free(&w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_md5),
		cmocka_unit_test(test_abi_tables),
		cmocka_unit_test(test_fixture_requests),
		cmocka_unit_test(test_fixture_responses),
		cmocka_unit_test(test_truncated),
		cmocka_unit_test(test_bad_input),
		cmocka_unit_test(test_codecs_match_literals),
		cmocka_unit_test(test_bad_variant),
		cmocka_unit_test(test_width),
		cmocka_unit_test(test_mem_replicas),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
