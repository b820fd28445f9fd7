/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_rdma_wire.c - the 32-byte handshake block against the
 * bytes coro_rpc's ibverbs socket puts on the wire, and the first-byte
 * demultiplexing of a new connection.
 */
#include "config.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <string.h>
#include <cmocka.h>

#include <kvforge/status.h>

#include "rdma/rdma.h"

/* The worked example: RoCE v2 ::ffff:10.0.0.5, LID 0, 256 KiB, QPN 0xd3. */
/* clang-format off */
static const uint8_t golden[KVF_RDMA_HS_LEN] = {
	0x3e, 0x3a, 0xe3, 0xa2,						/* hash */
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0x0a, 0x00, 0x00, 0x05, /* gid */
	0x00, 0x00,							/* lid */
	0x00, 0x00,							/* pad */
	0x00, 0x00, 0x04, 0x00,						/* buffer size */
	0xd3, 0x00, 0x00, 0x00,						/* qpn */
};
/* clang-format on */

static void test_encode_golden(void **state)
{
	struct kvf__rdma_hs hs = {
		.lid = 0, .buffer_size = 262144, .qp_num = 0xd3};
	uint8_t out[KVF_RDMA_HS_LEN];

	(void)state;
	memcpy(hs.gid, golden + 4, 16);
	memset(out, 0xaa, sizeof(out));
	kvf__rdma_hs_encode(&hs, out);
	assert_memory_equal(out, golden, sizeof(golden));
}

static void test_decode_golden(void **state)
{
	struct kvf__rdma_hs hs;
	uint8_t in[KVF_RDMA_HS_LEN];

	(void)state;
	assert_int_equal(kvf__rdma_hs_decode(golden, &hs), KVF_OK);
	assert_memory_equal(hs.gid, golden + 4, 16);
	assert_int_equal(hs.lid, 0);
	assert_int_equal(hs.buffer_size, 262144);
	assert_int_equal(hs.qp_num, 0xd3);

	/* Every field at its offset, little-endian; padding ignored. */
	memcpy(in, golden, sizeof(in));
	in[20] = 0x34;
	in[21] = 0x12;
	in[22] = 0xde;
	in[23] = 0xad;
	in[24] = 0x00;
	in[25] = 0x00;
	in[26] = 0x01;
	in[27] = 0x00;
	in[28] = 0x56;
	in[29] = 0x34;
	in[30] = 0x12;
	assert_int_equal(kvf__rdma_hs_decode(in, &hs), KVF_OK);
	assert_int_equal(hs.lid, 0x1234);
	assert_int_equal(hs.buffer_size, 65536);
	assert_int_equal(hs.qp_num, 0x123456);
}

static void test_decode_rejects(void **state)
{
	struct kvf__rdma_hs hs = {.lid = 7}, before;
	uint8_t in[KVF_RDMA_HS_LEN];

	(void)state;
	before = hs;
	/* Bit 0 of the hash set would announce a metainfo byte. */
	memcpy(in, golden, sizeof(in));
	in[0] |= 1;
	assert_int_equal(kvf__rdma_hs_decode(in, &hs),
			 KVF_ERR_INVALID_ARGUMENT);
	/* Any other hash byte. */
	memcpy(in, golden, sizeof(in));
	in[3] = 0xa3;
	assert_int_equal(kvf__rdma_hs_decode(in, &hs),
			 KVF_ERR_INVALID_ARGUMENT);
	/* No buffer to send into. */
	memcpy(in, golden, sizeof(in));
	memset(in + 24, 0, 4);
	assert_int_equal(kvf__rdma_hs_decode(in, &hs),
			 KVF_ERR_INVALID_ARGUMENT);
	/* QPNs have 24 bits. */
	memcpy(in, golden, sizeof(in));
	in[31] = 1;
	assert_int_equal(kvf__rdma_hs_decode(in, &hs),
			 KVF_ERR_INVALID_ARGUMENT);
	/* Rejected blocks change nothing. */
	assert_memory_equal(&hs, &before, sizeof(hs));
}

static void test_roundtrip(void **state)
{
	struct kvf__rdma_hs a = {.lid = 0xbeef,
				 .buffer_size = 0xfffffff0,
				 .qp_num = 0xffffff},
			    b;
	uint8_t wire[KVF_RDMA_HS_LEN];

	(void)state;
	for (int i = 0; i < 16; i++)
		a.gid[i] = (uint8_t)(0xf0 + i);
	kvf__rdma_hs_encode(&a, wire);
	assert_int_equal(wire[0], KVF_RDMA_FIRST_BYTE_RDMA);
	assert_int_equal(wire[22], 0);
	assert_int_equal(wire[23], 0);
	assert_int_equal(kvf__rdma_hs_decode(wire, &b), KVF_OK);
	assert_memory_equal(a.gid, b.gid, 16);
	assert_int_equal(a.lid, b.lid);
	assert_int_equal(a.buffer_size, b.buffer_size);
	assert_int_equal(a.qp_num, b.qp_num);
}

static void test_demux(void **state)
{
	(void)state;
	assert_int_equal(kvf__rdma_demux(0x15, true), KVF_RDMA_DEMUX_TCP);
	assert_int_equal(kvf__rdma_demux(0x15, false), KVF_RDMA_DEMUX_TCP);
	assert_int_equal(kvf__rdma_demux(0x3e, true), KVF_RDMA_DEMUX_RDMA);
	/* RDMA disabled: the handshake byte is just a bad first byte. */
	assert_int_equal(kvf__rdma_demux(0x3e, false), KVF_RDMA_DEMUX_CLOSE);
	for (int b = 0; b < 256; b++) {
		if (b == 0x15 || b == 0x3e)
			continue;
		assert_int_equal(kvf__rdma_demux((uint8_t)b, true),
				 KVF_RDMA_DEMUX_CLOSE);
		assert_int_equal(kvf__rdma_demux((uint8_t)b, false),
				 KVF_RDMA_DEMUX_CLOSE);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_encode_golden),
		cmocka_unit_test(test_decode_golden),
		cmocka_unit_test(test_decode_rejects),
		cmocka_unit_test(test_roundtrip),
		cmocka_unit_test(test_demux),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
