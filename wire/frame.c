// SPDX-License-Identifier: MIT
/*
 * wire/frame.c - coro_rpc request and response headers.
 *
 * Fields are little-endian at fixed offsets; they are read and written
 * bytewise through memcpy so a header may sit at any offset of a receive
 * buffer. A response is built in place: the header is reserved first and
 * patched once the body length is known, so the body is encoded straight
 * into the connection's output buffer with no copy.
 */
#include "wire/frame.h"

#include <string.h>

static uint32_t get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return le32toh(v);
}

static void put32(uint8_t *p, uint32_t v)
{
	v = htole32(v);
	memcpy(p, &v, 4);
}

int kvf_frame_req_parse(const void *buf, struct kvf_frame_req *out)
{
	const uint8_t *p = buf;

	out->magic = p[0];
	out->version = p[1];
	out->serialize_type = p[2];
	out->msg_type = p[3];
	out->seq_num = get32(p + 4);
	out->function_id = get32(p + 8);
	out->length = get32(p + 12);
	out->attach_length = get32(p + 16);
	if (out->magic != KVF_FRAME_MAGIC)
		return KVF_WIRE_ERR_MAGIC;
	if (out->version > KVF_FRAME_VERSION)
		return KVF_WIRE_ERR_VERSION;
	if (out->serialize_type != KVF_FRAME_SERIALIZE_STRUCT_PACK)
		return KVF_WIRE_ERR_SERIALIZE;
	return KVF_WIRE_OK;
}

void kvf_frame_req_write(void *buf, const struct kvf_frame_req *h)
{
	uint8_t *p = buf;

	p[0] = h->magic;
	p[1] = h->version;
	p[2] = h->serialize_type;
	p[3] = h->msg_type;
	put32(p + 4, h->seq_num);
	put32(p + 8, h->function_id);
	put32(p + 12, h->length);
	put32(p + 16, h->attach_length);
}

void kvf_frame_resp_parse(const void *buf, struct kvf_frame_resp *out)
{
	const uint8_t *p = buf;

	out->magic = p[0];
	out->version = p[1];
	out->err_code = p[2];
	out->msg_type = p[3];
	out->seq_num = get32(p + 4);
	out->length = get32(p + 8);
	out->attach_length = get32(p + 12);
}

void kvf_frame_resp_write(void *buf, const struct kvf_frame_resp *h)
{
	uint8_t *p = buf;

	p[0] = h->magic;
	p[1] = h->version;
	p[2] = h->err_code;
	p[3] = h->msg_type;
	put32(p + 4, h->seq_num);
	put32(p + 8, h->length);
	put32(p + 12, h->attach_length);
}

static size_t reserve(struct kvf_wbuf *w, size_t n)
{
	static const uint8_t zero[KVF_FRAME_REQ_LEN];
	size_t at = w->len;

	kvf_wbuf_put(w, zero, n);
	return at;
}

size_t kvf_frame_resp_begin(struct kvf_wbuf *w)
{
	return reserve(w, KVF_FRAME_RESP_LEN);
}

void kvf_frame_resp_end(struct kvf_wbuf *w, size_t at, uint32_t seq_num,
			uint8_t err_code)
{
	struct kvf_frame_resp h = {
		.magic = KVF_FRAME_MAGIC,
		.err_code = err_code,
		.seq_num = seq_num,
		.length = (uint32_t)(w->len - at - KVF_FRAME_RESP_LEN),
	};

	if (w->failed)
		return;
	kvf_frame_resp_write(w->data + at, &h);
}

void kvf_frame_resp_error(struct kvf_wbuf *w, uint32_t seq_num,
			  uint8_t err_code, const char *msg)
{
	size_t at = kvf_frame_resp_begin(w);
	struct kvf_spack_w sw;
	size_t n = strlen(msg);

	/* coro_rpc's error body: a struct_pack std::string (hash of "80 0c") */
	kvf_spack_w_begin(&sw, w, KVF_SPACK_HASH_STRING, n < 256 ? 1 : 2);
	kvf_spack_w_str(&sw, msg, n);
	kvf_frame_resp_end(w, at, seq_num, err_code);
}

size_t kvf_frame_req_begin(struct kvf_wbuf *w)
{
	return reserve(w, KVF_FRAME_REQ_LEN);
}

void kvf_frame_req_end(struct kvf_wbuf *w, size_t at, uint32_t seq_num,
		       uint32_t function_id)
{
	struct kvf_frame_req h = {
		.magic = KVF_FRAME_MAGIC,
		.seq_num = seq_num,
		.function_id = function_id,
		.length = (uint32_t)(w->len - at - KVF_FRAME_REQ_LEN),
	};

	if (w->failed)
		return;
	kvf_frame_req_write(w->data + at, &h);
}
