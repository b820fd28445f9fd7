// SPDX-License-Identifier: MIT
/*
 * wire/msg.c - typed Mooncake master messages over struct_pack.
 *
 * Requests: each RPC's argument list is a short "field program" (one
 * character per argument, table `req_prog`), run by one interpreter for
 * decoding and one for encoding, so the two directions cannot drift apart
 * and a new RPC is one table line. Layout differences between Mooncake
 * revisions (ReplicateConfig, ObjectMeta vs key, the descriptor variant,
 * GetReplicaListResponse's checksum) are branches on the struct kvf_abi
 * flags inside the field codecs. Decoding is one pass over the body, with
 * no allocation: strings are views, a batch's keys go to the caller's
 * array, and vectors of segments / UUIDs / names are validated in the pass
 * and kept as views. RPCs without a program are validated against their
 * type literal (kvf_spack_r_skip()).
 *
 * Responses: one encoder per answer type writes the short form with width
 * 1 first; if a length did not fit, the message is rewound and written
 * again with the width upstream would have chosen (only for answers with
 * 256+ items or long strings). Batch answers of memory replicas also
 * have a compact input form (kvf_msg_enc_mem_replicas_vec()) whose
 * one-byte writer copies each segment's encoded strings whole; it writes
 * the bytes the general writer would. Decoding responses (clients,
 * tests) fills the caller's arrays; kvf_msg_resp_reencode() maps a
 * decoded response back onto the encoders so tests can compare them with
 * upstream bytes.
 */
#include "wire/msg.h"

#include <string.h>

/*
 * Request field programs. Characters:
 *   c client_id (UUID)        s segment_id (UUID)       k key (string)
 *   t tenant (string)         K keys (vector<string>)   V vals (vector<u64>)
 *   M ObjectMeta or key       N vector<ObjectMeta or key>
 *   r replica_type (i32)      f force (bool)            n u64
 *   C ReplicateConfig         G Segment                 S vector<Segment>
 *   I vector<UUID>
 */
static const char *const req_prog[KVF_RPC__COUNT] = {
	[KVF_RPC_ServiceReady] = "",
	[KVF_RPC_GetStorageConfig] = "",
	[KVF_RPC_GetFsdir] = "",
	[KVF_RPC_Ping] = "c",
	[KVF_RPC_PollRemoveAll] = "c",
	[KVF_RPC_PromotionObjectHeartbeat] = "c",
	[KVF_RPC_UnmountLocalDiskSegment] = "c",
	[KVF_RPC_QueryTask] = "c",
	[KVF_RPC_QuerySegmentStatusById] = "s",
	[KVF_RPC_MountSegment] = "Gc",
	[KVF_RPC_ReMountSegment] = "Sc",
	[KVF_RPC_UnmountSegment] = "sc",
	[KVF_RPC_GracefulUnmountSegment] = "scn",
	[KVF_RPC_QuerySegmentStatus] = "k",
	[KVF_RPC_ExistKey] = "kt",
	[KVF_RPC_GetReplicaList] = "kt",
	[KVF_RPC_GetReplicaListByRegex] = "kt",
	[KVF_RPC_BatchExistKey] = "Kt",
	[KVF_RPC_BatchGetReplicaList] = "Kt",
	[KVF_RPC_PutStart] = "cknCt",
	[KVF_RPC_UpsertStart] = "cknCt",
	[KVF_RPC_PutEnd] = "cMrt",
	[KVF_RPC_UpsertEnd] = "cMrt",
	[KVF_RPC_PutRevoke] = "ckrt",
	[KVF_RPC_UpsertRevoke] = "ckrt",
	[KVF_RPC_BatchPutStart] = "cKVCt",
	[KVF_RPC_BatchUpsertStart] = "cKVCt",
	[KVF_RPC_BatchPutEnd] = "cNrt",
	[KVF_RPC_BatchUpsertEnd] = "cNt",
	[KVF_RPC_BatchPutRevoke] = "cKrt",
	[KVF_RPC_BatchUpsertRevoke] = "cKt",
	[KVF_RPC_Remove] = "kft",
	[KVF_RPC_RemoveByRegex] = "kft",
	[KVF_RPC_BatchRemove] = "Kft",
	[KVF_RPC_RemoveAll] = "ft",
	[KVF_RPC_BatchQueryIp] = "I",
	[KVF_RPC_FetchTasks] = "cn",
};

const char *kvf__msg_req_prog(enum kvf_rpc rpc)
{
	return (unsigned)rpc < KVF_RPC__COUNT ? req_prog[rpc] : NULL;
}

/* ---- reading fields ---- */

static struct kvf_uuid rd_uuid(struct kvf_spack_r *r)
{
	struct kvf_uuid u;

	u.first = kvf_spack_r_u64(r);
	u.second = kvf_spack_r_u64(r);
	return u;
}

static struct kvf_str rd_str(struct kvf_spack_r *r)
{
	struct kvf_str s;

	s.data = kvf_spack_r_str(r, &s.len);
	return s;
}

static int32_t rd_i32(struct kvf_spack_r *r)
{
	return (int32_t)kvf_spack_r_u32(r);
}

/* optional<u64> */
static bool rd_opt_u64(struct kvf_spack_r *r, uint64_t *v)
{
	bool has = kvf_spack_r_bool(r);

	*v = has ? kvf_spack_r_u64(r) : 0;
	return has;
}

/* The smallest encoding of a Segment: two UUID words, two u64, and five
 * empty strings. */
static size_t segment_min(const struct kvf_spack_r *r)
{
	return 16 + 16 + 4 * (size_t)r->width + r->width;
}

static void rd_segment(struct kvf_spack_r *r, struct kvf_msg_segment *s)
{
	s->id = rd_uuid(r);
	s->name = rd_str(r);
	s->base = kvf_spack_r_u64(r);
	s->size = kvf_spack_r_u64(r);
	s->te_endpoint = rd_str(r);
	s->protocol = rd_str(r);
	s->host_id = rd_str(r);
}

typedef void (*rd_elem_fn)(struct kvf_spack_r *r, void *out);

static void rd_str_elem(struct kvf_spack_r *r, void *out)
{
	*(struct kvf_str *)out = rd_str(r);
}

static void rd_uuid_elem(struct kvf_spack_r *r, void *out)
{
	*(struct kvf_uuid *)out = rd_uuid(r);
}

static void rd_segment_elem(struct kvf_spack_r *r, void *out)
{
	rd_segment(r, out);
}

/*
 * A vector kept as a view: validate every element now (so iterating later
 * cannot fail) and remember where the elements are.
 */
static void rd_view(struct kvf_spack_r *r, struct kvf_msg_view *v, size_t min,
		    rd_elem_fn elem, void *scratch)
{
	v->n = kvf_spack_r_count(r, min);
	v->width = r->width;
	v->at = r->p;
	for (uint64_t i = 0; i < v->n && !r->err; i++)
		elem(r, scratch);
	v->end = r->p;
}

static void rd_str_view(struct kvf_spack_r *r, struct kvf_msg_view *v)
{
	struct kvf_str s;

	rd_view(r, v, r->width, rd_str_elem, &s);
}

static void rd_config(struct kvf_spack_r *r, const struct kvf_abi *abi,
		      struct kvf_msg_replicate_config *c)
{
	c->replica_num = kvf_spack_r_u64(r);
	c->nof_replica_num = kvf_spack_r_u64(r);
	if (abi->rc == KVF_ABI_RC_SOFT_PIN_ACTION) {
		c->dfs_replica_num = kvf_spack_r_u64(r);
		c->soft_pin_action = kvf_spack_r_u8(r);
		if (c->soft_pin_action > KVF_MC_SOFT_PIN_DISABLE)
			kvf_spack_r_fail(r, KVF_WIRE_ERR_VALUE);
		c->with_soft_pin = c->soft_pin_action == KVF_MC_SOFT_PIN_ENABLE;
		c->has_soft_pin_ttl = rd_opt_u64(r, &c->soft_pin_ttl_ms);
	} else {
		c->with_soft_pin = kvf_spack_r_bool(r);
		c->soft_pin_action = c->with_soft_pin
					     ? KVF_MC_SOFT_PIN_ENABLE
					     : KVF_MC_SOFT_PIN_PRESERVE;
	}
	c->with_hard_pin = kvf_spack_r_bool(r);
	rd_str_view(r, &c->preferred_segments);
	c->preferred_segment = rd_str(r);
	rd_str_view(r, &c->preferred_nof_segments);
	c->prefer_alloc_in_same_node = kvf_spack_r_bool(r);
	c->data_type = kvf_spack_r_u8(r);
	c->host_id = rd_str(r);
	c->has_group_ids = kvf_spack_r_bool(r);
	if (c->has_group_ids)
		rd_str_view(r, &c->group_ids);
}

static uint64_t rd_batch_count(struct kvf_spack_r *r, size_t min,
			       const struct kvf_msg_items *items)
{
	uint64_t n = kvf_spack_r_count(r, min);

	if (!r->err && n && (!items || n > items->cap)) {
		kvf_spack_r_fail(r, KVF_WIRE_ERR_TOO_MANY);
		return 0;
	}
	return n;
}

static void rd_keys(struct kvf_spack_r *r, const struct kvf_msg_items *items,
		    struct kvf_msg_req *q)
{
	uint64_t n = rd_batch_count(r, r->width, items);

	for (uint64_t i = 0; i < n; i++) {
		struct kvf_key *k = &items->keys[i];

		k->data = kvf_spack_r_str(r, &k->len);
	}
	q->keys = n ? items->keys : NULL;
	q->nkeys = (size_t)n;
}

static void rd_vals(struct kvf_spack_r *r, const struct kvf_msg_items *items,
		    struct kvf_msg_req *q)
{
	uint64_t n = rd_batch_count(r, 8, items && items->vals ? items : NULL);
	const uint8_t *p = kvf_spack_r_take(r, (size_t)n * 8);

	for (uint64_t i = 0; p && i < n; i++) {
		uint64_t v;

		memcpy(&v, p + 8 * i, 8);
		items->vals[i] = le64toh(v);
		if (items->has_val)
			items->has_val[i] = 1;
	}
	q->vals = n ? items->vals : NULL;
	q->has_val = n ? items->has_val : NULL;
	q->nvals = (size_t)n;
}

/* vector<ObjectMeta> (or vector<string> in ABIs without ObjectMeta). */
static void rd_metas(struct kvf_spack_r *r, const struct kvf_abi *abi,
		     const struct kvf_msg_items *items, struct kvf_msg_req *q)
{
	bool meta = abi->put_end_meta;
	uint64_t n = rd_batch_count(r, r->width + meta, items);

	for (uint64_t i = 0; i < n; i++) {
		struct kvf_key *k = &items->keys[i];
		uint64_t v = 0;
		bool has = false;

		k->data = kvf_spack_r_str(r, &k->len);
		if (meta)
			has = rd_opt_u64(r, &v);
		if (items->vals)
			items->vals[i] = v;
		if (items->has_val)
			items->has_val[i] = has;
	}
	q->keys = n ? items->keys : NULL;
	q->nkeys = (size_t)n;
	q->vals = n ? items->vals : NULL;
	q->has_val = n ? items->has_val : NULL;
	q->nvals = items && items->vals ? (size_t)n : 0;
}

static void rd_field(struct kvf_spack_r *r, const struct kvf_abi *abi, char f,
		     const struct kvf_msg_items *items, struct kvf_msg_req *q)
{
	struct kvf_uuid u;
	struct kvf_msg_segment seg;

	switch (f) {
	case 'c':
		q->client_id = rd_uuid(r);
		break;
	case 's':
		q->segment_id = rd_uuid(r);
		break;
	case 'k':
		q->key = rd_str(r);
		break;
	case 't':
		q->tenant = rd_str(r);
		break;
	case 'K':
		rd_keys(r, items, q);
		break;
	case 'V':
		rd_vals(r, items, q);
		break;
	case 'M':
		q->key = rd_str(r);
		if (abi->put_end_meta)
			q->has_checksum = rd_opt_u64(r, &q->checksum);
		break;
	case 'N':
		rd_metas(r, abi, items, q);
		break;
	case 'r':
		q->replica_type = rd_i32(r);
		break;
	case 'f':
		q->force = kvf_spack_r_bool(r);
		break;
	case 'n':
		q->u64 = kvf_spack_r_u64(r);
		break;
	case 'C':
		rd_config(r, abi, &q->config);
		break;
	case 'G':
		rd_segment(r, &q->segment);
		break;
	case 'S':
		rd_view(r, &q->segments, segment_min(r), rd_segment_elem, &seg);
		break;
	case 'I':
		rd_view(r, &q->uuids, 16, rd_uuid_elem, &u);
		break;
	}
}

static unsigned hex_digit(char c)
{
	return c <= '9' ? (unsigned)(c - '0') : (unsigned)(c - 'a' + 10);
}

/* Hex literal from a table into bytes; literals are short (< 512 bytes). */
static size_t lit_bytes(const char *hex, uint8_t *out, size_t cap)
{
	size_t n = 0;

	for (; hex[0] && hex[1] && n < cap; hex += 2)
		out[n++] =
			(uint8_t)(hex_digit(hex[0]) << 4 | hex_digit(hex[1]));
	return n;
}

/* Validate a value against a hex type literal. */
static int rd_by_literal(struct kvf_spack_r *r, const char *hex)
{
	uint8_t lit[512];
	size_t n = lit_bytes(hex, lit, sizeof(lit));
	const uint8_t *p = lit;

	return kvf_spack_r_skip(r, &p, lit + n);
}

int kvf_msg_req_decode(const struct kvf_abi *abi, enum kvf_rpc rpc,
		       const void *body, size_t len,
		       const struct kvf_msg_items *items,
		       struct kvf_msg_req *out, uint32_t *found_hash)
{
	const struct kvf_abi_rpc *e;
	const char *prog;
	struct kvf_spack_r r;

	memset(out, 0, sizeof(*out));
	out->rpc = rpc;
	if (found_hash)
		*found_hash = 0;
	if ((unsigned)rpc >= KVF_RPC__COUNT || !abi->rpc[rpc].registered)
		return KVF_WIRE_ERR_UNKNOWN_RPC;
	e = &abi->rpc[rpc];
	prog = req_prog[rpc];
	out->typed = prog != NULL;
	/* No arguments: the body is empty and not looked at (as upstream). */
	if (!e->nargs)
		return KVF_WIRE_OK;
	kvf_spack_r_begin(&r, body, len, e->req_hash);
	if (found_hash)
		*found_hash = r.hash;
	if (r.err)
		return r.err;
	if (!prog)
		return rd_by_literal(&r, e->req_literal);
	for (; *prog && !r.err; prog++)
		rd_field(&r, abi, *prog, items, out);
	return r.err;
}

/* ---- iterating views ---- */

static struct kvf_spack_r view_reader(const struct kvf_msg_view *v)
{
	struct kvf_spack_r r = {
		.p = v->at,
		.end = v->end,
		.width = v->width,
	};

	return r;
}

static bool view_next(struct kvf_msg_view *v, rd_elem_fn elem, void *out)
{
	struct kvf_spack_r r;

	if (!v->n)
		return false;
	r = view_reader(v);
	elem(&r, out);
	v->at = r.p;
	v->n--;
	return !r.err;
}

bool kvf_msg_view_str(struct kvf_msg_view *v, struct kvf_str *out)
{
	return view_next(v, rd_str_elem, out);
}

bool kvf_msg_view_uuid(struct kvf_msg_view *v, struct kvf_uuid *out)
{
	return view_next(v, rd_uuid_elem, out);
}

bool kvf_msg_view_segment(struct kvf_msg_view *v, struct kvf_msg_segment *out)
{
	return view_next(v, rd_segment_elem, out);
}

bool kvf_msg_req_use_arrays(struct kvf_msg_req *q, struct kvf_msg_segment *segs,
			    struct kvf_uuid *uuids, size_t cap)
{
	struct kvf_msg_view it = q->segments;

	q->nsegments = 0;
	while (q->nsegments < cap &&
	       kvf_msg_view_segment(&it, &segs[q->nsegments]))
		q->nsegments++;
	q->segment_array = segs;
	q->nuuids = 0;
	it = q->uuids;
	while (q->nuuids < cap && kvf_msg_view_uuid(&it, &uuids[q->nuuids]))
		q->nuuids++;
	q->uuid_array = uuids;
	return q->nsegments == q->segments.n && q->nuuids == q->uuids.n;
}

/* ---- writing fields ---- */

static void wr_uuid(struct kvf_spack_w *w, struct kvf_uuid u)
{
	kvf_spack_w_u64(w, u.first);
	kvf_spack_w_u64(w, u.second);
}

static void wr_str(struct kvf_spack_w *w, struct kvf_str s)
{
	kvf_spack_w_str(w, s.data, s.len);
}

static void wr_opt_u64(struct kvf_spack_w *w, bool has, uint64_t v)
{
	kvf_spack_w_u8(w, has);
	if (has)
		kvf_spack_w_u64(w, v);
}

/* A view's elements again: copied as they are when the width agrees. */
static void wr_view(struct kvf_spack_w *w, const struct kvf_msg_view *v,
		    void (*elem)(struct kvf_spack_w *, struct kvf_msg_view *))
{
	struct kvf_msg_view it = *v;

	kvf_spack_w_count(w, v->n);
	while (it.n)
		elem(w, &it);
}

static void wr_str_elem(struct kvf_spack_w *w, struct kvf_msg_view *it)
{
	struct kvf_str s = {"", 0};

	kvf_msg_view_str(it, &s);
	wr_str(w, s);
}

static void wr_config(struct kvf_spack_w *w, const struct kvf_abi *abi,
		      const struct kvf_msg_replicate_config *c)
{
	kvf_spack_w_u64(w, c->replica_num);
	kvf_spack_w_u64(w, c->nof_replica_num);
	if (abi->rc == KVF_ABI_RC_SOFT_PIN_ACTION) {
		kvf_spack_w_u64(w, c->dfs_replica_num);
		kvf_spack_w_u8(w, c->soft_pin_action);
		wr_opt_u64(w, c->has_soft_pin_ttl, c->soft_pin_ttl_ms);
	} else {
		kvf_spack_w_u8(w,
			       c->soft_pin_action == KVF_MC_SOFT_PIN_ENABLE ||
				       c->with_soft_pin);
	}
	kvf_spack_w_u8(w, c->with_hard_pin);
	wr_view(w, &c->preferred_segments, wr_str_elem);
	wr_str(w, c->preferred_segment);
	wr_view(w, &c->preferred_nof_segments, wr_str_elem);
	kvf_spack_w_u8(w, c->prefer_alloc_in_same_node);
	kvf_spack_w_u8(w, c->data_type);
	wr_str(w, c->host_id);
	kvf_spack_w_u8(w, c->has_group_ids);
	if (c->has_group_ids)
		wr_view(w, &c->group_ids, wr_str_elem);
}

static void wr_segment(struct kvf_spack_w *w, const struct kvf_msg_segment *s)
{
	wr_uuid(w, s->id);
	wr_str(w, s->name);
	kvf_spack_w_u64(w, s->base);
	kvf_spack_w_u64(w, s->size);
	wr_str(w, s->te_endpoint);
	wr_str(w, s->protocol);
	wr_str(w, s->host_id);
}

static void wr_keys(struct kvf_spack_w *w, const struct kvf_msg_req *q,
		    bool meta)
{
	kvf_spack_w_count(w, q->nkeys);
	for (size_t i = 0; i < q->nkeys; i++) {
		kvf_spack_w_str(w, q->keys[i].data, q->keys[i].len);
		if (meta)
			wr_opt_u64(w, q->has_val && q->has_val[i],
				   q->vals ? q->vals[i] : 0);
	}
}

static void wr_field(struct kvf_spack_w *w, const struct kvf_abi *abi, char f,
		     const struct kvf_msg_req *q)
{
	switch (f) {
	case 'c':
		wr_uuid(w, q->client_id);
		break;
	case 's':
		wr_uuid(w, q->segment_id);
		break;
	case 'k':
		wr_str(w, q->key);
		break;
	case 't':
		wr_str(w, q->tenant);
		break;
	case 'K':
		wr_keys(w, q, false);
		break;
	case 'V':
		kvf_spack_w_count(w, q->nvals);
		for (size_t i = 0; i < q->nvals; i++)
			kvf_spack_w_u64(w, q->vals[i]);
		break;
	case 'M':
		wr_str(w, q->key);
		if (abi->put_end_meta)
			wr_opt_u64(w, q->has_checksum, q->checksum);
		break;
	case 'N':
		wr_keys(w, q, abi->put_end_meta);
		break;
	case 'r':
		kvf_spack_w_u32(w, (uint32_t)q->replica_type);
		break;
	case 'f':
		kvf_spack_w_u8(w, q->force);
		break;
	case 'n':
		kvf_spack_w_u64(w, q->u64);
		break;
	case 'C':
		wr_config(w, abi, &q->config);
		break;
	case 'G':
		wr_segment(w, &q->segment);
		break;
	case 'S':
		kvf_spack_w_count(w, q->nsegments);
		for (size_t i = 0; i < q->nsegments; i++)
			wr_segment(w, &q->segment_array[i]);
		break;
	case 'I':
		kvf_spack_w_count(w, q->nuuids);
		for (size_t i = 0; i < q->nuuids; i++)
			wr_uuid(w, q->uuid_array[i]);
		break;
	}
}

/*
 * Write one message with the narrowest width first and again wider when a
 * length did not fit: the result has the width upstream's writer picks.
 */
typedef void (*body_fn)(struct kvf_spack_w *w, const void *arg);

static void write_msg(struct kvf_wbuf *buf, uint32_t hash, body_fn body,
		      const void *arg)
{
	struct kvf_spack_w w;
	uint8_t width = 1;

	for (;;) {
		kvf_spack_w_begin(&w, buf, hash, width);
		body(&w, arg);
		width = kvf_spack_w_width_needed(&w);
		if (!width || buf->failed)
			return;
		kvf_spack_w_rewind(&w);
	}
}

struct req_arg {
	const struct kvf_abi *abi;
	const struct kvf_msg_req *q;
	const char *prog;
};

static void req_body(struct kvf_spack_w *w, const void *arg)
{
	const struct req_arg *a = arg;

	for (const char *p = a->prog; *p; p++)
		wr_field(w, a->abi, *p, a->q);
}

int kvf_msg_req_encode(struct kvf_wbuf *w, const struct kvf_abi *abi,
		       const struct kvf_msg_req *req)
{
	struct req_arg a = {abi, req, NULL};
	const struct kvf_abi_rpc *e;

	if ((unsigned)req->rpc >= KVF_RPC__COUNT)
		return KVF_WIRE_ERR_UNKNOWN_RPC;
	e = &abi->rpc[req->rpc];
	a.prog = req_prog[req->rpc];
	if (!e->registered)
		return KVF_WIRE_ERR_UNKNOWN_RPC;
	if (!a.prog)
		return KVF_WIRE_ERR_UNSUPPORTED;
	if (e->nargs)
		write_msg(w, e->req_hash, req_body, &a);
	return w->failed ? KVF_WIRE_ERR_NO_MEMORY : KVF_WIRE_OK;
}

/* ---- responses ---- */

/* Everything a response encoder may need, in one argument. */
struct resp_arg {
	const struct kvf_abi *abi;
	enum kvf_rpc rpc;
	int32_t code;
	size_t n;
	const int32_t *codes;
	const uint8_t *vals;
	const struct kvf_msg_replicas *items;
	const void *entries;
	struct kvf_str s;
	int64_t i64;
	int32_t i32;
	const struct kvf_msg_storage_config *storage;
};

static void encode(struct kvf_wbuf *w, body_fn body, struct resp_arg *a)
{
	write_msg(w, a->abi->rpc[a->rpc].resp_hash, body, a);
}

static void wr_err(struct kvf_spack_w *w, int32_t code)
{
	kvf_spack_w_u8(w, 0);
	kvf_spack_w_u32(w, (uint32_t)code);
}

static void error_body(struct kvf_spack_w *w, const void *arg)
{
	const struct resp_arg *a = arg;

	switch (a->abi->rpc[a->rpc].shape) {
	case KVF_ABI_BARE_I64:
		kvf_spack_w_u64(w, (uint64_t)(int64_t)a->code);
		break;
	case KVF_ABI_EXPECTED_VEC:
		kvf_spack_w_count(w, a->n);
		for (size_t i = 0; i < a->n; i++)
			wr_err(w, a->code);
		break;
	default:
		wr_err(w, a->code);
		break;
	}
}

void kvf_msg_enc_error(struct kvf_wbuf *w, const struct kvf_abi *abi,
		       enum kvf_rpc rpc, int32_t code, size_t nitems)
{
	struct resp_arg a = {.abi = abi, .rpc = rpc, .code = code, .n = nitems};

	encode(w, error_body, &a);
}

static void ok_body(struct kvf_spack_w *w, const void *arg)
{
	(void)arg;
	kvf_spack_w_u8(w, 1);
}

void kvf_msg_enc_ok(struct kvf_wbuf *w, const struct kvf_abi *abi,
		    enum kvf_rpc rpc)
{
	struct resp_arg a = {.abi = abi, .rpc = rpc};

	encode(w, ok_body, &a);
}

static void str_body(struct kvf_spack_w *w, const void *arg)
{
	const struct resp_arg *a = arg;

	kvf_spack_w_u8(w, 1);
	wr_str(w, a->s);
}

void kvf_msg_enc_str(struct kvf_wbuf *w, const struct kvf_abi *abi,
		     enum kvf_rpc rpc, struct kvf_str s)
{
	struct resp_arg a = {.abi = abi, .rpc = rpc, .s = s};

	encode(w, str_body, &a);
}

static void bool_body(struct kvf_spack_w *w, const void *arg)
{
	const struct resp_arg *a = arg;

	kvf_spack_w_u8(w, 1);
	kvf_spack_w_u8(w, a->i32 != 0);
}

void kvf_msg_enc_bool(struct kvf_wbuf *w, const struct kvf_abi *abi,
		      enum kvf_rpc rpc, bool v)
{
	struct resp_arg a = {.abi = abi, .rpc = rpc, .i32 = v};

	encode(w, bool_body, &a);
}

static void i32_body(struct kvf_spack_w *w, const void *arg)
{
	const struct resp_arg *a = arg;

	kvf_spack_w_u8(w, 1);
	kvf_spack_w_u32(w, (uint32_t)a->i32);
}

void kvf_msg_enc_i32(struct kvf_wbuf *w, const struct kvf_abi *abi,
		     enum kvf_rpc rpc, int32_t v)
{
	struct resp_arg a = {.abi = abi, .rpc = rpc, .i32 = v};

	encode(w, i32_body, &a);
}

static void i64_body(struct kvf_spack_w *w, const void *arg)
{
	const struct resp_arg *a = arg;

	if (a->abi->rpc[a->rpc].shape != KVF_ABI_BARE_I64)
		kvf_spack_w_u8(w, 1);
	kvf_spack_w_u64(w, (uint64_t)a->i64);
}

void kvf_msg_enc_i64(struct kvf_wbuf *w, const struct kvf_abi *abi,
		     enum kvf_rpc rpc, int64_t v)
{
	struct resp_arg a = {.abi = abi, .rpc = rpc, .i64 = v};

	encode(w, i64_body, &a);
}

static void ping_body(struct kvf_spack_w *w, const void *arg)
{
	const struct resp_arg *a = arg;

	kvf_spack_w_u8(w, 1);
	kvf_spack_w_u64(w, (uint64_t)a->i64);
	kvf_spack_w_u32(w, (uint32_t)a->i32);
}

void kvf_msg_enc_ping(struct kvf_wbuf *w, const struct kvf_abi *abi,
		      int64_t view_version_id, int32_t client_status)
{
	struct resp_arg a = {.abi = abi,
			     .rpc = KVF_RPC_Ping,
			     .i64 = view_version_id,
			     .i32 = client_status};

	encode(w, ping_body, &a);
}

static void storage_body(struct kvf_spack_w *w, const void *arg)
{
	const struct resp_arg *a = arg;

	kvf_spack_w_u8(w, 1);
	wr_str(w, a->storage->fsdir);
	kvf_spack_w_u8(w, a->storage->enable_disk_eviction);
	kvf_spack_w_u64(w, a->storage->quota_bytes);
}

void kvf_msg_enc_storage_config(struct kvf_wbuf *w, const struct kvf_abi *abi,
				const struct kvf_msg_storage_config *c)
{
	struct resp_arg a = {
		.abi = abi, .rpc = KVF_RPC_GetStorageConfig, .storage = c};

	encode(w, storage_body, &a);
}

/* One vector element: expected<void> or expected<bool>. */
static void codes_body(struct kvf_spack_w *w, const void *arg)
{
	const struct resp_arg *a = arg;

	kvf_spack_w_count(w, a->n);
	for (size_t i = 0; i < a->n; i++) {
		int32_t code = a->codes ? a->codes[i] : a->items[i].code;

		if (code) {
			wr_err(w, code);
			continue;
		}
		kvf_spack_w_u8(w, 1);
		if (a->vals)
			kvf_spack_w_u8(w, a->vals[i] != 0);
	}
}

void kvf_msg_enc_codes(struct kvf_wbuf *w, const struct kvf_abi *abi,
		       enum kvf_rpc rpc, const int32_t *codes, size_t n)
{
	struct resp_arg a = {.abi = abi, .rpc = rpc, .codes = codes, .n = n};

	encode(w, codes_body, &a);
}

void kvf_msg_enc_bools(struct kvf_wbuf *w, const struct kvf_abi *abi,
		       enum kvf_rpc rpc, const int32_t *codes,
		       const uint8_t *vals, size_t n)
{
	struct resp_arg a = {
		.abi = abi, .rpc = rpc, .codes = codes, .vals = vals, .n = n};

	encode(w, codes_body, &a);
}

static uint8_t *put_le64(uint8_t *p, uint64_t v)
{
	v = htole64(v);
	memcpy(p, &v, 8);
	return p + 8;
}

static uint8_t *put_short_str(uint8_t *p, struct kvf_str s)
{
	*p++ = (uint8_t)s.len;
	if (s.len) /* an unknown segment's endpoint is {NULL, 0} */
		memcpy(p, s.data, s.len);
	return p + s.len;
}

/*
 * The hot case, a memory replica with short strings in a one-byte-width
 * message: one reservation, then plain stores.
 */
static bool wr_memory_desc_fast(struct kvf_spack_w *w,
				const struct kvf_msg_desc *d)
{
	size_t need =
		8 + 1 + 8 + 8 + 1 + d->protocol.len + 1 + d->endpoint.len + 4;
	uint32_t status = htole32((uint32_t)d->status);
	uint8_t *p;

	if (w->width != 1 || d->protocol.len > 255 || d->endpoint.len > 255 ||
	    (d->kind != KVF_MC_DESC_MEMORY && d->kind != KVF_MC_DESC_NOF))
		return false;
	p = kvf_wbuf_reserve(w->buf, need);
	if (!p)
		return true;
	p = put_le64(p, d->id);
	*p++ = d->kind;
	p = put_le64(p, d->size);
	p = put_le64(p, d->addr);
	p = put_short_str(p, d->protocol);
	p = put_short_str(p, d->endpoint);
	memcpy(p, &status, 4);
	w->buf->len += need;
	return true;
}

static void wr_desc(struct kvf_spack_w *w, const struct kvf_msg_desc *d)
{
	if (wr_memory_desc_fast(w, d))
		return;
	kvf_spack_w_u64(w, d->id);
	kvf_spack_w_u8(w, d->kind);
	switch (d->kind) {
	case KVF_MC_DESC_MEMORY:
	case KVF_MC_DESC_NOF:
		kvf_spack_w_u64(w, d->size);
		kvf_spack_w_u64(w, d->addr);
		wr_str(w, d->protocol);
		wr_str(w, d->endpoint);
		break;
	case KVF_MC_DESC_DISK:
		wr_str(w, d->path);
		kvf_spack_w_u64(w, d->size);
		break;
	case KVF_MC_DESC_LOCAL_DISK:
		wr_uuid(w, d->client_id);
		kvf_spack_w_u64(w, d->size);
		wr_str(w, d->endpoint);
		break;
	default: /* KVF_MC_DESC_DFS */
		wr_str(w, d->path);
		kvf_spack_w_u64(w, d->offset);
		kvf_spack_w_u64(w, d->size);
		kvf_spack_w_u64(w, d->aligned_size);
		kvf_spack_w_u32(w, (uint32_t)d->shard_idx);
		break;
	}
	kvf_spack_w_u32(w, (uint32_t)d->status);
}

static void wr_descs(struct kvf_spack_w *w, const struct kvf_msg_desc *d,
		     size_t n)
{
	kvf_spack_w_count(w, n);
	for (size_t i = 0; i < n; i++)
		wr_desc(w, &d[i]);
}

/* Whether @rpc answers GetReplicaListResponse (else a vector<Desc>). */
static bool is_replica_list(enum kvf_rpc rpc)
{
	return rpc == KVF_RPC_GetReplicaList ||
	       rpc == KVF_RPC_BatchGetReplicaList;
}

/* One expected<vector<Desc>> or expected<GetReplicaListResponse>. */
static void wr_replicas(struct kvf_spack_w *w, const struct resp_arg *a,
			const struct kvf_msg_replicas *r)
{
	uint8_t *p;

	if (r->code) {
		wr_err(w, r->code);
		return;
	}
	if (w->width == 1 && r->n < 256 && (p = kvf_wbuf_reserve(w->buf, 2))) {
		/* has_value and a one-byte count in one store */
		p[0] = 1;
		p[1] = (uint8_t)r->n;
		w->buf->len += 2;
		for (size_t i = 0; i < r->n; i++)
			wr_desc(w, &r->descs[i]);
	} else {
		kvf_spack_w_u8(w, 1);
		wr_descs(w, r->descs, r->n);
	}
	if (!is_replica_list(a->rpc))
		return;
	p = kvf_wbuf_reserve(w->buf, 8 + 1 + 8);
	if (!p)
		return;
	p = put_le64(p, r->lease_ttl_ms);
	w->buf->len += 8;
	if (!a->abi->replica_list_checksum)
		return;
	*p++ = r->has_checksum;
	w->buf->len++;
	if (r->has_checksum) {
		put_le64(p, r->checksum);
		w->buf->len += 8;
	}
}

static void replicas_body(struct kvf_spack_w *w, const void *arg)
{
	const struct resp_arg *a = arg;

	wr_replicas(w, a, a->items);
}

void kvf_msg_enc_replicas(struct kvf_wbuf *w, const struct kvf_abi *abi,
			  enum kvf_rpc rpc, const struct kvf_msg_replicas *r)
{
	struct resp_arg a = {.abi = abi, .rpc = rpc, .items = r};

	encode(w, replicas_body, &a);
}

static void replicas_vec_body(struct kvf_spack_w *w, const void *arg)
{
	const struct resp_arg *a = arg;

	kvf_spack_w_count(w, a->n);
	for (size_t i = 0; i < a->n; i++)
		wr_replicas(w, a, &a->items[i]);
}

void kvf_msg_enc_replicas_vec(struct kvf_wbuf *w, const struct kvf_abi *abi,
			      enum kvf_rpc rpc,
			      const struct kvf_msg_replicas *items, size_t n)
{
	struct resp_arg a = {.abi = abi, .rpc = rpc, .items = items, .n = n};

	encode(w, replicas_vec_body, &a);
}

/*
 * Compact memory replicas (kvf_msg_enc_mem_replicas_vec()). A descriptor
 * is id, kind, size and addr, then bytes that depend only on its segment
 * and the answer's status: the protocol and endpoint, each behind its
 * one-byte length, and the status. Those are written once per run of
 * descriptors on one segment into @tail, and each descriptor copies them:
 * a fixed 32-byte copy when they fit (room for it is reserved, the length
 * advances only by what belongs), which compiles to two stores instead of
 * a memcpy() call per string. Anything the one-byte form cannot hold (a
 * wider message, a string over 255 bytes) goes through the general
 * writer, descriptor by descriptor.
 */
#define MEM_TAIL_FAST 32

struct mem_arg {
	const struct kvf_abi *abi;
	enum kvf_rpc rpc;
	const struct kvf_msg_mem_replicas *items;
	size_t n;
	int32_t status;
	uint64_t lease;
};

struct mem_tail {
	const struct kvf_msg_mem_seg *seg; /* NULL: none yet */
	size_t len;
	uint8_t b[1 + 255 + 1 + 255 + 4 + MEM_TAIL_FAST];
};

static void mem_to_desc(const struct mem_arg *a,
			const struct kvf_msg_mem_desc *m,
			struct kvf_msg_desc *d)
{
	*d = (struct kvf_msg_desc){.id = m->id,
				   .kind = KVF_MC_DESC_MEMORY,
				   .status = a->status,
				   .size = m->size,
				   .addr = m->addr,
				   .protocol = m->seg->protocol,
				   .endpoint = m->seg->endpoint};
}

/* The general writer's form of item @r. */
static void wr_mem_item_slow(struct kvf_spack_w *w, const struct mem_arg *a,
			     const struct kvf_msg_mem_replicas *r)
{
	struct kvf_msg_desc d[KVF_MAX_REPLICAS];
	struct resp_arg ra = {.abi = a->abi, .rpc = a->rpc};
	struct kvf_msg_replicas it = {
		.code = r->code, .descs = d, .lease_ttl_ms = a->lease};

	if (!r->code) {
		it.n = r->n < KVF_MAX_REPLICAS ? r->n : KVF_MAX_REPLICAS;
		for (size_t i = 0; i < it.n; i++)
			mem_to_desc(a, &r->descs[i], &d[i]);
	}
	wr_replicas(w, &ra, &it);
}

/* @t for @seg; false when a string needs more than the one-byte form. */
static bool mem_tail_set(struct mem_tail *t, const struct kvf_msg_mem_seg *seg,
			 int32_t status)
{
	uint32_t st = htole32((uint32_t)status);
	uint8_t *p = t->b;

	if (seg->protocol.len > 255 || seg->endpoint.len > 255)
		return false;
	p = put_short_str(p, seg->protocol);
	p = put_short_str(p, seg->endpoint);
	memcpy(p, &st, 4);
	t->len = (size_t)(p + 4 - t->b);
	t->seg = seg;
	return true;
}

/*
 * Item @r in the one-byte form; false (nothing written) when it cannot.
 * The room reserved covers the longest tails, so the item is written in
 * one pass and its bytes count (len advances) only once it is whole.
 */
static bool wr_mem_item_fast(struct kvf_spack_w *w, const struct mem_arg *a,
			     const struct kvf_msg_mem_replicas *r,
			     struct mem_tail *t, bool list)
{
	uint8_t *p, *start;

	if (r->n > KVF_MAX_REPLICAS)
		return false;
	start = p = kvf_wbuf_reserve(
		w->buf, 2 + r->n * (8 + 1 + 8 + 8 + sizeof(t->b)) + 8 + 1);
	if (!p)
		return true; /* the buffer failed: the message is lost */
	*p++ = 1;
	*p++ = (uint8_t)r->n;
	for (uint32_t i = 0; i < r->n; i++) {
		const struct kvf_msg_mem_desc *d = &r->descs[i];

		if (d->seg != t->seg && !mem_tail_set(t, d->seg, a->status))
			return false;
		p = put_le64(p, d->id);
		*p++ = KVF_MC_DESC_MEMORY;
		p = put_le64(p, d->size);
		p = put_le64(p, d->addr);
		if (t->len <= MEM_TAIL_FAST)
			memcpy(p, t->b, MEM_TAIL_FAST);
		else
			memcpy(p, t->b, t->len);
		p += t->len;
	}
	if (list) {
		p = put_le64(p, a->lease);
		if (a->abi->replica_list_checksum)
			*p++ = 0;
	}
	w->buf->len += (size_t)(p - start);
	return true;
}

static void mem_replicas_vec_body(struct kvf_spack_w *w, const void *arg)
{
	const struct mem_arg *a = arg;
	bool list = is_replica_list(a->rpc);
	/* zeroed: the fast copy reads past a short tail's end */
	struct mem_tail t = {.seg = NULL};

	kvf_spack_w_count(w, a->n);
	for (size_t i = 0; i < a->n; i++) {
		const struct kvf_msg_mem_replicas *r = &a->items[i];

		if (r->code)
			wr_err(w, r->code);
		else if (w->width != 1 || !wr_mem_item_fast(w, a, r, &t, list))
			wr_mem_item_slow(w, a, r);
	}
}

void kvf_msg_enc_mem_replicas_vec(struct kvf_wbuf *w, const struct kvf_abi *abi,
				  enum kvf_rpc rpc,
				  const struct kvf_msg_mem_replicas *items,
				  size_t n, int32_t status,
				  uint64_t lease_ttl_ms)
{
	struct mem_arg a = {.abi = abi,
			    .rpc = rpc,
			    .items = items,
			    .n = n,
			    .status = status,
			    .lease = lease_ttl_ms};

	write_msg(w, abi->rpc[rpc].resp_hash, mem_replicas_vec_body, &a);
}

static void regex_map_body(struct kvf_spack_w *w, const void *arg)
{
	const struct resp_arg *a = arg;
	const struct kvf_msg_key_replicas *e = a->entries;

	kvf_spack_w_u8(w, 1);
	kvf_spack_w_count(w, a->n);
	for (size_t i = 0; i < a->n; i++) {
		wr_str(w, e[i].key);
		wr_descs(w, e[i].descs, e[i].n);
	}
}

void kvf_msg_enc_regex_map(struct kvf_wbuf *w, const struct kvf_abi *abi,
			   const struct kvf_msg_key_replicas *e, size_t n)
{
	struct resp_arg a = {.abi = abi,
			     .rpc = KVF_RPC_GetReplicaListByRegex,
			     .entries = e,
			     .n = n};

	encode(w, regex_map_body, &a);
}

static void ip_map_body(struct kvf_spack_w *w, const void *arg)
{
	const struct resp_arg *a = arg;
	const struct kvf_msg_client_ips *e = a->entries;

	kvf_spack_w_u8(w, 1);
	kvf_spack_w_count(w, a->n);
	for (size_t i = 0; i < a->n; i++) {
		wr_uuid(w, e[i].client_id);
		kvf_spack_w_count(w, e[i].n);
		for (size_t j = 0; j < e[i].n; j++)
			wr_str(w, e[i].ips[j]);
	}
}

void kvf_msg_enc_ip_map(struct kvf_wbuf *w, const struct kvf_abi *abi,
			const struct kvf_msg_client_ips *e, size_t n)
{
	struct resp_arg a = {
		.abi = abi, .rpc = KVF_RPC_BatchQueryIp, .entries = e, .n = n};

	encode(w, ip_map_body, &a);
}

static void empty_vec_body(struct kvf_spack_w *w, const void *arg)
{
	(void)arg;
	kvf_spack_w_u8(w, 1);
	kvf_spack_w_count(w, 0);
}

void kvf_msg_enc_empty_vec(struct kvf_wbuf *w, const struct kvf_abi *abi,
			   enum kvf_rpc rpc)
{
	struct resp_arg a = {.abi = abi, .rpc = rpc};

	encode(w, empty_vec_body, &a);
}

/* ---- decoding responses ---- */

/* What a response holds, beyond its shape. */
enum resp_kind {
	RK_OTHER, /* validated by literal only */
	RK_VOID,
	RK_STR,
	RK_BOOL,
	RK_I32,
	RK_I64,
	RK_PING,
	RK_STORAGE,
	RK_CODES,
	RK_BOOLS,
	RK_DESCS,
	RK_DESCS_VEC,
	RK_GRL,
	RK_GRL_VEC,
	RK_MAP,
	RK_VEC, /* E<vector<T>> of another T (tasks, segments, ...) */
};

static enum resp_kind resp_kind(const struct kvf_abi *abi, enum kvf_rpc rpc)
{
	const char *lit = abi->rpc[rpc].resp_literal;

	switch (rpc) {
	case KVF_RPC_ServiceReady:
	case KVF_RPC_GetFsdir:
		return RK_STR;
	case KVF_RPC_ExistKey:
	case KVF_RPC_PollRemoveAll:
		return RK_BOOL;
	case KVF_RPC_QuerySegmentStatus:
	case KVF_RPC_QuerySegmentStatusById:
		return RK_I32;
	case KVF_RPC_RemoveByRegex:
	case KVF_RPC_RemoveAll:
		return RK_I64;
	case KVF_RPC_Ping:
		return RK_PING;
	case KVF_RPC_GetStorageConfig:
		return RK_STORAGE;
	case KVF_RPC_BatchExistKey:
		return RK_BOOLS;
	case KVF_RPC_PutStart:
	case KVF_RPC_UpsertStart:
		return RK_DESCS;
	case KVF_RPC_BatchPutStart:
	case KVF_RPC_BatchUpsertStart:
		return RK_DESCS_VEC;
	case KVF_RPC_GetReplicaList:
		return RK_GRL;
	case KVF_RPC_BatchGetReplicaList:
		return RK_GRL_VEC;
	case KVF_RPC_GetReplicaListByRegex:
	case KVF_RPC_BatchQueryIp:
		return RK_MAP;
	default:
		break;
	}
	if (!strcmp(lit, "87fa01"))
		return RK_VOID;
	if (!strcmp(lit, "8487fa01"))
		return RK_CODES;
	if (!strncmp(lit, "8784", 4))
		return RK_VEC;
	return RK_OTHER;
}

static void rd_desc(struct kvf_spack_r *r, const struct kvf_abi *abi,
		    struct kvf_msg_desc *d)
{
	/* only the fields of the descriptor's kind are set (hot path) */
	d->id = kvf_spack_r_u64(r);
	d->kind = kvf_spack_r_u8(r);
	if (d->kind >= abi->desc_variants) {
		kvf_spack_r_fail(r, KVF_WIRE_ERR_VARIANT);
		return;
	}
	switch (d->kind) {
	case KVF_MC_DESC_MEMORY:
	case KVF_MC_DESC_NOF:
		d->size = kvf_spack_r_u64(r);
		d->addr = kvf_spack_r_u64(r);
		d->protocol = rd_str(r);
		d->endpoint = rd_str(r);
		break;
	case KVF_MC_DESC_DISK:
		d->path = rd_str(r);
		d->size = kvf_spack_r_u64(r);
		break;
	case KVF_MC_DESC_LOCAL_DISK:
		d->client_id = rd_uuid(r);
		d->size = kvf_spack_r_u64(r);
		d->endpoint = rd_str(r);
		break;
	default:
		d->path = rd_str(r);
		d->offset = kvf_spack_r_u64(r);
		d->size = kvf_spack_r_u64(r);
		d->aligned_size = kvf_spack_r_u64(r);
		d->shard_idx = rd_i32(r);
		break;
	}
	d->status = rd_i32(r);
}

/* An expected's flag and, when it holds an error, the ErrorCode. */
static int32_t rd_expected(struct kvf_spack_r *r)
{
	if (kvf_spack_r_bool(r))
		return 0;
	return r->err ? 0 : rd_i32(r);
}

static void rd_replicas(struct kvf_spack_r *r, const struct kvf_abi *abi,
			bool grl, struct kvf_msg_resp *o,
			struct kvf_msg_replicas *it)
{
	uint64_t n;

	memset(it, 0, sizeof(*it));
	it->code = rd_expected(r);
	if (it->code || r->err)
		return;
	/* a descriptor takes at least id, index, status */
	n = kvf_spack_r_count(r, 13);
	if (n > o->desc_cap - o->ndescs) {
		kvf_spack_r_fail(r, KVF_WIRE_ERR_TOO_MANY);
		return;
	}
	it->descs = o->descs + o->ndescs;
	it->n = (size_t)n;
	for (uint64_t i = 0; i < n; i++)
		rd_desc(r, abi, &o->descs[o->ndescs++]);
	if (!grl)
		return;
	it->lease_ttl_ms = kvf_spack_r_u64(r);
	if (abi->replica_list_checksum)
		it->has_checksum = rd_opt_u64(r, &it->checksum);
}

static void rd_items(struct kvf_spack_r *r, const struct kvf_abi *abi,
		     enum resp_kind k, struct kvf_msg_resp *o)
{
	uint64_t n = kvf_spack_r_count(r, 1);

	if (n > o->cap || (k == RK_BOOLS && !o->bools)) {
		kvf_spack_r_fail(r, KVF_WIRE_ERR_TOO_MANY);
		return;
	}
	o->n = (size_t)n;
	for (uint64_t i = 0; i < n && !r->err; i++) {
		struct kvf_msg_replicas *it = &o->items[i];

		if (k == RK_DESCS_VEC || k == RK_GRL_VEC) {
			rd_replicas(r, abi, k == RK_GRL_VEC, o, it);
			continue;
		}
		memset(it, 0, sizeof(*it));
		it->code = rd_expected(r);
		if (k == RK_BOOLS)
			o->bools[i] = !it->code && kvf_spack_r_bool(r);
	}
}

static void rd_value(struct kvf_spack_r *r, const struct kvf_abi *abi,
		     enum kvf_rpc rpc, enum resp_kind k, struct kvf_msg_resp *o)
{
	const char *lit = abi->rpc[rpc].resp_literal;

	switch (k) {
	case RK_STR:
		o->str = rd_str(r);
		break;
	case RK_BOOL:
		o->b = kvf_spack_r_bool(r);
		break;
	case RK_I32:
		o->i32 = rd_i32(r);
		break;
	case RK_I64:
		o->i64 = (int64_t)kvf_spack_r_u64(r);
		break;
	case RK_PING:
		o->ping_view_version = (int64_t)kvf_spack_r_u64(r);
		o->ping_status = rd_i32(r);
		break;
	case RK_STORAGE:
		o->storage.fsdir = rd_str(r);
		o->storage.enable_disk_eviction = kvf_spack_r_bool(r);
		o->storage.quota_bytes = kvf_spack_r_u64(r);
		break;
	case RK_VOID:
		break;
	default: {
		/* maps, vectors, other structs: validated by the value's
		 * literal (after the 87 of the expected), kept as a view */
		const uint8_t *at = r->p;
		uint8_t bytes[512];
		size_t nb = lit_bytes(lit + 2, bytes, sizeof(bytes));
		const uint8_t *p = bytes;
		struct kvf_spack_r peek = *r;

		if (k == RK_MAP || k == RK_VEC)
			o->map.n = kvf_spack_r_count(&peek, 0);
		o->map.width = r->width;
		kvf_spack_r_skip(r, &p, bytes + nb);
		o->map.at = at;
		o->map.end = r->p;
		break;
	}
	}
}

int kvf_msg_resp_decode(const struct kvf_abi *abi, enum kvf_rpc rpc,
			const void *body, size_t len, struct kvf_msg_resp *out)
{
	const struct kvf_abi_rpc *e;
	enum resp_kind k;
	struct kvf_spack_r r;

	if ((unsigned)rpc >= KVF_RPC__COUNT || !abi->rpc[rpc].registered)
		return KVF_WIRE_ERR_UNKNOWN_RPC;
	e = &abi->rpc[rpc];
	k = resp_kind(abi, rpc);
	out->code = 0;
	out->n = 0;
	out->ndescs = 0;
	out->map = (struct kvf_msg_view){0};
	if (kvf_spack_r_begin(&r, body, len, e->resp_hash))
		return r.err;
	if (e->shape == KVF_ABI_BARE_I64) {
		out->i64 = (int64_t)kvf_spack_r_u64(&r);
		return r.err;
	}
	if (e->shape == KVF_ABI_EXPECTED_VEC) {
		if (k == RK_OTHER)
			return rd_by_literal(&r, e->resp_literal);
		rd_items(&r, abi, k, out);
		return r.err;
	}
	if (k == RK_DESCS || k == RK_GRL) {
		if (!out->cap) {
			kvf_spack_r_fail(&r, KVF_WIRE_ERR_TOO_MANY);
			return r.err;
		}
		rd_replicas(&r, abi, k == RK_GRL, out, &out->items[0]);
		out->code = out->items[0].code;
		out->n = 1;
		return r.err;
	}
	out->code = rd_expected(&r);
	if (!out->code)
		rd_value(&r, abi, rpc, k, out);
	return r.err;
}

int kvf_msg_resp_reencode(struct kvf_wbuf *w, const struct kvf_abi *abi,
			  enum kvf_rpc rpc, const struct kvf_msg_resp *resp)
{
	enum resp_kind k = resp_kind(abi, rpc);
	struct resp_arg a = {
		.abi = abi, .rpc = rpc, .items = resp->items, .n = resp->n};

	if (abi->rpc[rpc].shape == KVF_ABI_EXPECTED && resp->code) {
		kvf_msg_enc_error(w, abi, rpc, resp->code, 0);
		return KVF_WIRE_OK;
	}
	switch (k) {
	case RK_VOID:
		kvf_msg_enc_ok(w, abi, rpc);
		break;
	case RK_STR:
		kvf_msg_enc_str(w, abi, rpc, resp->str);
		break;
	case RK_BOOL:
		kvf_msg_enc_bool(w, abi, rpc, resp->b);
		break;
	case RK_I32:
		kvf_msg_enc_i32(w, abi, rpc, resp->i32);
		break;
	case RK_I64:
		kvf_msg_enc_i64(w, abi, rpc, resp->i64);
		break;
	case RK_PING:
		kvf_msg_enc_ping(w, abi, resp->ping_view_version,
				 resp->ping_status);
		break;
	case RK_STORAGE:
		kvf_msg_enc_storage_config(w, abi, &resp->storage);
		break;
	case RK_CODES:
	case RK_BOOLS:
		/* per-item codes straight from the decoded items */
		a.vals = k == RK_BOOLS ? resp->bools : NULL;
		encode(w, codes_body, &a);
		break;
	case RK_DESCS:
	case RK_GRL:
		kvf_msg_enc_replicas(w, abi, rpc, &resp->items[0]);
		break;
	case RK_DESCS_VEC:
	case RK_GRL_VEC:
		kvf_msg_enc_replicas_vec(w, abi, rpc, resp->items, resp->n);
		break;
	case RK_VEC:
	case RK_MAP:
		if (resp->map.n)
			return KVF_WIRE_ERR_UNSUPPORTED;
		if (k == RK_VEC)
			kvf_msg_enc_empty_vec(w, abi, rpc);
		else if (rpc == KVF_RPC_BatchQueryIp)
			kvf_msg_enc_ip_map(w, abi, NULL, 0);
		else
			kvf_msg_enc_regex_map(w, abi, NULL, 0);
		break;
	default:
		return KVF_WIRE_ERR_UNSUPPORTED;
	}
	return w->failed ? KVF_WIRE_ERR_NO_MEMORY : KVF_WIRE_OK;
}
