/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_journal_record.c - the record codec: every type round
 * trips, extremes (64 KiB keys, u64 max fields, 4 replicas) survive,
 * invalid records are refused, and truncated or damaged encodings are
 * reported as corrupt without reading out of bounds; a batch encodes to
 * exactly the documented bytes, and the side log's payload hash is
 * XXH3-64 whichever implementation computes it.
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
#include "journal/sidelog.h"
#include "metadata/hash.h"

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

/* The reference layout (record.c's header comment), written out slowly. */
static size_t ref_varint(uint8_t *p, uint64_t v)
{
	size_t n = 0;

	do {
		p[n] = v & 0x7f;
		v >>= 7;
		if (v)
			p[n] |= 0x80;
		n++;
	} while (v);
	return n;
}

static size_t ref_record(const struct kvf__jrec *r, uint8_t *p)
{
	size_t n = 0;

	p[n++] = (uint8_t)r->type;
	switch (r->type) {
	case KVF__JREC_SEGMENT_MOUNT:
		n += ref_varint(p + n, r->mount.segment_id);
		n += ref_varint(p + n, r->mount.client_id);
		n += ref_varint(p + n, r->mount.base);
		n += ref_varint(p + n, r->mount.size);
		n += ref_varint(p + n, r->mount.name_len);
		memcpy(p + n, r->mount.name, r->mount.name_len);
		n += r->mount.name_len;
		n += ref_varint(p + n, r->mount.endpoint_len);
		memcpy(p + n, r->mount.endpoint, r->mount.endpoint_len);
		n += r->mount.endpoint_len;
		return n;
	case KVF__JREC_SEGMENT_UNMOUNT:
		return n + ref_varint(p + n, r->unmount.segment_id);
	case KVF__JREC_CLIENT_REMOVE:
		return n + ref_varint(p + n, r->client.client_id);
	default:
		break;
	}
	n += ref_varint(p + n, r->obj.key_len);
	memcpy(p + n, r->obj.key, r->obj.key_len);
	n += r->obj.key_len;
	if (r->type == KVF__JREC_OBJECT_REMOVE)
		return n;
	if (r->type == KVF__JREC_OBJECT_PUT) {
		n += ref_varint(p + n, r->obj.size);
		p[n++] = r->obj.flags;
		n += ref_varint(p + n, r->obj.soft_pin_deadline_ns);
	}
	p[n++] = r->obj.nr_replicas;
	for (unsigned i = 0; i < r->obj.nr_replicas; i++) {
		n += ref_varint(p + n, r->obj.replicas[i].segment_id);
		n += ref_varint(p + n, r->obj.replicas[i].offset);
	}
	return n;
}

/*
 * A batch of every record type, with fields of every varint length,
 * encodes to the reference bytes: log frames, each a u32 value length, a
 * u16 record count and the records, cut before a record whose bound
 * would take the frame past KVF__FRAME_TARGET.
 */
static void test_batch_bytes(void **state)
{
	enum { N = 300 };
	static struct kvf__jrec recs[N];
	static char keys[N][80];
	struct kvf__jbatch b = { 0 };
	uint8_t *ref = malloc(N * 256), *frame = NULL;
	size_t off = 0, vlen = 0;
	uint32_t frames = 0, in_frame = 0;

	assert_non_null(ref);
	for (int i = 0; i < N; i++) {
		struct kvf__jrec *r = &recs[i];
		uint64_t big = 1ull << (i % 64);

		memset(keys[i], 'a' + i % 26, sizeof(keys[i]));
		r->type = (enum kvf__jrec_type)(1 + i % 6);
		if (r->type == KVF__JREC_SEGMENT_MOUNT) {
			r->mount.segment_id = big;
			r->mount.client_id = big - 1;
			r->mount.base = UINT64_MAX - big;
			r->mount.size = big << 1;
			r->mount.name = keys[i];
			r->mount.name_len = (uint16_t)(i % 9);
			r->mount.endpoint = keys[i];
			r->mount.endpoint_len = 13;
		} else if (r->type == KVF__JREC_SEGMENT_UNMOUNT) {
			r->unmount.segment_id = big;
		} else if (r->type == KVF__JREC_CLIENT_REMOVE) {
			r->client.client_id = big + 5;
		} else {
			r->obj.key = keys[i];
			r->obj.key_len = 1 + (uint32_t)(i % 80);
			r->obj.size = big;
			r->obj.flags = (uint8_t)(i % 4);
			r->obj.soft_pin_deadline_ns = big * 3 + (uint64_t)i;
			r->obj.nr_replicas =
				(uint8_t)(1 + i % KVF_MAX_REPLICAS);
			for (int k = 0; k < r->obj.nr_replicas; k++)
				r->obj.replicas[k] = (struct kvf__jreplica){
					(uint64_t)k + big, big >> k };
		}
	}
	assert_int_equal(kvf__batch_encode(recs, N, &b), KVF_OK);
	for (int i = 0; i < N; i++) {
		size_t max = kvf__jrec_encoded_max(&recs[i]);

		if (in_frame && vlen + max > KVF__FRAME_TARGET) {
			memcpy(frame, &(uint32_t){ (uint32_t)vlen }, 4);
			frame[4] = (uint8_t)in_frame;
			frame[5] = (uint8_t)(in_frame >> 8);
			in_frame = 0;
		}
		if (!in_frame) {
			frame = ref + off;
			off += 6;
			vlen = 2;
			frames++;
		}
		vlen += ref_record(&recs[i], ref + off);
		off = (size_t)(frame - ref) + 4 + vlen;
		in_frame++;
	}
	memcpy(frame, &(uint32_t){ (uint32_t)vlen }, 4);
	frame[4] = (uint8_t)in_frame;
	frame[5] = (uint8_t)(in_frame >> 8);
	assert_true(frames > 1);
	assert_int_equal(b.nr_frames, frames);
	assert_true(b.nr_recs == N);
	assert_true(b.len == off);
	assert_memory_equal(b.buf, ref, off);
	free(b.buf);
	free(ref);
}

/*
 * The side log checks each payload with XXH3-64, and frames written by
 * one build must check out in another: whatever implementation hashes
 * (inlined, or the library's CPU-dispatched one), it is XXH3-64 of the
 * payload, at every length and alignment.
 */
static void test_payload_hash(void **state)
{
	enum { MAX = 20000 };
	uint8_t *buf = malloc(MAX + 64);

	assert_non_null(buf);
	for (size_t i = 0; i < MAX + 64; i++)
		buf[i] = (uint8_t)(i * 2654435761u >> 13);
	for (size_t len = 0; len <= MAX; len += 1 + len / 7) {
		for (size_t at = 0; at < 3; at++) {
			struct kvf__jbatch b = { .buf = buf + at, .len = len };

			assert_true(kvf__sidelog_hash(&b) ==
				    XXH3_64bits(buf + at, len));
		}
	}
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mount),
		cmocka_unit_test(test_small_types),
		cmocka_unit_test(test_objects),
		cmocka_unit_test(test_compact),
		cmocka_unit_test(test_invalid),
		cmocka_unit_test(test_batch_bytes),
		cmocka_unit_test(test_payload_hash),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
