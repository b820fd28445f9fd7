/* SPDX-License-Identifier: MIT */
/*
 * journal/sidelog_flow.c - the pipeline's side log flow: acknowledge a
 * batch after a pwritev() into the side log (BOUNDED), followed by a
 * group fdatasync (STRICT), then move it into LMDB off the caller's path;
 * recovery of the side log at open.
 *
 * Why: an LMDB commit writes ~7 pages through 5-8 system calls even with
 * MDB_NOSYNC; for a 128-record batch that was ~14 µs of the caller's CPU,
 * half again the in-memory put path. A process crash only needs the
 * acknowledged bytes in the page cache, where a write() to a file has put
 * them when it returns. So an append writes its encoded batch into a
 * preallocated side log file with one pwritev() (sidelog.c: the format,
 * and why not stores into its mapping) and returns; the writer thread
 * later moves the same frames into the LMDB log, many batches per
 * transaction (kvf__flow_move()). STRICT appends also sync the side log
 * before they return (kvf__flow_strict_sync(): group sync).
 *
 * Files: appends fill one file; when the next frame does not fit they
 * switch to the other, which is allowed only once every frame in it is
 * in LMDB and LMDB has been synced since (@hi_seq <= @durable_seq): a
 * reused file may then be overwritten freely. A frame larger than half a
 * file bypasses the side log (direct appends, below).
 *
 * Recovery (kvf__flow_open(), before the replay): the chain of frames
 * after LMDB's last sequence is read and judged first (sidelog.c), then
 * put into the LMDB log and synced; then each file gets a header for a
 * new epoch and appends start again at wal-0.log. A crash anywhere in
 * this is harmless: frames already in LMDB are skipped.
 *
 * Locking: struct kvf__flow and struct kvf__sidelog are under the
 * journal's @mu; the mappings are fixed between open and close.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "journal/pipeline.h"

/* Recovery commits moved frames every this many payload bytes. */
#define RECOVER_TXN (16u << 20)

/* --- Putting side log frames into the LMDB log (moves, recovery). --- */

/* Frames [@from, @to) of a mapped file, for kvf__commit_frames(). */
struct frame_range {
	const uint8_t *map;
	uint64_t from, to;
	bool recovering; /* a gap ends the chain */
	bool gap;        /* stopped at a skip frame LMDB does not have */
};

struct frame_put {
	MDB_txn *txn;
	MDB_dbi log;
	uint64_t *seq, *frames;
	const struct frame_range *r;
	bool gap;
	int rc; /* an LMDB code */
};

static int put_frame(void *arg, const struct kvf__sidelog_frame *fr,
		     const uint8_t *payload)
{
	struct frame_put *m = arg;
	uint64_t first_seq = fr->first_seq;
	uint32_t nr_recs = fr->nr_recs;

	if (!fr->nr_frames) {
		if (first_seq + nr_recs - 1 <= *m->seq)
			return 0; /* a skip frame: LMDB has these (direct) */
		m->gap = true; /* only recovery can meet one LMDB lacks */
		return 1;
	}
	if (first_seq != *m->seq + 1) {
		m->rc = MDB_CORRUPTED;
		return 1;
	}
	m->rc = kvf__store_put_frames(m->txn, m->log, payload, fr->nr_frames,
				      m->seq, m->frames);
	if (!m->rc && *m->seq != first_seq + nr_recs - 1)
		m->rc = MDB_CORRUPTED;
	return m->rc != 0;
}

static int put_range(struct kvf__journal *j, MDB_txn *txn, void *arg,
		     uint64_t *seq, uint64_t *frames)
{
	struct frame_range *r = arg;
	struct frame_put m = {txn, j->store.dbs.log, seq, frames, r, false, 0};

	kvf__sidelog_walk(r->map, r->from, r->to, put_frame, &m);
	r->gap = m.gap;
	if (m.gap && !r->recovering)
		return MDB_CORRUPTED; /* a move: a broken invariant */
	return m.rc;
}

/*
 * Put @p's frames into the LMDB log, one transaction per RECOVER_TXN
 * bytes, through the writer's own commit (kvf__commit_frames(): map
 * growth included, whether a put or the commit itself does not fit).
 * kvf__sidelog_read_chain() has decoded every one of them. Returns a
 * kvf_status, or KVF__SIDELOG_GAP if a skip frame LMDB does not have
 * ended the chain.
 */
static int recover_part(struct kvf__journal *j, struct kvf__sidelog_part *p)
{
	struct frame_range r = { .map = p->map, .recovering = true };
	int rc = 0;

	while (!rc && !r.gap && p->from < p->to) {
		uint64_t bytes = 0;
		struct kvf__sidelog_frame fr;

		r.from = r.to = p->from;
		while (r.to < p->to && bytes < RECOVER_TXN) {
			kvf__sidelog_frame_read(p->map, r.to, &fr);
			bytes += fr.len;
			r.to += kvf__sidelog_frame_bytes(fr.len);
		}
		rc = kvf__commit_frames(j, put_range,
					&r); /* returns with @mu */
		pthread_mutex_unlock(&j->mu);
		p->from = r.to;
	}
	return rc ? rc : r.gap ? KVF__SIDELOG_GAP : 0;
}

static int recover_fn(void *arg, struct kvf__sidelog_part *part)
{
	return recover_part(arg, part);
}

/*
 * Recovery: read the chain after LMDB's last sequence (every record
 * decoded, the end judged: kvf__sidelog_read_chain()), then move it into
 * LMDB and
 * sync. Nothing is written when the verdict is damage. Returns a
 * kvf_status or an errno/LMDB code.
 */
static int recover(struct kvf__journal *j, const struct kvf__sidelog_src s[2],
		   uint64_t boot)
{
	struct kvf__sidelog_part p[2];
	uint64_t records, end;
	int rc;

	kvf__sidelog_parts_init(p, s);
	rc = kvf__sidelog_read_chain(s, p, j->st.last_seq, boot, NULL, NULL,
				     &records, &end);
	if (rc || !records)
		return rc;
	rc = kvf__sidelog_chain(p, j->st.last_seq, recover_fn, j);
	if (rc == KVF__SIDELOG_GAP)
		rc = 0;
	if (!rc && j->st.last_seq != end) {
		kvf__jerr("side log recovery ended at sequence %llu, not %llu",
			  (unsigned long long)j->st.last_seq,
			  (unsigned long long)end);
		rc = KVF_ERR_JOURNAL_CORRUPT;
	}
	return rc ? rc : kvf__store_sync(&j->store);
}

/*
 * Recover the files found (any geometry, from their headers) into LMDB,
 * then make both ready for appends at the configured size with a new
 * epoch (kvf__sidelog_open()).
 */
static int open_files(struct kvf__journal *j)
{
	bool legacy = j->st.version < KVF__JOURNAL_FORMAT_SIDELOG_HEADER;
	uint64_t boot = kvf__sidelog_boot();
	struct kvf__sidelog_src s[2];
	int rc;

	rc = kvf__sidelog_srcs_open(j->dir, j->st.id, legacy,
				    j->st.sidelog_created, s);
	if (rc)
		return rc;
	rc = recover(j, s, boot);
	if (!rc)
		rc = kvf__sidelog_open(&j->sl, j->dir, j->st.id, s, boot);
	kvf__sidelog_srcs_close(s);
	return rc;
}

int kvf__flow_open(struct kvf__journal *j)
{
	struct kvf__flow *w = &j->flow;
	pthread_condattr_t ca;
	int rc;

	j->sl.f[0].fd = j->sl.f[1].fd = -1;
	j->sl.size = j->cfg.wal_bytes;
	j->sl.strict = j->cfg.durability == KVF_DURABILITY_STRICT;
	if (pthread_condattr_init(&ca))
		return ENOMEM;
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* kvf__now_ns() */
	rc = pthread_cond_init(&w->cv, NULL);
	if (!rc) {
		rc = pthread_cond_init(&w->strict_cv, &ca);
		if (rc)
			pthread_cond_destroy(&w->cv);
	}
	pthread_condattr_destroy(&ca);
	if (rc)
		return ENOMEM;
	w->cv_ok = 1;
	rc = open_files(j);
	if (rc)
		return rc;
	w->cur = 0;
	w->ing = 0;
	w->ing_off = KVF__SIDELOG_DATA;
	w->move_reading = -1;
	w->acked_seq = j->st.last_seq;
	w->durable_seq = j->st.last_seq;
	w->synced_seq = j->st.last_seq;
	w->on = 1;
	return 0;
}

void kvf__flow_close(struct kvf__journal *j)
{
	struct kvf__flow *w = &j->flow;

	kvf__sidelog_close(&j->sl);
	if (w->cv_ok) {
		pthread_cond_destroy(&w->strict_cv);
		pthread_cond_destroy(&w->cv);
	}
	w->cv_ok = 0;
}

/* --- Appending (caller threads). --- */

/*
 * Move into LMDB once this many frame bytes are pending, or the oldest is
 * MOVE_NS old. Each move is a commit that syncs its data pages
 * (MDB_NOMETASYNC, writer.c): a few large moves, not many small ones
 * (1 MiB / 5 ms with MDB_NOSYNC measured the same as 4 MiB / 20 ms with
 * MDB_NOMETASYNC, three interleaved runs each).
 */
#define MOVE_BYTES (4u << 20)
/* ... or the oldest pending frame is this old. */
#define MOVE_NS (20ull * 1000000)
/* After a failed move, retry no sooner than this. */
#define MOVE_RETRY_NS (10ull * 1000000)

/*
 * At open, once the store is final (compaction reopens it): LMDB's pool of
 * dirty page buffers filled for a move of twice MOVE_BYTES, which a move
 * otherwise malloc()s and faults in on the writer thread, the first time a
 * move is that large (kvf__store_warm_pages()).
 */
void kvf__flow_warm(struct kvf__journal *j)
{
	uint64_t bytes = 2ull * MOVE_BYTES;

	if (!j->flow.on)
		return;
	/* No move is larger than both side log files. */
	if (bytes > 2 * j->sl.size)
		bytes = 2 * j->sl.size;
	kvf__store_warm_pages(&j->store, bytes);
}

/*
 * With @mu held: is there room for @bytes at the append position? Switches
 * to the other file when the current one is full and the other is free
 * (everything in it moved into LMDB and synced there).
 */
static bool room(struct kvf__journal *j, uint64_t bytes)
{
	struct kvf__flow *w = &j->flow;
	struct kvf__sidelog_file *o = &j->sl.f[!w->cur];

	if (j->sl.f[w->cur].end + bytes <= j->sl.size)
		return true;
	if (o->hi_seq > w->durable_seq)
		return false;
	/*
	 * A move may still be reading @o: a run of skip frames, whose
	 * records LMDB already has, leaves @o free by @hi_seq before the
	 * mover has passed them. Reusing it now would overwrite them under
	 * the move, which read the new bytes as damaged frames (a move's
	 * MDB_CORRUPTED, and the appends waiting for room failed with
	 * it). The move ends soon and wakes the waiters (kvf__flow_move()).
	 */
	if (w->move_reading == !w->cur)
		return false;
	/* Everything in @o is moved: the next frame to move is at the
	 * start of the file just filled, if the mover is still in @o. */
	if (w->ing == !w->cur) {
		w->ing = w->cur;
		w->ing_off = KVF__SIDELOG_DATA;
	}
	w->cur = !w->cur;
	kvf__sidelog_reuse(&j->sl, w->cur);
	return true;
}

/*
 * With @mu held: wait until @bytes fit, or return the error of a move or
 * sync that failed meanwhile (the side log is full and cannot be freed).
 * @appender: the caller is a side log append, which also waits while a
 * direct append owns the order (see "Direct appends" below). It takes
 * its sequences when this returns, with @mu held throughout, so no
 * direct commit can start between the check and the frame: a check made
 * before sleeping here once let a direct commit and a side log frame
 * take the same sequences (acknowledged batches lost, replicas
 * overlapping after recovery).
 */
static int wait_room(struct kvf__journal *j, uint64_t bytes, bool appender)
{
	struct kvf__flow *w = &j->flow;
	uint64_t mgen = w->move_gen, sgen = w->sync_gen;

	for (;;) {
		if (appender && w->direct) {
			pthread_cond_wait(&w->cv, &j->mu);
			continue;
		}
		if (room(j, bytes))
			return KVF_OK;
		if (j->stop)
			return KVF_ERR_CLOSED;
		if (w->move_gen != mgen && w->move_err)
			return w->move_err;
		if (w->sync_gen != sgen && w->sync_err)
			return w->sync_err;
		w->sync_now++;
		pthread_cond_signal(&j->work_cv);
		pthread_cond_signal(&j->sync_cv);
		pthread_cond_wait(&w->cv, &j->mu);
		w->sync_now--;
	}
}

int kvf__flow_append(struct kvf__journal *j, struct kvf__jreq *req,
		    uint64_t hash)
{
	struct kvf__flow *w = &j->flow;
	uint64_t bytes = kvf__sidelog_frame_bytes(req->b.len);
	int rc = KVF_OK;

	if (w->sync_failed)
		return w->sync_failed;
	rc = KVF__FAULT(kvf__take_errno_fault(j));
	if (!rc)
		rc = wait_room(j, bytes, true);
	if (!rc && w->sync_failed)
		rc = w->sync_failed; /* failed while we waited */
	if (!rc) {
		kvf__sidelog_put(&j->sl, w->cur, &req->b, hash,
				 w->acked_seq + 1);
		w->acked_seq += req->b.nr_recs;
		if (j->sl.strict) {
			kvf__note_appender(j, kvf__now_ns());
			w->unsynced++;
		}
		w->pending_bytes += bytes;
		if (!w->pending_since) {
			w->pending_since = kvf__now_ns();
			pthread_cond_signal(&j->work_cv);
		} else if (w->pending_bytes >= MOVE_BYTES &&
			   w->pending_bytes - bytes < MOVE_BYTES) {
			pthread_cond_signal(&j->work_cv);
		}
		kvf__mark_dirty(j);
	}
	return rc;
}

/*
 * With @mu held: wait until the LMDB log ends at the side log's movable
 * end (@all: at its acknowledged end, which in STRICT mode also counts
 * frames written but not synced yet), or a move or sync fails meanwhile
 * (its status is returned).
 */
static int drain_to(struct kvf__journal *j, bool all)
{
	struct kvf__flow *w = &j->flow;
	uint64_t gen = w->move_gen;
	int rc = KVF_OK;

	if (!w->on)
		return KVF_OK;
	w->drain++;
	pthread_cond_signal(&j->work_cv);
	while (j->st.last_seq != (all ? w->acked_seq : kvf__flow_movable(j))) {
		if (w->move_gen != gen && w->move_err) {
			rc = w->move_err;
			break;
		}
		if (w->sync_failed) {
			rc = w->sync_failed;
			break;
		}
		if (j->stop && !j->started) {
			rc = KVF_ERR_CLOSED;
			break;
		}
		pthread_cond_wait(&w->cv, &j->mu);
	}
	w->drain--;
	return rc;
}

/*
 * With @mu held: wait until everything acknowledged is in the LMDB log,
 * or a move fails meanwhile (its status is returned).
 */
int kvf__flow_drain(struct kvf__journal *j)
{
	return drain_to(j, false);
}

/*
 * Direct appends. A batch larger than half a file goes to LMDB directly
 * (writer.c), in sequence order. Its sequences are decided by @direct:
 * once it is set, no side log frame is written (wait_room()) until
 * kvf__flow_direct_end(); every frame written before is moved into LMDB
 * first (in STRICT mode including frames still waiting for their sync),
 * so LMDB's log ends exactly at the last sequence handed out and the
 * direct commit takes the next ones. Its sequences are then missing from
 * the side log, so a skip frame records them, or recovery would see a
 * gap and stop before the frames that follow. Its room is taken before
 * the commit, so writing it cannot fail afterwards.
 */
int kvf__flow_direct_begin(struct kvf__journal *j)
{
	struct kvf__flow *w = &j->flow;
	int rc;

	while (w->direct)
		pthread_cond_wait(&w->cv, &j->mu);
	w->direct = 1;
	rc = w->sync_failed;
	if (!rc)
		rc = drain_to(j, true);
	if (!rc)
		rc = wait_room(j, KVF__SIDELOG_HDR, false);
	if (rc) {
		w->direct = 0;
		pthread_cond_broadcast(&w->cv);
	}
	return rc;
}

void kvf__flow_direct_end(struct kvf__journal *j, int rc)
{
	struct kvf__flow *w = &j->flow;

	if (!rc) {
		kvf__sidelog_put_skip(&j->sl, w->cur, w->acked_seq + 1,
				      j->st.last_seq - w->acked_seq);
		w->acked_seq = j->st.last_seq;
		/* STRICT: drained (all synced) and the commit was synced. */
		if (j->sl.strict)
			w->synced_seq = j->st.last_seq;
		/*
		 * Nothing is left to move (LMDB has the skip frame's records),
		 * so no move timer starts: the next append starts it, and
		 * wakes the writer (a timer started here never woke it, and
		 * moves then waited for the side log to fill).
		 */
		w->pending_bytes += KVF__SIDELOG_HDR;
		kvf__mark_dirty(j);
	}
	w->direct = 0;
	pthread_cond_broadcast(&w->cv);
}

/*
 * STRICT group sync. An append is acknowledged once an fdatasync() that
 * started after its write has returned. One appender at a time syncs, for
 * every frame written so far (a sync covers all of them, in both files);
 * the others wait for it and are done if it covered them. A group forms
 * before a sync starts: an appender that finds no sync running and fewer
 * unsynced appends than threads that appended recently waits (at most half
 * an average sync, never more than 300 us: kvf__gather_wait_ns()) for the
 * others; the appender that completes the group syncs at once, so nobody
 * sleeps between the last append and the sync (a waiting leader that had
 * to be woken by the last append cost a wake-up per sync: 2 threads 140 us
 * per batch against 131 now, journal bench without moves). Without a group,
 * two appenders fall into lockstep, each sync carrying one batch while the
 * other thread prepares its next, and a second thread adds nothing
 * (measured: 2 threads 0.98-1.2x one). Letting every appender sync on its
 * own, overlapping, did not help either: the device serialises the cache
 * flushes. A failed sync is sticky (appends are refused until the journal
 * is reopened): the batches it covered may or may not be on disk (Linux
 * reports a failed writeback once), so nothing may be acknowledged after
 * them, and they are not moved into LMDB.
 */
/* With @mu held, as the one syncing appender: sync everything copied. */
static void lead_sync(struct kvf__journal *j)
{
	struct kvf__flow *w = &j->flow;
	uint64_t target, t0, took;
	int files[2], n = 0, rc = 0;

	w->syncing = 1;
	target = w->acked_seq;
	w->unsynced = 0;
	files[n++] = w->cur;
	if (j->sl.f[!w->cur].hi_seq > w->synced_seq)
		files[n++] = !w->cur;
	pthread_mutex_unlock(&j->mu);
	t0 = kvf__now_ns();
	for (int i = 0; i < n && !rc; i++)
		rc = kvf__sidelog_sync_file(&j->sl, files[i]);
	took = kvf__now_ns() - t0;
	pthread_mutex_lock(&j->mu);
	w->sync_ns = w->sync_ns ? (7 * w->sync_ns + took) / 8 : took;
	if (rc && !w->sync_failed)
		w->sync_failed = kvf__journal_status(rc);
	if (!w->sync_failed && target > w->synced_seq) {
		/*
		 * Frames became movable. A writer that found none sleeps
		 * with no timer (kvf__flow_move_due()), and nothing else
		 * would wake it: a drain (checkpoint, flush) then waited
		 * forever (test_journal_concurrent hung once).
		 */
		if (w->synced_seq == j->st.last_seq)
			pthread_cond_signal(&j->work_cv);
		w->synced_seq = target;
	}
	w->syncing = 0;
	pthread_cond_broadcast(&w->strict_cv);
	pthread_cond_broadcast(&w->cv);
}

int kvf__flow_strict_sync(struct kvf__journal *j, uint64_t seq)
{
	struct kvf__flow *w = &j->flow;
	uint64_t now, deadline = 0;
	struct timespec ts;

	for (;;) {
		if (w->synced_seq >= seq)
			return KVF_OK; /* durable before any failure */
		if (w->sync_failed)
			return w->sync_failed;
		if (w->syncing) {
			pthread_cond_wait(&w->strict_cv, &j->mu);
			continue;
		}
		now = kvf__now_ns();
		if (!deadline)
			deadline = now + kvf__gather_wait_ns(w->sync_ns);
		if (j->stop || now >= deadline ||
		    kvf__group_complete(j, now, w->sync_ns, w->unsynced)) {
			lead_sync(j);
			continue;
		}
		kvf__deadline_ts(deadline, &ts);
		pthread_cond_timedwait(&w->strict_cv, &j->mu, &ts);
	}
}

/* --- Moving frames into LMDB (the writer thread). --- */

/*
 * With @mu held: the frames of the next move, every pending one up to the
 * end of the file they are in. No cap: moves alternate with checkpoint
 * chunks (~65 ms each), and a move capped at a few MB would fall behind
 * the appends (the side log fills up and appends wait).
 */
static void next_range(struct kvf__journal *j, struct frame_range *r)
{
	struct kvf__flow *w = &j->flow;
	struct kvf__sidelog_file *f;

	if (w->ing != w->cur && w->ing_off == j->sl.f[w->ing].end) {
		w->ing = w->cur;
		w->ing_off = KVF__SIDELOG_DATA;
	}
	f = &j->sl.f[w->ing];
	r->map = f->map;
	r->from = r->to = w->ing_off;
	if (!j->sl.strict) {
		r->to = f->end;
		return;
	}
	/* STRICT: only frames known durable (kvf__flow_strict_sync()). */
	while (r->to < f->end) {
		struct kvf__sidelog_frame fr;

		kvf__sidelog_frame_read(f->map, r->to, &fr);
		if (fr.first_seq + fr.nr_recs - 1 > w->synced_seq)
			break;
		r->to += kvf__sidelog_frame_bytes(fr.len);
	}
}

bool kvf__flow_move_due(struct kvf__journal *j, uint64_t now,
		       uint64_t *deadline)
{
	struct kvf__flow *w = &j->flow;
	uint64_t due;

	if (!w->on || kvf__flow_movable(j) == j->st.last_seq)
		return false;
	if (now < w->retry_ns) {
		*deadline = w->retry_ns;
		return false;
	}
	if (w->drain || w->sync_now || j->stop ||
	    w->pending_bytes >= MOVE_BYTES)
		return true;
	due = w->pending_since + MOVE_NS;
	if (now >= due)
		return true;
	*deadline = due;
	return false;
}

int kvf__flow_move(struct kvf__journal *j)
{
	struct kvf__flow *w = &j->flow;
	struct frame_range r = { 0 };
	unsigned delay_us = KVF__FAULT(j->move_delay_us);
	int rc;

	next_range(j, &r);
	w->move_reading = w->ing; /* room() leaves that file alone */
	pthread_mutex_unlock(&j->mu);
	if (delay_us)
		usleep(delay_us); /* kvf__journal_slow_moves() */
	rc = kvf__commit_frames(j, put_range, &r); /* returns with @mu */
	w->move_reading = -1;
	if (!rc) {
		/*
		 * The mover is still where this move began: only room()
		 * moves it to another file, and room() leaves the file a
		 * move reads alone (@move_reading), so r.to is an offset in
		 * the mover's file.
		 */
		w->ing_off = r.to;
		w->pending_bytes -= r.to - r.from;
		w->pending_since = w->acked_seq == j->st.last_seq ?
					   0 : kvf__now_ns();
		w->retry_ns = 0;
		if (j->sl.strict) /* STRICT commits are synced */
			w->durable_seq = j->st.last_seq;
	} else {
		w->retry_ns = kvf__now_ns() + MOVE_RETRY_NS;
	}
	w->move_err = rc;
	w->move_gen++;
	pthread_cond_broadcast(&w->cv);
	if (w->sync_now)
		pthread_cond_signal(&j->sync_cv);
	return rc;
}

/* --- Syncing (the syncer thread). --- */

/*
 * With @mu held, for the periodic sync: the side log's part, fdatasync()
 * of the files written since the last sync. Returns 0 or an errno value.
 * Drops @mu meanwhile.
 */
int kvf__flow_sync(struct kvf__journal *j)
{
	int dirty[2], rc = 0;

	for (int i = 0; i < 2; i++) {
		dirty[i] = j->sl.f[i].dirty;
		j->sl.f[i].dirty = 0;
	}
	pthread_mutex_unlock(&j->mu);
	for (int i = 0; i < 2; i++)
		if (dirty[i] && !rc)
			rc = kvf__sidelog_sync_file(&j->sl, i);
	pthread_mutex_lock(&j->mu);
	if (rc)
		for (int i = 0; i < 2; i++)
			j->sl.f[i].dirty |= dirty[i];
	return rc;
}

/*
 * With @mu held, after a periodic sync that started when LMDB's log ended
 * at @seq: record the outcome and wake appenders waiting for a free file.
 */
void kvf__flow_synced(struct kvf__journal *j, uint64_t seq, int rc)
{
	struct kvf__flow *w = &j->flow;

	if (!rc && seq > w->durable_seq)
		w->durable_seq = seq;
	w->sync_err = rc ? kvf__journal_status(rc) : 0;
	w->sync_gen++;
	pthread_cond_broadcast(&w->cv);
}
