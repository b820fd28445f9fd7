/* SPDX-License-Identifier: MIT */
/*
 * rdma/stream.h - a reliable, non-blocking byte stream over an RC queue
 * pair (SEND/RECV only), wire-compatible with coro_rpc's ibverbs socket.
 *
 * Life of a stream:
 *   client: kvf__rdma_stream_create() -> send kvf__rdma_stream_local() ->
 *           receive the server's block -> kvf__rdma_stream_connect();
 *   server: receive the client's block -> kvf__rdma_accept() (create +
 *           connect) -> send the reply block;
 *   (kvf__rdma_dial_fd() and kvf__rdma_serve_fd() do either side over a
 *   connected TCP socket, blocking with a timeout), then
 *   read / writev / progress driven by an event loop on
 *   kvf__rdma_stream_fd(), exactly like a non-blocking socket, and
 *   kvf__rdma_stream_close().
 *
 * A stream is used by one thread at a time. Return values follow the
 * house rule: a byte count >= 0, or a negative enum kvf_status:
 * %KVF_ERR_BUSY means "would block: wait for the fd", %KVF_ERR_IO means
 * the connection failed (completion error, peer gone) and only close is
 * left to do.
 */
#ifndef KVF_RDMA_STREAM_H
#define KVF_RDMA_STREAM_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "rdma/rdma.h"

/**
 * struct kvf__rdma_cfg - per-connection sizes and timeouts.
 * @buf_size: size of every registered buffer and of every RECV; advertised
 *            to the peer (default 64 KiB: master RPCs are small, and it
 *            keeps a connection's registered memory at 1.3 MiB; coro_rpc
 *            uses 256 KiB, the peer adapts to either).
 * @recv_bufs: RECV buffers (default 16: 8 stay posted while up to 8 filled
 *             ones wait for the reader; none posted = the peer is held by
 *             receiver-not-ready, the only back-pressure).
 * @send_bufs: SEND buffers (default 5: 4 SENDs in flight, 1 coalescing).
 * @close_wait_ms: how long close waits for its zero-length SEND
 *                 (default 1000).
 *
 * Memory per connection is (recv_bufs + send_bufs) * buf_size, allocated
 * and registered once when the stream is created.
 */
struct kvf__rdma_cfg {
	uint32_t buf_size;
	uint16_t recv_bufs;
	uint16_t send_bufs;
	uint32_t close_wait_ms;
};

struct kvf__rdma_stream;

/** kvf__rdma_cfg_default() - fill @cfg with the defaults above. */
void kvf__rdma_cfg_default(struct kvf__rdma_cfg *cfg);

/**
 * kvf__rdma_stream_create() - a stream whose QP is in INIT with every RECV
 * posted, ready to advertise itself.
 * @dev: the device (must outlive the stream).
 * @cfg: sizes (NULL: defaults); validated: sizes > 0, send_bufs >= 2.
 * @out: the stream on success.
 *
 * Context: may block briefly (memory registration).
 * Return: %KVF_OK, %KVF_ERR_INVALID_ARGUMENT, %KVF_ERR_NO_MEMORY,
 * %KVF_ERR_IO (a verbs call failed; nothing is left allocated).
 */
int kvf__rdma_stream_create(struct kvf__rdma_dev *dev,
			    const struct kvf__rdma_cfg *cfg,
			    struct kvf__rdma_stream **out);

/** kvf__rdma_stream_local() - the block this side sends its peer. */
void kvf__rdma_stream_local(const struct kvf__rdma_stream *s,
			    struct kvf__rdma_hs *hs);

/**
 * kvf__rdma_stream_connect() - move the QP to RTR and RTS towards @peer
 * (PSN 0 both ways, GRH to the peer's GID, rnr_retry 7) and arm the CQ.
 * Return: %KVF_OK, %KVF_ERR_INVALID_ARGUMENT (already connected),
 * %KVF_ERR_IO (the device refused the attributes).
 */
int kvf__rdma_stream_connect(struct kvf__rdma_stream *s,
			     const struct kvf__rdma_hs *peer);

/**
 * kvf__rdma_accept() - the server's half of the handshake, without I/O.
 * @client: the 32 bytes the client sent (first byte included).
 * @reply: receives the 32 bytes to send back; write them only on success.
 *
 * On success the QP is in RTS with every RECV posted, as the client
 * expects by the time it reads the reply.
 * Return: %KVF_OK; %KVF_ERR_INVALID_ARGUMENT (bad block: close the
 * connection); errors of create/connect. On failure nothing is allocated.
 */
int kvf__rdma_accept(struct kvf__rdma_dev *dev, const struct kvf__rdma_cfg *cfg,
		     const uint8_t client[KVF_RDMA_HS_LEN],
		     uint8_t reply[KVF_RDMA_HS_LEN],
		     struct kvf__rdma_stream **out);

/**
 * kvf__rdma_dial_fd() - client handshake over a connected TCP socket.
 * @fd: the socket (blocking or not); the caller closes it afterwards, the
 *      stream does not use it.
 * @timeout_ms: for the whole exchange.
 * Return: %KVF_OK, %KVF_ERR_IO (socket error, timeout, bad reply), errors
 * of create/connect.
 */
int kvf__rdma_dial_fd(int fd, struct kvf__rdma_dev *dev,
		      const struct kvf__rdma_cfg *cfg, int timeout_ms,
		      struct kvf__rdma_stream **out);

/**
 * kvf__rdma_serve_fd() - server handshake on a socket whose first byte
 * (@first, 0x3e) was already read: reads the other 31 bytes, accepts,
 * writes the reply. The caller then closes @fd.
 * Return: as kvf__rdma_dial_fd().
 */
int kvf__rdma_serve_fd(int fd, uint8_t first, struct kvf__rdma_dev *dev,
		       const struct kvf__rdma_cfg *cfg, int timeout_ms,
		       struct kvf__rdma_stream **out);

/**
 * kvf__rdma_stream_fd() - the fd to wait on for EPOLLIN (level-triggered,
 * like a socket's): readable while completions arrived (the completion
 * channel) or received bytes, end of stream or an error wait to be
 * collected. Then call kvf__rdma_stream_progress(), read and write.
 * There is no EPOLLOUT: room to write comes back as a completion, so an
 * owner with bytes to write retries them on every wake-up.
 */
int kvf__rdma_stream_fd(const struct kvf__rdma_stream *s);

/**
 * kvf__rdma_stream_want_read() - whether waiting received bytes keep the
 * fd readable (default true). An owner that stops reading (its output is
 * backed up) sets false so the fd does not spin; completions still wake.
 */
void kvf__rdma_stream_want_read(struct kvf__rdma_stream *s, bool want);

/**
 * kvf__rdma_stream_progress() - take the channel's events, re-arm the CQ
 * and handle every completion. Call it when the fd is readable, then read
 * and write until %KVF_ERR_BUSY.
 * Return: %KVF_OK, %KVF_ERR_IO (connection failed).
 */
int kvf__rdma_stream_progress(struct kvf__rdma_stream *s);

/**
 * kvf__rdma_stream_read() - copy up to @len received bytes into @buf.
 * Return: bytes copied (> 0); 0 at end of stream (the peer closed);
 * %KVF_ERR_BUSY (nothing yet), %KVF_ERR_IO.
 */
ssize_t kvf__rdma_stream_read(struct kvf__rdma_stream *s, void *buf,
			      size_t len);

/**
 * kvf__rdma_stream_writev() - queue bytes for sending, split into SENDs of
 * at most the peer's buffer size and coalesced while 4 SENDs are in flight.
 * Return: bytes accepted (possibly fewer than offered: retry the rest when
 * the fd is readable), %KVF_ERR_BUSY (no buffer free), %KVF_ERR_IO (failed
 * or closed by the peer), %KVF_ERR_INVALID_ARGUMENT (not connected).
 */
ssize_t kvf__rdma_stream_writev(struct kvf__rdma_stream *s,
				const struct iovec *iov, int iovcnt);

/**
 * kvf__rdma_stream_close() - send what is queued and a zero-length SEND
 * (unless the peer closed first or the connection failed), wait for it at
 * most close_wait_ms, then release the QP, CQ, channel and buffers.
 * NULL is ignored. May block up to close_wait_ms.
 */
void kvf__rdma_stream_close(struct kvf__rdma_stream *s);

/** kvf__rdma_stream_qpn() - the local QP number (for logs). */
uint32_t kvf__rdma_stream_qpn(const struct kvf__rdma_stream *s);

/**
 * kvf__rdma_stream_wc_status() - the first failed completion's
 * ibv_wc_status (IBV_WC_SUCCESS while none failed), for logs.
 */
int kvf__rdma_stream_wc_status(const struct kvf__rdma_stream *s);

#endif /* KVF_RDMA_STREAM_H */
