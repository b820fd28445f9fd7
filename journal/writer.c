/* SPDX-License-Identifier: MIT */
/*
 * journal/writer.c - the pipeline's threads and transaction slot: appends,
 * group commit, STRICT gathering, the writer and syncer threads,
 * checkpoint scheduling.
 *
 * LMDB serialises write transactions, so exactly one thread at a time
 * holds the transaction slot (@grp.busy, under @mu). Callers encode their
 * batch into log frames on their own thread (in parallel) and queue it.
 * Leader/follower group commit: a caller that finds the slot free takes
 * it and becomes the leader: it takes the whole queue, writes every queued
 * batch in one transaction (MDB_APPEND: sequence keys only grow), commits,
 * completes the whole group, and passes the baton to the owner of the
 * oldest batch queued meanwhile, which leads the next group. Callers that
 * find the slot taken sleep on a private condition variable until their
 * batch is done or the baton reaches them. So a lone caller commits on its
 * own thread with no hand-off at all, and N concurrent callers share one
 * commit and, in STRICT mode, one fsync. In STRICT mode a leader first
 * waits briefly for batches of other recently active callers (gather()),
 * so that one fsync carries every thread's batch.
 *
 * Appends that fit the side log do not take part in this: they are
 * acknowledged once copied into the mapped side log (BOUNDED) or once it
 * is synced after the copy (STRICT, group sync; sidelog_flow.c), and the
 * writer thread moves them into the LMDB log in large groups. Only a
 * batch too large for the side log still goes through the queue (a
 * "direct" append, in order); the STRICT gather() below serves those.
 *
 * The writer thread folds checkpoint chunks and moves side log frames
 * (taking the same slot, so folds, moves and appends never overlap),
 * prefaults the map and the side log (no slot needed) and commits a queue
 * it finds leaderless (at close).
 *
 * Failure is all-or-nothing per group: if the commit fails, the
 * transaction is aborted, the sequence counter is not advanced, and every
 * batch of the group gets the error. MDB_MAP_FULL is not a failure: the
 * slot holder aborts, grows the map (legal: this process has no other
 * transaction open, see store.c) and retries the same group.
 *
 * Durability (store.c has the LMDB flags): every commit of a STRICT
 * journal is synced before it returns. A BOUNDED commit (a side log move
 * or a fold chunk, on the writer thread) syncs its data pages but not its
 * meta page, which the next commit's sync or the syncer's covers; the
 * commit an OS crash can cost LMDB that way is still in the side log,
 * whose files are reused only once the syncer has synced LMDB past them.
 * The syncer syncs the side log and the file once sync_interval_ms has
 * passed since the first unsynced append or commit. With MDB_WRITEMAP the
 * first store into a fresh page of the map would fault on the committing
 * thread (page cache fill, zeroing, block reservation), so a committing
 * leader asks the writer thread to keep the next PF_WINDOW bytes beyond
 * LMDB's last page prefaulted (prefault()). Populating dirties those
 * pages, so each periodic sync writes back and write-protects the part of
 * the window LMDB has not reached yet; the syncer then asks for that part
 * again (want_reprefault()), or the caller would take a write-protect
 * fault on each of those pages. Before each sync the syncer also unmaps
 * the log written more than 1 MiB behind the end
 * (kvf__store_unmap_below()): writing back a mapped page write-protects
 * it with a TLB flush, an IPI to the caller's CPU, per page.
 *
 * Checkpoints: when the log holds checkpoint_records records, or half as
 * many as the image has objects if more (or kvf__journal_checkpoint()
 * asks), the writer folds the oldest frames into the image: by rewriting
 * the image (rewrite.c) when they are many against it, else in place, at
 * most fold_chunk records per transaction, advancing checkpoint_seq in
 * the same transaction. Either way a checkpoint is a series of
 * transactions, and the slot alternates between groups and them, so a
 * checkpoint never stalls callers for more than one step.
 *
 * Locking: @mu protects the queue, the counters and the checkpoint
 * request; it is never held across LMDB calls or I/O.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "journal/pipeline.h"
#include "journal/rewrite.h"

#define NSEC_PER_MSEC 1000000ull
/* Longest a STRICT group waits for other appenders (kvf__gather_wait_ns). */
#define GATHER_MAX_NS 300000ull
/* Who holds the transaction slot (@grp.busy): nobody is 0. */
#define SLOT_APPEND 1
#define SLOT_FOLD 2
/* With MDB_WRITEMAP, keep this much of the map prefaulted ahead. */
#define PF_WINDOW (2ull << 20)

/* --- Writer side. --- */

#ifdef KVF_FAULT_INJECTION
/*
 * With @mu held: take one pending injected fault, or 0; @errno_only: only
 * an errno code (the side log has no LMDB calls to fail).
 */
static int take_fault_locked(struct kvf__journal *j, bool errno_only)
{
	if (!j->fault_count || (errno_only && j->fault_code <= 0))
		return 0;
	j->fault_count--;
	return j->fault_code;
}

int kvf__take_errno_fault(struct kvf__journal *j)
{
	int code = take_fault_locked(j, true);

	return code ? kvf__journal_status(code) : KVF_OK;
}

/* A pending injected fault for this commit, or 0. */
static int take_fault(struct kvf__journal *j)
{
	int code;

	pthread_mutex_lock(&j->mu);
	code = take_fault_locked(j, false);
	pthread_mutex_unlock(&j->mu);
	return code;
}
#endif

/*
 * The slot holder: grow the map (store.c says how), and have the window
 * ahead of LMDB's end prefaulted again (the map may have moved).
 */
static int grow(struct kvf__journal *j)
{
	int rc = kvf__store_grow(&j->store);

	if (rc)
		return rc;
	pthread_mutex_lock(&j->mu);
	j->map_size = j->store.map_size;
	j->map_grows++;
	j->pf.to = 0;
	pthread_mutex_unlock(&j->mu);
	return 0;
}

/*
 * One write transaction: @fn fills it, then it is committed unless @fn
 * failed or a fault is injected. The final LMDB/errno code.
 */
static int write_txn(struct kvf__journal *j,
		     int (*fn)(struct kvf__journal *j, MDB_txn *txn, void *arg),
		     void *arg)
{
	MDB_txn *txn;
	int rc = kvf__store_begin(&j->store, &txn);

	if (rc)
		return rc;
	rc = fn(j, txn, arg);
	if (!rc)
		rc = KVF__FAULT(take_fault(j));
	return kvf__store_end(&j->store, txn, rc);
}

/* Every batch of a group of queued requests. */
static int put_group(struct kvf__journal *j, MDB_txn *txn, void *arg,
		     uint64_t *seq, uint64_t *frames)
{
	int rc = 0;

	for (struct kvf__jreq *r = arg; r && !rc; r = r->next)
		rc = kvf__store_put_frames(txn, j->store.dbs.log, r->b.buf,
					   r->b.nr_frames, seq, frames);
	return rc;
}

/* With @mu held, after a NOSYNC commit: the syncer has work. */
void kvf__mark_dirty(struct kvf__journal *j)
{
	if (j->cfg.durability != KVF_DURABILITY_BOUNDED || j->dirty_since)
		return;
	j->dirty_since = kvf__now_ns();
	pthread_cond_signal(&j->sync_cv);
}

/* --- Prefaulting the map (MDB_WRITEMAP). --- */

/*
 * With @mu held, after an append commit whose last page ends at @end:
 * when fewer than PF_WINDOW / 2 prefaulted bytes are left beyond it, ask
 * the writer thread to prefault the next PF_WINDOW.
 */
static void want_prefault(struct kvf__journal *j, uint64_t end)
{
	if (!j->store.writemap || j->pf.off)
		return;
	j->pf.end = end;
	if (end + PF_WINDOW / 2 <= j->pf.to)
		return;
	j->pf.from = end > j->pf.to ? end : j->pf.to;
	j->pf.to = end + PF_WINDOW;
	if (j->pf.to > j->map_size)
		j->pf.to = j->map_size;
	if (j->pf.from >= j->pf.to)
		return;
	j->pf.pending = 1;
	pthread_cond_signal(&j->work_cv);
}

/*
 * Syncer, with @mu held, after a sync: the sync wrote back and
 * write-protected the prefaulted pages LMDB had not used yet (populating
 * dirties them), so the caller would fault on each again. Populate what
 * is left of the window once more.
 */
static void want_reprefault(struct kvf__journal *j)
{
	if (!j->store.writemap || j->pf.off || j->pf.end >= j->pf.to)
		return;
	if (!j->pf.pending || j->pf.end < j->pf.from)
		j->pf.from = j->pf.end;
	j->pf.pending = 1;
	pthread_cond_signal(&j->work_cv);
}

/*
 * Writer thread, with @mu held: populate the requested part of the map
 * writable, so that LMDB's first stores into those pages, on the caller's
 * thread, find them mapped and allocated instead of faulting (page-cache
 * fill, zeroing, block reservation). The pages lie beyond LMDB's last
 * page: nothing reads them, and populating never changes their contents,
 * so racing with a store of the slot holder is harmless.
 */
static void prefault(struct kvf__journal *j)
{
	uint64_t from = j->pf.from, to = j->pf.to;
	bool off;

	j->pf.pending = 0;
	pthread_mutex_unlock(&j->mu);
	off = kvf__store_prefault(&j->store, from, to);
	pthread_mutex_lock(&j->mu);
	j->pf.off |= off;
}

/*
 * Write what @fn puts in one transaction, growing the map as needed; then
 * publish the new end of the log. Returns a kvf_status.
 */
struct frames_txn {
	kvf__frames_fn fn;
	void *arg;
	uint64_t seq, frames;
};

static int put_frames_txn(struct kvf__journal *j, MDB_txn *txn, void *arg)
{
	struct frames_txn *t = arg;

	return t->fn(j, txn, t->arg, &t->seq, &t->frames);
}

int kvf__commit_frames(struct kvf__journal *j, kvf__frames_fn fn, void *arg)
{
	struct frames_txn t = { .fn = fn, .arg = arg };
	uint64_t seq, frames, end = 0;
	int rc;

	for (;;) {
		t.seq = j->st.last_seq;
		t.frames = 0;
		rc = write_txn(j, put_frames_txn, &t);
		if (rc != MDB_MAP_FULL)
			break;
		rc = grow(j);
		if (rc)
			break;
	}
	seq = t.seq;
	frames = t.frames;
	if (!rc)
		end = kvf__store_data_end(&j->store);
	pthread_mutex_lock(&j->mu);
	if (rc)
		return kvf__journal_status(rc);
	j->st.last_seq = seq;
	j->st.log_frames += frames;
	j->commits++;
	j->ckpt.blocked = 0;
	kvf__mark_dirty(j);
	want_prefault(j, end);
	return KVF_OK;
}

struct fold_txn {
	uint64_t target;
	struct kvf__store_state st;
	bool done; /* the rewrite switched */
};

static int fold_txn(struct kvf__journal *j, MDB_txn *txn, void *arg)
{
	struct fold_txn *f = arg;

	f->st = j->st; /* only the slot holder changes it */
	if (j->rewrite)
		return kvf__rewrite_step(txn, &j->store.dbs, j->rewrite,
					 &f->st, &f->done);
	return kvf__image_fold(txn, &j->store.dbs, f->target,
			       j->cfg.fold_chunk, &f->st);
}

/* Does a checkpoint towards @target rewrite the image (rewrite.c)? */
static bool rewrite_wanted(const struct kvf__journal *j, uint64_t target)
{
	switch (j->cfg.image_rewrite) {
	case KVF__REWRITE_NEVER:
		return false;
	case KVF__REWRITE_ALWAYS:
		return true;
	default:
		return kvf__rewrite_wanted(target - j->st.ckpt_seq,
					   j->st.objects);
	}
}

/*
 * One fold chunk or rewrite step towards @target; returns a kvf_status.
 * A failed rewrite is given up (the next one starts over).
 */
static int fold_chunk(struct kvf__journal *j, uint64_t target)
{
	struct fold_txn f = { .target = target };
	int rc;

	if (!j->rewrite && rewrite_wanted(j, target)) {
		j->rewrite = kvf__rewrite_new(target, j->cfg.fold_chunk,
					      j->cfg.rewrite_budget, &j->st);
		if (!j->rewrite)
			return KVF_ERR_NO_MEMORY;
	}
	while ((rc = write_txn(j, fold_txn, &f)) == MDB_MAP_FULL) {
		if (j->rewrite)
			kvf__rewrite_settle(j->rewrite, false);
		rc = grow(j);
		if (rc)
			break;
	}
	if (j->rewrite) {
		kvf__rewrite_settle(j->rewrite, !rc);
		if (rc || f.done) {
			kvf__rewrite_free(j->rewrite);
			j->rewrite = NULL;
		}
	}
	if (rc)
		return kvf__journal_status(rc);
	pthread_mutex_lock(&j->mu);
	j->st = f.st; /* only this thread changes it */
	j->commits++;
	kvf__mark_dirty(j);
	pthread_mutex_unlock(&j->mu);
	return KVF_OK;
}

/*
 * The log's length that starts a checkpoint: the configured count, or half
 * the image's objects when that is more, so that a rewrite writes at most
 * two image entries per record it folds.
 */
static uint64_t ckpt_threshold(const struct kvf__journal *j)
{
	uint64_t half = j->st.objects / 2;

	return j->cfg.checkpoint_records > half ? j->cfg.checkpoint_records :
						  half;
}

/* With @mu held: is there folding to do? Starts a threshold checkpoint. */
static int fold_wanted(struct kvf__journal *j)
{
	uint64_t log = j->st.last_seq - j->st.ckpt_seq;

	if (j->ckpt.target <= j->st.ckpt_seq && !j->ckpt.blocked &&
	    log && log >= ckpt_threshold(j))
		j->ckpt.target = j->st.last_seq;
	return j->ckpt.target > j->st.ckpt_seq && !j->ckpt.blocked;
}

/* --- Group commit: leaders and followers. --- */

/* With @mu held: the calling thread appends now. */
void kvf__note_appender(struct kvf__journal *j, uint64_t now)
{
	struct kvf__jappender *mine = NULL, *oldest = &j->grp.appenders[0];
	pthread_t self = pthread_self();

	for (int i = 0; i < KVF__JAPPENDERS && !mine; i++) {
		struct kvf__jappender *a = &j->grp.appenders[i];

		if (a->last_ns && pthread_equal(a->thread, self))
			mine = a;
		else if (a->last_ns < oldest->last_ns)
			oldest = a;
	}
	if (!mine) {
		mine = oldest;
		mine->thread = self;
	}
	mine->last_ns = now;
}

/* With @mu held: threads that appended within @window_ns of @now. */
static size_t active_appenders(const struct kvf__journal *j, uint64_t now,
			       uint64_t window_ns)
{
	size_t n = 0;

	for (int i = 0; i < KVF__JAPPENDERS; i++)
		n += j->grp.appenders[i].last_ns &&
		     j->grp.appenders[i].last_ns + window_ns >= now;
	return n;
}

uint64_t kvf__gather_wait_ns(uint64_t avg_ns)
{
	return avg_ns / 2 < GATHER_MAX_NS ? avg_ns / 2 : GATHER_MAX_NS;
}

bool kvf__group_complete(const struct kvf__journal *j, uint64_t now,
			 uint64_t avg_ns, uint64_t waiting)
{
	return waiting >=
	       active_appenders(j, now, 2 * avg_ns + NSEC_PER_MSEC);
}

/*
 * STRICT, with @mu held, before a leader takes the queue: if other
 * threads appended recently but their batches are not queued yet (they
 * are between two appends), wait a little for them, so one fsync covers
 * every thread's batch. Without this, two appenders fall into lockstep:
 * each fsync carries one batch while the other thread prepares its next,
 * and a second thread adds almost nothing. The wait is bounded by half an
 * average commit (kvf__gather_wait_ns()) and skipped with one appender.
 */
static void gather(struct kvf__journal *j)
{
	uint64_t now = kvf__now_ns(), deadline;
	struct timespec ts;

	if (j->cfg.durability != KVF_DURABILITY_STRICT)
		return;
	deadline = now + kvf__gather_wait_ns(j->grp.commit_ns);
	j->grp.leader_waiting = 1;
	while (!j->stop && now < deadline &&
	       !kvf__group_complete(j, now, j->grp.commit_ns,
				    j->grp.nr_queued)) {
		kvf__deadline_ts(deadline, &ts);
		pthread_cond_timedwait(&j->lead_cv, &j->mu, &ts);
		now = kvf__now_ns();
	}
	j->grp.leader_waiting = 0;
}

/*
 * With @mu held: end a write transaction and pass the baton. A wanted
 * checkpoint chunk gets the slot after every group or side log move
 * (reserved for the writer thread: SLOT_FOLD), so a steady appender cannot
 * starve it, and the owner of the oldest queued batch, or the next move,
 * gets it after every chunk; so they alternate with chunks under load.
 */
static void release(struct kvf__journal *j, int was_fold)
{
	bool others = j->grp.head ||
		      (j->flow.on && kvf__flow_movable(j) != j->st.last_seq);

	j->grp.busy = 0;
	if (!j->stop && fold_wanted(j) && (!was_fold || !others)) {
		j->grp.busy = SLOT_FOLD;
		pthread_cond_signal(&j->work_cv);
		return;
	}
	if (j->grp.head)
		pthread_cond_signal(&j->grp.head->cv);
	if (j->stop)
		pthread_cond_signal(&j->work_cv);
}

/*
 * With @mu held and @j->grp.busy taken by the caller: commit every queued
 * batch in one transaction and complete them all.
 */
/* With @mu held: tell the tap a batch took sequences @first on. */
static void tap_committed(struct kvf__journal *j, const struct kvf__jreq *r,
			  uint64_t first)
{
	if (j->tap.committed)
		j->tap.committed(j->tap.ctx, r->b.buf, r->b.len,
				 r->b.nr_frames, r->b.nr_recs, first);
}

static void lead(struct kvf__journal *j, int may_gather)
{
	struct kvf__jreq *group;
	uint64_t t0, took, base;
	int rc;

	if (may_gather)
		gather(j);
	group = j->grp.head;
	j->grp.head = NULL;
	j->grp.tail = &j->grp.head;
	j->grp.nr_queued = 0;
	base = j->st.last_seq; /* only the slot holder changes it */
	pthread_mutex_unlock(&j->mu);
	t0 = kvf__now_ns();
	rc = kvf__commit_frames(j, put_group, group);
	took = kvf__now_ns() - t0;
	if (!rc)
		j->grp.commit_ns = j->grp.commit_ns ?
					   (7 * j->grp.commit_ns + took) / 8 :
					   took;
	while (group) {
		struct kvf__jreq *next = group->next;

		if (!rc) {
			group->last_seq = base + group->b.nr_recs;
			tap_committed(j, group, base + 1);
			base = group->last_seq;
		}

		group->status = rc;
		group->done = 1;
		pthread_cond_signal(&group->cv); /* @group may vanish now */
		group = next;
	}
	release(j, 0);
}

static void serve_fold(struct kvf__journal *j)
{
	uint64_t target = j->ckpt.target;
	int rc;

	pthread_mutex_unlock(&j->mu);
	rc = fold_chunk(j, target);
	pthread_mutex_lock(&j->mu);
	j->ckpt.err = rc;
	j->ckpt.gen++;
	if (rc) {
		/* Give up this checkpoint; retry after the next append. */
		j->ckpt.target = j->st.ckpt_seq;
		j->ckpt.blocked = 1;
	}
	pthread_cond_broadcast(&j->ckpt_cv);
	release(j, 1);
}

/*
 * The writer thread folds checkpoint chunks when the transaction slot is
 * free; it commits queued batches only if it finds them leaderless (a
 * baton in flight, or close).
 */
static void *writer_main(void *arg)
{
	struct kvf__journal *j = arg;
	struct timespec ts;

	pthread_mutex_lock(&j->mu);
	for (;;) {
		uint64_t deadline = 0;

		if (j->grp.busy == SLOT_FOLD) {
			serve_fold(j); /* release() reserved the slot for us */
		} else if (j->pf.pending && !j->stop) {
			prefault(j); /* needs no slot */
		} else if (j->grp.busy) {
			pthread_cond_wait(&j->work_cv, &j->mu);
		} else if (j->grp.head) {
			j->grp.busy = SLOT_APPEND;
			lead(j, 0);
		} else if (kvf__flow_move_due(j, kvf__now_ns(), &deadline)) {
			j->grp.busy = SLOT_APPEND;
			kvf__flow_move(j);
			release(j, 0);
		} else if (j->stop) {
			/* An unfinished checkpoint resumes later; frames a
			 * failing move left in the side log, at the next open. */
			break;
		} else if (fold_wanted(j)) {
			j->grp.busy = SLOT_FOLD;
			serve_fold(j);
		} else if (deadline) {
			kvf__deadline_ts(deadline, &ts);
			pthread_cond_timedwait(&j->work_cv, &j->mu, &ts);
		} else {
			pthread_cond_wait(&j->work_cv, &j->mu);
		}
	}
	pthread_mutex_unlock(&j->mu);
	return NULL;
}

/*
 * BOUNDED mode's periodic sync, on its own thread so the writer never
 * waits for an fsync (~4 ms here): mdb_env_sync() only fdatasync()s the
 * file, which is safe beside a commit. After a sync that started at time
 * T returns, every commit acknowledged before T is on disk; so an OS crash
 * loses at most the commits of the last sync_interval_ms plus one sync.
 */
static void *syncer_main(void *arg)
{
	struct kvf__journal *j = arg;
	uint64_t interval = j->cfg.sync_interval_ms * NSEC_PER_MSEC, end, seq;
	struct timespec ts;
	int rc, wrc;

	pthread_mutex_lock(&j->mu);
	for (;;) {
		uint64_t due = j->dirty_since + interval;

		if (!j->dirty_since) {
			if (j->stop)
				break;
			pthread_cond_wait(&j->sync_cv, &j->mu);
			continue;
		}
		if (!j->stop && !j->flow.sync_now && kvf__now_ns() < due) {
			kvf__deadline_ts(due, &ts);
			pthread_cond_timedwait(&j->sync_cv, &j->mu, &ts);
			continue;
		}
		j->dirty_since = 0;
		end = j->pf.end;
		seq = j->st.last_seq;
		wrc = j->flow.on ? kvf__flow_sync(j) : 0; /* drops @mu */
		pthread_mutex_unlock(&j->mu);
		kvf__store_unmap_below(&j->store, end);
		rc = kvf__store_sync(&j->store);
		pthread_mutex_lock(&j->mu);
		if (!rc)
			rc = wrc;
		if (j->flow.on)
			kvf__flow_synced(j, seq, rc);
		if (!rc)
			want_reprefault(j);
		if (rc) {
			j->sync_errors++;
			if (!j->dirty_since)
				j->dirty_since = kvf__now_ns(); /* retry later */
			if (j->stop)
				break; /* close() syncs once more */
		}
	}
	pthread_mutex_unlock(&j->mu);
	return NULL;
}

/* With @mu held. */
int kvf__writer_start(struct kvf__journal *j)
{
	j->replayed = 1;
	if (j->started)
		return KVF_OK;
	if (pthread_create(&j->thread, NULL, writer_main, j))
		return KVF_ERR_NO_MEMORY;
	if (j->cfg.durability == KVF_DURABILITY_BOUNDED &&
	    pthread_create(&j->syncer, NULL, syncer_main, j)) {
		j->stop = 1;
		pthread_cond_signal(&j->work_cv);
		pthread_mutex_unlock(&j->mu);
		pthread_join(j->thread, NULL);
		pthread_mutex_lock(&j->mu);
		j->stop = 0;
		return KVF_ERR_NO_MEMORY;
	}
	j->started = 1;
	return KVF_OK;
}

void kvf__writer_stop(struct kvf__journal *j)
{
	int started;

	pthread_mutex_lock(&j->mu);
	j->stop = 1;
	started = j->started;
	pthread_cond_signal(&j->work_cv);
	pthread_mutex_unlock(&j->mu);
	if (!started)
		return;
	pthread_join(j->thread, NULL); /* drains the queue first */
	if (j->cfg.durability != KVF_DURABILITY_BOUNDED)
		return;
	pthread_mutex_lock(&j->mu);
	pthread_cond_signal(&j->sync_cv);
	pthread_mutex_unlock(&j->mu);
	pthread_join(j->syncer, NULL);
}

/*
 * Encoding buffers are kept between appends (at most one per recently
 * active thread): a malloc() and free() of ~20 KB per batch made glibc
 * consolidate its fast bins each time (malloc_consolidate() showed up at
 * ~10% of a BOUNDED put thread, behind a heap full of small engine
 * allocations).
 */
static void buf_get(struct kvf__journal *j, struct kvf__jreq *req)
{
	pthread_mutex_lock(&j->mu);
	if (j->grp.nr_bufs) {
		j->grp.nr_bufs--;
		req->b.buf = j->grp.bufs[j->grp.nr_bufs];
		req->b.cap = j->grp.buf_caps[j->grp.nr_bufs];
	}
	pthread_mutex_unlock(&j->mu);
}

/* With @mu held: keep @req's buffer for a later append if there is room. */
static void buf_put(struct kvf__journal *j, struct kvf__jreq *req)
{
	if (!req->b.buf || j->grp.nr_bufs == KVF__JAPPENDERS)
		return;
	j->grp.bufs[j->grp.nr_bufs] = req->b.buf;
	j->grp.buf_caps[j->grp.nr_bufs] = req->b.cap;
	j->grp.nr_bufs++;
	req->b.buf = NULL;
}

/* Acknowledge @req through the side log (sidelog_flow.c). */
static int append_sidelog(struct kvf__journal *j, struct kvf__jreq *req)
{
	uint64_t hash = kvf__sidelog_hash(&req->b);
	int rc;

	pthread_mutex_lock(&j->mu);
	rc = j->stop ? KVF_ERR_CLOSED : kvf__writer_start(j);
	if (!rc)
		rc = kvf__flow_append(j, req, hash);
	if (!rc) {
		req->last_seq = j->flow.acked_seq;
		tap_committed(j, req, req->last_seq - req->b.nr_recs + 1);
	}
	if (!rc && j->sl.strict)
		rc = kvf__flow_strict_sync(j, j->flow.acked_seq);
	buf_put(j, req);
	pthread_mutex_unlock(&j->mu);
	free(req->b.buf);
	return rc;
}

static int append(struct kvf__journal *j, const struct kvf__jrec *recs,
		  size_t n, uint64_t *last_seq)
{
	struct kvf__jreq req = { 0 };
	int rc;

	buf_get(j, &req);
	rc = kvf__batch_encode(recs, n, &req.b);
	if (rc)
		goto out;
	if (j->flow.on && kvf__sidelog_frame_bytes(req.b.len) <= j->sl.size / 2) {
		rc = append_sidelog(j, &req);
		*last_seq = req.last_seq;
		return rc;
	}
	if (pthread_cond_init(&req.cv, NULL)) {
		rc = KVF_ERR_NO_MEMORY;
		goto out;
	}
	pthread_mutex_lock(&j->mu);
	rc = j->stop ? KVF_ERR_CLOSED : kvf__writer_start(j);
	if (!rc && j->flow.on)
		rc = kvf__flow_direct_begin(j);
	if (!rc) {
		*j->grp.tail = &req;
		j->grp.tail = &req.next;
		j->grp.nr_queued++;
		kvf__note_appender(j, kvf__now_ns());
		if (j->grp.leader_waiting)
			pthread_cond_signal(&j->lead_cv);
		while (!req.done) {
			if (j->grp.busy) {
				pthread_cond_wait(&req.cv, &j->mu);
				continue;
			}
			j->grp.busy = SLOT_APPEND; /* lead: commit the queue */
			lead(j, 1);
		}
		rc = req.status;
		if (j->flow.on)
			kvf__flow_direct_end(j, rc);
	}
	buf_put(j, &req);
	pthread_mutex_unlock(&j->mu);
	pthread_cond_destroy(&req.cv);
	*last_seq = req.last_seq;
out:
	free(req.b.buf);
	return rc;
}

int kvf__journal_append_seq(struct kvf__journal *j,
			    const struct kvf__jrec *recs, size_t n,
			    uint64_t *last_seq)
{
	struct kvf__journal_tap tap;
	uint64_t last = 0;
	int rc;

	if (!n)
		return KVF_OK;
	if (!recs)
		return KVF_ERR_INVALID_ARGUMENT;
	/* A copy, counted, so kvf__journal_set_tap() can wait us out. */
	pthread_mutex_lock(&j->mu);
	tap = j->tap;
	if (tap.ctx)
		j->tap_users++;
	pthread_mutex_unlock(&j->mu);
	rc = tap.admit ? tap.admit(tap.ctx) : KVF_OK;
	if (!rc)
		rc = append(j, recs, n, &last);
	if (!rc && tap.wait)
		rc = tap.wait(tap.ctx, last);
	if (tap.ctx) {
		pthread_mutex_lock(&j->mu);
		if (!--j->tap_users)
			pthread_cond_broadcast(&j->ckpt_cv);
		pthread_mutex_unlock(&j->mu);
	}
	if (!rc && last_seq)
		*last_seq = last;
	return rc;
}

int kvf__journal_append(struct kvf__journal *j, const struct kvf__jrec *recs,
			size_t n)
{
	return kvf__journal_append_seq(j, recs, n, NULL);
}

void kvf__journal_set_tap(struct kvf__journal *j,
			  const struct kvf__journal_tap *tap)
{
	pthread_mutex_lock(&j->mu);
	if (tap)
		j->tap = *tap;
	else
		memset(&j->tap, 0, sizeof(j->tap));
	/* ckpt_cv's waiters all re-check their own condition */
	while (j->tap_users)
		pthread_cond_wait(&j->ckpt_cv, &j->mu);
	pthread_mutex_unlock(&j->mu);
}

int kvf__journal_checkpoint(struct kvf__journal *j)
{
	uint64_t target, gen;
	int rc;

	pthread_mutex_lock(&j->mu);
	rc = j->stop ? KVF_ERR_CLOSED : kvf__writer_start(j);
	if (!rc)
		rc = kvf__flow_drain(j);
	target = j->st.last_seq;
	j->ckpt.blocked = 0;
	if (j->ckpt.target < target)
		j->ckpt.target = target;
	pthread_cond_signal(&j->work_cv);
	while (!rc && j->st.ckpt_seq < target) {
		gen = j->ckpt.gen;
		while (j->ckpt.gen == gen)
			pthread_cond_wait(&j->ckpt_cv, &j->mu);
		rc = j->ckpt.err;
	}
	pthread_mutex_unlock(&j->mu);
	return rc;
}
