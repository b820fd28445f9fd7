/* SPDX-License-Identifier: MIT */
/*
 * rdma/listener.h - what an RPC server needs to serve RDMA on its TCP
 * port: whether RDMA is wanted, the device opened once, the first-byte
 * check of a new connection, the handshake, and socket-style I/O on the
 * resulting stream (errno conventions), so the server's connection code
 * only swaps recv()/send() for these on RDMA connections.
 *
 * Always available: a build without the RDMA transport (rdma/none.c)
 * has a listener that is never ready, so servers need no #ifdef.
 */
#ifndef KVF_RDMA_LISTENER_H
#define KVF_RDMA_LISTENER_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include <kvforge/log.h>

struct kvf__rdma_listener;
struct kvf__rdma_stream;
struct kvf__verbs_ops;

/**
 * kvf__rdma_wanted() - RDMA requested: @flag (--enable_rdma) or the
 * environment variable MC_RPC_PROTOCOL set to exactly "rdma" (upstream's
 * switch, case-sensitive).
 */
bool kvf__rdma_wanted(bool flag);

/**
 * kvf__rdma_listener_open() - prepare to accept RDMA handshakes.
 * @ops: verbs implementation (NULL: libibverbs, loaded at run time;
 *       ignored in a build without the transport).
 * @log: where the one line saying RDMA is unavailable goes (a
 *       kvf_log_fn; NULL: stderr).
 * @log_ctx: argument passed to @log.
 * @out: the listener (always created, also without a device: it then
 *       refuses handshakes).
 *
 * Without a usable device the reason is logged on one line
 * (%KVF_LOG_WARNING) and every RDMA handshake is closed; TCP is
 * unaffected.
 * Context: start-up; may block briefly. Return: %KVF_OK,
 * %KVF_ERR_NO_MEMORY.
 */
int kvf__rdma_listener_open(const struct kvf__verbs_ops *ops, kvf_log_fn log,
			    void *log_ctx, struct kvf__rdma_listener **out);

/** kvf__rdma_listener_close() - release the device. NULL is ignored. */
void kvf__rdma_listener_close(struct kvf__rdma_listener *l);

/** kvf__rdma_listener_ready() - a device is open: handshakes accepted. */
bool kvf__rdma_listener_ready(const struct kvf__rdma_listener *l);

/** What kvf__rdma_classify() found on a new connection. */
enum kvf__rdma_first {
	KVF_RDMA_FIRST_WAIT,  /* nothing received yet */
	KVF_RDMA_FIRST_TCP,   /* 0x15: coro_rpc over this socket */
	KVF_RDMA_FIRST_RDMA,  /* 0x3e with RDMA enabled */
	KVF_RDMA_FIRST_CLOSE, /* anything else, EOF, or a socket error */
};

/**
 * kvf__rdma_classify() - peek (without consuming) at the first byte of a
 * non-blocking socket. @l may be NULL (RDMA disabled).
 */
enum kvf__rdma_first kvf__rdma_classify(const struct kvf__rdma_listener *l,
					int fd);

/**
 * kvf__rdma_listener_accept() - run the server handshake on @fd (whose
 * first byte was classified RDMA): at most @timeout_ms for the client's
 * remaining bytes and our reply. The caller closes @fd either way.
 * Return: %KVF_OK and the stream in @out; %KVF_ERR_UNAVAILABLE (no device:
 * refused silently, the open logged why); errors of kvf__rdma_serve_fd().
 */
int kvf__rdma_listener_accept(struct kvf__rdma_listener *l, int fd,
			      int timeout_ms, struct kvf__rdma_stream **out);

/**
 * kvf__rdma_refuse() - read what a refused handshake sent, so closing
 * @fd is an orderly close rather than a reset: at most a few handshake
 * blocks, never more, so a peer that keeps streaming cannot hold the
 * calling thread (its connection is then closed with a reset).
 * Context: any thread; never blocks.
 */
void kvf__rdma_refuse(int fd);

/**
 * kvf__rdma_recv() / kvf__rdma_send() - recv(2)/send(2) conventions on a
 * stream: bytes moved, 0 at end of stream (recv), or -1 with errno EAGAIN
 * (try again on the next wake-up) or ECONNRESET (the connection failed).
 * Both first take the stream's completions (kvf__rdma_stream_progress()).
 */
ssize_t kvf__rdma_recv(struct kvf__rdma_stream *s, void *buf, size_t len);
ssize_t kvf__rdma_send(struct kvf__rdma_stream *s, const void *buf, size_t len);

/**
 * kvf__rdma_fd() - the fd a loop waits on for an accepted stream (see
 * kvf__rdma_stream_fd(): EPOLLIN only, level-triggered).
 */
int kvf__rdma_fd(const struct kvf__rdma_stream *s);

/** kvf__rdma_want_read() - see kvf__rdma_stream_want_read(). */
void kvf__rdma_want_read(struct kvf__rdma_stream *s, bool want);

/**
 * kvf__rdma_drop() - close an accepted stream (kvf__rdma_stream_close():
 * may wait up to its close timeout for the zero-length SEND).
 */
void kvf__rdma_drop(struct kvf__rdma_stream *s);

#endif /* KVF_RDMA_LISTENER_H */
