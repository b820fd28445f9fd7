/* SPDX-License-Identifier: MIT */
/*
 * journal/journal.h - the metadata journal (internal API).
 *
 * The engine records every durable metadata mutation as a logical record
 * (struct kvf__jrec) and hands batches of them to kvf__journal_append().
 * The journal keeps them in an LMDB environment in a data directory:
 *
 *   - a log of sequence-numbered records, written by one writer thread that
 *     merges the batches of concurrent callers into one transaction (group
 *     commit);
 *   - an image (segments by id, objects by key, clients) into which the
 *     writer folds the oldest log records in bounded chunks (checkpoint),
 *     deleting them from the log, so the log does not grow without bound.
 *
 * Recovery = image, then the log tail, streamed in order to a callback by
 * kvf__journal_replay(). docs/journal.md describes the format, the
 * durability modes and their loss windows.
 *
 * Record semantics, as the image applies them (the engine's replay must
 * apply records with the same rules, which also make them idempotent):
 *   - SEGMENT_MOUNT replaces any segment with the same id;
 *   - SEGMENT_UNMOUNT of an unknown segment does nothing;
 *   - CLIENT_REMOVE forgets the client (its segments were unmounted by
 *     earlier SEGMENT_UNMOUNT records);
 *   - OBJECT_PUT replaces any object with the same key;
 *   - OBJECT_REPLICAS of an unknown key does nothing;
 *   - OBJECT_REMOVE of an unknown key does nothing.
 * A client is durable only through its mounted segments: after recovery
 * the known clients are the owners of the mounted segments.
 */
#ifndef KVF_JOURNAL_JOURNAL_H
#define KVF_JOURNAL_JOURNAL_H

#include <stddef.h>
#include <stdint.h>

#include <kvforge/batch.h>
#include <kvforge/engine.h>

#include "metadata/pin.h"

/* On-disk format version written to and required from the meta database. */
/*
 * 2: BOUNDED acknowledges through the side log files wal-0.log and
 * wal-1.log (journal/sidelog.c); a version 1 reader would ignore them.
 * 3: the side log files start with a header (their geometry, journal id,
 * epoch); a version 2 reader would read it as an empty side log. Open
 * upgrades a version 2 directory (docs/journal.md).
 * 4: the image may live in "objs.1" (meta "image" says which of the two
 * object databases holds it: journal/rewrite.c); a version 3 reader would
 * read the other one. Open upgrades versions 2 and 3 in place.
 */
#define KVF__JOURNAL_FORMAT_VERSION 4u
/* The oldest version open reads (and upgrades in place). */
#define KVF__JOURNAL_FORMAT_OLDEST 2u
/* From this version on the side log files start with a header. */
#define KVF__JOURNAL_FORMAT_SIDELOG_HEADER 3u

/* Does this build read (and upgrade) format version @v? */
static inline int kvf__journal_format_readable(uint32_t v)
{
	return v >= KVF__JOURNAL_FORMAT_OLDEST &&
	       v <= KVF__JOURNAL_FORMAT_VERSION;
}

/* Longest key a record may carry. */
#define KVF__JREC_KEY_MAX 65535u
/* Longest segment name / endpoint a record may carry. */
#define KVF__JREC_STR_MAX 127u

enum kvf__jrec_type {
	KVF__JREC_SEGMENT_MOUNT = 1,
	KVF__JREC_SEGMENT_UNMOUNT = 2,
	KVF__JREC_CLIENT_REMOVE = 3,
	KVF__JREC_OBJECT_PUT = 4,
	KVF__JREC_OBJECT_REPLICAS = 5,
	KVF__JREC_OBJECT_REMOVE = 6,
};

/* Flags of OBJECT_PUT: the object's pin bits (metadata/pin.h). */

struct kvf__jreplica {
	uint64_t segment_id;
	uint64_t offset; /* from the segment base */
};

/*
 * struct kvf__jrec - one logical record.
 *
 * Strings and keys are (pointer, length), not NUL-terminated. For append,
 * the caller owns them until kvf__journal_append() returns. For replay they
 * point into the journal's memory and are valid only during the callback.
 */
struct kvf__jrec {
	enum kvf__jrec_type type;
	union {
		struct {
			uint64_t segment_id;
			uint64_t client_id;
			uint64_t base;
			uint64_t size;
			const char *name;
			const char *endpoint;
			uint16_t name_len;
			uint16_t endpoint_len;
		} mount;
		struct {
			uint64_t segment_id;
		} unmount;
		struct {
			uint64_t client_id;
		} client;
		/* OBJECT_PUT uses every field; OBJECT_REPLICAS key and
		 * replicas only; OBJECT_REMOVE the key only. */
		struct {
			const char *key;
			uint32_t key_len;
			uint8_t flags; /* enum kvf__pin_flags */
			uint8_t nr_replicas;
			uint64_t size;
			uint64_t soft_pin_deadline_ns;
			struct kvf__jreplica replicas[KVF_MAX_REPLICAS];
		} obj;
	};
};

struct kvf__journal;

/*
 * struct kvf__journal_config - how to open a journal.
 * @dir: data directory; created (with parents) if missing.
 * @durability: %KVF_DURABILITY_STRICT or %KVF_DURABILITY_BOUNDED
 *              (%KVF_DURABILITY_NONE is refused: no journal is needed).
 * @sync_interval_ms: BOUNDED: the writer syncs the file this often; 0 = 50.
 * @map_size: initial LMDB map size in bytes; 0 = 64 MiB. Grows by doubling
 *            (BOUNDED: by a quarter; the map is allocated on disk).
 * @checkpoint_records: fold the log into the image once it holds this many
 *                      records, or half the image's objects when that is
 *                      more; 0 = 1M; UINT64_MAX = only on request.
 * @fold_chunk: most log records folded per transaction, and a rewrite's
 *              step (records read or image entries written); 0 = 32768.
 * @image_rewrite: how checkpoints fold: %KVF__REWRITE_AUTO (0: rewrite the
 *                 image when the window is large against it, else fold in
 *                 place), %KVF__REWRITE_NEVER or %KVF__REWRITE_ALWAYS
 *                 (tests of either path).
 * @rewrite_budget: memory a rewrite keeps of the window's records at a
 *                  time (more means fewer passes over the window, one
 *                  per slice of the hash space); 0 = 128 MiB.
 * @compact_at_open: compact the file at open when most of it is free.
 * @wal_bytes: BOUNDED: size of each of the two side log files (a multiple
 *             of 4 KiB, >= 64 KiB); 0 = 32 MiB. Allocated on disk at open.
 */
struct kvf__journal_config {
	const char *dir;
	enum kvf_durability durability;
	uint32_t sync_interval_ms;
	bool writemap; /* BOUNDED only: MDB_WRITEMAP (kvf_config.journal_writemap) */
	uint64_t map_size;
	uint64_t checkpoint_records;
	uint32_t fold_chunk;
	int compact_at_open;
	uint64_t wal_bytes;
	enum kvf__rewrite_mode {
		KVF__REWRITE_AUTO = 0,
		KVF__REWRITE_NEVER,
		KVF__REWRITE_ALWAYS,
	} image_rewrite;
	uint64_t rewrite_budget;
};

/* struct kvf__journal_stats - see kvf__journal_get_stats(). */
struct kvf__journal_stats {
	uint64_t log_records;   /* records in the log (after the checkpoint) */
	uint64_t log_frames;    /* LMDB entries holding them */
	uint64_t objects;       /* objects in the image */
	uint64_t segments;      /* segments in the image */
	uint64_t clients;       /* clients in the image */
	uint64_t checkpoints;   /* completed checkpoints, ever */
	uint64_t checkpoint_seq; /* last sequence folded into the image */
	uint64_t last_seq;      /* last committed sequence */
	uint64_t file_size;     /* bytes of data.mdb */
	uint64_t map_size;      /* current LMDB map size */
	uint64_t commits;       /* write transactions committed since open */
	uint64_t map_grows;     /* map growths since open */
	uint64_t sync_errors;   /* failed periodic syncs (BOUNDED) */
	uint64_t sidelog_pending; /* acknowledged records still only in
				   * the side log */
	uint32_t format_version;
};

/*
 * struct kvf__journal_replay_ops - what kvf__journal_replay() calls.
 * @record: called once per record, in apply order: first the image
 *          (every SEGMENT_MOUNT, then every OBJECT_PUT; @seq is the
 *          checkpoint sequence), then the log tail in sequence order (@seq
 *          is the record's own). A non-zero return stops the replay and is
 *          returned by kvf__journal_replay().
 * @image_done: optional; called once after the image's records and before
 *          the log's first, even if either is empty. The image holds at
 *          most one OBJECT_PUT per key and one SEGMENT_MOUNT per id, so a
 *          consumer may batch work over the image (e.g. sort it) here. A
 *          non-zero return stops the replay like @record's.
 */
struct kvf__journal_replay_ops {
	int (*record)(void *arg, const struct kvf__jrec *rec, uint64_t seq);
	int (*image_done)(void *arg);
};

/**
 * kvf__journal_open() - open (or create) the journal in a directory.
 * @cfg: configuration; copied.
 * @out: receives the journal on success.
 *
 * Checks data.mdb's meta pages before LMDB maps it, the magic and format
 * version (upgrading a version 2 directory), that the log starts right
 * after the checkpoint and that its last frame decodes
 * (kvf__journal_replay() checks every record); runs mdb_reader_check().
 * Recovers the side log with the geometry its files record (then
 * resizes them to @cfg->wal_bytes): a torn tail is dropped, damage before
 * the end, files extended, truncated, missing or another journal's, and
 * side log files beside a missing or empty data.mdb are refused
 * (kvf__journal_error() says which file and frame). Takes an exclusive lock on
 * DIR/kvforge.lock so two engines never write one journal. Nothing is ever
 * discarded or rewritten to "repair" a directory. The writer thread starts
 * after the replay or at the first append.
 *
 * Context: may block (disk I/O, directory creation, optional compaction).
 * Must not be called in a process that will fork() before closing it.
 * Return: %KVF_OK; %KVF_ERR_INVALID_ARGUMENT (bad config);
 * %KVF_ERR_JOURNAL_VERSION (written by another format version);
 * %KVF_ERR_JOURNAL_CORRUPT (not a KVForge journal, damaged file or record,
 * sequence gap); %KVF_ERR_BUSY (opened by another engine); %KVF_ERR_IO,
 * %KVF_ERR_JOURNAL_NO_SPACE, %KVF_ERR_NO_MEMORY.
 */
int kvf__journal_open(const struct kvf__journal_config *cfg,
		      struct kvf__journal **out);

/**
 * kvf__journal_error() - why the last refusal on this thread happened.
 *
 * After kvf__journal_open() or kvf__sidelog_scan() refused a directory
 * (%KVF_ERR_JOURNAL_CORRUPT, %KVF_ERR_JOURNAL_VERSION), a sentence naming
 * the file and, for a damaged side log, the frame; "" if nothing was
 * recorded. Thread-local; valid until the thread's next open.
 */
const char *kvf__journal_error(void);

/*
 * kvf__jdir_check() - before LMDB opens DIR/data.mdb (and would create,
 * extend or map it). A directory whose side log files exist while
 * data.mdb is missing or empty lost its journal: initialising a new one
 * would drop everything silently, so it is refused. data.mdb's meta pages
 * are checked (kvf__store_check_file()). Returns 0 (also for a new
 * directory), an errno value, or KVF_ERR_JOURNAL_CORRUPT
 * (kvf__journal_error() says why). Also run by kvforge-inspect.
 */
int kvf__jdir_check(const char *dir);

/**
 * kvf__journal_object_estimate() - upper bound on objects after replay.
 * @j: the journal.
 *
 * Objects in the image plus records in the log (computed at open from LMDB
 * statistics), so the engine can presize its index before replaying.
 * Context: any thread; never blocks.
 */
uint64_t kvf__journal_object_estimate(const struct kvf__journal *j);

/**
 * kvf__journal_replay() - stream the durable state to @ops.
 * @j: the journal, freshly opened.
 * @ops: callbacks.
 * @arg: passed to the callbacks.
 *
 * Must run before the first append (the only read transaction of the
 * process is open meanwhile); may be called at most once, or not at all.
 * Context: blocks for the whole scan; the callbacks run on the calling
 * thread.
 * Return: %KVF_OK; the callback's non-zero value; %KVF_ERR_JOURNAL_CORRUPT
 * (a record that does not decode, a sequence gap); %KVF_ERR_BUSY (called
 * after an append or twice); %KVF_ERR_IO.
 */
int kvf__journal_replay(struct kvf__journal *j,
			const struct kvf__journal_replay_ops *ops, void *arg);

/**
 * kvf__journal_append() - durably append a batch of records.
 * @j: the journal.
 * @recs: @n records; the caller keeps ownership.
 * @n: number of records; 0 is a no-op.
 *
 * Thread-safe: concurrent callers' batches are merged into one LMDB write
 * transaction by the writer thread (group commit). All-or-nothing: on error
 * nothing of this batch is in the journal. Sequence numbers are assigned
 * contiguously in commit order.
 *
 * Context: blocks until the batch is durable for its mode: STRICT, until
 * its side log frame is synced to disk (concurrent callers share one
 * fdatasync; a failed sync makes every later append fail until reopen);
 * BOUNDED, until it is copied into the mapped side log (journal/sidelog.c; it survives a crash of
 * the process from then on, and the syncer syncs every sync_interval_ms);
 * the writer thread moves it into the LMDB log later. BOUNDED appends
 * wait only when the side log is full (both files hold batches that are
 * not yet synced in LMDB), and a batch larger than half a side log file
 * is committed to LMDB directly, after every earlier one.
 * Return: %KVF_OK; %KVF_ERR_INVALID_ARGUMENT (bad record: unknown type, key
 * empty or too long, replica count out of range, string too long);
 * %KVF_ERR_JOURNAL_NO_SPACE (disk full; BOUNDED: the side log is full and
 * cannot be moved into LMDB; later appends may succeed);
 * %KVF_ERR_IO; %KVF_ERR_JOURNAL (other LMDB failure); %KVF_ERR_NO_MEMORY;
 * %KVF_ERR_CLOSED (the journal is closing).
 */
int kvf__journal_append(struct kvf__journal *j, const struct kvf__jrec *recs,
			size_t n);

/**
 * kvf__journal_checkpoint() - fold the whole current log into the image.
 * @j: the journal.
 *
 * The writer folds in chunks, interleaved with appends; this waits until
 * every record committed before the call has been folded.
 * Context: blocks (many transactions; in STRICT mode each is synced).
 * Return: %KVF_OK or the error of the failed fold transaction.
 */
int kvf__journal_checkpoint(struct kvf__journal *j);

/**
 * kvf__journal_get_stats() - counters and sizes.
 * @j: the journal.
 * @st: filled on return.
 *
 * Context: any thread; takes the journal mutex briefly; one stat() call.
 */
void kvf__journal_get_stats(struct kvf__journal *j,
			    struct kvf__journal_stats *st);

/*
 * struct kvf__journal_tap - what a replication layer learns of appends
 * (ha/replication.c). Every hook is optional.
 * @admit: called first by kvf__journal_append(), before anything is
 *	encoded; a non-zero kvf_status refuses the batch (nothing of it is
 *	journaled). May block briefly; must not append.
 * @committed: called with the journal's mutex held, once per batch, in
 *	sequence order, when the batch's sequence numbers are assigned
 *	(before its local sync in STRICT mode): @frames[0..@len) are the
 *	batch's @nr_frames encoded log frames holding @nr_recs records
 *	numbered @first_seq on. Must copy what it keeps and never block.
 * @wait: called by kvf__journal_append() once the batch is durable
 *	locally, with its last sequence number; its kvf_status is the
 *	append's (the batch stays journaled even when it is not KVF_OK).
 * @ctx: passed to the hooks.
 */
struct kvf__journal_tap {
	int (*admit)(void *ctx);
	void (*committed)(void *ctx, const uint8_t *frames, size_t len,
			  uint32_t nr_frames, uint64_t nr_recs,
			  uint64_t first_seq);
	int (*wait)(void *ctx, uint64_t last_seq);
	void *ctx;
};

/**
 * kvf__journal_set_tap() - install (or, with NULL, remove) the tap.
 * @j: the journal. @tap: copied.
 *
 * Appends copy the tap when they start; this returns once no append
 * uses an earlier tap any more (so its context may be freed): make the
 * old tap's wait() return first.
 * Context: blocks; not from a tap hook.
 */
void kvf__journal_set_tap(struct kvf__journal *j,
			  const struct kvf__journal_tap *tap);

/**
 * kvf__journal_append_seq() - kvf__journal_append() that also returns
 * the last sequence number of the batch in *@last_seq (on success).
 */
int kvf__journal_append_seq(struct kvf__journal *j,
			    const struct kvf__jrec *recs, size_t n,
			    uint64_t *last_seq);

/*
 * kvf__snapshot_fn - receives a snapshot's records, in runs encoded as
 * log frames (struct kvf__jbatch's layout: @nr_frames frames, @nr_recs
 * records in @frames[0..@len), valid during the call). Runs inside a read
 * transaction that holds off map growth: copy, never block. A non-zero
 * kvf_status stops the snapshot.
 */
typedef int (*kvf__snapshot_fn)(void *arg, const uint8_t *frames, size_t len,
				uint32_t nr_frames, uint64_t nr_recs);

/**
 * kvf__journal_snapshot() - the journal's state, as records, while
 * appends go on.
 * @j: the journal (its writer runs, or is started).
 * @fn: receives the records: every SEGMENT_MOUNT and OBJECT_PUT of the
 *	image, then the log's records in sequence order; applied in that
 *	order to an empty journal they give the state after *@seq.
 * @seq: receives the last sequence the records cover.
 * @nr_recs: receives how many records @fn was given (at most *@seq).
 *
 * Waits until every record acknowledged before the call is in the LMDB
 * log (the side log drained), then reads in one read transaction; appends
 * go on meanwhile, but a commit that must grow the map waits until the
 * read ends (LMDB cannot remap under a transaction).
 * Context: blocks (the drain, the read: seconds per million
 * objects); any thread but the writer's; not from a tap hook.
 * Return: %KVF_OK; %KVF_ERR_CLOSED; a move's or LMDB's failure;
 * %KVF_ERR_JOURNAL_CORRUPT; @fn's non-zero value; %KVF_ERR_NO_MEMORY.
 */
int kvf__journal_snapshot(struct kvf__journal *j, kvf__snapshot_fn fn,
			  void *arg, uint64_t *seq, uint64_t *nr_recs);

/**
 * kvf__journal_set_base() - number a new journal's records from @seq + 1.
 * @j: a journal just opened on an empty directory: no record, no replay,
 *     no append yet.
 * @seq: the checkpoint sequence it takes (its image, empty, is the state
 *     "after" @seq); 0 changes nothing.
 *
 * For a copy of another journal's state at sequence S made of K records
 * (kvf__journal_snapshot()): set_base(S - K), then append the K records,
 * and the copy ends at S. Durable on return.
 * Context: the opener's thread; blocks (a commit and a sync).
 * Return: %KVF_OK; %KVF_ERR_BUSY (not a new, untouched journal); an LMDB
 * or I/O failure.
 */
int kvf__journal_set_base(struct kvf__journal *j, uint64_t seq);

/* The directory kvf__jdir_stage() renames a new journal to. */
#define KVF__JDIR_INSTALL "snapshot.new"

/**
 * kvf__jdir_stage() - have the complete, closed journal directory
 * @staged (on the same file system as @dir) replace @dir's journal at its
 * next kvf__journal_open(). @staged's files (every one but its
 * kvforge.lock, so also files that belong with the journal, such as a
 * lineage) are synced; @staged is renamed DIR/snapshot.new (the commit
 * point: a crash before leaves the old journal, after it the new one).
 * Context: blocks (fsync, rename). Return: 0 or an errno value.
 */
int kvf__jdir_stage(const char *dir, const char *staged);

/*
 * kvf__jdir_install() - finish installing DIR/snapshot.new, if present:
 * move each of its files over DIR's, sync, remove it. Idempotent; run by
 * kvf__journal_open() with the directory lock held, before anything
 * reads the journal. 0 or an errno value.
 */
int kvf__jdir_install(const char *dir);

#ifdef KVF_FAULT_INJECTION
/**
 * kvf__journal_inject_fault() - make the next commits fail (tests only;
 * compiled in by ./configure --enable-fault-injection).
 * @j: the journal.
 * @code: an errno value (ENOSPC, EIO) or an LMDB code (MDB_MAP_FULL) the
 *        next commits fail with, as if LMDB had returned it.
 * @count: how many commits fail; 0 cancels.
 *
 * A failed commit is aborted for real, so the batch is not in the journal.
 * Context: any thread; never blocks.
 */
void kvf__journal_inject_fault(struct kvf__journal *j, int code,
			       unsigned count);

/**
 * kvf__journal_slow_moves() - stretch every move of side log frames into
 * LMDB (tests only; compiled in by ./configure --enable-fault-injection).
 * @j: the journal.
 * @us: microseconds each move sleeps while it reads the side log with the
 *      journal mutex dropped, as a slow disk would make it; 0 cancels.
 *
 * Widens the window in which appends and syncs run beside a move.
 * Context: any thread; never blocks.
 */
void kvf__journal_slow_moves(struct kvf__journal *j, unsigned us);
#else
/* Without the hooks nothing fails on demand; tests that need it skip. */
static inline void kvf__journal_inject_fault(struct kvf__journal *j, int code,
					     unsigned count)
{
	(void)j;
	(void)code;
	(void)count;
}

static inline void kvf__journal_slow_moves(struct kvf__journal *j,
					   unsigned us)
{
	(void)j;
	(void)us;
}
#endif

/**
 * kvf__journal_close() - drain pending appends, sync, close.
 * @j: the journal; NULL is ignored.
 *
 * No append may start during or after this call.
 * Context: blocks (joins the writer, fsync).
 */
void kvf__journal_close(struct kvf__journal *j);

#endif /* KVF_JOURNAL_JOURNAL_H */
