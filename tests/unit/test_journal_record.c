/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_journal_record.c - the record codec: every type round
 * trips, extremes (64 KiB keys, u64 max fields, 4 replicas) survive,
 * invalid records are refused, and truncated or damaged encodings are
 * reported as corrupt without reading out of bounds.
 */
#include "config.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "journal/journal.h"
#include "journal/record.h"

static void assert_same(const struct kvf__jrec *a, const struct kvf__jrec *b)
{
	assert_int_equal(a->type, b->type);
	switch (a->type) {
	case KVF__JREC_SEGMENT_MOUNT:
		assert_true(a->mount.segment_id == b->mount.segment_id);
		assert_true(a->mount.client_id == b->mount.client_id);
		assert_true(a->mount.base == b->mount.base);
		assert_true(a->mount.size == b->mount.size);
		assert_int_equal(a->mount.name_len, b->mount.name_len);
		assert_int_equal(a->mount.endpoint_len, b->mount.endpoint_len);
		assert_memory_equal(a->mount.name, b->mount.name,
				    a->mount.name_len);
		if (a->mount.endpoint_len)
			assert_memory_equal(a->mount.endpoint,
					    b->mount.endpoint,
					    a->mount.endpoint_len);
		break;
	case KVF__JREC_SEGMENT_UNMOUNT:
		assert_true(a->unmount.segment_id == b->unmount.segment_id);
		break;
	case KVF__JREC_CLIENT_REMOVE:
		assert_true(a->client.client_id == b->client.client_id);
		break;
	default:
		assert_int_equal(a->obj.key_len, b->obj.key_len);
		assert_memory_equal(a->obj.key, b->obj.key, a->obj.key_len);
		if (a->type == KVF__JREC_OBJECT_REMOVE)
			break;
		assert_int_equal(a->obj.nr_replicas, b->obj.nr_replicas);
		assert_memory_equal(a->obj.replicas, b->obj.replicas,
				    a->obj.nr_replicas *
					    sizeof(a->obj.replicas[0]));
		if (a->type == KVF__JREC_OBJECT_REPLICAS)
			break;
		assert_true(a->obj.size == b->obj.size);
		assert_int_equal(a->obj.flags, b->obj.flags);
		assert_true(a->obj.soft_pin_deadline_ns ==
			    b->obj.soft_pin_deadline_ns);
	}
}

/* Encode, decode, compare; then every truncation must fail cleanly. */
static void round_trip(const struct kvf__jrec *rec)
{
	size_t max = kvf__jrec_encoded_max(rec), len, used;
	uint8_t *buf = malloc(max);
	struct kvf__jrec out;

	assert_non_null(buf);
	assert_int_equal(kvf__jrec_validate(rec), KVF_OK);
	len = kvf__jrec_encode(rec, buf);
	assert_true(len <= max);
	assert_int_equal(kvf__jrec_decode(buf, len, &out, &used), KVF_OK);
	assert_true(used == len);
	assert_same(rec, &out);
	for (size_t cut = 0; cut < len; cut += 1 + cut / 16) {
		uint8_t *copy = malloc(cut ? cut : 1);

		memcpy(copy, buf, cut); /* exact-size copy: ASan sees overreads */
		assert_int_equal(kvf__jrec_decode(copy, cut, &out, &used),
				 KVF_ERR_JOURNAL_CORRUPT);
		free(copy);
	}
	free(buf);
}

static void test_mount(void **state)
{
	struct kvf__jrec r = { .type = KVF__JREC_SEGMENT_MOUNT };

	r.mount.segment_id = 42;
	r.mount.client_id = UINT64_MAX;
	r.mount.base = 0x7f1234560000ull;
	r.mount.size = 1ull << 34;
	r.mount.name = "gpu0-kv";
	r.mount.name_len = 7;
	r.mount.endpoint = "10.1.2.3:12345";
	r.mount.endpoint_len = 14;
	round_trip(&r);
	r.mount.endpoint_len = 0; /* empty endpoint is allowed */
	round_trip(&r);
	r.mount.name_len = KVF__JREC_STR_MAX + 1;
	assert_int_equal(kvf__jrec_validate(&r), KVF_ERR_INVALID_ARGUMENT);
}

static void test_small_types(void **state)
{
	struct kvf__jrec r = { .type = KVF__JREC_SEGMENT_UNMOUNT };

	r.unmount.segment_id = 1ull << 63;
	round_trip(&r);
	r.type = KVF__JREC_CLIENT_REMOVE;
	r.client.client_id = 7;
	round_trip(&r);
	r.type = KVF__JREC_OBJECT_REMOVE;
	r.obj.key = "k";
	r.obj.key_len = 1;
	round_trip(&r);
}

static void test_objects(void **state)
{
	static char key[KVF__JREC_KEY_MAX];
	struct kvf__jrec r = { .type = KVF__JREC_OBJECT_PUT };

	for (size_t i = 0; i < sizeof(key); i++)
		key[i] = (char)('a' + i % 26);
	r.obj.key = key;
	r.obj.key_len = 68;
	r.obj.size = 3271557;
	r.obj.flags = KVF__OBJ_SOFT_PIN;
	r.obj.soft_pin_deadline_ns = 1800000000000ull;
	r.obj.nr_replicas = 1;
	r.obj.replicas[0] = (struct kvf__jreplica){ 3, 1ull << 30 };
	round_trip(&r);
	r.obj.key_len = KVF__JREC_KEY_MAX;
	r.obj.nr_replicas = KVF_MAX_REPLICAS;
	for (int i = 0; i < KVF_MAX_REPLICAS; i++)
		r.obj.replicas[i] = (struct kvf__jreplica){ UINT64_MAX - i,
							    UINT64_MAX };
	r.obj.flags = KVF__OBJ_HARD_PIN | KVF__OBJ_SOFT_PIN;
	r.obj.size = UINT64_MAX;
	round_trip(&r);
	r.type = KVF__JREC_OBJECT_REPLICAS;
	r.obj.nr_replicas = 2;
	round_trip(&r);
	r.type = KVF__JREC_OBJECT_REMOVE;
	round_trip(&r);
}

static void test_compact(void **state)
{
	char key[68];
	struct kvf__jrec r = { .type = KVF__JREC_OBJECT_PUT };
	uint8_t buf[256];

	memset(key, 'x', sizeof(key));
	r.obj.key = key;
	r.obj.key_len = sizeof(key);
	r.obj.size = 1 << 20;
	r.obj.nr_replicas = 1;
	r.obj.replicas[0] = (struct kvf__jreplica){ 12, 123456789 };
	/* type, len, key, size(3), flags, deadline, nr, seg, off(4) */
	assert_true(kvf__jrec_encode(&r, buf) <= 1 + 1 + 68 + 3 + 1 + 1 + 1 +
							   1 + 4);
}

static void test_invalid(void **state)
{
	struct kvf__jrec r = { .type = KVF__JREC_OBJECT_PUT };
	uint8_t bad[] = { 99, 1, 2, 3 };
	uint8_t badnr[] = { KVF__JREC_OBJECT_REPLICAS, 1, 'k', 0 };
	uint8_t badvar[] = { KVF__JREC_SEGMENT_UNMOUNT, 0xff, 0xff, 0xff,
			     0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f };
	struct kvf__jrec out;
	size_t used;

	r.obj.key = "key";
	r.obj.key_len = 3;
	r.obj.nr_replicas = 0; /* a put needs a replica */
	assert_int_equal(kvf__jrec_validate(&r), KVF_ERR_INVALID_ARGUMENT);
	r.obj.nr_replicas = KVF_MAX_REPLICAS + 1;
	assert_int_equal(kvf__jrec_validate(&r), KVF_ERR_INVALID_ARGUMENT);
	r.obj.nr_replicas = 1;
	r.obj.key_len = 0;
	assert_int_equal(kvf__jrec_validate(&r), KVF_ERR_INVALID_ARGUMENT);
	r.obj.key_len = KVF__JREC_KEY_MAX + 1;
	assert_int_equal(kvf__jrec_validate(&r), KVF_ERR_INVALID_ARGUMENT);
	r.obj.key_len = 3;
	r.obj.flags = 0x80;
	assert_int_equal(kvf__jrec_validate(&r), KVF_ERR_INVALID_ARGUMENT);
	r.type = (enum kvf__jrec_type)0;
	assert_int_equal(kvf__jrec_validate(&r), KVF_ERR_INVALID_ARGUMENT);
	assert_int_equal(kvf__jrec_decode(bad, sizeof(bad), &out, &used),
			 KVF_ERR_JOURNAL_CORRUPT);
	assert_int_equal(kvf__jrec_decode(badnr, sizeof(badnr), &out, &used),
			 KVF_ERR_JOURNAL_CORRUPT);
	assert_int_equal(kvf__jrec_decode(badvar, sizeof(badvar), &out, &used),
			 KVF_ERR_JOURNAL_CORRUPT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mount),
		cmocka_unit_test(test_small_types),
		cmocka_unit_test(test_objects),
		cmocka_unit_test(test_compact),
		cmocka_unit_test(test_invalid),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
