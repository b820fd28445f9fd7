/* SPDX-License-Identifier: MIT */
/*
 * journal/bench.c - append and replay throughput of the journal.
 *
 *   kvforge-journal-bench DIR [strict|bounded] [threads] [seconds] [replay_n]
 *
 * Appends batches of 128 OBJECT_PUT records (70-byte keys, one replica)
 * from @threads threads for @seconds, prints records/s; then, if replay_n
 * is given, writes replay_n objects, checkpoints, reopens and times the
 * replay (image scan). Prints numbers, never passes or fails.
 */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "journal/journal.h"

#define BATCH 128
#define KEY_LEN 70

struct arg {
	struct kvf__journal *j;
	int id;
	double secs;
	uint64_t records;
	uint64_t encode_ns;
};

static void fill(struct kvf__jrec *r, char (*keys)[KEY_LEN], int id,
		 uint64_t base)
{
	for (int i = 0; i < BATCH; i++) {
		int n = snprintf(keys[i], KEY_LEN, "%d-%016llx-", id,
				 (unsigned long long)(base + (uint64_t)i));

		memset(keys[i] + n, 'h', KEY_LEN - (size_t)n);
		memset(&r[i], 0, sizeof(r[i]));
		r[i].type = KVF__JREC_OBJECT_PUT;
		r[i].obj.key = keys[i];
		r[i].obj.key_len = KEY_LEN;
		r[i].obj.size = 3271557;
		r[i].obj.nr_replicas = 1;
		r[i].obj.replicas[0].segment_id = 1 + (base + i) % 8;
		r[i].obj.replicas[0].offset = (base + i) * 3271616ull;
	}
}

static void *run(void *p)
{
	struct arg *a = p;
	struct kvf__jrec r[BATCH];
	static __thread char keys[BATCH][KEY_LEN];
	uint64_t end = kvf__now_ns() + (uint64_t)(a->secs * 1e9);

	while (kvf__now_ns() < end) {
		uint64_t t = kvf__now_ns();

		fill(r, keys, a->id, a->records);
		a->encode_ns += kvf__now_ns() - t; /* key generation, not journal */
		if (kvf__journal_append(a->j, r, BATCH)) {
			fprintf(stderr, "append failed\n");
			exit(1);
		}
		a->records += BATCH;
	}
	return NULL;
}

static int count_cb(void *arg, const struct kvf__jrec *r, uint64_t seq)
{
	(*(uint64_t *)arg)++;
	return 0;
}

int main(int argc, char **argv)
{
	struct kvf__journal_config cfg = { 0 };
	int threads = argc > 3 ? atoi(argv[3]) : 1;
	double secs = argc > 4 ? atof(argv[4]) : 3;
	uint64_t replay_n = argc > 5 ? strtoull(argv[5], NULL, 10) : 0;
	struct kvf__journal_replay_ops ops = { .record = count_cb };
	struct arg a[16];
	pthread_t th[16];
	struct kvf__journal *j;
	uint64_t total = 0, t0, n = 0, fill_ns = 0;

	if (argc < 2 || threads < 1 || threads > 16) {
		fprintf(stderr, "usage: %s DIR [strict|bounded] [threads] "
			"[seconds] [replay_n]\n", argv[0]);
		return 2;
	}
	cfg.dir = argv[1];
	cfg.durability = argc > 2 && !strcmp(argv[2], "strict") ?
				 KVF_DURABILITY_STRICT :
				 KVF_DURABILITY_BOUNDED;
	cfg.checkpoint_records = UINT64_MAX; /* measure appends alone */
	if (kvf__journal_open(&cfg, &j))
		return 1;
	t0 = kvf__now_ns();
	for (int i = 0; i < threads; i++) {
		a[i] = (struct arg){ j, i, secs, 0, 0 };
		pthread_create(&th[i], NULL, run, &a[i]);
	}
	for (int i = 0; i < threads; i++) {
		pthread_join(th[i], NULL);
		total += a[i].records;
		fill_ns += a[i].encode_ns;
	}
	t0 = kvf__now_ns() - t0;
	printf("%s, %d thread(s), batch %d: %.0f records/s; per batch and "
	       "thread: %.2f us in append, %.2f us making keys\n",
	       argv[2] ? argv[2] : "bounded", threads, BATCH,
	       total / (t0 / 1e9),
	       (t0 * threads - fill_ns) / 1e3 / (total / (double)BATCH),
	       fill_ns / 1e3 / (total / (double)BATCH));
	if (replay_n) {
		struct arg w = { j, 99, 0, 0, 0 };
		struct kvf__jrec r[BATCH];
		static char keys[BATCH][KEY_LEN];

		for (; w.records < replay_n; w.records += BATCH) {
			fill(r, keys, 99, w.records);
			kvf__journal_append(j, r, BATCH);
		}
		t0 = kvf__now_ns();
		kvf__journal_checkpoint(j);
		printf("checkpoint of %llu records: %.3f s\n",
		       (unsigned long long)(total + w.records),
		       (kvf__now_ns() - t0) / 1e9);
	}
	kvf__journal_close(j);
	t0 = kvf__now_ns();
	if (kvf__journal_open(&cfg, &j))
		return 1;
	printf("open: %.3f s, estimate %llu\n", (kvf__now_ns() - t0) / 1e9,
	       (unsigned long long)kvf__journal_object_estimate(j));
	t0 = kvf__now_ns();
	kvf__journal_replay(j, &ops, &n);
	t0 = kvf__now_ns() - t0;
	printf("replay: %llu records in %.3f s: %.2f M records/s\n",
	       (unsigned long long)n, t0 / 1e9, n / (t0 / 1e9) / 1e6);
	kvf__journal_close(j);
	return 0;
}
