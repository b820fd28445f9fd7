/* SPDX-License-Identifier: MIT */
/*
 * kvforge/engine.h - opening, configuring and driving an engine.
 *
 * An engine is the metadata state of one store master: clients, their
 * mounted segments, and the objects whose replicas live in them.
 *
 * Thread safety (every header of the library says the same): every public
 * call but kvf_engine_close() is thread-safe, so any number of threads may
 * call any operation on one engine at the same time. kvf_engine_close() is
 * not thread-safe: it must not overlap any other call on the engine, nor
 * be followed by one. No call may be made from a signal handler.
 *
 * RCU: lookups run inside liburcu (urcu-memb flavour) read-side critical
 * sections, so a calling thread must be registered with urcu-memb. A
 * thread's first call registers it (explicitly with kvf_thread_register(),
 * or transparently with any engine call), and that first call takes
 * liburcu's registry lock once; calls documented as lock-free or
 * never-blocking are so from then on. The engine unregisters the
 * registrations it made when their thread exits (or at
 * kvf_thread_unregister()).
 *
 * A host that uses urcu-memb itself keeps its own registrations: a thread
 * it registered before the thread's first engine call is used as it is,
 * never registered twice and never unregistered by the library (also not
 * by kvf_thread_unregister() or kvf_engine_close()). The host must not
 * register a thread the engine registered (kvf_thread_unregister() it
 * first), and must not call the engine from inside its own read-side
 * critical section: several calls wait for grace periods, and such a call
 * aborts the process instead of deadlocking.
 *
 * Threads the library starts, per engine, all joined by kvf_engine_close():
 *  - housekeeping, when &kvf_config.background (kvf_engine_tick());
 *  - record memory prefault, when &kvf_config.background;
 *  - the journal writer, with a journal (BOUNDED or STRICT);
 *  - the journal syncer, with %KVF_DURABILITY_BOUNDED.
 * liburcu runs its own threads, one each per process and kept after close:
 * the call_rcu worker (deferred frees) and the lock-free hash table's
 * resize worker (the client table and %KVF_INDEX_LFHT).
 *
 * Reporting: what a return code cannot say (which journal record made an
 * open refuse, which counter tier the profiler fell back to) goes to
 * &kvf_config.log, stderr by default. The RDMA probe (kvforge/rdma.h),
 * which runs without an engine, takes its own log callback.
 */
#ifndef KVFORGE_ENGINE_H
#define KVFORGE_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <kvforge/log.h>
#include <kvforge/status.h>

#ifdef __cplusplus
extern "C" {
#endif

struct kvf_engine;
struct kvf_profiler;

/** enum kvf_durability - how metadata mutations are journaled. */
enum kvf_durability {
	/** A batch returns once copied into the journal's mapped side log
	 *  (safe from a process crash); synced every @sync_interval_ms
	 *  (default). */
	KVF_DURABILITY_BOUNDED = 0,
	/** A batch returns after its side log frame is synced to disk
	 *  (concurrent batches share one sync). Each caller waits for a
	 *  sync per batch, so more callers help only as far as the
	 *  machine's sync and thread wake-up latencies allow: kvforge-bench
	 *  --workload durability reports that ceiling beside the engine's
	 *  figure (docs/benchmarks.md). */
	KVF_DURABILITY_STRICT = 1,
	/** Memory only; no data directory is needed. */
	KVF_DURABILITY_NONE = 2,
	/** What kvf_config_init() sets: %KVF_DURABILITY_BOUNDED when
	 *  &kvf_config.data_dir is set, %KVF_DURABILITY_NONE when it is NULL,
	 *  so the defaults open as they are. Resolved at kvf_engine_open(). */
	KVF_DURABILITY_DEFAULT = 3,
};

/** enum kvf_placement_strategy - how replicas are placed in segments. */
enum kvf_placement_strategy {
	/** Only segments whose largest free region fits; best fit (default). */
	KVF_PLACEMENT_FRAGMENTATION_AWARE = 0,
	/** Walk from a random segment, distinct segments (upstream default). */
	KVF_PLACEMENT_RANDOM = 1,
	/** Sample segments, prefer the highest free ratio, else random. */
	KVF_PLACEMENT_FREE_RATIO_FIRST = 2,
};

/**
 * enum kvf_eviction_order - which evictable objects an eviction pass takes
 * first (docs/benchmarks.md, "Eviction order on Mooncake's traces").
 */
enum kvf_eviction_order {
	/** Oldest last use first; an object read since its put counts as a
	 *  quarter of the eviction age bar younger; among equal uses the one
	 *  placed later in its segment first (a prefix's deeper blocks
	 *  before its head). Default. */
	KVF_EVICTION_PREFIX = 0,
	/** Oldest last use first, nothing else (kept for comparison). */
	KVF_EVICTION_AGE = 1,
};

/** enum kvf_index_kind - implementation of the metadata index. */
enum kvf_index_kind {
	/** liburcu's cds_lfht (split-ordered lists). */
	KVF_INDEX_LFHT = 0,
	/** KVForge's bucketized, prefetch-pipelined RCU hash. */
	KVF_INDEX_BUCKET = 1,
};

/**
 * typedef kvf_clock_fn - a monotonic clock in nanoseconds.
 *
 * Injected through &struct kvf_config so time rules (leases, client TTL,
 * put timeouts) can be tested without sleeping. Must be thread-safe and
 * never go backwards.
 */
typedef uint64_t (*kvf_clock_fn)(void *ctx);

/**
 * struct kvf_config - engine configuration.
 *
 * Always start from kvf_config_init(), which fills the documented defaults
 * and stamps @struct_size, then change what you need.
 *
 * Growable: later releases only append fields (each starting past the
 * previous struct's end). kvf_engine_open() reads @struct_size: a program
 * built against an older, smaller struct gets the defaults for the fields
 * it does not know; one built against a newer, larger struct is accepted
 * only if every byte this library does not know is zero (a newer field
 * left at its zero default), else refused with %KVF_ERR_INVALID_PARAMS.
 */
struct kvf_config {
	/** sizeof(struct kvf_config) as the caller was compiled, stamped by
	 *  kvf_config_init(); never set it by hand. */
	size_t struct_size;
	/** Journal directory (created if missing). Default NULL: memory
	 *  only. %KVF_DURABILITY_BOUNDED and %KVF_DURABILITY_STRICT need
	 *  one; asking for either without it is refused. */
	const char *data_dir;
	/** Default %KVF_DURABILITY_DEFAULT: bounded with @data_dir, none
	 *  without. */
	enum kvf_durability durability;
	/** Sync period for %KVF_DURABILITY_BOUNDED, ms. Default 50.
	 *  The loss window: an OS crash or power loss loses at most the
	 *  batches acknowledged in the last @sync_interval_ms plus one
	 *  sync's duration (a process crash loses nothing acknowledged).
	 *  Shorter costs put throughput: each sync writes back the side
	 *  log and LMDB pages written since the last one
	 *  (docs/journal.md). */
	uint32_t sync_interval_ms;
	/** %KVF_DURABILITY_BOUNDED writes LMDB through a shared mapping
	 *  (MDB_WRITEMAP; the map is kept fallocated, so a full disk is an
	 *  error, never SIGBUS). Default false. Puts are acknowledged
	 *  through the side log (@journal_wal_bytes), so this only changes
	 *  how the journal's own thread moves them into LMDB and folds
	 *  checkpoints; while a checkpoint folds, every sync then
	 *  write-protects the fold's pages one TLB flush at a time, which
	 *  makes bounded puts slower with it than without
	 *  (docs/benchmarks.md, --workload durability). */
	bool journal_writemap;
	/** %KVF_DURABILITY_BOUNDED acknowledges a batch once it is copied
	 *  into a mapped side log (two files, wal-0.log and wal-1.log, of
	 *  this many bytes each, allocated on disk at open); the journal
	 *  moves it into LMDB in the background. A multiple of 4096, at
	 *  least 64 KiB; 0 (the default) means 32 MiB. Appends wait only
	 *  when both files hold batches not yet synced in LMDB. */
	uint64_t journal_wal_bytes;
	/** Read lease granted by get/exist, ms. Default 10000. 0 grants
	 *  none: an object read a moment ago can be removed or evicted at
	 *  once (as mooncake_master's --default_kv_lease_ttl=0). */
	uint64_t lease_ttl_ms;
	/** A client silent this long is dead, ms. Default 10000. */
	uint64_t client_ttl_ms;
	/** A put processing this long may be pre-empted, ms. Default 30000. */
	uint64_t put_discard_timeout_ms;
	/** Buffers of a pre-empted put are freed after this, ms. Default 600000. */
	uint64_t put_release_timeout_ms;
	/** Soft pin lifetime, ms. Default 1800000 (30 min). */
	uint64_t soft_pin_ttl_ms;
	/** Longest key accepted, bytes. Default 4096, at most 65535. */
	uint32_t max_key_len;
	/** Most items in one batch call. Default 65536. */
	uint32_t max_batch;
	/** Objects to presize for. Default 65536. The index is sized for
	 *  them at open (or for the journal's record count, if larger) and,
	 *  for %KVF_INDEX_BUCKET, its table faulted in then; with @background
	 *  on, a thread keeps record memory for the expected objects not yet
	 *  put faulted in (at the average record size so far, 128 bytes
	 *  before the first; what a smaller size leaves over goes back to
	 *  the system), so a growing table's puts do not zero fresh pages
	 *  inline. Both stay within an eighth of physical memory. */
	uint64_t expected_objects;
	/** Allocation alignment in segments, a power of two, at least 8
	 *  (smaller is refused). Default 64. A segment must be at least
	 *  this large; sizes are rounded up to it. */
	uint64_t alloc_alignment;
	/** Replica placement. Default %KVF_PLACEMENT_FRAGMENTATION_AWARE. */
	enum kvf_placement_strategy placement;
	/** Index implementation. Default %KVF_INDEX_BUCKET. */
	enum kvf_index_kind index;
	/** Eviction starts above this used/total ratio, 0..1. Default
	 *  0.90. At 1 only a failed allocation starts it; at 0 any use. */
	double eviction_high_watermark;
	/** Fraction of capacity one eviction pass frees, 0..1. Default
	 *  0.05; 0 turns eviction off (a full pool answers puts
	 *  %KVF_ERR_NO_SPACE). */
	double eviction_ratio;
	/** Run housekeeping (expiry, eviction, deferred frees) on an
	 *  engine-owned thread. If false, call kvf_engine_tick(). Default true. */
	bool background;
	/** Period of the background thread, ms. Default 100. */
	uint32_t tick_interval_ms;
	/** Clock; NULL means CLOCK_MONOTONIC. */
	kvf_clock_fn clock;
	/** Argument passed to @clock. */
	void *clock_ctx;
	/** Seed for this engine's placement randomness; 0 picks one from
	 *  the clock at open. Engines opened with the same seed and given
	 *  the same calls from one thread place alike, whatever other
	 *  engines of the process do. */
	uint64_t seed;
	/** Where the engine reports what the caller cannot see in a
	 *  return code. Default NULL: lines go to stderr, prefixed
	 *  "kvforge: ". Only broken internal invariants, which abort the
	 *  process, always write to stderr. */
	kvf_log_fn log;
	/** Argument passed to @log. */
	void *log_ctx;
	/** Eviction order. Default %KVF_EVICTION_PREFIX. */
	enum kvf_eviction_order eviction_order;
	/** With a journal, fold its log into its image (a checkpoint)
	 *  once the log holds this many records, or half as many records
	 *  as the image has objects when that is more; 0 (the default)
	 *  means 1,000,000. Recovery replays at most that many records
	 *  beyond the image. A checkpoint whose records are many against
	 *  the image writes the image anew (each page once); a small one
	 *  folds in place, rewriting every image page its records land
	 *  on: fewer records between checkpoints recover faster and write
	 *  more (docs/journal.md, "Checkpoints"). UINT64_MAX never folds:
	 *  the log and the next open's replay grow without bound. */
	uint64_t journal_checkpoint_records;
};

/**
 * struct kvf_engine_stats - a consistent-enough snapshot of counters.
 *
 * Growable: later releases only append counters. kvf_engine_get_stats()
 * passes the caller's sizeof to the library, which fills what both know,
 * zeroes counters it does not know, and says in @struct_size how many
 * bytes it filled.
 */
struct kvf_engine_stats {
	/** Bytes of this struct the library filled: the smaller of the
	 *  caller's and the library's sizeof. A counter at or past
	 *  @struct_size is unknown to the library that ran (and reads
	 *  zero). */
	size_t struct_size;
	uint64_t objects;          /**< complete objects */
	uint64_t processing;       /**< puts started, not ended */
	uint64_t clients;          /**< known clients */
	uint64_t segments;         /**< mounted segments */
	uint64_t capacity_bytes;   /**< sum of mounted segment sizes */
	/** allocated in all segments, sizes rounded up to the alignment
	 *  (a segment's unaligned tail is neither used nor free) */
	uint64_t used_bytes;
	uint64_t deferred_frees;   /**< pre-empted buffers awaiting release */
	uint64_t evicted_objects;  /**< since open */
	uint64_t expired_clients;  /**< since open */
	uint64_t recovered_objects; /**< restored from the journal at open */
	uint64_t recovery_ns;      /**< time spent recovering at open */
	/** Memory the engine mapped for object records (2 MiB chunks):
	 *  live records plus freed blocks kept for reuse until close. */
	uint64_t record_bytes;
	/** Record memory faulted in ahead and not handed out yet (see
	 *  &kvf_config.expected_objects); not part of @record_bytes. */
	uint64_t record_reserve_bytes;
	/** The key index's own memory (its bucket table; records are in
	 *  @record_bytes). 0 with &kvf_config.index "lfht", whose table
	 *  liburcu does not report. */
	uint64_t index_bytes;
	/** The segment allocators' bookkeeping, summed over mounted
	 *  segments: one block slot per allocated or free range, kept
	 *  outside segment memory (as asked of malloc, without its own
	 *  per-chunk headers). */
	uint64_t allocator_bytes;
	/** Eviction passes run since open (kvf_engine_evict() asked to
	 *  free something, by the background tick or the caller). */
	uint64_t eviction_passes;
	/** Of those, passes that evicted at least one object. */
	uint64_t eviction_successes;
	/** Replica bytes eviction freed since open (object size times
	 *  replicas, summed over evicted objects). */
	uint64_t evicted_bytes;
	/** Put items refused because their replicas could not be placed
	 *  (%KVF_ERR_NO_SPACE or %KVF_ERR_NOT_ENOUGH_SEGMENTS), since open. */
	uint64_t put_alloc_failures;
	/** Puts pre-empted after the discard timeout, since open. */
	uint64_t discarded_puts;
	/** Of those, puts whose buffers have all been released (their
	 *  release timeout passed, or their segment was unmounted). */
	uint64_t released_puts;
	/** Bytes of pre-empted puts' buffers not released yet. */
	uint64_t discarded_bytes;
	/** Objects put with a soft pin, complete or being put (the pin's
	 *  deadline may have passed: it is kept until removal). */
	uint64_t soft_pinned;
};

/* Smallest struct sizes the library accepts: 0.1.0's layouts (the config
 * has grown since: eviction_order). */
#define KVF_CONFIG_SIZE_MIN                                                    \
	(offsetof(struct kvf_config, log_ctx) + sizeof(void *))
/* Largest struct kvf_config accepted, whatever header the caller has. */
#define KVF_CONFIG_SIZE_MAX 4096
#define KVF_ENGINE_STATS_SIZE_MIN                                              \
	(offsetof(struct kvf_engine_stats, record_reserve_bytes) +             \
	 sizeof(uint64_t))

/**
 * kvf_config_init_sized() - what kvf_config_init() calls.
 * @cfg: configuration to initialise.
 * @size: sizeof(*@cfg) as the caller was compiled.
 *
 * Fills the fields the library knows with their defaults, zeroes the rest
 * of @size bytes (fields of a newer header than the library's keep their
 * zero default) and stamps &kvf_config.struct_size with @size.
 *
 * Context: any thread; never blocks.
 * Return: %KVF_OK, %KVF_ERR_INVALID_ARGUMENT (NULL @cfg),
 * %KVF_ERR_INVALID_PARAMS (@size below %KVF_CONFIG_SIZE_MIN or above
 * %KVF_CONFIG_SIZE_MAX; @cfg is untouched).
 */
enum kvf_status kvf_config_init_sized(struct kvf_config *cfg, size_t size);

/**
 * kvf_config_init() - fill @cfg with the documented defaults.
 * @cfg: configuration to initialise.
 *
 * Context: any thread; never blocks.
 */
static inline void kvf_config_init(struct kvf_config *cfg)
{
	(void)kvf_config_init_sized(cfg, sizeof(*cfg));
}

/**
 * kvf_engine_open() - create an engine, recovering the journal if present.
 * @cfg: configuration; copied (strings included), the caller keeps it.
 * @out: receives the engine on success; untouched on failure.
 *
 * With a @data_dir holding a journal, rebuilds clients, segments,
 * allocators and objects before returning.
 *
 * Context: may block (disk I/O, thread creation). Registers the calling
 * thread with RCU.
 * Return: %KVF_OK, %KVF_ERR_INVALID_PARAMS for a &kvf_config.struct_size
 * this library cannot take (outside %KVF_CONFIG_SIZE_MIN ..
 * %KVF_CONFIG_SIZE_MAX, or a newer struct with a field it does not know
 * set), %KVF_ERR_INVALID_ARGUMENT for a bad configuration
 * (including %KVF_DURABILITY_BOUNDED or %KVF_DURABILITY_STRICT without a
 * @data_dir), %KVF_ERR_UNAVAILABLE for an index kind this build lacks,
 * %KVF_ERR_JOURNAL_VERSION / %KVF_ERR_JOURNAL_CORRUPT for a directory it
 * refuses, %KVF_ERR_IO, %KVF_ERR_JOURNAL_NO_SPACE, %KVF_ERR_NO_MEMORY.
 */
enum kvf_status kvf_engine_open(const struct kvf_config *cfg,
				struct kvf_engine **out);

/**
 * kvf_engine_close() - stop background work, flush the journal, free all.
 * @engine: engine to close; NULL is ignored.
 *
 * Not thread-safe: no other thread may use @engine during or after this
 * call. Never unregisters a thread the host registered with RCU.
 * Context: blocks (joins threads, syncs the journal, waits for RCU); not
 * inside an RCU read-side section.
 */
void kvf_engine_close(struct kvf_engine *engine);

/**
 * kvf_engine_tick() - run one round of housekeeping now.
 * @engine: the engine.
 *
 * Expires silent clients, runs eviction if needed, and releases the buffers
 * of pre-empted puts whose release timeout passed. The background thread
 * (when &kvf_config.background) calls this periodically; embedders that
 * drive their own loop call it themselves. Safe to call concurrently with
 * every other operation, including another tick.
 *
 * Context: may block briefly (journal, RCU grace period).
 * Return: %KVF_OK, %KVF_ERR_INVALID_ARGUMENT (NULL @engine), or a journal
 * error.
 */
enum kvf_status kvf_engine_tick(struct kvf_engine *engine);

/**
 * kvf_engine_evict() - evict about @bytes of objects now.
 * @engine: the engine.
 * @bytes: bytes of replica space to free.
 * @freed_bytes: if not NULL, receives the bytes actually freed.
 * @evicted: if not NULL, receives the number of objects evicted.
 *
 * Approximately least recently used first (sampled: the cost is
 * proportional to what is evicted, not to the number of objects). Never
 * evicts processing, leased or hard-pinned objects; soft-pinned ones only
 * when nothing else is left. Stops early when nothing evictable is found.
 * kvf_engine_tick() calls this when usage crosses
 * &kvf_config.eviction_high_watermark or after a failed allocation.
 *
 * Context: any thread; may block on the journal. Readers never wait.
 * Return: %KVF_OK or a journal error.
 */
enum kvf_status kvf_engine_evict(struct kvf_engine *engine, uint64_t bytes,
				 uint64_t *freed_bytes, uint64_t *evicted);

/**
 * kvf_engine_get_stats_sized() - what kvf_engine_get_stats() calls.
 * @engine: the engine.
 * @stats: receives @size bytes.
 * @size: sizeof(*@stats) as the caller was compiled.
 *
 * Context: any thread; lock-free, never blocks.
 * Return: %KVF_OK, %KVF_ERR_INVALID_ARGUMENT (NULL @engine or @stats),
 * %KVF_ERR_INVALID_PARAMS (@size below %KVF_ENGINE_STATS_SIZE_MIN;
 * @stats is untouched).
 */
enum kvf_status kvf_engine_get_stats_sized(struct kvf_engine *engine,
					   struct kvf_engine_stats *stats,
					   size_t size);

/**
 * kvf_engine_get_stats() - read the engine's counters.
 * @engine: the engine.
 * @stats: filled on return (&kvf_engine_stats.struct_size included).
 *
 * Context: any thread; lock-free, never blocks.
 * Return: %KVF_OK or %KVF_ERR_INVALID_ARGUMENT.
 */
static inline enum kvf_status
kvf_engine_get_stats(struct kvf_engine *engine, struct kvf_engine_stats *stats)
{
	return kvf_engine_get_stats_sized(engine, stats, sizeof(*stats));
}

/**
 * kvf_engine_profiler() - the engine's per-stage profiler.
 * @engine: the engine.
 *
 * Return: the profiler owned by @engine (see kvforge/profile.h); valid
 * until kvf_engine_close().
 */
struct kvf_profiler *kvf_engine_profiler(struct kvf_engine *engine);

/**
 * kvf_thread_register() - register the calling thread with RCU.
 *
 * Optional: every engine call registers its thread on first use. A thread
 * the engine registers is unregistered automatically at thread exit; a
 * thread the host registered with urcu-memb itself is left as it is.
 * Calling it twice is harmless.
 *
 * Context: any thread, outside an RCU read-side section; the first call on
 * a thread may block briefly (takes liburcu's registry lock).
 * Return: %KVF_OK.
 */
enum kvf_status kvf_thread_register(void);

/**
 * kvf_thread_unregister() - give back the engine's RCU registration now.
 *
 * Optional; harmless if the engine did not register the thread, and it
 * never removes a registration the host made itself. The thread may call
 * the engine again later (it will be registered again).
 *
 * Context: outside any engine call and any RCU read-side section (the
 * latter aborts); may block briefly (takes liburcu's registry lock).
 */
void kvf_thread_unregister(void);

#ifdef __cplusplus
}
#endif
#endif /* KVFORGE_ENGINE_H */
