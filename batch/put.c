/* SPDX-License-Identifier: MIT */
/*
 * batch/put.c - put_start, put_end and put_revoke.
 *
 * put_start runs inside one read-side section from choosing segments to
 * inserting records, which is what lets unmount (engine/segment.c) wait
 * out every put that might still be placing into a dying segment.
 *
 * A record is inserted PROCESSING (invisible to readers). put_end moves
 * it to ENDING, journals the whole batch in one append, then publishes
 * COMPLETE; on a journal failure the items go back to PROCESSING and
 * report the error, so in strict mode nothing unjournaled is ever
 * visible. Records are never modified in place beyond the state word and
 * the lease: pre-emption swaps in a new record (the old one's buffers are
 * released only after the release timeout: its writer may be slow).
 *
 * put_end and put_revoke check the client before the state, as
 * Mooncake's master does: a processing put by its exact id (the owner
 * word), an ended one by the putter fingerprint the record keeps
 * (metadata/object.h), so a writer whose put was dropped (its segment
 * unmounted, its client expired) and then started and ended by another
 * client hears ILLEGAL_CLIENT, not that its put already ended.
 */
#include "config.h"

#include <stdlib.h>

#include "batch/batch.h"
#include "batch/put_hint.h"
#include "base/clock.h"
#include "base/die.h"
#include "engine/mutation.h"
#include "metadata/objstate.h"

/* Bounded retries when another writer keeps winning the same key. */
#define PUT_RETRIES 16
/* take_over(): the record vanished under us; look the key up again. */
#define TAKE_OVER_RETRY 1

struct put_ctx {
	struct kvf__batch b;
	uint64_t client_id;
	uint32_t putter; /* kvf__putter_of(client_id) */
	const uint64_t *sizes;
	const struct kvf_put_config *cfg;
	struct kvf_replicas *out;
	struct kvf__seg_table *segs;
	int64_t started; /* added to nr_processing once per batch */
	int64_t pinned;  /* added to nr_soft_pinned once per batch */
	uint32_t preferred[KVF_MAX_PREFERRED];
	uint32_t nr_preferred;
	uint64_t now;
	struct kvf__placer placer; /* this batch's (kvf__place) */
	/* Insert sequences read before the probe, or NULL (no memory). */
	uint32_t *seq;
	uint32_t stack_seq[KVF__BATCH_STACK];
	/*
	 * Items placed ahead by place_runs(): item i's replica at @pre_off[i]
	 * of segment slot @pre_seg[i] (NO_PRE: none, or taken by its record).
	 * NULL when nothing was placed ahead.
	 */
	uint32_t *pre_seg;
	uint64_t *pre_off;
	/* Where this batch's new records are noted for put_end, or NULL. */
	struct kvf__put_hint *hint;
};

#define NO_PRE UINT32_MAX

/*
 * The batch's own placer, on its own stream of the engine's seed, in
 * this thread's placement lane.
 */
static void batch_placer(struct kvf_engine *e, struct kvf__placer *p)
{
	kvf__placer_init(p, e->place_seed,
			 __atomic_fetch_add(&e->place_streams, 1,
					    __ATOMIC_RELAXED));
	p->hint = &e->park_hint;
	kvf__lanes_join(&e->put_lanes, kvf__now_ns(), p);
}

/* Map preferred segment ids to table slots; unknown ids refuse the batch. */
static int resolve_preferred(struct put_ctx *c)
{
	const struct kvf_put_config *cfg = c->cfg;

	c->nr_preferred = 0;
	for (uint32_t i = 0; i < cfg->nr_preferred; i++) {
		uint32_t slot;

		if (!kvf__seg_find(c->segs, cfg->preferred_segments[i], &slot))
			return KVF_ERR_SEGMENT_NOT_FOUND;
		c->preferred[c->nr_preferred++] = slot;
	}
	return KVF_OK;
}

static int check_put_config(const struct kvf_put_config *cfg)
{
	if (!cfg || cfg->replica_num == 0 ||
	    cfg->replica_num > KVF_MAX_REPLICAS ||
	    cfg->nr_preferred > KVF_MAX_PREFERRED)
		return KVF_ERR_INVALID_PARAMS;
	if (cfg->nr_preferred && !cfg->preferred_segments)
		return KVF_ERR_INVALID_ARGUMENT;
	return KVF_OK;
}

/* A new PROCESSING record for item @i with freshly placed replicas. */
static int make_record(struct put_ctx *c, size_t i, struct kvf__object **out)
{
	struct kvf_engine *e = c->b.e;
	struct kvf__place_request req = {
		.size = c->sizes[i],
		.replica_num = c->cfg->replica_num,
		.preferred = c->nr_preferred ? c->preferred : NULL,
		.nr_preferred = c->nr_preferred,
		.tag = c->b.hash[i],
	};
	struct kvf__place_result res;
	struct kvf__replica *rep;
	struct kvf__object *o;
	int ret;

	if (c->pre_seg && c->pre_seg[i] != NO_PRE) {
		res.count = 1;
		res.seg[0] = c->pre_seg[i];
		res.offset[0] = c->pre_off[i];
		c->pre_seg[i] = NO_PRE;
	} else {
		ret = kvf__place(e->cfg.placement, c->segs->alloc, c->segs->nr,
				 &req, &c->placer, &res);
		if (ret)
			return ret;
	}
	o = kvf__index_object_new(e->index, e->arena, c->b.keys[i].data,
				  c->b.keys[i].len, res.count);
	if (!o) {
		kvf__place_undo(c->segs->alloc, &req, &res);
		return KVF_ERR_NO_MEMORY;
	}
	o->size = c->sizes[i];
	kvf__object_set_putter(o, c->putter);
	o->owner = c->client_id;
	o->stamp = c->now;
	o->flags |= (c->cfg->hard_pin ? KVF__OBJ_HARD_PIN : 0) |
		    (c->cfg->soft_pin ? KVF__OBJ_SOFT_PIN : 0);
	rep = kvf__object_replicas(o);
	for (uint32_t r = 0; r < res.count; r++)
		kvf__replica_set(&rep[r], c->segs->seg[res.seg[r]],
				 res.offset[r]);
	*out = o;
	return KVF_OK;
}

/* Undo make_record for a record that was never published. */
static void discard_record(struct kvf__object *o)
{
	kvf__replicas_free(o);
	kvf__object_free(o);
}

/*
 * Has processing @o waited the discard timeout as of @now? @now was read
 * before this batch looked the key up, so a put started by another thread
 * meanwhile can carry a later stamp than @now: that put is the youngest
 * there is, never a stuck one (an unsigned now - stamp would wrap around
 * and pre-empt it, orphaning its writer).
 */
static bool put_is_stuck(const struct kvf_engine *e,
			 const struct kvf__object *o, uint64_t now)
{
	return now >= o->stamp && now - o->stamp >= e->discard_ns;
}

/*
 * Decide about an existing record for key @i. Returns KVF_OK after
 * pre-empting a stuck put (the new record is published), TAKE_OVER_RETRY
 * when the record vanished, or the item's error.
 */
static int take_over(struct put_ctx *c, size_t i, struct kvf__object *old)
{
	struct kvf_engine *e = c->b.e;
	struct kvf__object *o;
	uint32_t base;
	int ret;

	if (!kvf__obj_lock(old, &base))
		return base == KVF__OBJ_DEAD || base == KVF__OBJ_REPLACED ?
			       TAKE_OVER_RETRY :
			       KVF_ERR_OBJECT_ALREADY_EXISTS;
	if (base == KVF__OBJ_COMPLETE || !put_is_stuck(e, old, c->now)) {
		kvf__obj_set(old, base);
		return KVF_ERR_OBJECT_ALREADY_EXISTS;
	}
	ret = make_record(c, i, &o);
	if (ret) {
		kvf__obj_set(old, base);
		return ret;
	}
	if (kvf__index_replace(e->index, old, o, c->b.hash[i]) != KVF_OK)
		kvf__die("locked record vanished from the index");
	kvf__obj_set(old, KVF__OBJ_REPLACED);
	kvf__defer_free(e, old);
	c->pinned += kvf__soft_pinned(o) - kvf__soft_pinned(old);
	kvf__reclaim_add(&c->b.rc, old);
	kvf__replicas_describe(o, &c->out[i]);
	if (c->hint)
		kvf__put_hint_note(c->hint, i, o);
	return KVF_OK;
}

static int start_one(struct put_ctx *c, size_t i)
{
	struct kvf_engine *e = c->b.e;
	struct kvf__object *existing = c->b.obj[i], *o;
	int ret;

	if (!c->sizes[i] || c->sizes[i] > KVF__OBJECT_SIZE_MAX)
		return KVF_ERR_INVALID_PARAMS;
	for (int tries = 0; tries < PUT_RETRIES; tries++) {
		if (existing) {
			ret = take_over(c, i, existing);
			if (ret != TAKE_OVER_RETRY)
				return ret;
			existing = kvf__batch_relookup(&c->b, i);
			continue;
		}
		ret = make_record(c, i, &o);
		if (ret)
			return ret;
		/* Only the probe's miss is covered by the batch's sequence. */
		existing = tries == 0 && c->seq ?
				   kvf__index_insert_since(e->index, o,
							   c->b.hash[i],
							   c->seq[i]) :
				   kvf__index_insert_unique(e->index, o,
							    c->b.hash[i]);
		if (!existing) {
			c->started++;
			c->pinned += kvf__soft_pinned(o);
			kvf__replicas_describe(o, &c->out[i]);
			if (c->hint)
				kvf__put_hint_note(c->hint, i, o);
			return KVF_OK;
		}
		discard_record(o);
	}
	return KVF_ERR_BUSY;
}

/*
 * Sizes a batch's runs are gathered for; items of any further size are
 * placed one by one. A serving stack puts one or two sizes.
 */
#define RUN_SIZES 4

/* Scratch of place_runs() for one size: items, tags, where they went. */
struct run_scratch {
	uint32_t item[KVF__BATCH_STACK];
	uint64_t tag[KVF__BATCH_STACK];
	uint32_t seg[KVF__BATCH_STACK];
	uint64_t off[KVF__BATCH_STACK];
};

/*
 * Place ahead, a run per size, the items put_start will make new records
 * for (the probe missed their key) when each takes one replica and no
 * preferred segment: one best-fit decision and one allocator lock hold
 * for as many of a size as the chosen segment holds (kvf__place_run())
 * instead of a kvf__place() call each. Sizes are taken in the order the
 * batch first names them; each item is still a best fit when it is
 * placed, as kvf__place() would choose in that order. Items the runs
 * leave (a fallback, a further size) go through kvf__place() as before.
 */
static void place_runs(struct put_ctx *c, struct run_scratch *rs,
		       uint32_t *pre_seg, uint64_t *pre_off)
{
	struct kvf_engine *e = c->b.e;
	uint64_t size[RUN_SIZES];
	uint32_t nr_sizes = 0, placed = 0;
	size_t n = c->b.n;

	for (size_t i = 0; i < n; i++) {
		pre_seg[i] = NO_PRE;
		if (c->b.status[i] != KVF_OK || c->b.obj[i] || !c->sizes[i] ||
		    c->sizes[i] > KVF__OBJECT_SIZE_MAX)
			continue;
		for (uint32_t s = 0; s < nr_sizes; s++)
			if (size[s] == c->sizes[i])
				goto known;
		if (nr_sizes < RUN_SIZES)
			size[nr_sizes++] = c->sizes[i];
known:;
	}
	for (uint32_t s = 0; s < nr_sizes; s++) {
		uint32_t k = 0, got;

		for (size_t i = 0; i < n; i++) {
			if (c->sizes[i] != size[s] ||
			    c->b.status[i] != KVF_OK || c->b.obj[i])
				continue;
			rs->item[k] = (uint32_t)i;
			rs->tag[k++] = c->b.hash[i];
		}
		if (k < 2)
			continue;
		got = kvf__place_run(e->cfg.placement, c->segs->alloc,
				     c->segs->nr, size[s], k, rs->tag,
				     &c->placer, rs->seg, rs->off);
		for (uint32_t j = 0; j < got; j++) {
			pre_seg[rs->item[j]] = rs->seg[j];
			pre_off[rs->item[j]] = rs->off[j];
		}
		placed += got;
	}
	if (placed) {
		c->pre_seg = pre_seg;
		c->pre_off = pre_off;
	}
}

/* Give back what place_runs() placed for items that made no record. */
static void unplace_leftovers(struct put_ctx *c)
{
	for (size_t i = 0; c->pre_seg && i < c->b.n; i++)
		if (c->pre_seg[i] != NO_PRE)
			kvf__segalloc_free(c->segs->alloc[c->pre_seg[i]],
					   c->pre_off[i], c->sizes[i]);
}

/* Upstream's PutStart allocation failures: @n items not placed. */
static void count_alloc_failures(struct kvf_engine *e, uint64_t n)
{
	if (n)
		__atomic_fetch_add(&e->nr_alloc_failures, n, __ATOMIC_RELAXED);
}

enum kvf_status kvf_batch_put_start(struct kvf_engine *e, uint64_t client_id,
				    const struct kvf_key *keys,
				    const uint64_t *sizes, size_t n,
				    const struct kvf_put_config *cfg,
				    struct kvf_replicas *out,
				    enum kvf_status *status)
{
	struct put_ctx c = { .client_id = client_id,
			     .putter = kvf__putter_of(client_id),
			     .sizes = sizes, .cfg = cfg, .out = out };
	struct run_scratch rs;
	uint32_t pre_seg[KVF__BATCH_STACK];
	uint64_t pre_off[KVF__BATCH_STACK];
	uint64_t unplaced = 0;
	int ret;

	if (!sizes || !out)
		return kvf__batch_refuse(status, n, KVF_ERR_INVALID_ARGUMENT);
	ret = check_put_config(cfg);
	if (ret)
		return kvf__batch_refuse(status, n, ret);
	ret = kvf__batch_begin(&c.b, e, KVF__OP_PUT_START, keys, n, status);
	if (ret)
		return ret;
	kvf__rcu_read_lock();
	c.segs = kvf__segs(e);
	if (!kvf__client_known(e, client_id))
		ret = KVF_ERR_CLIENT_NOT_FOUND;
	else if (cfg->replica_num > c.segs->nr)
		ret = KVF_ERR_NOT_ENOUGH_SEGMENTS;
	else
		ret = resolve_preferred(&c);
	if (ret) {
		kvf__rcu_read_unlock();
		if (ret == KVF_ERR_NOT_ENOUGH_SEGMENTS) {
			uint64_t refused = 0;

			for (size_t i = 0; i < n; i++)
				refused += status[i] == KVF_OK;
			count_alloc_failures(e, refused);
		}
		return kvf__batch_fail(&c.b, ret);
	}
	/* Before the probe: a miss is trusted only since these (index.h).
	 * Without memory for them, inserts look their keys up again. */
	c.seq = n <= KVF__BATCH_STACK ? c.stack_seq :
					malloc(n * sizeof(*c.seq));
	if (c.seq)
		kvf__index_insert_seqs(e->index, n, c.b.hash, c.seq);
	kvf__batch_probe(&c.b);
	c.now = kvf__now(e);
	c.hint = kvf__put_hint_open(n);
	batch_placer(e, &c.placer);
	if (n <= KVF__BATCH_STACK && cfg->replica_num == 1 &&
	    !c.nr_preferred)
		place_runs(&c, &rs, pre_seg, pre_off);
	for (size_t i = 0; i < n; i++) {
		if (i + KVF__INDEX_WRITE_AHEAD < n)
			kvf__index_prefetch_write(
				e->index, c.b.hash[i + KVF__INDEX_WRITE_AHEAD]);
		if (status[i] != KVF_OK)
			continue;
		status[i] = start_one(&c, i);
		if (status[i] == KVF_ERR_NO_SPACE) {
			kvf__request_eviction(e);
			unplaced++;
		}
	}
	unplace_leftovers(&c);
	if (c.hint)
		kvf__put_hint_publish(c.hint, &c.b, client_id);
	kvf__rcu_read_unlock();
	if (c.seq != c.stack_seq)
		free(c.seq);
	if (c.pinned)
		kvf__count_add(&e->nr_soft_pinned, c.pinned);
	count_alloc_failures(e, unplaced);
	/* One atomic per batch: a locked add per key drains the store buffer
	 * (the new records' stores) every key. */
	kvf__count_add(&e->nr_processing, c.started);
	kvf__prof_mark(&c.b.span, KVF__STAGE_ALLOCATE);
	return kvf__batch_end(&c.b, false);
}

/* ---- put_end / put_revoke ------------------------------------------------ */

/*
 * The answer to @client_id (fingerprint @putter) about @o, whose put is
 * not processing (ended, being ended, being removed): as Mooncake's
 * master, which keeps the putting client, the client is checked first.
 * Another client, one that never started the key among them, gets
 * ILLEGAL_CLIENT; the putter learns its put already ended. A record
 * whose putter is unknown (recovered) is no client's.
 */
static int not_processing(const struct kvf__object *o, uint32_t putter)
{
	return kvf__object_putter(o) == putter ?
		       KVF_ERR_OBJECT_ALREADY_EXISTS :
		       KVF_ERR_ILLEGAL_CLIENT;
}

/*
 * Lock the processing record of key @i owned by @client_id. Returns KVF_OK
 * with the record locked (state PROCESSING|LOCKED) or the item's error.
 */
static int lock_own_put(struct kvf__batch *b, size_t i, uint64_t client_id,
			uint32_t putter, struct kvf__object **out)
{
	struct kvf__object *o = b->obj[i];
	uint32_t base;

	while (o) {
		if (kvf__obj_lock(o, &base)) {
			if (base != KVF__OBJ_PROCESSING) {
				kvf__obj_set(o, base);
				return not_processing(o, putter);
			}
			/* Processing: the owner word is the exact id. */
			if (kvf__obj_client(o) != client_id) {
				kvf__obj_set(o, base);
				return KVF_ERR_ILLEGAL_CLIENT;
			}
			*out = o;
			return KVF_OK;
		}
		if (base != KVF__OBJ_DEAD && base != KVF__OBJ_REPLACED)
			return not_processing(o, putter); /* ENDING/REMOVING */
		o = kvf__batch_relookup(b, i);
	}
	return KVF_ERR_OBJECT_NOT_FOUND;
}

/* put_end committed: publish the object. */
static void publish_complete(struct kvf__batch *b, size_t i)
{
	struct kvf__object *o = b->obj[i];

	if (o->flags & KVF__OBJ_SOFT_PIN)
		o->stamp = kvf__now(b->e) + b->e->soft_pin_ns;
	/* The owner word turns from the client into the lease; the putter
	 * field keeps who put it. */
	__atomic_store_n(&o->owner, 0, __ATOMIC_RELAXED);
	kvf__obj_release(o, KVF__OBJ_COMPLETE);
}

/* put_end not journaled: the put goes on processing. */
static void back_to_processing(struct kvf__batch *b, size_t i)
{
	kvf__obj_release(b->obj[i], KVF__OBJ_PROCESSING);
}

/*
 * For every valid item, lock its processing record owned by @client_id
 * (into b->obj[i]) and hand it at once to @then, which must leave the
 * lock: holding one record's lock while waiting for the next could
 * deadlock against another batch of the same keys in another order.
 * Items that cannot be locked get their error. Inside a read section.
 */
static void own_puts(struct kvf__batch *b, uint64_t client_id,
		     kvf__batch_item_fn then)
{
	uint32_t putter = kvf__putter_of(client_id);

	for (size_t i = 0; i < b->n; i++) {
		if (b->status[i] != KVF_OK)
			continue;
		b->status[i] = lock_own_put(b, i, client_id, putter,
					    &b->obj[i]);
		if (b->status[i] == KVF_OK)
			then(b, i);
	}
}

static void start_ending(struct kvf__batch *b, size_t i)
{
	kvf__obj_release(b->obj[i], KVF__OBJ_ENDING);
}

static void revoke_locked(struct kvf__batch *b, size_t i)
{
	struct kvf__object *o = b->obj[i];

	kvf__object_retire(b->e, o, b->hash[i], &b->rc);
	kvf__obj_set(o, KVF__OBJ_DEAD);
	kvf__replicas_free(o);
	kvf__count_add(&b->e->nr_processing, -1);
	if (kvf__soft_pinned(o))
		kvf__count_add(&b->e->nr_soft_pinned, -1);
}

enum kvf_status kvf_batch_put_end(struct kvf_engine *e, uint64_t client_id,
				  const struct kvf_key *keys, size_t n,
				  enum kvf_status *status)
{
	struct kvf__batch b;
	size_t ended;
	int ret;

	ret = kvf__batch_open(&b, e, KVF__OP_PUT_END, keys, n, status);
	if (ret)
		return ret;
	kvf__rcu_read_lock();
	if (kvf__put_hint_claim(&b, client_id)) {
		kvf__prof_mark(&b.span, KVF__STAGE_PROBE);
	} else {
		ret = kvf__batch_hash(&b);
		if (ret) {
			kvf__rcu_read_unlock();
			return ret;
		}
		kvf__batch_probe(&b);
	}
	own_puts(&b, client_id, start_ending);
	kvf__prof_mark(&b.span, KVF__STAGE_VALIDATE);
	ended = kvf__batch_commit(&b, KVF__MUT_OBJECT_PUT, publish_complete,
				  back_to_processing);
	kvf__count_add(&e->nr_processing, -(int64_t)ended);
	kvf__count_add(&e->nr_complete, (int64_t)ended);
	kvf__rcu_read_unlock();
	return kvf__batch_end(&b, false);
}

enum kvf_status kvf_batch_put_revoke(struct kvf_engine *e, uint64_t client_id,
				     const struct kvf_key *keys, size_t n,
				     enum kvf_status *status)
{
	struct kvf__batch b;
	int ret;

	ret = kvf__batch_begin(&b, e, KVF__OP_PUT_REVOKE, keys, n, status);
	if (ret)
		return ret;
	kvf__rcu_read_lock();
	kvf__batch_probe(&b);
	own_puts(&b, client_id, revoke_locked);
	kvf__rcu_read_unlock();
	kvf__prof_mark(&b.span, KVF__STAGE_PUBLISH);
	return kvf__batch_end(&b, false);
}
