/* SPDX-License-Identifier: MIT */
/*
 * journal/rewrite.c - a checkpoint that writes a new image instead of
 * folding into the old one.
 *
 * Why: the image is a B-tree keyed by the objects' key hashes, and LMDB
 * copies every leaf page a transaction touches, whole. Folding a window of
 * the log in place therefore writes a page for nearly every record once
 * the image has more leaf pages than a fold chunk has records (about
 * 2,000 bytes a record at 10M objects, docs/journal.md). A rewrite writes
 * each page of the image once per checkpoint, full, whatever the window:
 * its cost per record is the image's size over the window's.
 *
 * How: the two object databases "objs" and "objs.1" take turns; meta
 * "image" names the one in force (kvf__store_image()). A rewrite of the
 * window (from, to] of the log:
 *
 *  1. empties the spare database (what an interrupted rewrite left);
 *  2. per slice of the hash space (one slice unless the window's records
 *     would need more than the budget's bytes of memory), reads the
 *     window's object records of that slice from the log into memory,
 *     sorts them by (image key, log order), and merges them with the
 *     image's entries of the slice into the spare database, appending in
 *     key order (MDB_APPEND: pages are filled, never split). Slice 0's
 *     read decodes and checks every record and, when there are more
 *     slices, notes each one's hash and length (16 bytes a record), so the
 *     later reads copy their slice's records without decoding any;
 *  3. switches, in one transaction: applies the window's segment and
 *     client records to their databases (in log order), deletes the
 *     window from the log, points meta "image" at the new image, empties
 *     the old one and advances checkpoint_seq to @to.
 *
 * Each step is one write transaction, so appends and side log moves are
 * served between steps as between in-place fold chunks. Nothing the old
 * image or the log says changes before the switch, which is atomic: a
 * crash at any point leaves image + log as they were or as after the
 * checkpoint, and the next rewrite starts by emptying the spare.
 *
 * The merge applies a key's records with the rules kvf__image_apply()
 * uses (put replaces, replicas update a present object, remove deletes a
 * present one, a new key takes the next tie after its hash's last entry),
 * so a rewritten image equals the image an in-place fold of the same
 * window gives.
 *
 * State lives in struct kvf__rewrite, owned by the writer thread. A step
 * changes only @pos; kvf__rewrite_settle() keeps it when the transaction
 * committed or restores @saved when it did not, so a step that failed
 * (a full map: the writer grows it and retries) runs again unchanged.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/grow.h"
#include "journal/error.h"
#include "journal/rewrite.h"
#include "metadata/hash.h"
#include "metadata/hugemem.h"

/* A rewrite pays off when in-place folding would touch most leaf pages:
 * a page holds ~30 objects, so a window of a sixteenth of the image. */
#define RW_WINDOW_SHARE 16

enum rw_phase { RW_CLEAR, RW_COLLECT, RW_EMIT, RW_SWITCH };

/*
 * A slice's records are kept in RW_BUCKETS runs by the top bits of their
 * hash within the slice, each sorted only when the merge reaches it: the
 * sorting is spread over the steps (one sort of a million records held
 * the transaction slot for ~140 ms).
 */
#define RW_BUCKETS 256

/* One object record of the window, encoded at arena[off..off+len). */
struct rw_item {
	uint64_t hash;
	uint64_t seq;
	size_t off;
	uint32_t len;
	uint32_t type; /* enum kvf__jrec_type */
};

/* Slice 0's index of the window, one per record, for the later slices. */
struct rw_rec {
	uint64_t hash;
	uint32_t len;
	uint32_t type; /* enum kvf__jrec_type */
};

/* Progress: what a step changes (kvf__rewrite_settle()). */
struct rw_pos {
	enum rw_phase phase;
	uint32_t slice;
	uint64_t to;        /* end of the window; known after slice 0's read */
	uint64_t next_seq;  /* COLLECT: the next frame's first sequence */
	size_t used;        /* arena bytes */
	size_t side_len;    /* side bytes */
	size_t nrecs;       /* records in the index */
	uint32_t bucket;    /* EMIT: the bucket merged now */
	uint32_t sorted;    /* EMIT: buckets below this are sorted */
	size_t idx;         /* EMIT: its next item */
	uint64_t next_hash; /* EMIT: the image resumes at this hash */
	size_t n[RW_BUCKETS]; /* items per bucket */
};

/*
 * A bucket's items: a part of the rewrite's shared array, sized from the
 * window's records at planning (so they are on its huge pages), or,
 * once a bucket outgrew its part, an array of its own (@own).
 */
struct rw_bucket {
	struct rw_item *v;
	size_t cap;
	bool own;
};

struct kvf__rewrite {
	uint64_t from;   /* checkpoint_seq when planned */
	uint64_t target; /* fold at least this far */
	uint64_t chunk;
	uint32_t slices;
	struct rw_pos pos, saved;
	struct rw_bucket b[RW_BUCKETS];
	struct rw_item *shared; /* the buckets' parts, RW_BUCKETS of them */
	size_t shared_bytes;
	uint8_t *arena;
	size_t arena_cap;
	uint8_t *side; /* segment and client records, encoded, log order */
	size_t side_cap;
	struct rw_rec *recs; /* with more than one slice */
	size_t recs_cap;
	struct rw_item *tmp; /* sort_bucket()'s */
	size_t tmp_cap;
};

bool kvf__rewrite_wanted(uint64_t window, uint64_t objects)
{
	return window >= objects / RW_WINDOW_SHARE;
}

/*
 * Give every bucket a part of one array for a slice of about @records
 * records, a quarter more than its share (a slice's hashes fall evenly
 * on the buckets: at 1M records a share is ~3,900 with a spread of ~60),
 * so the items are written into huge pages (kvf__huge_alloc()), not into
 * 256 arrays of malloc()'s, each grown and faulted in 4 KiB at a time
 * (~8,600 faults a checkpoint of 1M records). Without the memory the
 * buckets start empty and grow their own.
 */
static void share_buckets(struct kvf__rewrite *rw, uint64_t records)
{
	size_t per = (size_t)(records / RW_BUCKETS);

	per += per / 4 + 4;
	rw->shared_bytes = per * RW_BUCKETS * sizeof(struct rw_item);
	rw->shared = kvf__huge_alloc(rw->shared_bytes);
	if (!rw->shared)
		return;
	for (int i = 0; i < RW_BUCKETS; i++) {
		rw->b[i].v = rw->shared + (size_t)i * per;
		rw->b[i].cap = per;
	}
}

struct kvf__rewrite *kvf__rewrite_new(uint64_t target, uint64_t chunk,
				      uint64_t budget,
				      const struct kvf__store_state *st)
{
	struct kvf__rewrite *rw = calloc(1, sizeof(*rw));
	uint64_t log = st->last_seq - st->ckpt_seq, window, bytes;

	if (!rw)
		return NULL;
	window = target > st->ckpt_seq ? target - st->ckpt_seq : 0;
	/* the window's share of the log's frames, each at most this big */
	bytes = log ? (uint64_t)((double)st->log_frames * window / log *
				 (KVF__FRAME_TARGET + 64)) :
		      0;
	rw->from = st->ckpt_seq;
	rw->target = target;
	rw->chunk = chunk ? chunk : 1;
	rw->slices = (uint32_t)(bytes / (budget ? budget : 1) + 1);
	share_buckets(rw, window / rw->slices);
	rw->pos.phase = RW_CLEAR;
	rw->saved = rw->pos;
	return rw;
}

void kvf__rewrite_free(struct kvf__rewrite *rw)
{
	if (!rw)
		return;
	for (int i = 0; i < RW_BUCKETS; i++)
		if (rw->b[i].own)
			kvf__huge_array_free(rw->b[i].v, rw->b[i].cap,
					     sizeof(struct rw_item));
	kvf__huge_free(rw->shared, rw->shared_bytes);
	kvf__huge_array_free(rw->arena, rw->arena_cap, 1);
	kvf__huge_array_free(rw->side, rw->side_cap, 1);
	kvf__huge_array_free(rw->recs, rw->recs_cap, sizeof(*rw->recs));
	kvf__huge_array_free(rw->tmp, rw->tmp_cap, sizeof(*rw->tmp));
	free(rw);
}

void kvf__rewrite_settle(struct kvf__rewrite *rw, bool committed)
{
	if (committed)
		rw->saved = rw->pos;
	else
		rw->pos = rw->saved;
}

/* The hash range [*lo, *hi] of slice @k of @n (the last takes the rest). */
static void slice_range(uint32_t k, uint32_t n, uint64_t *lo, uint64_t *hi)
{
	uint64_t width = UINT64_MAX / n; /* n > 1: the ranges fit */

	*lo = n == 1 ? 0 : k * width;
	*hi = k + 1 == n ? UINT64_MAX : (k + 1) * width - 1;
}

/*
 * The shift that maps the hashes of [@lo, @hi] to fewer than 256 runs,
 * in order: (h - @lo) >> shift.
 */
static unsigned run_shift(uint64_t lo, uint64_t hi)
{
	uint64_t span = hi - lo;
	unsigned bits = span ? 64 - (unsigned)__builtin_clzll(span) : 0;

	return bits > 8 ? bits - 8 : 0;
}

/* Append the record encoding @raw[0..@len) to *@buf; *@off: where. */
static int keep_encoded(uint8_t **buf, size_t *cap, size_t *used,
			const uint8_t *raw, size_t len, size_t *off)
{
	uint8_t *p = kvf__huge_grow(*buf, cap, *used + len, 1, 1 << 20);

	if (!p)
		return ENOMEM;
	*buf = p;
	*off = *used;
	memcpy(*buf + *used, raw, len);
	*used += len;
	return 0;
}

/* --- Reading the window. --- */

struct collect {
	struct kvf__rewrite *rw;
	uint64_t lo, hi;
	unsigned shift; /* run_shift(lo, hi): a hash's bucket */
	uint64_t seq;   /* of the frame's first record */
};

/* Room for one more item in @b, which holds @n (its capacity). */
static bool bucket_grow(struct rw_bucket *b, size_t n)
{
	struct rw_item *v;
	size_t cap = 0;

	if (b->own) {
		v = kvf__huge_grow(b->v, &b->cap, n + 1, sizeof(*v), 1024);
		if (v)
			b->v = v;
		return v != NULL;
	}
	/* Out of its shared part (or none): an array of its own. */
	v = kvf__huge_grow(NULL, &cap, n + 1, sizeof(*v),
			   b->cap ? 2 * b->cap : 1024);
	if (!v)
		return false;
	if (n)
		memcpy(v, b->v, n * sizeof(*v));
	b->v = v;
	b->cap = cap;
	b->own = true;
	return true;
}

/* Keep the object record @raw[0..@len) of hash @h, sequence @seq. */
static int keep_item(struct kvf__rewrite *rw, const struct collect *c,
		     uint64_t h, uint64_t seq, uint32_t type,
		     const uint8_t *raw, uint32_t len)
{
	struct rw_pos *p = &rw->pos;
	struct rw_bucket *b = &rw->b[(h - c->lo) >> c->shift];
	size_t off, *n = &p->n[b - rw->b];
	struct rw_item *it;
	int rc;

	if (*n == b->cap && !bucket_grow(b, *n))
		return ENOMEM;
	rc = keep_encoded(&rw->arena, &rw->arena_cap, &p->used, raw, len,
			  &off);
	if (rc)
		return rc;
	it = &b->v[(*n)++];
	it->hash = h;
	it->seq = seq;
	it->off = off;
	it->len = len;
	it->type = type;
	return 0;
}

/* Note the window's record @seq in the index the later slices read. */
static int index_record(struct kvf__rewrite *rw, uint64_t seq,
			uint32_t type, uint64_t h, uint32_t len)
{
	struct rw_pos *p = &rw->pos;
	struct rw_rec *r;

	if (rw->slices == 1)
		return 0;
	if (seq != rw->from + 1 + p->nrecs)
		return MDB_CORRUPTED;
	r = kvf__huge_grow(rw->recs, &rw->recs_cap, p->nrecs + 1, sizeof(*r),
			   65536);
	if (!r)
		return ENOMEM;
	rw->recs = r;
	r = &rw->recs[p->nrecs++];
	r->hash = h;
	r->len = len;
	r->type = type;
	return 0;
}

/* Slice 0: decode each record of a frame, keep and index it. */
static int collect_record(void *arg, const struct kvf__jrec *rec,
			  uint32_t idx, const uint8_t *raw, size_t raw_len)
{
	struct collect *c = arg;
	struct kvf__rewrite *rw = c->rw;
	bool object = kvf__jrec_is_object(rec);
	uint64_t h = 0;
	size_t off;
	int rc;

	if (raw_len > UINT32_MAX)
		return MDB_CORRUPTED;
	if (object)
		h = kvf__image_key_hash(rec->obj.key, rec->obj.key_len);
	rc = index_record(rw, c->seq + idx, rec->type, h, (uint32_t)raw_len);
	if (rc)
		return rc;
	if (!object)
		return keep_encoded(&rw->side, &rw->side_cap,
				    &rw->pos.side_len, raw, raw_len, &off);
	if (h < c->lo || h > c->hi)
		return 0;
	return keep_item(rw, c, h, c->seq + idx, rec->type, raw,
			 (uint32_t)raw_len);
}

/*
 * Later slices: the frame at sequence @c->seq was decoded and checked by
 * slice 0's read and has not changed since (nothing writes the window
 * before the switch), so its records are found through the index alone.
 */
static int scan_frame(struct kvf__rewrite *rw, const struct collect *c,
		      const uint8_t *val, size_t len, uint32_t *count)
{
	uint32_t n = kvf__frame_count(val, len);
	uint64_t first = c->seq - rw->from - 1;
	size_t off = KVF__FRAME_HDR;
	int rc = 0;

	if (!n || first + n > rw->pos.nrecs)
		return MDB_CORRUPTED;
	for (uint32_t i = 0; i < n && !rc; i++) {
		const struct rw_rec *r = &rw->recs[first + i];

		if (r->len > len - off)
			return MDB_CORRUPTED;
		if (kvf__jrec_type_is_object(r->type) && r->hash >= c->lo &&
		    r->hash <= c->hi)
			rc = keep_item(rw, c, r->hash, c->seq + i, r->type,
				       val + off, r->len);
		off += r->len;
	}
	if (!rc && off != len)
		rc = MDB_CORRUPTED;
	*count = n;
	return rc;
}

/* Read up to a chunk of the window's records (those of the slice). */
static int collect_step(MDB_txn *txn, const struct kvf__store_dbs *dbs,
			struct kvf__rewrite *rw)
{
	struct rw_pos *p = &rw->pos;
	struct collect c = { .rw = rw };
	uint64_t read = 0, end = p->slice ? p->to : rw->target;
	uint8_t k[8];
	MDB_val key = { 8, k }, val;
	MDB_cursor *cur;
	int rc;

	slice_range(p->slice, rw->slices, &c.lo, &c.hi);
	c.shift = run_shift(c.lo, c.hi);
	rc = mdb_cursor_open(txn, dbs->log, &cur);
	if (rc)
		return rc;
	kvf__put_be64(k, p->next_seq);
	rc = mdb_cursor_get(cur, &key, &val, MDB_SET_KEY);
	while (!rc && read < rw->chunk && p->next_seq <= end) {
		uint32_t count;

		if (key.mv_size != 8 ||
		    kvf__get_be64(key.mv_data) != p->next_seq) {
			rc = MDB_CORRUPTED;
			break;
		}
		c.seq = p->next_seq;
		if (p->slice)
			rc = scan_frame(rw, &c, val.mv_data, val.mv_size,
					&count);
		else
			rc = kvf__frame_walk(val.mv_data, val.mv_size, &count,
					     collect_record, &c);
		if (rc == KVF_ERR_JOURNAL_CORRUPT)
			rc = MDB_CORRUPTED;
		if (rc)
			break;
		p->next_seq += count;
		read += count;
		if (p->next_seq <= end)
			rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT);
	}
	mdb_cursor_close(cur);
	if (rc == MDB_NOTFOUND)
		rc = MDB_CORRUPTED; /* the log ended inside the window */
	if (rc || p->next_seq <= end)
		return rc;
	if (!p->slice)
		p->to = p->next_seq - 1;
	p->phase = RW_EMIT;
	p->bucket = 0;
	p->sorted = 0;
	p->idx = 0;
	p->next_hash = c.lo;
	return 0;
}

/* --- Writing the new image. --- */

/* One object of a hash group: from the image, or put by the window. */
struct grp_ent {
	uint32_t tie;
	bool live, dirty;
	MDB_val raw; /* the image's value, while not dirty */
	struct kvf__jrec rec;
};

struct group {
	struct grp_ent *e;
	size_t n, cap;
};

static struct grp_ent *grp_add(struct group *g)
{
	struct grp_ent *e = kvf__grow(g->e, &g->cap, g->n + 1, sizeof(*e), 4);

	if (!e)
		return NULL;
	g->e = e;
	memset(&g->e[g->n], 0, sizeof(g->e[0]));
	return &g->e[g->n++];
}

static int cmp_item(const void *a, const void *b)
{
	const struct rw_item *x = a, *y = b;

	if (x->hash != y->hash)
		return x->hash < y->hash ? -1 : 1;
	return (x->seq > y->seq) - (x->seq < y->seq);
}

/* Insertion sort by hash: stable, so equal hashes keep log order. */
static void insertion_sort(struct rw_item *v, size_t n)
{
	for (size_t i = 1; i < n; i++) {
		struct rw_item x = v[i];
		size_t k = i;

		while (k && v[k - 1].hash > x.hash) {
			v[k] = v[k - 1];
			k--;
		}
		v[k] = x;
	}
}

/*
 * Sort a bucket's @n items (in log order) by hash, stably: a counting
 * pass into 256 runs by the hash's bits below the bucket's, a scatter in
 * order, then an insertion sort that only moves items within their run
 * (a few each: the hashes are uniform). qsort() took a third of a
 * rewrite's CPU.
 */
static void sort_bucket(struct kvf__rewrite *rw, struct rw_item *v, size_t n)
{
	size_t start[RW_BUCKETS + 1] = { 0 };
	uint64_t min = UINT64_MAX, max = 0;
	struct rw_item *tmp;
	unsigned shift;

	if (n < 32) {
		insertion_sort(v, n);
		return;
	}
	tmp = kvf__huge_grow(rw->tmp, &rw->tmp_cap, n, sizeof(*tmp), 4096);
	if (!tmp) {
		qsort(v, n, sizeof(*v), cmp_item);
		return;
	}
	rw->tmp = tmp;
	for (size_t i = 0; i < n; i++) {
		min = v[i].hash < min ? v[i].hash : min;
		max = v[i].hash > max ? v[i].hash : max;
	}
	shift = run_shift(min, max);
	for (size_t i = 0; i < n; i++)
		start[((v[i].hash - min) >> shift) + 1]++;
	for (size_t r = 1; r <= RW_BUCKETS; r++)
		start[r] += start[r - 1];
	for (size_t i = 0; i < n; i++)
		tmp[start[(v[i].hash - min) >> shift]++] = v[i];
	memcpy(v, tmp, n * sizeof(*v));
	insertion_sort(v, n);
}

/*
 * The next record of the window to merge (by hash, then log order), or
 * NULL when the slice has none left; sorts a bucket on reaching it.
 */
static const struct rw_item *peek_item(struct kvf__rewrite *rw)
{
	struct rw_pos *p = &rw->pos;

	while (p->bucket < RW_BUCKETS && p->idx == p->n[p->bucket]) {
		p->bucket++;
		p->idx = 0;
	}
	if (p->bucket == RW_BUCKETS)
		return NULL;
	if (p->sorted <= p->bucket) {
		sort_bucket(rw, rw->b[p->bucket].v, p->n[p->bucket]);
		p->sorted = p->bucket + 1;
	}
	return &rw->b[p->bucket].v[p->idx];
}

static struct grp_ent *grp_find(struct group *g, const struct kvf__jrec *rec)
{
	for (size_t i = 0; i < g->n; i++) {
		struct grp_ent *e = &g->e[i];

		if (e->live && e->rec.obj.key_len == rec->obj.key_len &&
		    !memcmp(e->rec.obj.key, rec->obj.key, rec->obj.key_len))
			return e;
	}
	return NULL;
}

/* Apply one window record to its hash group (kvf__image_apply()'s rules). */
static int grp_apply(struct group *g, const struct kvf__jrec *rec)
{
	struct grp_ent *e = grp_find(g, rec);
	uint32_t tie = 0;

	switch (rec->type) {
	case KVF__JREC_OBJECT_PUT:
		if (!e) {
			for (size_t i = 0; i < g->n; i++)
				if (g->e[i].live)
					tie = g->e[i].tie + 1;
			e = grp_add(g);
			if (!e)
				return ENOMEM;
			e->tie = tie;
			e->live = true;
		}
		e->rec = *rec;
		e->dirty = true;
		break;
	case KVF__JREC_OBJECT_REPLICAS:
		if (!e)
			break;
		e->rec.obj.nr_replicas = rec->obj.nr_replicas;
		memcpy(e->rec.obj.replicas, rec->obj.replicas,
		       sizeof(e->rec.obj.replicas));
		e->dirty = true;
		break;
	default: /* OBJECT_REMOVE */
		if (e)
			e->live = false;
		break;
	}
	return 0;
}

static int append_entry(MDB_cursor *dst, uint64_t hash,
			const struct grp_ent *e)
{
	uint8_t k[KVF__IMAGE_KEY_LEN], small[512], *buf = NULL;
	MDB_val key = { sizeof(k), k }, val = e->raw;
	int rc;

	kvf__image_obj_key(k, hash, e->tie);
	if (e->dirty) {
		size_t max = kvf__jrec_encoded_max(&e->rec);

		buf = max <= sizeof(small) ? small : malloc(max);
		if (!buf)
			return ENOMEM;
		val.mv_size = kvf__jrec_encode(&e->rec, buf);
		val.mv_data = buf;
	}
	rc = mdb_cursor_put(dst, &key, &val, MDB_APPEND);
	if (buf && buf != small)
		free(buf);
	return rc;
}

static uint64_t entry_hash(const MDB_val *key)
{
	return kvf__get_be64(key->mv_data);
}

/*
 * The window's only record of hash @h, if it is an OBJECT_PUT: with no
 * image entry of @h, the new image's entry is that record as encoded.
 */
static const struct rw_item *lone_put(struct kvf__rewrite *rw, uint64_t h)
{
	const struct rw_item *it = peek_item(rw);
	const struct rw_pos *p = &rw->pos;

	if (!it || it->hash != h || it->type != KVF__JREC_OBJECT_PUT)
		return NULL;
	if (p->idx + 1 < p->n[p->bucket] && it[1].hash == h)
		return NULL;
	return it;
}

/*
 * Merge the group of hash @h: the image's entries (from @cur, which is
 * left on the first entry past them), then the window's records of @h in
 * log order; append what lives at @dst. Returns an LMDB/errno code; *@mrc
 * receives the cursor's state (0 or MDB_NOTFOUND).
 */
static int merge_group(MDB_cursor *dst, MDB_cursor *cur,
		       MDB_val *key, MDB_val *val, int *mrc,
		       struct kvf__rewrite *rw, struct group *g, uint64_t h)
{
	struct rw_pos *p = &rw->pos;
	const struct rw_item *lone;
	int rc = 0;

	if ((*mrc || entry_hash(key) != h) && (lone = lone_put(rw, h))) {
		/* a new object: its record is already the image's value */
		uint8_t k[KVF__IMAGE_KEY_LEN];
		MDB_val nk = { sizeof(k), k };
		MDB_val nv = { lone->len, rw->arena + lone->off };

		kvf__image_obj_key(k, h, 0);
		p->idx++;
		return mdb_cursor_put(dst, &nk, &nv, MDB_APPEND);
	}
	g->n = 0;
	while (*mrc == 0 && entry_hash(key) == h) {
		struct grp_ent *e = grp_add(g);
		size_t used;

		if (!e)
			return ENOMEM;
		e->tie = kvf__image_obj_tie(key->mv_data);
		e->live = true;
		e->raw = *val;
		if (kvf__jrec_decode(val->mv_data, val->mv_size, &e->rec,
				     &used) ||
		    used != val->mv_size || e->rec.type != KVF__JREC_OBJECT_PUT)
			return MDB_CORRUPTED;
		*mrc = mdb_cursor_get(cur, key, val, MDB_NEXT);
		if (*mrc == 0 && key->mv_size != KVF__IMAGE_KEY_LEN)
			return MDB_CORRUPTED;
	}
	if (*mrc && *mrc != MDB_NOTFOUND)
		return *mrc;
	for (const struct rw_item *it; (it = peek_item(rw)) && it->hash == h;
	     p->idx++) {
		struct kvf__jrec rec;
		size_t used;

		if (kvf__jrec_decode(rw->arena + it->off, it->len, &rec, &used))
			return MDB_CORRUPTED;
		rc = grp_apply(g, &rec);
		if (rc)
			return rc;
	}
	for (size_t i = 0; i < g->n && !rc; i++)
		if (g->e[i].live)
			rc = append_entry(dst, h, &g->e[i]);
	return rc;
}

/* Merge up to a chunk of entries of the slice into the spare database. */
static int emit_step(MDB_txn *txn, MDB_dbi image, MDB_dbi spare,
		     struct kvf__rewrite *rw)
{
	struct rw_pos *p = &rw->pos;
	struct group g = { 0 };
	uint8_t k[KVF__IMAGE_KEY_LEN];
	MDB_val key = { sizeof(k), k }, val;
	MDB_cursor *cur, *dst;
	uint64_t lo, hi, written = 0;
	int mrc, rc;

	slice_range(p->slice, rw->slices, &lo, &hi);
	rc = mdb_cursor_open(txn, spare, &dst);
	if (rc)
		return rc;
	rc = mdb_cursor_open(txn, image, &cur);
	if (rc) {
		mdb_cursor_close(dst);
		return rc;
	}
	kvf__image_obj_key(k, p->next_hash, 0);
	mrc = mdb_cursor_get(cur, &key, &val, MDB_SET_RANGE);
	if (mrc == 0 && key.mv_size != KVF__IMAGE_KEY_LEN)
		mrc = MDB_CORRUPTED;
	for (;;) {
		const struct rw_item *it;
		bool in_image, in_window;
		uint64_t h;

		if (mrc && mrc != MDB_NOTFOUND) {
			rc = mrc;
			break;
		}
		in_image = mrc == 0 && entry_hash(&key) <= hi;
		it = peek_item(rw);
		in_window = it != NULL;
		if (!in_image && !in_window)
			break;
		h = in_image ? entry_hash(&key) : it->hash;
		if (in_window && it->hash < h)
			h = it->hash;
		if (written >= rw->chunk) {
			p->next_hash = h;
			goto out; /* the slice goes on in the next step */
		}
		if (in_window && it->hash == h) {
			rc = merge_group(dst, cur, &key, &val, &mrc, rw, &g,
					 h);
		} else {
			rc = mdb_cursor_put(dst, &key, &val, MDB_APPEND);
			if (!rc)
				mrc = mdb_cursor_get(cur, &key, &val, MDB_NEXT);
			if (mrc == 0 && key.mv_size != KVF__IMAGE_KEY_LEN)
				mrc = MDB_CORRUPTED;
		}
		if (rc)
			break;
		written++;
	}
	if (!rc && ++p->slice < rw->slices) {
		p->phase = RW_COLLECT;
		p->next_seq = rw->from + 1;
		memset(p->n, 0, sizeof(p->n));
		p->used = 0;
	} else if (!rc) {
		p->phase = RW_SWITCH;
	}
out:
	mdb_cursor_close(cur);
	mdb_cursor_close(dst);
	free(g.e);
	return rc;
}

/* --- The switch. --- */

/* Apply the window's segment and client records, in log order. */
static int apply_side(MDB_txn *txn, const struct kvf__store_dbs *dbs,
		      MDB_dbi image, const struct kvf__rewrite *rw)
{
	size_t off = 0;
	int rc = 0;

	while (!rc && off < rw->pos.side_len) {
		struct kvf__jrec rec;
		size_t used;

		if (kvf__jrec_decode(rw->side + off, rw->pos.side_len - off,
				     &rec, &used))
			return MDB_CORRUPTED;
		rc = kvf__image_apply(txn, dbs, image, &rec);
		off += used;
	}
	return rc;
}

/* Delete the window's frames from the head of the log. */
static int drop_window(MDB_txn *txn, MDB_dbi log, uint64_t to,
		       struct kvf__store_state *st)
{
	MDB_cursor *cur;
	MDB_val val;
	int rc;

	rc = mdb_cursor_open(txn, log, &cur);
	if (rc)
		return rc;
	while (st->ckpt_seq < to &&
	       !(rc = kvf__image_log_head(cur, st, &val))) {
		uint32_t count = kvf__frame_count(val.mv_data, val.mv_size);

		if (!count || st->ckpt_seq + count > to) {
			rc = MDB_CORRUPTED;
			break;
		}
		rc = kvf__image_log_pop(cur, count, st);
		if (rc)
			break;
	}
	mdb_cursor_close(cur);
	return rc == MDB_NOTFOUND ? MDB_CORRUPTED : rc;
}

static int switch_image(MDB_txn *txn, const struct kvf__store_dbs *dbs,
			MDB_dbi image, MDB_dbi spare, struct kvf__rewrite *rw,
			struct kvf__store_state *st)
{
	uint32_t version = KVF__JOURNAL_FORMAT_VERSION;
	uint32_t which = spare == dbs->objs_alt;
	struct kvf__store_state next = *st;
	int rc;

	rc = apply_side(txn, dbs, image, rw);
	if (!rc)
		rc = drop_window(txn, dbs->log, rw->pos.to, &next);
	if (!rc)
		rc = kvf__store_meta_put(txn, dbs->meta, KVF__META_IMAGE,
					 &which, sizeof(which));
	if (!rc)
		rc = kvf__store_meta_put(txn, dbs->meta, KVF__META_VERSION,
					 &version, sizeof(version));
	if (!rc)
		rc = mdb_drop(txn, image, 0);
	if (!rc) /* counts the new image: meta "image" names it now */
		rc = kvf__image_checkpointed(txn, dbs, rw->target, &next);
	if (!rc) {
		next.version = version;
		*st = next;
	}
	return rc;
}

int kvf__rewrite_step(MDB_txn *txn, const struct kvf__store_dbs *dbs,
		      struct kvf__rewrite *rw, struct kvf__store_state *st,
		      bool *done)
{
	struct rw_pos *p = &rw->pos;
	MDB_dbi image, spare;
	int rc;

	*done = false;
	if (st->ckpt_seq != rw->from)
		return MDB_CORRUPTED; /* someone else folded meanwhile */
	rc = kvf__store_image(txn, dbs, &image, &spare);
	if (rc)
		return rc;
	switch (p->phase) {
	case RW_CLEAR:
		rc = mdb_drop(txn, spare, 0);
		p->phase = RW_COLLECT;
		p->next_seq = rw->from + 1;
		return rc;
	case RW_COLLECT:
		return collect_step(txn, dbs, rw);
	case RW_EMIT:
		return emit_step(txn, image, spare, rw);
	default:
		rc = switch_image(txn, dbs, image, spare, rw, st);
		*done = !rc;
		return rc;
	}
}
