/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_arena.c - the record arena: every size class hands out
 * zeroed, aligned, disjoint blocks of the size asked; freed blocks are
 * reused (and come back zeroed); a block finds its own arena; several
 * threads allocating and freeing at once never share a block; with the
 * prefault thread on, chunks from its reserve are zero like fresh ones,
 * and chunks asked for ahead are faulted in and handed out first; the
 * rest of a thread's run goes back to its arena when the thread exits,
 * and a thread whose arena was destroyed moves on to another safely; a
 * freed batch of any length comes back whole while the blocks handed out
 * are overwritten, also when a thread leaves part way through it; a
 * batch free writes nothing into the blocks it frees; blocks freed past
 * what a class's stack holds come back whole, lowest address first
 * within a chunk.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <kvforge/status.h>

#include "metadata/arena.h"

#define NR_LIVE 4096
#define RUN_BYTES 16384 /* a thread's run (arena.c): used before freed blocks */
#define STACK_CAP 65536 /* freed blocks on a class's stack (arena.c) */
#define NR_THREADS 4
#define THREAD_OPS 200000
#define CHUNK ((uint64_t)2 << 20)

static uint64_t rng_next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static bool all_zero(const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

static void rejects_bad_sizes(void **state)
{
	struct kvf__arena *a;

	(void)state;
	assert_int_equal(kvf__arena_create(false, 0, &a), KVF_OK);
	assert_null(kvf__arena_alloc(a, 0));
	assert_null(kvf__arena_alloc(a, KVF__ARENA_MAX_BLOCK + 1));
	assert_int_equal(kvf__arena_mapped_bytes(a), 0);
	kvf__arena_destroy(a);
}

/* Every size from 1 to 600 and a few large ones: zeroed, aligned. */
static void every_size_zeroed_and_aligned(void **state)
{
	static const size_t large[] = { 1000, 4096, 4097, 65654,
					KVF__ARENA_MAX_BLOCK };
	struct kvf__arena *a;

	(void)state;
	assert_int_equal(kvf__arena_create(false, 0, &a), KVF_OK);
	for (size_t size = 1; size <= 600 + 5; size++) {
		size_t n = size <= 600 ? size : large[size - 601];
		unsigned char *p = kvf__arena_alloc(a, n);

		assert_non_null(p);
		assert_int_equal((uintptr_t)p % 8, 0);
		assert_true(all_zero(p, n));
		memset(p, 0xa5, n);
		kvf__arena_free(p);
		/* The same class hands the block back, zeroed again. */
		p = kvf__arena_alloc(a, n);
		assert_non_null(p);
		assert_true(all_zero(p, n));
		kvf__arena_free(p);
	}
	kvf__arena_destroy(a);
}

/* A 128-byte class block sits on a cache-line boundary. */
static void line_sized_blocks_are_line_aligned(void **state)
{
	struct kvf__arena *a;

	(void)state;
	assert_int_equal(kvf__arena_create(false, 0, &a), KVF_OK);
	for (int i = 0; i < 1000; i++)
		assert_int_equal((uintptr_t)kvf__arena_alloc(a, 128) % 64, 0);
	kvf__arena_destroy(a);
}

/*
 * Random alloc/free of random sizes against a model: live blocks never
 * overlap and keep their contents (a byte pattern per block).
 */
static void random_blocks_never_overlap(void **state)
{
	struct blk {
		unsigned char *p;
		size_t n;
		unsigned char fill;
	} *live = calloc(NR_LIVE, sizeof(*live));
	struct kvf__arena *a;
	uint64_t rng = 42;

	(void)state;
	assert_non_null(live);
	assert_int_equal(kvf__arena_create(true, 0, &a), KVF_OK);
	for (int op = 0; op < 200000; op++) {
		struct blk *b = &live[rng_next(&rng) % NR_LIVE];

		if (b->p) {
			for (size_t i = 0; i < b->n; i++)
				assert_int_equal(b->p[i], b->fill);
			kvf__arena_free(b->p);
			b->p = NULL;
			continue;
		}
		b->n = 1 + rng_next(&rng) % (rng_next(&rng) % 8 ? 300 : 20000);
		b->fill = (unsigned char)(1 + op % 255);
		b->p = kvf__arena_alloc(a, b->n);
		assert_non_null(b->p);
		assert_true(all_zero(b->p, b->n));
		memset(b->p, b->fill, b->n);
	}
	for (int i = 0; i < NR_LIVE; i++) {
		for (size_t j = 0; live[i].p && j < live[i].n; j++)
			assert_int_equal(live[i].p[j], live[i].fill);
	}
	assert_true(kvf__arena_mapped_bytes(a) > 0);
	kvf__arena_destroy(a);
	free(live);
}

struct worker {
	pthread_t thread;
	struct kvf__arena *a;
	uint64_t seed;
	int errors;
};

/* Each thread owns its blocks; a block written by two owners is a bug. */
static void *churn(void *arg)
{
	struct worker *w = arg;
	unsigned char *mine[64] = { NULL };
	unsigned char tag = (unsigned char)(w->seed & 0xff);

	for (int op = 0; op < THREAD_OPS; op++) {
		unsigned slot = (unsigned)(rng_next(&w->seed) % 64);
		size_t n = 8 + (size_t)(slot * 7);

		if (mine[slot]) {
			for (size_t i = 0; i < n; i++)
				w->errors += mine[slot][i] != tag;
			kvf__arena_free(mine[slot]);
			mine[slot] = NULL;
		} else {
			mine[slot] = kvf__arena_alloc(w->a, n);
			if (!mine[slot] || !all_zero(mine[slot], n)) {
				w->errors++;
				continue;
			}
			memset(mine[slot], tag, n);
		}
	}
	for (int s = 0; s < 64; s++)
		kvf__arena_free(mine[s]);
	return NULL;
}

/* Blocks freed by one thread and allocated by another stay exclusive. */
static void threads_never_share_a_block(void **state)
{
	struct worker w[NR_THREADS];
	struct kvf__arena *a;

	(void)state;
	assert_int_equal(kvf__arena_create(true, 0, &a), KVF_OK);
	for (int t = 0; t < NR_THREADS; t++) {
		w[t] = (struct worker){ .a = a, .seed = 0x1234567ULL * (t + 1) };
		assert_int_equal(pthread_create(&w[t].thread, NULL, churn,
						&w[t]),
				 0);
	}
	for (int t = 0; t < NR_THREADS; t++) {
		pthread_join(w[t].thread, NULL);
		assert_int_equal(w[t].errors, 0);
	}
	kvf__arena_destroy(a);
}

/* Wait (a minute at most) for @a's reserve to hold @bytes. */
static void wait_reserved(struct kvf__arena *a, uint64_t bytes)
{
	for (int i = 0; i < 60000 && kvf__arena_reserved_bytes(a) != bytes;
	     i++)
		usleep(1000);
	assert_int_equal(kvf__arena_reserved_bytes(a), bytes);
}

/*
 * Chunks for the blocks asked for ahead are faulted in, then handed out
 * before any other chunk is mapped.
 */
static void chunks_asked_ahead_come_first(void **state)
{
	/* 128-byte blocks (the first guess) filling eight chunks exactly */
	const uint64_t per_chunk = kvf__arena_chunk_blocks(128);
	struct kvf__arena *a;
	uint64_t mapped = 0;

	(void)state;
	assert_int_equal(kvf__arena_create(true, 8 * per_chunk, &a), KVF_OK);
	/* the prefault thread fills the reserve */
	wait_reserved(a, 8 * CHUNK);
	while (mapped < 3 * CHUNK) {
		assert_non_null(kvf__arena_alloc(a, 128));
		mapped = kvf__arena_mapped_bytes(a);
	}
	/*
	 * Three taken from the reserve: it holds what the remaining blocks
	 * need (at most six chunks), not eight still, as it would had the
	 * three been mapped beside it.
	 */
	assert_int_equal(mapped, 3 * CHUNK);
	assert_true(kvf__arena_reserved_bytes(a) <= 6 * CHUNK);
	kvf__arena_destroy(a);
}

/*
 * Blocks half the first guess: once the goal follows them, the chunks
 * faulted in for the guess beyond what the rest of the blocks need go
 * back to the system, and those blocks still come from the reserve.
 */
static void reserve_trimmed_to_smaller_blocks(void **state)
{
	const uint64_t per_chunk = kvf__arena_chunk_blocks(128);
	const uint64_t per_small = kvf__arena_chunk_blocks(64);
	struct kvf__arena *a;
	uint64_t n = 0, left;

	(void)state;
	assert_int_equal(kvf__arena_create(true, 8 * per_chunk, &a), KVF_OK);
	wait_reserved(a, 8 * CHUNK);
	/* two chunks of 64-byte blocks taken from the reserve */
	while (kvf__arena_mapped_bytes(a) < 2 * CHUNK) {
		assert_non_null(kvf__arena_alloc(a, 64));
		n++;
	}
	/* what the rest of the expected blocks need at 64 bytes each */
	left = (8 * per_chunk - 2 * per_small + per_small - 1) / per_small;
	for (int i = 0;
	     i < 60000 && kvf__arena_reserved_bytes(a) > left * CHUNK; i++)
		usleep(1000);
	assert_true(kvf__arena_reserved_bytes(a) <= left * CHUNK);
	assert_true(kvf__arena_reserved_bytes(a) >= (left - 1) * CHUNK);
	/* the expected blocks still come without a chunk mapped inline */
	for (; n < 8 * per_chunk; n++)
		assert_non_null(kvf__arena_alloc(a, 64));
	assert_true(kvf__arena_mapped_bytes(a) <= (2 + left) * CHUNK);
	kvf__arena_destroy(a);
}

/*
 * Once the blocks asked for ahead have all come, no chunk waits in the
 * reserve for more (the last chunk taken holds the last of them); an
 * arena that grows past them by more than a 64th has its reserve back.
 */
static void no_spare_chunk_at_expected(void **state)
{
	const uint64_t per_chunk = kvf__arena_chunk_blocks(128);
	struct kvf__arena *a;
	uint64_t n = 0;

	(void)state;
	assert_int_equal(kvf__arena_create(true, 4 * per_chunk, &a), KVF_OK);
	wait_reserved(a, 4 * CHUNK);
	for (; n < 4 * per_chunk; n++)
		assert_non_null(kvf__arena_alloc(a, 128));
	assert_int_equal(kvf__arena_mapped_bytes(a), 4 * CHUNK);
	/* Nothing is faulted in beyond them (the refill would take ms). */
	for (int i = 0; i < 300; i++) {
		assert_int_equal(kvf__arena_reserved_bytes(a), 0);
		usleep(1000);
	}
	/* Growing: the sixth chunk taken is a 64th past; one again. */
	while (kvf__arena_mapped_bytes(a) < 6 * CHUNK)
		assert_non_null(kvf__arena_alloc(a, 128));
	wait_reserved(a, CHUNK);
	kvf__arena_destroy(a);
}

struct leaver {
	struct kvf__arena *a, *b;
	pthread_barrier_t *bar;
	unsigned char *p;
};

/* One block from @a; later (after @a may be gone) one from @b, then exit. */
static void *leave(void *arg)
{
	struct leaver *l = arg;

	l->p = kvf__arena_alloc(l->a, 120);
	pthread_barrier_wait(l->bar);
	pthread_barrier_wait(l->bar);
	if (l->b)
		kvf__arena_free(kvf__arena_alloc(l->b, 120));
	return NULL;
}

/*
 * The rest of a thread's run is not lost when the thread exits: the next
 * blocks of that class come from it. A thread that last used a destroyed
 * arena moves to another one without touching the old one (ASan).
 */
static void runs_outlive_their_threads(void **state)
{
	struct kvf__arena *a, *b;
	pthread_barrier_t bar;
	struct leaver l = { .bar = &bar };
	pthread_t t;
	unsigned char *q;

	(void)state;
	assert_int_equal(pthread_barrier_init(&bar, NULL, 2), 0);
	assert_int_equal(kvf__arena_create(false, 0, &a), KVF_OK);
	l.a = a;
	assert_int_equal(pthread_create(&t, NULL, leave, &l), 0);
	pthread_barrier_wait(&bar);
	pthread_barrier_wait(&bar);
	pthread_join(t, NULL);
	assert_non_null(l.p);
	q = kvf__arena_alloc(a, 120);
	assert_true(q > l.p && q < l.p + RUN_BYTES);
	kvf__arena_destroy(a);

	assert_int_equal(kvf__arena_create(false, 0, &a), KVF_OK);
	assert_int_equal(kvf__arena_create(false, 0, &b), KVF_OK);
	l.a = a;
	l.b = b;
	assert_int_equal(pthread_create(&t, NULL, leave, &l), 0);
	pthread_barrier_wait(&bar);
	kvf__arena_destroy(a);
	pthread_barrier_wait(&bar);
	pthread_join(t, NULL);
	kvf__arena_destroy(b);
	pthread_barrier_destroy(&bar);
}

#define FREED 300

/* Whether @p is one of the @n blocks @set; clears it there if so. */
static bool take_from(unsigned char **set, size_t n, const void *p)
{
	for (size_t i = 0; i < n; i++) {
		if (set[i] == p) {
			set[i] = NULL;
			return true;
		}
	}
	return false;
}

static bool none_left(unsigned char *const *set, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (set[i])
			return false;
	return true;
}

/*
 * Blocks freed together, of several classes, interleaved, with NULLs
 * among them, all come back zeroed before any new memory is mapped, once
 * the thread's run is used up.
 */
static void freed_batches_come_back(void **state)
{
	static const size_t sizes[] = { 8, 120, 200 };
	static unsigned char *blk[3][FREED];
	void *batch[3 * FREED + 2];
	struct kvf__arena *a;
	uint64_t mapped;
	size_t n = 0;

	(void)state;
	assert_int_equal(kvf__arena_create(false, 0, &a), KVF_OK);
	for (size_t i = 0; i < FREED; i++) {
		for (size_t c = 0; c < 3; c++) {
			blk[c][i] = kvf__arena_alloc(a, sizes[c]);
			assert_non_null(blk[c][i]);
			memset(blk[c][i], 0xa5, sizes[c]);
			batch[n++] = blk[c][i];
		}
		if (i == 7 || i == 150)
			batch[n++] = NULL;
	}
	mapped = kvf__arena_mapped_bytes(a);
	kvf__arena_free_many(batch, n);
	for (size_t c = 0; c < 3; c++) {
		for (size_t i = 0; i < FREED + RUN_BYTES / sizes[c]; i++) {
			unsigned char *p = kvf__arena_alloc(a, sizes[c]);

			assert_non_null(p);
			assert_true(all_zero(p, sizes[c]));
			take_from(blk[c], FREED, p);
		}
		assert_true(none_left(blk[c], FREED));
	}
	assert_int_equal(kvf__arena_mapped_bytes(a), mapped);
	kvf__arena_destroy(a);
}

struct taker {
	struct kvf__arena *a;
	unsigned char *p;
};

static void *take_one(void *arg)
{
	struct taker *t = arg;

	t->p = kvf__arena_alloc(t->a, 120);
	return NULL;
}

/*
 * A thread takes a whole magazine of freed blocks for one allocation;
 * when it exits, the rest of the magazine goes back to the arena.
 */
static void magazines_outlive_their_threads(void **state)
{
	static unsigned char *blk[FREED];
	struct taker t = { 0 };
	struct kvf__arena *a;
	pthread_t th;

	(void)state;
	assert_int_equal(kvf__arena_create(false, 0, &a), KVF_OK);
	for (size_t i = 0; i < FREED; i++)
		assert_non_null(blk[i] = kvf__arena_alloc(a, 120));
	kvf__arena_free_many((void *const *)blk, FREED);
	t.a = a;
	assert_int_equal(pthread_create(&th, NULL, take_one, &t), 0);
	pthread_join(th, NULL);
	assert_true(take_from(blk, FREED, t.p));
	for (size_t i = 0; i < FREED - 1 + RUN_BYTES / 120; i++)
		take_from(blk, FREED, kvf__arena_alloc(a, 120));
	assert_true(none_left(blk, FREED));
	kvf__arena_destroy(a);
}

/*
 * Take @n blocks of @size from @a, each zeroed, then scribbled over at
 * once (as a record's owner would), noting those of @set as taken: the
 * arena must never read a block's words once it has handed it out.
 */
static size_t take_scribbling(struct kvf__arena *a, size_t size, size_t n,
			      unsigned char **set, size_t set_n)
{
	size_t found = 0;

	for (size_t i = 0; i < n; i++) {
		unsigned char *p = kvf__arena_alloc(a, size);

		assert_non_null(p);
		assert_true(all_zero(p, size));
		memset(p, 0xff, size);
		found += take_from(set, set_n, p);
	}
	return found;
}

/*
 * A freed batch of any length, in a class of any size, comes back block
 * by block, each exactly once and zeroed, while the blocks already handed
 * out are overwritten: the arena never reads a word of a block it gave
 * away (a magazine holds the addresses, arena.c "Magazines").
 */
static void magazines_come_back_whole(void **state)
{
	static const size_t sizes[] = {16, 24, 32, 112, 120, 256, 1024};
	static const size_t lens[] = {1,  2,  11, 12, 13,  16,
				      25, 47, 48, 49, 100, FREED};
	static unsigned char *blk[FREED];

	(void)state;
	for (size_t c = 0; c < sizeof(sizes) / sizeof(sizes[0]); c++) {
		for (size_t l = 0; l < sizeof(lens) / sizeof(lens[0]); l++) {
			size_t size = sizes[c], n = lens[l];
			struct kvf__arena *a;
			uint64_t mapped;

			assert_int_equal(kvf__arena_create(false, 0, &a),
					 KVF_OK);
			for (size_t i = 0; i < n; i++)
				assert_non_null(
					blk[i] = kvf__arena_alloc(a, size));
			mapped = kvf__arena_mapped_bytes(a);
			kvf__arena_free_many((void *const *)blk, n);
			assert_int_equal(take_scribbling(a, size,
							 n + RUN_BYTES / size,
							 blk, n),
					 n);
			assert_true(none_left(blk, n));
			assert_int_equal(kvf__arena_mapped_bytes(a), mapped);
			kvf__arena_destroy(a);
		}
	}
}

struct partial {
	struct kvf__arena *a;
	size_t take;
	unsigned char **set;
	size_t found;
};

static void *take_part(void *arg)
{
	struct partial *t = arg;

	t->found = take_scribbling(t->a, 112, t->take, t->set, FREED);
	return NULL;
}

/*
 * A thread that leaves part way through a magazine gives the rest back;
 * whoever takes the rest gets each block of it exactly once, wherever it
 * was cut.
 */
static void magazine_rests_come_back_whole(void **state)
{
	static const size_t cuts[] = {1, 5, 11, 12, 13, 30, 60, 99};
	static unsigned char *blk[FREED];

	(void)state;
	for (size_t k = 0; k < sizeof(cuts) / sizeof(cuts[0]); k++) {
		struct partial t = {.take = cuts[k], .set = blk};
		struct kvf__arena *a;
		pthread_t th;

		assert_int_equal(kvf__arena_create(false, 0, &a), KVF_OK);
		for (size_t i = 0; i < 100; i++)
			assert_non_null(blk[i] = kvf__arena_alloc(a, 112));
		for (size_t i = 100; i < FREED; i++)
			blk[i] = NULL;
		kvf__arena_free_many((void *const *)blk, 100);
		t.a = a;
		assert_int_equal(pthread_create(&th, NULL, take_part, &t), 0);
		pthread_join(th, NULL);
		assert_int_equal(t.found, cuts[k]);
		assert_int_equal(
			take_scribbling(a, 112, 100 - cuts[k] + RUN_BYTES / 112,
					blk, FREED),
			100 - cuts[k]);
		assert_true(none_left(blk, FREED));
		kvf__arena_destroy(a);
	}
}

/*
 * A batch free writes nothing into the blocks it frees (the thread that
 * frees records after their grace period would otherwise miss on every
 * one, arena.c "Magazines"); they still come back, each once, zeroed.
 * Reading a freed block is an error under AddressSanitizer (the arena
 * poisons it), so there the blocks' bytes go unchecked.
 */
static void batch_free_writes_no_block(void **state)
{
	static unsigned char *blk[FREED];
	struct kvf__arena *a;

	(void)state;
	assert_int_equal(kvf__arena_create(false, 0, &a), KVF_OK);
	for (size_t i = 0; i < FREED; i++) {
		assert_non_null(blk[i] = kvf__arena_alloc(a, 112));
		memset(blk[i], 0x5a, 112);
	}
	kvf__arena_free_many((void *const *)blk, FREED);
#if !defined(__SANITIZE_ADDRESS__)
	for (size_t i = 0; i < FREED; i++)
		for (size_t k = 0; k < 112; k++)
			assert_int_equal(blk[i][k], 0x5a);
#endif
	assert_int_equal(
		take_scribbling(a, 112, FREED + RUN_BYTES / 112, blk, FREED),
		FREED);
	assert_true(none_left(blk, FREED));
	kvf__arena_destroy(a);
}

/* Put the @n blocks @v in a random order drawn from @seed. */
static void shuffle(unsigned char **v, size_t n, uint64_t seed)
{
	for (size_t i = n - 1; i > 0; i--) {
		size_t j = rng_next(&seed) % (i + 1);
		unsigned char *t = v[i];

		v[i] = v[j];
		v[j] = t;
	}
}

static int cmp_addr(const void *x, const void *y)
{
	const void *a = *(void *const *)x, *b = *(void *const *)y;

	return ((uintptr_t)a > (uintptr_t)b) - ((uintptr_t)a < (uintptr_t)b);
}

/*
 * Freed blocks beyond what the class's stack holds come back lowest
 * address first within their chunk, whatever order they were freed in
 * (a refill after a mass remove writes neighbouring lines, as a first
 * fill does), after the stack's.
 */
static void freed_blocks_come_back_in_address_order(void **state)
{
	static unsigned char *blk[FREED], *sorted[FREED];
	unsigned char *got[FREED];
	void **stacked = malloc(STACK_CAP * sizeof(*stacked));
	struct kvf__arena *a;
	size_t n = 0;

	(void)state;
	assert_non_null(stacked);
	assert_int_equal(kvf__arena_create(false, 0, &a), KVF_OK);
	for (size_t i = 0; i < STACK_CAP; i++)
		assert_non_null(stacked[i] = kvf__arena_alloc(a, 112));
	for (size_t i = 0; i < FREED; i++)
		assert_non_null(blk[i] = kvf__arena_alloc(a, 112));
	kvf__arena_free_many(stacked, STACK_CAP); /* the stack is full */
	free(stacked);
	shuffle(blk, FREED, 7);
	memcpy(sorted, blk, sizeof(blk));
	qsort(sorted, FREED, sizeof(sorted[0]), cmp_addr);
	kvf__arena_free_many((void *const *)blk, FREED);
	for (size_t i = 0; i < STACK_CAP + FREED + RUN_BYTES / 112; i++) {
		unsigned char *p = kvf__arena_alloc(a, 112);

		if (take_from(blk, FREED, p))
			got[n++] = p;
	}
	assert_int_equal(n, FREED);
	for (size_t i = 0; i < FREED; i++)
		assert_ptr_equal(got[i], sorted[i]);
	kvf__arena_destroy(a);
}

/*
 * Blocks of several chunks, freed in one batch in random order, more than
 * the class's stack holds, all come back, each once and zeroed, with
 * nothing more mapped: small blocks, whose free maps need many summary
 * words, and records' sizes.
 */
static void freed_chunks_come_back_whole(void **state)
{
	static const size_t sizes[] = {16, 112};

	(void)state;
	for (size_t c = 0; c < sizeof(sizes) / sizeof(sizes[0]); c++) {
		size_t size = sizes[c];
		size_t n = STACK_CAP + 3 * kvf__arena_chunk_blocks(size) + 5;
		unsigned char **blk = malloc(n * sizeof(*blk));
		unsigned char **seen = calloc(n, sizeof(*seen));
		struct kvf__arena *a;
		uint64_t mapped;
		size_t got = 0;

		assert_non_null(blk);
		assert_non_null(seen);
		assert_int_equal(kvf__arena_create(false, 0, &a), KVF_OK);
		for (size_t i = 0; i < n; i++) {
			assert_non_null(blk[i] = kvf__arena_alloc(a, size));
			memset(blk[i], 0xc3, size);
		}
		mapped = kvf__arena_mapped_bytes(a);
		shuffle(blk, n, 11);
		kvf__arena_free_many((void *const *)blk, n);
		qsort(blk, n, sizeof(blk[0]), cmp_addr);
		for (size_t i = 0; i < n + RUN_BYTES / size; i++) {
			unsigned char *p = kvf__arena_alloc(a, size);
			unsigned char **at =
				bsearch(&p, blk, n, sizeof(blk[0]), cmp_addr);

			assert_non_null(p);
			assert_true(all_zero(p, size));
			if (!at)
				continue;
			assert_null(seen[at - blk]); /* each once */
			seen[at - blk] = p;
			got++;
		}
		assert_int_equal(got, n);
		assert_int_equal(kvf__arena_mapped_bytes(a), mapped);
		kvf__arena_destroy(a);
		free(seen);
		free(blk);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(rejects_bad_sizes),
		cmocka_unit_test(every_size_zeroed_and_aligned),
		cmocka_unit_test(line_sized_blocks_are_line_aligned),
		cmocka_unit_test(random_blocks_never_overlap),
		cmocka_unit_test(threads_never_share_a_block),
		cmocka_unit_test(chunks_asked_ahead_come_first),
		cmocka_unit_test(reserve_trimmed_to_smaller_blocks),
		cmocka_unit_test(no_spare_chunk_at_expected),
		cmocka_unit_test(runs_outlive_their_threads),
		cmocka_unit_test(freed_batches_come_back),
		cmocka_unit_test(magazines_outlive_their_threads),
		cmocka_unit_test(magazines_come_back_whole),
		cmocka_unit_test(magazine_rests_come_back_whole),
		cmocka_unit_test(batch_free_writes_no_block),
		cmocka_unit_test(freed_blocks_come_back_in_address_order),
		cmocka_unit_test(freed_chunks_come_back_whole),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
