/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_index.c - the object index contract, for every
 * implementation, through the ops table.
 *
 * Single-threaded: the basic calls, a randomized run against a reference
 * model (an array indexed by key id) with indexes created tiny so they
 * resize many times, and foreach while its callback removes, replaces and
 * inserts (inserts force resizes in the middle of the walk). Removed
 * records are freed after a grace period; each test ends with an RCU
 * barrier so nothing is left queued.
 */
#include "config.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvforge/status.h>

#include "base/rcu.h"
#include "metadata/hash.h"
#include "metadata/index.h"
#include "tests/unit/index_helpers.h"

#define NR_KEYS 3000	/* ids [0, NR_KEYS) may be inserted */
#define NR_MISS NR_KEYS /* ids [NR_KEYS, 2 * NR_KEYS) never are */
#define MAX_KEY 96
#define MAX_BATCH 300

struct test_key {
	char data[MAX_KEY];
	size_t len;
	uint64_t hash;
};

static struct test_key keys[NR_KEYS + NR_MISS];

static uint64_t rng_state = 0x853c49e6748fea9bULL;

static uint64_t rng(void)
{
	/* splitmix64: deterministic, so a failure replays. */
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* HiCache-shaped keys (64 hex chars + "_<rank>_k"), every fifth short. */
static void make_keys(void)
{
	for (unsigned id = 0; id < NR_KEYS + NR_MISS; id++) {
		struct test_key *k = &keys[id];
		int len;

		if (id % 5 == 0) {
			len = snprintf(k->data, MAX_KEY, "short-%u", id);
		} else {
			len = 0;
			for (int w = 0; w < 4; w++)
				len += snprintf(k->data + len, MAX_KEY - len,
						"%016llx",
						(unsigned long long)rng());
			len += snprintf(k->data + len, MAX_KEY - len, "_%u_k",
					id % 8);
		}
		k->len = (size_t)len;
		k->hash = kvf__key_hash(k->data, k->len);
	}
}

static struct kvf__object *record_new(unsigned id)
{
	struct kvf__object *o =
		test_record_new(keys[id].data, keys[id].len);

	assert_non_null(o);
	o->size = id; /* the tests' own tag: which key this is */
	return o;
}

static struct kvf__object *lookup_one(struct kvf__index *idx, unsigned id)
{
	struct kvf_key k = {keys[id].data, keys[id].len};
	struct kvf__object *o = (void *)1;

	kvf__index_lookup_batch(idx, 1, &keys[id].hash, &k, &o);
	return o;
}

static struct kvf__index *index_new(void **state, uint64_t expected)
{
	const struct kvf__index_ops *ops = *state;
	struct kvf__index *idx = NULL;

	kvf__rcu_ensure_registered();
	record_hooked = ops->hooked;
	assert_int_equal(ops->create(expected, &idx), KVF_OK);
	assert_non_null(idx);
	assert_ptr_equal(idx->ops, ops);
	return idx;
}

static void remove_and_free(struct kvf__object *o, void *arg)
{
	struct kvf__index *idx = arg;

	assert_int_equal(rem(idx, o), KVF_OK);
	free_after_gp(o);
}

/* Empty the index, destroy it, and wait for every deferred free. */
static void index_finish(struct kvf__index *idx)
{
	kvf__rcu_read_lock();
	kvf__index_foreach(idx, remove_and_free, idx);
	assert_int_equal(kvf__index_count(idx), 0);
	kvf__rcu_read_unlock();
	kvf__index_destroy(idx);
	kvf__rcu_barrier();
}

/* lookup_hash()'s match: exactly the record @arg. */
static bool is_record(const struct kvf__object *o, void *arg)
{
	return o == arg;
}

static void count_visit(struct kvf__object *o, void *arg)
{
	(void)o;
	++*(uint64_t *)arg;
}

static void test_basic(void **state)
{
	struct kvf__index *idx = index_new(state, 0);
	struct kvf__object *a, *dup, *b, *c;
	uint64_t visits = 0;

	kvf__rcu_read_lock();
	assert_null(lookup_one(idx, 1));
	a = record_new(1);
	assert_null(ins(idx, a));
	assert_ptr_equal(lookup_one(idx, 1), a);
	assert_int_equal(kvf__index_count(idx), 1);

	/* A duplicate insert returns the record present; ours stays private. */
	dup = record_new(1);
	assert_ptr_equal(ins(idx, dup), a);
	kvf__object_free(dup);

	b = record_new(1);
	assert_int_equal(repl(idx, a, b), KVF_OK);
	assert_ptr_equal(lookup_one(idx, 1), b);
	c = record_new(1);
	assert_int_equal(repl(idx, a, c),
			 KVF_ERR_OBJECT_NOT_FOUND);
	kvf__object_free(c);
	free_after_gp(a);
	assert_int_equal(kvf__index_count(idx), 1);

	assert_int_equal(rem(idx, b), KVF_OK);
	assert_int_equal(rem(idx, b), KVF_ERR_OBJECT_NOT_FOUND);
	free_after_gp(b);
	assert_null(lookup_one(idx, 1));
	assert_int_equal(kvf__index_count(idx), 0);

	for (unsigned id = 0; id < 100; id++)
		assert_null(ins(idx, record_new(id)));
	assert_int_equal(kvf__index_count(idx), 100);
	kvf__index_foreach(idx, count_visit, &visits);
	assert_int_equal(visits, 100);
	for (unsigned id = 0; id < 100; id++)
		assert_int_equal(lookup_one(idx, id)->size, id);
	kvf__rcu_read_unlock();

	index_finish(idx);
}

struct model {
	struct kvf__index *idx;
	struct kvf__object *ref[NR_KEYS];
	uint64_t present;
};

static void model_insert(struct model *m, unsigned id)
{
	struct kvf__object *o = record_new(id);
	struct kvf__object *got = ins(m->idx, o);

	assert_ptr_equal(got, m->ref[id]);
	if (got) {
		kvf__object_free(o);
		return;
	}
	m->ref[id] = o;
	m->present++;
}

static void model_remove(struct model *m, unsigned id)
{
	struct kvf__object *o = m->ref[id];

	if (!o)
		return;
	assert_int_equal(rem(m->idx, o), KVF_OK);
	assert_int_equal(rem(m->idx, o),
			 KVF_ERR_OBJECT_NOT_FOUND);
	free_after_gp(o);
	m->ref[id] = NULL;
	m->present--;
}

static void model_replace(struct model *m, unsigned id)
{
	struct kvf__object *o = m->ref[id], *n;

	if (!o)
		return;
	n = record_new(id);
	assert_int_equal(repl(m->idx, o, n), KVF_OK);
	free_after_gp(o);
	m->ref[id] = n;
}

/* A batch of 1..MAX_BATCH ids, present, absent and never-inserted. */
static void model_lookup(struct model *m)
{
	static struct kvf_key k[MAX_BATCH];
	static uint64_t h[MAX_BATCH];
	static unsigned ids[MAX_BATCH];
	static struct kvf__object *out[MAX_BATCH];
	size_t n = 1 + rng() % MAX_BATCH;

	for (size_t i = 0; i < n; i++) {
		ids[i] = (unsigned)(rng() % (NR_KEYS + NR_MISS / 4));
		k[i] = (struct kvf_key){keys[ids[i]].data, keys[ids[i]].len};
		h[i] = keys[ids[i]].hash;
	}
	kvf__index_lookup_batch(m->idx, n, h, k, out);
	for (size_t i = 0; i < n; i++)
		assert_ptr_equal(out[i],
				 ids[i] < NR_KEYS ? m->ref[ids[i]] : NULL);
}

static void mark_visit(struct kvf__object *o, void *arg)
{
	struct model *m = arg;

	assert_true(o->size < NR_KEYS);
	assert_ptr_equal(m->ref[o->size], o);
	/* Each record once: a second visit would find the mark. */
	assert_int_equal(o->stamp, 0);
	o->stamp = 1;
}

static void unmark_visit(struct kvf__object *o, void *arg)
{
	(void)arg;
	assert_int_equal(o->stamp, 1);
	o->stamp = 0;
}

static void model_check_all(struct model *m)
{
	kvf__index_foreach(m->idx, mark_visit, m);
	for (unsigned id = 0; id < NR_KEYS; id++)
		if (m->ref[id])
			assert_int_equal(m->ref[id]->stamp, 1);
	kvf__index_foreach(m->idx, unmark_visit, NULL);
	assert_int_equal(kvf__index_count(m->idx), m->present);
}

static void test_random_model(void **state)
{
	struct model *m = calloc(1, sizeof(*m));

	assert_non_null(m);
	m->idx = index_new(state, 1);
	for (int round = 0; round < 40; round++) {
		/* Grow early, then churn: the ratio drifts with the round. */
		unsigned insert_pct = round < 20 ? 60 : 35;

		kvf__rcu_read_lock();
		for (int op = 0; op < 500; op++) {
			unsigned id = (unsigned)(rng() % NR_KEYS);
			unsigned dice = (unsigned)(rng() % 100);

			if (dice < insert_pct)
				model_insert(m, id);
			else if (dice < insert_pct + 25)
				model_remove(m, id);
			else if (dice < insert_pct + 35)
				model_replace(m, id);
			else
				model_lookup(m);
		}
		model_check_all(m);
		kvf__rcu_read_unlock();
	}
	index_finish(m->idx);
	free(m);
}

struct grow_walk {
	struct kvf__index *idx;
	unsigned visits[NR_KEYS];
	unsigned next_new; /* next id the callback inserts */
};

/* Visit, and insert a few new records: the table grows mid-walk. */
static void visit_and_grow(struct kvf__object *o, void *arg)
{
	struct grow_walk *w = arg;

	w->visits[o->size]++;
	for (int i = 0; i < 8 && w->next_new < NR_KEYS; i++)
		assert_null(ins(
			w->idx, record_new(w->next_new++)));
}

static void test_foreach_grows(void **state)
{
	struct grow_walk *w = calloc(1, sizeof(*w));
	const unsigned first = 200;

	assert_non_null(w);
	w->idx = index_new(state, 1);
	kvf__rcu_read_lock();
	for (unsigned id = 0; id < first; id++)
		assert_null(ins(w->idx, record_new(id)));
	w->next_new = first;
	kvf__index_foreach(w->idx, visit_and_grow, w);
	for (unsigned id = 0; id < first; id++)
		assert_int_equal(w->visits[id], 1);
	for (unsigned id = first; id < NR_KEYS; id++)
		assert_in_range(w->visits[id], 0, 1);
	assert_int_equal(kvf__index_count(w->idx), w->next_new);
	for (unsigned id = 0; id < w->next_new; id++)
		assert_int_equal(lookup_one(w->idx, id)->size, id);
	kvf__rcu_read_unlock();
	index_finish(w->idx);
	free(w);
}

struct replace_walk {
	struct kvf__index *idx;
	unsigned visits[NR_KEYS];
	struct kvf__object *now[NR_KEYS];
};

static void visit_and_replace(struct kvf__object *o, void *arg)
{
	struct replace_walk *w = arg;
	struct kvf__object *n;

	w->visits[o->size]++;
	if (o->stamp) /* already a replacement */
		return;
	n = record_new((unsigned)o->size);
	n->stamp = 1;
	assert_int_equal(repl(w->idx, o, n), KVF_OK);
	free_after_gp(o);
	w->now[n->size] = n;
}

static void test_foreach_replaces(void **state)
{
	struct replace_walk *w = calloc(1, sizeof(*w));
	const unsigned nr = 1000;

	assert_non_null(w);
	w->idx = index_new(state, 16);
	kvf__rcu_read_lock();
	for (unsigned id = 0; id < nr; id++)
		assert_null(ins(w->idx, record_new(id)));
	kvf__index_foreach(w->idx, visit_and_replace, w);
	for (unsigned id = 0; id < nr; id++) {
		assert_in_range(w->visits[id], 1, 2);
		assert_non_null(w->now[id]);
		assert_ptr_equal(lookup_one(w->idx, id), w->now[id]);
	}
	assert_int_equal(kvf__index_count(w->idx), nr);
	kvf__rcu_read_unlock();
	index_finish(w->idx);
	free(w);
}

/* Big batches go through the lookup in chunks; presized create. */
/*
 * Keys that all share one hash (one home bucket, one tag, more of them
 * than a bucket's slots): the first slot with a lookup's tag is mostly
 * another key's record, so the lookup falls back to the full compare;
 * every key still finds its own record, in any order, and keys never
 * inserted find none. Presized so no resize re-homes them by their real
 * hashes.
 */
static void test_shared_hash(void **state)
{
	enum { SHARED = 12, MISSES = 4 };
	struct kvf__index *idx = index_new(state, 4096);
	const uint64_t hash = keys[1].hash;
	struct kvf__object *rec[SHARED], *out[SHARED + MISSES];
	struct kvf_key k[SHARED + MISSES];
	uint64_t h[SHARED + MISSES];

	kvf__rcu_read_lock();
	for (unsigned id = 0; id < SHARED; id++) {
		rec[id] = record_new(id);
		assert_null(kvf__index_insert_unique(idx, rec[id], hash));
	}
	for (int pass = 0; pass < 2; pass++) {
		for (unsigned j = 0; j < SHARED + MISSES; j++) {
			/* Pass 1 looks the keys up in reverse order. */
			unsigned id = pass ? SHARED + MISSES - 1 - j : j;
			unsigned key = id < SHARED ? id : NR_KEYS + id;

			k[j] = (struct kvf_key){ keys[key].data, keys[key].len };
			h[j] = hash;
		}
		kvf__index_lookup_batch(idx, SHARED + MISSES, h, k, out);
		for (unsigned j = 0; j < SHARED + MISSES; j++) {
			unsigned id = pass ? SHARED + MISSES - 1 - j : j;

			assert_ptr_equal(out[j], id < SHARED ? rec[id] : NULL);
		}
	}
	for (unsigned id = 0; id < SHARED; id++) {
		assert_int_equal(kvf__index_remove(idx, rec[id], hash), KVF_OK);
		free_after_gp(rec[id]);
	}
	kvf__rcu_read_unlock();
	index_finish(idx);
}

/*
 * A table presized for a million records: the count the index reports is
 * exact after every step though it moves its shared count in large steps
 * (the changes of 3000 records wait in their stripes).
 */
static void test_count_in_big_table(void **state)
{
	struct kvf__index *idx = index_new(state, 1000000);
	static struct kvf__object *rec[NR_KEYS];

	kvf__rcu_read_lock();
	for (unsigned id = 0; id < NR_KEYS; id++) {
		rec[id] = record_new(id);
		assert_null(ins(idx, rec[id]));
		if (id % 97 == 0)
			assert_int_equal(kvf__index_count(idx), id + 1);
	}
	assert_int_equal(kvf__index_count(idx), NR_KEYS);
	for (unsigned id = 0; id < NR_KEYS; id += 2) {
		assert_int_equal(rem(idx, rec[id]), KVF_OK);
		free_after_gp(rec[id]);
	}
	assert_int_equal(kvf__index_count(idx), NR_KEYS / 2);
	kvf__rcu_read_unlock();
	index_finish(idx);
}

static void test_large_batch(void **state)
{
	struct kvf__index *idx = index_new(state, NR_KEYS);
	static struct kvf_key k[NR_KEYS + NR_MISS];
	static uint64_t h[NR_KEYS + NR_MISS];
	static struct kvf__object *out[NR_KEYS + NR_MISS];
	static struct kvf__object *rec[NR_KEYS];

	kvf__rcu_read_lock();
	for (unsigned id = 0; id < NR_KEYS; id++) {
		rec[id] = record_new(id);
		assert_null(ins(idx, rec[id]));
	}
	for (unsigned id = 0; id < NR_KEYS + NR_MISS; id++) {
		k[id] = (struct kvf_key){keys[id].data, keys[id].len};
		h[id] = keys[id].hash;
	}
	kvf__index_lookup_batch(idx, NR_KEYS + NR_MISS, h, k, out);
	for (unsigned id = 0; id < NR_KEYS + NR_MISS; id++)
		assert_ptr_equal(out[id], id < NR_KEYS ? rec[id] : NULL);
	kvf__rcu_read_unlock();
	index_finish(idx);
}

/*
 * kvf__index_insert_since(): a miss is trusted only when no insert near
 * the key came after the sequence was read. Sequences read before an
 * insert of the same key (through either insert) must not let a second
 * record of that key in; read before inserts that grow the table, they
 * still insert into the table that is current. Indexes without
 * sequences answer as insert_unique.
 */
static void test_insert_since(void **state)
{
	struct kvf__index *idx = index_new(state, 0);
	struct kvf__object *a, *b, *dup;
	uint32_t seq[3] = { 0 }, before_a = 0, before_b = 0;

	kvf__rcu_read_lock();
	/* Nothing inserted since: the miss holds. */
	kvf__index_insert_seqs(idx, 1, &keys[1].hash, &seq[0]);
	assert_null(lookup_one(idx, 1));
	a = record_new(1);
	assert_null(kvf__index_insert_since(idx, a, keys[1].hash, seq[0]));
	assert_ptr_equal(lookup_one(idx, 1), a);

	/* Read before an insert_unique of the key: it is found. */
	kvf__index_insert_seqs(idx, 1, &keys[2].hash, &before_a);
	b = record_new(2);
	assert_null(ins(idx, b));
	dup = record_new(2);
	assert_ptr_equal(kvf__index_insert_since(idx, dup, keys[2].hash,
						 before_a),
			 b);
	kvf__object_free(dup);

	/* Read before an insert_since of the key: likewise. */
	kvf__index_insert_seqs(idx, 1, &keys[3].hash, &before_b);
	a = record_new(3);
	assert_null(kvf__index_insert_since(idx, a, keys[3].hash, before_b));
	dup = record_new(3);
	assert_ptr_equal(kvf__index_insert_since(idx, dup, keys[3].hash,
						 before_b),
			 a);
	kvf__object_free(dup);
	assert_int_equal(kvf__index_count(idx), 3);

	/* Read, then enough inserts to grow the tiny table many times. */
	kvf__index_insert_seqs(idx, 1, &keys[4].hash, &seq[1]);
	kvf__index_insert_seqs(idx, 1, &keys[5].hash, &seq[2]);
	for (unsigned id = 6; id < 1000; id++)
		assert_null(ins(idx, record_new(id)));
	a = record_new(4);
	assert_null(kvf__index_insert_since(idx, a, keys[4].hash, seq[1]));
	assert_ptr_equal(lookup_one(idx, 4), a);
	b = record_new(5);
	assert_null(kvf__index_insert_since(idx, b, keys[5].hash, seq[2]));
	assert_ptr_equal(lookup_one(idx, 5), b);
	for (unsigned id = 1; id < 1000; id++)
		assert_int_equal(lookup_one(idx, id)->size, id);
	assert_int_equal(kvf__index_count(idx), 999);
	kvf__rcu_read_unlock();
	index_finish(idx);
}

/* ---- the bucket index's table sizes ------------------------------------ */

#define HUGE_PAGE (UINT64_C(2) << 20)
#define BUCKET 64

/*
 * Homes in tables of any size: in range, from the hash's top 32 bits
 * only, spread evenly over a table that is no power of two, and in the
 * same order at every size (what foreach's cursor relies on): a key
 * homed before another in a table of n2 buckets is not homed after it
 * in one of n1.
 */
static void test_bucket_homes(void **state)
{
	static const uint64_t sizes[] = { 1, 3, 7, 64, 96, 1000, 196608,
					  UINT64_C(1) << 18, 1000003 };
	enum { N = 20000, NR = 1000 };
	static unsigned per[NR];
	static uint64_t h[N];

	(void)state;
	for (unsigned i = 0; i < N; i++)
		h[i] = rng();
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++)
		for (unsigned i = 0; i < N; i++) {
			uint64_t home = kvf__index_bucket_home(sizes[s], h[i]);

			assert_true(home < sizes[s]);
			assert_int_equal(kvf__index_bucket_home(
						 sizes[s], h[i] & ~UINT64_C(0xffffffff)),
					 home);
		}
	for (unsigned i = 0; i < N; i++)
		per[kvf__index_bucket_home(NR, h[i])]++;
	for (unsigned b = 0; b < NR; b++)
		assert_in_range(per[b], 1, 3 * N / NR);
	for (size_t s = 0; s + 1 < sizeof(sizes) / sizeof(sizes[0]); s++)
		for (unsigned i = 0; i + 1 < N; i++) {
			uint64_t n1 = sizes[s], n2 = sizes[s + 1];
			uint64_t a = h[i], b = h[i + 1];

			if (kvf__index_bucket_home(n2, a) <
			    kvf__index_bucket_home(n2, b))
				assert_true(kvf__index_bucket_home(n1, a) <=
					    kvf__index_bucket_home(n1, b));
			if (kvf__index_bucket_home(n2, a) >
			    kvf__index_bucket_home(n2, b))
				assert_true(kvf__index_bucket_home(n1, a) >=
					    kvf__index_bucket_home(n1, b));
		}
}

/* Whole pages of buckets (2 MiB ones from 2 MiB on, else 4 KiB). */
static uint64_t page_of(uint64_t bytes)
{
	return bytes >= HUGE_PAGE ? HUGE_PAGE : 4096;
}

/*
 * A presized table: the fewest whole pages of buckets that hold
 * @expected records at load <= 9/16, not the next power of two (10M
 * records: 78 2 MiB pages, 2,555,904 buckets, where a power of two
 * would be 2^22).
 */
static void test_bucket_presize(void **state)
{
	static const uint64_t expected[] = { 0,	  1,	   1000,    3000,
					     100000, 1000000, 1234567, 10000000 };

	(void)state;
	for (size_t i = 0; i < sizeof(expected) / sizeof(expected[0]); i++) {
		uint64_t bytes = kvf__index_bucket_table_bytes(expected[i]);
		uint64_t page = page_of(bytes), less = bytes - page;

		assert_int_equal(bytes % page, 0);
		assert_true(bytes / BUCKET * 7 * 9 / 16 >= expected[i]);
		/* One page fewer would not do. */
		if (less >= page_of(less) && less)
			assert_true(less / BUCKET * 7 * 9 / 16 < expected[i]);
	}
	assert_int_equal(kvf__index_bucket_table_bytes(1000000),
			 8 * HUGE_PAGE);
	assert_int_equal(kvf__index_bucket_table_bytes(10000000),
			 78 * HUGE_PAGE);
}

/* Buckets of @idx's table: its bytes less those of an empty index's. */
static uint64_t table_nr(struct kvf__index *idx, uint64_t fixed)
{
	return (kvf__index_bytes(idx) - fixed) / BUCKET;
}

/*
 * Growth: a table grows once its load passes 0.8, by half (to the
 * whole pages of 1.5 times its buckets, never doubling where that is
 * more than it needs: 64 -> 128 (4 KiB pages) -> 192 -> 320 -> 512 ->
 * 768 buckets), and every record is found after each growth.
 */
static void test_bucket_growth(void **state)
{
	struct kvf__index *idx = index_new(state, 0);
	uint64_t fixed, nr, grew = 0, odd = 0;
	static struct kvf__object *rec[NR_KEYS];

	kvf__rcu_read_lock();
	fixed = kvf__index_bytes(idx) - kvf__index_bucket_table_bytes(0);
	nr = table_nr(idx, fixed);
	assert_int_equal(nr, 4096 / BUCKET);
	for (unsigned id = 0; id < NR_KEYS; id++) {
		uint64_t now;

		rec[id] = record_new(id);
		assert_null(ins(idx, rec[id]));
		now = table_nr(idx, fixed);
		if (now == nr)
			continue;
		/* Past load 0.8 (the count is exact in tables this small). */
		assert_true((uint64_t)id + 1 > nr * 7 * 4 / 5);
		assert_int_equal(now * BUCKET,
				 ((nr + nr / 2) * BUCKET + 4095) & ~4095ULL);
		grew++;
		odd += (now & (now - 1)) != 0;
		nr = now;
		for (unsigned j = 0; j <= id; j++)
			assert_ptr_equal(lookup_one(idx, j), rec[j]);
	}
	assert_int_equal(grew, 5);
	assert_int_equal(nr, 768);
	assert_true(odd >= 3);
	kvf__rcu_read_unlock();
	index_finish(idx);
}

struct resize_walk {
	struct kvf__index *idx;
	unsigned visits[NR_KEYS];
	unsigned next_new;
	uint64_t fixed;
	uint64_t sizes[8]; /* table sizes the walk met */
	unsigned nr_sizes;
};

/*
 * Every 40th visit inserts 150 new records: the table, presized to a
 * size that is no power of two, grows mid-walk from one such size to
 * another.
 */
static void visit_and_resize(struct kvf__object *o, void *arg)
{
	struct resize_walk *w = arg;
	uint64_t nr;

	w->visits[o->size]++;
	if (w->visits[o->size] != 1 || o->size % 40)
		return;
	for (int i = 0; i < 150 && w->next_new < NR_KEYS; i++)
		assert_null(ins(w->idx, record_new(w->next_new++)));
	nr = table_nr(w->idx, w->fixed);
	if (nr != w->sizes[w->nr_sizes - 1] && w->nr_sizes < 8)
		w->sizes[w->nr_sizes++] = nr;
}

/*
 * One walk of an index presized for @first records, holding them, whose
 * callback grows it: each record present at the start is visited exactly
 * once, the ones inserted during the walk at most once. Returns how many
 * of the resizes the walk met were from or to a size that is no power of
 * two.
 */
static unsigned walk_resizing(void **state, unsigned first)
{
	struct resize_walk *w = calloc(1, sizeof(*w));
	unsigned odd = 0;

	assert_non_null(w);
	w->idx = index_new(state, first);
	kvf__rcu_read_lock();
	w->fixed = kvf__index_bytes(w->idx) -
		   kvf__index_bucket_table_bytes(first);
	w->sizes[w->nr_sizes++] = table_nr(w->idx, w->fixed);
	for (unsigned id = 0; id < first; id++)
		assert_null(ins(w->idx, record_new(id)));
	w->next_new = first;
	kvf__index_foreach(w->idx, visit_and_resize, w);
	for (unsigned i = 1; i < w->nr_sizes; i++)
		odd += (w->sizes[i] & (w->sizes[i] - 1)) ||
		       (w->sizes[i - 1] & (w->sizes[i - 1] - 1));
	for (unsigned id = 0; id < first; id++)
		assert_int_equal(w->visits[id], 1);
	for (unsigned id = first; id < NR_KEYS; id++)
		assert_in_range(w->visits[id], 0, 1);
	assert_int_equal(kvf__index_count(w->idx), w->next_new);
	kvf__rcu_read_unlock();
	index_finish(w->idx);
	free(w);
	return odd;
}

/*
 * foreach across resizes between sizes that are not powers of two (for
 * 800 records: 192 -> 320 -> 512 -> 768 buckets), from eight starting
 * sizes, so that the cursor lands inside a bucket of the new table many
 * times (a walk that visited a whole new bucket again visits records
 * twice).
 */
static void test_bucket_foreach_resizes(void **state)
{
	unsigned odd = 0;

	for (unsigned first = 450; first <= 800; first += 50)
		odd += walk_resizing(state, first);
	assert_true(odd >= 10);
}

/*
 * lookup_hash() with only the top 32 bits of a key's hash (an
 * allocation tag keeps those) finds the key's record.
 */
static void test_lookup_by_high_half(void **state)
{
	struct kvf__index *idx = index_new(state, 0);
	static struct kvf__object *rec[NR_KEYS];

	kvf__rcu_read_lock();
	for (unsigned id = 0; id < NR_KEYS; id++) {
		rec[id] = record_new(id);
		assert_null(ins(idx, rec[id]));
	}
	for (unsigned id = 0; id < NR_KEYS; id++)
		assert_ptr_equal(kvf__index_lookup_hash(
					 idx, keys[id].hash & ~UINT64_C(0xffffffff),
					 is_record, rec[id]),
				 rec[id]);
	kvf__rcu_read_unlock();
	index_finish(idx);
}

#define INDEX_TESTS(ops)                                                       \
	cmocka_unit_test_prestate(test_basic, (void *)&(ops)),                 \
		cmocka_unit_test_prestate(test_random_model, (void *)&(ops)),  \
		cmocka_unit_test_prestate(test_foreach_grows, (void *)&(ops)), \
		cmocka_unit_test_prestate(test_foreach_replaces,               \
					  (void *)&(ops)),                     \
		cmocka_unit_test_prestate(test_shared_hash, (void *)&(ops)),  \
		cmocka_unit_test_prestate(test_count_in_big_table,             \
					  (void *)&(ops)),                     \
		cmocka_unit_test_prestate(test_large_batch, (void *)&(ops)),  \
		cmocka_unit_test_prestate(test_insert_since, (void *)&(ops)),  \
		cmocka_unit_test_prestate(test_lookup_by_high_half,            \
					  (void *)&(ops))

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bucket_homes),
		cmocka_unit_test(test_bucket_presize),
		cmocka_unit_test_prestate(test_bucket_growth,
					  (void *)&kvf__index_bucket_ops),
		cmocka_unit_test_prestate(test_bucket_foreach_resizes,
					  (void *)&kvf__index_bucket_ops),
		INDEX_TESTS(kvf__index_bucket_ops),
		INDEX_TESTS(kvf__index_lfht_ops),
	};

	make_keys();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
