/* SPDX-License-Identifier: MIT */
/*
 * rdma/handshake.c - coro_rpc's ibverbs info block, the first-byte demux
 * and upstream's switch (MC_RPC_PROTOCOL=rdma): what needs no verbs, built
 * with or without the transport.
 *
 * The block is struct_pack of a trivially copyable {u8 gid[16]; u16 lid;
 * u32 buffer_size; u32 qp_num}: a 4-byte type hash, then the raw memory
 * image of the struct on a little-endian machine, two padding bytes
 * included. Fields are written byte by byte so the encoding does not
 * depend on this machine's layout or byte order; the padding is written
 * as zeros and ignored on read (coro_rpc's server echoes whatever the
 * client sent there). The whole hash is compared: bit 0 set would
 * announce a metainfo byte, which this block never carries.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <kvforge/status.h>

#include "rdma/listener.h"
#include "rdma/rdma.h"

#define OFF_HASH 0
#define OFF_GID 4
#define OFF_LID 20
#define OFF_PAD 22
#define OFF_BUFSZ 24
#define OFF_QPN 28

static void put_le(uint8_t *p, uint32_t v, int n)
{
	for (int i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_le(const uint8_t *p, int n)
{
	uint32_t v = 0;

	for (int i = 0; i < n; i++)
		v |= (uint32_t)p[i] << (8 * i);
	return v;
}

void kvf__rdma_hs_encode(const struct kvf__rdma_hs *hs,
			 uint8_t out[KVF_RDMA_HS_LEN])
{
	put_le(out + OFF_HASH, KVF_RDMA_HS_HASH, 4);
	memcpy(out + OFF_GID, hs->gid, sizeof(hs->gid));
	put_le(out + OFF_LID, hs->lid, 2);
	put_le(out + OFF_PAD, 0, 2);
	put_le(out + OFF_BUFSZ, hs->buffer_size, 4);
	put_le(out + OFF_QPN, hs->qp_num, 4);
}

int kvf__rdma_hs_decode(const uint8_t in[KVF_RDMA_HS_LEN],
			struct kvf__rdma_hs *hs)
{
	uint32_t bufsz = get_le(in + OFF_BUFSZ, 4);
	uint32_t qpn = get_le(in + OFF_QPN, 4);

	if (get_le(in + OFF_HASH, 4) != KVF_RDMA_HS_HASH || !bufsz || qpn >> 24)
		return KVF_ERR_INVALID_ARGUMENT;
	memcpy(hs->gid, in + OFF_GID, sizeof(hs->gid));
	hs->lid = (uint16_t)get_le(in + OFF_LID, 2);
	hs->buffer_size = bufsz;
	hs->qp_num = qpn;
	return KVF_OK;
}

enum kvf__rdma_demux kvf__rdma_demux(uint8_t first, bool rdma_enabled)
{
	if (first == KVF_RDMA_FIRST_BYTE_TCP)
		return KVF_RDMA_DEMUX_TCP;
	if (first == KVF_RDMA_FIRST_BYTE_RDMA && rdma_enabled)
		return KVF_RDMA_DEMUX_RDMA;
	return KVF_RDMA_DEMUX_CLOSE;
}

bool kvf__rdma_wanted(bool flag)
{
	const char *p = getenv("MC_RPC_PROTOCOL");

	return flag || (p && !strcmp(p, "rdma"));
}

enum kvf__rdma_first kvf__rdma_classify(const struct kvf__rdma_listener *l,
					int fd)
{
	uint8_t b;
	ssize_t n = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);

	if (n < 0 &&
	    (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return KVF_RDMA_FIRST_WAIT;
	if (n != 1)
		return KVF_RDMA_FIRST_CLOSE;
	switch (kvf__rdma_demux(b, l != NULL)) {
	case KVF_RDMA_DEMUX_TCP:
		return KVF_RDMA_FIRST_TCP;
	case KVF_RDMA_DEMUX_RDMA:
		return KVF_RDMA_FIRST_RDMA;
	default:
		return KVF_RDMA_FIRST_CLOSE;
	}
}

/* A handshake is one block; a client that sends more is not one. */
#define REFUSE_READS 4

void kvf__rdma_refuse(int fd)
{
	uint8_t block[KVF_RDMA_HS_LEN];

	for (int i = 0; i < REFUSE_READS; i++)
		if (recv(fd, block, sizeof(block), MSG_DONTWAIT) <= 0)
			break;
}
