/* SPDX-License-Identifier: MIT */
/*
 * master/loop.h - the RPC listener and its event-loop threads.
 */
#ifndef KVF_SERVER_LOOP_H
#define KVF_SERVER_LOOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct kvf_loop;
struct kvf_stallclock;
struct kvf_metrics;
struct kvf__rdma_listener;
struct kvf_service;

/**
 * struct kvf_loop_options - how to serve.
 * @address: numeric IPv4/IPv6 address to bind ("127.0.0.1", "0.0.0.0").
 * @port: TCP port; 0 picks an ephemeral one (kvf_loop_port()).
 * @threads: event-loop threads (at least 1).
 * @max_request_bytes: largest request body + attachment accepted.
 * @max_connections: open connections at most; more are closed at accept.
 * @idle_timeout_sec: a connection silent this long is closed.
 * @request_timeout_sec: a connection whose request stays incomplete this
 *	long is closed.
 * @tcp_nodelay: set TCP_NODELAY on accepted sockets (upstream does).
 * @service: answers the requests. @metrics: connection gauge (or NULL).
 * @rdma: accept RDMA handshakes on the port (rdma/listener.h; not ready
 *	without a device: handshakes are closed), or NULL: TCP only.
 * @claimed: listen on @claimed_fd, a socket kvf_port_claim() bound to
 *	@address:@port, instead of binding one; the loop owns it from the
 *	call on (kvf_loop_start() closes it if it fails, kvf_loop_stop()
 *	when it stops).
 */
struct kvf_loop_options {
	const char *address;
	uint16_t port;
	unsigned threads;
	size_t max_request_bytes;
	uint64_t max_connections;
	uint64_t idle_timeout_sec;
	uint64_t request_timeout_sec;
	bool tcp_nodelay;
	struct kvf_service *service;
	struct kvf_metrics *metrics;
	struct kvf__rdma_listener *rdma;
	bool claimed;
	int claimed_fd;
	/* Optional: each thread reports its wake-ups (master/stallclock.h). */
	struct kvf_stallclock *stall;
};

/**
 * kvf_loop_start() - bind, listen and start the event-loop threads.
 * @opts: copied. @out: the running server.
 *
 * Context: main thread; blocks briefly. The threads block no signals
 * themselves: block SIGINT/SIGTERM before calling this if the caller
 * waits for them with sigwait().
 * Return: %KVF_OK, %KVF_ERR_INVALID_ARGUMENT (bad address), %KVF_ERR_BUSY
 * (address in use), %KVF_ERR_IO, %KVF_ERR_NO_MEMORY.
 */
int kvf_loop_start(const struct kvf_loop_options *opts, struct kvf_loop **out);

/** kvf_loop_port() - the port actually bound. */
uint16_t kvf_loop_port(const struct kvf_loop *loop);

/**
 * kvf_loop_stop() - stop accepting, close every connection, join the
 * threads and free @loop. Requests being answered finish first.
 * Context: any thread but a loop thread; blocks.
 */
void kvf_loop_stop(struct kvf_loop *loop);

#endif /* KVF_SERVER_LOOP_H */
