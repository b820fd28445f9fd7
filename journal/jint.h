/* SPDX-License-Identifier: MIT */
/*
 * journal/jint.h - journal internals shared by journal.c, writer.c,
 * image.c and the inspect tool. Not for the engine.
 */
#ifndef KVF_JOURNAL_JINT_H
#define KVF_JOURNAL_JINT_H

#include <lmdb.h>
#include <pthread.h>
#include <stdint.h>

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
	uint64_t ckpt_seq;
	uint64_t ckpt_count;
	uint64_t last_seq;
	uint64_t log_frames;
	uint64_t objects;
	uint64_t segments;
	uint64_t clients;
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
	int fault_code;
	unsigned fault_count;

	/* Written by the writer under @mu, read by anyone under @mu. */
	struct kvf__jstate st;
	uint64_t map_size;
	uint64_t commits;
	uint64_t map_grows;
	uint64_t sync_errors;
	uint64_t dirty_since; /* BOUNDED: first unsynced commit (ns), 0 clean */
};

/* journal.c */
int kvf__jdbs_open(MDB_txn *txn, struct kvf__jdbs *dbs, int create);
int kvf__jstate_read(MDB_txn *txn, const struct kvf__jdbs *dbs,
		     struct kvf__jstate *st);
int kvf__jenv_open(const char *dir, unsigned flags, uint64_t map_size,
		   MDB_env **out);

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

/* writer.c */
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
