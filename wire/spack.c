// SPDX-License-Identifier: MIT
/*
 * wire/spack.c - struct_pack reader/writer slow paths and the generic
 * literal-driven validator.
 *
 * The inline fast paths live in spack.h. Here: the envelope (hash,
 * metainfo, optional embedded literal), container lengths in the
 * message's width, and kvf_spack_r_skip(), which walks a type literal
 * (protocol.md §3.4) to consume one value of that type. The walker
 * recurses once per nesting level of the *literal* (bounded by the
 * literal tables compiled in, never by input), and loops over input counts
 * only after kvf_spack_r_count() proved the bytes are there.
 */
#include "wire/spack.h"

#include <stdlib.h>

const char *kvf_wire_strerror(int status)
{
	switch (status) {
#define KVF_WIRE_CASE(name, value, msg)                                        \
	case value:                                                            \
		return msg;
		KVF_WIRE_STATUS_LIST(KVF_WIRE_CASE)
#undef KVF_WIRE_CASE
	}
	return "unknown wire status";
}

void kvf_wbuf_init(struct kvf_wbuf *w)
{
	*w = (struct kvf_wbuf){0};
}

void kvf_wbuf_free(struct kvf_wbuf *w)
{
	free(w->data);
	kvf_wbuf_init(w);
}

uint8_t *kvf_wbuf_grow(struct kvf_wbuf *w, size_t n)
{
	size_t cap = w->cap ? w->cap : 4096;
	uint8_t *d;

	if (w->failed)
		return NULL;
	if (n > SIZE_MAX / 2 - w->len)
		goto err_fail;
	while (cap - w->len < n)
		cap *= 2;
	if (cap != w->cap) {
		d = realloc(w->data, cap);
		if (!d)
			goto err_fail;
		w->data = d;
		w->cap = cap;
	}
	return w->data + w->len;

err_fail:
	w->failed = true;
	return NULL;
}

int kvf_spack_r_begin(struct kvf_spack_r *r, const void *buf, size_t len,
		      uint32_t hash)
{
	static const uint8_t nothing;
	uint8_t meta = 0;

	/* an empty body may come as NULL: never offset a null pointer */
	r->p = buf ? buf : &nothing;
	r->end = r->p + (buf ? len : 0);
	r->width = 1;
	r->err = 0;
	r->hash = kvf_spack_r_u32(r);
	if (r->err)
		return r->err;
	if (!kvf_spack_hash_eq(r->hash, hash)) {
		kvf_spack_r_fail(r, KVF_WIRE_ERR_HASH);
		return r->err;
	}
	if (r->hash & KVF_SPACK_HASH_META)
		meta = kvf_spack_r_u8(r);
	/* Bits 0-1 announce a compatible<> size, which no master type has. */
	if (meta & 0x03 || meta >> 5)
		kvf_spack_r_fail(r, KVF_WIRE_ERR_METAINFO);
	r->width = (uint8_t)(1u << ((meta >> KVF_SPACK_META_WIDTH_SHIFT) & 3));
	if (meta & KVF_SPACK_META_LITERAL) {
		const uint8_t *nul =
			r->p < r->end ? memchr(r->p, 0, (size_t)(r->end - r->p))
				      : NULL;

		if (!nul)
			kvf_spack_r_fail(r, KVF_WIRE_ERR_TRUNCATED);
		else
			r->p = nul + 1;
	}
	return r->err;
}

uint64_t kvf__spack_r_len_slow(struct kvf_spack_r *r)
{
	const uint8_t *p = kvf_spack_r_take(r, r->width);
	uint64_t v = 0;

	if (!p)
		return 0;
	for (unsigned i = 0; i < r->width; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

/* Literal bytes (protocol.md §3.4). */
enum {
	LIT_I32 = 0x01,
	LIT_U32 = 0x02,
	LIT_I64 = 0x03,
	LIT_U64 = 0x04,
	LIT_I8 = 0x05,
	LIT_U8 = 0x06,
	LIT_I16 = 0x07,
	LIT_U16 = 0x08,
	LIT_BOOL = 0x0b,
	LIT_CHAR = 0x0c,
	LIT_F32 = 0x11,
	LIT_F64 = 0x12,
	LIT_STRING = 0x80,
	LIT_MAP = 0x82,
	LIT_VECTOR = 0x84,
	LIT_OPTIONAL = 0x85,
	LIT_VARIANT = 0x86,
	LIT_EXPECTED = 0x87,
	LIT_VOID = 0xfa,
	LIT_STRUCT = 0xfd,
	LIT_END = 0xff,
};

/* Width of a fundamental literal byte, or 0 if it is not one. */
static size_t scalar_size(uint8_t t)
{
	switch (t) {
	case LIT_I8:
	case LIT_U8:
	case LIT_BOOL:
	case LIT_CHAR:
		return 1;
	case LIT_I16:
	case LIT_U16:
		return 2;
	case LIT_I32:
	case LIT_U32:
	case LIT_F32:
		return 4;
	case LIT_I64:
	case LIT_U64:
	case LIT_F64:
		return 8;
	}
	return 0;
}

static int skip_value(struct kvf_spack_r *r, const uint8_t **lit,
		      const uint8_t *end);

/*
 * Advance *lit past one type without consuming input (a branch not taken):
 * walk it with a reader that has no bytes, whose error is dropped.
 */
static void lit_pass(const uint8_t **lit, const uint8_t *end)
{
	static const uint8_t nothing;
	struct kvf_spack_r none = {.p = &nothing, .end = &nothing, .width = 1};

	(void)skip_value(&none, lit, end);
}

/*
 * A trivially copyable aggregate's literal ends with two size literals
 * (max field alignment, alignof) before 0xff; they carry no payload. Their
 * bytes (size + 129) can equal type bytes (0x82 map, 0x85 optional), but
 * no field type's literal is two bytes >= 0x81 followed by the end marker,
 * so that pattern is the suffix.
 */
static bool at_align_suffix(const uint8_t *lit, const uint8_t *end)
{
	return end - lit >= 3 && lit[0] >= 0x81 && lit[0] < LIT_END &&
	       lit[1] >= 0x81 && lit[1] < LIT_END && lit[2] == LIT_END;
}

static int skip_struct(struct kvf_spack_r *r, const uint8_t **lit,
		       const uint8_t *end)
{
	while (*lit < end && **lit != LIT_END) {
		if (at_align_suffix(*lit, end)) {
			*lit += 2;
			break;
		}
		skip_value(r, lit, end);
	}
	if (*lit < end)
		(*lit)++;
	else
		kvf_spack_r_fail(r, KVF_WIRE_ERR_UNSUPPORTED);
	return r->err;
}

static int skip_value(struct kvf_spack_r *r, const uint8_t **lit,
		      const uint8_t *end)
{
	uint8_t t;
	size_t sz;

	if (*lit >= end) {
		kvf_spack_r_fail(r, KVF_WIRE_ERR_UNSUPPORTED);
		return r->err;
	}
	t = *(*lit)++;
	sz = scalar_size(t);
	if (sz) {
		if (t == LIT_BOOL)
			kvf_spack_r_bool(r);
		else
			kvf_spack_r_take(r, sz);
		return r->err;
	}
	switch (t) {
	case LIT_VOID:
		return r->err;
	case LIT_STRING: {
		/* basic_string<char>: the character literal follows */
		size_t csz = *lit < end ? scalar_size(*(*lit)++) : 0;
		uint64_t n;

		if (!csz)
			break;
		n = kvf_spack_r_count(r, csz);
		kvf_spack_r_take(r, (size_t)n * csz);
		return r->err;
	}
	case LIT_VECTOR:
	case LIT_MAP: {
		const uint8_t *elem = *lit;
		size_t esz =
			t == LIT_VECTOR && elem < end ? scalar_size(*elem) : 0;
		uint64_t n = kvf_spack_r_count(r, esz ? esz : 1);

		if (esz) {
			/* trivially copyable elements: one raw array */
			kvf_spack_r_take(r, (size_t)n * esz);
			(*lit)++;
			return r->err;
		}
		if (!n || r->err) {
			lit_pass(lit, end);
			if (t == LIT_MAP)
				lit_pass(lit, end);
			return r->err;
		}
		for (uint64_t i = 0; i < n && !r->err; i++) {
			*lit = elem;
			skip_value(r, lit, end);
			if (t == LIT_MAP)
				skip_value(r, lit, end);
		}
		return r->err;
	}
	case LIT_OPTIONAL:
		if (kvf_spack_r_bool(r))
			return skip_value(r, lit, end);
		lit_pass(lit, end);
		return r->err;
	case LIT_EXPECTED:
		if (kvf_spack_r_bool(r)) {
			skip_value(r, lit, end);
			lit_pass(lit, end);
		} else {
			lit_pass(lit, end);
			skip_value(r, lit, end);
		}
		return r->err;
	case LIT_VARIANT: {
		unsigned idx = kvf_spack_r_u8(r), k = 0;
		bool found = false;

		while (*lit < end && **lit != LIT_END) {
			if (k++ == idx && !r->err) {
				skip_value(r, lit, end);
				found = true;
			} else {
				lit_pass(lit, end);
			}
		}
		if (*lit < end)
			(*lit)++;
		if (!found)
			kvf_spack_r_fail(r, KVF_WIRE_ERR_VARIANT);
		return r->err;
	}
	case LIT_STRUCT:
		return skip_struct(r, lit, end);
	}
	kvf_spack_r_fail(r, KVF_WIRE_ERR_UNSUPPORTED);
	return r->err;
}

int kvf_spack_r_skip(struct kvf_spack_r *r, const uint8_t **lit,
		     const uint8_t *lit_end)
{
	return skip_value(r, lit, lit_end);
}

void kvf_spack_w_begin(struct kvf_spack_w *w, struct kvf_wbuf *buf,
		       uint32_t hash, uint8_t width)
{
	w->buf = buf;
	w->start = buf->len;
	w->width = width;
	w->max_len = 0;
	hash &= ~KVF_SPACK_HASH_META;
	if (width == 1) {
		kvf_spack_w_u32(w, hash);
		return;
	}
	kvf_spack_w_u32(w, hash | KVF_SPACK_HASH_META);
	kvf_spack_w_u8(w, (uint8_t)((width == 2	  ? 1
				     : width == 4 ? 2
						  : 3)
				    << KVF_SPACK_META_WIDTH_SHIFT));
}

static uint8_t width_for(uint64_t n)
{
	if (n < 0x100)
		return 1;
	if (n < 0x10000)
		return 2;
	if (n < 0x100000000ull)
		return 4;
	return 8;
}

uint8_t kvf_spack_w_width_needed(const struct kvf_spack_w *w)
{
	uint8_t need = width_for(w->max_len);

	return need > w->width ? need : 0;
}

void kvf__spack_w_count_slow(struct kvf_spack_w *w, uint64_t n)
{
	uint64_t le = htole64(n);

	/* Truncated when too wide: the message is rewritten anyway. */
	kvf_wbuf_put(w->buf, &le, w->width);
}
