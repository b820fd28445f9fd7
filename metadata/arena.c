/* SPDX-License-Identifier: MIT */
/*
 * metadata/arena.c - size-class slabs of records in huge-page chunks.
 *
 * Layout: every chunk is KVF__HUGE_PAGE bytes, aligned to its size, and
 * serves one size class; its first cache line is a header naming the arena
 * and the class, so kvf__arena_free() finds both by masking the block's
 * address. Blocks are laid out from offset 64 at the class's stride.
 *
 * Size classes: multiples of 8 up to 256 bytes, so a 120-byte HiCache
 * record takes 120 and not 128 (memory per object is a target; an
 * interleaved 10M-object run showed no loss for get or exist from records
 * straddling one more line), then four classes per power of two up to
 * KVF__ARENA_MAX_BLOCK: at most 25% slack, and only for long keys.
 *
 * Concurrency: one mutex per class guards its freed blocks (its stack,
 * its chunks' free maps and the list of chunks with any) and its bump
 * pointer into the newest chunk; the mutex (not a spinlock) keeps
 * ThreadSanitizer's view exact. Records are freed in batches after a
 * grace period, but allocated one per put, and two put threads
 * interleaved their records block by block in the class's newest chunk:
 * each record's lines were written by both CPUs, and the class lock
 * moved between them for every put. So a thread carves a run of
 * RUN_BYTES from the bump pointer under the lock and then allocates
 * from its run without it (per-thread runs, below); freed blocks go
 * back to the class's lists, which an allocation tries once its run is
 * empty. Records are freed a batch at a time, under one lock hold, and
 * an allocating thread takes many freed blocks at once and hands them
 * out without the lock (freed blocks, below).
 *
 * A fresh block is handed out with the block FRESH_AHEAD strides on asked
 * for, for writing: the prefault thread zeroed the chunk from the other
 * CPU, so every line a put writes into was a miss for its own, and the
 * put's first locked instruction after it (the index stripe's lock)
 * waited for those stores to drain (perf of the fill: the exchange in
 * lock_table() ~29% of put_start). A put's records then arrive ahead of
 * its writes, one block's lines at a time; asking for a whole run's
 * lines when it was carved measured no better than without (4 KiB runs).
 *
 * Memory is never returned to the system before destroy: like malloc's
 * small bins, a freed block waits for the next record of its class.
 *
 * Prefault (optional): a fresh chunk's first touch costs a page fault
 * that zeroes 2 MiB, and on this VM anywhere from 0.1 to 4 ms (the host
 * backs guest memory lazily): one put batch in a hundred paid that inline.
 * With prefault on, a thread owned by the arena keeps a few chunks mapped
 * and touched ahead of need; a class that runs out of its chunk takes one
 * from the reserve and wakes the thread. The reserve is refilled only
 * after it was drawn from, and holds one chunk per 64 in use (at least
 * one, at most RESERVE_CHUNKS; none below 64 while the arena is within
 * what its creator expected: reserve_goal()): unused memory stays under
 * ~1.5% of the arena (a fixed 8 MiB would be 8 bytes per object at 1M
 * objects). A creator
 * that knows how many blocks are coming (@ahead_blocks, the engine's
 * expected objects) has chunks for the rest of them faulted in ahead, at
 * the average size of the fresh blocks carved so far (AHEAD_GUESS before
 * the first): so a growing table's puts do not race the thread for fresh
 * chunks, and nothing is left over once they have come. They did race
 * with the journal on: its threads share the second CPU with this one,
 * which fell behind, and the put path zeroed chunks inline (perf, bounded
 * puts: ~96 ns per key more than without a journal, nearly all of it
 * there; a fixed 96 bytes per expected object left the last fifth of a
 * 1M-object fill of 120-byte records to the usual reserve, and ~32 ns
 * per key of inline zeroing came back; a fixed 128 left 8 MiB unused).
 * The guess before the first block errs high, and chunks beyond the goal
 * go back to the system (trim_one()) once the goal follows the blocks
 * carved: a high guess costs zeroing right after open, not memory after
 * the fill. A low one left the rest to zero while the puts came: at 96
 * bytes for the bench's 112-byte records, ~50 ms of the second CPU during
 * a 1M-object fill, which a second put thread needs.
 *
 * Under AddressSanitizer, free and not-yet-carved blocks are poisoned and
 * a block is unpoisoned for exactly the bytes asked for, so use after free
 * and overflows into a neighbour still trap.
 */
#include "config.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <kvforge/status.h>

#include "base/die.h"
#include "base/lock.h"
#include "base/prefetch.h"
#include "metadata/arena.h"
#include "metadata/hugemem.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define poison(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define unpoison(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define poison(p, n) ((void)(p), (void)(n))
#define unpoison(p, n) ((void)(p), (void)(n))
#endif

#define CHUNK_SIZE KVF__HUGE_PAGE
#define CHUNK_HEADER 64
#define SMALL_STEP 8
#define SMALL_MAX 256
#define NR_SMALL (SMALL_MAX / SMALL_STEP)
#define SMALL_BITS 8 /* log2(SMALL_MAX) */
#define PER_DOUBLING 4
#define RESERVE_CHUNKS 4
#define RESERVE_PER 64 /* chunks in use per reserve chunk */
#define AHEAD_GUESS 128 /* bytes per expected block before the first */
#define PAGE 4096
/* Classes above SMALL_MAX: (256, 512], ..., (64K, 128K], four each. */
#define NR_CLASSES (NR_SMALL + PER_DOUBLING * 9)

struct chunk {
	struct kvf__arena *arena;
	struct chunk *next;	  /* the class's chunks, for destroy */
	struct chunk *next_freed; /* the class's chunks with freed blocks */
	uint32_t cls;
	uint32_t nr_freed; /* bits set in the free map */
	/* The class's sum_words summary words (bit w: map word w is not
	 * zero), then its free map (bit i: block i is free). Class lock. */
	uint64_t words[];
};

struct size_class {
	pthread_mutex_t lock;
	/* Freed blocks: the newest up to STACK_CAP, or NULL (no memory). */
	void **stack;
	uint32_t depth;
	struct chunk *freed; /* chunks with more freed blocks, newest first */
	char *bump;     /* next uncarved block of the newest chunk */
	char *bump_end;
	struct chunk *chunks;
	uint32_t size;
	/* A chunk of this class: its blocks, where the first starts, its
	 * summary's length, in words (class_layout()). */
	uint32_t blocks;
	uint32_t first;
	uint32_t sum_words;
} __attribute__((aligned(64)));

/* Touched chunks ready for any class, and the thread that touches them. */
struct reserve {
	pthread_mutex_t lock;
	pthread_cond_t wake;
	struct chunk *chunks; /* linked through next */
	uint64_t nr;
	uint64_t goal;  /* chunks to hold */
	bool want; /* a chunk was taken, or some are asked for: refill */
	bool stop;
	bool started;
	pthread_t thread;
};

struct kvf__arena {
	struct size_class cls[NR_CLASSES];
	uint64_t mapped; /* atomic */
	struct reserve rsv;
	uint64_t ahead_blocks;  /* blocks the creator expects */
	uint64_t carved_blocks; /* atomic: fresh blocks carved so far */
	uint64_t carved_bytes;  /* atomic: their bytes */
	uint64_t id;                 /* never reused: per-thread runs' owner */
	struct kvf__arena *next_live; /* under live_lock */
};

/*
 * Freed blocks. Records are freed in batches (after a grace period, by
 * whichever thread runs the callback), and allocated one per put, by the
 * putting threads. A class keeps its newest freed blocks' addresses on a
 * stack of at most STACK_CAP, allocated once, and the rest in its chunks'
 * free maps: a bitmap of each chunk's freed blocks (bit i: block i is
 * free) between its header and its first block, with a summary word per
 * 64 map words; a chunk with bits set is on its class's list. So a free
 * allocates nothing and writes into no block: kvf__arena_free_many()
 * copies a batch's addresses onto the stack, and what does not fit sets
 * bits, the map lines asked for first, all under one lock hold per run
 * of one class. An allocating thread whose run is empty takes up to
 * MAG_CAP freed blocks at once under the lock into its magazine (an
 * array the thread keeps), from the stack's top, then from the maps
 * (lowest address first within a chunk), and then hands them out
 * without the lock; it asks for blocks ahead from the array without
 * waiting for any block to arrive first: MAG_ROUND of them at once
 * whenever fewer than MAG_AHEAD - MAG_ROUND are on their way (one block
 * per pop, 16 or 48 pops ahead, measured 20% and 10% slower for churn at
 * 10M objects).
 *
 * Why both. In a steady state (a put for each remove) the frees of a
 * grace period are taken again by the next puts, and the stack holds
 * them: a copy of 8 bytes each, on both sides. Taking from the maps
 * alone costs a visit per block when freed blocks are scattered thin
 * over many chunks: a header, a summary and a map line each, which at
 * 10M objects are out of cache (perf of a one-thread churn: 12% of its
 * samples). A mass remove frees more than any put takes for a while,
 * and there the maps hold the rest at a bit per block, in memory the
 * chunk has from the start. Before them, every freed batch's addresses
 * went into a malloc()'d array: 8 bytes per freed block until a put took
 * it again, faulted in by the grace-period thread; in a two-thread
 * remove of 10M objects that thread spent a quarter of the machine's CPU
 * growing its heap (page zeroing, mprotect()), on the vCPU a remove
 * thread needs. Linking freed blocks through their own words (before
 * the arrays) cost the grace-period thread a miss per record instead.
 */
struct magazine {
	uint32_t n;	/* blocks taken */
	uint32_t used;	/* handed out: the next is blk[used] */
	uint32_t asked; /* blk[used..asked) are on their way */
	void *blk[];
};

#define MAG_CAP 128
#define STACK_CAP 65536 /* 512 KiB of addresses per class */
#define MAG_AHEAD 48
#define MAG_ROUND 12

/*
 * Per-thread runs. A thread keeps, per class, the uncarved rest of the
 * last run it took, for one arena at a time (the one it allocated from
 * last). Moving to another arena, or exiting, gives the rest back to the
 * arena's free lists, if the arena still exists: arenas are found by id in
 * the list of live ones, under live_lock, which destroy takes to leave it,
 * so a thread never touches a destroyed arena (nor one that reused its
 * address). 16 KiB, not 4: two put threads took the class's lock and
 * its bump pointer's line from each other a quarter as often (two-thread
 * put at 1M objects 9% faster; one thread's the same).
 */
#define RUN_BYTES 16384
/*
 * Fresh blocks asked for ahead of the one handed out (see above): 8 and
 * 16 measured alike, 4 slower; past the run's end the prefetch is a hint
 * into the chunk's next run, or nothing.
 */
#define FRESH_AHEAD 8

struct run {
	char *next, *end; /* carved blocks not handed out yet */
};

struct tcache {
	uint64_t arena_id; /* 0: no runs */
	struct run run[NR_CLASSES];
	struct magazine *mag[NR_CLASSES]; /* freed blocks taken, or NULL */
};

static __thread struct tcache tcache;
static pthread_key_t tcache_key;
static pthread_once_t tcache_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static struct kvf__arena *live_arenas;
static uint64_t last_arena_id;

_Static_assert(sizeof(struct chunk) <= CHUNK_HEADER, "chunk header");
_Static_assert(KVF__ARENA_MAX_BLOCK <= CHUNK_SIZE - CHUNK_HEADER,
	       "a chunk holds the largest block");

static unsigned class_of(size_t size)
{
	unsigned k, sub;

	if (size <= SMALL_MAX)
		return (unsigned)((size + SMALL_STEP - 1) / SMALL_STEP) - 1;
	k = 63 - (unsigned)__builtin_clzll((unsigned long long)(size - 1));
	sub = (unsigned)((size - 1 - ((size_t)1 << k)) >> (k - 2));
	return NR_SMALL + (k - SMALL_BITS) * PER_DOUBLING + sub;
}

static size_t class_size(unsigned c)
{
	unsigned k, sub;

	if (c < NR_SMALL)
		return (size_t)(c + 1) * SMALL_STEP;
	k = SMALL_BITS + (c - NR_SMALL) / PER_DOUBLING;
	sub = (c - NR_SMALL) % PER_DOUBLING;
	return ((size_t)1 << k) + (size_t)(sub + 1) * ((size_t)1 << (k - 2));
}

/* Fault every page of a fresh chunk in (zero stores keep it zero). */
static void touch(char *p)
{
	for (size_t off = 0; off < CHUNK_SIZE; off += PAGE)
		*(volatile char *)(p + off) = 0;
}

/*
 * With the reserve's lock held: give one chunk beyond the goal back to
 * the system (dropping the lock meanwhile). A guess larger than the
 * records turned out leaves such chunks once the goal is set again from
 * the blocks carved so far.
 */
static void trim_one(struct reserve *r)
{
	struct chunk *ch = r->chunks;

	r->chunks = ch->next;
	r->nr--;
	pthread_mutex_unlock(&r->lock);
	kvf__huge_free(ch, CHUNK_SIZE);
	pthread_mutex_lock(&r->lock);
}

static void *prefault_main(void *arg)
{
	struct reserve *r = arg;

	pthread_mutex_lock(&r->lock);
	while (!r->stop) {
		struct chunk *ch;

		if (r->nr > r->goal) {
			trim_one(r);
			continue;
		}
		if (!r->want || r->nr >= r->goal) {
			r->want = false;
			pthread_cond_wait(&r->wake, &r->lock);
			continue;
		}
		pthread_mutex_unlock(&r->lock);
		ch = kvf__huge_alloc(CHUNK_SIZE);
		if (ch)
			touch((char *)ch);
		pthread_mutex_lock(&r->lock);
		if (!ch || r->nr >= r->goal) {
			/* No memory now: retry when the next chunk is taken. */
			r->want = false;
			kvf__huge_free(ch, CHUNK_SIZE);
			continue;
		}
		ch->next = r->chunks;
		r->chunks = ch;
		r->nr++;
	}
	pthread_mutex_unlock(&r->lock);
	return NULL;
}

/*
 * Chunks the blocks still expected will take, at the average size of the
 * fresh blocks so far, within the presize budget; @room of them go into
 * the chunk being taken now (it is not carved yet).
 */
static uint64_t ahead_chunks(const struct kvf__arena *a, uint64_t room)
{
	uint64_t blocks = __atomic_load_n(&a->carved_blocks, __ATOMIC_RELAXED);
	uint64_t bytes = __atomic_load_n(&a->carved_bytes, __ATOMIC_RELAXED);
	uint64_t left = a->ahead_blocks > blocks + room ?
				a->ahead_blocks - blocks - room :
				0;
	uint64_t each = blocks ? bytes / blocks : AHEAD_GUESS;
	uint64_t per = CHUNK_SIZE - CHUNK_HEADER;
	uint64_t cap = kvf__huge_presize_budget() / CHUNK_SIZE;
	/* each block also takes a bit of its chunk's free map */
	uint64_t want = (left * each + left / 8 + per - 1) / per;

	return want < cap ? want : cap;
}

/*
 * How many chunks the reserve holds when @in_use are in use (and one
 * with room for @room blocks is being taken): one per
 * RESERVE_PER, at least one, at most RESERVE_CHUNKS, and what the
 * expected blocks still take. But no minimum one while the arena holds
 * no more than its creator expected (and a 64th more, the runs' and
 * classes' slack): that chunk would wait for blocks nobody announced,
 * 2 MiB, at 1M 112-byte records 2.1 bytes of each one's memory. An
 * arena growing past that has its reserve back from the next chunk it
 * takes (which it may fault in itself: once).
 */
static uint64_t reserve_goal(const struct kvf__arena *a, uint64_t in_use,
			     uint64_t room)
{
	uint64_t goal = in_use / RESERVE_PER, ahead = ahead_chunks(a, room);
	uint64_t carved = __atomic_load_n(&a->carved_blocks, __ATOMIC_RELAXED);
	bool expected = a->ahead_blocks &&
			carved <= a->ahead_blocks + a->ahead_blocks / RESERVE_PER;

	if (goal < 1 && !expected)
		goal = 1;
	goal = goal > RESERVE_CHUNKS ? RESERVE_CHUNKS : goal;
	return goal > ahead ? goal : ahead;
}

/*
 * A touched chunk from @a's reserve (waking the refill), or NULL. @in_use:
 * chunks the arena holds, which with what is expected (less the @room
 * blocks the chunk taken holds) sets how many the reserve keeps.
 */
static struct chunk *reserve_take(struct kvf__arena *a, uint64_t in_use,
				  uint64_t room)
{
	struct reserve *r = &a->rsv;
	struct chunk *ch = NULL;

	if (!r->started)
		return NULL;
	pthread_mutex_lock(&r->lock);
	if (r->nr) {
		ch = r->chunks;
		r->chunks = ch->next;
		r->nr--;
	}
	r->goal = reserve_goal(a, in_use, room);
	r->want = true;
	pthread_cond_signal(&r->wake);
	pthread_mutex_unlock(&r->lock);
	return ch;
}

/* Start loading every line of the @size-byte block @p, for writing. */
static inline void prefetch_block(const char *p, size_t size)
{
	uintptr_t line = (uintptr_t)p & ~(uintptr_t)63;

	for (; line < (uintptr_t)p + size; line += 64)
		kvf__prefetch_for_write((const void *)line);
}

/* The chunk that holds block @p. */
static struct chunk *chunk_of(const void *p)
{
	return (struct chunk *)((uintptr_t)p & ~(uintptr_t)(CHUNK_SIZE - 1));
}

/* The class @p's block belongs to, found from its chunk's header. */
static struct size_class *class_of_block(const void *p)
{
	const struct chunk *ch = chunk_of(p);

	kvf__assert(ch->cls < NR_CLASSES);
	return &ch->arena->cls[ch->cls];
}

/*
 * Where class @sc's chunks keep their blocks: as many as fit after the
 * header, the summary and the free map (which grow with them), from the
 * first line boundary after the map.
 */
static void class_layout(struct size_class *sc)
{
	size_t n = (CHUNK_SIZE - CHUNK_HEADER) * 8 / (8 * (size_t)sc->size + 1);
	size_t map, sum, first;

	for (;; n--) {
		map = (n + 63) / 64;
		sum = (map + 63) / 64;
		first = sizeof(struct chunk) + (sum + map) * sizeof(uint64_t);
		first = (first + 63) & ~(size_t)63;
		if (first + n * sc->size <= CHUNK_SIZE)
			break;
	}
	sc->blocks = (uint32_t)n;
	sc->first = (uint32_t)first;
	sc->sum_words = (uint32_t)sum;
}

/* The number of block @p in its chunk @ch of class @sc. */
static uint32_t block_index(const struct size_class *sc, const struct chunk *ch,
			    const void *p)
{
	uint32_t off =
		(uint32_t)((const char *)p - (const char *)ch) - sc->first;

	kvf__assert(off % sc->size == 0 && off / sc->size < sc->blocks);
	return off / sc->size;
}

/* The free-map word of block @p, for the free that sets its bit. */
static void prefetch_map_word(const struct size_class *sc, const void *p)
{
	struct chunk *ch = chunk_of(p);

	kvf__prefetch_for_write(
		&ch->words[sc->sum_words + block_index(sc, ch, p) / 64]);
}

/*
 * With the class lock held: block @p (of class @sc) is free again, its
 * bit set in its chunk's map, the chunk on the class's list if it was
 * not. Nothing is written into the block.
 */
static void map_free(struct size_class *sc, void *p)
{
	struct chunk *ch = chunk_of(p);
	uint32_t i = block_index(sc, ch, p);
	uint64_t *map = ch->words + sc->sum_words, bit = 1ULL << (i % 64);

	if (map[i / 64] & bit)
		kvf__die("arena: block %p freed twice", p);
	if (!map[i / 64])
		ch->words[i / 4096] |= 1ULL << (i / 64 % 64);
	map[i / 64] |= bit;
	if (!ch->nr_freed++) {
		ch->next_freed = sc->freed;
		sc->freed = ch;
	}
	poison(p, sc->size);
}

/*
 * With the class lock held: the @n blocks @p of class @sc are free again,
 * on the stack while it has room, the rest in their chunks' maps.
 */
static void class_free(struct size_class *sc, void *const *p, size_t n)
{
	size_t k = 0;

	if (!sc->stack && n)
		sc->stack = malloc(STACK_CAP * sizeof(void *));
	if (sc->stack) {
		k = STACK_CAP - sc->depth < n ? STACK_CAP - sc->depth : n;
		memcpy(sc->stack + sc->depth, p, k * sizeof(void *));
		sc->depth += (uint32_t)k;
		for (size_t i = 0; i < k; i++)
			poison(p[i], sc->size);
	}
	for (size_t i = k; i < n; i++)
		prefetch_map_word(sc, p[i]);
	for (; k < n; k++)
		map_free(sc, p[k]);
}

/*
 * With the class lock held: up to @max freed blocks of chunk @ch (class
 * @sc) into @out, lowest address first, their bits cleared; how many.
 */
static uint32_t chunk_take(const struct size_class *sc, struct chunk *ch,
			   void **out, uint32_t max)
{
	uint64_t *sum = ch->words, *map = sum + sc->sum_words;
	char *base = (char *)ch + sc->first;
	uint32_t n = 0;

	for (uint32_t s = 0; s < sc->sum_words && n < max; s++) {
		while (sum[s] && n < max) {
			uint32_t w = s * 64 + (uint32_t)__builtin_ctzll(sum[s]);

			for (; map[w] && n < max; map[w] &= map[w] - 1) {
				uint32_t i = w * 64 +
					     (uint32_t)__builtin_ctzll(map[w]);

				out[n++] = base + (size_t)i * sc->size;
			}
			if (!map[w])
				sum[s] &= sum[s] - 1; /* w's bit: the lowest */
		}
	}
	ch->nr_freed -= n;
	return n;
}

/*
 * With the class lock held: up to @max freed blocks of class @sc into
 * @out, from the stack's top, then chunk by chunk; how many. A chunk left
 * with none leaves the list.
 */
static uint32_t take_freed(struct size_class *sc, void **out, uint32_t max)
{
	uint32_t n = sc->depth < max ? sc->depth : max;

	sc->depth -= n;
	if (n)
		memcpy(out, sc->stack + sc->depth, n * sizeof(void *));
	while (n < max && sc->freed) {
		struct chunk *ch = sc->freed;

		n += chunk_take(sc, ch, out + n, max - n);
		if (!ch->nr_freed)
			sc->freed = ch->next_freed;
	}
	return n;
}

/* Ask for @m's next MAG_ROUND blocks not asked for yet, all at once. */
static void mag_ask(struct magazine *m, size_t size)
{
	uint32_t end =
		m->n - m->asked < MAG_ROUND ? m->n : m->asked + MAG_ROUND;

	for (; m->asked < end; m->asked++)
		prefetch_block(m->blk[m->asked], size);
}

/* Ask for the blocks of @m (just filled) the next MAG_AHEAD pops hand out. */
static void mag_start(struct magazine *m, size_t size)
{
	m->asked = m->used = 0;
	while (m->asked < m->n && m->asked - m->used < MAG_AHEAD)
		mag_ask(m, size);
}

/* The next block of magazine @m (or none: NULL), or NULL. */
static void *mag_pop(struct magazine *m, size_t size)
{
	void *p;

	if (!m || m->used == m->n)
		return NULL;
	p = m->blk[m->used++];
	if (m->asked - m->used < MAG_AHEAD - MAG_ROUND)
		mag_ask(m, size);
	return p;
}

/*
 * With the class lock held: a freed block of @sc, or NULL; with a
 * magazine @m, refilled with up to MAG_CAP of them first.
 */
static void *take_one(struct size_class *sc, struct magazine *m)
{
	void *p;

	if (!m)
		return take_freed(sc, &p, 1) ? p : NULL;
	m->n = take_freed(sc, m->blk, MAG_CAP);
	mag_start(m, sc->size);
	return mag_pop(m, sc->size);
}

/* With live_lock held: the live arena @id, or NULL. */
static struct kvf__arena *live_arena(uint64_t id)
{
	struct kvf__arena *a = live_arenas;

	while (a && a->id != id)
		a = a->next_live;
	return a;
}

/*
 * Give the rest of @tc's runs and magazines back to their arena, if it
 * still exists, free the magazines, and forget them.
 */
static void tcache_release(struct tcache *tc)
{
	struct kvf__arena *a;

	if (!tc->arena_id)
		return;
	pthread_mutex_lock(&live_lock);
	a = live_arena(tc->arena_id);
	for (unsigned c = 0; c < NR_CLASSES; c++) {
		struct size_class *sc = a ? &a->cls[c] : NULL;
		struct run *r = &tc->run[c];
		struct magazine *m = tc->mag[c];

		if (sc && (r->next < r->end || (m && m->used < m->n))) {
			pthread_mutex_lock(&sc->lock);
			for (; r->next < r->end; r->next += sc->size) {
				void *p = r->next;

				class_free(sc, &p, 1);
			}
			if (m)
				class_free(sc, m->blk + m->used,
					   m->n - m->used);
			pthread_mutex_unlock(&sc->lock);
		}
		free(m);
	}
	pthread_mutex_unlock(&live_lock);
	memset(tc, 0, sizeof(*tc));
}

static void tcache_exit(void *tc)
{
	tcache_release(tc);
}

static void tcache_key_create(void)
{
	if (pthread_key_create(&tcache_key, tcache_exit))
		kvf__die("arena: no thread key");
}

/* The calling thread's runs, for @a. */
static struct tcache *tcache_for(struct kvf__arena *a)
{
	struct tcache *tc = &tcache;

	if (tc->arena_id == a->id)
		return tc;
	tcache_release(tc);
	pthread_once(&tcache_once, tcache_key_create);
	pthread_setspecific(tcache_key, tc); /* gives the runs back at exit */
	tc->arena_id = a->id;
	return tc;
}

/* With the class lock held: carve @a's next run of class @sc into @r. */
static void take_run(struct kvf__arena *a, struct size_class *sc,
		     struct run *r)
{
	size_t bytes = RUN_BYTES / sc->size * sc->size;
	size_t left = (size_t)(sc->bump_end - sc->bump);

	if (bytes < sc->size)
		bytes = sc->size;
	if (bytes > left)
		bytes = left;
	r->next = sc->bump;
	r->end = sc->bump + bytes;
	sc->bump += bytes;
	__atomic_fetch_add(&a->carved_blocks, bytes / sc->size,
			   __ATOMIC_RELAXED);
	__atomic_fetch_add(&a->carved_bytes, bytes, __ATOMIC_RELAXED);
}

int kvf__arena_create(bool prefault, uint64_t ahead_blocks,
		      struct kvf__arena **out)
{
	struct kvf__arena *a;

	if (posix_memalign((void **)&a, 64, sizeof(*a)))
		return KVF_ERR_NO_MEMORY;
	memset(a, 0, sizeof(*a));
	for (unsigned c = 0; c < NR_CLASSES; c++) {
		kvf__mutex_init_short(&a->cls[c].lock);
		a->cls[c].size = (uint32_t)class_size(c);
		class_layout(&a->cls[c]);
	}
	pthread_mutex_init(&a->rsv.lock, NULL);
	pthread_cond_init(&a->rsv.wake, NULL);
	pthread_mutex_lock(&live_lock);
	a->id = ++last_arena_id;
	a->next_live = live_arenas;
	live_arenas = a;
	pthread_mutex_unlock(&live_lock);
	a->ahead_blocks = ahead_blocks;
	a->rsv.goal = reserve_goal(a, 0, 0);
	a->rsv.want = ahead_blocks > 0;
	if (prefault)
		a->rsv.started = pthread_create(&a->rsv.thread, NULL,
						prefault_main, &a->rsv) == 0;
	*out = a;
	return KVF_OK;
}

static void reserve_stop(struct reserve *r)
{
	if (r->started) {
		pthread_mutex_lock(&r->lock);
		r->stop = true;
		pthread_cond_signal(&r->wake);
		pthread_mutex_unlock(&r->lock);
		pthread_join(r->thread, NULL);
	}
	while (r->chunks) {
		struct chunk *ch = r->chunks;

		r->chunks = ch->next;
		kvf__huge_free(ch, CHUNK_SIZE);
	}
	r->nr = 0;
	pthread_cond_destroy(&r->wake);
	pthread_mutex_destroy(&r->lock);
}

void kvf__arena_destroy(struct kvf__arena *a)
{
	struct kvf__arena **pp;

	if (!a)
		return;
	pthread_mutex_lock(&live_lock);
	for (pp = &live_arenas; *pp != a; pp = &(*pp)->next_live)
		;
	*pp = a->next_live;
	pthread_mutex_unlock(&live_lock);
	/* no longer live: the calling thread only frees its magazines */
	if (tcache.arena_id == a->id)
		tcache_release(&tcache);
	reserve_stop(&a->rsv);
	for (unsigned c = 0; c < NR_CLASSES; c++) {
		struct chunk *ch = a->cls[c].chunks, *next;

		for (; ch; ch = next) {
			next = ch->next;
			unpoison(ch, CHUNK_SIZE);
			kvf__huge_free(ch, CHUNK_SIZE);
		}
		free(a->cls[c].stack);
		pthread_mutex_destroy(&a->cls[c].lock);
	}
	free(a);
}

/* A fresh chunk becomes the class's bump region. Class lock held. */
static int add_chunk(struct kvf__arena *a, unsigned c)
{
	struct size_class *sc = &a->cls[c];
	size_t blocks = sc->blocks;
	struct chunk *ch = reserve_take(
		a, kvf__arena_mapped_bytes(a) / CHUNK_SIZE, blocks);

	if (!ch)
		ch = kvf__huge_alloc(CHUNK_SIZE);
	if (!ch)
		return KVF_ERR_NO_MEMORY;
	ch->arena = a;
	ch->cls = c;
	ch->next = sc->chunks;
	sc->chunks = ch;
	sc->bump = (char *)ch + sc->first;
	sc->bump_end = sc->bump + blocks * sc->size;
	poison(sc->bump, (size_t)(sc->bump_end - sc->bump));
	__atomic_fetch_add(&a->mapped, CHUNK_SIZE, __ATOMIC_RELAXED);
	return KVF_OK;
}

/* The calling thread's magazine for class @c, or NULL without memory. */
static struct magazine *tcache_mag(struct tcache *tc, unsigned c)
{
	if (!tc->mag[c]) {
		tc->mag[c] = malloc(sizeof(struct magazine) +
				    MAG_CAP * sizeof(void *));
		if (tc->mag[c])
			tc->mag[c]->n = tc->mag[c]->used = 0;
	}
	return tc->mag[c];
}

void *kvf__arena_alloc(struct kvf__arena *a, size_t size)
{
	struct tcache *tc;
	struct size_class *sc;
	struct run *r;
	unsigned c;
	char *p;

	if (!size || size > KVF__ARENA_MAX_BLOCK)
		return NULL;
	c = class_of(size);
	sc = &a->cls[c];
	tc = tcache_for(a);
	r = &tc->run[c];
	if (r->next == r->end) {
		p = mag_pop(tc->mag[c], sc->size);
		if (!p) {
			struct magazine *m = tcache_mag(tc, c);

			pthread_mutex_lock(&sc->lock);
			p = take_one(sc, m);
			if (!p && sc->bump == sc->bump_end &&
			    add_chunk(a, c) != KVF_OK) {
				pthread_mutex_unlock(&sc->lock);
				return NULL;
			}
			if (!p)
				take_run(a, sc, r);
			pthread_mutex_unlock(&sc->lock);
		}
		if (p) {
			unpoison(p, size);
			memset(p, 0, size); /* recycled: zero it like a fresh one */
			return p;
		}
	}
	p = r->next;
	r->next += sc->size;
	/* An address only, maybe past the chunk: never dereferenced. */
	prefetch_block((const char *)((uintptr_t)p + FRESH_AHEAD * sc->size),
		       sc->size);
	unpoison(p, size); /* fresh mappings are zero */
	return p;
}

void kvf__arena_free_many(void *const *p, size_t n)
{
	size_t i = 0;

	while (i < n) {
		struct size_class *sc;
		size_t j = i + 1;

		if (!p[i]) {
			i++;
			continue;
		}
		sc = class_of_block(p[i]);
		while (j < n && p[j] && class_of_block(p[j]) == sc)
			j++;
		pthread_mutex_lock(&sc->lock);
		class_free(sc, p + i, j - i);
		pthread_mutex_unlock(&sc->lock);
		i = j;
	}
}

void kvf__arena_free(void *p)
{
	struct size_class *sc;

	if (!p)
		return;
	sc = class_of_block(p);
	pthread_mutex_lock(&sc->lock);
	class_free(sc, &p, 1);
	pthread_mutex_unlock(&sc->lock);
}

uint64_t kvf__arena_chunk_blocks(size_t size)
{
	struct size_class sc = {.size = (uint32_t)class_size(class_of(size))};

	if (!size || size > KVF__ARENA_MAX_BLOCK)
		return 0;
	class_layout(&sc);
	return sc.blocks;
}

uint64_t kvf__arena_reserved_bytes(struct kvf__arena *a)
{
	uint64_t nr;

	pthread_mutex_lock(&a->rsv.lock);
	nr = a->rsv.nr;
	pthread_mutex_unlock(&a->rsv.lock);
	return nr * CHUNK_SIZE;
}

uint64_t kvf__arena_mapped_bytes(const struct kvf__arena *a)
{
	return __atomic_load_n(&a->mapped, __ATOMIC_RELAXED);
}
