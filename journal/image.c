/* SPDX-License-Identifier: MIT */
/*
 * journal/image.c - folding log records into the image databases.
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
 * Runs only on the writer thread inside its write transaction.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "journal/jint.h"
#include "metadata/hash.h"

#define OBJ_KEY_LEN 12

static void obj_key(uint8_t *k, uint64_t hash, uint32_t tie)
{
	kvf__put_be64(k, hash);
	for (int i = 0; i < 4; i++)
		k[8 + i] = (uint8_t)(tie >> (24 - 8 * i));
}

static uint32_t obj_tie(const uint8_t *k)
{
	return (uint32_t)k[8] << 24 | (uint32_t)k[9] << 16 |
	       (uint32_t)k[10] << 8 | k[11];
}

/*
 * Position @cur on the object named by @rec's key. Return 0 (found,
 * @cur positioned, @found decoded from the stored value), MDB_NOTFOUND
 * (absent; @next_tie is the tie-breaker a new entry would take), or an
 * error.
 */
static int obj_find(MDB_cursor *cur, const struct kvf__jrec *rec,
		    uint8_t *k, struct kvf__jrec *found, uint32_t *next_tie)
{
	uint64_t h = kvf__key_hash(rec->obj.key, rec->obj.key_len);
	MDB_val key = { OBJ_KEY_LEN, k }, val;
	int rc;

	obj_key(k, h, 0);
	*next_tie = 0;
	rc = mdb_cursor_get(cur, &key, &val, MDB_SET_RANGE);
	while (rc == 0) {
		size_t used;

		if (key.mv_size != OBJ_KEY_LEN ||
		    kvf__get_be64(key.mv_data) != h)
			return MDB_NOTFOUND;
		if (kvf__jrec_decode(val.mv_data, val.mv_size, found, &used) ||
		    used != val.mv_size || found->type != KVF__JREC_OBJECT_PUT)
			return MDB_CORRUPTED;
		*next_tie = obj_tie(key.mv_data) + 1;
		if (found->obj.key_len == rec->obj.key_len &&
		    !memcmp(found->obj.key, rec->obj.key, rec->obj.key_len)) {
			memcpy(k, key.mv_data, OBJ_KEY_LEN);
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
	MDB_val key = { OBJ_KEY_LEN, (void *)k }, val;
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

static int apply_object(MDB_txn *txn, const struct kvf__jdbs *dbs,
			const struct kvf__jrec *rec)
{
	uint8_t k[OBJ_KEY_LEN];
	struct kvf__jrec found;
	MDB_cursor *cur;
	uint32_t tie;
	int rc;

	rc = mdb_cursor_open(txn, dbs->objs, &cur);
	if (rc)
		return rc;
	rc = obj_find(cur, rec, k, &found, &tie);
	if (rc && rc != MDB_NOTFOUND)
		goto out;
	switch (rec->type) {
	case KVF__JREC_OBJECT_PUT:
		if (rc == MDB_NOTFOUND)
			obj_key(k, kvf__key_hash(rec->obj.key, rec->obj.key_len),
				tie);
		rc = obj_store(txn, dbs->objs, k, rec);
		break;
	case KVF__JREC_OBJECT_REPLICAS:
		if (rc == MDB_NOTFOUND)
			break;
		found.obj.nr_replicas = rec->obj.nr_replicas;
		memcpy(found.obj.replicas, rec->obj.replicas,
		       sizeof(found.obj.replicas));
		rc = obj_store(txn, dbs->objs, k, &found);
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

static int apply_segment(MDB_txn *txn, const struct kvf__jdbs *dbs,
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

int kvf__image_apply(MDB_txn *txn, const struct kvf__jdbs *dbs,
		     const struct kvf__jrec *rec)
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
		return apply_object(txn, dbs, rec);
	}
}
