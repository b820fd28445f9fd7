/* SPDX-License-Identifier: MIT */
/*
 * tests/rdma/pair.h - test scaffolding for the RDMA stream: connected
 * stream pairs, the captured coro_rpc fixtures, and a small replay engine
 * (a client that pipelines requests, a server that answers each with the
 * captured response) driven like an event loop.
 */
#ifndef KVF_TESTS_RDMA_PAIR_H
#define KVF_TESTS_RDMA_PAIR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "rdma/stream.h"

/* One captured request/response pair. */
struct fixture {
	char rpc[48];
	uint8_t *req, *resp;
	size_t req_len, resp_len;
};

struct fixture_set {
	struct fixture *f;
	size_t n;
};

/* Load every pair of tests/rdma/fixtures/<dir>/index.jsonl; 0 on success. */
int fixtures_load(const char *dir, struct fixture_set *set);
void fixtures_free(struct fixture_set *set);

/*
 * cmocka group fixtures: a device on the fake fabric in *state; the
 * teardown fails when any fabric object is left.
 */
int fake_dev_setup(void **state);
int fake_dev_teardown(void **state);

/* Handshake in memory (no socket): client block -> accept -> connect. */
int pair_connect(struct kvf__rdma_dev *dev, const struct kvf__rdma_cfg *ccfg,
		 const struct kvf__rdma_cfg *scfg, struct kvf__rdma_stream **c,
		 struct kvf__rdma_stream **s);

/* Bytes waiting to be written: iovecs into stable memory. */
#define OUTQ_MAX 4096
struct outq {
	struct iovec iov[OUTQ_MAX];
	size_t head, n, off;
};

void outq_push(struct outq *q, const void *p, size_t len);
/* Write what the stream takes; returns the stream's error or 0. */
int outq_flush(struct outq *q, struct kvf__rdma_stream *s);
bool outq_empty(const struct outq *q);

/* Bytes read, waiting to be framed. */
struct inq {
	uint8_t *buf;
	size_t len, cap;
	bool eof;
};

/* Read until BUSY/EOF; returns 0, or the stream's error. */
int inq_fill(struct inq *q, struct kvf__rdma_stream *s, size_t chunk);
/* Length of the first complete coro_rpc frame (request when @request),
 * or 0 when incomplete. */
size_t inq_frame(const struct inq *q, bool request);
void inq_drop(struct inq *q, size_t n);
void inq_free(struct inq *q);

/*
 * Replay: the client pipelines every request of @set, the server answers
 * each with the captured response (header and body as two buffers, as
 * coro_rpc's server writes them), the client checks every response
 * arrives byte-identical and in order (and the server that every request
 * did). @read_chunk bounds each read() (1 exercises every split). The
 * client and server halves may run on different threads.
 */
struct replay {
	struct kvf__rdma_stream *c, *s;
	const struct fixture_set *set;
	struct outq cout, sout;
	struct inq cin, sin;
	size_t answered, checked;
	size_t bad_client, bad_server; /* each side's own: no shared writes */
	size_t read_chunk;
};

void replay_init(struct replay *r, struct kvf__rdma_stream *c,
		 struct kvf__rdma_stream *s, const struct fixture_set *set,
		 size_t read_chunk);
/* One event-loop turn for each side; 1 while running, 0 done, -1 failed. */
int replay_step_client(struct replay *r);
int replay_step_server(struct replay *r);
/* Both halves on this thread: mismatches, or -1 (failure or stall). */
long replay_run(struct replay *r);
void replay_free(struct replay *r);

#endif /* KVF_TESTS_RDMA_PAIR_H */
