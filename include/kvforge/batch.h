/* SPDX-License-Identifier: MIT */
/*
 * kvforge/batch.h - the batched object API.
 *
 * Every operation takes arrays and fills a per-item status array; a
 * single-key call is a batch of one. The return value is the overall
 * status:
 *   - %KVF_OK: every item succeeded (for kvf_batch_exist(), not-found is
 *     an answer, not a failure);
 *   - %KVF_ERR_PARTIAL: at least one item failed; read @status;
 *   - another error: the batch itself was refused (NULL arrays, empty or
 *     oversized batch, %KVF_ERR_NO_MEMORY for its scratch space, and the
 *     call's own batch errors below) and nothing changed; every entry of
 *     @status, when @status is not NULL, holds that same code.
 * An item that fails changes nothing, and the other items proceed.
 *
 * Batch errors every call shares: %KVF_ERR_INVALID_ARGUMENT (NULL
 * @engine, @keys or @status, or another required array), and
 * %KVF_ERR_BATCH_EMPTY, %KVF_ERR_BATCH_TOO_LARGE (more than
 * &kvf_config.max_batch items), %KVF_ERR_NO_MEMORY (scratch space).
 *
 * Per-item validation, for every call: an empty key or one longer than
 * &kvf_config.max_key_len gives %KVF_ERR_INVALID_KEY; a key that appears
 * more than once in one batch gives %KVF_ERR_DUPLICATE_KEY to every
 * occurrence. Each call's comment lists its other item errors, all of
 * them.
 *
 * Journal errors: a journaled call whose batch the journal refuses gives
 * every item it held the journal's status, one of %KVF_ERR_JOURNAL,
 * %KVF_ERR_JOURNAL_NO_SPACE, %KVF_ERR_JOURNAL_CORRUPT, %KVF_ERR_IO,
 * %KVF_ERR_NO_MEMORY; those items change nothing and may be retried.
 *
 * Concurrency (as in kvforge/engine.h): all calls are thread-safe, and
 * kvf_engine_close() must not overlap any of them. Readers are lock-free
 * (get/exist never wait for writers). A thread's first call registers it
 * with RCU and takes liburcu's registry lock once; after that get and
 * exist never block and take no lock. Calls that mutate metadata may block
 * on the journal (&kvf_config.durability).
 */
#ifndef KVFORGE_BATCH_H
#define KVFORGE_BATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <kvforge/engine.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Most replicas one object may have. */
#define KVF_MAX_REPLICAS 4
/** Most preferred segments one &struct kvf_put_config may name. */
#define KVF_MAX_PREFERRED 16

/**
 * struct kvf_key - a key: @len bytes at @data (not NUL-terminated).
 * The engine copies what it keeps; the caller owns @data.
 * Stable layout within a major version.
 */
struct kvf_key {
	const char *data;
	size_t len;
};

/**
 * struct kvf_replica_desc - where one replica lives.
 * @segment_id: the segment (its endpoint: kvf_segment_query()).
 * @addr: first byte, in the segment owner's address space.
 * @size: bytes (the object's size).
 *
 * Stable layout within a major version (callers allocate arrays of it).
 */
struct kvf_replica_desc {
	uint64_t segment_id;
	uint64_t addr;
	uint64_t size;
};

/** struct kvf_replicas - the replicas of one object (stable layout). */
struct kvf_replicas {
	uint32_t count;
	struct kvf_replica_desc replica[KVF_MAX_REPLICAS];
};

/**
 * struct kvf_put_config - how a batch of puts is placed.
 * @replica_num: replicas per object, 1..%KVF_MAX_REPLICAS.
 * @preferred_segments: tried first, in order; may be NULL.
 * @nr_preferred: entries in @preferred_segments, at most
 *                %KVF_MAX_PREFERRED (more is refused, never truncated).
 * @hard_pin: never evict these objects; remove them only with force.
 * @soft_pin: evict these only after everything else, for
 *            &kvf_config.soft_pin_ttl_ms. With @hard_pin also set, the
 *            hard pin governs and the soft pin adds nothing.
 *
 * Stable layout within a major version.
 */
struct kvf_put_config {
	uint32_t replica_num;
	const uint64_t *preferred_segments;
	uint32_t nr_preferred;
	bool hard_pin;
	bool soft_pin;
};

/**
 * kvf_batch_put_start() - allocate replicas for new objects.
 * @engine: the engine.
 * @client_id: the writing client (must be known: it mounted a segment).
 * @keys: @n keys.
 * @sizes: @n object sizes in bytes, each > 0.
 * @n: batch size, 1..&kvf_config.max_batch.
 * @cfg: placement for the whole batch.
 * @out: @n replica lists, filled for items whose status is %KVF_OK.
 * @status: @n per-item statuses.
 *
 * Each object is recorded as processing: invisible to get/exist until
 * kvf_batch_put_end(). A processing object older than
 * &kvf_config.put_discard_timeout_ms is pre-empted: its buffers are freed
 * after &kvf_config.put_release_timeout_ms. Not journaled (a put is
 * durable from its end).
 *
 * Item errors: %KVF_ERR_INVALID_KEY, %KVF_ERR_DUPLICATE_KEY,
 * %KVF_ERR_INVALID_PARAMS (size 0 or 2^48 and above, or a size fewer than
 * @cfg->replica_num mounted segments could hold even empty: eviction
 * cannot help, so none is triggered), %KVF_ERR_OBJECT_ALREADY_EXISTS
 * (complete, or processing and not yet pre-emptible), %KVF_ERR_NO_SPACE
 * (no segment set has room now; the next housekeeping round evicts),
 * %KVF_ERR_NO_MEMORY (no memory for the record or the allocators'
 * bookkeeping), %KVF_ERR_BUSY (other threads kept creating and deleting
 * the same key; retry). Not journaled, so no journal errors.
 * Batch errors: %KVF_ERR_CLIENT_NOT_FOUND, %KVF_ERR_INVALID_PARAMS (NULL
 * @cfg, bad replica_num, more than %KVF_MAX_PREFERRED preferred
 * segments), %KVF_ERR_INVALID_ARGUMENT (NULL @sizes or @out,
 * @nr_preferred without a list), %KVF_ERR_NOT_ENOUGH_SEGMENTS,
 * %KVF_ERR_SEGMENT_NOT_FOUND (an unknown preferred segment), plus the
 * common ones above.
 *
 * Context: any thread; never blocks on I/O.
 */
enum kvf_status
kvf_batch_put_start(struct kvf_engine *engine, uint64_t client_id,
		    const struct kvf_key *keys, const uint64_t *sizes, size_t n,
		    const struct kvf_put_config *cfg, struct kvf_replicas *out,
		    enum kvf_status *status);

/**
 * kvf_batch_put_end() - mark puts complete; the objects become readable.
 * @engine: the engine.
 * @client_id: must be the client that started each put.
 * @keys: @n keys.
 * @n: batch size.
 * @status: @n per-item statuses.
 *
 * @client_id need not be known to the engine: ownership is checked per
 * item against the client that started the put. A client that expired
 * may still end (or revoke) its own puts that kept a replica (the
 * replicas in its own segments went with them). A client id the engine
 * never saw gets %KVF_ERR_ILLEGAL_CLIENT for every item that exists.
 *
 * Each item is answered as Mooncake's master answers PutEnd: first
 * whether the key names an object, then whether @client_id put it, then
 * the object's state. The engine keeps who put an object after its put
 * ended, so a writer whose put was dropped (its only replicas' segment
 * unmounted, its client expired, its put pre-empted) and whose key
 * another client then put is told %KVF_ERR_ILLEGAL_CLIENT, never that its
 * put ended. Who put an ended object is kept as a 32-bit fingerprint of
 * the client id: a client whose id shares the putter's fingerprint (one
 * pair of ids in 2^32) gets the putter's answer; neither answer changes
 * anything. The journal does not record it: an object recovered from the
 * journal was put by no client the engine can name, and every client
 * gets %KVF_ERR_ILLEGAL_CLIENT for it.
 *
 * Item errors: %KVF_ERR_INVALID_KEY, %KVF_ERR_DUPLICATE_KEY,
 * %KVF_ERR_OBJECT_NOT_FOUND (no object under the key: never put, revoked,
 * removed, or its put dropped),
 * %KVF_ERR_ILLEGAL_CLIENT (the object, processing or ended, was put by
 * another client, also for a client that never started the key, or by
 * no client known since recovery),
 * %KVF_ERR_OBJECT_ALREADY_EXISTS (@client_id's own put of the key has
 * already ended, or another call is ending it or removing the object;
 * kvforge-master answers PutEnd with success here, as Mooncake does), and
 * the journal errors (above) on every item the refused batch held: those
 * puts stay processing and may be ended again.
 * Journaled: with %KVF_DURABILITY_STRICT it returns after the sync.
 *
 * Cheaper when its keys are, in order, exactly the keys that one of the
 * last 16 kvf_batch_put_start() calls on the same thread for the same
 * client accepted (%KVF_OK; the refused ones left out): the records that
 * call made are checked against the index instead of looking every key
 * up again. Any other call looks its keys up; the answers are the same
 * either way.
 *
 * Context: any thread; may block on the journal.
 */
enum kvf_status kvf_batch_put_end(struct kvf_engine *engine, uint64_t client_id,
				  const struct kvf_key *keys, size_t n,
				  enum kvf_status *status);

/**
 * kvf_batch_put_revoke() - abandon started puts and free their buffers.
 * @engine: the engine.
 * @client_id: must be the client that started each put.
 * @keys: @n keys.
 * @n: batch size.
 * @status: @n per-item statuses.
 *
 * Item errors: %KVF_ERR_INVALID_KEY, %KVF_ERR_DUPLICATE_KEY,
 * %KVF_ERR_OBJECT_NOT_FOUND, %KVF_ERR_ILLEGAL_CLIENT,
 * %KVF_ERR_OBJECT_ALREADY_EXISTS, in the same order and cases as for
 * kvf_batch_put_end() (kvforge-master answers Mooncake's INVALID_WRITE
 * for the last, as Mooncake does: nothing of the object is processing);
 * not journaled, so no journal errors.
 * Context: any thread; never blocks on I/O.
 */
enum kvf_status kvf_batch_put_revoke(struct kvf_engine *engine,
				     uint64_t client_id,
				     const struct kvf_key *keys, size_t n,
				     enum kvf_status *status);

/**
 * kvf_batch_get() - replica descriptors of complete objects, with a lease.
 * @engine: the engine.
 * @keys: @n keys.
 * @n: batch size.
 * @out: @n replica lists, filled for items whose status is %KVF_OK.
 * @status: @n per-item statuses.
 * @lease_ttl_ms: if not NULL, receives the lease granted (ms).
 *
 * Grants or extends each found object's lease to now + lease TTL (never
 * shortens it). A leased object is not evicted, nor removed without force.
 *
 * Item errors: %KVF_ERR_INVALID_KEY, %KVF_ERR_DUPLICATE_KEY,
 * %KVF_ERR_OBJECT_NOT_FOUND (absent, removed or evicted),
 * %KVF_ERR_OBJECT_NOT_READY (its put has not ended yet, or its put_end is
 * in flight).
 * Context: any thread; RCU reader; lock-free, never blocks.
 */
enum kvf_status kvf_batch_get(struct kvf_engine *engine,
			      const struct kvf_key *keys, size_t n,
			      struct kvf_replicas *out, enum kvf_status *status,
			      uint64_t *lease_ttl_ms);

/**
 * kvf_batch_exist() - which keys name complete objects; extends leases.
 * @engine: the engine.
 * @keys: @n keys.
 * @n: batch size.
 * @status: @n per-item: %KVF_OK (exists) or %KVF_ERR_OBJECT_NOT_FOUND
 *          (also for an object whose put has not ended yet), or the item
 *          errors %KVF_ERR_INVALID_KEY, %KVF_ERR_DUPLICATE_KEY.
 *
 * Return: %KVF_OK when every key was answered (found or not),
 * %KVF_ERR_PARTIAL when some were refused (invalid or duplicate keys).
 * Context: any thread; RCU reader; lock-free, never blocks.
 */
enum kvf_status kvf_batch_exist(struct kvf_engine *engine,
				const struct kvf_key *keys, size_t n,
				enum kvf_status *status);

/**
 * kvf_batch_remove() - remove complete objects and free their buffers.
 * @engine: the engine.
 * @keys: @n keys.
 * @n: batch size.
 * @force: remove even if leased or pinned.
 * @status: @n per-item statuses.
 *
 * Item errors: %KVF_ERR_INVALID_KEY, %KVF_ERR_DUPLICATE_KEY,
 * %KVF_ERR_OBJECT_NOT_FOUND (also while another call removes it),
 * %KVF_ERR_OBJECT_NOT_READY (processing: use revoke; or its put_end is in
 * flight), %KVF_ERR_OBJECT_HAS_LEASE and %KVF_ERR_OBJECT_PINNED (hard
 * pin) without @force, and the journal errors (above) on every item the
 * refused batch held: those objects stay. Journaled.
 *
 * Context: any thread; may block on the journal.
 */
enum kvf_status kvf_batch_remove(struct kvf_engine *engine,
				 const struct kvf_key *keys, size_t n,
				 bool force, enum kvf_status *status);

/**
 * kvf_remove_all() - remove every complete object (leased and hard-pinned
 * ones only with @force).
 * @engine: the engine.
 * @force: also leased and pinned objects.
 * @removed: if not NULL, receives how many were removed.
 *
 * Objects are found through the mounted segments' used blocks, one
 * bounded window at a time; objects put after the call began may or may
 * not be removed. A journal error does not stop the sweep: the objects
 * it refused stay, and the last such error is returned.
 *
 * Context: any thread; readers are not stalled, and no RCU read-side
 * section is held across a journal wait; may block on the journal.
 * Return: %KVF_OK, %KVF_ERR_INVALID_ARGUMENT (NULL @engine),
 * %KVF_ERR_NO_MEMORY, or one of the journal errors (above).
 */
enum kvf_status kvf_remove_all(struct kvf_engine *engine, bool force,
			       uint64_t *removed);

/**
 * kvf_remove_prefix() - remove complete objects whose key starts with
 * @prefix (leased and hard-pinned ones only with @force).
 * @engine: the engine.
 * @prefix: the prefix; an empty prefix is refused (use kvf_remove_all()).
 * @force: also leased and pinned objects.
 * @removed: if not NULL, receives how many were removed.
 *
 * Context: as kvf_remove_all().
 * Return: %KVF_OK, %KVF_ERR_INVALID_ARGUMENT (NULL @engine or @prefix),
 * %KVF_ERR_INVALID_KEY, or one of the journal errors (above).
 */
enum kvf_status kvf_remove_prefix(struct kvf_engine *engine,
				  const struct kvf_key *prefix, bool force,
				  uint64_t *removed);

#ifdef __cplusplus
}
#endif
#endif /* KVFORGE_BATCH_H */
