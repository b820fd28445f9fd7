/* SPDX-License-Identifier: MIT */
/*
 * tests/stress/test_index_concurrent.c - the index under concurrent
 * readers, writers and resizes, for every implementation.
 *
 * Each round creates an index presized for one record, inserts a "stable"
 * set (every STABLE_EVERY-th key, never touched again), then runs:
 *  - readers: batch lookups of random keys. Every stable key must be found
 *    (a resize must never hide a present record), a never-inserted key
 *    never, and every record found must carry the live magic (records are
 *    poisoned in their RCU free callback, so a reader inside its read-side
 *    section must never see the poison) and the key it was looked up by;
 *  - writers: each owns a disjoint set of keys and inserts, removes and
 *    replaces them, checking every result against what it owns; the table
 *    grows several times per round while readers run;
 *  - a scanner: foreach must visit every stable record exactly once, also
 *    across resizes.
 * test_insert_race: two put-shaped writers race insert_since for the same
 * keys (and insert their own), audited for one record per key and an
 * exact count after every pass.
 * Threads count failures (cmocka asserts only in the main thread).
 * Runtime: KVF_STRESS_SECONDS (default 2) split over the implementations
 * and rounds; it is time-bounded, so sanitizer builds do fewer operations.
 */
#include "config.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <kvforge/status.h>

#include "base/rcu.h"
#include "metadata/hash.h"
#include "metadata/index.h"
#include "tests/unit/index_helpers.h"

#define NR_KEYS 16384
#define NR_MISS 1024 /* ids [NR_KEYS, NR_KEYS + NR_MISS) never inserted */
#define STABLE_EVERY 16
#define NR_READERS 2
#define NR_WRITERS 2
#define ROUNDS 3
#define MAX_BATCH 256
#define MAX_KEY 96
#define LIVE_MAGIC 0x11fe11fe11feULL /* fits the 48-bit size field */
#define POISON 0xdeaddeaddeadULL

struct test_key {
	char data[MAX_KEY];
	size_t len;
	uint64_t hash;
};

static struct test_key keys[NR_KEYS + NR_MISS];

struct run {
	const struct kvf__index_ops *ops;
	struct kvf__index *idx;
	bool stop;			      /* atomic */
	unsigned long errors;		      /* atomic */
	unsigned long lookups, writes, scans; /* atomic, for the log */
};

static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static void make_keys(void)
{
	uint64_t s = 42;

	for (unsigned id = 0; id < NR_KEYS + NR_MISS; id++) {
		struct test_key *k = &keys[id];
		int len = 0;

		for (int w = 0; w < 4; w++)
			len += snprintf(k->data + len, MAX_KEY - len, "%016llx",
					(unsigned long long)rng_next(&s));
		len += snprintf(k->data + len, MAX_KEY - len, "_%u_k", id % 8);
		k->len = (size_t)len;
		k->hash = kvf__key_hash(k->data, k->len);
	}
}

static bool is_stable(unsigned id)
{
	return id < NR_KEYS && id % STABLE_EVERY == 0;
}

static void report_failure(struct run *r, const char *what, unsigned id)
{
	fprintf(stderr, "%s: %s (key %u)\n", r->ops->name, what, id);
	__atomic_fetch_add(&r->errors, 1, __ATOMIC_RELAXED);
}

static bool stopping(struct run *r)
{
	return __atomic_load_n(&r->stop, __ATOMIC_ACQUIRE);
}

static struct kvf__object *record_new(unsigned id)
{
	struct kvf__object *o =
		test_record_new(keys[id].data, keys[id].len);

	if (!o)
		abort();
	o->owner = id;
	o->size = LIVE_MAGIC;
	return o;
}

/*
 * TSan cannot see grace periods: every poisoned record would be a
 * (suppressed) race with the readers that saw it, and TSan's handling of
 * hundreds of thousands of suppressed reports grows quadratically. So the
 * test models the grace period: every read-side section ends with a
 * release on this token, and the free callback acquires it. A no-op
 * outside TSan builds.
 */
static char grace_token;

static void read_unlock(void)
{
	kvf__tsan_release(&grace_token);
	kvf__rcu_read_unlock();
}

/* A retired record waiting for its grace period. */
struct retired {
	struct rcu_head rcu;
	struct kvf__object *o;
};

/* RCU callback: poison, so a reader that still sees the record fails. */
static void poison_and_free(struct rcu_head *head)
{
	struct retired *rt = caa_container_of(head, struct retired, rcu);
	struct kvf__object *o = rt->o;

	free(rt);
	kvf__tsan_acquire(&grace_token);
	o->size = POISON;
	o->owner = UINT64_MAX;
	memset((char *)kvf__object_key(o), 'X', o->key_len);
	kvf__object_free(o);
}

static void record_retire(struct kvf__object *o)
{
	struct retired *rt = malloc(sizeof(*rt));

	if (!rt)
		abort();
	rt->o = o;
	kvf__rcu_call(&rt->rcu, poison_and_free);
}

static void check_record(struct run *r, struct kvf__object *o, unsigned id)
{
	if (o->size != LIVE_MAGIC)
		report_failure(r, "found a freed record", id);
	else if (o->owner != id || o->key_len != keys[id].len ||
		 memcmp(kvf__object_key(o), keys[id].data, keys[id].len))
		report_failure(r, "found a record of another key", id);
}

static void reader_batch(struct run *r, uint64_t *seed)
{
	static __thread struct kvf_key k[MAX_BATCH];
	static __thread uint64_t h[MAX_BATCH];
	static __thread unsigned ids[MAX_BATCH];
	static __thread struct kvf__object *out[MAX_BATCH];
	size_t n = 1 + rng_next(seed) % MAX_BATCH;

	for (size_t i = 0; i < n; i++) {
		ids[i] = (unsigned)(rng_next(seed) % (NR_KEYS + NR_MISS));
		k[i] = (struct kvf_key){keys[ids[i]].data, keys[ids[i]].len};
		h[i] = keys[ids[i]].hash;
	}
	kvf__rcu_read_lock();
	kvf__index_lookup_batch(r->idx, n, h, k, out);
	for (size_t i = 0; i < n; i++) {
		if (out[i])
			check_record(r, out[i], ids[i]);
		if (ids[i] >= NR_KEYS && out[i])
			report_failure(r, "found a key never inserted", ids[i]);
		if (is_stable(ids[i]) && !out[i])
			report_failure(r, "lost a stable key", ids[i]);
	}
	read_unlock();
	__atomic_fetch_add(&r->lookups, n, __ATOMIC_RELAXED);
}

static void *reader(void *arg)
{
	struct run *r = arg;
	uint64_t seed = (uint64_t)(uintptr_t)&seed;

	kvf__rcu_ensure_registered();
	while (!stopping(r))
		reader_batch(r, &seed);
	return NULL;
}

struct writer {
	struct run *run;
	unsigned nr; /* which writer: owns ids % NR_WRITERS */
	struct kvf__object *own[NR_KEYS]; /* what this writer has inserted */
};

static void writer_step(struct writer *w, unsigned id, uint64_t dice)
{
	struct run *r = w->run;
	struct kvf__object *o = w->own[id], *n;

	if (!o) {
		n = record_new(id);
		if (ins(r->idx, n)) {
			report_failure(r, "insert of an absent key clashed",
				       id);
			kvf__object_free(n);
			return;
		}
		w->own[id] = n;
	} else if (dice & 1) {
		if (rem(r->idx, o) != KVF_OK)
			report_failure(r, "remove of a present record failed",
				       id);
		record_retire(o);
		w->own[id] = NULL;
	} else {
		n = record_new(id);
		if (repl(r->idx, o, n) != KVF_OK) {
			report_failure(r, "replace of a present record failed",
				       id);
			kvf__object_free(n);
			return;
		}
		record_retire(o);
		w->own[id] = n;
	}
}

static void *writer(void *arg)
{
	struct writer *w = arg;
	uint64_t seed = w->nr + 1;

	kvf__rcu_ensure_registered();
	while (!stopping(w->run)) {
		kvf__rcu_read_lock();
		for (int i = 0; i < 64; i++) {
			uint64_t x = rng_next(&seed);
			unsigned id = (unsigned)(x % NR_KEYS);

			id += (w->nr + NR_WRITERS - id % NR_WRITERS) %
			      NR_WRITERS;
			if (id < NR_KEYS && !is_stable(id))
				writer_step(w, id, x >> 32);
		}
		read_unlock();
		__atomic_fetch_add(&w->run->writes, 64, __ATOMIC_RELAXED);
	}
	return NULL;
}

struct scan {
	struct run *run;
	uint8_t seen[NR_KEYS];
};

static void scan_visit(struct kvf__object *o, void *arg)
{
	struct scan *s = arg;
	uint64_t id = o->owner;

	if (o->size != LIVE_MAGIC || id >= NR_KEYS) {
		report_failure(s->run, "foreach visited a freed record", 0);
		return;
	}
	if (s->seen[id] < 255)
		s->seen[id]++;
}

static void *scanner(void *arg)
{
	struct run *r = arg;
	struct scan *s = malloc(sizeof(*s));

	if (!s)
		abort();
	s->run = r;
	kvf__rcu_ensure_registered();
	while (!stopping(r)) {
		memset(s->seen, 0, sizeof(s->seen));
		kvf__rcu_read_lock();
		kvf__index_foreach(r->idx, scan_visit, s);
		read_unlock();
		for (unsigned id = 0; id < NR_KEYS; id += STABLE_EVERY)
			if (s->seen[id] != 1)
				report_failure(
					r,
					"foreach visited a stable key != once",
					id);
		__atomic_fetch_add(&r->scans, 1, __ATOMIC_RELAXED);
	}
	free(s);
	return NULL;
}

static void retire_visit(struct kvf__object *o, void *arg)
{
	struct run *r = arg;

	if (rem(r->idx, o) != KVF_OK)
		report_failure(r, "teardown remove failed",
			       (unsigned)o->owner);
	record_retire(o);
}

static void run_round(struct run *r, unsigned ms)
{
	pthread_t readers[NR_READERS], writers[NR_WRITERS], scan_thread;
	struct writer *w = calloc(NR_WRITERS, sizeof(*w));
	struct timespec nap = {ms / 1000, (long)(ms % 1000) * 1000000L};

	assert_non_null(w);
	record_hooked = r->ops->hooked;
	assert_int_equal(r->ops->create(1, &r->idx), KVF_OK);
	kvf__rcu_read_lock();
	for (unsigned id = 0; id < NR_KEYS; id += STABLE_EVERY)
		assert_null(ins(r->idx, record_new(id)));
	read_unlock();
	__atomic_store_n(&r->stop, false, __ATOMIC_RELEASE);

	for (int i = 0; i < NR_READERS; i++)
		assert_int_equal(pthread_create(&readers[i], NULL, reader, r),
				 0);
	for (unsigned i = 0; i < NR_WRITERS; i++) {
		w[i].run = r;
		w[i].nr = i;
		assert_int_equal(
			pthread_create(&writers[i], NULL, writer, &w[i]), 0);
	}
	assert_int_equal(pthread_create(&scan_thread, NULL, scanner, r), 0);

	nanosleep(&nap, NULL);
	__atomic_store_n(&r->stop, true, __ATOMIC_RELEASE);
	for (int i = 0; i < NR_READERS; i++)
		pthread_join(readers[i], NULL);
	for (int i = 0; i < NR_WRITERS; i++)
		pthread_join(writers[i], NULL);
	pthread_join(scan_thread, NULL);

	kvf__rcu_read_lock();
	kvf__index_foreach(r->idx, retire_visit, r);
	assert_int_equal(kvf__index_count(r->idx), 0);
	read_unlock();
	kvf__index_destroy(r->idx);
	r->idx = NULL;
	free(w);
}

static unsigned total_ms(void)
{
	const char *env = getenv("KVF_STRESS_SECONDS");
	double s = env ? atof(env) : 2.0;

	return s > 0 ? (unsigned)(s * 1000) : 2000;
}

static void test_concurrent(void **state)
{
	struct run r = {.ops = *state};
	unsigned ms = total_ms() / 2 / ROUNDS;

	kvf__rcu_ensure_registered();
	for (int i = 0; i < ROUNDS; i++)
		run_round(&r, ms);
	kvf__rcu_barrier();
	fprintf(stderr,
		"%s: %d rounds of %u ms: %lu keys looked up, %lu writes, "
		"%lu scans\n",
		r.ops->name, ROUNDS, ms, r.lookups, r.writes, r.scans);
	assert_int_equal(r.errors, 0);
	assert_true(r.lookups > 0 && r.writes > 0);
}

/*
 * Two put-shaped writers at once: each takes batches of keys, reads their
 * insert sequences, looks the batch up and inserts what it missed with
 * kvf__index_insert_since(), as put_start does; then removes what it
 * inserted. Both go over the same shared keys, batch by batch, and over
 * disjoint keys of their own. Both look a shared batch up before either
 * inserts (a barrier between), so each shared key is missed by both and
 * inserted by both, one in the batch's order and one in reverse: every
 * shared key must be won once, by one writer, and the other handed the
 * winner's record, through the sequences alone. The count, kept per
 * stripe, must be exact after every pass.
 */
#define RACE_SHARED 4096
#define RACE_OWN 2048 /* per writer, after the shared ids */
#define RACE_BATCH 64
#define RACE_PASSES 12

_Static_assert(RACE_SHARED + 2 * RACE_OWN <= NR_KEYS, "race key ids");

struct racer {
	struct run *run;
	pthread_barrier_t *go;	  /* with the main thread */
	pthread_barrier_t *looked; /* the two writers */
	unsigned nr;
	unsigned long won[RACE_PASSES];
	struct kvf__object *mine[NR_KEYS]; /* what this writer inserted */
};

/*
 * Insert ids[0..n) put-style; count what this writer won. With @meet,
 * wait for the other writer between the lookup and the inserts, and
 * insert in reverse order if this is the second writer.
 */
static void race_batch(struct racer *w, unsigned pass, const unsigned *ids,
		       size_t n, bool meet)
{
	struct kvf_key k[RACE_BATCH];
	uint64_t h[RACE_BATCH];
	uint32_t seq[RACE_BATCH];
	struct kvf__object *out[RACE_BATCH];
	struct kvf__index *idx = w->run->idx;

	for (size_t i = 0; i < n; i++) {
		k[i] = (struct kvf_key){keys[ids[i]].data, keys[ids[i]].len};
		h[i] = keys[ids[i]].hash;
	}
	kvf__rcu_read_lock();
	kvf__index_insert_seqs(idx, n, h, seq);
	kvf__index_lookup_batch(idx, n, h, k, out);
	read_unlock();
	if (meet)
		pthread_barrier_wait(w->looked);
	kvf__rcu_read_lock();
	for (size_t j = 0; j < n; j++) {
		size_t i = meet && w->nr ? n - 1 - j : j;
		struct kvf__object *o, *found;

		if (out[i])
			continue; /* the other writer's, checked below */
		o = record_new(ids[i]);
		found = kvf__index_insert_since(idx, o, h[i], seq[i]);
		if (found) {
			if (found->owner != ids[i])
				report_failure(w->run, "insert found another key",
					       ids[i]);
			kvf__object_free(o);
			continue;
		}
		w->mine[ids[i]] = o;
		w->won[pass]++;
	}
	read_unlock();
}

static void *race_writer(void *arg)
{
	struct racer *w = arg;
	unsigned own0 = RACE_SHARED + w->nr * RACE_OWN;
	unsigned ids[RACE_BATCH];

	kvf__rcu_ensure_registered();
	for (unsigned pass = 0; pass < RACE_PASSES; pass++) {
		pthread_barrier_wait(w->go);
		/* Shared batches in one order for both, own keys between. */
		for (unsigned b = 0; b < RACE_SHARED / RACE_BATCH; b++) {
			for (unsigned i = 0; i < RACE_BATCH; i++)
				ids[i] = b * RACE_BATCH + i;
			race_batch(w, pass, ids, RACE_BATCH, true);
			for (unsigned i = 0; i < RACE_BATCH / 2; i++)
				ids[i] = own0 + (b * RACE_BATCH / 2 + i) %
							RACE_OWN;
			race_batch(w, pass, ids, RACE_BATCH / 2, false);
		}
		pthread_barrier_wait(w->go); /* the main thread audits */
		pthread_barrier_wait(w->go);
		kvf__rcu_read_lock();
		for (unsigned id = 0; id < NR_KEYS; id++) {
			if (!w->mine[id])
				continue;
			if (rem(w->run->idx, w->mine[id]) != KVF_OK)
				report_failure(w->run, "remove of a won key",
					       id);
			record_retire(w->mine[id]);
			w->mine[id] = NULL;
		}
		read_unlock();
	}
	return NULL;
}

static void test_insert_race(void **state)
{
	struct run r = {.ops = *state};
	struct racer *w = calloc(2, sizeof(*w));
	pthread_barrier_t go, looked;
	pthread_t t[2];
	unsigned long bad = 0;

	assert_non_null(w);
	kvf__rcu_ensure_registered();
	record_hooked = r.ops->hooked;
	assert_int_equal(r.ops->create(1, &r.idx), KVF_OK); /* it grows */
	pthread_barrier_init(&go, NULL, 3);
	pthread_barrier_init(&looked, NULL, 2);
	for (unsigned i = 0; i < 2; i++) {
		w[i] = (struct racer){
			.run = &r, .go = &go, .looked = &looked, .nr = i};
		assert_int_equal(pthread_create(&t[i], NULL, race_writer, &w[i]),
				 0);
	}
	/* Audits count their failures: the writers must get to the end. */
	for (unsigned pass = 0; pass < RACE_PASSES; pass++) {
		pthread_barrier_wait(&go);
		pthread_barrier_wait(&go);
		/* Both done inserting: one record per key, exact count. */
		for (unsigned id = 0; id < RACE_SHARED; id++)
			bad += (w[0].mine[id] != NULL) ==
			       (w[1].mine[id] != NULL);
		for (unsigned i = 0; i < 2; i++) {
			unsigned lo = RACE_SHARED + i * RACE_OWN;

			for (unsigned id = RACE_SHARED; id < NR_KEYS; id++)
				bad += (w[i].mine[id] != NULL) !=
				       (id >= lo && id < lo + RACE_OWN);
		}
		bad += w[0].won[pass] + w[1].won[pass] !=
		       RACE_SHARED + 2 * RACE_OWN;
		bad += kvf__index_count(r.idx) != RACE_SHARED + 2 * RACE_OWN;
		pthread_barrier_wait(&go);
	}
	for (unsigned i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	kvf__rcu_barrier();
	assert_int_equal(bad, 0);
	assert_int_equal(r.errors, 0);
	assert_int_equal(kvf__index_count(r.idx), 0);
	kvf__index_destroy(r.idx);
	pthread_barrier_destroy(&go);
	pthread_barrier_destroy(&looked);
	fprintf(stderr, "%s: shared keys won %lu / %lu in the last pass\n",
		r.ops->name, w[0].won[RACE_PASSES - 1] - RACE_OWN,
		w[1].won[RACE_PASSES - 1] - RACE_OWN);
	free(w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_prestate(test_concurrent,
					  (void *)&kvf__index_bucket_ops),
		cmocka_unit_test_prestate(test_concurrent,
					  (void *)&kvf__index_lfht_ops),
		cmocka_unit_test_prestate(test_insert_race,
					  (void *)&kvf__index_bucket_ops),
		cmocka_unit_test_prestate(test_insert_race,
					  (void *)&kvf__index_lfht_ops),
	};

	make_keys();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
