// SPDX-License-Identifier: MIT
/*
 * tests/fuzz/fuzz_request.c - libFuzzer harness for what the master
 * decodes from the network: request headers and every RPC's body, in
 * every ABI.
 *
 * Input: byte 0 selects the ABI (bit 7) and the RPC (the rest, modulo the
 * RPC count); then a 20-byte request header, which is parsed (its function
 * id may pick the RPC instead when registered); the remainder is the body.
 * A body that decodes must encode again (clients' encoder) and that
 * encoding must decode to an identical re-encoding: the codec's two
 * directions agree on every input the decoder accepts.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire/abi.h"
#include "wire/frame.h"
#include "wire/msg.h"

#define FUZZ_ITEMS 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct kvf_key keys[FUZZ_ITEMS], keys2[FUZZ_ITEMS];
static uint64_t vals[FUZZ_ITEMS], vals2[FUZZ_ITEMS];
static uint8_t has[FUZZ_ITEMS], has2[FUZZ_ITEMS];
static struct kvf_msg_segment segs[FUZZ_ITEMS];
static struct kvf_uuid uuids[FUZZ_ITEMS];

static void round_trip(const struct kvf_abi *abi, struct kvf_msg_req *q)
{
	struct kvf_msg_items items2 = {keys2, vals2, has2, FUZZ_ITEMS};
	struct kvf_msg_req q2;
	struct kvf_wbuf a, b;

	kvf_wbuf_init(&a);
	kvf_wbuf_init(&b);
	kvf_msg_req_use_arrays(q, segs, uuids, FUZZ_ITEMS);
	if (kvf_msg_req_encode(&a, abi, q) == 0 && a.len) {
		if (kvf_msg_req_decode(abi, q->rpc, a.data, a.len, &items2, &q2,
				       NULL))
			abort();
		kvf_msg_req_use_arrays(&q2, segs, uuids, FUZZ_ITEMS);
		if (kvf_msg_req_encode(&b, abi, &q2) || a.len != b.len ||
		    memcmp(a.data, b.data, a.len))
			abort();
	}
	kvf_wbuf_free(&a);
	kvf_wbuf_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kvf_msg_items items = {keys, vals, has, FUZZ_ITEMS};
	const struct kvf_abi *abi;
	struct kvf_frame_req h;
	struct kvf_msg_req q;
	enum kvf_rpc rpc;
	uint32_t found;

	if (size < 1 + KVF_FRAME_REQ_LEN)
		return 0;
	abi = kvf_abi_at(data[0] >> 7 < kvf_abi_count() ? data[0] >> 7 : 0);
	rpc = (enum kvf_rpc)((data[0] & 0x7f) % KVF_RPC__COUNT);
	kvf_frame_req_parse(data + 1, &h);
	kvf_abi_rpc_of(abi, h.function_id, &rpc);
	data += 1 + KVF_FRAME_REQ_LEN;
	size -= 1 + KVF_FRAME_REQ_LEN;
	if (kvf_msg_req_decode(abi, rpc, data, size, &items, &q, &found))
		return 0;
	if (q.typed)
		round_trip(abi, &q);
	return 0;
}
