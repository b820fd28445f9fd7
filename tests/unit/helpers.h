/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/helpers.h - shared fixtures for engine tests.
 */
#ifndef KVF_TESTS_HELPERS_H
#define KVF_TESTS_HELPERS_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <kvforge.h>

#include "engine/internal.h"

/*
 * The index engine tests run on is chosen at run time: environment
 * KVF_TEST_INDEX=bucket|lfht, unset meaning the default of
 * kvf_config_init(). tests/local.mk runs each engine suite once per
 * index (the *_lfht.sh wrappers set it); fixture_setup() and
 * assert_test_index() check the engine really runs the one named.
 */
static inline enum kvf_index_kind kvf_test_index(void)
{
	const char *s = getenv("KVF_TEST_INDEX");
	struct kvf_config c;

	if (!s || !*s) {
		kvf_config_init(&c);
		return c.index;
	}
	if (!strcmp(s, "bucket"))
		return KVF_INDEX_BUCKET;
	if (!strcmp(s, "lfht"))
		return KVF_INDEX_LFHT;
	fprintf(stderr, "KVF_TEST_INDEX=%s: want bucket or lfht\n", s);
	exit(99); /* a hard error for the test harness, not a failure */
}

#define KVF_TEST_INDEX kvf_test_index()

static inline const char *kvf_test_index_name(int kind)
{
	if (kind == KVF_INDEX_BUCKET)
		return "bucket";
	return kind == KVF_INDEX_LFHT ? "lfht" : "unknown";
}

/* The index implementation @e runs (-1: neither), from its ops table. */
static inline int test_engine_index_kind(const struct kvf_engine *e)
{
	if (e->index->ops == &kvf__index_bucket_ops)
		return KVF_INDEX_BUCKET;
	if (e->index->ops == &kvf__index_lfht_ops)
		return KVF_INDEX_LFHT;
	return -1;
}

/* The engine runs the index this test run names (and say which, once). */
static inline void assert_test_index(const struct kvf_engine *e)
{
	static int said;
	int kind = test_engine_index_kind(e);

	if (!said++)
		fprintf(stderr, "# index: %s\n", kvf_test_index_name(kind));
	if (kind != (int)kvf_test_index())
		fail_msg("engine runs the %s index, test asked for %s",
			 kvf_test_index_name(kind),
			 kvf_test_index_name(kvf_test_index()));
}

#define MIB (1024ULL * 1024ULL)
#define GIB (1024ULL * MIB)
#define MS_NS (1000ULL * 1000ULL)

/* A clock the test moves by hand. */
struct test_clock {
	uint64_t now_ns; /* atomic */
};

static inline uint64_t test_clock_read(void *ctx)
{
	return __atomic_load_n(&((struct test_clock *)ctx)->now_ns,
			       __ATOMIC_RELAXED);
}

static inline void test_clock_advance_ms(struct test_clock *c, uint64_t ms)
{
	__atomic_fetch_add(&c->now_ns, ms * MS_NS, __ATOMIC_RELAXED);
}

struct fixture {
	struct kvf_engine *e;
	struct test_clock clock;
	struct kvf_config cfg;
};

/* Memory-only engine on a manual clock, no background thread. */
static inline void fixture_config(struct fixture *f)
{
	kvf_config_init(&f->cfg);
	f->cfg.durability = KVF_DURABILITY_NONE;
	f->cfg.background = false;
	f->clock.now_ns = 1000 * MS_NS;
	f->cfg.clock = test_clock_read;
	f->cfg.clock_ctx = &f->clock;
	f->cfg.max_batch = 1024;
	f->cfg.seed = 7;
	f->cfg.index = KVF_TEST_INDEX;
}

static inline int fixture_setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	fixture_config(f);
	assert_int_equal(kvf_engine_open(&f->cfg, &f->e), KVF_OK);
	assert_test_index(f->e);
	*state = f;
	return 0;
}

/* fixture_config() with a journal in @dir at @durability, opened. */
static inline void fixture_open_journaled(struct fixture *f, char *dir,
					  enum kvf_durability durability)
{
	fixture_config(f);
	f->cfg.durability = durability;
	f->cfg.data_dir = dir;
	assert_int_equal(kvf_engine_open(&f->cfg, &f->e), KVF_OK);
	assert_test_index(f->e);
}

static inline int fixture_teardown(void **state)
{
	struct fixture *f = *state;

	kvf_engine_close(f->e);
	free(f);
	return 0;
}

/* Mount segment @id of @size bytes for @client at a distinct base. */
static inline int mount(struct kvf_engine *e, uint64_t client, uint64_t id,
			uint64_t size)
{
	char name[32];
	struct kvf_segment_desc d = {
		.id = id,
		.name = name,
		.base = id << 40,
		.size = size,
		.endpoint = "127.0.0.1:12345",
	};

	snprintf(name, sizeof(name), "seg-%llu", (unsigned long long)id);
	return kvf_segment_mount(e, client, &d);
}

static inline struct kvf_key key_of(const char *s)
{
	return (struct kvf_key){ s, strlen(s) };
}

/* One-key helpers: a batch of one, as users would call it. */
static inline int put1(struct kvf_engine *e, uint64_t client, const char *k,
		       uint64_t size, uint32_t replicas,
		       struct kvf_replicas *out)
{
	struct kvf_key key = key_of(k);
	struct kvf_put_config cfg = { .replica_num = replicas };
	struct kvf_replicas r;
	enum kvf_status st;
	int ret;

	ret = kvf_batch_put_start(e, client, &key, &size, 1, &cfg,
				  out ? out : &r, &st);
	if (ret == KVF_ERR_PARTIAL)
		return st;
	return ret;
}

/*
 * Start a put of @k with one replica in each of the @n segments @segs
 * (all preferred); the replicas must land there. Returns the item's
 * status.
 */
static inline int put_in_segments(struct kvf_engine *e, uint64_t client,
				  const char *k, uint64_t size,
				  const uint64_t *segs, uint32_t n)
{
	struct kvf_key key = key_of(k);
	struct kvf_put_config pc = { .replica_num = n,
				     .preferred_segments = segs,
				     .nr_preferred = n };
	struct kvf_replicas r;
	enum kvf_status st;
	int ret = kvf_batch_put_start(e, client, &key, &size, 1, &pc, &r, &st);

	for (uint32_t i = 0; ret == KVF_OK && i < n; i++) {
		bool placed = false;

		for (uint32_t j = 0; j < n; j++)
			placed |= r.replica[i].segment_id == segs[j];
		assert_true(placed);
	}
	return ret == KVF_ERR_PARTIAL ? (int)st : ret;
}

static inline int end1(struct kvf_engine *e, uint64_t client, const char *k)
{
	struct kvf_key key = key_of(k);
	enum kvf_status st;
	int ret = kvf_batch_put_end(e, client, &key, 1, &st);

	return ret == KVF_ERR_PARTIAL ? (int)st : ret;
}

static inline int revoke1(struct kvf_engine *e, uint64_t client, const char *k)
{
	struct kvf_key key = key_of(k);
	enum kvf_status st;
	int ret = kvf_batch_put_revoke(e, client, &key, 1, &st);

	return ret == KVF_ERR_PARTIAL ? (int)st : ret;
}

static inline int get1(struct kvf_engine *e, const char *k,
		       struct kvf_replicas *out)
{
	struct kvf_key key = key_of(k);
	struct kvf_replicas r;
	enum kvf_status st;
	int ret = kvf_batch_get(e, &key, 1, out ? out : &r, &st, NULL);

	return ret == KVF_ERR_PARTIAL ? (int)st : ret;
}

static inline int exist1(struct kvf_engine *e, const char *k)
{
	struct kvf_key key = key_of(k);
	enum kvf_status st;
	int ret = kvf_batch_exist(e, &key, 1, &st);

	return ret == KVF_OK ? (int)st : ret;
}

static inline int remove1(struct kvf_engine *e, const char *k, bool force)
{
	struct kvf_key key = key_of(k);
	enum kvf_status st;
	int ret = kvf_batch_remove(e, &key, 1, force, &st);

	return ret == KVF_ERR_PARTIAL ? (int)st : ret;
}

static inline int put_complete(struct kvf_engine *e, uint64_t client,
			       const char *k, uint64_t size, uint32_t replicas)
{
	int ret = put1(e, client, k, size, replicas, NULL);

	return ret ? ret : end1(e, client, k);
}

static inline struct kvf_engine_stats stats_of(struct kvf_engine *e)
{
	struct kvf_engine_stats s;

	assert_int_equal(kvf_engine_get_stats(e, &s), KVF_OK);
	return s;
}

static inline void assert_replicas_equal(const struct kvf_replicas *a,
					 const struct kvf_replicas *b)
{
	assert_int_equal(a->count, b->count);
	assert_memory_equal(a->replica, b->replica,
			    a->count * sizeof(a->replica[0]));
}

/* Directories test_tmpdir() made, removed when the process that made them
 * exits (KVF_TEST_KEEP=1 keeps them for a post-mortem). */
#define TEST_MAX_TMPDIRS 256
static char *test_tmpdirs[TEST_MAX_TMPDIRS];
static int test_nr_tmpdirs;
static pid_t test_tmpdir_owner;

static inline int test_rm_entry(const char *path, const struct stat *sb,
				int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

static inline void test_remove_tmpdirs(void)
{
	/* A forked child that exits must not take its parent's files. */
	if (getpid() != test_tmpdir_owner || getenv("KVF_TEST_KEEP"))
		return;
	for (int i = 0; i < test_nr_tmpdirs; i++)
		nftw(test_tmpdirs[i], test_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* A unique temporary directory under $KVF_TEST_TMPDIR (or /tmp), removed
 * with its contents when the test program exits. */
static inline char *test_tmpdir(const char *tag)
{
	const char *base = getenv("KVF_TEST_TMPDIR");
	char *path = malloc(512);

	assert_non_null(path);
	snprintf(path, 512, "%s/%s-XXXXXX", base ? base : "/tmp", tag);
	assert_non_null(mkdtemp(path));
	if (!test_tmpdir_owner) {
		test_tmpdir_owner = getpid();
		atexit(test_remove_tmpdirs);
	}
	if (test_nr_tmpdirs < TEST_MAX_TMPDIRS)
		test_tmpdirs[test_nr_tmpdirs++] = strdup(path);
	return path;
}

#endif /* KVF_TESTS_HELPERS_H */
