/* SPDX-License-Identifier: MIT */
/*
 * journal/store.h - the LMDB store (store.c) and its image (image.c): the
 * environment, the meta and log tables, the image tables, checkpoint
 * chunks and replay reading. No threads: the pipeline (pipeline.h) decides
 * who holds the write transaction and when; kvforge-inspect reads through
 * the read-only helpers.
 */
#ifndef KVF_JOURNAL_STORE_H
#define KVF_JOURNAL_STORE_H

#include <lmdb.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "journal/journal.h"
#include "journal/record.h"

/* Meta database keys. */
#define KVF__META_MAGIC "magic"
#define KVF__META_VERSION "version"
#define KVF__META_CKPT_SEQ "checkpoint_seq"
#define KVF__META_CKPT_COUNT "checkpoints"
#define KVF__META_JOURNAL_ID "journal_id"
/* Present (u32 1) once the side log files were created. */
#define KVF__META_SIDE_LOG "side_log"
/* u32: which object database holds the image (0 "objs", 1 "objs.1");
 * absent = 0. journal/rewrite.c switches it. */
#define KVF__META_IMAGE "image"
#define KVF__MAGIC_VALUE "KVForge-journal"

/* The LMDB handles of one environment. */
struct kvf__store_dbs {
	MDB_dbi meta;
	MDB_dbi log;
	MDB_dbi segs;    /* BE u64 segment id -> encoded SEGMENT_MOUNT */
	/* "objs" and "objs.1": one holds the image's objects (meta "image"
	 * says which: kvf__store_image()), the other is empty or a rewrite's
	 * unfinished output. BE u64 key hash ++ BE u32 tie -> OBJECT_PUT. */
	MDB_dbi objs;
	MDB_dbi objs_alt;
	MDB_dbi clients; /* BE u64 client id -> u64 LE mounted segments */
	bool has_alt;    /* "objs.1" exists (a read-only open of version 3) */
};

/* What the meta database and the log ends say (read at open). */
struct kvf__store_state {
	uint32_t version;
	uint64_t id;          /* random, from creation (side log frames) */
	uint64_t ckpt_seq;
	uint64_t ckpt_count;
	uint64_t last_seq;
	uint64_t log_frames;
	uint64_t objects;
	uint64_t segments;
	uint64_t clients;
	uint32_t sidelog_created; /* KVF__META_SIDE_LOG is set */
	uint32_t image_db;        /* 0: "objs" holds the image, 1: "objs.1" */
	uint64_t spare_entries;   /* in the other one: a rewrite's leftovers */
};

/*
 * struct kvf__store - one LMDB environment opened for writing.
 *
 * Write transactions are serialised by the caller (the pipeline's
 * transaction slot); @map_size belongs to whoever holds it. @map_mu is
 * held while the map is remapped (kvf__store_grow()) and while it is
 * prefaulted or unmapped (kvf__store_prefault(), kvf__store_unmap_below()),
 * which run on other threads than the slot holder.
 */
struct kvf__store {
	MDB_env *env;
	struct kvf__store_dbs dbs;
	const char *dir;      /* the journal's; not owned */
	bool bounded;         /* MDB_NOMETASYNC (store.c says why) */
	bool writemap;        /* MDB_WRITEMAP, the map backed by fallocate */
	bool compact;         /* compact at open when mostly free */
	uint32_t psize;       /* LMDB page size */
	uint64_t want_map;    /* the configured map size */
	uint64_t map_size;    /* the current map size */
	pthread_mutex_t map_mu;
	/* read-held by a read transaction on another thread than the slot
	 * holder's (kvf__journal_snapshot()), write-held by a remap */
	pthread_rwlock_t remap_rw;
	bool map_mu_ok;	      /* and @remap_rw */
	uint8_t *map_addr;    /* under @map_mu; NULL: look it up again */
	uint64_t zap_to;      /* under @map_mu: unmapped up to here */
};

/* --- Read-only access (also kvforge-inspect and tests). --- */

int kvf__store_env_open(const char *dir, unsigned flags, uint64_t map_size,
			MDB_env **out);
int kvf__store_dbs_open(MDB_txn *txn, struct kvf__store_dbs *dbs, int create);
int kvf__store_state_read(MDB_txn *txn, const struct kvf__store_dbs *dbs,
			  struct kvf__store_state *st);

/*
 * kvf__store_image() - as of @txn, the object database holding the image
 * (*@image) and the other one (*@spare; may be NULL). Every reader and
 * writer of the image resolves it this way, inside its own transaction,
 * so a rewrite's switch (one meta write) is atomic for all of them.
 * Returns 0 or an LMDB code.
 */
int kvf__store_image(MDB_txn *txn, const struct kvf__store_dbs *dbs,
		     MDB_dbi *image, MDB_dbi *spare);

/*
 * kvf__store_check_file() - before LMDB opens DIR/data.mdb (and would
 * map it): its meta pages must be LMDB's, and the file must hold every
 * page its current meta page uses (a shorter file would crash the process
 * inside LMDB: SIGBUS). Returns 0 (also for a missing or empty file), an
 * errno value, or KVF_ERR_JOURNAL_CORRUPT (kvf__journal_error() says why).
 */
int kvf__store_check_file(const char *dir);

/* Bytes of DIR/data.mdb (0 if it cannot be read). */
uint64_t kvf__store_file_size(const char *dir);

/* --- The environment for writing (open and close: one thread). --- */

/*
 * kvf__store_open() - open (initialising an empty one) the environment in
 * @cfg->dir for writing, clear reader slots of dead processes, and read
 * its state into @st. Returns 0, an LMDB/errno code, or
 * KVF_ERR_JOURNAL_VERSION (kvf__journal_error() says why).
 */
int kvf__store_open(struct kvf__store *s, const struct kvf__journal_config *cfg,
		    struct kvf__store_state *st);
void kvf__store_close(struct kvf__store *s);

/*
 * After the side log files were created or upgraded: record it, with the
 * current format version, so that from then on missing side log files are
 * refused, and so that an older build refuses the directory. Updates @st.
 */
int kvf__store_mark_side_log(struct kvf__store *s, struct kvf__store_state *st);

/*
 * Compaction (only at open, with no transaction in this process): when
 * configured and the file is large and mostly free, replace data.mdb by a
 * compact copy and reopen it (@st is read again).
 */
int kvf__store_compact(struct kvf__store *s, struct kvf__store_state *st);

/* --- Write transactions (the slot holder). --- */

/* Begin a write transaction (adopting a map another process grew). */
int kvf__store_begin(struct kvf__store *s, MDB_txn **txn);
/*
 * Commit @txn if @rc is 0, else abort it. Returns the final LMDB/errno
 * code (a short write on a full disk is reported as ENOSPC).
 */
int kvf__store_end(struct kvf__store *s, MDB_txn *txn, int rc);

/*
 * Fill LMDB's pool of dirty page buffers with about @bytes of log pages
 * (one aborted transaction; nothing is written): store.c says why. No
 * effect with MDB_WRITEMAP.
 */
void kvf__store_warm_pages(struct kvf__store *s, uint64_t bytes);

/*
 * Put @nr_frames encoded log frames at @buf into the log (MDB_APPEND),
 * keyed from *@seq + 1; advances *@seq by their records and *@frames by
 * @nr_frames. An LMDB code.
 */
int kvf__store_put_frames(MDB_txn *txn, MDB_dbi log, const uint8_t *buf,
			  uint32_t nr_frames, uint64_t *seq, uint64_t *frames);

/*
 * Grow the map (no transaction may be open in this process): doubles it,
 * or with MDB_WRITEMAP adds kvf__store_map_step(), allocated on disk
 * first. An LMDB/errno code; the map keeps its size on failure.
 */
int kvf__store_grow(struct kvf__store *s);

/* How much a map of @size bytes grows by with MDB_WRITEMAP: a quarter,
 * 64 KiB aligned, at most 1 GiB. */
uint64_t kvf__store_map_step(uint64_t size);

/* With MDB_WRITEMAP: the end of LMDB's last page in use; else 0. */
uint64_t kvf__store_data_end(struct kvf__store *s);

/* --- Any thread. --- */

/* Sync everything committed so far to disk; an LMDB/errno code. */
int kvf__store_sync(struct kvf__store *s);

/*
 * With MDB_WRITEMAP: populate [@from, @to) of the map writable. Returns
 * true if the kernel cannot (prefaulting is then pointless).
 */
bool kvf__store_prefault(struct kvf__store *s, uint64_t from, uint64_t to);

/* With MDB_WRITEMAP: drop our page-table entries for the map below
 * @end - 1 MiB (store.c says why). */
void kvf__store_unmap_below(struct kvf__store *s, uint64_t end);

/* --- The image (image.c). --- */

/* An object's image key: BE u64 XXH3 of its key, then a BE u32 tie. */
#define KVF__IMAGE_KEY_LEN 12

static inline void kvf__image_obj_key(uint8_t *k, uint64_t hash, uint32_t tie)
{
	kvf__put_be64(k, hash);
	for (int i = 0; i < 4; i++)
		k[8 + i] = (uint8_t)(tie >> (24 - 8 * i));
}

static inline uint32_t kvf__image_obj_tie(const uint8_t *k)
{
	return (uint32_t)k[8] << 24 | (uint32_t)k[9] << 16 |
	       (uint32_t)k[10] << 8 | k[11];
}

/* Apply one record to the image databases inside @txn; @objs is the
 * image's object database (kvf__store_image()). */
int kvf__image_apply(MDB_txn *txn, const struct kvf__store_dbs *dbs,
		     MDB_dbi objs, const struct kvf__jrec *rec);

/*
 * Checkpoint bookkeeping every fold shares, inside the write transaction
 * that moves the checkpoint:
 *  - kvf__image_log_head(): position @cur (on the log) on its first
 *    frame, @val its value; MDB_CORRUPTED unless it starts right after
 *    @st's checkpoint sequence, MDB_NOTFOUND if the log is empty;
 *  - kvf__image_log_pop(): delete that frame (@count records) and advance
 *    @st's checkpoint sequence past it;
 *  - kvf__image_checkpointed(): store @st's checkpoint sequence, count a
 *    checkpoint when it reached @target, and refresh @st's image counts.
 * LMDB codes.
 */
int kvf__image_log_head(MDB_cursor *cur, const struct kvf__store_state *st,
			MDB_val *val);
int kvf__image_log_pop(MDB_cursor *cur, uint32_t count,
		       struct kvf__store_state *st);
int kvf__image_checkpointed(MDB_txn *txn, const struct kvf__store_dbs *dbs,
			    uint64_t target, struct kvf__store_state *st);

/*
 * kvf__image_fold() - inside the write transaction @txn, fold up to
 * @chunk records from the head of the log into the image and advance the
 * checkpoint sequence (counting a checkpoint when it reaches @target).
 * @st: the state before, updated to the state after. An LMDB/errno code.
 */
int kvf__image_fold(MDB_txn *txn, const struct kvf__store_dbs *dbs,
		    uint64_t target, uint64_t chunk,
		    struct kvf__store_state *st);

/*
 * kvf__image_scan() - replay reading: every SEGMENT_MOUNT and OBJECT_PUT of
 * the image (with @ckpt_seq), @ops->image_done, then the log records in
 * sequence order, checking contiguity from @ckpt_seq; *@last_seq receives
 * the last. A kvf_status, or @ops' first non-zero result.
 */
int kvf__image_scan(MDB_txn *txn, const struct kvf__store_dbs *dbs,
		    uint64_t ckpt_seq,
		    const struct kvf__journal_replay_ops *ops, void *arg,
		    uint64_t *last_seq);

/* Store-internal (store.c, for image.c). */
int kvf__store_entries(MDB_txn *txn, MDB_dbi dbi, uint64_t *n);
/* Refresh @st's image counts (objects, segments, clients, which object
 * database holds the image and the other's entries) from @txn. */
int kvf__store_count_image(MDB_txn *txn, const struct kvf__store_dbs *dbs,
			   struct kvf__store_state *st);
int kvf__store_meta_put(MDB_txn *txn, MDB_dbi dbi, const char *name,
			const void *data, size_t len);

#endif /* KVF_JOURNAL_STORE_H */
