/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_journal_concurrent.c - concurrent appenders (runs under
 * ThreadSanitizer too). Each thread appends batches of puts with keys
 * unique to it while another thread forces checkpoints; after reopening,
 * every acknowledged record must be present exactly once, sequences must
 * be contiguous, and each thread's records must appear in its order. The
 * side log files are small (64 KiB), so they rotate under concurrency; in
 * the "direct" runs one more thread appends batches too large for the side
 * log, which go to LMDB directly between the others' frames.
 */
#include "config.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "journal/journal.h"

#define THREADS 4
#define BATCHES 60
#define PER_BATCH 32
/* The direct appender: batches over half a 64 KiB side log file. */
#define BIG_BATCHES 12
#define PER_BIG 1200
#define MAX_IDX (BIG_BATCHES * PER_BIG)

_Static_assert(MAX_IDX >= BATCHES * PER_BATCH, "index range");

struct worker {
	struct kvf__journal *j;
	int id;
	int batches, per_batch;
	int failed;
};

static void make_key(char *buf, int thread, int idx)
{
	snprintf(buf, 32, "t%d-%06d", thread, idx);
}

static void *appender(void *arg)
{
	struct worker *w = arg;
	struct kvf__jrec *recs = calloc((size_t)w->per_batch, sizeof(*recs));
	char(*keys)[32] = calloc((size_t)w->per_batch, sizeof(*keys));
	const int per = w->per_batch;

	if (!recs || !keys)
		w->failed = 1;
	for (int b = 0; b < w->batches && !w->failed; b++) {
		for (int i = 0; i < per; i++) {
			memset(&recs[i], 0, sizeof(recs[i]));
			make_key(keys[i], w->id, b * per + i);
			recs[i].type = KVF__JREC_OBJECT_PUT;
			recs[i].obj.key = keys[i];
			recs[i].obj.key_len = (uint32_t)strlen(keys[i]);
			recs[i].obj.size = 4096;
			recs[i].obj.nr_replicas = 1;
			recs[i].obj.replicas[0].segment_id = 1;
			recs[i].obj.replicas[0].offset =
				(uint64_t)(b * per + i) * 4096;
		}
		if (kvf__journal_append(w->j, recs, (size_t)per) != KVF_OK)
			w->failed = 1;
	}
	free(keys);
	free(recs);
	return NULL;
}

static void *checkpointer(void *arg)
{
	struct worker *w = arg;

	for (int i = 0; i < 5; i++)
		if (kvf__journal_checkpoint(w->j) != KVF_OK)
			w->failed = 1;
	return NULL;
}

struct seen {
	uint8_t count[THREADS + 1][MAX_IDX];
	int last[THREADS + 1]; /* last index seen in the log, per thread */
	uint64_t image_seq, next_seq;
	int bad;
};

static int seen_cb(void *arg, const struct kvf__jrec *r, uint64_t seq)
{
	struct seen *s = arg;
	int t, idx;

	if (r->type != KVF__JREC_OBJECT_PUT ||
	    sscanf(r->obj.key, "t%d-%d", &t, &idx) != 2 || t < 0 ||
	    t > THREADS || idx < 0 || idx >= MAX_IDX) {
		s->bad = 1;
		return 0;
	}
	s->count[t][idx]++;
	if (seq != s->image_seq) {
		if (seq != s->next_seq++)
			s->bad = 1; /* sequences must be contiguous */
		if (idx <= s->last[t])
			s->bad = 1; /* a thread's records keep their order */
		s->last[t] = idx;
	}
	return 0;
}

/*
 * THREADS appenders and a checkpointing thread, plus with @direct an
 * appender of oversize batches (worker THREADS, which then checkpoints
 * nothing); every record must come back exactly once, in order.
 */
static void run(enum kvf_durability d, uint64_t ckpt, bool direct)
{
	const char *base = getenv("KVF_TEST_TMPDIR");
	struct kvf__journal_config cfg = { .durability = d,
					   .checkpoint_records = ckpt,
					   .fold_chunk = 300,
					   /* rotations under concurrency */
					   .wal_bytes = 64 << 10 };
	struct kvf__journal_replay_ops ops = { .record = seen_cb };
	struct worker w[THREADS + 1];
	pthread_t th[THREADS + 1];
	struct kvf__journal_stats st;
	struct seen *s = calloc(1, sizeof(*s));
	char dir[512], cmd[600];
	struct kvf__journal *j;
	uint64_t total = (uint64_t)THREADS * BATCHES * PER_BATCH;

	assert_non_null(s);
	snprintf(dir, sizeof(dir), "%s/jconc-XXXXXX", base ? base : "/tmp");
	assert_non_null(mkdtemp(dir));
	cfg.dir = dir;
	assert_int_equal(kvf__journal_open(&cfg, &j), KVF_OK);
	for (int i = 0; i <= THREADS; i++) {
		bool big = i == THREADS;

		w[i] = (struct worker){ j, i, big ? BIG_BATCHES : BATCHES,
					big ? PER_BIG : PER_BATCH, 0 };
		assert_int_equal(pthread_create(&th[i], NULL,
						!big || direct ? appender :
								 checkpointer,
						&w[i]),
				 0);
	}
	for (int i = 0; i <= THREADS; i++) {
		pthread_join(th[i], NULL);
		assert_false(w[i].failed);
	}
	if (direct)
		total += (uint64_t)BIG_BATCHES * PER_BIG;
	kvf__journal_get_stats(j, &st);
	assert_true(st.last_seq == total);
	kvf__journal_close(j);

	assert_int_equal(kvf__journal_open(&cfg, &j), KVF_OK);
	kvf__journal_get_stats(j, &st);
	s->image_seq = st.checkpoint_seq;
	s->next_seq = st.checkpoint_seq + 1;
	for (int t = 0; t <= THREADS; t++)
		s->last[t] = -1;
	assert_int_equal(kvf__journal_replay(j, &ops, s), KVF_OK);
	kvf__journal_close(j);
	assert_false(s->bad);
	assert_true(s->next_seq == st.last_seq + 1);
	for (int t = 0; t <= THREADS; t++)
		for (int i = 0; i < w[t].batches * w[t].per_batch; i++)
			assert_int_equal(s->count[t][i],
					 t < THREADS || direct ? 1 : 0);
	free(s);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
}

static void test_bounded(void **state)
{
	run(KVF_DURABILITY_BOUNDED, 1000, false);
}

static void test_strict(void **state)
{
	run(KVF_DURABILITY_STRICT, UINT64_MAX, false);
}

static void test_bounded_direct(void **state)
{
	run(KVF_DURABILITY_BOUNDED, 1000, true);
}

static void test_strict_direct(void **state)
{
	run(KVF_DURABILITY_STRICT, UINT64_MAX, true);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bounded),
		cmocka_unit_test(test_strict),
		cmocka_unit_test(test_bounded_direct),
		cmocka_unit_test(test_strict_direct),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
