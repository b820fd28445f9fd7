/* SPDX-License-Identifier: MIT */
/*
 * engine/recovery.c - rebuilding the engine from its journal at open.
 *
 * The journal streams its image (segments, then objects) and then the log
 * tail, in order; each record is applied with the rules journal/journal.h
 * states (a mount or a put replaces what has the same id or key; changing
 * or removing something absent does nothing), so replay is idempotent.
 *
 * Allocators are rebuilt by reserving exactly the recorded ranges: a
 * replica outside its segment, in an unknown segment, or overlapping
 * another is a damaged journal and refuses the open. Puts that were
 * started but never ended were never journaled: their space is free.
 * The image's replicas are reserved together, sorted by address, once the
 * image has been read (reserve_image()); the log's as they come.
 *
 * Cost: one index insertion per recovered object (a put is inserted
 * first; only a clash, which the image never has, costs more). Puts are
 * inserted up to PUTS_AHEAD puts after they were read, their home
 * buckets prefetched meanwhile (stage_put()): keys come in key-hash order
 * (the image) or in the order they were put (the log), which the index's
 * home buckets scramble, so inserting each at once waited for a cold line
 * per object. Any other record first inserts every staged put, so it
 * sees the state the log's order gives.
 *
 * The image's replicas are sorted by (segment, offset) with a radix sort
 * (engine/replay_sort.c).
 *
 * Time: records carry the object's stamp on the engine clock (the soft
 * pin deadline of a pinned object, the put time of another), and replay
 * restores it, so a pin that expired before the close stays expired and
 * eviction ranks recovered objects by age as it did before. A stamp
 * later than the clock allows (the clock restarted: the default one is
 * CLOCK_MONOTONIC, which a reboot resets) is clamped to now (put time) or
 * now + the pin TTL (deadline). Leases are not journaled: recovered
 * objects have none, and every owner of a mounted segment gets a fresh
 * client TTL to heartbeat.
 *
 * Nothing read from disk is trusted: a record that cannot be applied (a
 * replica outside or overlapping, a replica set that is not a subset of
 * the object's, a free of space the object does not hold) stops the
 * replay with KVF_ERR_JOURNAL_CORRUPT and a log line (kvf_config.log)
 * naming the record; kvf__die() is kept for the engine's own invariants.
 *
 * Runs single-threaded inside kvf_engine_open(), before the background
 * thread starts, with seg_lock held for the helpers that expect it.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "base/die.h"
#include "engine/internal.h"
#include "engine/replay_sort.h"
#include "metadata/objstate.h"
#include "journal/journal.h"
#include "metadata/hash.h"
#include "metadata/hugemem.h"

/* Puts read but not yet inserted, oldest first (stage_put()). */
#define PUTS_AHEAD 8

struct staged {
	struct kvf__object *o;
	uint64_t hash;
	uint64_t seq;
};

struct replay {
	struct kvf_engine *e;
	uint64_t now;
	const char *why; /* what made the current record fail */
	uint64_t objects;
	struct kvf__reclaim rc;
	bool in_log; /* the image is done: reserve replicas as they come */
	/*
	 * The image's replicas, reserved at its end in address order
	 * (reserve_image()); a range's slot is its segment's index in the
	 * segment table, which no record changes between the image's puts
	 * and its end (its mounts come first: apply_mount()).
	 */
	struct kvf__replay_range *pend;
	size_t nr_pend, cap_pend;
	struct staged ahead[PUTS_AHEAD];
	unsigned nr_ahead, first_ahead;
	uint64_t seq;  /* the record being applied */
	bool reported; /* the refusal is logged already */
};

static struct kvf__object *find(struct kvf_engine *e, const char *key,
				size_t len, uint64_t hash)
{
	struct kvf_key k = { key, len };
	struct kvf__object *o;

	kvf__index_lookup_batch(e->index, 1, &hash, &k, &o);
	return o;
}

/* The current record cannot be applied because of @why. */
static int corrupt(struct replay *rp, const char *why)
{
	rp->why = why;
	return KVF_ERR_JOURNAL_CORRUPT;
}

/* Return @o's replicas to their allocators; all must be held by it. */
static int release_replicas(struct replay *rp, const struct kvf__object *o)
{
	const struct kvf__replica *r = kvf__object_replicas_const(o);
	int ret = KVF_OK;

	for (unsigned i = 0; i < o->nr_replicas; i++)
		if (kvf__segalloc_release(kvf__replica_seg(&r[i])->alloc,
					  kvf__replica_offset(&r[i]),
					  o->size) != KVF_OK)
			ret = corrupt(rp, "frees space it does not hold");
	return ret;
}

static int drop_object(struct replay *rp, struct kvf__object *o,
		       uint64_t hash)
{
	struct kvf_engine *e = rp->e;

	kvf__object_retire(e, o, hash, &rp->rc);
	kvf__obj_set(o, KVF__OBJ_DEAD);
	kvf__count_add(&e->nr_complete, -1);
	kvf__count_add(&e->nr_soft_pinned, -kvf__soft_pinned(o));
	return release_replicas(rp, o);
}

static int apply_mount(struct replay *rp, const struct kvf__jrec *r)
{
	struct kvf_engine *e = rp->e;
	char name[KVF_SEGMENT_NAME_MAX + 1], endpoint[KVF_ENDPOINT_MAX + 1];
	struct kvf_segment_desc d = { .id = r->mount.segment_id,
				      .name = name,
				      .base = r->mount.base,
				      .size = r->mount.size,
				      .endpoint = endpoint };

	if (r->mount.name_len > KVF_SEGMENT_NAME_MAX ||
	    r->mount.endpoint_len > KVF_ENDPOINT_MAX)
		return corrupt(rp, "segment name or endpoint too long");
	/* The image's deferred replicas name segments by table slot: no
	 * mount may move them (staged puts were inserted: apply_one()). */
	if (!rp->in_log && rp->nr_pend)
		return corrupt(rp, "segment mount after the image's objects");
	memcpy(name, r->mount.name, r->mount.name_len);
	name[r->mount.name_len] = 0;
	memcpy(endpoint, r->mount.endpoint, r->mount.endpoint_len);
	endpoint[r->mount.endpoint_len] = 0;
	/* A mount replaces a segment with the same id. */
	kvf__segment_unmount_locked(e, 0, d.id, false);
	if (kvf__segment_mount_locked(e, r->mount.client_id, &d, false))
		return corrupt(rp, "segment cannot be mounted (invalid or "
				   "overlapping)");
	return KVF_OK;
}

/*
 * Point @o's replicas at their segments (nothing is reserved), and fill
 * @slots (if not NULL) with their segments' table slots. Returns
 * KVF_ERR_JOURNAL_CORRUPT for an unknown segment or two replicas in one
 * (placement never puts two in one segment; an unmount drops one).
 */
static int set_replicas(struct replay *rp, struct kvf__object *o,
			const struct kvf__jrec *r, uint32_t *slots)
{
	struct kvf__replica *rep = kvf__object_replicas(o);
	uint32_t slot;

	for (unsigned i = 0; i < r->obj.nr_replicas; i++) {
		struct kvf__segment *seg;

		seg = kvf__seg_find(rp->e->segs, r->obj.replicas[i].segment_id,
				    &slot);
		if (!seg)
			return corrupt(rp, "replica in a segment not mounted");
		for (unsigned j = 0; j < i; j++)
			if (kvf__replica_seg(&rep[j]) == seg)
				return corrupt(rp, "replicas share a segment");
		if (r->obj.replicas[i].offset > KVF__REPLICA_OFFSET_MAX)
			return corrupt(rp, "replica offset out of range");
		kvf__replica_set(&rep[i], seg, r->obj.replicas[i].offset);
		if (slots)
			slots[i] = slot;
	}
	return KVF_OK;
}

/* Reserve every replica of @o, tagged with its key hash; all or nothing. */
static int reserve_replicas(struct replay *rp, struct kvf__object *o,
			    uint64_t hash)
{
	const struct kvf__replica *rep = kvf__object_replicas(o);

	for (unsigned i = 0; i < o->nr_replicas; i++) {
		if (kvf__segalloc_reserve_tagged(
			    kvf__replica_seg(&rep[i])->alloc,
			    kvf__replica_offset(&rep[i]), o->size,
			    hash) == KVF_OK)
			continue;
		while (i--)
			kvf__segalloc_free(kvf__replica_seg(&rep[i])->alloc,
					   kvf__replica_offset(&rep[i]),
					   o->size);
		return corrupt(rp, "replica outside its segment or on space "
				   "already in use");
	}
	return KVF_OK;
}

/* Remember @o's replicas, in table slots @slots, for reserve_image(). */
static int defer_replicas(struct replay *rp, const struct kvf__object *o,
			  uint64_t hash, const uint32_t *slots)
{
	const struct kvf__replica *rep = kvf__object_replicas_const(o);
	struct kvf__replay_range *p =
		kvf__huge_grow(rp->pend, &rp->cap_pend,
			       rp->nr_pend + o->nr_replicas, sizeof(*p), 65536);

	if (!p)
		return KVF_ERR_NO_MEMORY;
	rp->pend = p;
	for (unsigned i = 0; i < o->nr_replicas; i++)
		rp->pend[rp->nr_pend++] = (struct kvf__replay_range){
			kvf__replica_offset(&rep[i]), o->size, hash, slots[i]};
	return KVF_OK;
}

/*
 * @o's stamp from its record's (engine/journal_glue.c: the pin deadline of
 * a soft-pinned object, else the put time), never later than the clock
 * allows now (see the note at the top).
 */
static uint64_t restored_stamp(const struct replay *rp,
			       const struct kvf__object *o, uint64_t recorded)
{
	uint64_t latest = rp->now;

	if (o->flags & KVF__OBJ_SOFT_PIN)
		latest += rp->e->soft_pin_ns;
	return recorded < latest ? recorded : latest;
}

/* @o, in the index with its replicas held, is one more recovered object. */
static void count_recovered(struct replay *rp, const struct kvf__object *o)
{
	kvf__count_add(&rp->e->nr_complete, 1);
	kvf__count_add(&rp->e->nr_soft_pinned, kvf__soft_pinned(o));
	rp->objects++;
}

static void refuse(const struct replay *rp, enum kvf__jrec_type type,
		   const char *key, size_t key_len, uint64_t seq);

/* Name staged put @st in the refusal (not the record being read). */
static void refuse_staged(struct replay *rp, const struct staged *st)
{
	refuse(rp, KVF__JREC_OBJECT_PUT, kvf__object_key(st->o),
	       st->o->key_len, st->seq);
	rp->reported = true;
}

/* Insert image put @st; the image holds a key once: a clash is damage. */
static int insert_image_put(struct replay *rp, const struct staged *st)
{
	if (kvf__index_insert_unique(rp->e->index, st->o, st->hash)) {
		rp->why = "key twice in the image";
		refuse_staged(rp, st);
		kvf__object_free(st->o);
		return KVF_ERR_JOURNAL_CORRUPT;
	}
	count_recovered(rp, st->o);
	return KVF_OK;
}

/*
 * Insert log put @st, replacing an object with its key, and reserve its
 * replicas; on failure it is retired again.
 */
static int insert_log_put(struct replay *rp, const struct staged *st)
{
	struct kvf_engine *e = rp->e;
	struct kvf__object *old;
	int ret;

	old = kvf__index_insert_unique(e->index, st->o, st->hash);
	if (old) {
		ret = drop_object(rp, old, st->hash);
		if (kvf__index_insert_unique(e->index, st->o, st->hash))
			kvf__die("replay: key present after it was dropped");
		if (ret)
			goto err;
	}
	ret = reserve_replicas(rp, st->o, st->hash);
	if (ret)
		goto err;
	count_recovered(rp, st->o);
	return KVF_OK;

err:
	if (ret == KVF_ERR_JOURNAL_CORRUPT)
		refuse_staged(rp, st);
	kvf__object_retire(e, st->o, st->hash, &rp->rc);
	return ret;
}

/* Insert put @st, read up to PUTS_AHEAD records ago. */
static int insert_staged(struct replay *rp, const struct staged *st)
{
	return rp->in_log ? insert_log_put(rp, st) : insert_image_put(rp, st);
}

/* Take the oldest staged put out of the ring. */
static struct staged pop_oldest(struct replay *rp)
{
	struct staged st = rp->ahead[rp->first_ahead];

	rp->first_ahead = (rp->first_ahead + 1) % PUTS_AHEAD;
	rp->nr_ahead--;
	return st;
}

/* Take the oldest staged put out of the ring and insert it. */
static int insert_oldest(struct replay *rp)
{
	struct staged st = pop_oldest(rp);

	return insert_staged(rp, &st);
}

/*
 * Stage put @o, its replicas in table slots @slots: defer them (in the
 * image), warm the lines its insert takes and insert it PUTS_AHEAD puts
 * later (or before the next record that is not a put, drain_staged()).
 * On failure @o is freed.
 */
static int stage_put(struct replay *rp, struct kvf__object *o, uint64_t hash,
		     const uint32_t *slots)
{
	int ret = rp->in_log ? KVF_OK : defer_replicas(rp, o, hash, slots);

	if (!ret && rp->nr_ahead == PUTS_AHEAD)
		ret = insert_oldest(rp);
	if (ret) {
		kvf__object_free(o);
		return ret;
	}
	kvf__index_prefetch_write(rp->e->index, hash);
	rp->ahead[(rp->first_ahead + rp->nr_ahead++) % PUTS_AHEAD] =
		(struct staged){o, hash, rp->seq};
	return KVF_OK;
}

/* Insert every staged put, oldest first; stops at the first failure. */
static int drain_staged(struct replay *rp)
{
	int ret = KVF_OK;

	kvf__rcu_read_lock();
	while (rp->nr_ahead && !ret)
		ret = insert_oldest(rp);
	kvf__rcu_read_unlock();
	return ret;
}

/* Free staged puts a failed replay left (never inserted). */
static void free_staged(struct replay *rp)
{
	while (rp->nr_ahead)
		kvf__object_free(pop_oldest(rp).o);
}

/*
 * OBJECT_PUT replaces any object with the same key. The record is built
 * and staged; when inserted (stage_put()) it goes in first (one index
 * operation when the key is new, the common case) and a clash drops the
 * old object and inserts again. Replicas are reserved on insertion in
 * the log; image objects' replicas are reserved together at the end of
 * the image, where the image's key uniqueness makes a clash a damaged
 * journal.
 */
static int apply_put(struct replay *rp, const struct kvf__jrec *r)
{
	struct kvf_engine *e = rp->e;
	uint64_t hash = kvf__key_hash(r->obj.key, r->obj.key_len);
	uint32_t slots[KVF_MAX_REPLICAS];
	struct kvf__object *o;
	int ret;

	/* No segment holds more (put_start refuses larger objects). */
	if (r->obj.size > KVF__OBJECT_SIZE_MAX)
		return corrupt(rp, "object larger than any segment");
	o = kvf__index_object_new(e->index, e->arena, r->obj.key,
				  r->obj.key_len, r->obj.nr_replicas);
	if (!o)
		return KVF_ERR_NO_MEMORY;
	o->size = r->obj.size;
	o->flags |= r->obj.flags & (KVF__OBJ_HARD_PIN | KVF__OBJ_SOFT_PIN);
	o->stamp = restored_stamp(rp, o, r->obj.soft_pin_deadline_ns);
	o->state = KVF__OBJ_COMPLETE;
	ret = set_replicas(rp, o, r, slots);
	if (ret)
		goto err_free;
	return stage_put(rp, o, hash, slots);

err_free:
	kvf__object_free(o);
	return ret;
}

/* Is every replica of @sub one of @of's? */
static bool replicas_subset(const struct kvf__object *sub,
			    const struct kvf__object *of)
{
	const struct kvf__replica *r = kvf__object_replicas_const(sub);

	for (unsigned i = 0; i < sub->nr_replicas; i++) {
		struct kvf__replica_ref ref = {kvf__replica_seg(&r[i]),
					       kvf__replica_offset(&r[i])};

		if (!kvf__object_has_replica(of, &ref))
			return false;
	}
	return true;
}

/*
 * OBJECT_REPLICAS: the new replica set must be a subset of the object's
 * (replicas are only ever dropped): free what it left out. Anything else
 * would hand the object space it never held.
 */
static int apply_replicas(struct replay *rp, const struct kvf__jrec *r)
{
	struct kvf_engine *e = rp->e;
	uint64_t hash = kvf__key_hash(r->obj.key, r->obj.key_len);
	const struct kvf__replica *orep;
	struct kvf__object *old, *o;
	int ret;

	old = find(e, r->obj.key, r->obj.key_len, hash);
	if (!old)
		return KVF_OK;
	o = kvf__index_object_new(e->index, e->arena, r->obj.key,
				  r->obj.key_len, r->obj.nr_replicas);
	if (!o)
		return KVF_ERR_NO_MEMORY;
	o->size = old->size;
	kvf__object_set_putter(o, kvf__object_putter(old));
	o->flags = old->flags;
	o->stamp = old->stamp;
	ret = set_replicas(rp, o, r, NULL);
	if (!ret && !replicas_subset(o, old))
		ret = corrupt(rp, "replica set not a subset of the object's");
	if (ret) {
		kvf__object_free(o);
		return ret;
	}
	orep = kvf__object_replicas_const(old);
	for (unsigned i = 0; i < old->nr_replicas; i++) {
		struct kvf__replica_ref ref = {kvf__replica_seg(&orep[i]),
					       kvf__replica_offset(&orep[i])};

		/* Reserved when @old was applied: the free cannot fail. */
		if (!kvf__object_has_replica(o, &ref))
			kvf__segalloc_free(kvf__replica_seg(&orep[i])->alloc,
					   kvf__replica_offset(&orep[i]),
					   old->size);
	}
	o->state = KVF__OBJ_COMPLETE;
	if (kvf__index_replace(e->index, old, o, hash) != KVF_OK)
		kvf__die("replay: record vanished");
	kvf__obj_set(old, KVF__OBJ_REPLACED);
	kvf__reclaim_add(&rp->rc, old);
	return KVF_OK;
}

static int apply_remove(struct replay *rp, const struct kvf__jrec *r)
{
	uint64_t hash = kvf__key_hash(r->obj.key, r->obj.key_len);
	struct kvf__object *o = find(rp->e, r->obj.key, r->obj.key_len, hash);

	return o ? drop_object(rp, o, hash) : KVF_OK;
}

static int apply_object(struct replay *rp, const struct kvf__jrec *r)
{
	int ret;

	kvf__rcu_read_lock();
	switch (r->type) {
	case KVF__JREC_OBJECT_PUT:
		ret = apply_put(rp, r);
		break;
	case KVF__JREC_OBJECT_REPLICAS:
		ret = apply_replicas(rp, r);
		break;
	default:
		ret = apply_remove(rp, r);
		break;
	}
	kvf__rcu_read_unlock();
	return ret;
}

static const char *jrec_name(enum kvf__jrec_type t)
{
	switch (t) {
	case KVF__JREC_SEGMENT_MOUNT:
		return "SEGMENT_MOUNT";
	case KVF__JREC_SEGMENT_UNMOUNT:
		return "SEGMENT_UNMOUNT";
	case KVF__JREC_CLIENT_REMOVE:
		return "CLIENT_REMOVE";
	case KVF__JREC_OBJECT_PUT:
		return "OBJECT_PUT";
	case KVF__JREC_OBJECT_REPLICAS:
		return "OBJECT_REPLICAS";
	case KVF__JREC_OBJECT_REMOVE:
		return "OBJECT_REMOVE";
	}
	return "unknown";
}

/* Key bytes a refusal shows; keys are binary: others are escaped. */
#define KEY_SHOWN 80

static void show_key(char *out, const char *key, size_t len)
{
	static const char hex[] = "0123456789abcdef";

	for (size_t i = 0; i < len && i < KEY_SHOWN; i++) {
		unsigned char ch = (unsigned char)key[i];

		if (ch >= 0x20 && ch < 0x7f && ch != '\\') {
			*out++ = (char)ch;
			continue;
		}
		*out++ = '\\';
		*out++ = 'x';
		*out++ = hex[ch >> 4];
		*out++ = hex[ch & 15];
	}
	if (len > KEY_SHOWN)
		out = strcpy(out, "...") + 3;
	*out = 0;
}

/*
 * The open is refused: say which record and why through the log (the
 * status alone cannot name the record, and an open that fails returns no
 * engine to ask). @key is NULL for a record that names no object.
 */
static void refuse(const struct replay *rp, enum kvf__jrec_type type,
		   const char *key, size_t key_len, uint64_t seq)
{
	char shown[4 * KEY_SHOWN + 4] = "";

	if (key)
		show_key(shown, key, key_len);
	kvf__log(rp->e->cfg.log, rp->e->cfg.log_ctx, KVF_LOG_ERROR,
		 "journal %s record %s (sequence %llu%s%s): %s; "
		 "refusing to open",
		 rp->in_log ? "log" : "image", jrec_name(type),
		 (unsigned long long)seq, key ? ", key " : "", shown, rp->why);
}

static void report_refusal(const struct replay *rp, const struct kvf__jrec *r,
			   uint64_t seq)
{
	bool obj = r->type == KVF__JREC_OBJECT_PUT ||
		   r->type == KVF__JREC_OBJECT_REPLICAS ||
		   r->type == KVF__JREC_OBJECT_REMOVE;

	refuse(rp, r->type, obj ? r->obj.key : NULL, obj ? r->obj.key_len : 0,
	       seq);
}

static int apply_one(struct replay *rp, const struct kvf__jrec *r)
{
	struct kvf_engine *e = rp->e;
	int ret;

	/* Every other record sees the puts before it applied. */
	if (r->type != KVF__JREC_OBJECT_PUT) {
		ret = drain_staged(rp);
		if (ret)
			return ret;
	}
	switch (r->type) {
	case KVF__JREC_SEGMENT_MOUNT:
		return apply_mount(rp, r);
	case KVF__JREC_SEGMENT_UNMOUNT:
		ret = kvf__segment_unmount_locked(e, 0, r->unmount.segment_id,
						  false);
		return ret == KVF_ERR_SEGMENT_NOT_FOUND ? KVF_OK : ret;
	case KVF__JREC_CLIENT_REMOVE:
		return kvf__client_forget_locked(e, r->client.client_id);
	case KVF__JREC_OBJECT_PUT:
	case KVF__JREC_OBJECT_REPLICAS:
	case KVF__JREC_OBJECT_REMOVE:
		return apply_object(rp, r);
	}
	return corrupt(rp, "unknown record type");
}

static int apply_record(void *arg, const struct kvf__jrec *r, uint64_t seq)
{
	struct replay *rp = arg;
	int ret;

	rp->why = NULL;
	rp->seq = seq;
	ret = apply_one(rp, r);
	if (ret == KVF_ERR_JOURNAL_CORRUPT && !rp->reported)
		report_refusal(rp, r, seq);
	return ret;
}

/* Reserve the sorted ranges @p; a range not free is a damaged image. */
static int reserve_sorted(struct replay *rp, const struct kvf__replay_range *p,
			  size_t n)
{
	struct kvf__seg_table *segs = rp->e->segs;

	for (size_t i = 0; i < n; i++) {
		struct kvf__segment *seg = segs->seg[p[i].slot];

		if (kvf__segalloc_reserve_tagged(seg->alloc, p[i].offset,
						 p[i].size, p[i].tag) == KVF_OK)
			continue;
		kvf__log(rp->e->cfg.log, rp->e->cfg.log_ctx, KVF_LOG_ERROR,
			 "journal image: replica at segment %llu offset %#llx "
			 "is outside its segment or overlaps another; "
			 "refusing to open",
			 (unsigned long long)seg->id,
			 (unsigned long long)p[i].offset);
		return KVF_ERR_JOURNAL_CORRUPT;
	}
	return KVF_OK;
}

/*
 * End of the image: insert the staged puts, then reserve the image's
 * replicas in (segment, address) order. Reserving in the image's order
 * (key-hash order, random addresses) splits free regions everywhere and makes
 * every reservation a random walk of a large tree; in address order each
 * one trims the front of the region the previous one left. A range not
 * free (overlap) is a damaged journal, as in the log.
 */
static int reserve_image(void *arg)
{
	struct replay *rp = arg;
	struct kvf__replay_range *tmp = NULL, *sorted = rp->pend;
	size_t tmp_cap = 0;
	int ret = drain_staged(rp);

	if (!ret && rp->nr_pend) {
		tmp = kvf__huge_grow(NULL, &tmp_cap, rp->nr_pend, sizeof(*tmp),
				     rp->nr_pend);
		sorted = tmp ? kvf__replay_sort(rp->pend, tmp, rp->nr_pend)
			     : NULL;
		ret = sorted ? reserve_sorted(rp, sorted, rp->nr_pend)
			     : KVF_ERR_NO_MEMORY;
	}
	kvf__huge_array_free(tmp, tmp_cap, sizeof(*tmp));
	kvf__huge_array_free(rp->pend, rp->cap_pend, sizeof(*rp->pend));
	rp->pend = NULL;
	rp->nr_pend = rp->cap_pend = 0;
	rp->in_log = true;
	return ret;
}

int kvf__engine_recover(struct kvf_engine *e)
{
	static const struct kvf__journal_replay_ops ops = {
		.record = apply_record,
		.image_done = reserve_image,
	};
	uint64_t t0 = kvf__now(e);
	struct replay rp = { .e = e, .now = t0 };
	int ret;

	pthread_mutex_lock(&e->seg_lock);
	ret = kvf__journal_replay(e->journal, &ops, &rp);
	if (!ret)
		ret = drain_staged(&rp); /* the log's last puts */
	free_staged(&rp); /* left over if the image pass failed */
	kvf__reclaim_flush(&rp.rc);
	pthread_mutex_unlock(&e->seg_lock);
	free(rp.pend);
	e->recovered_objects = (uint64_t)__atomic_load_n(&e->nr_complete,
							 __ATOMIC_RELAXED);
	e->recovery_ns = kvf__now(e) - t0;
	return ret;
}
