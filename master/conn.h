/* SPDX-License-Identifier: MIT */
/*
 * master/conn.h - one RPC connection: its buffers, framing and flushing.
 *
 * A connection belongs to one event-loop thread (master/loop.c), which
 * calls these functions when epoll reports it readable or writable; they
 * never block and never touch another connection.
 */
#ifndef KVF_SERVER_CONN_H
#define KVF_SERVER_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ha/replication.h"
#include "master/service.h"
#include "wire/spack.h"

/** Unsent output above which a connection stops reading requests. */
#define KVF_CONN_OUT_HIGH (4u << 20)
/** Output buffer capacity kept once everything queued was sent; a
 *  larger one (after a large answer) is freed. */
#define KVF_CONN_OUT_KEEP (64u << 10)
/** Receive buffer size kept between large requests. */
#define KVF_CONN_RBUF_MIN (64u << 10)
/** Bursts of answers a connection parks separately; more are merged
 *  into the last (they then wait for the later acknowledgement). */
#define KVF_CONN_PARK_MAX 16

/**
 * struct kvf_conn_env - what a connection's requests are answered with
 * (owned by its thread).
 * @service: the RPC handlers. @scratch: the thread's work arrays.
 * @max_request_bytes: largest body + attachment accepted.
 * @waiter: the thread's handle for answers parked for the sync standbys
 *	(NULL: a burst's answers are waited for in place).
 */
struct kvf_conn_env {
	struct kvf_service *service;
	struct kvf_service_scratch *scratch;
	size_t max_request_bytes;
	struct kvf_repl_waiter *waiter;
};

/**
 * struct kvf_conn_parked - a burst of answers in @out, bytes [start,
 * end), that may not be sent before the sync standbys acknowledged
 * @pk (ha/replication.h).
 */
struct kvf_conn_parked {
	size_t start, end;
	struct kvf_repl_park pk;
};

/**
 * struct kvf_conn - a connection.
 * @fd: the socket (non-blocking).
 * @prev, @next: the owning thread's list (for idle sweeps and shutdown).
 * @rbuf, @rlen, @rcap: received bytes not yet answered; at most one
 *	partial request follows the complete ones.
 * @out, @sent: encoded responses and how much of them was sent.
 * @last_active_ns: last byte received or sent.
 * @frame_start_ns: when the partial request at the front began arriving
 *	(0 if none): a request must arrive within the request timeout.
 * @events: the epoll interest currently registered.
 * @hash_logged: a type-hash mismatch was logged on this connection.
 * @closing: an answer that ends the connection is queued; read no more.
 * @draining: that answer has left and the write side is shut down: input
 *	is read and discarded until the peer closes or @drain_until_ns, so
 *	that closing with unread bytes (the rest of a refused request) does
 *	not reset the connection before the client has read the answer.
 * @demuxed: the first byte chose the transport (master/loop.c).
 * @rdma: the RDMA stream read and written instead of the socket (NULL:
 *	TCP); @fd is then the stream's readiness fd.
 * @park, @nparked: parked bursts, oldest first; nothing from
 *	@park[0].start on is sent before it is released, so answers leave
 *	in request order.
 * @pprev, @pnext, @in_park_list: the owning thread's list of connections
 *	with parked answers (master/loop.c).
 */
struct kvf_conn {
	int fd;
	struct kvf_conn *prev, *next;
	uint8_t *rbuf;
	size_t rlen, rcap;
	struct kvf_wbuf out;
	size_t sent;
	uint64_t last_active_ns;
	uint64_t frame_start_ns;
	uint32_t events;
	bool hash_logged;
	bool closing;
	bool draining;
	uint64_t drain_until_ns;
	bool demuxed;
	struct kvf__rdma_stream *rdma;
	struct kvf_conn_parked park[KVF_CONN_PARK_MAX];
	unsigned nparked;
	struct kvf_conn *pprev, *pnext;
	bool in_park_list;
};

/** Result of the event handlers: keep the connection, or close it now. */
enum kvf_conn_rc { KVF_CONN_KEEP = 0, KVF_CONN_CLOSE = 1 };

/**
 * kvf_conn_new() - wrap an accepted socket.
 * Return: the connection, or NULL when out of memory (the caller closes
 * @fd).
 */
struct kvf_conn *kvf_conn_new(int fd, uint64_t now_ns);

/** kvf_conn_free() - close the socket and free the connection. */
void kvf_conn_free(struct kvf_conn *c);

/**
 * kvf_conn_readable() - read what arrived, answer complete requests, send.
 * Return: %KVF_CONN_CLOSE when the peer closed, on a framing violation
 * (bad magic, version or serialize type: closed without an answer, as
 * upstream) or a socket error.
 */
enum kvf_conn_rc kvf_conn_readable(struct kvf_conn *c,
				   const struct kvf_conn_env *env);

/**
 * kvf_conn_writable() - send queued answers; when the backlog drains,
 * answer requests held back by it.
 */
enum kvf_conn_rc kvf_conn_writable(struct kvf_conn *c,
				   const struct kvf_conn_env *env);

/**
 * kvf_conn_unpark() - send the parked answers the sync standbys now
 * hold (kvf_repl_park_check()), in order, and what waited behind them;
 * then, as kvf_conn_writable(), answer requests held back by the output.
 * Return: %KVF_CONN_CLOSE when a parked burst's wait failed (the leader
 * was fenced, or the standbys did not acknowledge in time: those answers
 * are never sent) or on a socket error.
 */
enum kvf_conn_rc kvf_conn_unpark(struct kvf_conn *c,
				 const struct kvf_conn_env *env);

/**
 * kvf_conn_finish_parked() - the RPC server stops: wait for the last
 * parked burst's acknowledgement (kvf_repl_park_wait(); bounded by the
 * sync timeout) and, if it came, send what the socket takes now. Blocks.
 */
void kvf_conn_finish_parked(struct kvf_conn *c);

/**
 * kvf_conn_wants_read() - false while output is backed up or closing
 * (true again while draining).
 */
bool kvf_conn_wants_read(const struct kvf_conn *c);

/** kvf_conn_wants_write() - answers that may be sent (none parked
 *  before them) are waiting for socket space. */
bool kvf_conn_wants_write(const struct kvf_conn *c);

/**
 * kvf_conn_expired() - has @c been silent (or not reading its answers)
 * for @idle_ns, in the middle of one request for @partial_ns, or past
 * the end of its drain?
 */
bool kvf_conn_expired(const struct kvf_conn *c, uint64_t now_ns,
		      uint64_t idle_ns, uint64_t partial_ns);

#endif /* KVF_SERVER_CONN_H */
