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
 * out of bounds.
 *
 * Log frames (record.h) group a batch's records for the LMDB log and the
 * side log: a batch is encoded once, on the caller's thread, into frames
 * of ~KVF__FRAME_TARGET bytes, and both logs store those bytes as they
 * are. Pure functions, thread-safe; no I/O.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "journal/record.h"

#define VARINT_MAX 10

/*
 * The encoder's steps, inlined into kvf__batch_encode()'s loop: out of
 * line, their calls and the three passes per record (validate, bound,
 * encode) cost 14% more instructions per batch (callgrind).
 */
#define ENC_INLINE static inline __attribute__((always_inline))

ENC_INLINE size_t put_varint(uint8_t *p, uint64_t v)
{
	uint8_t *q = p;

	while (v >= 0x80) {
		*q++ = (uint8_t)v | 0x80;
		v >>= 7;
	}
	*q++ = (uint8_t)v;
	return (size_t)(q - p);
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

ENC_INLINE size_t put_bytes(uint8_t *p, const char *s, size_t len)
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

/* kvf__jrec_validate() and kvf__jrec_encoded_max(), for inlining. */
ENC_INLINE int rec_validate(const struct kvf__jrec *rec)
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

ENC_INLINE size_t rec_max(const struct kvf__jrec *rec)
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

int kvf__jrec_validate(const struct kvf__jrec *rec)
{
	return rec_validate(rec);
}

size_t kvf__jrec_encoded_max(const struct kvf__jrec *rec)
{
	return rec_max(rec);
}

ENC_INLINE size_t put_replicas(uint8_t *p, const struct kvf__jrec *rec)
{
	size_t n = 0;

	p[n++] = rec->obj.nr_replicas;
	for (unsigned i = 0; i < rec->obj.nr_replicas; i++) {
		n += put_varint(p + n, rec->obj.replicas[i].segment_id);
		n += put_varint(p + n, rec->obj.replicas[i].offset);
	}
	return n;
}

ENC_INLINE size_t rec_encode(const struct kvf__jrec *rec, uint8_t *buf)
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

size_t kvf__jrec_encode(const struct kvf__jrec *rec, uint8_t *buf)
{
	return rec_encode(rec, buf);
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

/* --- Log frames and batches. --- */

static void frame_close(uint8_t *frame, size_t len, uint32_t nr)
{
	uint32_t vlen = (uint32_t)(len - 4);

	memcpy(frame, &vlen, 4);
	frame[4] = (uint8_t)nr;
	frame[5] = (uint8_t)(nr >> 8);
}

/* Make room for @need bytes at @b->buf; it grows at least twofold. */
static int buf_reserve(struct kvf__jbatch *b, size_t need)
{
	size_t cap = b->cap * 2 > need ? b->cap * 2 : need;
	uint8_t *buf;

	if (need <= b->cap)
		return KVF_OK;
	buf = realloc(b->buf, cap);
	if (!buf)
		return KVF_ERR_NO_MEMORY;
	b->buf = buf;
	b->cap = cap;
	return KVF_OK;
}

/*
 * One pass: each record is validated and bounded once (the buffer, kept
 * between appends by the pipeline, rarely has to grow).
 */
int kvf__batch_encode(const struct kvf__jrec *recs, size_t n,
		      struct kvf__jbatch *b)
{
	size_t off = 0, frame = 0;
	uint32_t in_frame = 0;

	b->nr_frames = 0;
	for (size_t i = 0; i < n; i++) {
		size_t max;

		if (rec_validate(&recs[i]))
			return KVF_ERR_INVALID_ARGUMENT;
		max = rec_max(&recs[i]);
		if (in_frame && (off - frame - 4 + max > KVF__FRAME_TARGET ||
				 in_frame == KVF__FRAME_MAX_RECS)) {
			frame_close(b->buf + frame, off - frame, in_frame);
			in_frame = 0;
		}
		if (off + 4 + KVF__FRAME_HDR + max > b->cap &&
		    buf_reserve(b, off + 4 + KVF__FRAME_HDR + max))
			return KVF_ERR_NO_MEMORY;
		if (!in_frame) {
			frame = off;
			off += 4 + KVF__FRAME_HDR;
			b->nr_frames++;
		}
		off += rec_encode(&recs[i], b->buf + off);
		in_frame++;
	}
	frame_close(b->buf + frame, off - frame, in_frame);
	b->len = off;
	b->nr_recs = n;
	return KVF_OK;
}

uint32_t kvf__frame_count(const uint8_t *val, size_t len)
{
	if (len < KVF__FRAME_HDR)
		return 0;
	return (uint32_t)val[0] | (uint32_t)val[1] << 8;
}

int kvf__frame_walk(const uint8_t *val, size_t len, uint32_t *count,
		    kvf__jrec_raw_fn fn, void *arg)
{
	size_t off = KVF__FRAME_HDR;
	struct kvf__jrec rec;
	uint32_t n = kvf__frame_count(val, len), i;
	int rc;

	if (n == 0)
		return KVF_ERR_JOURNAL_CORRUPT;
	for (i = 0; i < n; i++) {
		size_t used;

		if (kvf__jrec_decode(val + off, len - off, &rec, &used))
			return KVF_ERR_JOURNAL_CORRUPT;
		rc = fn(arg, &rec, i, val + off, used);
		if (rc)
			return rc;
		off += used;
	}
	if (off != len)
		return KVF_ERR_JOURNAL_CORRUPT;
	*count = n;
	return KVF_OK;
}

struct decode_fn {
	kvf__jrec_fn fn;
	void *arg;
};

static int decode_one(void *arg, const struct kvf__jrec *rec, uint32_t idx,
		      const uint8_t *raw, size_t raw_len)
{
	const struct decode_fn *d = arg;

	(void)raw;
	(void)raw_len;
	return d->fn(d->arg, rec, idx);
}

int kvf__frame_decode(const uint8_t *val, size_t len, uint32_t *count,
		      kvf__jrec_fn fn, void *arg)
{
	struct decode_fn d = { fn, arg };

	return kvf__frame_walk(val, len, count, decode_one, &d);
}

int kvf__frames_decode(const uint8_t *buf, size_t len, uint64_t nr_recs,
		       uint32_t nr_frames, kvf__jrec_fn fn, void *arg)
{
	uint64_t recs = 0, off = 0;

	for (uint32_t k = 0; k < nr_frames; k++) {
		uint32_t vlen, count;
		int rc;

		if (len - off < 4)
			return KVF_ERR_JOURNAL_CORRUPT;
		memcpy(&vlen, buf + off, 4);
		if (vlen > len - off - 4)
			return KVF_ERR_JOURNAL_CORRUPT;
		rc = kvf__frame_decode(buf + off + 4, vlen, &count, fn, arg);
		if (rc)
			return rc;
		recs += count;
		off += 4 + vlen;
	}
	return off == len && recs == nr_recs ? 0 : KVF_ERR_JOURNAL_CORRUPT;
}
