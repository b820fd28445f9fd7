/* SPDX-License-Identifier: MIT */
/*
 * wire/spack.h - struct_pack reader and writer (the subset Mooncake's
 * master API uses), and the growable output buffer.
 *
 * Envelope: u32 type hash (bit 0 = a metainfo byte follows), [metainfo],
 * [type literal + NUL when metainfo bit 2 is set], payload. Metainfo bits
 * 3-4 give the width of every container length in the message (1/2/4/8).
 *
 * Reader: a cursor with a sticky error. Every read checks the bounds; after
 * the first failure reads return zeros and the error stays, so a decoder
 * reads a whole structure and checks once. Counts are checked against the
 * bytes left (each element needs at least @min bytes) before any loop, so
 * a forged count cannot make a decoder spin.
 *
 * Writer: writes straight into a struct kvf_wbuf with a chosen length
 * width and records the largest container length written; when that does
 * not fit the width, the caller rewinds and writes again with the width
 * kvf_spack_w_width_needed() names (upstream picks the width from the
 * largest container length of the message, so a deterministic message is
 * byte-identical to upstream's short form).
 */
#ifndef KVF_SERVER_SPACK_H
#define KVF_SERVER_SPACK_H

#include <endian.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/**
 * enum kvf_wire_status - results of the wire codec (0 = success). Distinct
 * from enum kvf_status (no overlap) so a caller can tell a protocol fault
 * from an engine error; kvf_wire_strerror() names them.
 */
#define KVF_WIRE_STATUS_LIST(X)                                                \
	X(OK, 0, "success")                                                    \
	X(ERR_TRUNCATED, -1001, "message ends early")                          \
	X(ERR_LENGTH, -1002, "a length points past the end of the message")    \
	X(ERR_HASH, -1003, "type hash does not match this Mooncake ABI")       \
	X(ERR_VARIANT, -1004, "invalid variant index")                         \
	X(ERR_VALUE, -1005, "invalid value (bool, optional or expected flag)") \
	X(ERR_TOO_MANY, -1006, "more items than the receiver accepts")         \
	X(ERR_METAINFO, -1007, "unsupported struct_pack metainfo")             \
	X(ERR_MAGIC, -1008, "bad frame magic")                                 \
	X(ERR_VERSION, -1009, "unsupported frame version")                     \
	X(ERR_SERIALIZE, -1010, "unsupported serialize type")                  \
	X(ERR_UNKNOWN_RPC, -1011, "function id not registered in this ABI")    \
	X(ERR_NO_MEMORY, -1012, "out of memory")                               \
	X(ERR_UNSUPPORTED, -1013, "message has no codec in this ABI")

enum kvf_wire_status {
#define KVF_WIRE_ENUM(name, value, msg) KVF_WIRE_##name = value,
	KVF_WIRE_STATUS_LIST(KVF_WIRE_ENUM)
#undef KVF_WIRE_ENUM
};

/** kvf_wire_strerror() - message for a kvf_wire_status (static string). */
const char *kvf_wire_strerror(int status);

/**
 * struct kvf_wbuf - a growable byte buffer owned by its user (one per
 * connection or thread, reused: reset keeps the memory).
 * @failed: set when a growth failed; later writes are dropped, so an
 * encoder checks once at the end.
 */
struct kvf_wbuf {
	uint8_t *data;
	size_t len;
	size_t cap;
	bool failed;
};

/** kvf_wbuf_init() - an empty buffer (no allocation yet). */
void kvf_wbuf_init(struct kvf_wbuf *w);
/** kvf_wbuf_free() - release the memory; @w is empty afterwards. */
void kvf_wbuf_free(struct kvf_wbuf *w);
/** kvf_wbuf_reset() - forget the contents, keep the memory. */
static inline void kvf_wbuf_reset(struct kvf_wbuf *w)
{
	w->len = 0;
	w->failed = false;
}

/**
 * kvf_wbuf_grow() - make room for @n more bytes (slow path).
 * Return: a pointer to the @n bytes at the end (len not advanced), or NULL
 * with @failed set.
 */
uint8_t *kvf_wbuf_grow(struct kvf_wbuf *w, size_t n);

/**
 * kvf_wbuf_reserve() - room for @n more bytes at the end (len not
 * advanced): the caller writes there, then adds what it wrote to @len.
 * Return: the room, or NULL with @failed set.
 */
static inline uint8_t *kvf_wbuf_reserve(struct kvf_wbuf *w, size_t n)
{
	if (w->cap - w->len < n)
		return kvf_wbuf_grow(w, n);
	return w->data + w->len;
}

/** kvf_wbuf_put() - append @n bytes, growing as needed. */
static inline void kvf_wbuf_put(struct kvf_wbuf *w, const void *p, size_t n)
{
	uint8_t *d;

	if (w->cap - w->len < n) {
		d = kvf_wbuf_grow(w, n);
		if (!d)
			return;
	} else if (!n) {
		return;
	} else {
		d = w->data + w->len;
	}
	memcpy(d, p, n);
	w->len += n;
}

/* Type hash helpers: compare hashes as the readers do, ignoring bit 0. */
#define KVF_SPACK_HASH_META 0x1u
#define KVF_SPACK_META_LITERAL 0x04u
#define KVF_SPACK_META_WIDTH_SHIFT 3
/* The type hash of std::string (literal 80 0c): transport error bodies. */
#define KVF_SPACK_HASH_STRING 0x9dcffa76u

static inline bool kvf_spack_hash_eq(uint32_t a, uint32_t b)
{
	return (a >> 1) == (b >> 1);
}

/**
 * struct kvf_spack_r - a reader over one struct_pack message.
 * @p: next byte. @end: one past the last byte.
 * @width: container length width (1, 2, 4 or 8).
 * @err: 0 or the first enum kvf_wire_status met.
 * @hash: the type hash found in the envelope (for logging a mismatch).
 */
struct kvf_spack_r {
	const uint8_t *p;
	const uint8_t *end;
	uint8_t width;
	int err;
	uint32_t hash;
};

/**
 * kvf_spack_r_begin() - open a message and check its type hash.
 * @r: the reader to set up.
 * @buf: the message (a request or response body).
 * @len: its length.
 * @hash: the expected type hash (bit 0 ignored).
 *
 * Accepts both forms: short (no metainfo, or metainfo without a literal)
 * and debug (metainfo bit 2, NUL-terminated literal, skipped unchecked).
 * Return: 0, or %KVF_WIRE_ERR_HASH (r->hash holds the hash found),
 * %KVF_WIRE_ERR_TRUNCATED, %KVF_WIRE_ERR_METAINFO. Also stored in r->err.
 */
int kvf_spack_r_begin(struct kvf_spack_r *r, const void *buf, size_t len,
		      uint32_t hash);

/** kvf_spack_r_fail() - record @err unless an error is already recorded. */
static inline void kvf_spack_r_fail(struct kvf_spack_r *r, int err)
{
	if (!r->err)
		r->err = err;
	r->p = r->end;
}

/** kvf_spack_r_take() - consume @n bytes; NULL (and an error) if short. */
static inline const uint8_t *kvf_spack_r_take(struct kvf_spack_r *r, size_t n)
{
	const uint8_t *p = r->p;

	if ((size_t)(r->end - p) < n) {
		kvf_spack_r_fail(r, KVF_WIRE_ERR_TRUNCATED);
		return NULL;
	}
	r->p = p + n;
	return p;
}

static inline uint8_t kvf_spack_r_u8(struct kvf_spack_r *r)
{
	const uint8_t *p = kvf_spack_r_take(r, 1);

	return p ? p[0] : 0;
}

static inline uint32_t kvf_spack_r_u32(struct kvf_spack_r *r)
{
	const uint8_t *p = kvf_spack_r_take(r, 4);
	uint32_t v = 0;

	if (p)
		memcpy(&v, p, 4);
	return le32toh(v);
}

static inline uint64_t kvf_spack_r_u64(struct kvf_spack_r *r)
{
	const uint8_t *p = kvf_spack_r_take(r, 8);
	uint64_t v = 0;

	if (p)
		memcpy(&v, p, 8);
	return le64toh(v);
}

/** kvf_spack_r_bool() - a bool or a 0/1 flag (optional, expected): other
 * values are refused with %KVF_WIRE_ERR_VALUE. */
static inline bool kvf_spack_r_bool(struct kvf_spack_r *r)
{
	uint8_t v = kvf_spack_r_u8(r);

	if (v > 1)
		kvf_spack_r_fail(r, KVF_WIRE_ERR_VALUE);
	return v == 1;
}

/* kvf__spack_r_len_slow() - a container length of any width (internal). */
uint64_t kvf__spack_r_len_slow(struct kvf_spack_r *r);

/* A container length; the common one-byte width inline. */
static inline uint64_t kvf__spack_r_len(struct kvf_spack_r *r)
{
	if (r->width == 1 && r->p < r->end)
		return *r->p++;
	return kvf__spack_r_len_slow(r);
}

/**
 * kvf_spack_r_count() - a container length whose elements take at least
 * @min bytes each (0 allowed only for elements that can be empty).
 * Return: the count, or 0 with %KVF_WIRE_ERR_LENGTH when the rest of the
 * message cannot hold that many.
 */
static inline uint64_t kvf_spack_r_count(struct kvf_spack_r *r, size_t min)
{
	uint64_t n = kvf__spack_r_len(r), need;
	size_t left = (size_t)(r->end - r->p);

	if (r->err)
		return 0;
	if (__builtin_mul_overflow(n, (uint64_t)min, &need) || need > left) {
		kvf_spack_r_fail(r, KVF_WIRE_ERR_LENGTH);
		return 0;
	}
	return n;
}

/**
 * kvf_spack_r_str() - a string as a view into the message; "" (and
 * %KVF_WIRE_ERR_LENGTH) when its length runs past the end.
 */
static inline const char *kvf_spack_r_str(struct kvf_spack_r *r, size_t *len)
{
	uint64_t n = kvf__spack_r_len(r);
	const char *s = (const char *)r->p;

	if ((uint64_t)(r->end - r->p) < n) {
		kvf_spack_r_fail(r, KVF_WIRE_ERR_LENGTH);
		*len = 0;
		return "";
	}
	r->p += n;
	*len = (size_t)n;
	return s;
}

/**
 * kvf_spack_r_skip() - consume one value of the type the literal at *@lit
 * describes (advancing *@lit past it), validating as the typed decoders
 * do. Used for messages without a typed decoder and by tests.
 * @lit_end: end of the literal. Return: 0 or the reader's error.
 */
int kvf_spack_r_skip(struct kvf_spack_r *r, const uint8_t **lit,
		     const uint8_t *lit_end);

/**
 * struct kvf_spack_w - a writer appending one message to a buffer.
 * @buf: the output. @start: where the message begins in @buf (to rewind).
 * @width: the length width in use. @max_len: the largest length written.
 */
struct kvf_spack_w {
	struct kvf_wbuf *buf;
	size_t start;
	uint8_t width;
	uint64_t max_len;
};

/**
 * kvf_spack_w_begin() - start a message of type @hash at the end of @buf,
 * with container lengths of @width bytes (1 = no metainfo byte).
 */
void kvf_spack_w_begin(struct kvf_spack_w *w, struct kvf_wbuf *buf,
		       uint32_t hash, uint8_t width);

/**
 * kvf_spack_w_width_needed() - after a message was written: 0 when its
 * width fits every length written, else the width to write it again with
 * (the caller truncates @buf to @start first: kvf_spack_w_rewind()).
 */
uint8_t kvf_spack_w_width_needed(const struct kvf_spack_w *w);

/** kvf_spack_w_rewind() - drop the message written so far. */
static inline void kvf_spack_w_rewind(struct kvf_spack_w *w)
{
	w->buf->len = w->start;
}

static inline void kvf_spack_w_u8(struct kvf_spack_w *w, uint8_t v)
{
	kvf_wbuf_put(w->buf, &v, 1);
}

static inline void kvf_spack_w_u32(struct kvf_spack_w *w, uint32_t v)
{
	v = htole32(v);
	kvf_wbuf_put(w->buf, &v, 4);
}

static inline void kvf_spack_w_u64(struct kvf_spack_w *w, uint64_t v)
{
	v = htole64(v);
	kvf_wbuf_put(w->buf, &v, 8);
}

/* kvf__spack_w_count_slow() - a container length, any width (internal). */
void kvf__spack_w_count_slow(struct kvf_spack_w *w, uint64_t n);

/** kvf_spack_w_count() - a container length in the message's width. */
static inline void kvf_spack_w_count(struct kvf_spack_w *w, uint64_t n)
{
	struct kvf_wbuf *b = w->buf;

	if (n > w->max_len)
		w->max_len = n;
	if (w->width == 1 && b->cap > b->len) {
		b->data[b->len++] = (uint8_t)n;
		return;
	}
	kvf__spack_w_count_slow(w, n);
}

/** kvf_spack_w_str() - a string: length, then the bytes. */
static inline void kvf_spack_w_str(struct kvf_spack_w *w, const char *s,
				   size_t n)
{
	kvf_spack_w_count(w, n);
	kvf_wbuf_put(w->buf, s, n);
}

#endif /* KVF_SERVER_SPACK_H */
