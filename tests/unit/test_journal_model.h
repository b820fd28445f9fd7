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

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "journal/journal.h"

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
	uint64_t x = g->rng; /* xorshift64* */

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	g->rng = x;
	return x * 0x2545f4914f6cdd1dull;
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
		r->obj.flags & KVF__JREC_SOFT_PIN ? jgen_rand(g) >> 4 : 0;
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

#endif /* KVF_TEST_JOURNAL_MODEL_H */
