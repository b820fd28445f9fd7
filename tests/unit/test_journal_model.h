/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_journal_model.h - a reference model of the journal's
 * state and a deterministic, state-aware record generator, shared by the
 * journal unit, concurrency and crash tests.
 *
 * Object keys are "hicache-<10-digit id>-" padded to 70 bytes, so the
 * model is an array indexed by id. The generator produces only consistent
 * histories: replicas in distinct mounted segments at never-reused
 * offsets, and an unmount is preceded, in the same batch, by records that
 * drop every replica in the segment.
 */
#ifndef KVF_TEST_JOURNAL_MODEL_H
#define KVF_TEST_JOURNAL_MODEL_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/xorshift.h"
#include "journal/journal.h"
#include "journal/record.h"

#define JM_KEY_LEN 70
#define JM_SEGS 16
#define JM_MAX_BATCH 1024

struct jm_obj {
	int live;
	uint8_t flags, nr;
	uint64_t size, deadline;
	struct kvf__jreplica rep[KVF_MAX_REPLICAS];
};

struct jm_seg {
	int live;
	uint64_t client, base, size, bump;
	char name[32], ep[32];
};

struct jm {
	struct jm_obj *o;
	size_t cap;
	size_t live;
	struct jm_seg s[JM_SEGS + 1]; /* ids 1..JM_SEGS */
	uint64_t records;
	uint64_t next_seq; /* replay: expected sequence of the next log rec */
	uint64_t image_seq;
	int bad_key, bad_seq;
};

static inline void jm_key(char *buf, uint32_t id)
{
	int n = snprintf(buf, JM_KEY_LEN + 1, "hicache-%010u-", id);

	memset(buf + n, 'k', JM_KEY_LEN - (size_t)n);
}

static inline struct jm_obj *jm_obj(struct jm *m, uint64_t id)
{
	if (id >= m->cap) {
		size_t cap = m->cap ? m->cap : 1024;

		while (cap <= id)
			cap *= 2;
		m->o = realloc(m->o, cap * sizeof(*m->o));
		if (!m->o)
			abort();
		memset(m->o + m->cap, 0, (cap - m->cap) * sizeof(*m->o));
		m->cap = cap;
	}
	return &m->o[id];
}

static inline void jm_free(struct jm *m)
{
	free(m->o);
	memset(m, 0, sizeof(*m));
}

/* Deep copy of @src's objects into @dst (a shallow copy of @src). */
static inline void jm_own_copy(struct jm *dst)
{
	const struct jm_obj *o = dst->o;

	dst->o = NULL;
	if (!dst->cap)
		return;
	dst->o = malloc(dst->cap * sizeof(*o));
	if (!dst->o)
		abort();
	memcpy(dst->o, o, dst->cap * sizeof(*o));
}

/* Apply @r with the journal's rules (journal/journal.h). */
static inline void jm_apply(struct jm *m, const struct kvf__jrec *r)
{
	struct jm_seg *s;
	struct jm_obj *o;
	char *end;
	unsigned long id;

	m->records++;
	switch (r->type) {
	case KVF__JREC_SEGMENT_MOUNT:
		if (r->mount.segment_id < 1 || r->mount.segment_id > JM_SEGS) {
			m->bad_key = 1;
			return;
		}
		s = &m->s[r->mount.segment_id];
		s->live = 1;
		s->client = r->mount.client_id;
		s->base = r->mount.base;
		s->size = r->mount.size;
		snprintf(s->name, sizeof(s->name), "%.*s",
			 (int)r->mount.name_len, r->mount.name);
		snprintf(s->ep, sizeof(s->ep), "%.*s",
			 (int)r->mount.endpoint_len, r->mount.endpoint);
		return;
	case KVF__JREC_SEGMENT_UNMOUNT:
		if (r->unmount.segment_id >= 1 &&
		    r->unmount.segment_id <= JM_SEGS)
			m->s[r->unmount.segment_id].live = 0;
		return;
	case KVF__JREC_CLIENT_REMOVE:
		return;
	default:
		break;
	}
	if (r->obj.key_len != JM_KEY_LEN || memcmp(r->obj.key, "hicache-", 8)) {
		m->bad_key = 1;
		return;
	}
	id = strtoul(r->obj.key + 8, &end, 10);
	o = jm_obj(m, id);
	if (r->type == KVF__JREC_OBJECT_REMOVE) {
		m->live -= o->live;
		o->live = 0;
		return;
	}
	if (r->type == KVF__JREC_OBJECT_REPLICAS && !o->live)
		return;
	if (r->type == KVF__JREC_OBJECT_PUT) {
		m->live += !o->live;
		o->live = 1;
		o->size = r->obj.size;
		o->flags = r->obj.flags;
		o->deadline = r->obj.soft_pin_deadline_ns;
	}
	o->nr = r->obj.nr_replicas;
	memset(o->rep, 0, sizeof(o->rep));
	memcpy(o->rep, r->obj.replicas, o->nr * sizeof(o->rep[0]));
}

/* Replay callback: apply and check the sequence order. */
static inline int jm_replay_cb(void *arg, const struct kvf__jrec *r,
			       uint64_t seq)
{
	struct jm *m = arg;

	if (seq == m->image_seq && m->next_seq == m->image_seq + 1) {
		/* still in the image */
	} else if (seq != m->next_seq) {
		m->bad_seq = 1;
	} else {
		m->next_seq++;
	}
	jm_apply(m, r);
	return 0;
}

static inline void jm_replay_init(struct jm *m, uint64_t checkpoint_seq)
{
	memset(m, 0, sizeof(*m));
	m->image_seq = checkpoint_seq;
	m->next_seq = checkpoint_seq + 1;
}

/* 0 if the live states of @a and @b are equal, else a line number. */
static inline int jm_diff(const struct jm *a, const struct jm *b)
{
	size_t n = a->cap > b->cap ? a->cap : b->cap;

	if (a->live != b->live)
		return __LINE__;
	for (size_t i = 0; i < n; i++) {
		const struct jm_obj *x = i < a->cap ? &a->o[i] : NULL;
		const struct jm_obj *y = i < b->cap ? &b->o[i] : NULL;
		int xl = x && x->live, yl = y && y->live;

		if (xl != yl)
			return __LINE__;
		if (xl && (x->size != y->size || x->flags != y->flags ||
			   x->deadline != y->deadline || x->nr != y->nr ||
			   memcmp(x->rep, y->rep, sizeof(x->rep))))
			return __LINE__;
	}
	for (int i = 1; i <= JM_SEGS; i++) {
		const struct jm_seg *x = &a->s[i], *y = &b->s[i];

		if (x->live != y->live)
			return __LINE__;
		if (x->live && (x->client != y->client || x->base != y->base ||
				x->size != y->size || strcmp(x->name, y->name) ||
				strcmp(x->ep, y->ep)))
			return __LINE__;
	}
	return 0;
}

/* Every replica in a live segment, inside it; segments distinct. */
static inline int jm_consistent(const struct jm *m)
{
	for (size_t i = 0; i < m->cap; i++) {
		const struct jm_obj *o = &m->o[i];

		if (!o->live)
			continue;
		for (unsigned k = 0; k < o->nr; k++) {
			uint64_t sid = o->rep[k].segment_id;

			if (sid < 1 || sid > JM_SEGS || !m->s[sid].live ||
			    o->rep[k].offset + o->size > m->s[sid].size)
				return 0;
			for (unsigned l = 0; l < k; l++)
				if (o->rep[l].segment_id == sid)
					return 0;
		}
	}
	return 1;
}

/* --- Generator. --- */

struct jgen {
	uint64_t rng;
	uint32_t next_id;
	struct jm m; /* the state after every generated batch */
	struct kvf__jrec recs[JM_MAX_BATCH];
	char keys[JM_MAX_BATCH][JM_KEY_LEN];
	char names[JM_SEGS + 1][2][32];
	size_t n;
};

static inline uint64_t jgen_rand(struct jgen *g)
{
	return kvf__xorshift64s(&g->rng);
}

static inline void jgen_init(struct jgen *g, uint64_t seed)
{
	memset(g, 0, sizeof(*g));
	g->rng = seed * 2654435761u + 88172645463325252ull;
}

static inline struct kvf__jrec *jgen_rec(struct jgen *g, enum kvf__jrec_type t)
{
	struct kvf__jrec *r = &g->recs[g->n++];

	memset(r, 0, sizeof(*r));
	r->type = t;
	return r;
}

static inline void jgen_key(struct jgen *g, struct kvf__jrec *r, uint32_t id)
{
	jm_key(g->keys[g->n - 1], id);
	r->obj.key = g->keys[g->n - 1];
	r->obj.key_len = JM_KEY_LEN;
}

static inline int jgen_live_segs(struct jgen *g)
{
	int n = 0;

	for (int i = 1; i <= JM_SEGS; i++)
		n += g->m.s[i].live;
	return n;
}

static inline void jgen_mount(struct jgen *g)
{
	struct kvf__jrec *r;
	int id = 1;

	while (id <= JM_SEGS && g->m.s[id].live)
		id++;
	if (id > JM_SEGS)
		return;
	r = jgen_rec(g, KVF__JREC_SEGMENT_MOUNT);
	snprintf(g->names[id][0], 32, "seg-%d-%u", id,
		 (unsigned)(jgen_rand(g) % 1000));
	snprintf(g->names[id][1], 32, "10.0.0.%d:%d", id, 4000 + id);
	r->mount.segment_id = (uint64_t)id;
	r->mount.client_id = (uint64_t)(id % 3 + 1);
	r->mount.base = 0x7f0000000000ull + ((uint64_t)id << 36);
	r->mount.size = 1ull << 40;
	r->mount.name = g->names[id][0];
	r->mount.name_len = (uint16_t)strlen(g->names[id][0]);
	r->mount.endpoint = g->names[id][1];
	r->mount.endpoint_len = (uint16_t)strlen(g->names[id][1]);
	jm_apply(&g->m, r);
	g->m.s[id].bump = 0;
}

/* Drop every replica in segment @sid, then unmount it. */
static inline void jgen_unmount(struct jgen *g, int sid)
{
	struct kvf__jrec *r;
	size_t need = 2;

	if (!g->m.s[sid].live)
		return;
	for (size_t i = 0; i < g->m.cap; i++)
		for (unsigned k = 0; g->m.o[i].live && k < g->m.o[i].nr; k++)
			need += g->m.o[i].rep[k].segment_id == (uint64_t)sid;
	if (g->n + need > JM_MAX_BATCH)
		return;
	for (size_t i = 0; i < g->m.cap; i++) {
		struct jm_obj *o = &g->m.o[i];
		unsigned k, w = 0;

		if (!o->live)
			continue;
		for (k = 0; k < o->nr; k++)
			if (o->rep[k].segment_id == (uint64_t)sid)
				break;
		if (k == o->nr)
			continue;
		if (o->nr == 1) {
			r = jgen_rec(g, KVF__JREC_OBJECT_REMOVE);
		} else {
			r = jgen_rec(g, KVF__JREC_OBJECT_REPLICAS);
			for (k = 0; k < o->nr; k++)
				if (o->rep[k].segment_id != (uint64_t)sid)
					r->obj.replicas[w++] = o->rep[k];
			r->obj.nr_replicas = (uint8_t)w;
		}
		jgen_key(g, r, (uint32_t)i);
		jm_apply(&g->m, r);
	}
	r = jgen_rec(g, KVF__JREC_SEGMENT_UNMOUNT);
	r->unmount.segment_id = (uint64_t)sid;
	jm_apply(&g->m, r);
	for (int i = 1; i <= JM_SEGS; i++)
		if (g->m.s[i].live &&
		    g->m.s[i].client == (uint64_t)(sid % 3 + 1))
			return;
	r = jgen_rec(g, KVF__JREC_CLIENT_REMOVE);
	r->client.client_id = (uint64_t)(sid % 3 + 1);
	jm_apply(&g->m, r);
}

static inline void jgen_put(struct jgen *g)
{
	int live = jgen_live_segs(g);
	unsigned nr = 1 + (unsigned)(jgen_rand(g) % 2);
	struct kvf__jrec *r;

	if ((unsigned)live < nr)
		return;
	r = jgen_rec(g, KVF__JREC_OBJECT_PUT);
	jgen_key(g, r, g->next_id++);
	r->obj.size = 4096 + jgen_rand(g) % (1 << 20);
	r->obj.flags = (uint8_t)(jgen_rand(g) % 4);
	r->obj.soft_pin_deadline_ns =
		r->obj.flags & KVF__OBJ_SOFT_PIN ? jgen_rand(g) >> 4 : 0;
	r->obj.nr_replicas = (uint8_t)nr;
	for (unsigned k = 0; k < nr;) {
		uint64_t sid = 1 + jgen_rand(g) % JM_SEGS;
		int dup = 0;

		for (unsigned l = 0; l < k; l++)
			dup |= r->obj.replicas[l].segment_id == sid;
		if (!g->m.s[sid].live || dup)
			continue;
		r->obj.replicas[k].segment_id = sid;
		r->obj.replicas[k].offset = g->m.s[sid].bump;
		g->m.s[sid].bump += r->obj.size;
		k++;
	}
	jm_apply(&g->m, r);
}

/* A random live object id, or -1. */
static inline long jgen_pick(struct jgen *g)
{
	for (int tries = 0; tries < 8 && g->next_id; tries++) {
		uint32_t id = (uint32_t)(jgen_rand(g) % g->next_id);

		if (id < g->m.cap && g->m.o[id].live)
			return id;
	}
	return -1;
}

static inline void jgen_change(struct jgen *g, int remove)
{
	long id = jgen_pick(g);
	struct jm_obj *o;
	struct kvf__jrec *r;

	if (id < 0)
		return;
	o = &g->m.o[id];
	if (!remove && o->nr < 2)
		return;
	r = jgen_rec(g, remove ? KVF__JREC_OBJECT_REMOVE :
				 KVF__JREC_OBJECT_REPLICAS);
	jgen_key(g, r, (uint32_t)id);
	if (!remove) {
		r->obj.nr_replicas = (uint8_t)(o->nr - 1);
		memcpy(r->obj.replicas, o->rep + 1,
		       r->obj.nr_replicas * sizeof(o->rep[0]));
	}
	jm_apply(&g->m, r);
}

/*
 * Generate a batch of about @n records (puts mostly) into g->recs[0..g->n)
 * and apply it to g->m. @churn enables removes, replica drops and unmounts.
 */
static inline size_t jgen_batch(struct jgen *g, size_t n, int churn)
{
	g->n = 0;
	while (g->n < n && g->n + 1 < JM_MAX_BATCH) {
		unsigned op = (unsigned)(jgen_rand(g) % 1000);

		if (jgen_live_segs(g) < 4 || op < 3)
			jgen_mount(g);
		else if (churn && op < 5)
			jgen_unmount(g, 1 + (int)(jgen_rand(g) % JM_SEGS));
		else if (churn && op < 200)
			jgen_change(g, 1);
		else if (churn && op < 300)
			jgen_change(g, 0);
		else
			jgen_put(g);
	}
	return g->n;
}

/*
 * --- Mixed batch sizes: per-thread generators for concurrent appenders. ---
 *
 * Each appending thread owns its keys ("mx-<thread>-<id>", never reused):
 * it puts new ones and removes some of its live ones, in batches whose
 * sizes straddle the side log's direct threshold (a batch over half a side
 * log file goes to LMDB directly, the others through the side log). Its
 * state is independent of the other threads', so a thread's state after
 * its k-th batch is known whatever the interleaving.
 */
#define MX_KEY_LEN 16
#define MX_MAX_THREADS 8

enum { MX_NEVER = 0, MX_LIVE = 1, MX_GONE = 2 };

struct mgen {
	uint64_t rng;
	int thread;
	uint32_t next_id, nr_live;
	uint32_t cap;        /* bytes at @state */
	uint8_t *state;      /* per id: MX_NEVER, MX_LIVE, MX_GONE */
	struct kvf__jrec *recs;
	char (*keys)[MX_KEY_LEN];
	size_t max, n;       /* records allocated, in the last batch */
	uint64_t batches;
};

static inline void mx_key(char *buf, int thread, uint32_t id)
{
	char tmp[32];

	snprintf(tmp, sizeof(tmp), "mx-%d-%010u", thread, id);
	memcpy(buf, tmp, MX_KEY_LEN);
}

/* Parse a key made by mx_key(); false if it is not one. */
static inline bool mx_parse(const struct kvf__jrec *r, int *thread,
			    uint32_t *id)
{
	char tmp[MX_KEY_LEN + 1];
	unsigned t, i;

	if (r->obj.key_len != MX_KEY_LEN)
		return false;
	memcpy(tmp, r->obj.key, MX_KEY_LEN);
	tmp[MX_KEY_LEN] = '\0';
	if (sscanf(tmp, "mx-%u-%u", &t, &i) != 2 || t >= MX_MAX_THREADS)
		return false;
	*thread = (int)t;
	*id = i;
	return true;
}

static inline void mx_grow(uint8_t **state, uint32_t *cap, uint32_t id)
{
	uint32_t n = *cap ? *cap : 4096;

	if (id < *cap)
		return;
	while (n <= id)
		n *= 2;
	*state = realloc(*state, n);
	if (!*state)
		abort();
	memset(*state + *cap, MX_NEVER, n - *cap);
	*cap = n;
}

/*
 * About how many generated records fill half a side log file of
 * @wal_bytes: the direct threshold, in records.
 */
static inline size_t mx_direct_records(uint64_t wal_bytes)
{
	struct kvf__jrec r = { .type = KVF__JREC_OBJECT_PUT };
	uint8_t buf[256];
	char key[MX_KEY_LEN];

	mx_key(key, 0, 10000);
	r.obj.key = key;
	r.obj.key_len = MX_KEY_LEN;
	r.obj.size = 4096;
	r.obj.nr_replicas = 1;
	r.obj.replicas[0].segment_id = 1;
	r.obj.replicas[0].offset = 10000ull * 4096;
	if (kvf__jrec_encoded_max(&r) > sizeof(buf))
		abort();
	return (size_t)(wal_bytes / 2 / kvf__jrec_encode(&r, buf));
}

/* @max: the largest batch mgen_batch() may be asked for. */
static inline void mgen_init(struct mgen *g, uint64_t seed, int thread,
			     size_t max)
{
	memset(g, 0, sizeof(*g));
	g->rng = (seed + (uint64_t)thread * 0x9e3779b97f4a7c15ull) *
			 2654435761u + 88172645463325252ull;
	g->thread = thread;
	g->max = max;
	g->recs = calloc(max, sizeof(*g->recs));
	g->keys = calloc(max, sizeof(*g->keys));
	if (!g->recs || !g->keys)
		abort();
}

static inline void mgen_free(struct mgen *g)
{
	free(g->state);
	free(g->recs);
	free(g->keys);
	memset(g, 0, sizeof(*g));
}

static inline uint64_t mgen_rand(struct mgen *g)
{
	return kvf__xorshift64s(&g->rng);
}

/*
 * A batch size around @direct_recs (about as many records as fill half a
 * side log file): a third small, a third within a quarter of the
 * threshold on either side, a third up to twice it.
 */
static inline size_t mgen_size(struct mgen *g, size_t direct_recs)
{
	size_t lo, span;

	switch (mgen_rand(g) % 3) {
	case 0:
		lo = 1;
		span = direct_recs / 8;
		break;
	case 1:
		lo = direct_recs * 3 / 4;
		span = direct_recs / 2;
		break;
	default:
		lo = direct_recs;
		span = direct_recs;
		break;
	}
	lo += mgen_rand(g) % (span + 1);
	return lo < g->max ? lo : g->max;
}

static inline struct kvf__jrec *mgen_rec(struct mgen *g,
					 enum kvf__jrec_type type, uint32_t id)
{
	struct kvf__jrec *r = &g->recs[g->n];

	memset(r, 0, sizeof(*r));
	r->type = type;
	mx_key(g->keys[g->n], g->thread, id);
	r->obj.key = g->keys[g->n];
	r->obj.key_len = MX_KEY_LEN;
	g->n++;
	return r;
}

/* Generate a batch of @n records (a few removes, puts) into g->recs. */
static inline size_t mgen_batch(struct mgen *g, size_t n)
{
	g->n = 0;
	while (g->n < n) {
		uint32_t id = g->next_id ?
				      (uint32_t)(mgen_rand(g) % g->next_id) : 0;
		struct kvf__jrec *r;

		if (g->nr_live && mgen_rand(g) % 8 == 0 &&
		    g->state[id] == MX_LIVE) {
			mgen_rec(g, KVF__JREC_OBJECT_REMOVE, id);
			g->state[id] = MX_GONE;
			g->nr_live--;
			continue;
		}
		id = g->next_id++;
		mx_grow(&g->state, &g->cap, id);
		r = mgen_rec(g, KVF__JREC_OBJECT_PUT, id);
		r->obj.size = 4096;
		r->obj.nr_replicas = 1;
		r->obj.replicas[0].segment_id = (uint64_t)g->thread + 1;
		r->obj.replicas[0].offset = (uint64_t)id * 4096;
		g->state[id] = MX_LIVE;
		g->nr_live++;
	}
	g->batches++;
	return g->n;
}

/* What a replay of mgen batches holds: per thread, the state of each id. */
struct mx_replay {
	uint8_t *state[MX_MAX_THREADS];
	uint32_t cap[MX_MAX_THREADS];
	uint64_t image_seq, next_seq;
	int bad; /* a line number: unknown key, put twice, bad sequence */
};

static inline void mx_replay_init(struct mx_replay *m, uint64_t ckpt_seq)
{
	memset(m, 0, sizeof(*m));
	m->image_seq = ckpt_seq;
	m->next_seq = ckpt_seq + 1;
}

static inline void mx_replay_free(struct mx_replay *m)
{
	for (int t = 0; t < MX_MAX_THREADS; t++)
		free(m->state[t]);
	memset(m, 0, sizeof(*m));
}

/* Replay callback for kvf__journal_replay(); the image comes first. */
static inline int mx_replay_cb(void *arg, const struct kvf__jrec *r,
			       uint64_t seq)
{
	struct mx_replay *m = arg;
	uint8_t *st;
	uint32_t id;
	int t;

	if (seq != m->image_seq || m->next_seq != m->image_seq + 1) {
		if (seq != m->next_seq && !m->bad)
			m->bad = __LINE__;
		m->next_seq = seq + 1;
	}
	if ((r->type != KVF__JREC_OBJECT_PUT &&
	     r->type != KVF__JREC_OBJECT_REMOVE) ||
	    !mx_parse(r, &t, &id)) {
		m->bad = m->bad ? m->bad : __LINE__;
		return 0;
	}
	mx_grow(&m->state[t], &m->cap[t], id);
	st = &m->state[t][id];
	if (r->type == KVF__JREC_OBJECT_PUT) {
		if (*st != MX_NEVER && !m->bad)
			m->bad = __LINE__; /* keys are never put twice */
		*st = MX_LIVE;
	} else {
		*st = MX_GONE;
	}
	return 0;
}

/*
 * 0 if thread @g->thread's replayed state equals @g's (every id it put is
 * live or gone exactly as generated), else the first id that differs + 1.
 * The image forgets removed keys, so "gone" and "never" compare equal.
 */
static inline uint64_t mx_diff(const struct mx_replay *m, const struct mgen *g)
{
	const uint8_t *st = m->state[g->thread];
	uint32_t cap = m->cap[g->thread];
	uint32_t n = g->next_id > cap ? g->next_id : cap;

	for (uint32_t id = 0; id < n; id++) {
		int want = id < g->next_id && g->state[id] == MX_LIVE;
		int got = id < cap && st[id] == MX_LIVE;

		if (want != got)
			return (uint64_t)id + 1;
	}
	return 0;
}

#endif /* KVF_TEST_JOURNAL_MODEL_H */
