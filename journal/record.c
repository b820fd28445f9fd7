/* SPDX-License-Identifier: MIT */
/*
 * journal/record.c - the record codec.
 *
 * A record is a type byte followed by its fields; integers are LEB128
 * varints (small ids and offsets take 1-5 bytes instead of 8), byte strings
 * are a varint length then the bytes, inline. A 68-byte key OBJECT_PUT with
 * one replica encodes to ~85-95 bytes.
 *
 *   SEGMENT_MOUNT    id client base size name_len name ep_len endpoint
 *   SEGMENT_UNMOUNT  id
 *   CLIENT_REMOVE    client
 *   OBJECT_PUT       key_len key size flags(1 byte) deadline nr(1 byte)
 *                    nr * (segment_id offset)
 *   OBJECT_REPLICAS  key_len key nr(1 byte) nr * (segment_id offset)
 *   OBJECT_REMOVE    key_len key
 *
 * The decoder trusts nothing: every length is bounds-checked, varints are
 * at most 10 bytes and must fit 64 bits, counts and flags are range-checked,
 * so a damaged value is reported as KVF_ERR_JOURNAL_CORRUPT and never read
 * out of bounds. Pure functions, thread-safe.
 */
#include "config.h"

#include <string.h>

#include "journal/journal.h"

#define VARINT_MAX 10

static size_t put_varint(uint8_t *p, uint64_t v)
{
	size_t n = 0;

	while (v >= 0x80) {
		p[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	p[n++] = (uint8_t)v;
	return n;
}

struct reader {
	const uint8_t *p;
	const uint8_t *end;
	int bad;
};

static uint64_t get_varint(struct reader *r)
{
	uint64_t v = 0;
	unsigned shift = 0;

	while (r->p < r->end) {
		uint8_t b = *r->p++;

		if (shift == 63 && b > 1)
			break; /* overflows 64 bits */
		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return v;
		shift += 7;
		if (shift > 63)
			break;
	}
	r->bad = 1;
	return 0;
}

static uint8_t get_byte(struct reader *r)
{
	if (r->p >= r->end) {
		r->bad = 1;
		return 0;
	}
	return *r->p++;
}

/* A length-prefixed byte string of at most @max bytes, @min at least. */
static const char *get_bytes(struct reader *r, uint64_t min, uint64_t max,
			     uint64_t *len)
{
	const char *s;

	*len = get_varint(r);
	if (r->bad || *len < min || *len > max ||
	    *len > (uint64_t)(r->end - r->p)) {
		r->bad = 1;
		*len = 0;
		return NULL;
	}
	s = (const char *)r->p;
	r->p += *len;
	return s;
}

static size_t put_bytes(uint8_t *p, const char *s, size_t len)
{
	size_t n = put_varint(p, len);

	if (len)
		memcpy(p + n, s, len);
	return n + len;
}

static int has_replicas(enum kvf__jrec_type t)
{
	return t == KVF__JREC_OBJECT_PUT || t == KVF__JREC_OBJECT_REPLICAS;
}

int kvf__jrec_validate(const struct kvf__jrec *rec)
{
	switch (rec->type) {
	case KVF__JREC_SEGMENT_MOUNT:
		if (rec->mount.name_len > KVF__JREC_STR_MAX ||
		    rec->mount.endpoint_len > KVF__JREC_STR_MAX ||
		    (rec->mount.name_len && !rec->mount.name) ||
		    (rec->mount.endpoint_len && !rec->mount.endpoint))
			return KVF_ERR_INVALID_ARGUMENT;
		return KVF_OK;
	case KVF__JREC_SEGMENT_UNMOUNT:
	case KVF__JREC_CLIENT_REMOVE:
		return KVF_OK;
	case KVF__JREC_OBJECT_PUT:
		if (rec->obj.flags & ~KVF__OBJ_PIN_MASK)
			return KVF_ERR_INVALID_ARGUMENT;
		/* fall through */
	case KVF__JREC_OBJECT_REPLICAS:
		if (rec->obj.nr_replicas < 1 ||
		    rec->obj.nr_replicas > KVF_MAX_REPLICAS)
			return KVF_ERR_INVALID_ARGUMENT;
		/* fall through */
	case KVF__JREC_OBJECT_REMOVE:
		if (!rec->obj.key || rec->obj.key_len < 1 ||
		    rec->obj.key_len > KVF__JREC_KEY_MAX)
			return KVF_ERR_INVALID_ARGUMENT;
		return KVF_OK;
	}
	return KVF_ERR_INVALID_ARGUMENT;
}

size_t kvf__jrec_encoded_max(const struct kvf__jrec *rec)
{
	size_t n = 1;

	switch (rec->type) {
	case KVF__JREC_SEGMENT_MOUNT:
		return n + 6 * VARINT_MAX + rec->mount.name_len +
		       rec->mount.endpoint_len;
	case KVF__JREC_SEGMENT_UNMOUNT:
	case KVF__JREC_CLIENT_REMOVE:
		return n + VARINT_MAX;
	default:
		break;
	}
	n += VARINT_MAX + rec->obj.key_len;
	if (rec->type == KVF__JREC_OBJECT_PUT)
		n += 2 * VARINT_MAX + 1;
	if (has_replicas(rec->type))
		n += 1 + 2 * VARINT_MAX * (size_t)rec->obj.nr_replicas;
	return n;
}

static size_t put_replicas(uint8_t *p, const struct kvf__jrec *rec)
{
	size_t n = 0;

	p[n++] = rec->obj.nr_replicas;
	for (unsigned i = 0; i < rec->obj.nr_replicas; i++) {
		n += put_varint(p + n, rec->obj.replicas[i].segment_id);
		n += put_varint(p + n, rec->obj.replicas[i].offset);
	}
	return n;
}

size_t kvf__jrec_encode(const struct kvf__jrec *rec, uint8_t *buf)
{
	uint8_t *p = buf;

	*p++ = (uint8_t)rec->type;
	switch (rec->type) {
	case KVF__JREC_SEGMENT_MOUNT:
		p += put_varint(p, rec->mount.segment_id);
		p += put_varint(p, rec->mount.client_id);
		p += put_varint(p, rec->mount.base);
		p += put_varint(p, rec->mount.size);
		p += put_bytes(p, rec->mount.name, rec->mount.name_len);
		p += put_bytes(p, rec->mount.endpoint, rec->mount.endpoint_len);
		break;
	case KVF__JREC_SEGMENT_UNMOUNT:
		p += put_varint(p, rec->unmount.segment_id);
		break;
	case KVF__JREC_CLIENT_REMOVE:
		p += put_varint(p, rec->client.client_id);
		break;
	case KVF__JREC_OBJECT_PUT:
		p += put_bytes(p, rec->obj.key, rec->obj.key_len);
		p += put_varint(p, rec->obj.size);
		*p++ = rec->obj.flags;
		p += put_varint(p, rec->obj.soft_pin_deadline_ns);
		p += put_replicas(p, rec);
		break;
	case KVF__JREC_OBJECT_REPLICAS:
		p += put_bytes(p, rec->obj.key, rec->obj.key_len);
		p += put_replicas(p, rec);
		break;
	case KVF__JREC_OBJECT_REMOVE:
		p += put_bytes(p, rec->obj.key, rec->obj.key_len);
		break;
	}
	return (size_t)(p - buf);
}

static void get_replicas(struct reader *r, struct kvf__jrec *rec)
{
	uint8_t nr = get_byte(r);

	if (nr < 1 || nr > KVF_MAX_REPLICAS) {
		r->bad = 1;
		return;
	}
	rec->obj.nr_replicas = nr;
	for (unsigned i = 0; i < nr; i++) {
		rec->obj.replicas[i].segment_id = get_varint(r);
		rec->obj.replicas[i].offset = get_varint(r);
	}
}

static void get_key(struct reader *r, struct kvf__jrec *rec)
{
	uint64_t len;

	rec->obj.key = get_bytes(r, 1, KVF__JREC_KEY_MAX, &len);
	rec->obj.key_len = (uint32_t)len;
}

static void get_mount(struct reader *r, struct kvf__jrec *rec)
{
	uint64_t len;

	rec->mount.segment_id = get_varint(r);
	rec->mount.client_id = get_varint(r);
	rec->mount.base = get_varint(r);
	rec->mount.size = get_varint(r);
	rec->mount.name = get_bytes(r, 0, KVF__JREC_STR_MAX, &len);
	rec->mount.name_len = (uint16_t)len;
	rec->mount.endpoint = get_bytes(r, 0, KVF__JREC_STR_MAX, &len);
	rec->mount.endpoint_len = (uint16_t)len;
}

int kvf__jrec_decode(const uint8_t *buf, size_t len, struct kvf__jrec *rec,
		     size_t *used)
{
	struct reader r = { .p = buf, .end = buf + len, .bad = 0 };
	uint8_t type = get_byte(&r);

	memset(rec, 0, sizeof(*rec));
	rec->type = (enum kvf__jrec_type)type;
	switch (type) {
	case KVF__JREC_SEGMENT_MOUNT:
		get_mount(&r, rec);
		break;
	case KVF__JREC_SEGMENT_UNMOUNT:
		rec->unmount.segment_id = get_varint(&r);
		break;
	case KVF__JREC_CLIENT_REMOVE:
		rec->client.client_id = get_varint(&r);
		break;
	case KVF__JREC_OBJECT_PUT:
		get_key(&r, rec);
		rec->obj.size = get_varint(&r);
		rec->obj.flags = get_byte(&r);
		if (rec->obj.flags & ~KVF__OBJ_PIN_MASK)
			r.bad = 1;
		rec->obj.soft_pin_deadline_ns = get_varint(&r);
		get_replicas(&r, rec);
		break;
	case KVF__JREC_OBJECT_REPLICAS:
		get_key(&r, rec);
		get_replicas(&r, rec);
		break;
	case KVF__JREC_OBJECT_REMOVE:
		get_key(&r, rec);
		break;
	default:
		r.bad = 1;
	}
	if (r.bad)
		return KVF_ERR_JOURNAL_CORRUPT;
	*used = (size_t)(r.p - buf);
	return KVF_OK;
}
