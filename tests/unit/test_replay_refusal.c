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

#define MAX_RECS 9

struct refusal {
	const char *what;
	size_t n;
	struct kvf__jrec recs[MAX_RECS];
};

static const uint64_t seg_a[] = { SEG_A }, seg_b[] = { SEG_B };
static const uint64_t seg_ab[] = { SEG_A, SEG_B }, seg_aa[] = { SEG_A, SEG_A };
static const uint64_t at_0[] = { 0 }, at_0_0[] = { 0, 0 }, at_8k[] = { 8192 };
static const uint64_t at_0_8k[] = { 0, 8192 }, at_2m[] = { 2 * MIB };

static void fill_refusals(struct refusal *c)
{
	/*
	 * The shape the unmount race used to write: a replica set
	 * journaled after the key was removed and put again, naming space
	 * another object holds. Applying it would free the live object's
	 * space and later free it twice.
	 */
	c[0] = (struct refusal){
		"replica set journaled after a re-put", 9,
		{ mount_rec(SEG_A), mount_rec(SEG_B),
		  obj_rec(KVF__JREC_OBJECT_PUT, "k", 2, seg_ab, at_0_0),
		  remove_rec("k"),
		  obj_rec(KVF__JREC_OBJECT_PUT, "other", 1, seg_a, at_0),
		  obj_rec(KVF__JREC_OBJECT_PUT, "k", 1, seg_a, at_8k),
		  obj_rec(KVF__JREC_OBJECT_REPLICAS, "k", 1, seg_a, at_0),
		  remove_rec("k"), remove_rec("other") }
	};
	c[1] = (struct refusal){
		"replica set that grows", 4,
		{ mount_rec(SEG_A), mount_rec(SEG_B),
		  obj_rec(KVF__JREC_OBJECT_PUT, "k", 1, seg_a, at_0),
		  obj_rec(KVF__JREC_OBJECT_REPLICAS, "k", 2, seg_ab, at_0_0) }
	};
	c[2] = (struct refusal){
		"overlapping puts", 3,
		{ mount_rec(SEG_A),
		  obj_rec(KVF__JREC_OBJECT_PUT, "k1", 1, seg_a, at_0),
		  obj_rec(KVF__JREC_OBJECT_PUT, "k2", 1, seg_a, at_0) }
	};
	c[3] = (struct refusal){
		"replica in a segment never mounted", 2,
		{ mount_rec(SEG_A),
		  obj_rec(KVF__JREC_OBJECT_PUT, "k", 1, seg_b, at_0) }
	};
	c[4] = (struct refusal){
		"two replicas in one segment", 2,
		{ mount_rec(SEG_A),
		  obj_rec(KVF__JREC_OBJECT_PUT, "k", 2, seg_aa, at_0_8k) }
	};
	c[5] = (struct refusal){
		"replica outside its segment", 2,
		{ mount_rec(SEG_A),
		  obj_rec(KVF__JREC_OBJECT_PUT, "k", 1, seg_a, at_2m) }
	};
}

#define NR_REFUSALS 6

static void test_refused(void **state)
{
	struct refusal *cases = calloc(NR_REFUSALS, sizeof(*cases));

	(void)state;
	assert_non_null(cases);
	fill_refusals(cases);
	for (int i = 0; i < NR_REFUSALS; i++) {
		print_message("%s\n", cases[i].what);
		assert_refused(cases[i].recs, cases[i].n);
	}
	free(cases);
}

/* Records like the first refusal's, in the order the engine writes. */
static void test_valid_order_opens(void **state)
{
	const struct kvf__jrec recs[] = {
		mount_rec(SEG_A),
		mount_rec(SEG_B),
		obj_rec(KVF__JREC_OBJECT_PUT, "k", 2, seg_ab, at_0_0),
		obj_rec(KVF__JREC_OBJECT_REPLICAS, "k", 1, seg_a, at_0),
		remove_rec("k"),
		obj_rec(KVF__JREC_OBJECT_PUT, "other", 1, seg_a, at_0),
		obj_rec(KVF__JREC_OBJECT_PUT, "k", 1, seg_a, at_8k),
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
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_valid_order_opens),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
