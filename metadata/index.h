/* SPDX-License-Identifier: MIT */
/*
 * metadata/index.h - the narrow interface of the object index.
 *
 * Maps keys to &struct kvf__object records. Implementations: cds_lfht
 * (index_lfht.c) and the bucketized pipelined hash (index_bucket.c); the
 * engine picks one from &kvf_config.index. The index never allocates or
 * frees records: the engine owns them, and frees an unpublished record only
 * after an RCU grace period.
 *
 * Concurrency contract, for every implementation:
 *  - all calls except create/destroy are made by RCU-registered threads
 *    *inside* a read-side critical section;
 *  - lookups take no lock and never wait for writers;
 *  - insert/replace/remove may run concurrently with each other and with
 *    lookups; a record returned by a lookup stays valid until the caller
 *    leaves its read-side section;
 *  - @hash is always kvf__key_hash() of the record's key (records do not
 *    store it: callers have it from hashing their batch).
 */
#ifndef KVF_METADATA_INDEX_H
#define KVF_METADATA_INDEX_H

#include <stddef.h>
#include <stdint.h>

#include <kvforge/batch.h>

#include "metadata/object.h"

struct kvf__index;

/* Called for each record by foreach; may remove or replace that record. */
typedef void (*kvf__index_visit_fn)(struct kvf__object *o, void *arg);

/* A predicate over records, for lookups by hash alone. */
typedef bool (*kvf__index_match_fn)(const struct kvf__object *o, void *arg);

struct kvf__index_ops {
	const char *name;
	/* Records need a KVF__OBJ_HOOK_SIZE hook prefix (kvf__object_new). */
	bool hooked;
	/* Presize for @expected records. Returns KVF_OK or KVF_ERR_NO_MEMORY. */
	int (*create)(uint64_t expected, struct kvf__index **out);
	/* The index must be empty and no reader may remain. */
	void (*destroy)(struct kvf__index *idx);
	/*
	 * For each i < n: out[i] = the record whose key equals keys[i] (in any
	 * state), or NULL. hashes[i] = kvf__key_hash(keys[i]).
	 */
	void (*lookup_batch)(struct kvf__index *idx, size_t n,
			     const uint64_t *hashes, const struct kvf_key *keys,
			     struct kvf__object **out);
	/* Insert @o unless its key is present: NULL, or the existing record. */
	struct kvf__object *(*insert_unique)(struct kvf__index *idx,
					     struct kvf__object *o,
					     uint64_t hash);
	/*
	 * Optional, with insert_since: seqs[i] = the insert sequence of
	 * hashes[i] (kvf__index_insert_seqs()).
	 */
	void (*insert_seqs)(struct kvf__index *idx, size_t n,
			    const uint64_t *hashes, uint32_t *seqs);
	/* insert_unique, trusting a miss seen after @seq was read. */
	struct kvf__object *(*insert_since)(struct kvf__index *idx,
					    struct kvf__object *o,
					    uint64_t hash, uint32_t seq);
	/* Swap @old (same key) for @new. KVF_OK or KVF_ERR_OBJECT_NOT_FOUND. */
	int (*replace)(struct kvf__index *idx, struct kvf__object *old,
		       struct kvf__object *new_obj, uint64_t hash);
	/* Unlink @o. KVF_OK or KVF_ERR_OBJECT_NOT_FOUND (already gone). */
	int (*remove)(struct kvf__index *idx, struct kvf__object *o,
		      uint64_t hash);
	/*
	 * The record whose key hashes to @hash and for which @match is true,
	 * or NULL: finds the owner of a tagged allocation without its key.
	 * Only bits 32-63 of @hash count (an allocation tag may keep no
	 * more): @match must tell the record apart from others sharing them.
	 */
	struct kvf__object *(*lookup_hash)(struct kvf__index *idx,
					   uint64_t hash,
					   kvf__index_match_fn match,
					   void *arg);
	/*
	 * Optional: whether every objs[i] is in the index under hashes[i]
	 * (its key's hash) now; compares records by address, reads none.
	 */
	bool (*holds_batch)(struct kvf__index *idx, size_t n,
			    const uint64_t *hashes,
			    struct kvf__object *const *objs);
	/* Optional: start fetching what lookup_hash(@hash) will read. */
	void (*prefetch_hash)(struct kvf__index *idx, uint64_t hash);
	/*
	 * Optional: start taking, for writing, the line an insert, replace
	 * or remove of a record of @hash locks first.
	 */
	void (*prefetch_write)(struct kvf__index *idx, uint64_t hash);
	/* Visit every record present at the start and not removed since. */
	void (*foreach)(struct kvf__index *idx, kvf__index_visit_fn fn,
			void *arg);
	/* Approximate number of records. */
	uint64_t (*count)(struct kvf__index *idx);
	/*
	 * Optional: bytes of the index's own structures (records not
	 * counted), inside a read-side section.
	 */
	uint64_t (*bytes)(struct kvf__index *idx);
};

/* Every implementation's object starts with this. */
struct kvf__index {
	const struct kvf__index_ops *ops;
};

extern const struct kvf__index_ops kvf__index_lfht_ops;
extern const struct kvf__index_ops kvf__index_bucket_ops;

/*
 * Bytes of the bucket table the bucket index allocates when presized for
 * @expected records (benchmarks size their memory-floor probe with it).
 */
uint64_t kvf__index_bucket_table_bytes(uint64_t expected);

/*
 * The home of a record of key hash @hash in a bucket index table of @nr
 * buckets (@nr >= 1): floor(mix(hash >> 32) * nr / 2^64), so homes keep
 * the order of the mixed hash at every table size (for tests).
 */
uint64_t kvf__index_bucket_home(uint64_t nr, uint64_t hash);

static inline void kvf__index_lookup_batch(struct kvf__index *idx, size_t n,
					   const uint64_t *hashes,
					   const struct kvf_key *keys,
					   struct kvf__object **out)
{
	idx->ops->lookup_batch(idx, n, hashes, keys, out);
}

static inline struct kvf__object *
kvf__index_insert_unique(struct kvf__index *idx, struct kvf__object *o,
			 uint64_t hash)
{
	return idx->ops->insert_unique(idx, o, hash);
}

/*
 * kvf__index_insert_seqs() - read the insert sequences of @n hashes.
 * @idx: the index
 * @n: number of hashes
 * @hashes: kvf__key_hash() of keys a caller is about to look up and then,
 *          for those missing, insert
 * @seqs: out: one opaque sequence per hash, for kvf__index_insert_since()
 *
 * A sequence moves with every insert of a record whose hash shares a few
 * bits with @hashes[i] (the bucket index: a few counters per writer
 * stripe, on the stripe's line). Read before a lookup that misses, it
 * lets the insert of that key skip looking again under the writer lock
 * when nothing was inserted near the key since. Indexes without
 * sequences leave @seqs untouched. Inside a read-side section; takes no
 * lock, never blocks.
 */
static inline void kvf__index_insert_seqs(struct kvf__index *idx, size_t n,
					  const uint64_t *hashes,
					  uint32_t *seqs)
{
	if (idx->ops->insert_seqs)
		idx->ops->insert_seqs(idx, n, hashes, seqs);
}

/*
 * kvf__index_insert_since() - insert @o unless its key is present.
 * @idx: the index
 * @o: the record, fully written (published by the insert)
 * @hash: kvf__key_hash() of @o's key
 * @seq: from kvf__index_insert_seqs() of @hash, read before a lookup of
 *       @o's key, in the same read-side section, found nothing
 *
 * As kvf__index_insert_unique(): NULL when inserted, else the record
 * that holds the key. When no record near @hash was inserted since @seq
 * was read, the key is still absent (every insert of a key moves its
 * sequence, under the lock that this insert takes) and is not looked
 * for again; otherwise it is. A caller that did not look the key up
 * after reading @seq must use kvf__index_insert_unique(). Locking and
 * blocking as kvf__index_insert_unique().
 */
static inline struct kvf__object *
kvf__index_insert_since(struct kvf__index *idx, struct kvf__object *o,
			uint64_t hash, uint32_t seq)
{
	if (idx->ops->insert_since)
		return idx->ops->insert_since(idx, o, hash, seq);
	return idx->ops->insert_unique(idx, o, hash);
}

static inline int kvf__index_replace(struct kvf__index *idx,
				     struct kvf__object *old,
				     struct kvf__object *new_obj, uint64_t hash)
{
	return idx->ops->replace(idx, old, new_obj, hash);
}

static inline int kvf__index_remove(struct kvf__index *idx,
				    struct kvf__object *o, uint64_t hash)
{
	return idx->ops->remove(idx, o, hash);
}

/* A new record shaped for @idx (see kvf__object_new()). */
static inline struct kvf__object *
kvf__index_object_new(struct kvf__index *idx, struct kvf__arena *arena,
		      const char *key, size_t key_len, unsigned nr_replicas)
{
	return kvf__object_new(arena, key, key_len, nr_replicas,
			       idx->ops->hooked);
}

static inline struct kvf__object *
kvf__index_lookup_hash(struct kvf__index *idx, uint64_t hash,
		       kvf__index_match_fn match, void *arg)
{
	return idx->ops->lookup_hash(idx, hash, match, arg);
}

static inline bool kvf__index_is_record(const struct kvf__object *o,
					void *arg)
{
	return o == arg;
}

/*
 * kvf__index_holds_batch() - are these records in the index?
 * @idx: the index
 * @n: number of records
 * @hashes: kvf__key_hash() of each record's key
 * @objs: records, which may have been removed and even freed since the
 *        caller saw them: they are compared by address, never read
 *
 * Returns true when every @objs[i] is in @idx under @hashes[i]; then each
 * is a live record, readable until the caller's read-side section ends,
 * and the only one the index holds for its key. Inside a read-side
 * section; takes no lock, never blocks.
 */
static inline bool kvf__index_holds_batch(struct kvf__index *idx, size_t n,
					  const uint64_t *hashes,
					  struct kvf__object *const *objs)
{
	if (idx->ops->holds_batch)
		return idx->ops->holds_batch(idx, n, hashes, objs);
	for (size_t i = 0; i < n; i++)
		if (idx->ops->lookup_hash(idx, hashes[i], kvf__index_is_record,
					  objs[i]) != objs[i])
			return false;
	return true;
}

static inline void kvf__index_prefetch_hash(struct kvf__index *idx,
					    uint64_t hash)
{
	if (idx->ops->prefetch_hash)
		idx->ops->prefetch_hash(idx, hash);
}

/*
 * kvf__index_prefetch_write() - warm the lines a write of @hash takes.
 * @idx: the index
 * @hash: kvf__key_hash() of the key an insert, replace or remove will
 *        write a few keys later
 *
 * With two writing threads, the bucket index's stripe locks (256 lines,
 * hot in both CPUs' caches) were last taken on the other CPU about half
 * the time, and each such lock waited for its line; so did the
 * compare-and-swap that claims a slot in the home bucket, whose line the
 * lookup had read (shared). Both lines are asked for writing
 * (base/prefetch.h). Writers loop over a batch: asking
 * KVF__INDEX_WRITE_AHEAD keys ahead lets the lines arrive while the
 * earlier keys are written. A hint only: no lock is taken and no record
 * read, but the current table is, so the caller is inside an RCU
 * read-side section. Never blocks.
 */
#define KVF__INDEX_WRITE_AHEAD 6

static inline void kvf__index_prefetch_write(struct kvf__index *idx,
					     uint64_t hash)
{
	if (idx->ops->prefetch_write)
		idx->ops->prefetch_write(idx, hash);
}

static inline void kvf__index_foreach(struct kvf__index *idx,
				      kvf__index_visit_fn fn, void *arg)
{
	idx->ops->foreach(idx, fn, arg);
}

static inline uint64_t kvf__index_count(struct kvf__index *idx)
{
	return idx->ops->count(idx);
}

/* Bytes of @idx's own structures, or 0 when the kind cannot tell. */
static inline uint64_t kvf__index_bytes(struct kvf__index *idx)
{
	return idx->ops->bytes ? idx->ops->bytes(idx) : 0;
}

static inline void kvf__index_destroy(struct kvf__index *idx)
{
	idx->ops->destroy(idx);
}

#endif /* KVF_METADATA_INDEX_H */
