/* SPDX-License-Identifier: MIT */
/*
 * tests/stress/test_journal_crash.c - SIGKILL a writer, recover, compare.
 *
 * The binary plays two roles. As parent it runs iterations: each makes a
 * directory, forks and immediately re-executes itself as the child (the
 * parent holds no LMDB environment while forking: every journal it opened
 * in earlier iterations is closed), lets the child run for a random time,
 * SIGKILLs it, then opens the journal and replays it.
 *
 * The child appends generated batches (tests/unit/test_journal_model.h)
 * with a small checkpoint threshold, so kills also land in fold chunks,
 * and after each kvf__journal_append() returns writes "<batch>\n" to its
 * pipe. The generator is deterministic, so the parent regenerates the same
 * batches: with k acknowledged batches, the recovered state must equal the
 * generator's state after k batches, or after k+1 (the batch in flight may
 * have committed without being acknowledged), sequences must be
 * contiguous, and the state must be consistent.
 *
 * KVF_STRESS_ITERATIONS (default 5) sets the number of iterations; odd
 * iterations use STRICT, even ones BOUNDED.
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "journal/journal.h"
#include "tests/unit/test_journal_model.h"
#include "tests/stress/check.h"


static struct kvf__journal_config config(const char *dir, int strict)
{
	struct kvf__journal_config cfg = {
		.dir = dir,
		.durability = strict ? KVF_DURABILITY_STRICT :
				       KVF_DURABILITY_BOUNDED,
		.sync_interval_ms = 5,
		.map_size = 1 << 20, /* small: crashes during growth too */
		.checkpoint_records = 2000,
		.fold_chunk = 500,
		.wal_bytes = 64 << 10, /* crashes around side log rotations */
	};
	return cfg;
}

static int child(const char *dir, int strict, uint64_t seed, int fd)
{
	struct kvf__journal_config cfg = config(dir, strict);
	static struct jgen g;
	struct kvf__journal *j;
	char line[32];

	jgen_init(&g, seed);
	CHECK(kvf__journal_open(&cfg, &j) == KVF_OK);
	for (unsigned long b = 1;; b++) {
		size_t n = jgen_batch(&g, 1 + jgen_rand(&g) % 200, 1);
		int len, rc = kvf__journal_append(j, g.recs, n);

		if (rc != KVF_OK)
			fprintf(stderr, "append: %s\n", kvf_status_name(rc));
		CHECK(rc == KVF_OK);
		len = snprintf(line, sizeof(line), "%lu\n", b);
		CHECK(write(fd, line, (size_t)len) == len);
	}
}

/* Read acknowledgements until @deadline_ms or EOF; return the last. */
static unsigned long read_acks(FILE *f)
{
	unsigned long b, last = 0;

	while (fscanf(f, "%lu", &b) == 1)
		last = b;
	return last;
}

static int iteration(const char *self, const char *base, int it,
		     uint64_t seed)
{
	struct kvf__journal_replay_ops ops = { .record = jm_replay_cb };
	static struct jgen g;
	struct kvf__journal_stats st;
	struct kvf__journal_config cfg;
	struct kvf__journal *j;
	char dir[512], seedarg[32], fdarg[16], modearg[4], cmd[600];
	unsigned long acked;
	struct jm m;
	int pfd[2], status, strict = it & 1, ok = 0, rc;
	pid_t pid;
	FILE *f;

	snprintf(dir, sizeof(dir), "%s/jcrash-XXXXXX", base);
	CHECK(mkdtemp(dir));
	CHECK(pipe(pfd) == 0);
	snprintf(seedarg, sizeof(seedarg), "%llu", (unsigned long long)seed);
	snprintf(fdarg, sizeof(fdarg), "%d", pfd[1]);
	snprintf(modearg, sizeof(modearg), "%d", strict);
	fflush(stdout);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		close(pfd[0]);
		execl(self, self, "--child", dir, modearg, seedarg, fdarg,
		      (char *)NULL);
		_exit(127);
	}
	close(pfd[1]);
	/* 20..220 ms of appends, then kill */
	usleep(20000 + (useconds_t)(seed % 200) * 1000);
	kill(pid, SIGKILL);
	CHECK(waitpid(pid, &status, 0) == pid);
	CHECK(WIFSIGNALED(status)); /* the child must not have failed */
	f = fdopen(pfd[0], "r");
	CHECK(f);
	acked = read_acks(f);
	fclose(f);

	cfg = config(dir, strict);
	rc = kvf__journal_open(&cfg, &j);
	if (rc != KVF_OK)
		fprintf(stderr, "reopen: %s\n", kvf_status_name(rc));
	CHECK(rc == KVF_OK);
	kvf__journal_get_stats(j, &st);
	jm_replay_init(&m, st.checkpoint_seq);
	CHECK(kvf__journal_replay(j, &ops, &m) == KVF_OK);
	kvf__journal_close(j);
	CHECK(!m.bad_seq && !m.bad_key);
	CHECK(m.next_seq == st.last_seq + 1);
	CHECK(jm_consistent(&m));

	jgen_init(&g, seed);
	for (unsigned long b = 1; b <= acked + 1 && !ok; b++) {
		jgen_batch(&g, 1 + jgen_rand(&g) % 200, 1);
		if (b >= acked)
			ok = !jm_diff(&m, &g.m);
	}
	if (acked == 0 && !ok) {
		struct jm empty = { 0 };

		ok = !jm_diff(&m, &empty);
	}
	printf("iteration %d (%s): %lu batches acknowledged, last seq %llu, "
	       "%llu checkpoints: %s\n",
	       it, strict ? "strict" : "bounded", acked,
	       (unsigned long long)st.last_seq,
	       (unsigned long long)st.checkpoints, ok ? "ok" : "MISMATCH");
	jm_free(&m);
	jm_free(&g.m);
	if (ok) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		CHECK(system(cmd) == 0);
	}
	return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
	const char *base = getenv("KVF_TEST_TMPDIR");
	const char *iters = getenv("KVF_STRESS_ITERATIONS");
	int n = iters ? atoi(iters) : 5, failed = 0;
	uint64_t seed;

	if (argc == 6 && !strcmp(argv[1], "--child"))
		return child(argv[2], atoi(argv[3]),
			     strtoull(argv[4], NULL, 10), atoi(argv[5]));
	seed = getenv("KVF_STRESS_SEED") ?
		       strtoull(getenv("KVF_STRESS_SEED"), NULL, 10) :
		       (uint64_t)time(NULL) ^ (uint64_t)getpid() << 16;
	printf("seed %llu\n", (unsigned long long)seed);
	for (int it = 0; it < n; it++)
		failed |= iteration("/proc/self/exe", base ? base : "/tmp", it,
				    seed + (uint64_t)it * 7919);
	return failed;
}
