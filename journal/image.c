/* SPDX-License-Identifier: MIT */
/*
 * journal/image.c - the image: applying records to the image databases,
 * folding checkpoint chunks of the log into them, and reading image and
 * log back for the replay.
 *
 * The image is the state as of the checkpoint sequence: segments by id,
 * objects by key, and a per-client count of mounted segments. Records are
 * applied with the idempotent rules documented in journal.h (replace on
 * put/mount, ignore removal of what is absent), so the image and a replay
 * of the raw log always agree.
 *
 * Object keys may be up to 64 KiB but LMDB keys are limited to 511 bytes,
 * so an object is stored under (XXH3-64 of its key, big-endian) followed by
 * a big-endian u32 tie-breaker; the value is the whole encoded OBJECT_PUT,
 * key included. A lookup positions a cursor on the hash and compares the
 * full keys of the (almost always single) entries sharing it, so hash
 * collisions cost a comparison and can never merge two objects.
 *
 * Folds and applies run inside the caller's write transaction (the
 * pipeline's transaction slot); the scan inside a read transaction.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/grow.h"
#include "journal/error.h"
#include "journal/store.h"
#include "metadata/hash.h"

/*
 * Position @cur on the object named by @rec's key. Return 0 (found,
 * @cur positioned, @found decoded from the stored value), MDB_NOTFOUND
 * (absent; @next_tie is the tie-breaker a new entry would take), or an
 * error.
 */
static int obj_find(MDB_cursor *cur, const struct kvf__jrec *rec,
		    uint8_t *k, struct kvf__jrec *found, uint32_t *next_tie)
{
	uint64_t h = kvf__image_key_hash(rec->obj.key, rec->obj.key_len);
	MDB_val key = { KVF__IMAGE_KEY_LEN, k }, val;
	int rc;

	kvf__image_obj_key(k, h, 0);
	*next_tie = 0;
	rc = mdb_cursor_get(cur, &key, &val, MDB_SET_RANGE);
	while (rc == 0) {
		size_t used;

		if (key.mv_size != KVF__IMAGE_KEY_LEN ||
		    kvf__get_be64(key.mv_data) != h)
			return MDB_NOTFOUND;
		if (kvf__jrec_decode(val.mv_data, val.mv_size, found, &used) ||
		    used != val.mv_size || found->type != KVF__JREC_OBJECT_PUT)
			return MDB_CORRUPTED;
		*next_tie = kvf__image_obj_tie(key.mv_data) + 1;
		if (found->obj.key_len == rec->obj.key_len &&
		    !memcmp(found->obj.key, rec->obj.key, rec->obj.key_len)) {
			memcpy(k, key.mv_data, KVF__IMAGE_KEY_LEN);
			return 0;
		}
		rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT);
	}
	return rc;
}

/* Store @rec (an OBJECT_PUT) under @k. */
static int obj_store(MDB_txn *txn, MDB_dbi dbi, const uint8_t *k,
		     const struct kvf__jrec *rec)
{
	MDB_val key = { KVF__IMAGE_KEY_LEN, (void *)k }, val;
	size_t max = kvf__jrec_encoded_max(rec);
	uint8_t small[512], *buf = max <= sizeof(small) ? small : malloc(max);
	int rc;

	if (!buf)
		return ENOMEM;
	val.mv_size = kvf__jrec_encode(rec, buf);
	val.mv_data = buf;
	rc = mdb_put(txn, dbi, &key, &val, 0);
	if (buf != small)
		free(buf);
	return rc;
}

static int apply_object(MDB_txn *txn, MDB_dbi objs,
			const struct kvf__jrec *rec)
{
	uint8_t k[KVF__IMAGE_KEY_LEN];
	struct kvf__jrec found;
	MDB_cursor *cur;
	uint32_t tie;
	int rc;

	rc = mdb_cursor_open(txn, objs, &cur);
	if (rc)
		return rc;
	rc = obj_find(cur, rec, k, &found, &tie);
	if (rc && rc != MDB_NOTFOUND)
		goto out;
	switch (rec->type) {
	case KVF__JREC_OBJECT_PUT:
		if (rc == MDB_NOTFOUND) {
			uint64_t h = kvf__image_key_hash(rec->obj.key,
							 rec->obj.key_len);

			kvf__image_obj_key(k, h, tie);
		}
		rc = obj_store(txn, objs, k, rec);
		break;
	case KVF__JREC_OBJECT_REPLICAS:
		if (rc == MDB_NOTFOUND)
			break;
		found.obj.nr_replicas = rec->obj.nr_replicas;
		memcpy(found.obj.replicas, rec->obj.replicas,
		       sizeof(found.obj.replicas));
		rc = obj_store(txn, objs, k, &found);
		break;
	default: /* OBJECT_REMOVE */
		if (rc == 0)
			rc = mdb_cursor_del(cur, 0);
		break;
	}
out:
	mdb_cursor_close(cur);
	return rc == MDB_NOTFOUND ? 0 : rc;
}

/* Add @delta (+1/-1) to a client's segment count; drop it at zero. */
static int client_adjust(MDB_txn *txn, MDB_dbi dbi, uint64_t client,
			 int delta)
{
	uint8_t k[8];
	MDB_val key = { 8, k }, val;
	uint64_t count = 0;
	int rc;

	kvf__put_be64(k, client);
	rc = mdb_get(txn, dbi, &key, &val);
	if (rc == 0 && val.mv_size == sizeof(count))
		memcpy(&count, val.mv_data, sizeof(count));
	else if (rc == 0)
		return MDB_CORRUPTED;
	else if (rc != MDB_NOTFOUND)
		return rc;
	if (delta < 0 && count <= 1) /* CLIENT_REMOVE may have dropped it */
		return rc == 0 ? mdb_del(txn, dbi, &key, NULL) : 0;
	count += (uint64_t)(int64_t)delta;
	val.mv_size = sizeof(count);
	val.mv_data = &count;
	return mdb_put(txn, dbi, &key, &val, 0);
}

static int segment_client(const MDB_val *val, uint64_t *client)
{
	struct kvf__jrec old;
	size_t used;

	if (kvf__jrec_decode(val->mv_data, val->mv_size, &old, &used) ||
	    used != val->mv_size || old.type != KVF__JREC_SEGMENT_MOUNT)
		return MDB_CORRUPTED;
	*client = old.mount.client_id;
	return 0;
}

static int apply_segment(MDB_txn *txn, const struct kvf__store_dbs *dbs,
			 const struct kvf__jrec *rec)
{
	uint64_t id = rec->type == KVF__JREC_SEGMENT_MOUNT ?
			      rec->mount.segment_id :
			      rec->unmount.segment_id;
	uint8_t k[8], buf[512];
	MDB_val key = { 8, k }, val;
	uint64_t client;
	int rc;

	kvf__put_be64(k, id);
	rc = mdb_get(txn, dbs->segs, &key, &val);
	if (rc == 0) { /* unmount, or a mount replacing the segment */
		rc = segment_client(&val, &client);
		if (!rc)
			rc = client_adjust(txn, dbs->clients, client, -1);
		if (!rc)
			rc = mdb_del(txn, dbs->segs, &key, NULL);
	} else if (rc == MDB_NOTFOUND) {
		rc = 0;
	}
	if (rc || rec->type != KVF__JREC_SEGMENT_MOUNT)
		return rc;
	val.mv_size = kvf__jrec_encode(rec, buf);
	val.mv_data = buf;
	rc = mdb_put(txn, dbs->segs, &key, &val, 0);
	if (!rc)
		rc = client_adjust(txn, dbs->clients, rec->mount.client_id, 1);
	return rc;
}

int kvf__image_apply(MDB_txn *txn, const struct kvf__store_dbs *dbs,
		     MDB_dbi objs, const struct kvf__jrec *rec)
{
	uint8_t k[8];
	MDB_val key = { 8, k };
	int rc;

	switch (rec->type) {
	case KVF__JREC_SEGMENT_MOUNT:
	case KVF__JREC_SEGMENT_UNMOUNT:
		return apply_segment(txn, dbs, rec);
	case KVF__JREC_CLIENT_REMOVE:
		kvf__put_be64(k, rec->client.client_id);
		rc = mdb_del(txn, dbs->clients, &key, NULL);
		return rc == MDB_NOTFOUND ? 0 : rc;
	default:
		return apply_object(txn, objs, rec);
	}
}

/* --- Checkpoint chunks. --- */

/*
 * A fold chunk is applied sorted: object records by their image key (the
 * key's hash, as image.c stores them; a stable sort keeps each key's
 * records in log order), after the segment and client records in log
 * order (they live in other databases). Applied in log order, each object
 * record is a random B-tree descent and page copy; sorted, consecutive
 * records share leaf pages.
 */
struct fold_item {
	struct kvf__jrec rec;  /* strings point into the arena once applied */
	uint64_t order;        /* 0 for segment/client records, else hash | 1 */
	uint64_t pos;          /* log order, for a stable sort */
	size_t key_off, name_off, endpoint_off;
};

struct fold {
	MDB_txn *txn;
	const struct kvf__store_dbs *dbs;
	MDB_dbi objs;
	struct fold_item *items;
	size_t n, cap;
	char *arena;
	size_t used, arena_cap;
};

/* Copy @len bytes into the arena; returns their offset, or SIZE_MAX. */
static size_t arena_copy(struct fold *f, const char *p, size_t len)
{
	size_t off = f->used;

	if (f->used + len > f->arena_cap) {
		char *a = kvf__grow(f->arena, &f->arena_cap, f->used + len, 1,
				    1 << 20);

		if (!a)
			return SIZE_MAX;
		f->arena = a;
	}
	if (len)
		memcpy(f->arena + off, p, len);
	f->used += len;
	return off;
}

/* Collect one record of the chunk (the frame is deleted before applying). */
static int fold_record(void *arg, const struct kvf__jrec *rec, uint32_t idx)
{
	struct fold *f = arg;
	struct fold_item *it = kvf__grow(f->items, &f->cap, f->n + 1,
					 sizeof(*it), 4096);

	(void)idx;
	if (!it)
		return ENOMEM;
	f->items = it;
	it = &f->items[f->n];
	it->rec = *rec;
	it->pos = f->n;
	it->order = 0;
	it->key_off = it->name_off = it->endpoint_off = 0;
	if (kvf__jrec_is_object(rec)) {
		it->order =
			kvf__image_key_hash(rec->obj.key, rec->obj.key_len) | 1;
		it->key_off = arena_copy(f, rec->obj.key, rec->obj.key_len);
		if (it->key_off == SIZE_MAX)
			return ENOMEM;
	} else if (rec->type == KVF__JREC_SEGMENT_MOUNT) {
		it->name_off = arena_copy(f, rec->mount.name,
					  rec->mount.name_len);
		it->endpoint_off = arena_copy(f, rec->mount.endpoint,
					      rec->mount.endpoint_len);
		if (it->name_off == SIZE_MAX || it->endpoint_off == SIZE_MAX)
			return ENOMEM;
	}
	f->n++;
	return 0;
}

static int cmp_fold_item(const void *a, const void *b)
{
	const struct fold_item *x = a, *y = b;

	if (x->order != y->order)
		return x->order < y->order ? -1 : 1;
	return (x->pos > y->pos) - (x->pos < y->pos);
}

/* Apply the collected chunk to the image, sorted (see struct fold_item). */
static int fold_apply(struct fold *f)
{
	int rc = 0;

	if (f->n)
		qsort(f->items, f->n, sizeof(*f->items), cmp_fold_item);
	for (size_t i = 0; i < f->n && !rc; i++) {
		struct kvf__jrec *r = &f->items[i].rec;

		if (kvf__jrec_is_object(r))
			r->obj.key = f->arena + f->items[i].key_off;
		else if (r->type == KVF__JREC_SEGMENT_MOUNT) {
			r->mount.name = f->arena + f->items[i].name_off;
			r->mount.endpoint = f->arena + f->items[i].endpoint_off;
		}
		rc = kvf__image_apply(f->txn, f->dbs, f->objs, r);
	}
	return rc;
}

int kvf__image_log_head(MDB_cursor *cur, const struct kvf__store_state *st,
			MDB_val *val)
{
	MDB_val key;
	int rc = mdb_cursor_get(cur, &key, val, MDB_FIRST);

	if (!rc && (key.mv_size != 8 ||
		    kvf__get_be64(key.mv_data) != st->ckpt_seq + 1))
		rc = MDB_CORRUPTED;
	return rc;
}

int kvf__image_log_pop(MDB_cursor *cur, uint32_t count,
		       struct kvf__store_state *st)
{
	int rc = mdb_cursor_del(cur, 0);

	if (!rc) {
		st->ckpt_seq += count;
		st->log_frames--;
	}
	return rc;
}

int kvf__image_checkpointed(MDB_txn *txn, const struct kvf__store_dbs *dbs,
			    uint64_t target, struct kvf__store_state *st)
{
	int rc;

	if (st->ckpt_seq >= target)
		st->ckpt_count++;
	rc = kvf__store_meta_put(txn, dbs->meta, KVF__META_CKPT_SEQ,
				 &st->ckpt_seq, sizeof(st->ckpt_seq));
	if (!rc)
		rc = kvf__store_meta_put(txn, dbs->meta, KVF__META_CKPT_COUNT,
					 &st->ckpt_count,
					 sizeof(st->ckpt_count));
	if (!rc)
		rc = kvf__store_count_image(txn, dbs, st);
	return rc;
}

int kvf__image_fold(MDB_txn *txn, const struct kvf__store_dbs *dbs,
		    uint64_t target, uint64_t chunk,
		    struct kvf__store_state *st)
{
	struct fold f = { .txn = txn, .dbs = dbs };
	MDB_cursor *cur;
	MDB_val val;
	uint64_t done = 0;
	uint32_t count;
	int rc;

	rc = kvf__store_image(txn, dbs, &f.objs, NULL);
	if (!rc)
		rc = mdb_cursor_open(txn, dbs->log, &cur);
	if (rc)
		goto out;
	while (done < chunk && st->ckpt_seq < st->last_seq &&
	       !(rc = kvf__image_log_head(cur, st, &val))) {
		rc = kvf__frame_decode(val.mv_data, val.mv_size, &count,
				       fold_record, &f);
		if (rc == KVF_ERR_JOURNAL_CORRUPT)
			rc = MDB_CORRUPTED;
		if (!rc)
			rc = kvf__image_log_pop(cur, count, st);
		if (rc)
			break;
		done += count;
	}
	mdb_cursor_close(cur);
	if (rc == MDB_NOTFOUND)
		rc = MDB_CORRUPTED; /* the log ended before last_seq */
	if (!rc)
		rc = fold_apply(&f);
	if (!rc)
		rc = kvf__image_checkpointed(txn, dbs, target, st);
out:
	free(f.items);
	free(f.arena);
	return rc;
}

/* --- Replay reading. --- */

/* Image pass: every entry of @dbi must decode to one record of @type. */
static int scan_image(MDB_txn *txn, MDB_dbi dbi, enum kvf__jrec_type type,
		      uint64_t seq, const struct kvf__journal_replay_ops *ops,
		      void *arg)
{
	MDB_cursor *cur;
	MDB_val key, val;
	struct kvf__jrec rec;
	int mrc, rc = KVF_OK;

	mrc = mdb_cursor_open(txn, dbi, &cur);
	if (mrc)
		return kvf__journal_status(mrc);
	while (!rc && !(mrc = mdb_cursor_get(cur, &key, &val, MDB_NEXT))) {
		size_t used;

		if (kvf__jrec_decode(val.mv_data, val.mv_size, &rec, &used) ||
		    used != val.mv_size || rec.type != type)
			rc = KVF_ERR_JOURNAL_CORRUPT;
		else
			rc = ops->record(arg, &rec, seq);
	}
	mdb_cursor_close(cur);
	if (!rc && mrc != MDB_NOTFOUND)
		rc = kvf__journal_status(mrc);
	return rc;
}

struct log_walk {
	const struct kvf__journal_replay_ops *ops;
	void *arg;
	uint64_t seq; /* of the frame's first record */
};

static int log_record(void *arg, const struct kvf__jrec *rec, uint32_t idx)
{
	struct log_walk *w = arg;

	return w->ops->record(w->arg, rec, w->seq + idx);
}

static int scan_log(MDB_txn *txn, MDB_dbi dbi, uint64_t ckpt_seq,
		    const struct kvf__journal_replay_ops *ops, void *arg,
		    uint64_t *last_seq)
{
	struct log_walk w = { ops, arg, 0 };
	uint64_t expect = ckpt_seq + 1;
	MDB_cursor *cur;
	MDB_val key, val;
	uint32_t count;
	int mrc, rc = KVF_OK;

	mrc = mdb_cursor_open(txn, dbi, &cur);
	if (mrc)
		return kvf__journal_status(mrc);
	while (!rc && !(mrc = mdb_cursor_get(cur, &key, &val, MDB_NEXT))) {
		if (key.mv_size != 8 || kvf__get_be64(key.mv_data) != expect) {
			rc = KVF_ERR_JOURNAL_CORRUPT; /* sequence gap */
			break;
		}
		w.seq = expect;
		rc = kvf__frame_decode(val.mv_data, val.mv_size, &count,
				       log_record, &w);
		if (!rc)
			expect += count;
	}
	mdb_cursor_close(cur);
	*last_seq = expect - 1;
	if (!rc && mrc != MDB_NOTFOUND)
		rc = kvf__journal_status(mrc);
	return rc;
}

int kvf__image_scan(MDB_txn *txn, const struct kvf__store_dbs *dbs,
		    uint64_t ckpt_seq,
		    const struct kvf__journal_replay_ops *ops, void *arg,
		    uint64_t *last_seq)
{
	MDB_dbi objs;
	int rc = kvf__store_image(txn, dbs, &objs, NULL);

	if (rc)
		return kvf__journal_status(rc);
	rc = scan_image(txn, dbs->segs, KVF__JREC_SEGMENT_MOUNT, ckpt_seq, ops,
			arg);
	if (!rc)
		rc = scan_image(txn, objs, KVF__JREC_OBJECT_PUT, ckpt_seq, ops,
				arg);
	if (!rc && ops->image_done)
		rc = ops->image_done(arg);
	if (!rc)
		rc = scan_log(txn, dbs->log, ckpt_seq, ops, arg, last_seq);
	return rc;
}
