// SPDX-License-Identifier: MIT
/*
 * master/service.c - every RPC of mooncake_master, answered on the engine.
 *
 * Design notes.
 *
 * One request in, one response frame out, on the event-loop thread that
 * read it. The body stays in the connection's receive buffer while it is
 * handled, so a batch's keys are decoded straight into the thread's
 * struct kvf_key array as views into that buffer and handed to one
 * kvf_batch_*() call: no per-key allocation or copy on the way in. Replica
 * descriptors are built in per-thread arrays and encoded into the
 * connection's output buffer; the strings they carry (protocol, transport
 * endpoint) are read from the registry under its shared lock, held once
 * per request, once per run of replicas on the same segment: the other
 * descriptors copy the last segment's parts. A batch answer's descriptors
 * take the compact form (three numbers and a pointer to their segment's
 * strings, build_mem_items()), which the encoder turns into the same
 * bytes: filling and re-reading a full struct kvf_msg_desc per replica
 * was 305 instructions a key of BatchPutStart's answer, the compact form
 * is 180 (callgrind, one batch-128 put and get pass of 100,000 keys).
 *
 * Errors, in upstream's two layers: a body that does not decode (wrong
 * type hash, truncated, lengths past the end, more keys than the engine
 * takes in one batch) is transport error 4 "invalid rpc arg" and changes
 * nothing; everything else is an ErrorCode inside the answer, per item for
 * batch RPCs. kvf_service_mc_error() is the one mapping from engine
 * statuses to ErrorCodes.
 *
 * Differences from upstream that the engine imposes (docs/master.md has
 * the full table): tenants other than "default" are refused with
 * INVALID_PARAMS; Upsert of an existing object removes it
 * first (not atomic for readers); regex RPCs answer NOT_SUPPORTED; a
 * per-put soft pin TTL is bounded by --max_kv_soft_pin_ttl but the engine
 * applies --default_kv_soft_pin_ttl; checksums are not kept.
 */
#include "config.h"

#include "master/service.h"

#include "base/clock.h"
#include "ha/election.h"
#include "ha/replication.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <kvforge/batch.h>
#include <kvforge/segment.h>
#include <kvforge/status.h>

#include "http/metrics.h"
#include "wire/msg.h"

#define MC_INTERNAL_ERROR (-1)
#define MC_SEGMENT_NOT_FOUND (-101)
#define MC_SEGMENT_ALREADY_EXISTS (-102)
#define MC_CLIENT_NOT_FOUND (-103)
#define MC_NO_AVAILABLE_HANDLE (-200)
#define MC_INVALID_KEY (-400)
#define MC_ILLEGAL_CLIENT (-601)
#define MC_INVALID_WRITE (-700)
#define MC_REPLICA_IS_NOT_READY (-703)
#define MC_OBJECT_NOT_FOUND (-704)
#define MC_OBJECT_ALREADY_EXISTS (-705)
#define MC_OBJECT_HAS_LEASE (-706)
#define MC_UNAVAILABLE_IN_CURRENT_STATUS (-1010)

/* Mooncake's ReplicaType and SegmentStatus values. */
enum { MC_REPLICA_MEMORY = 0, MC_REPLICA_ALL = 4, MC_REPLICA_DFS = 100 };
enum { MC_SEGMENT_OK = 1 };

/* Segments the registry does not know (recovered, table line lost): their
 * endpoints are looked up in the engine, a few per request. */
#define FALLBACK_SEGS 8

struct kvf_service {
	struct kvf_service_options o;
	size_t max_batch;
	char fsdir[2 * KVF_FLAGS_STR_MAX + 2];
};

struct kvf_service_scratch {
	struct kvf_service *svc;
	/* decode side: max_batch entries, allocated once */
	struct kvf_key *keys;
	uint64_t *vals;
	uint8_t *has_val;
	/* answer side: grown to the largest batch seen */
	size_t cap;
	enum kvf_status *status;
	int32_t *codes;
	uint8_t *bools;
	struct kvf_replicas *reps;
	struct kvf_msg_replicas *items;
	struct kvf_msg_desc *descs;
	/* a batch answer's compact form (build_mem_items()) */
	struct kvf_msg_mem_replicas *mitems;
	struct kvf_msg_mem_desc *mdescs;
	struct kvf_msg_mem_seg *msegs;
	struct kvf_segment_info fallback[FALLBACK_SEGS];
	unsigned nfallback;
};

/* A put's placement, shared by the batch call and its single replays. */
struct put_state {
	struct kvf_put_config pc;
	uint64_t ids[64];
	uint64_t client;
};

/* One request being answered. */
struct call {
	struct put_state *put;
	struct kvf_service *svc;
	struct kvf_service_scratch *s;
	struct kvf_wbuf *out;
	enum kvf_rpc rpc;
	struct kvf_msg_req req;
	bool failed;
	uint32_t items;
	uint32_t failed_items;
};

uint64_t kvf_service_now_ns(void)
{
	return kvf__now_ns();
}

int32_t kvf_service_mc_error(int status)
{
	switch (status) {
	case KVF_OK:
		return KVF_MC_OK;
	case KVF_ERR_INVALID_KEY:
		return MC_INVALID_KEY;
	case KVF_ERR_INVALID_ARGUMENT:
	case KVF_ERR_INVALID_PARAMS:
	case KVF_ERR_BATCH_EMPTY:
	case KVF_ERR_BATCH_TOO_LARGE:
	case KVF_ERR_DUPLICATE_KEY:
	case KVF_ERR_SEGMENT_OVERLAP:
		return KVF_MC_INVALID_PARAMS;
	case KVF_ERR_OBJECT_NOT_FOUND:
		return MC_OBJECT_NOT_FOUND;
	case KVF_ERR_OBJECT_ALREADY_EXISTS:
		return MC_OBJECT_ALREADY_EXISTS;
	case KVF_ERR_OBJECT_HAS_LEASE:
	case KVF_ERR_OBJECT_PINNED:
		return MC_OBJECT_HAS_LEASE;
	case KVF_ERR_OBJECT_NOT_READY:
		return MC_REPLICA_IS_NOT_READY;
	case KVF_ERR_ILLEGAL_CLIENT:
		return MC_ILLEGAL_CLIENT;
	case KVF_ERR_NO_SPACE:
	case KVF_ERR_NOT_ENOUGH_SEGMENTS:
		return MC_NO_AVAILABLE_HANDLE;
	case KVF_ERR_CLIENT_NOT_FOUND:
		return MC_CLIENT_NOT_FOUND;
	case KVF_ERR_SEGMENT_NOT_FOUND:
		return MC_SEGMENT_NOT_FOUND;
	case KVF_ERR_SEGMENT_EXISTS:
		return MC_SEGMENT_ALREADY_EXISTS;
	case KVF_ERR_BUSY:
	case KVF_ERR_CLOSED:
		return MC_UNAVAILABLE_IN_CURRENT_STATUS;
	default:
		return MC_INTERNAL_ERROR;
	}
}

/* ---- setup -------------------------------------------------------------- */

int kvf_service_new(const struct kvf_service_options *opts,
		    struct kvf_service **out)
{
	const struct kvf_master_flags *f = opts ? opts->flags : NULL;
	struct kvf_service *svc;
	struct kvf_config defaults;

	if (!opts || !opts->abi || !opts->engine || !opts->registry || !f ||
	    !out)
		return KVF_ERR_INVALID_ARGUMENT;
	svc = calloc(1, sizeof(*svc));
	if (!svc)
		return KVF_ERR_NO_MEMORY;
	svc->o = *opts;
	kvf_config_init(&defaults);
	svc->max_batch = defaults.max_batch;
	/* Upstream's GetFsdir: "<root_fs_dir>/<cluster_id>", or "" when
	 * either is unset (persistence disabled). */
	if (f->root_fs_dir[0] && f->cluster_id[0])
		snprintf(svc->fsdir, sizeof(svc->fsdir), "%s/%s",
			 f->root_fs_dir, f->cluster_id);
	*out = svc;
	return KVF_OK;
}

void kvf_service_free(struct kvf_service *svc)
{
	free(svc);
}

struct kvf_service_scratch *kvf_service_scratch_new(struct kvf_service *svc)
{
	struct kvf_service_scratch *s = calloc(1, sizeof(*s));
	size_t n = svc->max_batch;

	if (!s)
		return NULL;
	s->svc = svc;
	/* Large and mostly untouched: the kernel backs only pages used. */
	s->keys = malloc(n * sizeof(*s->keys));
	s->vals = malloc(n * sizeof(*s->vals));
	s->has_val = malloc(n);
	if (!s->keys || !s->vals || !s->has_val) {
		kvf_service_scratch_free(s);
		return NULL;
	}
	return s;
}

void kvf_service_scratch_free(struct kvf_service_scratch *s)
{
	if (!s)
		return;
	free(s->keys);
	free(s->vals);
	free(s->has_val);
	free(s->status);
	free(s->codes);
	free(s->bools);
	free(s->reps);
	free(s->items);
	free(s->descs);
	free(s->mitems);
	free(s->mdescs);
	free(s->msegs);
	free(s);
}

#define GROW(p, n) ((p) = realloc((p), (n) * sizeof(*(p))))

/* Make the answer arrays hold @n items. */
static int scratch_reserve(struct kvf_service_scratch *s, size_t n)
{
	size_t cap = s->cap ? s->cap : 64;

	if (n <= s->cap)
		return KVF_OK;
	while (cap < n)
		cap *= 2;
	if (!GROW(s->status, cap) || !GROW(s->codes, cap) ||
	    !GROW(s->bools, cap) || !GROW(s->reps, cap) ||
	    !GROW(s->items, cap) || !GROW(s->descs, cap * KVF_MAX_REPLICAS) ||
	    !GROW(s->mitems, cap) || !GROW(s->mdescs, cap * KVF_MAX_REPLICAS) ||
	    !GROW(s->msegs, cap * KVF_MAX_REPLICAS))
		return KVF_ERR_NO_MEMORY;
	s->cap = cap;
	return KVF_OK;
}

/* ---- helpers ------------------------------------------------------------ */

static bool tenant_ok(const struct kvf_str *t)
{
	return t->len == 0 || (t->len == 7 && !memcmp(t->data, "default", 7));
}

/* The request's keys: a batch's array, or the single key as a batch of 1. */
static void single_key(struct call *c)
{
	c->s->keys[0] = (struct kvf_key){c->req.key.data, c->req.key.len};
	c->req.keys = c->s->keys;
	c->req.nkeys = 1;
}

static bool is_batch(enum kvf_rpc rpc)
{
	switch (rpc) {
	case KVF_RPC_BatchExistKey:
	case KVF_RPC_BatchGetReplicaList:
	case KVF_RPC_BatchPutStart:
	case KVF_RPC_BatchPutEnd:
	case KVF_RPC_BatchPutRevoke:
	case KVF_RPC_BatchUpsertStart:
	case KVF_RPC_BatchUpsertEnd:
	case KVF_RPC_BatchUpsertRevoke:
	case KVF_RPC_BatchRemove:
		return true;
	default:
		return false;
	}
}

/* Record per-item outcomes for the metrics. */
static void count_items(struct call *c, const int32_t *codes, size_t n)
{
	uint32_t bad = 0;

	for (size_t i = 0; i < n; i++)
		bad += codes[i] != 0;
	c->items = (uint32_t)n;
	c->failed_items = bad;
	c->failed = n && bad == n;
}

/* Answer the whole request with one ErrorCode, in its shape. */
static void answer_error(struct call *c, int32_t code)
{
	size_t n = is_batch(c->rpc) ? c->req.nkeys : 0;

	kvf_msg_enc_error(c->out, c->svc->o.abi, c->rpc, code, n);
	c->failed = true;
	c->items = (uint32_t)n;
	c->failed_items = (uint32_t)n;
}

static void answer_status(struct call *c, int status)
{
	if (status)
		answer_error(c, kvf_service_mc_error(status));
	else
		kvf_msg_enc_ok(c->out, c->svc->o.abi, c->rpc);
}

/*
 * The engine refuses a key repeated within one batch; upstream handles
 * each occurrence on its own, in order. Replay those items one at a time
 * so each gets the answer upstream would give it.
 */
typedef int (*one_fn)(struct call *c, size_t i);

static void redo_duplicates(struct call *c, one_fn fn)
{
	for (size_t i = 0; i < c->req.nkeys; i++)
		if (c->s->status[i] == KVF_ERR_DUPLICATE_KEY)
			c->s->status[i] = fn(c, i);
}

static void status_codes(struct call *c)
{
	for (size_t i = 0; i < c->req.nkeys; i++)
		c->s->codes[i] = kvf_service_mc_error(c->s->status[i]);
}

/* ---- replica descriptors ------------------------------------------------ */

static const struct kvf_segment_info *fallback_segment(struct call *c,
						       uint64_t id)
{
	struct kvf_service_scratch *s = c->s;

	for (unsigned i = 0; i < s->nfallback; i++)
		if (s->fallback[i].id == id)
			return &s->fallback[i];
	if (s->nfallback == FALLBACK_SEGS ||
	    kvf_segment_query(c->svc->o.engine, id, &s->fallback[s->nfallback]))
		return NULL;
	return &s->fallback[s->nfallback++];
}

/* A stable replica id: the same replica gets the same id in PutStart's
 * and every later GetReplicaList's answer. */
static uint64_t replica_id(const struct kvf_replica_desc *r)
{
	uint64_t x = r->segment_id ^ (r->addr * 0x9e3779b97f4a7c15ULL);

	x ^= x >> 29;
	x *= 0xbf58476d1ce4e5b9ULL;
	return x ^ (x >> 32);
}

/*
 * The parts of a descriptor that depend only on the replica's segment
 * (kind, status, protocol, endpoint), for the last segment seen: a batch's
 * replicas mostly sit on a few segments, so a descriptor is usually a copy
 * of @tmpl plus three numbers. Lives for one answer, under the registry's
 * read lock, so no mount or unmount can change what it points at.
 */
struct desc_memo {
	struct kvf_msg_desc tmpl;
	uint64_t segment_id;
	bool valid;
};

/* @segment_id's protocol and endpoint (registry read lock held). */
static struct kvf_msg_mem_seg segment_strs(struct call *c, uint64_t segment_id)
{
	const struct kvf_seg_entry *e =
		kvf_registry_segment(c->svc->o.registry, segment_id);
	const struct kvf_segment_info *info;

	if (e)
		return (struct kvf_msg_mem_seg){{e->protocol, e->protocol_len},
						{e->endpoint, e->endpoint_len}};
	info = fallback_segment(c, segment_id);
	return (struct kvf_msg_mem_seg){
		{"tcp", 3},
		info ? (struct kvf_str){info->endpoint, strlen(info->endpoint)}
		     : (struct kvf_str){NULL, 0}};
}

/* Point @m at @segment_id's protocol and endpoint (lock held). */
static void memo_segment(struct call *c, struct desc_memo *m,
			 uint64_t segment_id)
{
	struct kvf_msg_mem_seg strs = segment_strs(c, segment_id);

	m->tmpl.protocol = strs.protocol;
	m->tmpl.endpoint = strs.endpoint;
	m->segment_id = segment_id;
	m->valid = true;
}

/* Fill @d from one engine replica (registry read lock held). */
static void fill_desc(struct call *c, struct desc_memo *m,
		      struct kvf_msg_desc *d, const struct kvf_replica_desc *r)
{
	if (!m->valid || m->segment_id != r->segment_id)
		memo_segment(c, m, r->segment_id);
	*d = m->tmpl;
	d->id = replica_id(r);
	d->size = r->size;
	d->addr = r->addr;
}

/* Turn the engine's per-item results into encoder items (lock held). */
static void build_items(struct call *c, int32_t status, uint64_t lease)
{
	struct kvf_service_scratch *s = c->s;
	struct desc_memo m = {
		.tmpl = {.kind = KVF_MC_DESC_MEMORY, .status = status}};

	s->nfallback = 0;
	for (size_t i = 0; i < c->req.nkeys; i++) {
		struct kvf_msg_replicas *it = &s->items[i];
		struct kvf_msg_desc *d = &s->descs[i * KVF_MAX_REPLICAS];
		int32_t code = kvf_service_mc_error(s->status[i]);

		s->codes[i] = code;
		if (code) {
			*it = (struct kvf_msg_replicas){.code = code};
			continue;
		}
		for (uint32_t r = 0; r < s->reps[i].count; r++)
			fill_desc(c, &m, &d[r], &s->reps[i].replica[r]);
		*it = (struct kvf_msg_replicas){.descs = d,
						.n = s->reps[i].count,
						.lease_ttl_ms = lease};
	}
}

/*
 * A batch's items in the compact form (lock held): a descriptor is three
 * numbers and its segment's strings, looked up once per run of replicas
 * on one segment; the encoder writes the bytes build_items()' form
 * would give.
 */
static void build_mem_items(struct call *c)
{
	struct kvf_service_scratch *s = c->s;
	struct kvf_msg_mem_seg *seg = NULL;
	uint64_t seg_id = 0;

	s->nfallback = 0;
	for (size_t i = 0; i < c->req.nkeys; i++) {
		struct kvf_msg_mem_replicas *it = &s->mitems[i];
		struct kvf_msg_mem_desc *d = &s->mdescs[i * KVF_MAX_REPLICAS];
		int32_t code = kvf_service_mc_error(s->status[i]);

		s->codes[i] = code;
		if (code) {
			*it = (struct kvf_msg_mem_replicas){.code = code};
			continue;
		}
		for (uint32_t r = 0; r < s->reps[i].count; r++) {
			const struct kvf_replica_desc *rd =
				&s->reps[i].replica[r];

			if (!seg || seg_id != rd->segment_id) {
				/* at most one per descriptor: msegs' size */
				seg = seg ? seg + 1 : s->msegs;
				*seg = segment_strs(c, rd->segment_id);
				seg_id = rd->segment_id;
			}
			d[r] = (struct kvf_msg_mem_desc){.id = replica_id(rd),
							 .size = rd->size,
							 .addr = rd->addr,
							 .seg = seg};
		}
		*it = (struct kvf_msg_mem_replicas){.n = s->reps[i].count,
						    .descs = d};
	}
}

/* Encode the replica answers, single or batch form. */
static void answer_replicas(struct call *c, int32_t status, uint64_t lease)
{
	struct kvf_registry *reg = c->svc->o.registry;
	const struct kvf_abi *abi = c->svc->o.abi;

	kvf_registry_read_lock(reg);
	if (is_batch(c->rpc)) {
		build_mem_items(c);
		kvf_msg_enc_mem_replicas_vec(c->out, abi, c->rpc, c->s->mitems,
					     c->req.nkeys, status, lease);
	} else {
		build_items(c, status, lease);
		kvf_msg_enc_replicas(c->out, abi, c->rpc, c->s->items);
	}
	kvf_registry_read_unlock(reg);
	count_items(c, c->s->codes, c->req.nkeys);
	if (!is_batch(c->rpc))
		c->items = 0;
}

/* ---- objects: exist, get ------------------------------------------------ */

static int exist_one(struct call *c, size_t i)
{
	enum kvf_status st;

	kvf_batch_exist(c->svc->o.engine, &c->req.keys[i], 1, &st);
	return st;
}

static void do_exist(struct call *c)
{
	struct kvf_service_scratch *s = c->s;
	size_t n = c->req.nkeys;

	kvf_batch_exist(c->svc->o.engine, c->req.keys, n, s->status);
	redo_duplicates(c, exist_one);
	for (size_t i = 0; i < n; i++) {
		bool found = s->status[i] == KVF_OK;

		s->bools[i] = found;
		s->codes[i] = found || s->status[i] == KVF_ERR_OBJECT_NOT_FOUND
				      ? 0
				      : kvf_service_mc_error(s->status[i]);
	}
	if (c->rpc == KVF_RPC_ExistKey) {
		if (s->codes[0])
			answer_error(c, s->codes[0]);
		else
			kvf_msg_enc_bool(c->out, c->svc->o.abi, c->rpc,
					 s->bools[0]);
		return;
	}
	kvf_msg_enc_bools(c->out, c->svc->o.abi, c->rpc, s->codes, s->bools, n);
	count_items(c, s->codes, n);
}

static int get_one(struct call *c, size_t i)
{
	enum kvf_status st;

	kvf_batch_get(c->svc->o.engine, &c->req.keys[i], 1, &c->s->reps[i], &st,
		      NULL);
	return st;
}

static void do_get(struct call *c)
{
	uint64_t lease = 0;

	kvf_batch_get(c->svc->o.engine, c->req.keys, c->req.nkeys, c->s->reps,
		      c->s->status, &lease);
	redo_duplicates(c, get_one);
	if (!lease)
		lease = c->svc->o.flags->default_kv_lease_ttl_ms;
	answer_replicas(c, KVF_MC_REPLICA_COMPLETE, lease);
}

/* ---- objects: put ------------------------------------------------------- */

/* Resolve preferred segment names to mounted segments (lock held); names
 * of segments not mounted are skipped, as upstream falls back to others.
 * Each name is one hash lookup; the list's length was bounded by
 * put_config(). */
static uint32_t preferred(struct call *c, uint64_t *ids, uint32_t cap)
{
	const struct kvf_msg_replicate_config *rc = &c->req.config;
	struct kvf_registry *reg = c->svc->o.registry;
	struct kvf_msg_view v = rc->preferred_segments;
	struct kvf_segment_info info;
	struct kvf_str name;
	uint32_t n = 0;
	bool more = true;

	while (n < cap && more) {
		const struct kvf_seg_entry *e;

		if (kvf_msg_view_str(&v, &name)) {
			;
		} else if (rc->preferred_segment.len) {
			name = rc->preferred_segment;
			more = false;
		} else {
			break;
		}
		e = kvf_registry_segment_by_name(reg, name.data, name.len);
		if (!e || kvf_segment_query(c->svc->o.engine, e->id, &info))
			continue;
		for (uint32_t i = 0; i < n && e; i++)
			if (ids[i] == e->id)
				e = NULL;
		if (e)
			ids[n++] = e->id;
	}
	return n;
}

/* ReplicateConfig -> engine placement; false for values refused. */
static bool put_config(struct call *c, struct kvf_put_config *pc, uint64_t *ids)
{
	const struct kvf_msg_replicate_config *rc = &c->req.config;
	const struct kvf_master_flags *f = c->svc->o.flags;

	if (!rc->replica_num || rc->replica_num > KVF_MAX_REPLICAS ||
	    rc->preferred_segments.n > KVF_SERVICE_MAX_PREFERRED ||
	    rc->soft_pin_action > KVF_MC_SOFT_PIN_DISABLE ||
	    (rc->has_soft_pin_ttl &&
	     (!rc->soft_pin_ttl_ms ||
	      rc->soft_pin_ttl_ms > f->max_kv_soft_pin_ttl_ms)))
		return false;
	memset(pc, 0, sizeof(*pc));
	pc->replica_num = (uint32_t)rc->replica_num;
	pc->hard_pin = rc->with_hard_pin;
	pc->soft_pin = rc->soft_pin_action == KVF_MC_SOFT_PIN_ENABLE;
	kvf_registry_read_lock(c->svc->o.registry);
	pc->nr_preferred = preferred(c, ids, 64);
	kvf_registry_read_unlock(c->svc->o.registry);
	pc->preferred_segments = pc->nr_preferred ? ids : NULL;
	return true;
}

static int put_one(struct call *c, size_t i)
{
	struct put_state *ps = c->put;
	enum kvf_status st;

	kvf_batch_put_start(c->svc->o.engine, ps->client, &c->req.keys[i],
			    &c->req.vals[i], 1, &ps->pc, &c->s->reps[i], &st);
	return st;
}

/* Upsert: an existing complete object is replaced. The engine has no
 * in-place replace, so the old object is removed (unless leased) and the
 * put started again: readers see no object in between. */
static void upsert_existing(struct call *c)
{
	struct kvf_service_scratch *s = c->s;

	for (size_t i = 0; i < c->req.nkeys; i++) {
		enum kvf_status rm;

		if (s->status[i] != KVF_ERR_OBJECT_ALREADY_EXISTS)
			continue;
		kvf_batch_remove(c->svc->o.engine, &c->req.keys[i], 1, false,
				 &rm);
		s->status[i] = rm == KVF_OK ? put_one(c, i) : rm;
	}
}

static void do_put_start(struct call *c, bool upsert)
{
	struct kvf_service_scratch *s = c->s;
	struct put_state ps;
	int rc;

	if (c->rpc == KVF_RPC_PutStart || c->rpc == KVF_RPC_UpsertStart) {
		single_key(c);
		s->vals[0] = c->req.u64;
		c->req.vals = s->vals;
		c->req.nvals = 1;
	}
	if (c->req.nvals != c->req.nkeys || !put_config(c, &ps.pc, ps.ids)) {
		answer_error(c, KVF_MC_INVALID_PARAMS);
		return;
	}
	/* refused like a mutation: its answer would wait for standbys
	 * that are not there (kvf_repl_hold_note_latest() below) */
	rc = kvf_repl_hold_admit();
	if (rc) {
		answer_status(c, rc);
		return;
	}
	ps.client = kvf_registry_id(c->req.client_id);
	c->put = &ps;
	/* Upstream lets any client put, also one that mounted nothing: the
	 * engine learns such a client at its first put (off the hot path). */
	if (kvf_batch_put_start(c->svc->o.engine, ps.client, c->req.keys,
				c->req.vals, c->req.nkeys, &ps.pc, s->reps,
				s->status) == KVF_ERR_CLIENT_NOT_FOUND &&
	    kvf_client_register(c->svc->o.engine, ps.client) == KVF_OK)
		kvf_batch_put_start(c->svc->o.engine, ps.client, c->req.keys,
				    c->req.vals, c->req.nkeys, &ps.pc, s->reps,
				    s->status);
	redo_duplicates(c, put_one);
	if (upsert)
		upsert_existing(c);
	/* the answer must not hand out space freed by a record the sync
	 * standbys do not hold yet (kvf_repl_hold_note_latest()) */
	for (size_t i = 0; i < c->req.nkeys; i++) {
		if (s->status[i] == KVF_OK) {
			kvf_repl_hold_note_latest();
			break;
		}
	}
	if (c->svc->o.metrics)
		kvf_metrics_value_sizes(c->svc->o.metrics, c->req.vals,
					s->status, c->req.nkeys);
	answer_replicas(c, KVF_MC_REPLICA_PROCESSING, 0);
}

/* PutEnd / PutRevoke and their batch and upsert forms. */
typedef int (*finish_fn)(struct kvf_engine *, uint64_t, const struct kvf_key *,
			 size_t, enum kvf_status *);

static bool replica_type_ok(int32_t t)
{
	return (t >= MC_REPLICA_MEMORY && t <= MC_REPLICA_ALL) ||
	       t == MC_REPLICA_DFS;
}

/*
 * The engine tells the putter of an object whose put has ended
 * OBJECT_ALREADY_EXISTS (another client hears ILLEGAL_CLIENT). Upstream
 * checks the client, then: PutEnd marks the object's complete replicas
 * complete again and succeeds, PutRevoke finds no processing replica and
 * answers INVALID_WRITE.
 */
static void finish_codes(struct call *c, finish_fn fn)
{
	for (size_t i = 0; i < c->req.nkeys; i++)
		c->s->codes[i] =
			c->s->status[i] != KVF_ERR_OBJECT_ALREADY_EXISTS ?
				kvf_service_mc_error(c->s->status[i]) :
			fn == kvf_batch_put_end ? KVF_MC_OK :
						  MC_INVALID_WRITE;
}

static void do_finish(struct call *c, finish_fn fn, bool has_type)
{
	struct kvf_service_scratch *s = c->s;
	uint64_t client = kvf_registry_id(c->req.client_id);
	size_t n;

	if (!is_batch(c->rpc))
		single_key(c);
	n = c->req.nkeys;
	if (has_type && !replica_type_ok(c->req.replica_type)) {
		answer_error(c, KVF_MC_INVALID_PARAMS);
		return;
	}
	/* Only memory replicas exist here: ending or revoking the disk
	 * (or other non-memory) replicas of an object touches nothing. */
	if (has_type && c->req.replica_type != MC_REPLICA_MEMORY &&
	    c->req.replica_type != MC_REPLICA_ALL) {
		for (size_t i = 0; i < n; i++)
			s->status[i] = KVF_OK;
	} else {
		fn(c->svc->o.engine, client, c->req.keys, n, s->status);
		for (size_t i = 0; i < n; i++)
			if (s->status[i] == KVF_ERR_DUPLICATE_KEY)
				fn(c->svc->o.engine, client, &c->req.keys[i], 1,
				   &s->status[i]);
	}
	finish_codes(c, fn);
	if (is_batch(c->rpc)) {
		kvf_msg_enc_codes(c->out, c->svc->o.abi, c->rpc, s->codes, n);
		count_items(c, s->codes, n);
	} else if (s->codes[0]) {
		answer_error(c, s->codes[0]);
	} else {
		kvf_msg_enc_ok(c->out, c->svc->o.abi, c->rpc);
	}
}

/* ---- objects: remove ---------------------------------------------------- */

static int remove_one(struct call *c, size_t i)
{
	enum kvf_status st;

	kvf_batch_remove(c->svc->o.engine, &c->req.keys[i], 1, c->req.force,
			 &st);
	return st;
}

static void do_remove(struct call *c)
{
	struct kvf_service_scratch *s = c->s;

	if (c->rpc == KVF_RPC_Remove)
		single_key(c);
	kvf_batch_remove(c->svc->o.engine, c->req.keys, c->req.nkeys,
			 c->req.force, s->status);
	redo_duplicates(c, remove_one);
	status_codes(c);
	if (c->rpc == KVF_RPC_Remove) {
		answer_status(c, s->status[0]);
		return;
	}
	kvf_msg_enc_codes(c->out, c->svc->o.abi, c->rpc, s->codes,
			  c->req.nkeys);
	count_items(c, s->codes, c->req.nkeys);
}

static void do_remove_all(struct call *c)
{
	uint64_t removed = 0;
	int ret = kvf_remove_all(c->svc->o.engine, c->req.force, &removed);

	/* RemoveAll answers a bare count; upstream answers -1 on failure. */
	kvf_msg_enc_i64(c->out, c->svc->o.abi, c->rpc,
			ret ? -1 : (int64_t)removed);
	c->failed = ret != 0;
}

/* ---- clients and segments ----------------------------------------------- */

static struct kvf_seg_view seg_view(const struct kvf_msg_segment *m)
{
	return (struct kvf_seg_view){
		.id = m->id,
		.name = m->name.data,
		.name_len = m->name.len,
		.base = m->base,
		.size = m->size,
		.te_endpoint = m->te_endpoint.data,
		.te_endpoint_len = m->te_endpoint.len,
		.protocol = m->protocol.data,
		.protocol_len = m->protocol.len,
	};
}

static void do_mount(struct call *c)
{
	struct kvf_seg_view v = seg_view(&c->req.segment);

	answer_status(c, kvf_registry_mount(c->svc->o.registry,
					    c->req.client_id, &v));
}

/*
 * Mount every segment again; the client is live once all are mounted
 * (upstream's ok-client set is filled here, not by MountSegment). The
 * registry's lock is taken per slice of REMOUNT_SLICE segments, so other
 * requests get it between slices, and the table is persisted once, at
 * the end. The list is bounded by KVF_SERVICE_MAX_REMOUNT. A slice is one
 * engine batch (one journal append, one table swap): 64 costs about what
 * the whole request in one batch does (tools/bench/remount.py: 34 ms of
 * CPU either way for 1024 segments at 4096 mounted, against 53 ms in
 * slices of 4) and holds the lock a few milliseconds at a time.
 */
#define REMOUNT_SLICE 64

static void do_remount(struct call *c)
{
	struct kvf_registry *reg = c->svc->o.registry;
	struct kvf_msg_view it = c->req.segments;
	struct kvf_seg_view v[REMOUNT_SLICE];
	struct kvf_msg_segment m;
	int ret = KVF_OK, r;
	size_t n = 0;
	bool more = true;

	if (it.n > KVF_SERVICE_MAX_REMOUNT) {
		answer_error(c, KVF_MC_INVALID_PARAMS);
		return;
	}
	while (more) {
		more = kvf_msg_view_segment(&it, &m);
		if (more)
			v[n++] = seg_view(&m);
		if (n == REMOUNT_SLICE || (!more && n)) {
			r = kvf_registry_mount_batch(reg, c->req.client_id, v,
						     n);
			if (r && !ret)
				ret = r;
			n = 0;
		}
	}
	r = kvf_registry_persist(reg);
	if (r && !ret)
		ret = r;
	if (!ret)
		kvf_registry_set_live(c->svc->o.registry, c->req.client_id);
	answer_status(c, ret);
}

static void do_unmount(struct call *c)
{
	answer_status(c,
		      kvf_registry_unmount(c->svc->o.registry, c->req.client_id,
					   c->req.segment_id));
}

static void do_ping(struct call *c)
{
	bool live = kvf_registry_ping(c->svc->o.registry, c->req.client_id);

	kvf_msg_enc_ping(c->out, c->svc->o.abi,
			 kvf_ha_view_version(c->svc->o.ha),
			 live ? KVF_MC_CLIENT_OK : KVF_MC_CLIENT_NEED_REMOUNT);
}

static void do_segment_status(struct call *c)
{
	struct kvf_registry *reg = c->svc->o.registry;
	const struct kvf_seg_entry *e;

	kvf_registry_read_lock(reg);
	if (c->rpc == KVF_RPC_QuerySegmentStatusById)
		e = kvf_registry_segment_by_uuid(reg, c->req.segment_id);
	else
		e = kvf_registry_segment_by_name(reg, c->req.key.data,
						 c->req.key.len);
	kvf_registry_read_unlock(reg);
	if (e)
		kvf_msg_enc_i32(c->out, c->svc->o.abi, c->rpc, MC_SEGMENT_OK);
	else
		answer_error(c, MC_SEGMENT_NOT_FOUND);
}

/*
 * BatchQueryIp: each known client's segment hosts (endpoint minus port).
 * Upstream answers a map, so a client listed twice is answered once: ids
 * are deduplicated in a hash set sized by the request, and only clients
 * found get an entry, so the answer is bounded by the registry, not by
 * repetitions in the request. Each id is one lookup in the registry's
 * client index plus a walk of that client's own segments; the list is
 * bounded by KVF_SERVICE_MAX_QUERY_IDS (INVALID_PARAMS above it).
 */
struct ip_list {
	struct kvf_str ips[16];
	size_t n;
};

static void add_ip(const struct kvf_seg_entry *e, void *ctx)
{
	struct ip_list *l = ctx;
	const char *colon = memrchr(e->endpoint, ':', e->endpoint_len);
	size_t len = colon ? (size_t)(colon - e->endpoint) : e->endpoint_len;

	for (size_t i = 0; i < l->n; i++)
		if (l->ips[i].len == len &&
		    !memcmp(l->ips[i].data, e->endpoint, len))
			return;
	if (l->n < 16)
		l->ips[l->n++] = (struct kvf_str){e->endpoint, len};
}

/* Insert @id into the set; false if it was there already. */
static bool uuid_set_add(uint64_t *keys, struct kvf_uuid *uuids, size_t mask,
			 struct kvf_uuid u)
{
	uint64_t k = kvf_registry_id(u);

	for (size_t i = (size_t)(k * 0x9e3779b97f4a7c15ULL >> 20) & mask;;
	     i = (i + 1) & mask) {
		if (!keys[i]) {
			keys[i] = k;
			uuids[i] = u;
			return true;
		}
		if (keys[i] == k && uuids[i].first == u.first &&
		    uuids[i].second == u.second)
			return false;
	}
}

static void do_query_ip(struct call *c)
{
	struct kvf_registry *reg = c->svc->o.registry;
	struct kvf_msg_view it = c->req.uuids;
	struct kvf_msg_client_ips *e = NULL;
	struct ip_list *lists = NULL;
	struct kvf_uuid *set_uuids = NULL;
	uint64_t *set_keys = NULL;
	size_t n = 0, cap = 0, mask = 15;
	struct kvf_uuid u;

	if (it.n > KVF_SERVICE_MAX_QUERY_IDS) {
		answer_error(c, KVF_MC_INVALID_PARAMS);
		return;
	}
	while (mask + 1 < 2 * it.n)
		mask = 2 * mask + 1;
	set_keys = calloc(mask + 1, sizeof(*set_keys));
	set_uuids = malloc((mask + 1) * sizeof(*set_uuids));
	if (!set_keys || !set_uuids)
		goto nomem;
	kvf_registry_read_lock(reg);
	while (kvf_msg_view_uuid(&it, &u)) {
		if (!uuid_set_add(set_keys, set_uuids, mask, u))
			continue;
		if (n == cap) {
			size_t ncap = cap ? 2 * cap : 16;
			void *ne = realloc(e, ncap * sizeof(*e));
			void *nl = ne ? realloc(lists, ncap * sizeof(*lists))
				      : NULL;

			if (ne)
				e = ne;
			if (!nl) {
				kvf_registry_read_unlock(reg);
				goto nomem;
			}
			lists = nl;
			cap = ncap;
		}
		lists[n].n = 0;
		if (!kvf_registry_client_segments(reg, u, add_ip, &lists[n]))
			continue;
		e[n] = (struct kvf_msg_client_ips){u, NULL, lists[n].n};
		n++;
	}
	for (size_t i = 0; i < n; i++) /* @lists moved while growing */
		e[i].ips = lists[i].ips;
	kvf_msg_enc_ip_map(c->out, c->svc->o.abi, e, n);
	kvf_registry_read_unlock(reg);
	goto out;
nomem:
	answer_error(c, MC_INTERNAL_ERROR);
out:
	free(set_keys);
	free(set_uuids);
	free(e);
	free(lists);
}

static void do_storage_config(struct call *c)
{
	const struct kvf_master_flags *f = c->svc->o.flags;
	struct kvf_str fsdir = {c->svc->fsdir, strlen(c->svc->fsdir)};

	if (c->rpc == KVF_RPC_GetFsdir) {
		kvf_msg_enc_str(c->out, c->svc->o.abi, c->rpc, fsdir);
		return;
	}
	kvf_msg_enc_storage_config(
		c->out, c->svc->o.abi,
		&(struct kvf_msg_storage_config){
			.fsdir = fsdir,
			.enable_disk_eviction = f->enable_disk_eviction,
			.quota_bytes = f->quota_bytes});
}

/* ---- dispatch ----------------------------------------------------------- */

/*
 * Disk offload, NoF, DFS, promotion, copy/move tasks and the regex RPCs:
 * upstream's own "not supported" answer in the RPC's shape. The one
 * batch among them (BatchEvictDiskReplica: UUID, keys, tenant, type) gets
 * one error per key, as a client indexes the answers by position; its
 * body was validated by the decoder, so the key count is there to read.
 */
static void answer_unsupported(struct call *c, const uint8_t *body, size_t len)
{
	const struct kvf_abi *abi = c->svc->o.abi;
	size_t n = 0;

	if (abi->rpc[c->rpc].shape == KVF_ABI_EXPECTED_VEC) {
		struct kvf_spack_r r;

		if (!kvf_spack_r_begin(&r, body, len,
				       abi->rpc[c->rpc].req_hash)) {
			kvf_spack_r_take(&r, 16); /* the client's UUID */
			n = kvf_spack_r_count(&r, 1);
		}
	}
	if (c->svc->o.metrics)
		kvf_metrics_unsupported(c->svc->o.metrics, c->rpc);
	kvf_msg_enc_error(c->out, abi, c->rpc, KVF_MC_NOT_SUPPORTED, n);
	c->failed = true;
	c->items = c->failed_items = (uint32_t)n;
}

/* RPCs that take a tenant; anything but "default" is refused. */
static bool has_tenant(enum kvf_rpc rpc)
{
	switch (rpc) {
	case KVF_RPC_ExistKey:
	case KVF_RPC_BatchExistKey:
	case KVF_RPC_GetReplicaList:
	case KVF_RPC_BatchGetReplicaList:
	case KVF_RPC_PutStart:
	case KVF_RPC_BatchPutStart:
	case KVF_RPC_UpsertStart:
	case KVF_RPC_BatchUpsertStart:
	case KVF_RPC_PutEnd:
	case KVF_RPC_BatchPutEnd:
	case KVF_RPC_UpsertEnd:
	case KVF_RPC_BatchUpsertEnd:
	case KVF_RPC_PutRevoke:
	case KVF_RPC_BatchPutRevoke:
	case KVF_RPC_UpsertRevoke:
	case KVF_RPC_BatchUpsertRevoke:
	case KVF_RPC_Remove:
	case KVF_RPC_BatchRemove:
	case KVF_RPC_RemoveAll:
		return true;
	default:
		return false;
	}
}

static void dispatch(struct call *c, const uint8_t *body, size_t len)
{
	const struct kvf_abi *abi = c->svc->o.abi;

	switch (c->rpc) {
	case KVF_RPC_ServiceReady:
		kvf_msg_enc_str(
			c->out, abi, c->rpc,
			(struct kvf_str){KVF_SERVICE_VERSION,
					 sizeof(KVF_SERVICE_VERSION) - 1});
		break;
	case KVF_RPC_GetStorageConfig:
	case KVF_RPC_GetFsdir:
		do_storage_config(c);
		break;
	case KVF_RPC_Ping:
		do_ping(c);
		break;
	case KVF_RPC_FetchTasks:
		kvf_msg_enc_empty_vec(c->out, abi, c->rpc);
		break;
	case KVF_RPC_MountSegment:
		do_mount(c);
		break;
	case KVF_RPC_ReMountSegment:
		do_remount(c);
		break;
	case KVF_RPC_UnmountSegment:
	case KVF_RPC_GracefulUnmountSegment:
		do_unmount(c);
		break;
	case KVF_RPC_QuerySegmentStatus:
	case KVF_RPC_QuerySegmentStatusById:
		do_segment_status(c);
		break;
	case KVF_RPC_ExistKey:
		single_key(c);
		do_exist(c);
		break;
	case KVF_RPC_BatchExistKey:
		do_exist(c);
		break;
	case KVF_RPC_GetReplicaList:
		single_key(c);
		do_get(c);
		break;
	case KVF_RPC_BatchGetReplicaList:
		do_get(c);
		break;
	case KVF_RPC_PutStart:
	case KVF_RPC_BatchPutStart:
		do_put_start(c, false);
		break;
	case KVF_RPC_UpsertStart:
	case KVF_RPC_BatchUpsertStart:
		do_put_start(c, true);
		break;
	case KVF_RPC_PutEnd:
	case KVF_RPC_BatchPutEnd:
	case KVF_RPC_UpsertEnd:
		do_finish(c, kvf_batch_put_end, true);
		break;
	case KVF_RPC_BatchUpsertEnd:
		do_finish(c, kvf_batch_put_end, false);
		break;
	case KVF_RPC_PutRevoke:
	case KVF_RPC_BatchPutRevoke:
	case KVF_RPC_UpsertRevoke:
		do_finish(c, kvf_batch_put_revoke, true);
		break;
	case KVF_RPC_BatchUpsertRevoke:
		do_finish(c, kvf_batch_put_revoke, false);
		break;
	case KVF_RPC_Remove:
	case KVF_RPC_BatchRemove:
		do_remove(c);
		break;
	case KVF_RPC_RemoveAll:
		do_remove_all(c);
		break;
	case KVF_RPC_BatchQueryIp:
		do_query_ip(c);
		break;
	default:
		answer_unsupported(c, body, len);
		break;
	}
}

static void log_hash_mismatch(const struct kvf_service *svc, enum kvf_rpc rpc,
			      uint32_t found, bool *logged)
{
	if (*logged)
		return;
	*logged = true;
	fprintf(stderr,
		"kvforge-master: %s request type hash %08x, ABI %s expects "
		"%08x: is the client another Mooncake revision? "
		"(see --mooncake-abi)\n",
		kvf_abi_rpc_name(rpc), found, svc->o.abi->name,
		svc->o.abi->rpc[rpc].req_hash);
}

void kvf_service_handle(struct kvf_service *svc, struct kvf_service_scratch *s,
			const struct kvf_frame_req *hdr, const uint8_t *body,
			struct kvf_wbuf *out, uint64_t arrival_ns,
			bool *hash_logged)
{
	struct kvf_msg_items items = {s->keys, s->vals, s->has_val,
				      svc->max_batch};
	struct call c = {.svc = svc, .s = s, .out = out};
	uint32_t found = 0;
	size_t at;
	int ret;

	/* HA fencing: past the lease's deadline, answer nothing. */
	if (svc->o.ha && !kvf_ha_may_serve(svc->o.ha)) {
		out->failed = true;
		return;
	}
	if (!kvf_abi_rpc_of(svc->o.abi, hdr->function_id, &c.rpc)) {
		kvf_frame_resp_error(out, hdr->seq_num,
				     KVF_RPC_ERRC_FUNCTION_NOT_REGISTERED,
				     "the rpc function not registered");
		return;
	}
	ret = kvf_msg_req_decode(svc->o.abi, c.rpc, body, hdr->length, &items,
				 &c.req, &found);
	if (ret || scratch_reserve(s, is_batch(c.rpc) ? c.req.nkeys : 1)) {
		if (ret == KVF_WIRE_ERR_HASH)
			log_hash_mismatch(svc, c.rpc, found, hash_logged);
		kvf_frame_resp_error(out, hdr->seq_num,
				     KVF_RPC_ERRC_INVALID_RPC_ARGUMENTS,
				     "invalid rpc arg");
		c.failed = true;
		goto record;
	}
	at = kvf_frame_resp_begin(out);
	if (has_tenant(c.rpc) && !tenant_ok(&c.req.tenant))
		answer_error(&c, KVF_MC_INVALID_PARAMS);
	else if (is_batch(c.rpc) && !c.req.nkeys)
		kvf_msg_enc_codes(out, svc->o.abi, c.rpc, NULL, 0);
	else
		dispatch(&c, body, hdr->length);
	kvf_frame_resp_end(out, at, hdr->seq_num, KVF_RPC_ERRC_OK);
record:
	if (svc->o.metrics)
		kvf_metrics_rpc_done(svc->o.metrics, c.rpc,
				     kvf_service_now_ns() - arrival_ns,
				     c.failed, c.items, c.failed_items);
}
