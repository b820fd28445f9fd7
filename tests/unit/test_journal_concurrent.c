/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_journal_concurrent.c - concurrent appenders (runs under
 * ThreadSanitizer too). Each thread appends batches of puts with keys
 * unique to it while another thread forces checkpoints; after reopening,
 * every acknowledged record must be present exactly once, sequences must
 * be contiguous, and each thread's records must appear in its order.
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

struct worker {
	struct kvf__journal *j;
	int id;
	int failed;
};

static void make_key(char *buf, int thread, int idx)
{
	snprintf(buf, 32, "t%d-%06d", thread, idx);
}

static void *appender(void *arg)
{
	struct worker *w = arg;
	struct kvf__jrec recs[PER_BATCH];
	char keys[PER_BATCH][32];

	for (int b = 0; b < BATCHES; b++) {
		for (int i = 0; i < PER_BATCH; i++) {
			memset(&recs[i], 0, sizeof(recs[i]));
			make_key(keys[i], w->id, b * PER_BATCH + i);
			recs[i].type = KVF__JREC_OBJECT_PUT;
			recs[i].obj.key = keys[i];
			recs[i].obj.key_len = (uint32_t)strlen(keys[i]);
			recs[i].obj.size = 4096;
			recs[i].obj.nr_replicas = 1;
			recs[i].obj.replicas[0].segment_id = 1;
			recs[i].obj.replicas[0].offset =
				(uint64_t)(b * PER_BATCH + i) * 4096;
		}
		if (kvf__journal_append(w->j, recs, PER_BATCH) != KVF_OK)
			w->failed = 1;
	}
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
	uint8_t count[THREADS][BATCHES * PER_BATCH];
	int last[THREADS]; /* last index seen in the log, per thread */
	uint64_t image_seq, next_seq;
	int bad;
};

static int seen_cb(void *arg, const struct kvf__jrec *r, uint64_t seq)
{
	struct seen *s = arg;
	int t, idx;

	if (r->type != KVF__JREC_OBJECT_PUT ||
	    sscanf(r->obj.key, "t%d-%d", &t, &idx) != 2 || t < 0 ||
	    t >= THREADS || idx < 0 || idx >= BATCHES * PER_BATCH) {
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

static void run(enum kvf_durability d, uint64_t ckpt)
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

	assert_non_null(s);
	snprintf(dir, sizeof(dir), "%s/jconc-XXXXXX", base ? base : "/tmp");
	assert_non_null(mkdtemp(dir));
	cfg.dir = dir;
	assert_int_equal(kvf__journal_open(&cfg, &j), KVF_OK);
	for (int i = 0; i <= THREADS; i++) {
		w[i] = (struct worker){ j, i, 0 };
		assert_int_equal(pthread_create(&th[i], NULL,
						i < THREADS ? appender :
							      checkpointer,
						&w[i]),
				 0);
	}
	for (int i = 0; i <= THREADS; i++) {
		pthread_join(th[i], NULL);
		assert_false(w[i].failed);
	}
	kvf__journal_get_stats(j, &st);
	assert_true(st.last_seq == (uint64_t)THREADS * BATCHES * PER_BATCH);
	kvf__journal_close(j);

	assert_int_equal(kvf__journal_open(&cfg, &j), KVF_OK);
	kvf__journal_get_stats(j, &st);
	s->image_seq = st.checkpoint_seq;
	s->next_seq = st.checkpoint_seq + 1;
	for (int t = 0; t < THREADS; t++)
		s->last[t] = -1;
	assert_int_equal(kvf__journal_replay(j, &ops, s), KVF_OK);
	kvf__journal_close(j);
	assert_false(s->bad);
	assert_true(s->next_seq == st.last_seq + 1);
	for (int t = 0; t < THREADS; t++)
		for (int i = 0; i < BATCHES * PER_BATCH; i++)
			assert_int_equal(s->count[t][i], 1);
	free(s);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
}

static void test_bounded(void **state)
{
	run(KVF_DURABILITY_BOUNDED, 1000);
}

static void test_strict(void **state)
{
	run(KVF_DURABILITY_STRICT, UINT64_MAX);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bounded),
		cmocka_unit_test(test_strict),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
