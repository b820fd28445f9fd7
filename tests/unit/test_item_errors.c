/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_item_errors.c - every per-item error a batch call
 * documents (kvforge/batch.h) that a memory-only engine can provoke, each
 * call in one mixed batch: every item gets its own status, and the items
 * that pass are not held back by the ones that fail. The journal errors
 * are provoked in test_durability (fault hooks); KVF_ERR_NO_MEMORY and
 * KVF_ERR_BUSY on put_start need an allocator failure or a race.
 */
#include "config.h"

#include "tests/unit/helpers.h"

#define C1 11
#define C2 12
#define NK 8

struct batch {
	struct kvf_key keys[NK];
	uint64_t sizes[NK];
	struct kvf_replicas out[NK];
	enum kvf_status st[NK];
	size_t n;
	char too_long[4097 + 1];
};

static void add(struct batch *b, const char *key, uint64_t size)
{
	b->keys[b->n] = key_of(key);
	b->sizes[b->n++] = size;
}

/* The two errors every call shares: an empty key, a key past
 * max_key_len (4096 by default), and one key twice. */
static void add_invalid(struct batch *b)
{
	memset(b->too_long, 'k', sizeof(b->too_long) - 1);
	b->too_long[sizeof(b->too_long) - 1] = '\0';
	add(b, "", 1);
	add(b, b->too_long, 1);
	add(b, "twice", 1);
	add(b, "twice", 1);
}

static void assert_invalid(const struct batch *b)
{
	assert_int_equal(b->st[0], KVF_ERR_INVALID_KEY);
	assert_int_equal(b->st[1], KVF_ERR_INVALID_KEY);
	assert_int_equal(b->st[2], KVF_ERR_DUPLICATE_KEY);
	assert_int_equal(b->st[3], KVF_ERR_DUPLICATE_KEY);
}

static int setup(void **state)
{
	struct fixture *f;

	fixture_setup(state);
	f = *state;
	assert_int_equal(mount(f->e, C1, 1, 16 * MIB), KVF_OK);
	assert_int_equal(mount(f->e, C2, 2, 16 * MIB), KVF_OK);
	return 0;
}

static void test_put_start(void **state)
{
	struct fixture *f = *state;
	struct kvf_put_config pc = {.replica_num = 2};
	struct batch b = {.n = 0};

	assert_int_equal(put_complete(f->e, C1, "done", MIB, 1), KVF_OK);
	/* 12 MiB taken in one of the two segments: a 2-replica put of 8 MiB
	 * fits two empty segments, but not now. */
	assert_int_equal(put_complete(f->e, C1, "filler", 12 * MIB, 1), KVF_OK);
	add_invalid(&b);
	add(&b, "zero", 0);	   /* INVALID_PARAMS: size 0 */
	add(&b, "huge", 32 * MIB); /* INVALID_PARAMS: never fits */
	add(&b, "done", MIB);	   /* OBJECT_ALREADY_EXISTS */
	add(&b, "big", 8 * MIB);   /* NO_SPACE */
	assert_int_equal(kvf_batch_put_start(f->e, C1, b.keys, b.sizes, b.n,
					     &pc, b.out, b.st),
			 KVF_ERR_PARTIAL);
	assert_invalid(&b);
	assert_int_equal(b.st[4], KVF_ERR_INVALID_PARAMS);
	assert_int_equal(b.st[5], KVF_ERR_INVALID_PARAMS);
	assert_int_equal(b.st[6], KVF_ERR_OBJECT_ALREADY_EXISTS);
	assert_int_equal(b.st[7], KVF_ERR_NO_SPACE);
	/* The failures changed nothing and held nothing back. */
	pc.replica_num = 1;
	b.n = 0;
	add(&b, "small", MIB);
	assert_int_equal(kvf_batch_put_start(f->e, C1, b.keys, b.sizes, 1, &pc,
					     b.out, b.st),
			 KVF_OK);
	assert_int_equal(stats_of(f->e).processing, 1);
}

/* put_end and put_revoke share their item errors. */
static void end_or_revoke(struct fixture *f, bool end)
{
	struct batch b = {.n = 0};
	enum kvf_status ret;

	assert_int_equal(put1(f->e, C1, "mine", MIB, 1, NULL), KVF_OK);
	assert_int_equal(put1(f->e, C2, "theirs", MIB, 1, NULL), KVF_OK);
	assert_int_equal(put_complete(f->e, C1, "done", MIB, 1), KVF_OK);
	add_invalid(&b);
	add(&b, "absent", 0); /* OBJECT_NOT_FOUND */
	add(&b, "theirs", 0); /* ILLEGAL_CLIENT */
	add(&b, "done", 0);   /* OBJECT_ALREADY_EXISTS */
	add(&b, "mine", 0);   /* OK */
	ret = end ? kvf_batch_put_end(f->e, C1, b.keys, b.n, b.st)
		  : kvf_batch_put_revoke(f->e, C1, b.keys, b.n, b.st);
	assert_int_equal(ret, KVF_ERR_PARTIAL);
	assert_invalid(&b);
	assert_int_equal(b.st[4], KVF_ERR_OBJECT_NOT_FOUND);
	assert_int_equal(b.st[5], KVF_ERR_ILLEGAL_CLIENT);
	assert_int_equal(b.st[6], KVF_ERR_OBJECT_ALREADY_EXISTS);
	assert_int_equal(b.st[7], KVF_OK);
	assert_int_equal(exist1(f->e, "mine"),
			 end ? KVF_OK : KVF_ERR_OBJECT_NOT_FOUND);
	assert_int_equal(get1(f->e, "theirs", NULL), KVF_ERR_OBJECT_NOT_READY);
}

static void test_put_end(void **state)
{
	end_or_revoke(*state, true);
}

static void test_put_revoke(void **state)
{
	end_or_revoke(*state, false);
}

static void test_get_and_exist(void **state)
{
	struct fixture *f = *state;
	struct batch b = {.n = 0};

	assert_int_equal(put1(f->e, C1, "processing", MIB, 1, NULL), KVF_OK);
	assert_int_equal(put_complete(f->e, C1, "done", MIB, 1), KVF_OK);
	add_invalid(&b);
	add(&b, "absent", 0);
	add(&b, "processing", 0);
	add(&b, "done", 0);
	assert_int_equal(kvf_batch_get(f->e, b.keys, b.n, b.out, b.st, NULL),
			 KVF_ERR_PARTIAL);
	assert_invalid(&b);
	assert_int_equal(b.st[4], KVF_ERR_OBJECT_NOT_FOUND);
	assert_int_equal(b.st[5], KVF_ERR_OBJECT_NOT_READY);
	assert_int_equal(b.st[6], KVF_OK);
	assert_int_equal(b.out[6].count, 1);
	/* exist: not found is an answer; only the invalid keys fail. */
	assert_int_equal(kvf_batch_exist(f->e, b.keys, b.n, b.st),
			 KVF_ERR_PARTIAL);
	assert_invalid(&b);
	assert_int_equal(b.st[4], KVF_ERR_OBJECT_NOT_FOUND);
	assert_int_equal(b.st[5], KVF_ERR_OBJECT_NOT_FOUND);
	assert_int_equal(b.st[6], KVF_OK);
	assert_int_equal(kvf_batch_exist(f->e, &b.keys[4], 3, b.st), KVF_OK);
}

static void test_remove(void **state)
{
	struct fixture *f = *state;
	struct kvf_key pinned = key_of("pinned");
	uint64_t size = MIB;
	struct kvf_put_config hard = {.replica_num = 1, .hard_pin = true};
	struct kvf_replicas r;
	struct batch b = {.n = 0};
	enum kvf_status st;

	assert_int_equal(put1(f->e, C1, "processing", MIB, 1, NULL), KVF_OK);
	assert_int_equal(put_complete(f->e, C1, "leased", MIB, 1), KVF_OK);
	assert_int_equal(get1(f->e, "leased", NULL), KVF_OK);
	assert_int_equal(kvf_batch_put_start(f->e, C1, &pinned, &size, 1, &hard,
					     &r, &st),
			 KVF_OK);
	assert_int_equal(end1(f->e, C1, "pinned"), KVF_OK);
	assert_int_equal(put_complete(f->e, C1, "plain", MIB, 1), KVF_OK);
	add_invalid(&b);
	add(&b, "absent", 0);	  /* OBJECT_NOT_FOUND */
	add(&b, "processing", 0); /* OBJECT_NOT_READY */
	add(&b, "leased", 0);	  /* OBJECT_HAS_LEASE */
	add(&b, "pinned", 0);	  /* OBJECT_PINNED */
	/* A batch holds NK keys: "plain" goes alone below. */
	assert_int_equal(kvf_batch_remove(f->e, b.keys, b.n, false, b.st),
			 KVF_ERR_PARTIAL);
	assert_invalid(&b);
	assert_int_equal(b.st[4], KVF_ERR_OBJECT_NOT_FOUND);
	assert_int_equal(b.st[5], KVF_ERR_OBJECT_NOT_READY);
	assert_int_equal(b.st[6], KVF_ERR_OBJECT_HAS_LEASE);
	assert_int_equal(b.st[7], KVF_ERR_OBJECT_PINNED);
	assert_int_equal(exist1(f->e, "leased"), KVF_OK);
	assert_int_equal(exist1(f->e, "pinned"), KVF_OK);
	assert_int_equal(remove1(f->e, "plain", false), KVF_OK);
	/* force overrides lease and pin, never a processing put. */
	assert_int_equal(kvf_batch_remove(f->e, &b.keys[5], 3, true, b.st),
			 KVF_ERR_PARTIAL);
	assert_int_equal(b.st[0], KVF_ERR_OBJECT_NOT_READY);
	assert_int_equal(b.st[1], KVF_OK);
	assert_int_equal(b.st[2], KVF_OK);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_put_start, setup,
						fixture_teardown),
		cmocka_unit_test_setup_teardown(test_put_end, setup,
						fixture_teardown),
		cmocka_unit_test_setup_teardown(test_put_revoke, setup,
						fixture_teardown),
		cmocka_unit_test_setup_teardown(test_get_and_exist, setup,
						fixture_teardown),
		cmocka_unit_test_setup_teardown(test_remove, setup,
						fixture_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
