/* SPDX-License-Identifier: MIT */
/*
 * metadata/object.h - the per-object record the index points at.
 *
 * One arena block per object (metadata/arena.h), laid out so a lookup and
 * a get touch as few cache lines as possible: a 32-byte header (state,
 * putter, key length, replica count, pins, size, lease, stamp), the key
 * inline right after it, then the replicas, 4-byte aligned. A replica is
 * 12 bytes: a 48-bit segment pointer and a 48-bit offset (user-space
 * pointers have 48 significant bits on x86-64 and arm64, and a segment
 * larger than 2^48 bytes is refused at mount, KVF__REPLICA_OFFSET_MAX),
 * read and written only through kvf__replica_seg()/_offset()/_set(). For a
 * 68-byte HiCache key and one replica that is 112 bytes (120 with an
 * 8-byte aligned pointer + offset pair): one 112-byte arena block, no
 * malloc header or rounding. Nothing else is stored per object:
 *   - no hash: the engine has it at hand (it hashed the batch), and the
 *     index recomputes it (XXH3, ~5 ns) on its rare paths (resize, walks);
 *   - no index hook unless the index wants one: an index may ask for a
 *     prefix (index ops ->hook_size) placed *before* the record; the
 *     HOOKED flag says it is there, so freeing finds the block start;
 *   - no rcu_head: unpublished records are reclaimed in batches (struct
 *     kvf__reclaim), one call_rcu per batch instead of one per record.
 *
 * Immutable after publication: key, size, replicas, flags, putter. A
 * change to the replica set is copy-on-write: a new record replaces the
 * old one in the index (the old one goes REPLACED) and keeps the putter.
 * Mutable, atomically: @state (the state machine and writer lock,
 * metadata/objstate.h) and the @owner word: the putting client's id while
 * the put is processing, the lease deadline once complete (readers raise
 * it with an atomic max, lock-free). Only the thread that owns the ENDING
 * state switches it, before publishing COMPLETE.
 *
 * Who put the object outlives the owner word as the putter: a 32-bit
 * fingerprint of the client id (kvf__putter_of()), in bits the header
 * has spare (the state needs 16 bits, a size 48: segments hold at most
 * 2^48 bytes), so the record does not grow. put_end and put_revoke tell
 * the putter of a complete object from any other client by it (Mooncake
 * answers them differently). While processing, the owner word holds the
 * exact id, which is what decides who may end or revoke the put; the
 * fingerprint only tells who a complete object's putter was, where two
 * clients of one fingerprint (one pair in 2^32) are not told apart, and
 * neither call changes a complete object whatever it answers. The
 * journal does not record the putter: a recovered object's is unknown
 * (KVF__PUTTER_UNKNOWN, no client's fingerprint).
 */
#ifndef KVF_METADATA_OBJECT_H
#define KVF_METADATA_OBJECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/die.h"
#include "base/rcu.h"
#include "metadata/hash.h"
#include "metadata/keyeq.h"
#include "metadata/pin.h"

struct kvf__arena;
struct kvf__segment;

/* @flags: the pin bits (metadata/pin.h), and this. */
enum kvf__obj_flags {
	KVF__OBJ_HOOKED = 1u << 7, /* an index hook precedes the record */
};
_Static_assert(!(KVF__OBJ_HOOKED & KVF__OBJ_PIN_MASK),
	       "an object's flags hold its pin bits and HOOKED apart");

/* Size of the index hook prefix when KVF__OBJ_HOOKED is set. */
#define KVF__OBJ_HOOK_SIZE 16

/*
 * One replica: the segment (RCU-protected; outlives every record) and the
 * offset from its base, 48 bits each, in three 4-byte words so that the
 * replicas of a record need only 4-byte alignment after its key.
 */
struct kvf__replica {
	uint32_t seg_lo; /* segment pointer, bits 0-31 */
	uint16_t seg_hi; /* segment pointer, bits 32-47 */
	uint16_t off_hi; /* offset, bits 32-47 */
	uint32_t off_lo; /* offset, bits 0-31 */
};

_Static_assert(sizeof(struct kvf__replica) == 12, "a replica is 12 bytes");

/* Largest offset (so: segment size) a replica can hold. */
#define KVF__REPLICA_OFFSET_MAX ((UINT64_C(1) << 48) - 1)

static inline struct kvf__segment *
kvf__replica_seg(const struct kvf__replica *r)
{
	return (struct kvf__segment *)(uintptr_t)((uint64_t)r->seg_hi << 32 |
						  r->seg_lo);
}

static inline uint64_t kvf__replica_offset(const struct kvf__replica *r)
{
	return (uint64_t)r->off_hi << 32 | r->off_lo;
}

/*
 * Store @seg and @offset (<= KVF__REPLICA_OFFSET_MAX: segments larger than
 * that are refused at mount). Dies on a segment pointer beyond 48 bits.
 */
static inline void kvf__replica_set(struct kvf__replica *r,
				    struct kvf__segment *seg, uint64_t offset)
{
	uint64_t p = (uintptr_t)seg;

	if (p >> 48)
		kvf__die("segment pointer %p does not fit in 48 bits",
			 (void *)seg);
	kvf__assert(offset <= KVF__REPLICA_OFFSET_MAX);
	r->seg_lo = (uint32_t)p;
	r->seg_hi = (uint16_t)(p >> 32);
	r->off_lo = (uint32_t)offset;
	r->off_hi = (uint16_t)(offset >> 32);
}

/* Largest object size a record can hold (its size field has 48 bits). */
#define KVF__OBJECT_SIZE_MAX ((UINT64_C(1) << 48) - 1)

/* The putter of a record whose putter is not known (recovered). */
#define KVF__PUTTER_UNKNOWN 0u

struct kvf__object {
	uint16_t state;     /* metadata/objstate.h; atomic */
	uint16_t putter_hi; /* the putter's fingerprint, bits 16-31 */
	uint16_t key_len;
	uint8_t nr_replicas;
	uint8_t flags; /* enum kvf__pin_flags | enum kvf__obj_flags */
	uint64_t size : 48;      /* <= KVF__OBJECT_SIZE_MAX */
	uint64_t putter_lo : 16; /* the putter's fingerprint, bits 0-15 */
	uint64_t owner; /* client id (processing) / lease deadline; atomic */
	uint64_t stamp; /* put start (ns); the soft pin deadline once complete */
	char key[];     /* key_len bytes, then the replicas */
};

_Static_assert(sizeof(struct kvf__object) == 32,
	       "the record header stays 32 bytes (memory per object)");

/*
 * kvf__putter_of() - the fingerprint of client @client_id that a record
 * keeps as its putter: 32 bits of a 64-bit mix of the id (every id bit
 * reaches every fingerprint bit), never KVF__PUTTER_UNKNOWN. Two client
 * ids share a fingerprint with odds of one in 2^32 per pair.
 */
static inline uint32_t kvf__putter_of(uint64_t client_id)
{
	uint64_t x = client_id;
	uint32_t p;

	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	p = (uint32_t)(x >> 32);
	return p != KVF__PUTTER_UNKNOWN ? p : 1;
}

/* The fingerprint of @o's putter, or KVF__PUTTER_UNKNOWN. Immutable. */
static inline uint32_t kvf__object_putter(const struct kvf__object *o)
{
	return (uint32_t)o->putter_hi << 16 | (uint32_t)o->putter_lo;
}

/* Set @o's putter: only before the record is published. */
static inline void kvf__object_set_putter(struct kvf__object *o,
					  uint32_t putter)
{
	o->putter_hi = (uint16_t)(putter >> 16);
	o->putter_lo = putter & 0xffffu;
}

static inline const char *kvf__object_key(const struct kvf__object *o)
{
	return o->key;
}

/* Whether @o's key is the @len bytes at @data (both indexes' lookups,
 * put_end's check of its put_start's records). Pure. */
static inline bool kvf__object_has_key(const struct kvf__object *o,
				       const char *data, size_t len)
{
	return o->key_len == len &&
	       kvf__bytes_equal(kvf__object_key(o), data, len);
}

/* The hash of @o's key: the one its index entry and allocation tags
 * were made with (kvf__key_hash()). */
static inline uint64_t kvf__object_hash(const struct kvf__object *o)
{
	return kvf__key_hash(o->key, o->key_len);
}

static inline size_t kvf__object_replicas_offset(size_t key_len)
{
	return (sizeof(struct kvf__object) + key_len + 3) & ~(size_t)3;
}

/* Bytes of a record (without a hook) with @key_len and @nr_replicas. */
static inline size_t kvf__object_bytes(size_t key_len, unsigned nr_replicas)
{
	return kvf__object_replicas_offset(key_len) +
	       nr_replicas * sizeof(struct kvf__replica);
}

static inline struct kvf__replica *kvf__object_replicas(struct kvf__object *o)
{
	return (struct kvf__replica *)((char *)o +
				       kvf__object_replicas_offset(o->key_len));
}

static inline const struct kvf__replica *
kvf__object_replicas_const(const struct kvf__object *o)
{
	return (const struct kvf__replica *)((const char *)o +
					     kvf__object_replicas_offset(
						     o->key_len));
}

/* The index hook prefix of a HOOKED record. */
static inline void *kvf__object_hook(struct kvf__object *o)
{
	return (char *)o - KVF__OBJ_HOOK_SIZE;
}

static inline struct kvf__object *kvf__object_from_hook(void *hook)
{
	return (struct kvf__object *)((char *)hook + KVF__OBJ_HOOK_SIZE);
}

/*
 * kvf__object_new() - allocate a record from @arena with its key, state
 * PROCESSING, everything else zero (so its putter KVF__PUTTER_UNKNOWN);
 * with @hooked, an index hook prefix before it. NULL on allocation
 * failure. Thread-safe.
 */
struct kvf__object *kvf__object_new(struct kvf__arena *arena, const char *key,
				    size_t key_len, unsigned nr_replicas,
				    bool hooked);

/* Free now: only for records never published, or with no readers left. */
void kvf__object_free(struct kvf__object *o);

/*
 * struct kvf__reclaim - records unpublished by one operation, freed
 * together after one grace period. Use from inside or outside a read-side
 * section; kvf__reclaim_flush() must run before the collector goes out of
 * scope.
 */
struct kvf__reclaim_block;

struct kvf__reclaim {
	struct kvf__reclaim_block *blk;
};

void kvf__reclaim_add(struct kvf__reclaim *rc, struct kvf__object *o);
void kvf__reclaim_flush(struct kvf__reclaim *rc);

/* Records leaked because a reclaim block could not be allocated. */
uint64_t kvf__reclaim_leaked(void);

#endif /* KVF_METADATA_OBJECT_H */
