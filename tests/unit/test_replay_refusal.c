/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_replay_refusal.c - journals whose records decode but
 * cannot be applied: open refuses them with KVF_ERR_JOURNAL_CORRUPT, never
 * aborts the process, and changes nothing (a second open refuses again),
 * whether the records are in the log or folded into the image; and an
 * image of many objects recovers each one where it was, its space held.
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

/*
 * Write @recs as a journal in a new directory, folded into the image if
 * @fold, else left in the log; the caller frees it.
 */
static char *write_records(const struct kvf__jrec *recs, size_t n, bool fold)
{
	char *dir = test_tmpdir("replay-refusal");
	struct kvf__journal_config jc = { .dir = dir,
					  .durability = KVF_DURABILITY_STRICT };
	struct kvf__journal *j;

	assert_int_equal(kvf__journal_open(&jc, &j), KVF_OK);
	if (fold) { /* one batch: the image does not keep the log order */
		assert_int_equal(kvf__journal_append(j, recs, n), KVF_OK);
		assert_int_equal(kvf__journal_checkpoint(j), KVF_OK);
	}
	for (size_t i = 0; !fold && i < n; i++) /* one batch each */
		assert_int_equal(kvf__journal_append(j, &recs[i], 1), KVF_OK);
	kvf__journal_close(j);
	return dir;
}

static char *write_journal(const struct kvf__jrec *recs, size_t n)
{
	return write_records(recs, n, false);
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
static void assert_refused_as(const struct kvf__jrec *recs, size_t n, bool fold)
{
	char *dir = write_records(recs, n, fold);

	for (int round = 0; round < 2; round++) {
		assert_int_equal(open_engine(dir, KVF_INDEX_LFHT),
				 KVF_ERR_JOURNAL_CORRUPT);
		assert_int_equal(open_engine(dir, KVF_INDEX_BUCKET),
				 KVF_ERR_JOURNAL_CORRUPT);
	}
	free(dir);
}

static void assert_refused(const struct kvf__jrec *recs, size_t n)
{
	assert_refused_as(recs, n, false);
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

/* Objects of the image tests: 4 KiB each in two 1 MiB segments. */
#define IMG_SINGLE 200 /* one replica, alternating segments */
#define IMG_DOUBLE 50  /* one replica in each */
#define IMG_OBJECTS (IMG_SINGLE + IMG_DOUBLE)
#define IMG_SLOTS 256 /* 4 KiB slots per segment */

struct image_fixture {
	char keys[IMG_OBJECTS][12];
	uint64_t seg[IMG_OBJECTS][2];
	uint64_t off[IMG_OBJECTS][2];
	struct kvf__jrec recs[2 + IMG_OBJECTS + 1];
	size_t n;
};

/* Shuffle the 4 KiB slots 0..IMG_SLOTS-1 into @slot. */
static void shuffled_slots(uint64_t *slot, uint64_t *rng)
{
	for (unsigned i = 0; i < IMG_SLOTS; i++)
		slot[i] = i;
	for (unsigned i = IMG_SLOTS - 1; i > 0; i--) {
		unsigned j;
		uint64_t t;

		*rng = *rng * 6364136223846793005ULL + 1442695040888963407ULL;
		j = (unsigned)((*rng >> 33) % (i + 1));
		t = slot[i];
		slot[i] = slot[j];
		slot[j] = t;
	}
}

/*
 * Two mounts and IMG_OBJECTS puts at shuffled, distinct offsets: the
 * image hands them to recovery in key-hash order, far from address order.
 */
static void fill_image(struct image_fixture *f)
{
	uint64_t slots[2][IMG_SLOTS], rng = 42;
	unsigned used[2] = {0, 0};

	shuffled_slots(slots[0], &rng);
	shuffled_slots(slots[1], &rng);
	f->n = 0;
	f->recs[f->n++] = mount_rec(SEG_A);
	f->recs[f->n++] = mount_rec(SEG_B);
	for (unsigned i = 0; i < IMG_OBJECTS; i++) {
		unsigned nr = i < IMG_SINGLE ? 1 : 2;

		snprintf(f->keys[i], sizeof(f->keys[i]), "img-%u", i);
		for (unsigned r = 0; r < nr; r++) {
			unsigned s = nr == 2 ? r : i % 2;

			f->seg[i][r] = s ? SEG_B : SEG_A;
			f->off[i][r] = slots[s][used[s]++] * 4096;
		}
		f->recs[f->n] = obj_rec(KVF__JREC_OBJECT_PUT, "", nr, f->seg[i],
					f->off[i]);
		f->recs[f->n].obj.key = f->keys[i];
		f->recs[f->n].obj.key_len = (uint32_t)strlen(f->keys[i]);
		f->n++;
	}
}

/* Every image object is found where the image put it. */
static void assert_objects_where_put(struct kvf_engine *e,
				     const struct image_fixture *f)
{
	struct kvf_key *keys = calloc(IMG_OBJECTS, sizeof(*keys));
	struct kvf_replicas *out = calloc(IMG_OBJECTS, sizeof(*out));
	enum kvf_status *st = calloc(IMG_OBJECTS, sizeof(*st));

	assert_true(keys && out && st);
	for (unsigned i = 0; i < IMG_OBJECTS; i++)
		keys[i] = (struct kvf_key){f->keys[i], strlen(f->keys[i])};
	assert_int_equal(kvf_batch_get(e, keys, IMG_OBJECTS, out, st, NULL),
			 KVF_OK);
	for (unsigned i = 0; i < IMG_OBJECTS; i++) {
		unsigned nr = i < IMG_SINGLE ? 1 : 2;

		assert_int_equal(st[i], KVF_OK);
		assert_int_equal(out[i].count, nr);
		for (unsigned r = 0; r < nr; r++) {
			const struct kvf_replica_desc *d = &out[i].replica[r];
			bool found = false;

			for (unsigned w = 0; w < nr; w++)
				found |= d->segment_id == f->seg[i][w] &&
					 d->addr == (f->seg[i][w] << 40) +
							    f->off[i][w];
			assert_true(found);
			assert_int_equal(d->size, 4096);
		}
	}
	free(keys);
	free(out);
	free(st);
}

/*
 * The space the image objects do not hold, and only that, is free: puts
 * of 4 KiB fill exactly the slots left, none on a recovered replica.
 */
static void assert_rest_free(struct kvf_engine *e,
			     const struct image_fixture *f)
{
	unsigned left = 2 * IMG_SLOTS - IMG_SINGLE - 2 * IMG_DOUBLE;
	bool held[2][IMG_SLOTS] = {{false}};
	struct kvf_put_config pc = {.replica_num = 1};
	char key[16];
	struct kvf_key k = {key, 0};
	uint64_t size = 4096;
	struct kvf_replicas out;
	enum kvf_status st;

	for (unsigned i = 0; i < IMG_OBJECTS; i++)
		for (unsigned r = 0; r < (i < IMG_SINGLE ? 1u : 2u); r++)
			held[f->seg[i][r] == SEG_B][f->off[i][r] / 4096] = true;
	for (unsigned i = 0; i <= left; i++) {
		uint64_t seg, slot;

		k.len = (size_t)snprintf(key, sizeof(key), "new-%u", i);
		kvf_batch_put_start(e, 1, &k, &size, 1, &pc, &out, &st);
		if (i == left) { /* every slot is taken now */
			assert_int_not_equal(st, KVF_OK);
			break;
		}
		assert_int_equal(st, KVF_OK);
		seg = out.replica[0].segment_id;
		slot = (out.replica[0].addr - (seg << 40)) / 4096;
		assert_true(seg == SEG_A || seg == SEG_B);
		assert_true(slot < IMG_SLOTS);
		assert_false(held[seg == SEG_B][slot]);
		held[seg == SEG_B][slot] = true;
	}
}

static struct kvf_engine *open_image_engine(const char *dir,
					    enum kvf_index_kind kind)
{
	struct kvf_config cfg;
	struct kvf_engine *e = NULL;

	kvf_config_init(&cfg);
	cfg.durability = KVF_DURABILITY_STRICT;
	cfg.data_dir = dir;
	cfg.index = kind;
	cfg.background = false;
	assert_int_equal(kvf_engine_open(&cfg, &e), KVF_OK);
	return e;
}

static void test_image_recovers_in_place(void **state)
{
	static const enum kvf_index_kind kinds[] = {KVF_INDEX_BUCKET,
						    KVF_INDEX_LFHT};
	struct image_fixture *f = calloc(1, sizeof(*f));
	char *dir;

	(void)state;
	assert_non_null(f);
	fill_image(f);
	dir = write_records(f->recs, f->n, true);
	for (unsigned k = 0; k < 2; k++) {
		struct kvf_engine *e = open_image_engine(dir, kinds[k]);
		struct kvf_engine_stats s;

		assert_int_equal(kvf_engine_get_stats(e, &s), KVF_OK);
		assert_int_equal(s.recovered_objects, IMG_OBJECTS);
		assert_objects_where_put(e, f);
		kvf_engine_close(e); /* the puts below are never ended */
	}
	{
		struct kvf_engine *e = open_image_engine(dir, KVF_INDEX_BUCKET);

		assert_rest_free(e, f);
		kvf_engine_close(e);
	}
	free(dir);
	free(f);
}

/*
 * Refusals found in the image: a bad record among many good ones (puts
 * waiting to be inserted are let go), and an overlap that only the
 * address-ordered reservation at the image's end can see.
 */
static void test_image_refused(void **state)
{
	struct image_fixture *f = calloc(1, sizeof(*f));
	static const uint64_t seg_c[] = {3};

	(void)state;
	assert_non_null(f);
	fill_image(f);
	/* A replica in a segment never mounted. */
	f->recs[f->n] =
		obj_rec(KVF__JREC_OBJECT_PUT, "unmounted", 1, seg_c, at_0);
	assert_refused_as(f->recs, f->n + 1, true);
	/* A replica on another image object's space. */
	f->recs[f->n] = obj_rec(KVF__JREC_OBJECT_PUT, "overlap", 1, f->seg[7],
				f->off[7]);
	assert_refused_as(f->recs, f->n + 1, true);
	/* Past its segment's end. */
	f->recs[f->n] =
		obj_rec(KVF__JREC_OBJECT_PUT, "outside", 1, seg_a, at_2m);
	assert_refused_as(f->recs, f->n + 1, true);
	free(f);
}

static void capture_log(void *ctx, int level, const char *msg)
{
	char *last = ctx;

	(void)level;
	snprintf(last, 512, "%s", msg);
}

/*
 * A refused put is named by its own key and sequence even when puts read
 * after it were waiting to be inserted: put "bad" (sequence 7) lands on
 * "p1"'s space, and twelve more puts follow it in the log.
 */
static void test_refusal_names_its_put(void **state)
{
	static char keys[20][8];
	static uint64_t offs[20][1];
	struct kvf__jrec recs[20];
	char last[512] = "";
	struct kvf_config cfg;
	struct kvf_engine *e = NULL;
	size_t n = 0;
	char *dir;

	(void)state;
	recs[n++] = mount_rec(SEG_A);
	for (unsigned i = 0; i < 18; i++) {
		snprintf(keys[i], sizeof(keys[i]), i == 5 ? "bad" : "p%u", i);
		offs[i][0] = (i == 5 ? 1 : i) * 4096;
		recs[n] = obj_rec(KVF__JREC_OBJECT_PUT, keys[i], 1, seg_a,
				  offs[i]);
		n++;
	}
	dir = write_journal(recs, n);
	kvf_config_init(&cfg);
	cfg.durability = KVF_DURABILITY_STRICT;
	cfg.data_dir = dir;
	cfg.background = false;
	cfg.log = capture_log;
	cfg.log_ctx = last;
	assert_int_equal(kvf_engine_open(&cfg, &e), KVF_ERR_JOURNAL_CORRUPT);
	print_message("%s\n", last);
	assert_non_null(strstr(last, "OBJECT_PUT (sequence 7, key bad)"));
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_valid_order_opens),
		cmocka_unit_test(test_image_recovers_in_place),
		cmocka_unit_test(test_image_refused),
		cmocka_unit_test(test_refusal_names_its_put),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
