/* SPDX-License-Identifier: MIT */
/*
 * journal/jint.h - journal internals shared by journal.c, writer.c,
 * image.c and the inspect tool. Not for the engine.
 */
#ifndef KVF_JOURNAL_JINT_H
#define KVF_JOURNAL_JINT_H

#include <lmdb.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "base/clock.h"
#include "base/fault.h"
#include "journal/journal.h"

/*
 * Log frames. One LMDB entry holds a run of consecutive records of one
 * batch: key = big-endian u64 sequence of its first record (so MDB_APPEND
 * applies), value = u16 LE record count, then the encoded records. Frames
 * are cut at ~FRAME_TARGET bytes so they stay inline in a 4 KiB leaf page
 * (no overflow pages to allocate and free) while a 128-record batch costs
 * ~6 puts instead of 128.
 */
#define KVF__FRAME_TARGET 1900u
#define KVF__FRAME_HDR 2u
#define KVF__FRAME_MAX_RECS 65535u

/* Meta database keys. */
#define KVF__META_MAGIC "magic"
#define KVF__META_VERSION "version"
#define KVF__META_CKPT_SEQ "checkpoint_seq"
#define KVF__META_CKPT_COUNT "checkpoints"
#define KVF__META_JOURNAL_ID "journal_id"
/* Present (u32 1) once the side log files were created (wal.c). */
#define KVF__META_SIDE_LOG "side_log"
#define KVF__MAGIC_VALUE "KVForge-journal"

/* The LMDB handles of one environment. */
struct kvf__jdbs {
	MDB_dbi meta;
	MDB_dbi log;
	MDB_dbi segs;    /* BE u64 segment id -> encoded SEGMENT_MOUNT */
	MDB_dbi objs;    /* BE u64 key hash ++ BE u32 tie -> encoded OBJECT_PUT */
	MDB_dbi clients; /* BE u64 client id -> u64 LE mounted segments */
};

/* What the meta database and the log ends say (read at open). */
struct kvf__jstate {
	uint32_t version;
	uint64_t id;          /* random, from creation (side log frames) */
	uint64_t ckpt_seq;
	uint64_t ckpt_count;
	uint64_t last_seq;
	uint64_t log_frames;
	uint64_t objects;
	uint64_t segments;
	uint64_t clients;
	uint32_t wal_created; /* KVF__META_SIDE_LOG is set */
};

/* One caller's batch, encoded, waiting for the writer. */
struct kvf__jreq {
	struct kvf__jreq *next;
	uint8_t *buf;        /* frames back to back: u32 len, then the value */
	size_t cap;          /* bytes allocated at @buf */
	size_t len;
	uint32_t nr_frames;
	uint64_t nr_recs;
	int status;
	int done;
	pthread_cond_t cv;
};

/* One of the two side log files (wal.c). Under the journal's @mu. */
struct kvf__jwal_file {
	int fd;
	uint8_t *map;     /* the whole file, MAP_SHARED; fixed while open */
	uint64_t end;     /* end of the last frame written since (re)use */
	uint64_t hi_seq;  /* last sequence written since (re)use, 0: none */
	uint64_t zap_to;  /* unmapped below this (syncer, see wal.c) */
	uint64_t key;     /* check key of this open's frames (wal.c) */
	int dirty;        /* written since the syncer last synced it */
};

/* Bytes of a side log frame header. */
#define KVF__WAL_HDR 32u
/* Offset of the first frame of a side log file (the file header's page). */
#define KVF__WAL_DATA 4096u

/*
 * The side log (wal.c; the writer and syncer threads in writer.c). Under the
 * journal's @mu. Sequences: @acked_seq (acknowledged, in the side log or
 * LMDB) >= @st.last_seq (in the LMDB log) >= @durable_seq (LMDB synced).
 */
struct kvf__jwal {
	int on;                 /* appends go through the side log */
	int strict;             /* STRICT: an append is written by pwritev
	                         * and synced before it returns (wal.c) */
	int cv_ok;
	uint64_t size;          /* bytes per file */
	struct kvf__jwal_file f[2];
	int cur;                /* appends go to f[cur] at f[cur].end */
	int ing;                /* the next frame to move is f[ing] at ... */
	uint64_t ing_off;       /* ... this offset */
	uint64_t ing_gen;       /* bumped when a switch moves the mover */
	uint64_t acked_seq;
	uint64_t durable_seq;
	uint64_t pending_bytes; /* payload bytes not moved into LMDB yet */
	uint64_t pending_since; /* ns of the oldest of them, 0: none */
	uint64_t pf_to;         /* f[cur] is populated up to here */
	int pf_want;            /* the writer should populate ahead */
	int sync_now;           /* an appender waits for a file to be freed */
	int drain;              /* someone waits for everything to move */
	int direct;             /* an oversize append owns the order */
	int move_err;           /* kvf_status of the last move attempt */
	uint64_t move_gen;      /* bumped after each move attempt */
	uint64_t retry_ns;      /* after a failed move: not before this */
	int sync_err;           /* kvf_status of the last periodic sync */
	uint64_t sync_gen;      /* bumped after each periodic sync */
	/*
	 * STRICT group sync (wal.c): one appender at a time syncs the side
	 * log for everyone (@syncing); @synced_seq is what is known durable,
	 * @unsynced the appends not covered by a started sync, @sync_ns a
	 * moving average of a sync. @sync_failed (a kvf_status) is sticky.
	 */
	int syncing;
	uint64_t unsynced;
	uint64_t sync_ns;
	uint64_t synced_seq;
	int sync_failed;
	pthread_cond_t cv;      /* appenders wait: room, drain, direct, sync */
	pthread_cond_t strict_cv; /* STRICT appenders wait for their sync */
};

/* A thread that appended recently (STRICT group commit, writer.c). */
struct kvf__jappender {
	pthread_t thread;
	uint64_t last_ns;
};

#define KVF__JAPPENDERS 16

struct kvf__journal {
	MDB_env *env;
	struct kvf__jdbs dbs;
	int writemap; /* BOUNDED: MDB_WRITEMAP, map backed by fallocate */
	uint32_t psize; /* LMDB page size */

	/*
	 * Prefaulting the map ahead of LMDB's last page (writer.c), so the
	 * first store into a fresh page does not fault on the caller's path.
	 * @map_mu: held while prefaulting and while the map is remapped.
	 */
	pthread_mutex_t map_mu;
	uint8_t *map_addr;     /* under @map_mu; NULL: look it up again */
	uint64_t pf_from;      /* under @mu: prefault [pf_from, pf_to) */
	uint64_t pf_to;        /* under @mu: 0 after a remap */
	uint64_t pf_end;       /* under @mu: LMDB's end at the last commit */
	uint64_t zap_to;       /* under @map_mu: unmapped up to here */
	int pf_pending;        /* under @mu: the writer has a range to do */
	int pf_off;            /* under @mu: prefaulting unsupported */
	struct kvf__journal_config cfg;
	char *dir;
	int lock_fd;
	uint64_t estimate;

	pthread_mutex_t mu;
	pthread_cond_t work_cv; /* writer waits: work, stop, sync deadline */
	pthread_cond_t ckpt_cv; /* checkpoint() callers wait */
	pthread_cond_t sync_cv; /* the syncer waits */
	pthread_cond_t lead_cv; /* a STRICT leader waits for more batches */
	pthread_t thread;
	pthread_t syncer;     /* BOUNDED only */
	int started;  /* writer (and syncer) threads running */
	int replayed; /* replay ran or can no longer run */
	int stop;

	/* Under @mu. */
	struct kvf__jreq *head, **tail;
	size_t nr_queued;      /* batches in the queue */
	int busy;              /* the transaction slot: 0 free, see writer.c */
	int leader_waiting;    /* a leader waits on lead_cv */
	uint64_t commit_ns;    /* moving average of an append commit */
	struct kvf__jappender appenders[KVF__JAPPENDERS];
	/* Encoding buffers kept between appends (writer.c: buf_get()). */
	uint8_t *bufs[KVF__JAPPENDERS];
	size_t buf_caps[KVF__JAPPENDERS];
	int nr_bufs;
	uint64_t ckpt_target;  /* fold until ckpt_seq >= this */
	uint64_t fold_gen;     /* bumped after each fold attempt */
	int fold_err;          /* result of the last fold attempt */
	int fold_blocked;      /* a threshold fold failed: wait for progress */
#ifdef KVF_FAULT_INJECTION
	int fault_code;
	unsigned fault_count;
#endif

	/* Written by the writer under @mu, read by anyone under @mu. */
	struct kvf__jstate st;
	uint64_t map_size;
	uint64_t commits;
	uint64_t map_grows;
	uint64_t sync_errors;
	uint64_t dirty_since; /* BOUNDED: first unsynced commit (ns), 0 clean */

	struct kvf__jwal wal;
};

/* journal.c */
/* Record why open refused (this thread's kvf__journal_error()). */
void kvf__jerr(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int kvf__jdbs_open(MDB_txn *txn, struct kvf__jdbs *dbs, int create);
int kvf__jstate_read(MDB_txn *txn, const struct kvf__jdbs *dbs,
		     struct kvf__jstate *st);
int kvf__jenv_open(const char *dir, unsigned flags, uint64_t map_size,
		   MDB_env **out);
/*
 * kvf__jdir_check() - before LMDB opens DIR/data.mdb (and would create,
 * extend or map it). A directory whose side log files exist while
 * data.mdb is missing or empty lost its journal: initialising a new one
 * would drop everything silently, so it is refused. data.mdb's meta pages
 * are checked: a file shorter than the pages its current meta page uses,
 * or meta pages that are not LMDB's, would crash the process inside LMDB
 * (SIGBUS). Returns 0 (also for a new directory), an errno value, or
 * KVF_ERR_JOURNAL_CORRUPT (kvf__journal_error() says why).
 */
int kvf__jdir_check(const char *dir);

/* image.c: apply one record to the image databases inside @txn. */
int kvf__image_apply(MDB_txn *txn, const struct kvf__jdbs *dbs,
		     const struct kvf__jrec *rec);

/*
 * kvf__frame_decode() - walk the records of one log frame.
 * Calls @fn for each; KVF_ERR_JOURNAL_CORRUPT if the frame is malformed
 * (checked before @fn sees anything past a bad record).
 */
int kvf__frame_decode(const MDB_val *val, uint32_t *count,
		      int (*fn)(void *arg, const struct kvf__jrec *rec,
				uint32_t idx),
		      void *arg);

/* Scan image then log in @txn, checking contiguity from @ckpt_seq. */
int kvf__jscan(MDB_txn *txn, const struct kvf__jdbs *dbs, uint64_t ckpt_seq,
	       const struct kvf__journal_replay_ops *ops, void *arg,
	       uint64_t *last_seq);

/*
 * kvf__jback() - with MDB_WRITEMAP, allocate the file's blocks under the
 * first @size bytes of the map (posix_fallocate), so that LMDB's stores into
 * the map never hit a block the file system cannot provide (SIGBUS); a full
 * disk is reported here as ENOSPC instead. Returns 0 or an errno value; a
 * no-op without MDB_WRITEMAP.
 */
int kvf__jback(struct kvf__journal *j, uint64_t size);

/* How much a map of @size bytes grows by: a quarter, 64 KiB aligned,
 * at most 1 GiB. */
uint64_t kvf__jmap_step(uint64_t size);

/* Sync everything committed so far to disk; an LMDB/errno code. */
int kvf__jsync(struct kvf__journal *j);

/* wal.c: the side log's files and frames (see wal.c). */
int kvf__wal_open(struct kvf__journal *j);
void kvf__wal_close(struct kvf__journal *j);
uint64_t kvf__wal_frame_bytes(size_t payload);
uint64_t kvf__wal_payload_hash(const struct kvf__jreq *req);
/* With @mu held: write @req as the frame at f[cur].end (room checked). */
void kvf__wal_put(struct kvf__journal *j, const struct kvf__jreq *req,
		  uint64_t hash, uint64_t first_seq);
/*
 * The valid prefix of a side log file's bytes from @base (see wal.c):
 * returns its end; *@first and *@last are its sequences (both 0 if it is
 * empty). @key: the check key of the file's frames.
 */
uint64_t kvf__wal_prefix(const uint8_t *map, uint64_t base, uint64_t size,
			 uint64_t key, uint64_t *first, uint64_t *last);
/*
 * kvf__wal_scan() - read-only: call @fn for each record of DIR's side log
 * that follows @st->last_seq (LMDB's last sequence), as the next open
 * would move them, with its sequence; *@records counts them. The same
 * reader and verdict as open's recovery (headers, missing files, damage
 * before the end; the end is not judged while an engine holds DIR's
 * lock, as its appends race with the read). Returns 0, @fn's non-zero result or a kvf_status
 * (kvf__journal_error() names the file and frame).
 */
int kvf__wal_scan(const char *dir, const struct kvf__jstate *st,
		  int (*fn)(void *arg, const struct kvf__jrec *rec,
			    uint64_t seq),
		  void *arg, uint64_t *records);
void kvf__wal_prefault(struct kvf__journal *j, int file, uint64_t from,
		       uint64_t to);
void kvf__wal_zap(struct kvf__journal *j, int file, uint64_t from,
		  uint64_t to);
int kvf__wal_sync_file(struct kvf__journal *j, int file);
/* The flow (wal.c): see the functions for their locking. */
/* What the writer may move into LMDB: acknowledged (and, STRICT, synced). */
static inline uint64_t kvf__wal_movable(const struct kvf__jwal *w)
{
	return w->strict ? w->synced_seq : w->acked_seq;
}

/* With @mu held: STRICT, make the side log durable through @seq. */
int kvf__wal_strict_sync(struct kvf__journal *j, uint64_t seq);

/* With @mu held, the writer started: copy @req into the side log. */
int kvf__wal_append(struct kvf__journal *j, struct kvf__jreq *req,
		    uint64_t hash);
int kvf__wal_drain(struct kvf__journal *j);
/* With @mu held: around a batch too large for the side log (wal.c). */
int kvf__wal_direct_begin(struct kvf__journal *j);
void kvf__wal_direct_end(struct kvf__journal *j, int rc);
bool kvf__wal_move_due(struct kvf__journal *j, uint64_t now,
		       uint64_t *deadline);
int kvf__wal_move(struct kvf__journal *j);
void kvf__wal_serve_prefault(struct kvf__journal *j);
int kvf__wal_sync(struct kvf__journal *j);
void kvf__wal_synced(struct kvf__journal *j, uint64_t seq, int rc);

/* writer.c */
/*
 * Put @nr_frames encoded log frames at @buf into @log (MDB_APPEND), keyed
 * from *@seq + 1; advances *@seq by their records and *@frames by
 * @nr_frames. An LMDB code.
 */
int kvf__put_frames(MDB_txn *txn, MDB_dbi log, const uint8_t *buf,
		    uint32_t nr_frames, uint64_t *seq, uint64_t *frames);
/* Grow the LMDB map (no transaction may be open). An LMDB/errno code. */
int kvf__jgrow(struct kvf__journal *j);
typedef int (*kvf__frames_fn)(struct kvf__journal *j, MDB_txn *txn,
			      void *arg, uint64_t *seq, uint64_t *frames);
/*
 * One write transaction of what @fn puts into the log, growing the map as
 * needed; publishes the log's new end. The caller holds the transaction
 * slot (or is opening the journal, before any thread runs), not @mu; returns with @mu held, so the caller's own bookkeeping
 * is published together with the log's end. A kvf_status.
 */
int kvf__commit_frames(struct kvf__journal *j, kvf__frames_fn fn, void *arg);
/* With @mu held: the syncer has something to sync. */
void kvf__mark_dirty(struct kvf__journal *j);
/* With @mu held: the calling thread appends now (STRICT gathering). */
void kvf__note_appender(struct kvf__journal *j, uint64_t now);
/*
 * STRICT grouping, for the queue's group commit (writer.c) and the side
 * log's group sync (wal.c), given the average duration @avg_ns of what a
 * group shares (a commit, a sync): how long a group may wait for the
 * threads that appended recently (half of it, at most 300 µs), and, with
 * @mu held, whether all of those threads are among the @waiting.
 */
uint64_t kvf__gather_wait_ns(uint64_t avg_ns);
bool kvf__group_complete(const struct kvf__journal *j, uint64_t now,
			 uint64_t avg_ns, uint64_t waiting);
#ifdef KVF_FAULT_INJECTION
/* With @mu held: a pending injected errno fault as a kvf_status, or 0. */
int kvf__take_errno_fault(struct kvf__journal *j);
#endif
int kvf__writer_start(struct kvf__journal *j);
void kvf__writer_stop(struct kvf__journal *j);

static inline void kvf__put_be64(uint8_t *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--) {
		p[i] = (uint8_t)v;
		v >>= 8;
	}
}

static inline uint64_t kvf__get_be64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = (v << 8) | p[i];
	return v;
}

#endif /* KVF_JOURNAL_JINT_H */
