/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_journal_rewrite.c - checkpoints that rewrite the image
 * (journal/rewrite.c): the rewritten image equals an in-place fold's,
 * byte for byte, through several switches between the two object
 * databases and in many slices and steps; a rewrite killed at any point
 * leaves the journal as before it, and the next one completes; a version
 * 3 directory, which has no second object database, is upgraded.
 */
#include "config.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <lmdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "journal/journal.h"
#include "journal/record.h"
#include "journal/store.h"
#include "test_journal_model.h"

struct rctx {
	char dir[512];
	char a[600], b[600];
	struct jgen ga, gb; /* same seed: the same batches for a and b */
};

static int setup(void **state)
{
	const char *base = getenv("KVF_TEST_TMPDIR");
	struct rctx *t = calloc(1, sizeof(*t));

	if (!t)
		return -1;
	snprintf(t->dir, sizeof(t->dir), "%s/jrewrite-XXXXXX",
		 base ? base : "/tmp");
	if (!mkdtemp(t->dir))
		return -1;
	snprintf(t->a, sizeof(t->a), "%s/a", t->dir);
	snprintf(t->b, sizeof(t->b), "%s/b", t->dir);
	jgen_init(&t->ga, 99);
	jgen_init(&t->gb, 99);
	*state = t;
	return 0;
}

static int teardown(void **state)
{
	struct rctx *t = *state;
	char cmd[600];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", t->dir);
	if (system(cmd))
		return -1;
	jm_free(&t->ga.m);
	jm_free(&t->gb.m);
	free(t);
	return 0;
}

static struct kvf__journal *jopen(const char *dir, enum kvf__rewrite_mode mode,
				  uint32_t chunk)
{
	struct kvf__journal_config cfg = {
		.dir = dir,
		.durability = KVF_DURABILITY_BOUNDED,
		.sync_interval_ms = 5,
		.checkpoint_records = UINT64_MAX, /* only when asked */
		.fold_chunk = chunk,
		.wal_bytes = 64 << 10,
		.image_rewrite = mode,
		.rewrite_budget = 8 << 10, /* many slices */
	};
	struct kvf__journal *j = NULL;

	assert_int_equal(kvf__journal_open(&cfg, &j), KVF_OK);
	return j;
}

static void append(struct kvf__journal *j, struct jgen *g, int nb)
{
	for (int b = 0; b < nb; b++) {
		size_t n = jgen_batch(g, 1 + jgen_rand(g) % 200, 1);

		assert_int_equal(kvf__journal_append(j, g->recs, n), KVF_OK);
	}
}

/* Replay @dir (opened in place-folding mode) and compare with @want. */
static void check_replay(const char *dir, const struct jm *want)
{
	struct kvf__journal_replay_ops ops = { .record = jm_replay_cb };
	struct kvf__journal *j = jopen(dir, KVF__REWRITE_NEVER, 97);
	struct kvf__journal_stats st;
	struct jm m;

	kvf__journal_get_stats(j, &st);
	jm_replay_init(&m, st.checkpoint_seq);
	assert_int_equal(kvf__journal_replay(j, &ops, &m), KVF_OK);
	assert_false(m.bad_seq);
	assert_int_equal(jm_diff(&m, want), 0);
	assert_true(jm_consistent(&m));
	jm_free(&m);
	kvf__journal_close(j);
}

/* An environment's image, read-only: databases and which is in force. */
struct image {
	MDB_env *env;
	MDB_txn *txn;
	struct kvf__store_dbs dbs;
	MDB_dbi objs, spare;
	uint32_t which;
};

static void image_open(const char *dir, struct image *im)
{
	MDB_val key = { strlen(KVF__META_IMAGE), (void *)KVF__META_IMAGE };
	MDB_val val;

	assert_int_equal(kvf__store_env_open(dir, MDB_RDONLY, 0, &im->env), 0);
	assert_int_equal(mdb_txn_begin(im->env, NULL, MDB_RDONLY, &im->txn),
			 0);
	assert_int_equal(kvf__store_dbs_open(im->txn, &im->dbs, 0), 0);
	assert_int_equal(kvf__store_image(im->txn, &im->dbs, &im->objs,
					  &im->spare),
			 0);
	im->which = 0;
	if (!mdb_get(im->txn, im->dbs.meta, &key, &val)) {
		assert_int_equal(val.mv_size, sizeof(im->which));
		memcpy(&im->which, val.mv_data, sizeof(im->which));
	}
}

static void image_close(struct image *im)
{
	mdb_txn_abort(im->txn);
	mdb_env_close(im->env);
}

static uint64_t entries(MDB_txn *txn, MDB_dbi dbi)
{
	MDB_stat ms;

	assert_int_equal(mdb_stat(txn, dbi, &ms), 0);
	return ms.ms_entries;
}

/* Every entry of @x's database @dx equals @y's of @dy, in order. */
static void assert_same_db(MDB_txn *x, MDB_dbi dx, MDB_txn *y, MDB_dbi dy)
{
	MDB_cursor *cx, *cy;
	MDB_val kx, vx, ky, vy;
	int rx, ry;
	uint64_t n = 0;

	assert_int_equal(mdb_cursor_open(x, dx, &cx), 0);
	assert_int_equal(mdb_cursor_open(y, dy, &cy), 0);
	for (;;) {
		rx = mdb_cursor_get(cx, &kx, &vx, MDB_NEXT);
		ry = mdb_cursor_get(cy, &ky, &vy, MDB_NEXT);
		assert_int_equal(rx, ry);
		if (rx)
			break;
		assert_int_equal(kx.mv_size, ky.mv_size);
		assert_memory_equal(kx.mv_data, ky.mv_data, kx.mv_size);
		assert_int_equal(vx.mv_size, vy.mv_size);
		assert_memory_equal(vx.mv_data, vy.mv_data, vx.mv_size);
		n++;
	}
	assert_int_equal(rx, MDB_NOTFOUND);
	mdb_cursor_close(cx);
	mdb_cursor_close(cy);
}

/*
 * The same batches into two journals, one folding in place, one
 * rewriting in slices of ~8 KiB of records and steps of 13 entries;
 * after each checkpoint the images are equal entry for entry (segments,
 * clients and objects), the rewritten one has switched database and left
 * the other empty, and both replay to the generator's state.
 */
static void test_rewrite_matches_fold(void **state)
{
	struct rctx *t = *state;

	for (uint32_t round = 1; round <= 4; round++) {
		struct kvf__journal *a = jopen(t->a, KVF__REWRITE_NEVER, 97);
		struct kvf__journal *b = jopen(t->b, KVF__REWRITE_ALWAYS, 13);
		struct kvf__journal_stats sa, sb;
		struct image ia, ib;

		append(a, &t->ga, 12);
		append(b, &t->gb, 12);
		assert_int_equal(kvf__journal_checkpoint(a), KVF_OK);
		assert_int_equal(kvf__journal_checkpoint(b), KVF_OK);
		kvf__journal_get_stats(a, &sa);
		kvf__journal_get_stats(b, &sb);
		assert_true(sb.checkpoints == round);
		assert_true(sb.log_records == 0);
		assert_true(sa.objects == sb.objects);
		assert_true(sb.objects == t->gb.m.live);
		assert_int_equal(sb.format_version,
				 KVF__JOURNAL_FORMAT_VERSION);
		kvf__journal_close(a);
		kvf__journal_close(b);

		image_open(t->a, &ia);
		image_open(t->b, &ib);
		assert_int_equal(ia.which, 0);
		assert_int_equal(ib.which, round % 2);
		assert_true(entries(ib.txn, ib.objs) == t->gb.m.live);
		assert_true(entries(ib.txn, ib.spare) == 0);
		assert_same_db(ia.txn, ia.objs, ib.txn, ib.objs);
		assert_same_db(ia.txn, ia.dbs.segs, ib.txn, ib.dbs.segs);
		assert_same_db(ia.txn, ia.dbs.clients, ib.txn, ib.dbs.clients);
		image_close(&ia);
		image_close(&ib);

		check_replay(t->a, &t->ga.m);
		check_replay(t->b, &t->gb.m);
	}
}

/* A child that rewrites @dir's image (tiny steps) until killed; it
 * writes a byte to @fd once the journal is open. */
static void rewrite_child(const char *dir, int fd)
{
	struct kvf__journal_config cfg = {
		.dir = dir,
		.durability = KVF_DURABILITY_BOUNDED,
		.sync_interval_ms = 5,
		.checkpoint_records = UINT64_MAX,
		.fold_chunk = 3,
		.image_rewrite = KVF__REWRITE_ALWAYS,
		.rewrite_budget = 4 << 10,
	};
	struct kvf__journal *j = NULL;

	if (kvf__journal_open(&cfg, &j) != KVF_OK || write(fd, "o", 1) != 1)
		_exit(2);
	_exit(kvf__journal_checkpoint(j) == KVF_OK ? 0 : 3);
}

/*
 * SIGKILL a rewrite 0.1, 0.2, 0.4, ... 51.2 ms after its journal opened:
 * each time the journal replays to the same state (the acknowledged
 * batches, all in the log or the old image), and a rewrite after the
 * kills completes.
 */
static void test_rewrite_killed(void **state)
{
	struct rctx *t = *state;
	struct kvf__journal *j = jopen(t->b, KVF__REWRITE_ALWAYS, 97);
	struct image im;
	bool spare_seen = false;

	/* an image to rewrite, then a log to fold into it */
	append(j, &t->gb, 60);
	assert_int_equal(kvf__journal_checkpoint(j), KVF_OK);
	append(j, &t->gb, 60);
	kvf__journal_close(j);
	for (unsigned us = 100; us <= 51200; us *= 2) {
		int status, fds[2];
		pid_t pid;
		char c;

		assert_int_equal(pipe(fds), 0);
		pid = fork();
		assert_true(pid >= 0);
		if (pid == 0)
			rewrite_child(t->b, fds[1]);
		close(fds[1]);
		if (read(fds[0], &c, 1) == 1)
			usleep(us);
		close(fds[0]);
		kill(pid, SIGKILL);
		assert_int_equal(waitpid(pid, &status, 0), pid);
		image_open(t->b, &im);
		spare_seen |= entries(im.txn, im.spare) > 0;
		image_close(&im);
		check_replay(t->b, &t->gb.m);
	}
	j = jopen(t->b, KVF__REWRITE_ALWAYS, 97);
	assert_int_equal(kvf__journal_checkpoint(j), KVF_OK);
	kvf__journal_close(j);
	image_open(t->b, &im);
	assert_true(entries(im.txn, im.objs) == t->gb.m.live);
	assert_true(entries(im.txn, im.spare) == 0);
	image_close(&im);
	check_replay(t->b, &t->gb.m);
	if (!spare_seen)
		print_message("no kill landed while the spare was written\n");
}

/*
 * A version 3 directory has no "objs.1": it opens, its first rewrite
 * creates and switches to it, and the directory is version 4 after.
 */
static void test_rewrite_upgrades_v3(void **state)
{
	struct rctx *t = *state;
	struct kvf__journal *j = jopen(t->b, KVF__REWRITE_NEVER, 97);
	struct kvf__journal_stats st;
	struct kvf__store_dbs dbs;
	uint32_t v3 = 3;
	MDB_val key = { strlen(KVF__META_VERSION), (void *)KVF__META_VERSION };
	MDB_val val = { sizeof(v3), &v3 };
	MDB_env *env;
	MDB_txn *txn;
	struct image im;

	append(j, &t->gb, 10);
	assert_int_equal(kvf__journal_checkpoint(j), KVF_OK);
	append(j, &t->gb, 10);
	kvf__journal_close(j);
	assert_int_equal(kvf__store_env_open(t->b, 0, 0, &env), 0);
	assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
	assert_int_equal(kvf__store_dbs_open(txn, &dbs, 0), 0);
	assert_true(dbs.has_alt);
	assert_int_equal(mdb_drop(txn, dbs.objs_alt, 1), 0);
	assert_int_equal(mdb_put(txn, dbs.meta, &key, &val, 0), 0);
	assert_int_equal(mdb_txn_commit(txn), 0);
	mdb_env_close(env);

	check_replay(t->b, &t->gb.m);
	j = jopen(t->b, KVF__REWRITE_ALWAYS, 97);
	assert_int_equal(kvf__journal_checkpoint(j), KVF_OK);
	kvf__journal_get_stats(j, &st);
	assert_int_equal(st.format_version, KVF__JOURNAL_FORMAT_VERSION);
	kvf__journal_close(j);
	image_open(t->b, &im);
	assert_int_equal(im.which, 1);
	image_close(&im);
	check_replay(t->b, &t->gb.m);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_rewrite_matches_fold),
		T(test_rewrite_killed),
		T(test_rewrite_upgrades_v3),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
#undef T
}
