/* SPDX-License-Identifier: MIT */
/*
 * metadata/index_bucket.c - a bucketized RCU hash built for batch lookups.
 *
 * The shape is the Linux kernel's rhashtable (RCU readers, per-stripe
 * writer locks, resize by building a new table and publishing it), with a
 * table layout chosen so that a batch of lookups can be pipelined to the
 * memory-overlap limit instead of chasing one dependent miss after another
 * (docs/architecture.md, "Data"; the pipeline is described below).
 *
 * Layout
 * ------
 * A table is an array of 64-byte buckets (one cache line each), of any
 * length: as many as fill the pages of its mapping (table_buckets()).
 * A bucket holds 7 slots and one "displaced" word. A slot is one 64-bit word
 * {16-bit tag | 48-bit record pointer}; 0 means empty, and tags are never 0,
 * so a used slot is never 0. The tag is the top 16 bits of the hash. The
 * home bucket: the hash's top 32 bits times an odd constant (mod 2^64) is
 * the key's point x on a circle of 2^64, and the home of x in a table of
 * nr buckets is floor(x * nr / 2^64), the high word of one multiply
 * (Lemire's "fastrange"): the buckets cut the circle into nr equal arcs,
 * in order. Only bits 32-63 of a hash count (home and tag), so a caller
 * that kept 32 bits of a key's hash (an allocation tag) finds its record
 * with lookup_hash(): the low half of the hash goes to the stripe locks.
 * Keys whose hashes share those 32 bits share home and tag (at 10M keys
 * about one in a thousand, each costing a key compare more). A
 * key lives in its home bucket or, when that was full at insert time, in
 * the first bucket after it (wrapping) with a free slot; the home bucket's
 * "displaced" word is the largest such distance, so a lookup that misses
 * in the home bucket knows exactly how many neighbours to probe and can
 * prefetch them all at once. Empty slots never end a probe: there are no
 * tombstones, and entries never move inside a table.
 *
 * Invariants
 *  I1. A record homed at h sits in bucket h + d (mod size) with
 *      d <= displaced[h]. displaced[h] only grows within one table.
 *  I2. A non-empty slot is changed (cleared or replaced) only by a writer
 *      holding the stripe lock of that record's hash. An empty slot is
 *      claimed with a compare-and-swap from 0, so writers of different
 *      stripes that pick the same free slot cannot both win.
 *  I3. All records with one key have one hash, hence one stripe: the
 *      "is the key present?" check and the claim of a slot for it are one
 *      atomic step with respect to any other writer of that key.
 *  I4. The published table (->table) changes only while the resizer holds
 *      the resize mutex and every stripe is frozen (a flag set under the
 *      stripe's lock); so a writer that holds a stripe lock, found it not
 *      frozen and has re-read ->table works on the current table, and a
 *      table that is no longer current is frozen: nothing writes it.
 *
 * Memory ordering
 *  - Slots and displaced words are only accessed with __atomic builtins,
 *    but for one filter: tag_candidates() reads a bucket's line with
 *    vector loads to pick the slots worth loading, and each is then
 *    loaded atomically and checked again.
 *    A writer raises displaced[h] (release) *before* the slot claim
 *    (CAS, release), so a reader that finds the slot also sees the range
 *    covering it; a raise without a successful claim only costs a probe.
 *  - Record contents are written by the engine before insert/replace; the
 *    release on the slot store publishes them and the reader's acquire
 *    load of the slot makes them visible. kvf__tsan_release/acquire mark
 *    the same points for ThreadSanitizer, which cannot see grace periods.
 *  - ->table is published with a release store (rcu_assign_pointer) and
 *    read with an acquire load (rcu_dereference; acquire instead of
 *    consume so TSan understands it).
 *
 * Readers
 * -------
 * Lookups run inside the caller's RCU read-side section and take no lock.
 * A reader that loaded an old table keeps reading it: that table is
 * complete as of the moment it was replaced (I4) and is freed only after a
 * grace period (call_rcu), so the reader sees a state the index was in
 * during its call. Records removed from the index are freed by the engine
 * after a grace period, never by the index.
 *
 * Writers and resize
 * ------------------
 * insert_unique/replace/remove lock one of 256 stripe locks chosen by the
 * hash: spin locks whose unlock is a plain store (base/lock.h), not
 * mutexes, whose unlock is a locked instruction that waited for the
 * insert's stores to drain (remove -5.5%, put -5% in paired runs); a
 * waiter yields the CPU after a bounded spin, so a preempted holder on
 * this shared 2-vCPU guest does not burn the other core. A table is
 * presized for load 9/16 at most (then rounded up to whole pages: 1M
 * records take eight 2 MiB pages, load 0.55, 16.8 bytes a record; 10M,
 * 78 pages, 16.4 bytes). Not higher: a miss (every put's probe, half of
 * exist's) whose home has overflowed waits for a second line, and
 * displaced words stay raised after removes; presized for load 3/4 (six
 * pages at 1M, load 0.73), refill's median batch was 12% slower ([+9,
 * +15]%, `kvforge-bench compare --rounds 10 -- --objects 1000000
 * --pin`), and for 5/8 (seven pages, load 0.62) exist was 11% and
 * remove 8% slower per key (docs/benchmarks.md). It grows by half
 * (x1.5, a grown table at load 0.53 rather than 0.4) when the count (kept
 * per stripe and gathered in steps, so up to
 * ~1.6% behind: count_change()) passes load 0.8, or when an insert finds
 * no free slot within MAX_DISPLACEMENT buckets of home while the table is
 * at that load (below it, the insert may go FAR_DISPLACEMENT buckets: a
 * long run of full buckets is linear probing's normal tail, not a reason
 * to double a presized table); it is rebuilt at the same size when
 * churn has raised "displaced" words too often (they never shrink in place,
 * and stale ranges make misses probe more). The resizer takes the resize
 * mutex, freezes every stripe (lock, set ->frozen, unlock: once all are
 * frozen no writer is inside the table), builds the new table privately,
 * publishes it, hands the old one to call_rcu and thaws the stripes. A
 * writer that finds its stripe frozen drops it and waits on the resize
 * mutex. Freezing one stripe at a time instead of holding all 256 locks
 * keeps every thread at two locks at most (ThreadSanitizer's deadlock
 * detector aborts beyond 64 held locks). Lock order: resize mutex, then
 * one stripe; a writer never takes the resize mutex with a stripe held.
 * Nothing here waits for a grace period, so all of it is legal inside a
 * read-side section. Writers stall for the duration of a rebuild (O(n),
 * tens of ms at 1M records); readers never do. The table never shrinks.
 *
 * Batch lookup pipeline (per chunk of LOOKUP_CHUNK keys)
 *   1. home buckets of every key (hashes are given), then one burst of
 *      bucket prefetches;
 *   2. tag match in each home bucket, prefetching the lines of every
 *      candidate record that the key compare and the engine will touch,
 *      and noting the first candidate (the record, but for a tag clash);
 *   3. key compare (key_len, then the bytes) of that candidate; only a
 *      mismatch, about one in 10,000, scans the bucket again;
 *   4. keys not found whose home has displaced > 0 go to a second pass:
 *      prefetch their neighbour buckets in one burst, match tags and
 *      prefetch records, compare. At load <= 0.8 this is a small minority.
 * No step depends on a miss of the same step for another key, so ~14-16
 * misses stay in flight.
 *
 * foreach walks home buckets in order and visits, for home h, the records
 * in buckets h..h+displaced[h] whose home is h. Its cursor is a point of
 * the circle, not a bucket: having visited homes 0..h-1 of a table of nr
 * buckets, it has visited exactly the records whose points are below
 * from = ceil(h * 2^64 / nr), the first point of h's arc (arc_start()),
 * whatever the size. When a resize has published a table of nr' buckets,
 * the walk goes on at home floor(from * nr' / 2^64) of the new one,
 * skipping the records there whose points are below from; every later
 * home's points are all above it. So every record present throughout is
 * visited exactly once, by its home, across any number of resizes of any
 * sizes (a bucket number would not do: between two sizes that are not
 * powers of two apart, no shift maps one table's homes onto the other's).
 */
#include "config.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SSE2__) && !defined(__SANITIZE_THREAD__)
#include <emmintrin.h>
#define KVF_TAG_FILTER_SSE2 1
#endif

#include <kvforge/status.h>

#include "base/die.h"
#include "base/lock.h"
#include "base/prefetch.h"
#include "base/rcu.h"
#include "metadata/hash.h"
#include "metadata/hugemem.h"
#include "metadata/index.h"

/* Products of a 64-bit point and a bucket count (home_at()). */
__extension__ typedef unsigned __int128 u128;

#define SLOTS_PER_BUCKET 7
#define TAG_SHIFT 48
#define PTR_MASK ((UINT64_C(1) << TAG_SHIFT) - 1)
#define HOME_MULT UINT64_C(0x9e3779b97f4a7c15)
#define NR_STRIPES 256
#define MAX_BUCKETS (UINT64_C(1) << 40)
/* A table is presized for load PRESIZE_NUM / PRESIZE_DEN at most... */
#define PRESIZE_NUM 9
#define PRESIZE_DEN 16
/* ...grows past load GROW_NUM / GROW_DEN, by half its buckets. */
#define GROW_NUM 4
#define GROW_DEN 5
/* Farther than this from home, an insert grows the table instead... */
#define MAX_DISPLACEMENT 16
/* ...unless the table is below its growth load: then it may go this far. */
#define FAR_DISPLACEMENT 64
/* Keys per pipelined chunk: bounds the stack, n may be 65536. */
#define LOOKUP_CHUNK 64
/* Neighbour buckets prefetched per displaced key in the second pass. */
#define PREFETCH_NEIGHBOURS 4
/* Record bytes before the key (the key follows the header). */
#define KEY_OFFSET_GUESS (sizeof(struct kvf__object))

struct bucket {
	uint64_t slot[SLOTS_PER_BUCKET]; /* tag << 48 | pointer; atomic */
	uint64_t displaced;		 /* see I1; atomic */
};

_Static_assert(sizeof(struct bucket) == 64, "a bucket is one cache line");

struct bucket_table {
	struct rcu_head rcu;
	uint64_t nr;	  /* buckets: any number, filling whole pages */
	uint64_t grow_at; /* grow when the index holds more records */
	/* Its own mapping, every byte of it buckets (table_buckets()): a
	 * header in front would spill into one more page. */
	struct bucket *b;
	/* Displaced raises since built; atomic. Apart from the fields every
	 * lookup reads: an insert that raises would pass their line to
	 * itself and every other CPU's next lookup would miss on it. */
	uint64_t raises __attribute__((aligned(64)));
};

/* A stripe's lock and its bookkeeping, without the insert sequences. */
struct stripe_head {
	uint32_t lock; /* kvf__spin_lock() */
	/* Inserts less unlinks not yet added to ->count; written under
	 * ->lock, read (atomic) by kvf__index_count(). Bounded by a step of
	 * count_change(), below 2^31 at any table size (3.8e8 at 2^40). */
	int32_t pending;
	bool frozen; /* a resize is copying the table; under ->lock */
};

/* Insert sequences per stripe: as many as fill the stripe's line. */
#define SEQS_PER_STRIPE ((64 - sizeof(struct stripe_head)) / sizeof(uint32_t))

/*
 * One cache line: an insert takes the lock, moves its group's insert
 * sequence and its pending count, all on the line its writer asked for
 * six keys ahead (kvf__index_prefetch_write()). With the sequences in
 * an array of their own, a line of 16 sequences of 16 stripes, two put
 * threads passed that line between them on nearly every insert, and the
 * insert waited for it under the lock (perf annotate of a two-thread
 * fill: two thirds of insert()'s own samples on the sequence's load).
 */
struct stripe {
	uint32_t lock; /* kvf__spin_lock(): the unlock is a plain store */
	int32_t pending;
	bool frozen;
	/* Inserts per hash group; written under ->lock (release), read
	 * anywhere (acquire). */
	uint32_t seqs[SEQS_PER_STRIPE];
} __attribute__((aligned(64)));

_Static_assert(SEQS_PER_STRIPE >= 2, "a stripe's line holds its sequences");
_Static_assert(sizeof(struct stripe) == 64, "a stripe is one cache line");

struct bucket_index {
	struct kvf__index base;
	struct bucket_table *table; /* RCU-published, see I4 */
	pthread_mutex_t resize_lock;
	/* Records, less what stripes hold pending (count_change()); atomic.
	 * Its own line: every operation reads ->table. */
	uint64_t count __attribute__((aligned(64)));
	struct stripe stripes[NR_STRIPES];
};

static struct bucket_index *bucket_index_of(struct kvf__index *idx)
{
	return caa_container_of(idx, struct bucket_index, base);
}

/* ---- slots, tags, homes ------------------------------------------------ */

static inline uint64_t tag_of(uint64_t hash)
{
	uint64_t tag = hash >> TAG_SHIFT;

	return tag ? tag : 1;
}

/*
 * The point of @hash on the circle the homes divide: its top 32 bits,
 * mixed (multiplicative hashing). Only bits 32-63 of a hash count, here
 * and in the tag, so a hash with its low half cleared finds the same
 * home and tag (lookup_hash() from a 32-bit allocation tag).
 */
static inline uint64_t mixed_of(uint64_t hash)
{
	return (hash >> 32) * HOME_MULT;
}

/* The bucket of @nr whose arc holds point @x: floor(x * nr / 2^64). */
static inline uint64_t home_at(uint64_t nr, uint64_t x)
{
	return (uint64_t)(((u128)x * nr) >> 64);
}

static inline uint64_t home_of(const struct bucket_table *t, uint64_t hash)
{
	return home_at(t->nr, mixed_of(hash));
}

/*
 * The first point of bucket @h's arc (@h < @nr): the smallest x with
 * home_at(@nr, x) >= @h, ceil(h * 2^64 / nr).
 */
static inline uint64_t arc_start(uint64_t nr, uint64_t h)
{
	return (uint64_t)((((u128)h << 64) + nr - 1) / nr);
}

uint64_t kvf__index_bucket_home(uint64_t nr, uint64_t hash)
{
	return home_at(nr, mixed_of(hash));
}

/* Bucket @i, for 0 <= @i < 2 * nr: the neighbours of the last wrap. */
static inline struct bucket *bucket_at(struct bucket_table *t, uint64_t i)
{
	return &t->b[i < t->nr ? i : i - t->nr];
}

static inline struct kvf__object *slot_object(uint64_t s)
{
	return (struct kvf__object *)(uintptr_t)(s & PTR_MASK);
}

static inline bool slot_has_tag(uint64_t s, uint64_t tag)
{
	return (s >> TAG_SHIFT) == tag;
}

static uint64_t slot_make(struct kvf__object *o, uint64_t hash)
{
	uintptr_t p = (uintptr_t)o;

	/* User-space pointers fit in 48 bits on x86-64 and arm64. */
	if (p & ~(uintptr_t)PTR_MASK)
		kvf__die("record pointer %p does not fit in 48 bits",
			 (void *)o);
	return tag_of(hash) << TAG_SHIFT | p;
}

static inline uint64_t slot_load(const uint64_t *s)
{
	return __atomic_load_n(s, __ATOMIC_ACQUIRE);
}

static inline uint64_t displaced_load(const struct bucket *b)
{
	return __atomic_load_n(&b->displaced, __ATOMIC_ACQUIRE);
}

/*
 * Walk the buckets where records homed at @home may sit (I1): @b is
 * bucket @home + @d for @d from @first to the home's displaced range,
 * read once before the walk.
 */
#define for_each_home_bucket(t, home, first, d, b)                             \
	for (uint64_t d = (first),                                             \
		      d##_last = displaced_load(bucket_at((t), (home)));       \
	     d <= d##_last && d < (t)->nr &&                                   \
	     ((b) = bucket_at((t), (home) + d));                               \
	     d++)

/*
 * The slots of @b whose tag may be @tag, as a mask (bit i: slot i), a
 * filter only: every caller loads a selected slot atomically and checks
 * its tag again before using it. With SSE2 the whole line is compared
 * at once, four 16-byte loads and compares of 16-bit lanes, instead of
 * seven loads, shifts and branches (x86 loads aligned 16 bytes with each
 * 8-byte slot whole; a slot changing meanwhile is a lookup ordered
 * before or after that writer, as with slot-by-slot loads). The slot
 * scan was ~57 of a batch exist's ~380 instructions a key (callgrind).
 * ThreadSanitizer builds take the scalar loop: it cannot see vector
 * loads as atomic.
 */
static inline uint32_t tag_candidates(const struct bucket *b, uint64_t tag)
{
#ifdef KVF_TAG_FILTER_SSE2
	const __m128i *line = (const __m128i *)(const void *)b;
	__m128i t = _mm_set1_epi16((short)tag);
	uint64_t m = (uint64_t)(uint16_t)_mm_movemask_epi8(
			     _mm_cmpeq_epi16(_mm_load_si128(line), t)) |
		     (uint64_t)(uint16_t)_mm_movemask_epi8(
			     _mm_cmpeq_epi16(_mm_load_si128(line + 1), t))
			     << 16 |
		     (uint64_t)(uint16_t)_mm_movemask_epi8(
			     _mm_cmpeq_epi16(_mm_load_si128(line + 2), t))
			     << 32 |
		     (uint64_t)(uint16_t)_mm_movemask_epi8(
			     _mm_cmpeq_epi16(_mm_load_si128(line + 3), t))
			     << 48;

	_Static_assert(SLOTS_PER_BUCKET == 7 && TAG_SHIFT == 48,
		       "the tag is the top lane of slots 0..6");
	/* Bit 8i+7: the top byte of slot i's tag lane (slot 7's word is
	 * displaced, never a slot); then one bit per slot. */
	m &= UINT64_C(0x0080808080808080);
	m >>= 7;
	m = (m | m >> 7) & UINT64_C(0x0003000300030003);
	m = (m | m >> 14) & UINT64_C(0x0000000f0000000f);
	return (uint32_t)(m | m >> 28);
#else
	uint32_t m = 0;

	for (int i = 0; i < SLOTS_PER_BUCKET; i++)
		if (slot_has_tag(slot_load(&b->slot[i]), tag))
			m |= 1u << i;
	return m;
#endif
}

/* Record with @key among the slots tagged @tag in @b, or NULL. */
static struct kvf__object *bucket_find(const struct bucket *b, uint64_t tag,
				       const struct kvf_key *key)
{
	for (uint32_t m = tag_candidates(b, tag); m; m &= m - 1) {
		uint64_t s = slot_load(&b->slot[__builtin_ctz(m)]);

		if (slot_has_tag(s, tag) &&
		    kvf__object_has_key(slot_object(s), key->data, key->len))
			return slot_object(s);
	}
	return NULL;
}

/* Record with @key in buckets home+first .. home+displaced[home], or NULL. */
static struct kvf__object *range_find(struct bucket_table *t, uint64_t home,
				      uint64_t first, uint64_t hash,
				      const struct kvf_key *key)
{
	uint64_t tag = tag_of(hash);
	struct bucket *b;

	for_each_home_bucket(t, home, first, d, b) {
		struct kvf__object *o = bucket_find(b, tag, key);

		if (o)
			return o;
	}
	return NULL;
}

/*
 * The slot holding exactly @o, or NULL. Caller holds @o's stripe, or
 * only asks whether @o is there (a read-side section: the answer may
 * change right after).
 */
static uint64_t *slot_of(struct bucket_table *t, struct kvf__object *o,
			 uint64_t hash)
{
	uint64_t home = home_of(t, hash), tag = tag_of(hash);
	struct bucket *b;

	/* @o's slot carries @o's tag (slot_make()). */
	for_each_home_bucket(t, home, 0, d, b) {
		for (uint32_t m = tag_candidates(b, tag); m; m &= m - 1) {
			int i = __builtin_ctz(m);

			if (slot_object(slot_load(&b->slot[i])) == o)
				return &b->slot[i];
		}
	}
	return NULL;
}

/* ---- prefetching ------------------------------------------------------ */

/*
 * The lines of @o that a key compare of @len bytes reads (key_len,
 * nr_replicas, the key, assuming one replica, the common case). The
 * header's state and lease words are asked for writing: every caller
 * writes one of them next (a reader's lease, a writer's lock), with a
 * locked instruction that would otherwise wait, unoverlapped, for the
 * line's ownership whenever another CPU holds a copy.
 */
static inline void prefetch_record(const struct kvf__object *o, size_t len)
{
	const char *p = (const char *)o;
	const char *end = p + KEY_OFFSET_GUESS + len;

	kvf__prefetch_for_write(&o->state);
	kvf__prefetch_for_write(&o->owner);
	for (p += 64; p < end; p += 64)
		__builtin_prefetch(p);
	__builtin_prefetch(end - 1);
}

/*
 * Prefetch every record in @b whose tag is @tag; return the first such
 * slot (0 if none), which is the key's record unless two keys share the
 * bucket and the tag (about one lookup in 10,000 at 7 slots).
 */
static inline uint64_t prefetch_candidates(const struct bucket *b,
					   uint64_t tag, size_t len)
{
	uint64_t first = 0;

	for (uint32_t m = tag_candidates(b, tag); m; m &= m - 1) {
		uint64_t s = slot_load(&b->slot[__builtin_ctz(m)]);

		if (slot_has_tag(s, tag)) {
			prefetch_record(slot_object(s), len);
			first = first ? first : s;
		}
	}
	return first;
}

/* ---- tables ----------------------------------------------------------- */

static size_t buckets_bytes(uint64_t nr)
{
	return (size_t)nr * sizeof(struct bucket);
}

/*
 * Buckets of a table of at least @want (>= 1): as many as fill the pages
 * a mapping of @want takes (kvf__huge_size(): whole 2 MiB pages for a
 * large table), which are in memory anyway, at most MAX_BUCKETS.
 */
static uint64_t table_buckets(uint64_t want)
{
	uint64_t nr;

	if (want >= MAX_BUCKETS)
		return MAX_BUCKETS;
	nr = kvf__huge_size(buckets_bytes(want)) / sizeof(struct bucket);
	return nr < MAX_BUCKETS ? nr : MAX_BUCKETS;
}

/* The table a growth of @nr buckets builds: half as large again. */
static uint64_t grown_buckets(uint64_t nr)
{
	return table_buckets(nr / 2 ? nr + nr / 2 : nr + 1);
}

/* Zeroed, and on huge pages when large: every lookup lands at random. */
static struct bucket_table *table_alloc(uint64_t nr)
{
	struct bucket_table *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->b = kvf__huge_alloc(buckets_bytes(nr));
	if (!t->b) {
		free(t);
		return NULL;
	}
	t->nr = nr;
	t->grow_at = nr * SLOTS_PER_BUCKET * GROW_NUM / GROW_DEN;
	return t;
}

static void table_free(struct bucket_table *t)
{
	kvf__huge_free(t->b, buckets_bytes(t->nr));
	free(t);
}

static void table_free_rcu(struct rcu_head *head)
{
	kvf__rcu_callback_enter();
	table_free(caa_container_of(head, struct bucket_table, rcu));
}

/* Buckets of a table presized for @expected records (load <= 9/16). */
static uint64_t presized_buckets(uint64_t expected)
{
	uint64_t per = SLOTS_PER_BUCKET * PRESIZE_NUM;
	uint64_t want = expected / per * PRESIZE_DEN +
			((expected % per) * PRESIZE_DEN + per - 1) / per;

	return table_buckets(want ? want : 1);
}

uint64_t kvf__index_bucket_table_bytes(uint64_t expected)
{
	return buckets_bytes(presized_buckets(expected));
}

/* Raise displaced[@home] to at least @d (atomic max). */
static void raise_displaced(struct bucket_table *t, uint64_t home, uint64_t d)
{
	struct bucket *b = bucket_at(t, home);
	uint64_t cur = __atomic_load_n(&b->displaced, __ATOMIC_RELAXED);

	while (cur < d) {
		if (__atomic_compare_exchange_n(&b->displaced, &cur, d, true,
						__ATOMIC_RELEASE,
						__ATOMIC_RELAXED)) {
			__atomic_fetch_add(&t->raises, 1, __ATOMIC_RELAXED);
			return;
		}
	}
}

/*
 * Put @entry (a record of @hash) in the first free slot at most @limit
 * buckets from its home. Raises the home's range first (see "Memory
 * ordering"). Returns false if there is no free slot that close.
 */
static bool table_place(struct bucket_table *t, uint64_t hash, uint64_t entry,
			uint64_t limit)
{
	uint64_t home = home_of(t, hash);

	for (uint64_t d = 0; d <= limit && d < t->nr; d++) {
		struct bucket *b = bucket_at(t, home + d);

		for (int i = 0; i < SLOTS_PER_BUCKET; i++) {
			uint64_t expect = 0;

			if (__atomic_load_n(&b->slot[i], __ATOMIC_RELAXED))
				continue;
			raise_displaced(t, home, d);
			if (__atomic_compare_exchange_n(
				    &b->slot[i], &expect, entry, false,
				    __ATOMIC_RELEASE, __ATOMIC_RELAXED))
				return true;
		}
	}
	return false;
}

/*
 * A copy of frozen table @old with @nr buckets, or NULL. Reads every
 * record's hash (the slot does not say how far it was displaced), so the
 * records of the next bucket are prefetched while this one is copied.
 */
static struct bucket_table *table_rebuild(struct bucket_table *old,
					  uint64_t nr)
{
	struct bucket_table *t = table_alloc(nr);

	if (!t)
		return NULL;
	for (uint64_t i = 0; i < old->nr; i++) {
		const struct bucket *b = &old->b[i];

		if (i + 2 < old->nr)
			for (int j = 0; j < SLOTS_PER_BUCKET; j++) {
				uint64_t s =
					__atomic_load_n(&old->b[i + 2].slot[j],
							__ATOMIC_RELAXED);

				if (s)
					__builtin_prefetch(slot_object(s));
			}
		for (int j = 0; j < SLOTS_PER_BUCKET; j++) {
			uint64_t s =
				__atomic_load_n(&b->slot[j], __ATOMIC_RELAXED);

			/* Records do not store their hash: recomputed here. */
			if (s && !table_place(t,
					      kvf__object_hash(slot_object(s)),
					      s, t->nr - 1))
				kvf__die("rebuilt index table overflowed");
		}
	}
	t->raises = 0;
	return t;
}

/* ---- locking ------------------------------------------------------------ */

static struct stripe *stripe_of(struct bucket_index *bi, uint64_t hash)
{
	return &bi->stripes[(hash >> 20) % NR_STRIPES];
}

/* A group of stripe_of(@hash), by the next bits: its stripe guards it. */
static uint32_t *seq_of(struct bucket_index *bi, uint64_t hash)
{
	return &stripe_of(bi, hash)->seqs[(hash >> 28) % SEQS_PER_STRIPE];
}

static void unlock_stripe(struct bucket_index *bi, uint64_t hash)
{
	kvf__spin_unlock(&stripe_of(bi, hash)->lock);
}

static inline struct bucket_table *table_load(struct bucket_index *bi)
{
	return __atomic_load_n(&bi->table, __ATOMIC_ACQUIRE);
}

/* The stripe's lock and the home bucket, both for writing (index.h). */
static void bucket_prefetch_write(struct kvf__index *idx, uint64_t hash)
{
	struct bucket_index *bi = bucket_index_of(idx);
	struct bucket_table *t = table_load(bi);

	kvf__prefetch_for_write(stripe_of(bi, hash));
	kvf__prefetch_for_write(bucket_at(t, home_of(t, hash)));
}

/* Lock @hash's stripe and return the current table, stable until unlock. */
static struct bucket_table *lock_table(struct bucket_index *bi, uint64_t hash)
{
	struct stripe *s = stripe_of(bi, hash);

	for (;;) {
		struct bucket_table *t = table_load(bi);
		bool frozen;

		kvf__spin_lock(&s->lock);
		frozen = s->frozen;
		if (!frozen && t == table_load(bi))
			return t;
		/* A resize is running, or published while we waited (I4). */
		kvf__spin_unlock(&s->lock);
		if (frozen) {
			pthread_mutex_lock(&bi->resize_lock);
			pthread_mutex_unlock(&bi->resize_lock);
		}
	}
}

/* Freeze or thaw every stripe; returns once no writer is inside one. */
static void set_frozen(struct bucket_index *bi, bool frozen)
{
	for (int i = 0; i < NR_STRIPES; i++) {
		kvf__spin_lock(&bi->stripes[i].lock);
		bi->stripes[i].frozen = frozen;
		kvf__spin_unlock(&bi->stripes[i].lock);
	}
}

/*
 * Replace @old, if it is still the current table, by a rebuilt table of
 * @nr buckets. KVF_OK (also when another thread resized first) or
 * KVF_ERR_NO_MEMORY. Called inside a read-side section, with no stripe
 * held; may block on writers, never on a grace period.
 */
static int table_resize(struct bucket_index *bi, struct bucket_table *old,
			uint64_t nr)
{
	struct bucket_table *t;
	int ret = KVF_OK;

	pthread_mutex_lock(&bi->resize_lock);
	if (table_load(bi) != old)
		goto out_resize;
	set_frozen(bi, true);
	t = table_rebuild(old, nr);
	if (!t) {
		ret = KVF_ERR_NO_MEMORY;
		goto out_thaw;
	}
	__atomic_store_n(&bi->table, t, __ATOMIC_RELEASE);
	kvf__rcu_call(&old->rcu, table_free_rcu);
out_thaw:
	set_frozen(bi, false);
out_resize:
	pthread_mutex_unlock(&bi->resize_lock);
	return ret;
}

/*
 * One record more or fewer under the stripe of @hash, whose lock is held.
 * Every insert and unlink adding to the shared count passed its line
 * between the CPUs of two put threads on every key; a stripe adds up its
 * changes under the lock it holds anyway and moves them to the count in
 * steps of a 16384th of the growth load (one at a small table's), so
 * the count the growth checks read lags by at most ~1.6% of that load.
 * kvf__index_count() adds the pending changes back: it is exact when no
 * writer runs.
 */
static void count_change(struct bucket_index *bi, struct bucket_table *t,
			 uint64_t hash, int64_t delta)
{
	struct stripe *s = stripe_of(bi, hash);
	int64_t step = (int64_t)(t->grow_at / (NR_STRIPES * 64));
	int64_t p = s->pending + delta;

	if (p >= step || p <= -step || step <= 1) {
		__atomic_fetch_add(&bi->count, (uint64_t)p, __ATOMIC_RELAXED);
		p = 0;
	}
	__atomic_store_n(&s->pending, (int32_t)p, __ATOMIC_RELAXED);
}

/* Records in the index: the count and every stripe's pending changes. */
static uint64_t count_exact(struct bucket_index *bi)
{
	uint64_t n = __atomic_load_n(&bi->count, __ATOMIC_RELAXED);

	for (int i = 0; i < NR_STRIPES; i++)
		n += (uint64_t)__atomic_load_n(&bi->stripes[i].pending,
					       __ATOMIC_RELAXED);
	return n;
}

/* After an insert into @t: grow on load, rebuild on stale ranges. */
static void maybe_resize(struct bucket_index *bi, struct bucket_table *t)
{
	uint64_t count = __atomic_load_n(&bi->count, __ATOMIC_RELAXED);

	if (count > t->grow_at && t->nr < MAX_BUCKETS)
		table_resize(bi, t, grown_buckets(t->nr));
	else if (__atomic_load_n(&t->raises, __ATOMIC_RELAXED) > t->nr)
		table_resize(bi, t, t->nr);
}

/* ---- ops ---------------------------------------------------------------- */

static int bucket_create(uint64_t expected, struct kvf__index **out)
{
	struct bucket_index *bi;

	if (posix_memalign((void **)&bi, 64, sizeof(*bi)))
		return KVF_ERR_NO_MEMORY;
	memset(bi, 0, sizeof(*bi));
	bi->base.ops = &kvf__index_bucket_ops;
	bi->table = table_alloc(presized_buckets(expected));
	if (!bi->table)
		goto err_table;
	/*
	 * Presized for @expected keys: have the table's pages now, not on
	 * the put path. On this VM a fresh 2 MiB page could cost the first
	 * insert into it milliseconds (perf, durability workload: 44 ms of
	 * page zeroing inside table_place() per run of its six fills).
	 */
	kvf__huge_populate(bi->table->b, buckets_bytes(bi->table->nr));
	pthread_mutex_init(&bi->resize_lock, NULL);
	*out = &bi->base;
	return KVF_OK;

err_table:
	free(bi);
	return KVF_ERR_NO_MEMORY;
}

static void bucket_destroy(struct kvf__index *idx)
{
	struct bucket_index *bi;
	uint64_t left;

	if (!idx)
		return;
	bi = bucket_index_of(idx);
	left = count_exact(bi);
	if (left)
		kvf__die("destroying an index that holds %llu records",
			 (unsigned long long)left);
	pthread_mutex_destroy(&bi->resize_lock);
	table_free(bi->table);
	free(bi);
}

/* Second pass: keys missing from their home bucket that has neighbours. */
static void lookup_displaced(struct bucket_table *t, size_t nr,
			     const uint32_t *which, const uint64_t *home,
			     const uint64_t *hashes, const struct kvf_key *keys,
			     struct kvf__object **out)
{
	for (size_t j = 0; j < nr; j++) {
		uint64_t h = home[which[j]];
		uint64_t last = displaced_load(bucket_at(t, h));

		for (uint64_t d = 1; d <= last && d <= PREFETCH_NEIGHBOURS; d++)
			__builtin_prefetch(bucket_at(t, h + d));
	}
	for (size_t j = 0; j < nr; j++) {
		size_t i = which[j];
		uint64_t last = displaced_load(bucket_at(t, home[i]));

		for (uint64_t d = 1; d <= last && d <= PREFETCH_NEIGHBOURS; d++)
			prefetch_candidates(bucket_at(t, home[i] + d),
					    tag_of(hashes[i]), keys[i].len);
	}
	for (size_t j = 0; j < nr; j++) {
		size_t i = which[j];

		out[i] = range_find(t, home[i], 1, hashes[i], &keys[i]);
	}
}

/* One chunk (n <= LOOKUP_CHUNK) of the pipeline in the design note. */
static void lookup_chunk(struct bucket_table *t, size_t n,
			 const uint64_t *hashes, const struct kvf_key *keys,
			 struct kvf__object **out)
{
	uint64_t home[LOOKUP_CHUNK], first[LOOKUP_CHUNK];
	uint32_t displaced[LOOKUP_CHUNK];
	size_t nr_displaced = 0;

	for (size_t i = 0; i < n; i++)
		home[i] = home_of(t, hashes[i]);
	for (size_t i = 0; i < n; i++)
		__builtin_prefetch(&t->b[home[i]]);
	for (size_t i = 0; i < n; i++)
		first[i] = prefetch_candidates(&t->b[home[i]],
					       tag_of(hashes[i]), keys[i].len);
	for (size_t i = 0; i < n; i++) {
		const struct bucket *b = &t->b[home[i]];
		struct kvf__object *o = slot_object(first[i]);

		if (o && kvf__object_has_key(o, keys[i].data, keys[i].len))
			out[i] = o;
		else if (o)
			out[i] = bucket_find(b, tag_of(hashes[i]), &keys[i]);
		else
			out[i] = NULL;
		if (!out[i] && displaced_load(b))
			displaced[nr_displaced++] = (uint32_t)i;
	}
	if (nr_displaced)
		lookup_displaced(t, nr_displaced, displaced, home, hashes, keys,
				 out);
	for (size_t i = 0; i < n; i++)
		if (out[i])
			kvf__tsan_acquire(out[i]);
}

static struct kvf__object *bucket_lookup_hash(struct kvf__index *idx,
					      uint64_t hash,
					      kvf__index_match_fn match,
					      void *arg)
{
	struct bucket_table *t = table_load(bucket_index_of(idx));
	uint64_t home = home_of(t, hash), tag = tag_of(hash);
	struct bucket *b;

	for_each_home_bucket(t, home, 0, d, b) {
		for (int i = 0; i < SLOTS_PER_BUCKET; i++) {
			uint64_t s = slot_load(&b->slot[i]);

			if (slot_has_tag(s, tag) && match(slot_object(s), arg)) {
				kvf__tsan_acquire(slot_object(s));
				return slot_object(s);
			}
		}
	}
	return NULL;
}

static bool bucket_holds_batch(struct kvf__index *idx, size_t n,
			       const uint64_t *hashes,
			       struct kvf__object *const *objs)
{
	struct bucket_table *t = table_load(bucket_index_of(idx));

	for (size_t i = 0; i < n; i++)
		__builtin_prefetch(&t->b[home_of(t, hashes[i])]);
	for (size_t i = 0; i < n; i++) {
		if (!slot_of(t, objs[i], hashes[i]))
			return false;
		kvf__tsan_acquire(objs[i]);
	}
	return true;
}

static void bucket_prefetch_hash(struct kvf__index *idx, uint64_t hash)
{
	struct bucket_table *t = table_load(bucket_index_of(idx));

	__builtin_prefetch(bucket_at(t, home_of(t, hash)));
}

static void bucket_lookup_batch(struct kvf__index *idx, size_t n,
				const uint64_t *hashes,
				const struct kvf_key *keys,
				struct kvf__object **out)
{
	struct bucket_table *t = table_load(bucket_index_of(idx));

	for (size_t i = 0; i < n; i += LOOKUP_CHUNK) {
		size_t len = n - i < LOOKUP_CHUNK ? n - i : LOOKUP_CHUNK;

		lookup_chunk(t, len, hashes + i, keys + i, out + i);
	}
}

/*
 * Insert sequences
 * ----------------
 * An insert must not add a key that is present (I3), so it looked for the
 * key again under the stripe lock: a second probe of a key that the
 * batch's lock-free lookup had just missed, a third of an insert's
 * instructions. Instead, every insert moves a counter of its hash's
 * group (seq_of(): thirteen groups per stripe, as many as fit in the
 * stripe's line beside its lock word) under the stripe lock, after its
 * slot claim and with a release store; a caller reads the
 * counters (acquire) before its lookup. If under the lock the counter
 * still holds what was read, no record of the group was inserted since,
 * in particular none of this key (same hash, same group), and the
 * lookup's miss still holds; the lookup saw every insert whose counter
 * move it had read. Otherwise the key is looked for as before. Removes
 * and replaces do not move counters: neither makes a missing key
 * present. A resize copies records without inserting. At 32 bits the
 * counter would have to wrap through 2^32 inserts of one group between
 * a caller's read and its insert to be fooled. Fewer groups than the
 * 4096 they were (16 to a line of their own, shared by 16 stripes) mean
 * more inserts find their group moved, by the other thread or by an
 * earlier key of their own batch (about 6% of a 128-key batch's keys),
 * and look again; the look is at lines the probe has just read.
 */
static void bucket_insert_seqs(struct kvf__index *idx, size_t n,
			       const uint64_t *hashes, uint32_t *seqs)
{
	struct bucket_index *bi = bucket_index_of(idx);

	for (size_t i = 0; i < n; i++)
		seqs[i] = __atomic_load_n(seq_of(bi, hashes[i]),
					  __ATOMIC_ACQUIRE);
}

/*
 * Insert @o unless its key is present. With @seq (read before a lookup
 * that missed), the key is not looked for while its group's counter
 * still holds *@seq (see "Insert sequences").
 */
static struct kvf__object *insert(struct bucket_index *bi,
				  struct kvf__object *o, uint64_t hash,
				  const uint32_t *seq)
{
	const struct kvf_key key = {kvf__object_key(o), o->key_len};
	uint64_t entry = slot_make(o, hash);
	uint64_t limit = MAX_DISPLACEMENT;
	uint32_t *group = seq_of(bi, hash);
	struct bucket_table *t;

	kvf__tsan_release(o);
	for (;;) {
		struct kvf__object *found = NULL;
		uint32_t now;
		bool placed;

		t = lock_table(bi, hash);
		now = __atomic_load_n(group, __ATOMIC_RELAXED);
		if (!seq || *seq != now)
			found = range_find(t, home_of(t, hash), 0, hash, &key);
		if (found) {
			unlock_stripe(bi, hash);
			kvf__tsan_acquire(found);
			return found;
		}
		placed = table_place(t, hash, entry, limit);
		if (placed) {
			__atomic_store_n(group, now + 1, __ATOMIC_RELEASE);
			count_change(bi, t, hash, 1);
		}
		unlock_stripe(bi, hash);
		if (placed)
			break;
		if (limit == UINT64_MAX)
			kvf__die("index table full and cannot grow");
		/*
		 * Crowded near home. Below the growth load this is linear
		 * probing's normal tail (a run of full buckets somewhere in
		 * millions): probe farther rather than double the table for
		 * one key (measured: a presized 10M-record table doubled at
		 * load 0.65). At the growth load, grow; without memory, probe
		 * as far as it takes.
		 */
		if (limit < FAR_DISPLACEMENT &&
		    __atomic_load_n(&bi->count, __ATOMIC_RELAXED) < t->grow_at) {
			limit = FAR_DISPLACEMENT;
			continue;
		}
		if (t->nr >= MAX_BUCKETS ||
		    table_resize(bi, t, grown_buckets(t->nr)) != KVF_OK)
			limit = UINT64_MAX;
	}
	maybe_resize(bi, t);
	return NULL;
}

static struct kvf__object *bucket_insert_unique(struct kvf__index *idx,
						struct kvf__object *o,
						uint64_t hash)
{
	return insert(bucket_index_of(idx), o, hash, NULL);
}

static struct kvf__object *bucket_insert_since(struct kvf__index *idx,
					       struct kvf__object *o,
					       uint64_t hash, uint32_t seq)
{
	return insert(bucket_index_of(idx), o, hash, &seq);
}

static int bucket_replace(struct kvf__index *idx, struct kvf__object *old,
			  struct kvf__object *new_obj, uint64_t hash)
{
	struct bucket_index *bi = bucket_index_of(idx);
	uint64_t entry = slot_make(new_obj, hash);
	struct bucket_table *t;
	uint64_t *slot;

	kvf__tsan_release(new_obj);
	t = lock_table(bi, hash);
	slot = slot_of(t, old, hash);
	if (slot)
		__atomic_store_n(slot, entry, __ATOMIC_RELEASE);
	unlock_stripe(bi, hash);
	return slot ? KVF_OK : KVF_ERR_OBJECT_NOT_FOUND;
}

static int bucket_remove(struct kvf__index *idx, struct kvf__object *o,
			 uint64_t hash)
{
	struct bucket_index *bi = bucket_index_of(idx);
	struct bucket_table *t;
	uint64_t *slot;

	t = lock_table(bi, hash);
	slot = slot_of(t, o, hash);
	if (slot) {
		__atomic_store_n(slot, 0, __ATOMIC_RELEASE);
		count_change(bi, t, hash, -1);
	}
	unlock_stripe(bi, hash);
	return slot ? KVF_OK : KVF_ERR_OBJECT_NOT_FOUND;
}

/*
 * Visit the records homed at @home whose points are at least @from (the
 * walk's cursor, see the design note). @fn may remove or replace them.
 */
static void visit_home(struct bucket_table *t, uint64_t home, uint64_t from,
		       kvf__index_visit_fn fn, void *arg)
{
	struct bucket *b;

	for_each_home_bucket(t, home, 0, d, b) {
		for (int i = 0; i < SLOTS_PER_BUCKET; i++) {
			struct kvf__object *o =
				slot_object(slot_load(&b->slot[i]));
			uint64_t x;

			if (!o)
				continue;
			x = mixed_of(kvf__object_hash(o));
			if (home_at(t->nr, x) != home || x < from)
				continue;
			kvf__tsan_acquire(o);
			fn(o, arg);
		}
	}
}

static void bucket_foreach(struct kvf__index *idx, kvf__index_visit_fn fn,
			   void *arg)
{
	struct bucket_index *bi = bucket_index_of(idx);
	struct bucket_table *t = table_load(bi);
	uint64_t home = 0, from = 0;

	while (home < t->nr) {
		struct bucket_table *now;

		visit_home(t, home, from, fn, arg);
		if (++home == t->nr)
			break;
		now = table_load(bi);
		if (now != t) {
			/* The same cursor, as a point (see design note). */
			from = arc_start(t->nr, home);
			home = home_at(now->nr, from);
			t = now;
		}
	}
}

static uint64_t bucket_count(struct kvf__index *idx)
{
	return count_exact(bucket_index_of(idx));
}

static uint64_t bucket_bytes(struct kvf__index *idx)
{
	struct bucket_index *bi = bucket_index_of(idx);

	return sizeof(*bi) + sizeof(struct bucket_table) +
	       buckets_bytes(table_load(bi)->nr);
}

const struct kvf__index_ops kvf__index_bucket_ops = {
	.name = "bucket",
	.create = bucket_create,
	.destroy = bucket_destroy,
	.lookup_batch = bucket_lookup_batch,
	.lookup_hash = bucket_lookup_hash,
	.holds_batch = bucket_holds_batch,
	.prefetch_hash = bucket_prefetch_hash,
	.prefetch_write = bucket_prefetch_write,
	.insert_unique = bucket_insert_unique,
	.insert_seqs = bucket_insert_seqs,
	.insert_since = bucket_insert_since,
	.replace = bucket_replace,
	.remove = bucket_remove,
	.foreach = bucket_foreach,
	.count = bucket_count,
	.bytes = bucket_bytes,
};
