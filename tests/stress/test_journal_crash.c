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
 * with a small checkpoint threshold, so kills also land in checkpoints
 * (image rewrites in several slices and steps, or, in every third
 * iteration by seed, in-place fold chunks), and after each kvf__journal_append() returns writes "<batch>\n" to its
 * pipe. The generator is deterministic, so the parent regenerates the same
 * batches: with k acknowledged batches, the recovered state must equal the
 * generator's state after k batches, or after k+1 (the batch in flight may
 * have committed without being acknowledged), sequences must be
 * contiguous, and the state must be consistent.
 *
 * Every third iteration is a mixed one: the child runs MX_THREADS
 * appending threads (tests/unit/test_journal_model.h: mgen), each with its
 * own keys and batch sizes straddling the side log's direct threshold, and
 * writes "<thread> <batch>\n" after each acknowledged append. Each
 * thread's recovered keys must equal its generator's state after its
 * last acknowledged batch or the one after it.
 *
 * Every fourth iteration also damages a file before the reopen when it
 * can: a byte of a pending side log frame that has a successor (damage in
 * the middle; the successor may be torn, the kill having come while it
 * was copied); open must refuse it, naming a frame, and once the byte is
 * restored the iteration goes on as usual (damaged()).
 *
 * The parent reopens with a side log size other than the child's in two
 * iterations of three (reopen()).
 *
 * KVF_STRESS_ITERATIONS (default 6) sets the number of iterations; odd
 * iterations use STRICT, even ones BOUNDED.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "journal/journal.h"
#include "journal/record.h"
#include "journal/sidelog.h"
#include "journal/store.h"
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
		/* image rewrites in several slices (rewrite.c) */
		.rewrite_budget = 32 << 10,
		.wal_bytes = 64 << 10, /* crashes around side log rotations */
	};
	return cfg;
}

/* How the child's checkpoints fold: in place in every third iteration. */
static enum kvf__rewrite_mode checkpoint_mode(uint64_t seed)
{
	return seed / 3 % 3 == 2 ? KVF__REWRITE_NEVER : KVF__REWRITE_AUTO;
}

static int child(const char *dir, int strict, uint64_t seed, int fd)
{
	struct kvf__journal_config cfg = config(dir, strict);
	static struct jgen g;
	struct kvf__journal *j;
	char line[32];

	jgen_init(&g, seed);
	cfg.image_rewrite = checkpoint_mode(seed);
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

#define MX_THREADS 3

struct mixed_worker {
	struct kvf__journal *j;
	struct mgen g;
	size_t direct_recs;
	int fd;
};

static void *mixed_appender(void *arg)
{
	struct mixed_worker *w = arg;
	char line[48];

	for (unsigned long b = 1;; b++) {
		size_t n = mgen_batch(&w->g, mgen_size(&w->g, w->direct_recs));
		int len, rc = kvf__journal_append(w->j, w->g.recs, n);

		if (rc != KVF_OK)
			fprintf(stderr, "append: %s\n", kvf_status_name(rc));
		CHECK(rc == KVF_OK);
		len = snprintf(line, sizeof(line), "%d %lu\n", w->g.thread, b);
		CHECK(write(w->fd, line, (size_t)len) == len);
	}
	return NULL;
}

/* The mixed child: MX_THREADS appenders until killed. */
static int mixed_child(const char *dir, int strict, uint64_t seed, int fd)
{
	struct kvf__journal_config cfg = config(dir, strict);
	static struct mixed_worker w[MX_THREADS];
	size_t direct = mx_direct_records(cfg.wal_bytes);
	pthread_t th[MX_THREADS];
	struct kvf__journal *j;

	cfg.image_rewrite = checkpoint_mode(seed);
	CHECK(kvf__journal_open(&cfg, &j) == KVF_OK);
	for (int i = 0; i < MX_THREADS; i++) {
		w[i].j = j;
		w[i].fd = fd;
		w[i].direct_recs = direct;
		mgen_init(&w[i].g, seed, i, 2 * direct + 1);
		CHECK(pthread_create(&th[i], NULL, mixed_appender, &w[i]) == 0);
	}
	pthread_join(th[0], NULL); /* never returns: killed */
	return 1;
}

/*
 * After a mixed child: each thread's keys must be its generator's state
 * after its last acknowledged batch or the next one (in flight).
 */
static bool mixed_check(const struct mx_replay *m, uint64_t seed,
			const unsigned long *acked, size_t direct)
{
	bool ok = true;

	for (int t = 0; t < MX_THREADS && ok; t++) {
		struct mgen g;
		bool match = false;

		mgen_init(&g, seed, t, 2 * direct + 1);
		for (unsigned long b = 0; b <= acked[t] + 1 && !match; b++) {
			if (b)
				mgen_batch(&g, mgen_size(&g, direct));
			if (b >= acked[t])
				match = !mx_diff(m, &g);
		}
		if (!match)
			fprintf(stderr, "thread %d: %lu batches acknowledged, "
				"recovered keys differ\n", t, acked[t]);
		ok = match;
		mgen_free(&g);
	}
	return ok;
}

/* Read "<thread> <batch>" acknowledgements to EOF: the last per thread. */
static void read_mixed_acks(FILE *f, unsigned long *acked)
{
	unsigned long b;
	int t;

	while (fscanf(f, "%d %lu", &t, &b) == 2)
		if (t >= 0 && t < MX_THREADS && b > acked[t])
			acked[t] = b;
}

/* Read acknowledgements until @deadline_ms or EOF; return the last. */
static unsigned long read_acks(FILE *f)
{
	unsigned long b, last = 0;

	while (fscanf(f, "%lu", &b) == 1)
		last = b;
	return last;
}

/* Fork and exec the child in @role; SIGKILL it after 20..220 ms. */
static FILE *run_child(const char *self, const char *role, const char *dir,
		       int strict, uint64_t seed)
{
	char seedarg[32], fdarg[16], modearg[4];
	int pfd[2], status;
	pid_t pid;
	FILE *f;

	CHECK(pipe(pfd) == 0);
	snprintf(seedarg, sizeof(seedarg), "%llu", (unsigned long long)seed);
	snprintf(fdarg, sizeof(fdarg), "%d", pfd[1]);
	snprintf(modearg, sizeof(modearg), "%d", strict);
	fflush(stdout);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		close(pfd[0]);
		execl(self, self, role, dir, modearg, seedarg, fdarg,
		      (char *)NULL);
		_exit(127);
	}
	close(pfd[1]);
	usleep(20000 + (useconds_t)(seed % 200) * 1000);
	kill(pid, SIGKILL);
	CHECK(waitpid(pid, &status, 0) == pid);
	CHECK(WIFSIGNALED(status)); /* the child must not have failed */
	f = fdopen(pfd[0], "r");
	CHECK(f);
	return f;
}

/*
 * Reopen after the kill, with another side log size than the child's
 * most of the time (64 KiB, 128 KiB or 1 MiB by @seed): the geometry
 * must come from the files, whatever the configuration says.
 */
static struct kvf__journal *reopen(const char *dir, int strict, uint64_t seed)
{
	struct kvf__journal_config cfg = config(dir, strict);
	struct kvf__journal *j;
	int rc;

	cfg.wal_bytes = (64u << 10) << (seed / 7 % 3 == 2 ? 4 : seed / 7 % 3);
	rc = kvf__journal_open(&cfg, &j);
	if (rc != KVF_OK)
		fprintf(stderr, "reopen (side log %llu bytes): %s: %s\n",
			(unsigned long long)cfg.wal_bytes, kvf_status_name(rc),
			kvf__journal_error());
	CHECK(rc == KVF_OK);
	return j;
}

/*
 * LMDB's last sequence in @dir into *@last, read-only (no engine is
 * open); false if the child died before the journal was initialised.
 */
static bool lmdb_last_seq(const char *dir, uint64_t *last)
{
	struct kvf__store_state st;
	struct kvf__store_dbs dbs;
	MDB_env *env;
	MDB_txn *txn;
	bool ok;

	if (kvf__store_env_open(dir, MDB_RDONLY, 0, &env))
		return false;
	CHECK(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn) == 0);
	ok = !kvf__store_dbs_open(txn, &dbs, 0) &&
	     !kvf__store_state_read(txn, &dbs, &st);
	mdb_txn_abort(txn);
	mdb_env_close(env);
	*last = st.last_seq;
	return ok;
}

/*
 * The offset of a frame of wal-@i.log past LMDB's @last sequence that is
 * followed by the next one in the same file, or 0.
 */
static uint64_t middle_frame(int fd, uint64_t last)
{
	uint8_t h[KVF__SIDELOG_HDR];
	uint64_t off = KVF__SIDELOG_DATA, prev = 0, next = 0, first;
	uint32_t magic, len, nr;

	while (pread(fd, h, sizeof(h), (off_t)off) == (ssize_t)sizeof(h)) {
		memcpy(&magic, h, 4);
		memcpy(&len, h + 4, 4);
		memcpy(&first, h + 8, 8);
		memcpy(&nr, h + 16, 4);
		if (magic != 0x5746564bu || (next && first != next))
			break;
		if (prev && len)
			return prev; /* @prev has a successor: this frame */
		prev = first > last && len ? off : 0;
		next = first + nr;
		off += KVF__SIDELOG_HDR + ((len + 7) & ~7u);
	}
	return 0;
}

static void flip(int fd, uint64_t off)
{
	uint8_t b;

	CHECK(pread(fd, &b, 1, (off_t)off) == 1);
	b ^= 0x5a;
	CHECK(pwrite(fd, &b, 1, (off_t)off) == 1);
}

/*
 * Damage a pending side log frame in the middle, if there is one: the
 * reopen must refuse (KVF_ERR_JOURNAL_CORRUPT, naming a frame) and change
 * nothing; the byte is then restored. Returns whether it damaged one.
 */
static bool damaged(const char *dir, int strict, uint64_t seed)
{
	struct kvf__journal_config cfg = config(dir, strict);
	uint64_t last, off = 0;
	struct kvf__journal *j;
	char path[600];
	int fd = -1, rc;

	if (!lmdb_last_seq(dir, &last))
		return false;
	for (int i = 0; i < 2 && !off; i++) {
		if (fd >= 0)
			close(fd);
		snprintf(path, sizeof(path), "%s/wal-%d.log", dir, i);
		fd = open(path, O_RDWR);
		CHECK(fd >= 0 || errno == ENOENT); /* killed before it */
		off = fd >= 0 ? middle_frame(fd, last) : 0;
	}
	if (!off) {
		if (fd >= 0)
			close(fd);
		return false;
	}
	off += KVF__SIDELOG_HDR + 6 + seed % 8; /* in the first record */
	flip(fd, off);
	rc = kvf__journal_open(&cfg, &j);
	if (rc == KVF_OK)
		kvf__journal_close(j);
	else
		printf("  damaged %s at %llu: %s\n", path,
		       (unsigned long long)off, kvf__journal_error());
	CHECK(rc == KVF_ERR_JOURNAL_CORRUPT);
	/* The frame after the damage, or the damaged one (its successor torn). */
	CHECK(strstr(kvf__journal_error(), "follows a damaged") ||
	      strstr(kvf__journal_error(), ") is damaged: "));
	flip(fd, off);
	close(fd);
	return true;
}

/* A mixed iteration (see the top of the file); true if it holds. */
static bool mixed_iteration(const char *self, const char *dir, int strict,
			    uint64_t seed, struct kvf__journal_stats *st,
			    unsigned long *total)
{
	struct kvf__journal_replay_ops ops = { .record = mx_replay_cb };
	unsigned long acked[MX_THREADS] = { 0 };
	struct mx_replay m;
	struct kvf__journal *j;
	FILE *f = run_child(self, "--mixed", dir, strict, seed);
	bool ok;

	read_mixed_acks(f, acked);
	fclose(f);
	if (seed % 4 == 1)
		damaged(dir, strict, seed);
	j = reopen(dir, strict, seed);
	kvf__journal_get_stats(j, st);
	mx_replay_init(&m, st->checkpoint_seq);
	CHECK(kvf__journal_replay(j, &ops, &m) == KVF_OK);
	kvf__journal_close(j);
	if (m.bad)
		fprintf(stderr, "replay: bad record or sequence (line %d)\n",
			m.bad);
	ok = !m.bad && m.next_seq == st->last_seq + 1 &&
	     mixed_check(&m, seed, acked,
			 mx_direct_records(config(dir, strict).wal_bytes));
	mx_replay_free(&m);
	*total = 0;
	for (int t = 0; t < MX_THREADS; t++)
		*total += acked[t];
	return ok;
}

/* A single-appender iteration (see the top of the file). */
static bool model_iteration(const char *self, const char *dir, int strict,
			    uint64_t seed, struct kvf__journal_stats *st,
			    unsigned long *acked)
{
	struct kvf__journal_replay_ops ops = { .record = jm_replay_cb };
	static struct jgen g;
	struct kvf__journal *j;
	struct jm m;
	bool ok = false;
	FILE *f = run_child(self, "--child", dir, strict, seed);

	*acked = read_acks(f);
	fclose(f);
	if (seed % 4 == 1)
		damaged(dir, strict, seed);
	j = reopen(dir, strict, seed);
	kvf__journal_get_stats(j, st);
	jm_replay_init(&m, st->checkpoint_seq);
	CHECK(kvf__journal_replay(j, &ops, &m) == KVF_OK);
	kvf__journal_close(j);
	CHECK(!m.bad_seq && !m.bad_key);
	CHECK(m.next_seq == st->last_seq + 1);
	CHECK(jm_consistent(&m));

	jgen_init(&g, seed);
	for (unsigned long b = 1; b <= *acked + 1 && !ok; b++) {
		jgen_batch(&g, 1 + jgen_rand(&g) % 200, 1);
		if (b >= *acked)
			ok = !jm_diff(&m, &g.m);
	}
	if (*acked == 0 && !ok) {
		struct jm empty = { 0 };

		ok = !jm_diff(&m, &empty);
	}
	jm_free(&m);
	jm_free(&g.m);
	return ok;
}

static int iteration(const char *self, const char *base, int it,
		     uint64_t seed)
{
	struct kvf__journal_stats st;
	char dir[512], cmd[600];
	unsigned long acked;
	int strict = it & 1, mixed = it % 3 == 2;
	bool ok;

	snprintf(dir, sizeof(dir), "%s/jcrash-XXXXXX", base);
	CHECK(mkdtemp(dir));
	if (mixed)
		ok = mixed_iteration(self, dir, strict, seed, &st, &acked);
	else
		ok = model_iteration(self, dir, strict, seed, &st, &acked);
	printf("iteration %d (%s%s): %lu batches acknowledged, last seq %llu, "
	       "%llu checkpoints: %s\n",
	       it, strict ? "strict" : "bounded", mixed ? ", mixed" : "",
	       acked, (unsigned long long)st.last_seq,
	       (unsigned long long)st.checkpoints, ok ? "ok" : "MISMATCH");
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
	int n = iters ? atoi(iters) : 6, failed = 0;
	uint64_t seed;

	if (argc == 6 && !strcmp(argv[1], "--child"))
		return child(argv[2], atoi(argv[3]),
			     strtoull(argv[4], NULL, 10), atoi(argv[5]));
	if (argc == 6 && !strcmp(argv[1], "--mixed"))
		return mixed_child(argv[2], atoi(argv[3]),
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
