/* SPDX-License-Identifier: MIT */
/*
 * client/client.h - a C client connection to a Mooncake master (upstream's
 * mooncake_master or kvforge-master): blocking connect, then non-blocking
 * pipelined requests matched to their responses by seq_num.
 *
 * One connection is used by one thread at a time. Requests are encoded
 * into an output buffer (kvf_client_send()), written when the caller
 * flushes or waits; responses may arrive in any order and are returned one
 * at a time with the request's tag (kvf_client_recv()). A response whose
 * seq_num matches no outstanding request is a protocol error, as in
 * upstream's client.
 */
#ifndef KVF_SERVER_CLIENT_H
#define KVF_SERVER_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wire/abi.h"
#include "wire/frame.h"
#include "wire/msg.h"

struct kvf_client;
struct kvf__rdma_dev;

/**
 * kvf_client_connect() - open a connection (blocking connect, TCP_NODELAY).
 * @host: a name or address. @port: TCP port.
 * @abi: the revision the master speaks (kvf_abi_find()).
 * @max_outstanding: most requests in flight at once (rounded up to a
 *	power of two).
 * @out: the connection.
 * Return: 0, or -errno (name resolution failure: -EHOSTUNREACH).
 */
int kvf_client_connect(const char *host, uint16_t port,
		       const struct kvf_abi *abi, unsigned max_outstanding,
		       struct kvf_client **out);

/**
 * kvf_client_connect_via() - kvf_client_connect() over a transport.
 * @dev: NULL for TCP; an RDMA device (kvf_client_rdma_open()) to run
 *	coro_rpc's RDMA handshake over the new TCP connection, close it and
 *	speak the same frames over the RDMA stream. @dev must outlive the
 *	connection.
 * Context: may block up to 5 s in the handshake.
 * Return: as kvf_client_connect(); -ECONNREFUSED when the handshake
 * failed (the master does not serve RDMA, or no device on its side);
 * -ENOTSUP in a build without the RDMA transport.
 */
int kvf_client_connect_via(const char *host, uint16_t port,
			   const struct kvf_abi *abi, unsigned max_outstanding,
			   struct kvf__rdma_dev *dev, struct kvf_client **out);

/**
 * kvf_client_rdma_open() - open the first usable RDMA device through
 * libibverbs (loaded at run time), for kvf_client_connect_via().
 * @why: receives the reason on failure. @len: its size.
 * Return: %KVF_OK; %KVF_ERR_UNAVAILABLE (no library, no device, a kernel
 * without RDMA, or a build without the transport); %KVF_ERR_NO_MEMORY.
 */
int kvf_client_rdma_open(struct kvf__rdma_dev **dev, char *why, size_t len);

/**
 * kvf_client_rdma_close() - release a device from kvf_client_rdma_open()
 * after every connection on it was closed. NULL is ignored.
 */
void kvf_client_rdma_close(struct kvf__rdma_dev *dev);

/** kvf_client_close() - close and free (outstanding requests are lost). */
void kvf_client_close(struct kvf_client *c);

/**
 * kvf_client_send() - queue request @req (not written yet).
 * @tag: returned with the response.
 * @seq: if not NULL, the request's seq_num.
 * Return: 0; -EBUSY when @max_outstanding requests are in flight; -ENOMEM;
 * or a negative kvf_wire_status from the encoder.
 */
int kvf_client_send(struct kvf_client *c, const struct kvf_msg_req *req,
		    uint64_t tag, uint32_t *seq);

/** kvf_client_outstanding() - requests sent and not yet answered. */
unsigned kvf_client_outstanding(const struct kvf_client *c);

/**
 * kvf_client_flush() - write what is queued without blocking.
 * Return: 0 (possibly with bytes left queued) or -errno.
 */
int kvf_client_flush(struct kvf_client *c);

/**
 * struct kvf_client_resp - one response.
 * @rpc, @tag, @seq: of the request it answers.
 * @err_code: the transport status (enum kvf_rpc_errc; 0 = a typed body).
 * @body, @len: the body, valid until the next kvf_client_recv() call.
 * @sent_ns: CLOCK_MONOTONIC time the request was queued.
 */
struct kvf_client_resp {
	enum kvf_rpc rpc;
	uint64_t tag;
	uint32_t seq;
	uint8_t err_code;
	const uint8_t *body;
	size_t len;
	uint64_t sent_ns;
};

/**
 * kvf_client_recv() - the next response, flushing queued requests while
 * waiting. @timeout_ms: < 0 waits forever.
 * Return: 0; -ETIMEDOUT; -ECONNRESET when the master closed the
 * connection; -EPROTO for an unknown seq_num or a frame over the limit;
 * other -errno.
 */
int kvf_client_recv(struct kvf_client *c, int timeout_ms,
		    struct kvf_client_resp *out);

/**
 * kvf_client_recv_by() - kvf_client_recv() with an absolute deadline in
 * kvf_client_now_ns() time (UINT64_MAX: none), for callers that pace
 * their requests finer than milliseconds.
 */
int kvf_client_recv_by(struct kvf_client *c, uint64_t deadline_ns,
		       struct kvf_client_resp *out);

/**
 * kvf_client_call() - send @req, wait for its answer and decode it into
 * @resp (whose arrays the caller set, see struct kvf_msg_resp). Only with
 * nothing else outstanding. Return: 0, -errno, a negative kvf_wire_status,
 * or a positive transport error code (enum kvf_rpc_errc).
 */
int kvf_client_call(struct kvf_client *c, const struct kvf_msg_req *req,
		    int timeout_ms, struct kvf_msg_resp *resp);

/** kvf_client_abi() - the revision the connection speaks. */
const struct kvf_abi *kvf_client_abi(const struct kvf_client *c);

/** kvf_client_now_ns() - CLOCK_MONOTONIC in ns (the clock of @sent_ns). */
uint64_t kvf_client_now_ns(void);

/*
 * Finding the master: a fixed address, or the leader named by the etcd key
 * of kvforge-master's (and upstream's) election (docs/ha.md). Implemented
 * in client/client_master.c.
 */
struct kvf_client_master;

/**
 * struct kvf_client_leader - the master a connection was made to.
 * @host, @port: its address.
 * @view: the election key's create revision (grows with every new
 *	leader); 0 for a fixed address.
 */
struct kvf_client_leader {
	char host[256];
	uint16_t port;
	int64_t view;
};

/**
 * kvf_client_master_new() - parse where the master is.
 * @spec: "HOST:PORT", or "etcd://HOST:PORT[;HOST:PORT...]" (',' also
 *	separates) for the leader of the cluster named by
 *	$MC_STORE_CLUSTER_ID (default "mooncake_cluster"), as upstream's
 *	clients. No connection is made here.
 * @out: the resolver, for any number of threads at once.
 * Return: %KVF_OK, %KVF_ERR_INVALID_ARGUMENT (malformed @spec),
 * %KVF_ERR_NO_MEMORY.
 */
int kvf_client_master_new(const char *spec, struct kvf_client_master **out);

/** kvf_client_master_free() - free @m (NULL is ignored). */
void kvf_client_master_free(struct kvf_client_master *m);

/** kvf_client_master_is_etcd() - whether @m follows an etcd key. */
bool kvf_client_master_is_etcd(const struct kvf_client_master *m);

/**
 * kvf_client_master_leader() - the master's address: the fixed one, or
 * the value of the etcd key, waiting for a leader to write it until
 * @deadline_ns (kvf_client_now_ns() time).
 * Context: any thread; blocks until @deadline_ns at most.
 * Return: %KVF_OK; %KVF_ERR_OBJECT_NOT_FOUND (no leader by the
 * deadline); %KVF_ERR_IO (etcd unreachable); %KVF_ERR_INVALID_PARAMS (the
 * key holds no "host:port"); %KVF_ERR_NO_MEMORY.
 */
int kvf_client_master_leader(struct kvf_client_master *m, uint64_t deadline_ns,
			     struct kvf_client_leader *l);

/**
 * kvf_client_master_connect() - kvf_client_connect_via() to the master.
 * For etcd, reads the key and dials the address it names; when there is
 * none or the dial fails (a dead leader whose lease has not expired yet, a
 * new one not listening yet), waits for the key to change (at most 100 ms
 * at a time) and tries again until @deadline_ns. A fixed address is
 * dialled once. @l: where the connection goes.
 * Context: any thread; blocks until @deadline_ns at most.
 * Return: as kvf_client_connect_via() (the last attempt's error);
 * -EHOSTUNREACH when etcd named no usable leader by the deadline.
 */
int kvf_client_master_connect(struct kvf_client_master *m,
			      const struct kvf_abi *abi,
			      unsigned max_outstanding,
			      struct kvf__rdma_dev *dev, uint64_t deadline_ns,
			      struct kvf_client **out,
			      struct kvf_client_leader *l);

#endif /* KVF_SERVER_CLIENT_H */
