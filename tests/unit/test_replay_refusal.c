/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_replay_refusal.c - journals whose records decode but
 * cannot be applied: open refuses them with KVF_ERR_JOURNAL_CORRUPT, never
 * aborts the process, and changes nothing (a second open refuses again).
 */
#include "config.h"

#include "tests/unit/helpers.h"

#include "journal/journal.h"

#define SEG_A 1
#define SEG_B 2

static struct kvf__jrec mount_rec(uint64_t id)
{
	struct kvf__jrec r = { .type = KVF__JREC_SEGMENT_MOUNT };

	r.mount.segment_id = id;
	r.mount.client_id = 1;
	r.mount.base = id << 40;
	r.mount.size = 1 * MIB;
	r.mount.name = "seg";
	r.mount.name_len = 3;
	r.mount.endpoint = "";
	return r;
}

/* OBJECT_PUT (or OBJECT_REPLICAS) of @key with @nr replicas. */
static struct kvf__jrec obj_rec(enum kvf__jrec_type type, const char *key,
				unsigned nr, const uint64_t *seg,
				const uint64_t *off)
{
	struct kvf__jrec r = { .type = type };

	r.obj.key = key;
	r.obj.key_len = (uint32_t)strlen(key);
	r.obj.size = 4096;
	r.obj.nr_replicas = (uint8_t)nr;
	for (unsigned i = 0; i < nr; i++) {
		r.obj.replicas[i].segment_id = seg[i];
		r.obj.replicas[i].offset = off[i];
	}
	return r;
}

static struct kvf__jrec remove_rec(const char *key)
{
	struct kvf__jrec r = { .type = KVF__JREC_OBJECT_REMOVE };

	r.obj.key = key;
	r.obj.key_len = (uint32_t)strlen(key);
	return r;
}

/* Write @recs as a journal in a new directory; the caller frees it. */
static char *write_journal(const struct kvf__jrec *recs, size_t n)
{
	char *dir = test_tmpdir("replay-refusal");
	struct kvf__journal_config jc = { .dir = dir,
					  .durability = KVF_DURABILITY_STRICT };
	struct kvf__journal *j;

	assert_int_equal(kvf__journal_open(&jc, &j), KVF_OK);
	for (size_t i = 0; i < n; i++) /* one batch each: the log order */
		assert_int_equal(kvf__journal_append(j, &recs[i], 1), KVF_OK);
	kvf__journal_close(j);
	return dir;
}

static int open_engine(const char *dir, enum kvf_index_kind kind)
{
	struct kvf_config cfg;
	struct kvf_engine *e = NULL;
	int ret;

	kvf_config_init(&cfg);
	cfg.durability = KVF_DURABILITY_STRICT;
	cfg.data_dir = dir;
	cfg.index = kind;
	cfg.background = false;
	ret = kvf_engine_open(&cfg, &e);
	if (ret == KVF_OK)
		kvf_engine_close(e);
	return ret;
}

/* Both index kinds refuse @recs, twice each (nothing was repaired). */
static void assert_refused(const struct kvf__jrec *recs, size_t n)
{
	char *dir = write_journal(recs, n);

	for (int round = 0; round < 2; round++) {
		assert_int_equal(open_engine(dir, KVF_INDEX_LFHT),
				 KVF_ERR_JOURNAL_CORRUPT);
		assert_int_equal(open_engine(dir, KVF_INDEX_BUCKET),
				 KVF_ERR_JOURNAL_CORRUPT);
	}
	free(dir);
}

/*
 * The shape the unmount race used to write: a replica set journaled after
 * the key was removed and put again, naming space another object holds.
 * Applying it would free the live object's space and later free it twice.
 */
static void test_replicas_not_a_subset(void **state)
{
	const uint64_t ab[] = { SEG_A, SEG_B }, a[] = { SEG_A };
	const uint64_t x_y[] = { 0, 0 }, x[] = { 0 }, z[] = { 8192 };
	const struct kvf__jrec recs[] = {
		mount_rec(SEG_A),
		mount_rec(SEG_B),
		obj_rec(KVF__JREC_OBJECT_PUT, "k", 2, ab, x_y),
		remove_rec("k"),
		obj_rec(KVF__JREC_OBJECT_PUT, "other", 1, a, x),
		obj_rec(KVF__JREC_OBJECT_PUT, "k", 1, a, z),
		obj_rec(KVF__JREC_OBJECT_REPLICAS, "k", 1, a, x),
		remove_rec("k"),
		remove_rec("other"),
	};

	(void)state;
	assert_refused(recs, sizeof(recs) / sizeof(recs[0]));
}

/* A replica set may only shrink. */
static void test_replicas_adds_one(void **state)
{
	const uint64_t a[] = { SEG_A }, ab[] = { SEG_A, SEG_B };
	const uint64_t x[] = { 0 }, x_y[] = { 0, 0 };
	const struct kvf__jrec recs[] = {
		mount_rec(SEG_A),
		mount_rec(SEG_B),
		obj_rec(KVF__JREC_OBJECT_PUT, "k", 1, a, x),
		obj_rec(KVF__JREC_OBJECT_REPLICAS, "k", 2, ab, x_y),
	};

	(void)state;
	assert_refused(recs, sizeof(recs) / sizeof(recs[0]));
}

static void test_overlapping_puts(void **state)
{
	const uint64_t a[] = { SEG_A }, x[] = { 0 };
	const struct kvf__jrec recs[] = {
		mount_rec(SEG_A),
		obj_rec(KVF__JREC_OBJECT_PUT, "k1", 1, a, x),
		obj_rec(KVF__JREC_OBJECT_PUT, "k2", 1, a, x),
	};

	(void)state;
	assert_refused(recs, sizeof(recs) / sizeof(recs[0]));
}

static void test_replica_in_unknown_segment(void **state)
{
	const uint64_t b[] = { SEG_B }, x[] = { 0 };
	const struct kvf__jrec recs[] = {
		mount_rec(SEG_A),
		obj_rec(KVF__JREC_OBJECT_PUT, "k", 1, b, x),
	};

	(void)state;
	assert_refused(recs, sizeof(recs) / sizeof(recs[0]));
}

static void test_two_replicas_in_one_segment(void **state)
{
	const uint64_t aa[] = { SEG_A, SEG_A }, xy[] = { 0, 8192 };
	const struct kvf__jrec recs[] = {
		mount_rec(SEG_A),
		obj_rec(KVF__JREC_OBJECT_PUT, "k", 2, aa, xy),
	};

	(void)state;
	assert_refused(recs, sizeof(recs) / sizeof(recs[0]));
}

static void test_replica_outside_segment(void **state)
{
	const uint64_t a[] = { SEG_A }, far[] = { 2 * MIB };
	const struct kvf__jrec recs[] = {
		mount_rec(SEG_A),
		obj_rec(KVF__JREC_OBJECT_PUT, "k", 1, a, far),
	};

	(void)state;
	assert_refused(recs, sizeof(recs) / sizeof(recs[0]));
}

/* The same records in a valid order open, and say what they hold. */
static void test_valid_order_opens(void **state)
{
	const uint64_t ab[] = { SEG_A, SEG_B }, a[] = { SEG_A };
	const uint64_t x_y[] = { 0, 0 }, x[] = { 0 }, z[] = { 8192 };
	const struct kvf__jrec recs[] = {
		mount_rec(SEG_A),
		mount_rec(SEG_B),
		obj_rec(KVF__JREC_OBJECT_PUT, "k", 2, ab, x_y),
		obj_rec(KVF__JREC_OBJECT_REPLICAS, "k", 1, a, x),
		remove_rec("k"),
		obj_rec(KVF__JREC_OBJECT_PUT, "other", 1, a, x),
		obj_rec(KVF__JREC_OBJECT_PUT, "k", 1, a, z),
		remove_rec("other"),
	};
	char *dir = write_journal(recs, sizeof(recs) / sizeof(recs[0]));

	assert_int_equal(open_engine(dir, KVF_INDEX_LFHT), KVF_OK);
	assert_int_equal(open_engine(dir, KVF_INDEX_BUCKET), KVF_OK);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_replicas_not_a_subset),
		cmocka_unit_test(test_replicas_adds_one),
		cmocka_unit_test(test_overlapping_puts),
		cmocka_unit_test(test_replica_in_unknown_segment),
		cmocka_unit_test(test_two_replicas_in_one_segment),
		cmocka_unit_test(test_replica_outside_segment),
		cmocka_unit_test(test_valid_order_opens),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
