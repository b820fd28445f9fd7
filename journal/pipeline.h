/* SPDX-License-Identifier: MIT */
/*
 * journal/pipeline.h - the journal's pipeline: the threads, group commit,
 * the queue, STRICT gathering, checkpoints and moving side log frames into
 * LMDB (journal.c, writer.c, sidelog_flow.c). Only the pipeline calls the
 * other parts: the record codec (record.h), the LMDB store and image
 * (store.h) and the side log files (sidelog.h). Not for the engine.
 */
#ifndef KVF_JOURNAL_PIPELINE_H
#define KVF_JOURNAL_PIPELINE_H

#include <lmdb.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "base/clock.h"
#include "base/fault.h"
#include "journal/error.h"
#include "journal/journal.h"
#include "journal/record.h"
#include "journal/sidelog.h"
#include "journal/store.h"

/* One caller's batch, encoded, waiting in the queue (writer.c). */
struct kvf__jreq {
	struct kvf__jreq *next;
	struct kvf__jbatch b;
	uint64_t last_seq; /* of the batch, once committed */
	int status;
	int done;
	pthread_cond_t cv;
};

/*
 * The side log's flow (sidelog_flow.c; the writer and syncer threads in
 * writer.c). Under the journal's @mu. Sequences: @acked_seq
 * (acknowledged, in the side log or LMDB) >= the LMDB log's last_seq >=
 * @durable_seq (LMDB synced).
 */
struct kvf__flow {
	int on;                 /* appends go through the side log */
	int cv_ok;
	int cur;                /* appends go to file @cur at its end */
	int ing;                /* the next frame to move is in file @ing ... */
	uint64_t ing_off;       /* ... at this offset */
	int move_reading;       /* file a move reads, @mu dropped; -1 none */
	uint64_t acked_seq;
	uint64_t durable_seq;
	uint64_t pending_bytes; /* payload bytes not moved into LMDB yet */
	uint64_t pending_since; /* ns of the oldest of them, 0: none */
	int sync_now;           /* an appender waits for a file to be freed */
	int drain;              /* someone waits for everything to move */
	int direct;             /* an oversize append owns the order */
	int move_err;           /* kvf_status of the last move attempt */
	uint64_t move_gen;      /* bumped after each move attempt */
	uint64_t retry_ns;      /* after a failed move: not before this */
	int sync_err;           /* kvf_status of the last periodic sync */
	uint64_t sync_gen;      /* bumped after each periodic sync */
	/*
	 * STRICT group sync: one appender at a time syncs the side log for
	 * everyone (@syncing); @synced_seq is what is known durable,
	 * @unsynced the appends not covered by a started sync, @sync_ns a
	 * moving average of a sync. @sync_failed (a kvf_status) is sticky.
	 */
	int syncing;
	uint64_t unsynced;
	uint64_t sync_ns;
	uint64_t synced_seq;
	int sync_failed;
	pthread_cond_t cv;        /* appenders wait: room, drain, direct,
				   * sync */
	pthread_cond_t strict_cv; /* STRICT appenders wait for their sync */
};

/* A thread that appended recently (STRICT gathering, writer.c). */
struct kvf__jappender {
	pthread_t thread;
	uint64_t last_ns;
};

#define KVF__JAPPENDERS 16

/*
 * The queue, the transaction slot and group commit (writer.c). Under @mu.
 */
struct kvf__jgroup {
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
};

/*
 * Prefaulting LMDB's map ahead of its end (MDB_WRITEMAP; writer.c), so
 * the first store into a fresh page does not fault on the caller's path.
 * Under @mu.
 */
struct kvf__jprefault {
	uint64_t from;  /* prefault [from, to) */
	uint64_t to;    /* 0 after a remap */
	uint64_t end;   /* LMDB's end at the last commit */
	int pending;    /* the writer has a range to do */
	int off;        /* prefaulting unsupported */
};

/* Checkpoint requests and their outcome (writer.c). Under @mu. */
struct kvf__jckpt {
	uint64_t target; /* fold until the checkpoint sequence >= this */
	uint64_t gen;    /* bumped after each fold attempt */
	int err;         /* result of the last fold attempt */
	int blocked;     /* a threshold fold failed: wait for progress */
};

struct kvf__rewrite;

/*
 * struct kvf__journal - the pipeline's state, holding the parts' states.
 * Locking: @mu protects everything but the store's write transactions,
 * which belong to the holder of the transaction slot (@grp.busy), and is
 * never held across LMDB calls or I/O.
 */
struct kvf__journal {
	struct kvf__journal_config cfg;
	char *dir;
	int lock_fd;
	uint64_t estimate;

	struct kvf__store store;  /* LMDB; see above */
	struct kvf__sidelog sl;   /* the side log files; under @mu */
	struct kvf__flow flow;    /* under @mu */
	struct kvf__jprefault pf; /* under @mu */
	struct kvf__jckpt ckpt;   /* under @mu */
	/* the image rewrite in progress (rewrite.h); the slot holder's */
	struct kvf__rewrite *rewrite;

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

	struct kvf__jgroup grp;   /* under @mu */
	struct kvf__journal_tap tap; /* kvf__journal_set_tap(); under @mu */
	unsigned tap_users; /* appends using a copy of @tap; under @mu */
#ifdef KVF_FAULT_INJECTION
	int fault_code;
	unsigned fault_count;
	unsigned move_delay_us; /* each move sleeps this long, @mu dropped */
#endif

	/* Written by the slot holder under @mu, read by anyone under @mu. */
	struct kvf__store_state st;
	uint64_t map_size;
	uint64_t commits;
	uint64_t map_grows;
	uint64_t sync_errors;
	uint64_t dirty_since; /* BOUNDED: first unsynced commit (ns), 0 clean */
};

/* --- writer.c --- */

typedef int (*kvf__frames_fn)(struct kvf__journal *j, MDB_txn *txn,
			      void *arg, uint64_t *seq, uint64_t *frames);
/*
 * One write transaction of what @fn puts into the log, growing the map as
 * needed; publishes the log's new end. The caller holds the transaction
 * slot (or is opening the journal, before any thread runs), not @mu;
 * returns with @mu held, so the caller's own bookkeeping is published
 * together with the log's end. A kvf_status.
 */
int kvf__commit_frames(struct kvf__journal *j, kvf__frames_fn fn, void *arg);
/* With @mu held: the syncer has something to sync. */
void kvf__mark_dirty(struct kvf__journal *j);
/* With @mu held: the calling thread appends now (STRICT gathering). */
void kvf__note_appender(struct kvf__journal *j, uint64_t now);
/*
 * STRICT grouping, for the queue's group commit (writer.c) and the side
 * log's group sync (sidelog_flow.c), given the average duration @avg_ns
 * of what a group shares (a commit, a sync): how long a group may wait
 * for the threads that appended recently (half of it, at most 300 µs),
 * and, with @mu held, whether all of those threads are among the
 * @waiting.
 */
uint64_t kvf__gather_wait_ns(uint64_t avg_ns);
bool kvf__group_complete(const struct kvf__journal *j, uint64_t now,
			 uint64_t avg_ns, uint64_t waiting);
#ifdef KVF_FAULT_INJECTION
/* With @mu held: a pending injected errno fault as a kvf_status, or 0. */
int kvf__take_errno_fault(struct kvf__journal *j);
#endif
/* With @mu held: start the writer (and syncer) threads once. */
int kvf__writer_start(struct kvf__journal *j);
void kvf__writer_stop(struct kvf__journal *j);

/* --- sidelog_flow.c: the side log's flow; see the functions for their
 * locking. --- */

/*
 * At open, before any thread: recover the side log files into LMDB and
 * make them ready for appends. A kvf_status or an errno/LMDB code.
 */
int kvf__flow_open(struct kvf__journal *j);
/* At open, after compaction: LMDB's page pool filled for moves (store.c). */
void kvf__flow_warm(struct kvf__journal *j);
void kvf__flow_close(struct kvf__journal *j);
/* What the writer may move into LMDB: acknowledged (and, STRICT, synced). */
static inline uint64_t kvf__flow_movable(const struct kvf__journal *j)
{
	return j->sl.strict ? j->flow.synced_seq : j->flow.acked_seq;
}
/* With @mu held, the writer started: copy @req into the side log. */
int kvf__flow_append(struct kvf__journal *j, struct kvf__jreq *req,
		     uint64_t hash);
/* With @mu held: STRICT, make the side log durable through @seq. */
int kvf__flow_strict_sync(struct kvf__journal *j, uint64_t seq);
/* With @mu held: wait until everything acknowledged is in LMDB. */
int kvf__flow_drain(struct kvf__journal *j);
/* With @mu held: around a batch too large for the side log. */
int kvf__flow_direct_begin(struct kvf__journal *j);
void kvf__flow_direct_end(struct kvf__journal *j, int rc);
/* With @mu held: the writer thread's moves. */
bool kvf__flow_move_due(struct kvf__journal *j, uint64_t now,
			uint64_t *deadline);
int kvf__flow_move(struct kvf__journal *j);
/* With @mu held: the syncer's part (drops @mu meanwhile) and outcome. */
int kvf__flow_sync(struct kvf__journal *j);
void kvf__flow_synced(struct kvf__journal *j, uint64_t seq, int rc);

#endif /* KVF_JOURNAL_PIPELINE_H */
