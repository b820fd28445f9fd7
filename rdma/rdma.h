/* SPDX-License-Identifier: MIT */
/*
 * rdma/rdma.h - RDMA internals shared across the module and with the
 * master: the coro_rpc ibverbs handshake block and the first-byte
 * demultiplexing of a new connection (always built), and device discovery
 * (only where <infiniband/verbs.h> exists; the library itself is loaded
 * at run time). The byte stream is in rdma/stream.h, the server side in
 * rdma/listener.h.
 */
#ifndef KVF_RDMA_RDMA_H
#define KVF_RDMA_RDMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <kvforge/rdma.h>

void kvf__rdma_backend_probe(struct kvf_rdma_info *info);

/* ---- handshake block (32 bytes each way) ---------------------------- */

#define KVF_RDMA_HS_LEN 32
/* struct_pack hash of {u8[16]; u16; u32; u32}, bit 0 clear: 3e 3a e3 a2. */
#define KVF_RDMA_HS_HASH 0xa2e33a3eu
#define KVF_RDMA_FIRST_BYTE_TCP 0x15
#define KVF_RDMA_FIRST_BYTE_RDMA 0x3e

/**
 * struct kvf__rdma_hs - what each side tells the other.
 * @gid: the GID the sender sends from (network order, raw bytes).
 * @lid: the sender's port LID (0 on RoCE).
 * @buffer_size: the size of every RECV the sender keeps posted.
 * @qp_num: the sender's QP number.
 */
struct kvf__rdma_hs {
	uint8_t gid[16];
	uint16_t lid;
	uint32_t buffer_size;
	uint32_t qp_num;
};

/**
 * kvf__rdma_hs_encode() - the 32 wire bytes of @hs (padding written 0).
 */
void kvf__rdma_hs_encode(const struct kvf__rdma_hs *hs,
			 uint8_t out[KVF_RDMA_HS_LEN]);

/**
 * kvf__rdma_hs_decode() - parse a peer's block.
 * Return: %KVF_OK; %KVF_ERR_INVALID_ARGUMENT (and @hs untouched) when the
 * type hash differs or buffer_size / qp_num is unusable (0, QPN > 24 bits).
 */
int kvf__rdma_hs_decode(const uint8_t in[KVF_RDMA_HS_LEN],
			struct kvf__rdma_hs *hs);

/**
 * enum kvf__rdma_demux - what the first byte of a connection announces.
 * @KVF_RDMA_DEMUX_TCP: a coro_rpc request header (the byte is its magic).
 * @KVF_RDMA_DEMUX_RDMA: an RDMA handshake block (the byte is its first).
 * @KVF_RDMA_DEMUX_CLOSE: anything else, or RDMA while it is disabled.
 */
enum kvf__rdma_demux {
	KVF_RDMA_DEMUX_TCP,
	KVF_RDMA_DEMUX_RDMA,
	KVF_RDMA_DEMUX_CLOSE,
};

/**
 * kvf__rdma_demux() - classify a new connection by its first byte.
 * @first: the first byte the client sent.
 * @rdma_enabled: the server accepts RDMA handshakes.
 * Context: any; pure.
 */
enum kvf__rdma_demux kvf__rdma_demux(uint8_t first, bool rdma_enabled);

#ifdef HAVE_VERBS
#include "rdma/ops.h"

/* ---- device ---------------------------------------------------------- */

/**
 * struct kvf__rdma_dev - an opened device, its port 1 and protection domain.
 * @ops: the verbs implementation the device came from.
 * @gid_index: the "best" GID (IPv4-mapped RoCE v2, else IB, else index 0).
 * @mtu: port 1's active MTU (used as path MTU; never exchanged).
 */
struct kvf__rdma_dev {
	const struct kvf__verbs_ops *ops;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	char name[64];
	uint8_t gid_index;
	union ibv_gid gid;
	uint16_t lid;
	enum ibv_mtu mtu;
	uint64_t max_mr_size;
};

/**
 * kvf__rdma_dev_open() - the first device that opens and whose port 1 and
 * GID can be queried.
 * @ops: verbs implementation (kvf__verbs_ibv() or kvf__verbs_fake()).
 * @out: the device on success (owned by the caller: kvf__rdma_dev_close()).
 * @why: receives the reason on failure (may be NULL).
 * @len: size of @why.
 *
 * Context: may block briefly (opens device files).
 * Return: %KVF_OK; %KVF_ERR_UNAVAILABLE when there is no usable device
 * (ENOSYS kernel, empty list, no queryable port); %KVF_ERR_NO_MEMORY.
 */
int kvf__rdma_dev_open(const struct kvf__verbs_ops *ops,
		       struct kvf__rdma_dev **out, char *why, size_t len);

/**
 * kvf__rdma_dev_close() - release a device. Every stream on it must have
 * been closed first. NULL is ignored.
 */
void kvf__rdma_dev_close(struct kvf__rdma_dev *dev);

/**
 * kvf__rdma_probe_ops() - kvf_rdma_probe()'s work on a given table.
 */
void kvf__rdma_probe_ops(const struct kvf__verbs_ops *ops,
			 struct kvf_rdma_info *info);
#endif /* HAVE_VERBS */

#endif /* KVF_RDMA_RDMA_H */
