/* SPDX-License-Identifier: MIT */
/*
 * journal/writer.c - appends, the writer thread, group commit, checkpoints.
 *
 * LMDB serialises write transactions, so exactly one thread at a time
 * holds the transaction slot (@busy, under @mu). Callers encode their
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
 * is synced after the copy (STRICT, group sync; wal.c), and the writer
 * thread moves them into the LMDB log in large groups. Only a batch too
 * large for the side log still goes through the queue (a "direct"
 * append, in order); the STRICT gather() below serves those.
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
 * transaction open, see journal.c) and retries the same group.
 *
 * Durability: STRICT opens the environment without MDB_NOSYNC, so each
 * commit (appends and fold chunks alike) is synced before it returns.
 * BOUNDED uses MDB_NOMETASYNC (plus MDB_WRITEMAP when configured): a
 * commit (a side log move or a fold chunk, on the writer thread) syncs its
 * data pages but not its meta page, which the next commit's sync or the
 * syncer's covers, so an OS crash can cost LMDB its last commit but never
 * leave a meta page pointing at unwritten pages (which MDB_NOSYNC could:
 * a damaged file). The commit lost that way is still in the side log,
 * whose files are reused only once the syncer has synced LMDB past them.
 * The syncer syncs the side log and the file once sync_interval_ms has
 * passed since the first unsynced append or commit. With MDB_WRITEMAP a commit stores into the shared mapping and
 * makes no system call (no pwritev copy of the dirty pages); the map is
 * always fully allocated on disk (journal.c: kvf__jback()), so a full disk
 * shows up as ENOSPC when the map grows, never as SIGBUS. The first store
 * into a fresh page of the map would fault on the caller's thread (page
 * cache fill, zeroing, block reservation), so a committing leader asks
 * the writer thread to keep the next PF_WINDOW bytes beyond LMDB's last
 * page prefaulted (MADV_POPULATE_WRITE; see prefault()). Populating
 * dirties those pages, so each periodic sync writes back and
 * write-protects the part of the window LMDB has not reached yet; the
 * syncer then asks for that part again (want_reprefault()), or the caller
 * would take a write-protect fault on each of those pages. Before each
 * sync the syncer also unmaps the log written more than ZAP_MARGIN behind
 * the end (unmap_behind()): writing back a mapped page write-protects it
 * with a TLB flush, an IPI to the caller's CPU, per page.
 *
 * Checkpoints: when the log holds checkpoint_records records (or
 * kvf__journal_checkpoint() asks), the writer folds the oldest frames into
 * the image, at most fold_chunk records per transaction, and advances
 * checkpoint_seq in the same transaction. The slot alternates between
 * groups and chunks, so a checkpoint never stalls callers for more than
 * one chunk.
 *
 * Locking: @mu protects the queue, the counters and the checkpoint
 * request; it is never held across LMDB calls or I/O.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <time.h>

#include "base/die.h"
#include "journal/jint.h"
#include "metadata/hash.h"

#define NSEC_PER_MSEC 1000000ull
/* Longest a STRICT group waits for other appenders (kvf__gather_wait_ns). */
#define GATHER_MAX_NS 300000ull
/* Who holds the transaction slot (@busy): nobody is 0. */
#define SLOT_APPEND 1
#define SLOT_FOLD 2
/* With MDB_WRITEMAP, keep this much of the map prefaulted ahead. */
#define PF_WINDOW (2ull << 20)
/* Before a sync, unmap the log written more than this behind the end. */
#define ZAP_MARGIN (1ull << 20)
/* Below this much free space, a failed write means "disk full". */
#define KVF__NEARLY_FULL (4ull << 20)

/* --- Caller side: encoding a batch into frames. --- */

static void frame_close(uint8_t *frame, size_t len, uint32_t nr)
{
	uint32_t vlen = (uint32_t)(len - 4);

	memcpy(frame, &vlen, 4);
	frame[4] = (uint8_t)nr;
	frame[5] = (uint8_t)(nr >> 8);
}

/* Make room for @need bytes at @req->buf; it grows at least twofold. */
static int buf_reserve(struct kvf__jreq *req, size_t need)
{
	size_t cap = req->cap * 2 > need ? req->cap * 2 : need;
	uint8_t *buf;

	if (need <= req->cap)
		return KVF_OK;
	buf = realloc(req->buf, cap);
	if (!buf)
		return KVF_ERR_NO_MEMORY;
	req->buf = buf;
	req->cap = cap;
	return KVF_OK;
}

/*
 * Encode @recs into @req->buf as frames: each is a u32 (host order) value
 * length, then the value (u16 LE count, records). A frame is closed when
 * the next record would push it past KVF__FRAME_TARGET. One pass: each
 * record is validated and bounded once (the buffer, kept between appends,
 * rarely has to grow).
 */
static int encode_batch(const struct kvf__jrec *recs, size_t n,
			struct kvf__jreq *req)
{
	size_t off = 0, frame = 0;
	uint32_t in_frame = 0;

	for (size_t i = 0; i < n; i++) {
		size_t max;

		if (kvf__jrec_validate(&recs[i]))
			return KVF_ERR_INVALID_ARGUMENT;
		max = kvf__jrec_encoded_max(&recs[i]);
		if (in_frame && (off - frame - 4 + max > KVF__FRAME_TARGET ||
				 in_frame == KVF__FRAME_MAX_RECS)) {
			frame_close(req->buf + frame, off - frame, in_frame);
			in_frame = 0;
		}
		if (buf_reserve(req, off + 4 + KVF__FRAME_HDR + max))
			return KVF_ERR_NO_MEMORY;
		if (!in_frame) {
			frame = off;
			off += 4 + KVF__FRAME_HDR;
			req->nr_frames++;
		}
		off += kvf__jrec_encode(&recs[i], req->buf + off);
		in_frame++;
	}
	frame_close(req->buf + frame, off - frame, in_frame);
	req->len = off;
	req->nr_recs = n;
	return KVF_OK;
}

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

/* A pending injected fault for this commit, or 0. */
static int take_fault(struct kvf__journal *j)
{
	int code;

	pthread_mutex_lock(&j->mu);
	code = take_fault_locked(j, false);
	pthread_mutex_unlock(&j->mu);
	return code;
}

int kvf__take_errno_fault(struct kvf__journal *j)
{
	int code = take_fault_locked(j, true);

	return code ? kvf__journal_status(code) : KVF_OK;
}
#endif

/*
 * Grow the map: double it, or with MDB_WRITEMAP by a quarter
 * (kvf__jmap_step(): every byte of that map is allocated on disk). With
 * MDB_WRITEMAP the map
 * is exactly the backed (fallocated) part of the file, so LMDB can never
 * store into a block the file system might fail to provide (SIGBUS): the
 * new part is backed first, and a full disk fails the transaction that
 * needed the room (ENOSPC) and leaves the map as it was; a later grow
 * retries.
 */
int kvf__jgrow(struct kvf__journal *j)
{
	uint64_t size = j->map_size + (j->writemap ? kvf__jmap_step(j->map_size) :
						   j->map_size);
	int rc;

	pthread_mutex_lock(&j->map_mu); /* no prefault during the remap */
	rc = kvf__jback(j, size);
	if (!rc)
		rc = mdb_env_set_mapsize(j->env, size);
	j->map_addr = NULL; /* it may have moved */
	pthread_mutex_unlock(&j->map_mu);
	if (rc)
		return rc;
	pthread_mutex_lock(&j->mu);
	j->map_size = size;
	j->map_grows++;
	j->pf_to = 0;
	pthread_mutex_unlock(&j->mu);
	return 0;
}

static int begin(struct kvf__journal *j, MDB_txn **txn)
{
	int rc = mdb_txn_begin(j->env, NULL, 0, txn);

	if (rc == MDB_MAP_RESIZED) { /* another process grew it: adopt */
		MDB_envinfo info;

		rc = mdb_env_set_mapsize(j->env, 0);
		if (!rc)
			rc = mdb_env_info(j->env, &info);
		if (!rc)
			rc = kvf__jback(j, info.me_mapsize);
		if (!rc)
			rc = mdb_txn_begin(j->env, NULL, 0, txn);
	}
	return rc;
}

/*
 * LMDB reports a short write (what a full disk gives a multi-page
 * pwritev) as EIO. Tell the two apart by the free space left: a
 * transaction that could not be written leaves less than it needed.
 */
static int classify_eio(struct kvf__journal *j)
{
	struct statvfs sv;

	if (statvfs(j->dir, &sv))
		return EIO;
	if ((uint64_t)sv.f_bavail * sv.f_frsize < KVF__NEARLY_FULL)
		return ENOSPC;
	return EIO;
}

/*
 * Commit @txn unless @rc already failed or a fault is injected; abort
 * otherwise. Returns the final LMDB/errno code.
 */
static int finish(struct kvf__journal *j, MDB_txn *txn, int rc)
{
	int fault = rc ? 0 : KVF__FAULT(take_fault(j));

	if (rc || fault) {
		mdb_txn_abort(txn);
		return rc ? rc : fault;
	}
	rc = mdb_txn_commit(txn);
	return rc == EIO ? classify_eio(j) : rc;
}

int kvf__put_frames(MDB_txn *txn, MDB_dbi log, const uint8_t *buf,
		    uint32_t nr_frames, uint64_t *seq, uint64_t *frames)
{
	uint8_t k[8];
	MDB_val key = { 8, k }, val;
	size_t off = 0;
	int rc = 0;

	for (uint32_t f = 0; f < nr_frames && !rc; f++) {
		uint32_t vlen;

		memcpy(&vlen, buf + off, 4);
		val.mv_size = vlen;
		val.mv_data = (void *)(buf + off + 4);
		kvf__put_be64(k, *seq + 1);
		rc = mdb_put(txn, log, &key, &val, MDB_APPEND);
		*seq += (uint32_t)buf[off + 4] | (uint32_t)buf[off + 5] << 8;
		off += 4 + vlen;
		(*frames)++;
	}
	return rc;
}

/* Every batch of a group of queued requests. */
static int put_group(struct kvf__journal *j, MDB_txn *txn, void *arg,
		     uint64_t *seq, uint64_t *frames)
{
	int rc = 0;

	for (struct kvf__jreq *r = arg; r && !rc; r = r->next)
		rc = kvf__put_frames(txn, j->dbs.log, r->buf, r->nr_frames,
				     seq, frames);
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
 * The address of our mapping of data.mdb: LMDB does not expose it, so
 * find the mapping of the file's device and inode, from offset 0, as long
 * as the map, in /proc/self/maps. NULL if there is none.
 */
static uint8_t *find_map(struct kvf__journal *j, uint64_t size)
{
	unsigned long lo, hi, off, ino;
	unsigned int maj, mnr;
	mdb_filehandle_t fd;
	uint8_t *addr = NULL;
	char line[4096];
	struct stat sb;
	FILE *f;

	if (mdb_env_get_fd(j->env, &fd) || fstat(fd, &sb))
		return NULL;
	f = fopen("/proc/self/maps", "re");
	if (!f)
		return NULL;
	while (!addr && fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx-%lx %*s %lx %x:%x %lu", &lo, &hi, &off,
			   &maj, &mnr, &ino) == 6 &&
		    off == 0 && hi - lo == size && ino == sb.st_ino &&
		    maj == major(sb.st_dev) && mnr == minor(sb.st_dev))
			addr = (uint8_t *)lo;
	fclose(f);
	return addr;
}

/*
 * With @mu held, after an append commit whose last page ends at @end:
 * when fewer than PF_WINDOW / 2 prefaulted bytes are left beyond it, ask
 * the writer thread to prefault the next PF_WINDOW.
 */
static void want_prefault(struct kvf__journal *j, uint64_t end)
{
	if (!j->writemap || j->pf_off)
		return;
	j->pf_end = end;
	if (end + PF_WINDOW / 2 <= j->pf_to)
		return;
	j->pf_from = end > j->pf_to ? end : j->pf_to;
	j->pf_to = end + PF_WINDOW;
	if (j->pf_to > j->map_size)
		j->pf_to = j->map_size;
	if (j->pf_from >= j->pf_to)
		return;
	j->pf_pending = 1;
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
	if (!j->writemap || j->pf_off || j->pf_end >= j->pf_to)
		return;
	if (!j->pf_pending || j->pf_end < j->pf_from)
		j->pf_from = j->pf_end;
	j->pf_pending = 1;
	pthread_cond_signal(&j->work_cv);
}

/*
 * Syncer, before a sync, without @mu: drop our page-table entries for the
 * map below @end - ZAP_MARGIN (MADV_DONTNEED; only what was not dropped
 * before). A sync write-protects every dirty page it writes back that is
 * mapped, one TLB flush, hence one IPI to the CPU running the appending
 * caller, per page: with MDB_WRITEMAP that was most of a sync's cost and
 * slowed ~15% of the caller's batches 2-3x while it ran. Pages of a
 * shared file mapping keep their contents and dirty state in the page
 * cache when unmapped, so the sync still writes them, without touching
 * page tables; the log below the end is rarely touched again (checkpoints
 * and LMDB's reuse of freed pages fault them back in, from the page
 * cache). @map_mu keeps a remap out meanwhile.
 */
static void unmap_behind(struct kvf__journal *j, uint64_t end)
{
	uint64_t to;

	if (!j->writemap || end < ZAP_MARGIN)
		return;
	to = (end - ZAP_MARGIN) & ~((uint64_t)j->psize - 1);
	pthread_mutex_lock(&j->map_mu);
	if (j->map_addr && to > j->zap_to &&
	    !madvise(j->map_addr + j->zap_to, to - j->zap_to, MADV_DONTNEED))
		j->zap_to = to;
	pthread_mutex_unlock(&j->map_mu);
}

/*
 * Writer thread, with @mu held: populate the requested part of the map
 * writable (MADV_POPULATE_WRITE), so that LMDB's first stores into those
 * pages, on the caller's thread, find them mapped and allocated instead
 * of faulting (page-cache fill, zeroing, block reservation). The pages
 * lie beyond LMDB's last page: nothing reads them, and populating never
 * changes their contents, so racing with a store of the slot holder is
 * harmless; @map_mu keeps a remap out meanwhile.
 */
static void prefault(struct kvf__journal *j)
{
	uint64_t from = j->pf_from, to = j->pf_to;
	MDB_envinfo info;
	int off = 0;

	j->pf_pending = 0;
	pthread_mutex_unlock(&j->mu);
	pthread_mutex_lock(&j->map_mu);
	if (!mdb_env_info(j->env, &info) && to <= info.me_mapsize) {
		if (!j->map_addr)
			j->map_addr = find_map(j, info.me_mapsize);
		if (j->map_addr && madvise(j->map_addr + from, to - from,
					   MADV_POPULATE_WRITE))
			off = errno == EINVAL; /* not supported by this kernel */
	}
	pthread_mutex_unlock(&j->map_mu);
	pthread_mutex_lock(&j->mu);
	j->pf_off |= off;
}

/*
 * Write what @fn puts in one transaction, growing the map as needed; then
 * publish the new end of the log. Returns a kvf_status.
 */
int kvf__commit_frames(struct kvf__journal *j, kvf__frames_fn fn, void *arg)
{
	uint64_t seq, frames, end = 0;
	MDB_envinfo info;
	MDB_txn *txn;
	int rc;

	for (;;) {
		seq = j->st.last_seq;
		frames = 0;
		rc = begin(j, &txn);
		if (rc)
			break;
		rc = finish(j, txn, fn(j, txn, arg, &seq, &frames));
		if (rc != MDB_MAP_FULL)
			break;
		rc = kvf__jgrow(j);
		if (rc)
			break;
	}
	if (!rc && j->writemap && !mdb_env_info(j->env, &info))
		end = (info.me_last_pgno + 1) * j->psize;
	pthread_mutex_lock(&j->mu);
	if (rc)
		return kvf__journal_status(rc);
	j->st.last_seq = seq;
	j->st.log_frames += frames;
	j->commits++;
	j->fold_blocked = 0;
	kvf__mark_dirty(j);
	want_prefault(j, end);
	return KVF_OK;
}

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
	const struct kvf__jdbs *dbs;
	struct fold_item *items;
	size_t n, cap;
	char *arena;
	size_t used, arena_cap;
};

static bool is_object(const struct kvf__jrec *rec)
{
	return rec->type == KVF__JREC_OBJECT_PUT ||
	       rec->type == KVF__JREC_OBJECT_REPLICAS ||
	       rec->type == KVF__JREC_OBJECT_REMOVE;
}

/* Copy @len bytes into the arena; returns their offset, or SIZE_MAX. */
static size_t arena_copy(struct fold *f, const char *p, size_t len)
{
	size_t off = f->used;

	if (f->used + len > f->arena_cap) {
		size_t cap = f->arena_cap ? 2 * f->arena_cap : 1 << 20;
		char *a;

		while (cap < f->used + len)
			cap *= 2;
		a = realloc(f->arena, cap);
		if (!a)
			return SIZE_MAX;
		f->arena = a;
		f->arena_cap = cap;
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
	struct fold_item *it;

	(void)idx;
	if (f->n == f->cap) {
		size_t cap = f->cap ? 2 * f->cap : 4096;
		struct fold_item *items = realloc(f->items, cap * sizeof(*items));

		if (!items)
			return ENOMEM;
		f->items = items;
		f->cap = cap;
	}
	it = &f->items[f->n];
	it->rec = *rec;
	it->pos = f->n;
	it->order = 0;
	it->key_off = it->name_off = it->endpoint_off = 0;
	if (is_object(rec)) {
		it->order = kvf__key_hash(rec->obj.key, rec->obj.key_len) | 1;
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

		if (is_object(r))
			r->obj.key = f->arena + f->items[i].key_off;
		else if (r->type == KVF__JREC_SEGMENT_MOUNT) {
			r->mount.name = f->arena + f->items[i].name_off;
			r->mount.endpoint = f->arena + f->items[i].endpoint_off;
		}
		rc = kvf__image_apply(f->txn, f->dbs, r);
	}
	return rc;
}

static int meta_put_u64(MDB_txn *txn, MDB_dbi dbi, const char *name,
			uint64_t v)
{
	MDB_val key = { strlen(name), (void *)name }, val = { 8, &v };

	return mdb_put(txn, dbi, &key, &val, 0);
}

static int entries(MDB_txn *txn, MDB_dbi dbi, uint64_t *n)
{
	MDB_stat s;
	int rc = mdb_stat(txn, dbi, &s);

	*n = s.ms_entries;
	return rc;
}

/*
 * Fold up to fold_chunk records from the head of the log into the image,
 * in one transaction. @st receives the new state.
 */
static int fold_txn(struct kvf__journal *j, uint64_t target,
		    struct kvf__jstate *st)
{
	struct fold f = { .dbs = &j->dbs };
	MDB_cursor *cur;
	MDB_val key, val;
	uint64_t done = 0, seq;
	uint32_t count;
	int rc;

	rc = begin(j, &f.txn);
	if (rc)
		return rc;
	*st = j->st;
	rc = mdb_cursor_open(f.txn, j->dbs.log, &cur);
	if (rc)
		goto out;
	while (done < j->cfg.fold_chunk && st->ckpt_seq < st->last_seq &&
	       !(rc = mdb_cursor_get(cur, &key, &val, MDB_FIRST))) {
		seq = key.mv_size == 8 ? kvf__get_be64(key.mv_data) : 0;
		if (seq != st->ckpt_seq + 1) {
			rc = MDB_CORRUPTED;
			break;
		}
		rc = kvf__frame_decode(&val, &count, fold_record, &f);
		if (rc == KVF_ERR_JOURNAL_CORRUPT)
			rc = MDB_CORRUPTED;
		if (!rc)
			rc = mdb_cursor_del(cur, 0);
		if (rc)
			break;
		st->ckpt_seq += count;
		st->log_frames--;
		done += count;
	}
	mdb_cursor_close(cur);
	if (rc == MDB_NOTFOUND)
		rc = MDB_CORRUPTED; /* the log ended before last_seq */
	if (!rc)
		rc = fold_apply(&f);
	if (rc)
		goto out;
	if (st->ckpt_seq >= target)
		st->ckpt_count++;
	rc = meta_put_u64(f.txn, j->dbs.meta, KVF__META_CKPT_SEQ, st->ckpt_seq);
	if (!rc)
		rc = meta_put_u64(f.txn, j->dbs.meta, KVF__META_CKPT_COUNT,
				  st->ckpt_count);
	if (!rc)
		rc = entries(f.txn, j->dbs.objs, &st->objects);
	if (!rc)
		rc = entries(f.txn, j->dbs.segs, &st->segments);
	if (!rc)
		rc = entries(f.txn, j->dbs.clients, &st->clients);
out:
	free(f.items);
	free(f.arena);
	return finish(j, f.txn, rc);
}

/* One fold chunk towards @target; returns a kvf_status. */
static int fold_chunk(struct kvf__journal *j, uint64_t target)
{
	struct kvf__jstate st;
	int rc;

	while ((rc = fold_txn(j, target, &st)) == MDB_MAP_FULL) {
		rc = kvf__jgrow(j);
		if (rc)
			break;
	}
	if (rc)
		return kvf__journal_status(rc);
	pthread_mutex_lock(&j->mu);
	j->st = st; /* only this thread changes it */
	j->commits++;
	kvf__mark_dirty(j);
	pthread_mutex_unlock(&j->mu);
	return KVF_OK;
}

/* With @mu held: is there folding to do? Starts a threshold checkpoint. */
static int fold_wanted(struct kvf__journal *j)
{
	uint64_t log = j->st.last_seq - j->st.ckpt_seq;

	if (j->ckpt_target <= j->st.ckpt_seq && !j->fold_blocked &&
	    log && log >= j->cfg.checkpoint_records)
		j->ckpt_target = j->st.last_seq;
	return j->ckpt_target > j->st.ckpt_seq && !j->fold_blocked;
}

/* --- Group commit: leaders and followers. --- */

/* With @mu held: the calling thread appends now. */
void kvf__note_appender(struct kvf__journal *j, uint64_t now)
{
	struct kvf__jappender *mine = NULL, *oldest = &j->appenders[0];
	pthread_t self = pthread_self();

	for (int i = 0; i < KVF__JAPPENDERS && !mine; i++) {
		struct kvf__jappender *a = &j->appenders[i];

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
		n += j->appenders[i].last_ns &&
		     j->appenders[i].last_ns + window_ns >= now;
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
	deadline = now + kvf__gather_wait_ns(j->commit_ns);
	j->leader_waiting = 1;
	while (!j->stop && now < deadline &&
	       !kvf__group_complete(j, now, j->commit_ns, j->nr_queued)) {
		kvf__deadline_ts(deadline, &ts);
		pthread_cond_timedwait(&j->lead_cv, &j->mu, &ts);
		now = kvf__now_ns();
	}
	j->leader_waiting = 0;
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
	bool others = j->head ||
		      (j->wal.on && kvf__wal_movable(&j->wal) != j->st.last_seq);

	j->busy = 0;
	if (!j->stop && fold_wanted(j) && (!was_fold || !others)) {
		j->busy = SLOT_FOLD;
		pthread_cond_signal(&j->work_cv);
		return;
	}
	if (j->head)
		pthread_cond_signal(&j->head->cv);
	if (j->stop)
		pthread_cond_signal(&j->work_cv);
}

/*
 * With @mu held and @j->busy taken by the caller: commit every queued
 * batch in one transaction and complete them all.
 */
static void lead(struct kvf__journal *j, int may_gather)
{
	struct kvf__jreq *group;
	uint64_t t0, took;
	int rc;

	if (may_gather)
		gather(j);
	group = j->head;
	j->head = NULL;
	j->tail = &j->head;
	j->nr_queued = 0;
	pthread_mutex_unlock(&j->mu);
	t0 = kvf__now_ns();
	rc = kvf__commit_frames(j, put_group, group);
	took = kvf__now_ns() - t0;
	if (!rc)
		j->commit_ns = j->commit_ns ? (7 * j->commit_ns + took) / 8 :
					      took;
	while (group) {
		struct kvf__jreq *next = group->next;

		group->status = rc;
		group->done = 1;
		pthread_cond_signal(&group->cv); /* @group may vanish now */
		group = next;
	}
	release(j, 0);
}

static void serve_fold(struct kvf__journal *j)
{
	uint64_t target = j->ckpt_target;
	int rc;

	pthread_mutex_unlock(&j->mu);
	rc = fold_chunk(j, target);
	pthread_mutex_lock(&j->mu);
	j->fold_err = rc;
	j->fold_gen++;
	if (rc) {
		/* Give up this checkpoint; retry after the next append. */
		j->ckpt_target = j->st.ckpt_seq;
		j->fold_blocked = 1;
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

		if (j->busy == SLOT_FOLD) {
			serve_fold(j); /* release() reserved the slot for us */
		} else if (j->pf_pending && !j->stop) {
			prefault(j); /* needs no slot */
		} else if (j->wal.pf_want && !j->stop) {
			kvf__wal_serve_prefault(j); /* needs no slot */
		} else if (j->busy) {
			pthread_cond_wait(&j->work_cv, &j->mu);
		} else if (j->head) {
			j->busy = SLOT_APPEND;
			lead(j, 0);
		} else if (kvf__wal_move_due(j, kvf__now_ns(), &deadline)) {
			j->busy = SLOT_APPEND;
			kvf__wal_move(j);
			release(j, 0);
		} else if (j->stop) {
			/* An unfinished checkpoint resumes later; frames a
			 * failing move left in the side log, at the next open. */
			break;
		} else if (fold_wanted(j)) {
			j->busy = SLOT_FOLD;
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
		if (!j->stop && !j->wal.sync_now && kvf__now_ns() < due) {
			kvf__deadline_ts(due, &ts);
			pthread_cond_timedwait(&j->sync_cv, &j->mu, &ts);
			continue;
		}
		j->dirty_since = 0;
		end = j->pf_end;
		seq = j->st.last_seq;
		wrc = j->wal.on ? kvf__wal_sync(j) : 0; /* drops @mu */
		pthread_mutex_unlock(&j->mu);
		unmap_behind(j, end);
		rc = kvf__jsync(j);
		pthread_mutex_lock(&j->mu);
		if (!rc)
			rc = wrc;
		if (j->wal.on)
			kvf__wal_synced(j, seq, rc);
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
	if (j->nr_bufs) {
		j->nr_bufs--;
		req->buf = j->bufs[j->nr_bufs];
		req->cap = j->buf_caps[j->nr_bufs];
	}
	pthread_mutex_unlock(&j->mu);
}

/* With @mu held: keep @req's buffer for a later append if there is room. */
static void buf_put(struct kvf__journal *j, struct kvf__jreq *req)
{
	if (!req->buf || j->nr_bufs == KVF__JAPPENDERS)
		return;
	j->bufs[j->nr_bufs] = req->buf;
	j->buf_caps[j->nr_bufs] = req->cap;
	j->nr_bufs++;
	req->buf = NULL;
}

/* BOUNDED: acknowledge @req through the side log (wal.c). */
static int append_wal(struct kvf__journal *j, struct kvf__jreq *req)
{
	uint64_t hash = kvf__wal_payload_hash(req);
	int rc;

	pthread_mutex_lock(&j->mu);
	rc = j->stop ? KVF_ERR_CLOSED : kvf__writer_start(j);
	if (!rc)
		rc = kvf__wal_append(j, req, hash);
	if (!rc && j->wal.strict)
		rc = kvf__wal_strict_sync(j, j->wal.acked_seq);
	buf_put(j, req);
	pthread_mutex_unlock(&j->mu);
	free(req->buf);
	return rc;
}

int kvf__journal_append(struct kvf__journal *j, const struct kvf__jrec *recs,
			size_t n)
{
	struct kvf__jreq req = { 0 };
	int rc;

	if (!n)
		return KVF_OK;
	if (!recs)
		return KVF_ERR_INVALID_ARGUMENT;
	buf_get(j, &req);
	rc = encode_batch(recs, n, &req);
	if (rc)
		goto out;
	if (j->wal.on && kvf__wal_frame_bytes(req.len) <= j->wal.size / 2)
		return append_wal(j, &req);
	if (pthread_cond_init(&req.cv, NULL)) {
		rc = KVF_ERR_NO_MEMORY;
		goto out;
	}
	pthread_mutex_lock(&j->mu);
	rc = j->stop ? KVF_ERR_CLOSED : kvf__writer_start(j);
	if (!rc && j->wal.on)
		rc = kvf__wal_direct_begin(j);
	if (!rc) {
		*j->tail = &req;
		j->tail = &req.next;
		j->nr_queued++;
		kvf__note_appender(j, kvf__now_ns());
		if (j->leader_waiting)
			pthread_cond_signal(&j->lead_cv);
		while (!req.done) {
			if (j->busy) {
				pthread_cond_wait(&req.cv, &j->mu);
				continue;
			}
			j->busy = SLOT_APPEND; /* lead: commit the queue */
			lead(j, 1);
		}
		rc = req.status;
		if (j->wal.on)
			kvf__wal_direct_end(j, rc);
	}
	buf_put(j, &req);
	pthread_mutex_unlock(&j->mu);
	pthread_cond_destroy(&req.cv);
out:
	free(req.buf);
	return rc;
}

int kvf__journal_checkpoint(struct kvf__journal *j)
{
	uint64_t target, gen;
	int rc;

	pthread_mutex_lock(&j->mu);
	rc = j->stop ? KVF_ERR_CLOSED : kvf__writer_start(j);
	if (!rc)
		rc = kvf__wal_drain(j);
	target = j->st.last_seq;
	j->fold_blocked = 0;
	if (j->ckpt_target < target)
		j->ckpt_target = target;
	pthread_cond_signal(&j->work_cv);
	while (!rc && j->st.ckpt_seq < target) {
		gen = j->fold_gen;
		while (j->fold_gen == gen)
			pthread_cond_wait(&j->ckpt_cv, &j->mu);
		rc = j->fold_err;
	}
	pthread_mutex_unlock(&j->mu);
	return rc;
}

int kvf__journal_flush(struct kvf__journal *j)
{
	int rc;

	pthread_mutex_lock(&j->mu);
	rc = j->stop ? KVF_ERR_CLOSED : kvf__writer_start(j);
	if (!rc)
		rc = kvf__wal_drain(j);
	pthread_mutex_unlock(&j->mu);
	return rc;
}
