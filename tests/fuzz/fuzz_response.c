// SPDX-License-Identifier: MIT
/*
 * tests/fuzz/fuzz_response.c - libFuzzer harness for what a client (the
 * load generator, tests) decodes: response headers and every RPC's
 * response body, in every ABI.
 *
 * Input: byte 0 selects the ABI (bit 7) and the RPC (the rest, modulo the
 * RPC count); then a 16-byte response header (parsed); the remainder is
 * the body. A body that decodes and that the encoders can express must
 * re-encode to bytes that decode and re-encode identically.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire/abi.h"
#include "wire/frame.h"
#include "wire/msg.h"

#define FUZZ_ITEMS 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct space {
	struct kvf_msg_replicas items[FUZZ_ITEMS];
	struct kvf_msg_desc descs[FUZZ_ITEMS];
	uint8_t bools[FUZZ_ITEMS];
	struct kvf_msg_resp r;
};

static struct space s1, s2;

static void space_init(struct space *s)
{
	memset(&s->r, 0, sizeof(s->r));
	s->r.items = s->items;
	s->r.cap = FUZZ_ITEMS;
	s->r.descs = s->descs;
	s->r.desc_cap = FUZZ_ITEMS;
	s->r.bools = s->bools;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const struct kvf_abi *abi;
	struct kvf_frame_resp h;
	enum kvf_rpc rpc;
	struct kvf_wbuf a, b;

	if (size < 1 + KVF_FRAME_RESP_LEN)
		return 0;
	abi = kvf_abi_at(data[0] >> 7 < kvf_abi_count() ? data[0] >> 7 : 0);
	rpc = (enum kvf_rpc)((data[0] & 0x7f) % KVF_RPC__COUNT);
	kvf_frame_resp_parse(data + 1, &h);
	data += 1 + KVF_FRAME_RESP_LEN;
	size -= 1 + KVF_FRAME_RESP_LEN;
	space_init(&s1);
	if (kvf_msg_resp_decode(abi, rpc, data, size, &s1.r))
		return 0;
	kvf_wbuf_init(&a);
	kvf_wbuf_init(&b);
	if (kvf_msg_resp_reencode(&a, abi, rpc, &s1.r) == 0) {
		space_init(&s2);
		if (kvf_msg_resp_decode(abi, rpc, a.data, a.len, &s2.r))
			abort();
		if (kvf_msg_resp_reencode(&b, abi, rpc, &s2.r) ||
		    a.len != b.len || memcmp(a.data, b.data, a.len))
			abort();
	}
	kvf_wbuf_free(&a);
	kvf_wbuf_free(&b);
	return 0;
}
