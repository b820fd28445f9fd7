/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_durability.c - the engine over its journal: recovery
 * equality, unended puts, unmounts, faults, refused directories.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <lmdb.h>
#include <unistd.h>

#include "tests/unit/helpers.h"

#include "engine/internal.h"
#include "journal/journal.h"
#include "journal/store.h"

#define C1 31
#define C2 32
#define NOBJ 500

struct dfix {
	struct fixture f;
	char *dir;
};

static int dsetup(void **state)
{
	struct dfix *d = calloc(1, sizeof(*d));

	fixture_config(&d->f);
	d->dir = test_tmpdir("durability");
	d->f.cfg.durability = KVF_DURABILITY_BOUNDED;
	d->f.cfg.data_dir = d->dir;
	*state = d;
	return 0;
}

static int dteardown(void **state)
{
	struct dfix *d = *state;

	kvf_engine_close(d->f.e);
	free(d->dir);
	free(d);
	return 0;
}

static void reopen(struct dfix *d)
{
	kvf_engine_close(d->f.e);
	d->f.e = NULL;
	assert_int_equal(kvf_engine_open(&d->f.cfg, &d->f.e), KVF_OK);
}

static void key_n(char *buf, size_t cap, int i)
{
	snprintf(buf, cap, "%064x_%d_k", i * 2654435761u, i % 8);
}

/* Everything observable about the state, to compare across a reopen. */
struct snapshot {
	struct kvf_engine_stats stats;
	struct kvf_segment_info seg[3];
	int present[NOBJ];
	struct kvf_replicas rep[NOBJ];
};

static void take_snapshot(struct kvf_engine *e, struct snapshot *s)
{
	char key[96];

	memset(s, 0, sizeof(*s));
	s->stats = stats_of(e);
	for (uint64_t id = 1; id <= 3; id++)
		if (kvf_segment_query(e, id, &s->seg[id - 1]) != KVF_OK)
			s->seg[id - 1].id = 0;
	for (int i = 0; i < NOBJ; i++) {
		key_n(key, sizeof(key), i);
		s->present[i] = get1(e, key, &s->rep[i]) == KVF_OK;
	}
}

static void assert_same_state(const struct snapshot *a,
			      const struct snapshot *b)
{
	assert_int_equal(a->stats.objects, b->stats.objects);
	assert_int_equal(a->stats.segments, b->stats.segments);
	assert_int_equal(a->stats.clients, b->stats.clients);
	assert_int_equal(a->stats.capacity_bytes, b->stats.capacity_bytes);
	assert_int_equal(a->stats.used_bytes, b->stats.used_bytes);
	for (int s = 0; s < 3; s++) {
		assert_int_equal(a->seg[s].id, b->seg[s].id);
		assert_int_equal(a->seg[s].free_bytes, b->seg[s].free_bytes);
		assert_int_equal(a->seg[s].largest_free, b->seg[s].largest_free);
		assert_string_equal(a->seg[s].endpoint, b->seg[s].endpoint);
	}
	for (int i = 0; i < NOBJ; i++) {
		assert_int_equal(a->present[i], b->present[i]);
		if (a->present[i])
			assert_replicas_equal(&a->rep[i], &b->rep[i]);
	}
}

static void populate(struct kvf_engine *e)
{
	char key[96];

	assert_int_equal(mount(e, C1, 1, 256 * MIB), KVF_OK);
	assert_int_equal(mount(e, C1, 2, 256 * MIB), KVF_OK);
	assert_int_equal(mount(e, C2, 3, 256 * MIB), KVF_OK);
	for (int i = 0; i < NOBJ; i++) {
		key_n(key, sizeof(key), i);
		assert_int_equal(put_complete(e, i % 2 ? C1 : C2, key,
					      (uint64_t)(i % 5 + 1) * 64 * 1024,
					      (uint32_t)(i % 3 == 0 ? 2 : 1)),
				 KVF_OK);
	}
	/* Removals, a revoked and an unended put. */
	for (int i = 0; i < NOBJ; i += 7) {
		key_n(key, sizeof(key), i);
		assert_int_equal(remove1(e, key, true), KVF_OK);
	}
	assert_int_equal(put1(e, C1, "unended", 32 * MIB, 1, NULL), KVF_OK);
	assert_int_equal(put1(e, C1, "revoked", 32 * MIB, 1, NULL), KVF_OK);
	assert_int_equal(revoke1(e, C1, "revoked"), KVF_OK);
}

static void test_recovery_equality(void **state)
{
	struct dfix *d = *state;
	struct snapshot *before = malloc(sizeof(*before));
	struct snapshot *after = malloc(sizeof(*after));
	struct kvf_engine_stats st;

	assert_int_equal(kvf_engine_open(&d->f.cfg, &d->f.e), KVF_OK);
	populate(d->f.e);
	/* The unended put is not durable: its 32 MiB come back. */
	assert_int_equal(revoke1(d->f.e, C1, "unended"), KVF_OK);
	take_snapshot(d->f.e, before);
	assert_int_equal(put1(d->f.e, C1, "unended", 32 * MIB, 1, NULL),
			 KVF_OK);
	reopen(d);
	st = stats_of(d->f.e);
	assert_int_equal(st.recovered_objects, before->stats.objects);
	assert_int_equal(st.processing, 0);
	take_snapshot(d->f.e, after);
	assert_same_state(before, after);
	assert_int_equal(exist1(d->f.e, "unended"), KVF_ERR_OBJECT_NOT_FOUND);
	/* Recovered objects are fully usable. */
	assert_int_equal(put_complete(d->f.e, C1, "after-reopen", MIB, 1),
			 KVF_OK);
	reopen(d);
	assert_int_equal(exist1(d->f.e, "after-reopen"), KVF_OK);
	free(before);
	free(after);
}

/* The address of @k's one replica, its size checked; asserts it exists. */
static uint64_t addr_of(struct kvf_engine *e, const char *k, uint64_t size)
{
	struct kvf_replicas r;

	assert_int_equal(get1(e, k, &r), KVF_OK);
	assert_int_equal(r.count, 1);
	assert_int_equal(r.replica[0].size, size);
	return r.replica[0].addr;
}

/*
 * The allocator rebuilt by recovery parks and hands out blocks like the
 * one before it: after a reopen, odd blocks between held ones are freed
 * (parked, each with its leaf), a hole before them is cut into small
 * objects (their leaf splits, the parked blocks move to other leaves),
 * and puts of the parked size take them back. Every object then has its
 * own range, the claimed blocks free again, and a second reopen
 * recovers exactly what is left.
 */
static void test_parked_blocks_after_recovery(void **state)
{
	enum { N = 256, HOLE = 16, SMALL = 200, PAGE = 64 * 1024 };
	struct dfix *d = *state;
	char k[48];
	uint64_t used = 0;
	int parked = 0;

	assert_int_equal(kvf_engine_open(&d->f.cfg, &d->f.e), KVF_OK);
	assert_int_equal(mount(d->f.e, C1, 1, 64 * MIB), KVF_OK);
	for (int i = 0; i < N; i++) {
		snprintf(k, sizeof(k), "a-%d", i);
		assert_int_equal(put_complete(d->f.e, C1, k, PAGE, 1), KVF_OK);
	}
	reopen(d);
	for (int i = 0; i < HOLE; i++) {
		snprintf(k, sizeof(k), "a-%d", i);
		assert_int_equal(remove1(d->f.e, k, true), KVF_OK);
	}
	for (int i = HOLE + 5; i < HOLE + 45; i += 2, parked++) {
		snprintf(k, sizeof(k), "a-%d", i);
		assert_int_equal(remove1(d->f.e, k, true), KVF_OK);
	}
	for (int i = 0; i < SMALL; i++) {
		snprintf(k, sizeof(k), "s-%d", i);
		assert_int_equal(put_complete(d->f.e, C1, k, 4096, 1), KVF_OK);
		/* First fit: the hole at the segment's start. */
		assert_true(addr_of(d->f.e, k, 4096) - (1ULL << 40) <
			    HOLE * PAGE);
	}
	for (int i = 0; i < parked; i++) {
		snprintf(k, sizeof(k), "c-%d", i);
		assert_int_equal(put_complete(d->f.e, C1, k, PAGE, 1), KVF_OK);
		/* A parked block: inside the range the a-s held. */
		assert_true(addr_of(d->f.e, k, PAGE) - (1ULL << 40) <
			    (HOLE + 45) * PAGE);
	}
	/* The claimed blocks free (and park) again, then are taken again. */
	for (int i = 0; i < parked; i += 2) {
		snprintf(k, sizeof(k), "c-%d", i);
		assert_int_equal(remove1(d->f.e, k, true), KVF_OK);
		assert_int_equal(put_complete(d->f.e, C1, k, PAGE, 1), KVF_OK);
	}
	reopen(d);
	{
		struct {
			uint64_t addr, size;
		} r[N + SMALL + 64];
		size_t m = 0;

		for (int i = HOLE; i < N; i++) {
			snprintf(k, sizeof(k), "a-%d", i);
			if (i >= HOLE + 5 && i < HOLE + 45 && (i - HOLE) % 2) {
				assert_int_equal(exist1(d->f.e, k),
						 KVF_ERR_OBJECT_NOT_FOUND);
				continue;
			}
			r[m].addr = addr_of(d->f.e, k, PAGE);
			r[m++].size = PAGE;
		}
		for (int i = 0; i < SMALL; i++) {
			snprintf(k, sizeof(k), "s-%d", i);
			r[m].addr = addr_of(d->f.e, k, 4096);
			r[m++].size = 4096;
		}
		for (int i = 0; i < parked; i++) {
			snprintf(k, sizeof(k), "c-%d", i);
			r[m].addr = addr_of(d->f.e, k, PAGE);
			r[m++].size = PAGE;
		}
		/* No two overlap (m^2 over a few hundred ranges). */
		for (size_t i = 0; i < m; i++) {
			used += r[i].size;
			for (size_t j = i + 1; j < m; j++)
				assert_true(r[i].addr + r[i].size <= r[j].addr ||
					    r[j].addr + r[j].size <= r[i].addr);
		}
		assert_int_equal(stats_of(d->f.e).objects, m);
		assert_int_equal(stats_of(d->f.e).used_bytes, used);
	}
	/* Every block frees: the recovered allocator agrees with the index. */
	assert_int_equal(kvf_remove_all(d->f.e, true, NULL), KVF_OK);
	assert_int_equal(stats_of(d->f.e).used_bytes, 0);
}

static void test_unmount_and_expiry_survive(void **state)
{
	struct dfix *d = *state;
	struct snapshot *before = malloc(sizeof(*before));
	struct snapshot *after = malloc(sizeof(*after));

	assert_int_equal(kvf_engine_open(&d->f.cfg, &d->f.e), KVF_OK);
	populate(d->f.e);
	assert_int_equal(kvf_segment_unmount(d->f.e, C1, 1), KVF_OK);
	test_clock_advance_ms(&d->f.clock, 11000);
	assert_int_equal(kvf_client_heartbeat(d->f.e, C1), KVF_OK);
	assert_int_equal(kvf_engine_tick(d->f.e), KVF_OK); /* C2 expires */
	assert_int_equal(stats_of(d->f.e).segments, 1);
	/* Unended puts are not durable; leave none to compare. */
	revoke1(d->f.e, C1, "unended");
	take_snapshot(d->f.e, before);
	reopen(d);
	take_snapshot(d->f.e, after);
	assert_same_state(before, after);
	free(before);
	free(after);
}

static void test_strict_failure_is_invisible(void **state)
{
	struct dfix *d = *state;
	struct kvf_key keys[2] = { key_of("s1"), key_of("s2") };
	enum kvf_status st[2];

#ifndef KVF_FAULT_INJECTION
	skip(); /* needs ./configure --enable-fault-injection */
#endif
	d->f.cfg.durability = KVF_DURABILITY_STRICT;
	assert_int_equal(kvf_engine_open(&d->f.cfg, &d->f.e), KVF_OK);
	assert_int_equal(mount(d->f.e, C1, 1, 64 * MIB), KVF_OK);
	assert_int_equal(put_complete(d->f.e, C1, "old", MIB, 1), KVF_OK);
	assert_int_equal(put1(d->f.e, C1, "s1", MIB, 1, NULL), KVF_OK);
	assert_int_equal(put1(d->f.e, C1, "s2", MIB, 1, NULL), KVF_OK);
	kvf__journal_inject_fault(d->f.e->journal, ENOSPC, 1);
	assert_int_equal(kvf_batch_put_end(d->f.e, C1, keys, 2, st),
			 KVF_ERR_PARTIAL);
	assert_int_equal(st[0], KVF_ERR_JOURNAL_NO_SPACE);
	assert_int_equal(st[1], KVF_ERR_JOURNAL_NO_SPACE);
	assert_int_equal(exist1(d->f.e, "s1"), KVF_ERR_OBJECT_NOT_FOUND);
	/* Reads go on; so does a remove that fails to journal. */
	assert_int_equal(get1(d->f.e, "old", NULL), KVF_OK);
	test_clock_advance_ms(&d->f.clock, 20000);
	kvf__journal_inject_fault(d->f.e->journal, EIO, 1);
	assert_int_equal(remove1(d->f.e, "old", false), KVF_ERR_IO);
	assert_int_equal(exist1(d->f.e, "old"), KVF_OK);
	/* Space is back: the same puts can end now. */
	assert_int_equal(kvf_batch_put_end(d->f.e, C1, keys, 2, st), KVF_OK);
	assert_int_equal(exist1(d->f.e, "s2"), KVF_OK);
	reopen(d);
	assert_int_equal(exist1(d->f.e, "s1"), KVF_OK);
	assert_int_equal(exist1(d->f.e, "old"), KVF_OK);
}

static void test_refused_directories(void **state)
{
	struct dfix *d = *state;
	struct kvf_engine *e2 = NULL;
	uint32_t v = KVF__JOURNAL_FORMAT_VERSION + 1;
	char path[600];
	MDB_env *env;
	MDB_txn *txn;
	struct kvf__store_dbs dbs;
	MDB_val key = { strlen(KVF__META_VERSION), (void *)KVF__META_VERSION };
	MDB_val val = { sizeof(v), &v };
	int fd;

	assert_int_equal(kvf_engine_open(&d->f.cfg, &d->f.e), KVF_OK);
	assert_int_equal(mount(d->f.e, C1, 1, 64 * MIB), KVF_OK);
	/* One engine per directory. */
	assert_int_equal(kvf_engine_open(&d->f.cfg, &e2), KVF_ERR_BUSY);
	kvf_engine_close(d->f.e);
	d->f.e = NULL;
	/* A directory from another format version. */
	assert_int_equal(kvf__store_env_open(d->dir, 0, 0, &env), 0);
	assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
	assert_int_equal(kvf__store_dbs_open(txn, &dbs, 0), 0);
	assert_int_equal(mdb_put(txn, dbs.meta, &key, &val, 0), 0);
	assert_int_equal(mdb_txn_commit(txn), 0);
	mdb_env_close(env);
	assert_int_equal(kvf_engine_open(&d->f.cfg, &e2),
			 KVF_ERR_JOURNAL_VERSION);
	/* Not a journal at all. */
	snprintf(path, sizeof(path), "%s/data.mdb", d->dir);
	fd = open(path, O_WRONLY | O_TRUNC);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "definitely not lmdb", 19), 19);
	close(fd);
	assert_int_equal(kvf_engine_open(&d->f.cfg, &e2),
			 KVF_ERR_JOURNAL_CORRUPT);
	assert_null(e2);
}

/* The journal's checkpoints done so far, and the records past the last. */
static struct kvf__journal_stats journal_stats(struct kvf_engine *e)
{
	struct kvf__journal_stats st;

	kvf__journal_get_stats(e->journal, &st);
	return st;
}

/*
 * Wait (at most 30 s) until @e's journal has completed @n checkpoints
 * and holds fewer than @below records past the last.
 */
static void wait_folded(struct kvf_engine *e, uint64_t n, uint64_t below)
{
	struct kvf__journal_stats st;

	for (int waited = 0;; waited++) {
		st = journal_stats(e);
		if (st.checkpoints >= n && st.last_seq - st.checkpoint_seq < below)
			return;
		if (waited >= 30000)
			fail_msg("checkpoints %llu, seq %llu, last %llu",
				 (unsigned long long)st.checkpoints,
				 (unsigned long long)st.checkpoint_seq,
				 (unsigned long long)st.last_seq);
		usleep(1000);
	}
}

/*
 * journal_checkpoint_records is the journal's threshold, or half the
 * image's objects when that is more: at 100 records the ~575 records of
 * populate() fold by themselves (in the background, so waited for), down
 * to fewer than 100 records past the image; with ~500 objects in the
 * image the threshold is then ~250, which the ~430 removes after them
 * pass, and they fold down to fewer than that. Recovery through those
 * checkpoints gives the state back. At the default (0: a million) the same
 * work folds nothing.
 */
static void test_checkpoint_threshold(void **state)
{
	struct dfix *d = *state;
	struct snapshot *before = malloc(sizeof(*before));
	struct snapshot *after = malloc(sizeof(*after));
	struct kvf__journal_stats st;
	uint64_t half;
	char key[96];

	d->f.cfg.journal_checkpoint_records = 100;
	assert_int_equal(kvf_engine_open(&d->f.cfg, &d->f.e), KVF_OK);
	populate(d->f.e);
	/* Not durable, so not part of the state compared. */
	assert_int_equal(revoke1(d->f.e, C1, "unended"), KVF_OK);
	wait_folded(d->f.e, 1, 100);
	half = journal_stats(d->f.e).objects / 2;
	assert_true(half > 100);
	for (int i = 1; i < NOBJ; i++) {
		key_n(key, sizeof(key), i);
		if (i % 7)
			assert_int_equal(remove1(d->f.e, key, true), KVF_OK);
	}
	wait_folded(d->f.e, 2, half);
	take_snapshot(d->f.e, before);
	reopen(d);
	take_snapshot(d->f.e, after);
	assert_same_state(before, after);
	assert_true(journal_stats(d->f.e).checkpoints >= 2);
	free(before);
	free(after);

	kvf_engine_close(d->f.e);
	d->f.e = NULL;
	free(d->dir);
	d->dir = test_tmpdir("durability");
	d->f.cfg.data_dir = d->dir;
	d->f.cfg.journal_checkpoint_records = 0;
	assert_int_equal(kvf_engine_open(&d->f.cfg, &d->f.e), KVF_OK);
	populate(d->f.e);
	reopen(d);
	st = journal_stats(d->f.e);
	assert_int_equal(st.checkpoints, 0);
	assert_int_equal(st.checkpoint_seq, 0);
	assert_true(st.last_seq > 500);
}

/* A side log file size the journal cannot use is refused at open. */
static void test_bad_side_log_size(void **state)
{
	struct dfix *d = *state;
	struct kvf_engine *e2 = NULL;

	d->f.cfg.journal_wal_bytes = 1000; /* not a multiple of 4 KiB */
	assert_int_equal(kvf_engine_open(&d->f.cfg, &e2),
			 KVF_ERR_INVALID_ARGUMENT);
	assert_null(e2);
	d->f.cfg.journal_wal_bytes = 32 << 10; /* below 64 KiB */
	assert_int_equal(kvf_engine_open(&d->f.cfg, &e2),
			 KVF_ERR_INVALID_ARGUMENT);
	d->f.cfg.journal_wal_bytes = 64 << 10;
	assert_int_equal(kvf_engine_open(&d->f.cfg, &d->f.e), KVF_OK);
	assert_int_equal(mount(d->f.e, C1, 1, 64 * MIB), KVF_OK);
	reopen(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_recovery_equality, dsetup,
						dteardown),
		cmocka_unit_test_setup_teardown(test_parked_blocks_after_recovery,
						dsetup, dteardown),
		cmocka_unit_test_setup_teardown(test_unmount_and_expiry_survive,
						dsetup, dteardown),
		cmocka_unit_test_setup_teardown(test_strict_failure_is_invisible,
						dsetup, dteardown),
		cmocka_unit_test_setup_teardown(test_bad_side_log_size, dsetup,
						dteardown),
		cmocka_unit_test_setup_teardown(test_checkpoint_threshold,
						dsetup, dteardown),
		cmocka_unit_test_setup_teardown(test_refused_directories,
						dsetup, dteardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
