/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_rdma_threads.c - the transport as a server uses it,
 * across threads: a listener on loopback TCP reads each connection's
 * first byte, demultiplexes (0x15 TCP, 0x3e RDMA, else close), runs the
 * server handshake on RDMA ones and closes the socket; then one epoll loop
 * serves every stream on its completion-channel fd while each client
 * runs its own loop on its thread. Every captured pair is replayed on
 * every connection, byte-identical; clients close with a zero-length SEND
 * and the server sees the end of each stream. Run under TSan too.
 */
#include "config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include <kvforge/status.h>

#include "rdma/fake.h"
#include "tests/rdma/pair.h"

#define NR_CLIENTS 3
#define HS_TIMEOUT_MS 5000
#define IDLE_LIMIT 20 /* epoll timeouts of 500 ms in a row: stalled */

struct shared {
	struct kvf__rdma_dev *dev;
	struct fixture_set set;
	struct sockaddr_in addr;
	int lfd;
	struct replay r[NR_CLIENTS];
	int client_ret[NR_CLIENTS];
	int tcp_seen, junk_seen;
};

static int tcp_connect(const struct sockaddr_in *addr)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd >= 0 &&
	    connect(fd, (const struct sockaddr *)addr, sizeof(*addr))) {
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * A plain coro_rpc client (first byte 0x15) and a stranger (0x00): the
 * server closes both (it serves no TCP here). Returns 0 when it did.
 */
static void *other_clients(void *p)
{
	static const uint8_t firsts[2] = {0x15, 0x00};
	struct shared *sh = p;
	intptr_t bad = 0;

	for (int i = 0; i < 2; i++) {
		int fd = tcp_connect(&sh->addr);
		char c;

		if (fd < 0 || send(fd, &firsts[i], 1, 0) != 1 ||
		    recv(fd, &c, 1, 0) != 0)
			bad++;
		if (fd >= 0)
			close(fd);
	}
	return (void *)bad;
}

struct client_arg {
	struct shared *sh;
	int idx;
};

static int client_loop(struct replay *r)
{
	int ep = epoll_create1(0), idle = 0, ret = -1;
	struct epoll_event ev = {.events = EPOLLIN};

	if (ep < 0 ||
	    epoll_ctl(ep, EPOLL_CTL_ADD, kvf__rdma_stream_fd(r->c), &ev))
		goto out;
	while (idle < IDLE_LIMIT) {
		int st = replay_step_client(r);

		if (st <= 0) {
			ret = st;
			break;
		}
		idle = epoll_wait(ep, &ev, 1, 500) == 0 ? idle + 1 : 0;
	}
out:
	if (ep >= 0)
		close(ep);
	return ret;
}

static void *client_thread(void *p)
{
	struct client_arg *a = p;
	struct shared *sh = a->sh;
	struct replay *r = &sh->r[a->idx];
	int fd = tcp_connect(&sh->addr);

	sh->client_ret[a->idx] = -1;
	if (fd < 0)
		return NULL;
	if (kvf__rdma_dial_fd(fd, sh->dev, NULL, HS_TIMEOUT_MS, &r->c)) {
		close(fd);
		return NULL;
	}
	close(fd); /* liveness never depends on the TCP socket */
	sh->client_ret[a->idx] = client_loop(r);
	kvf__rdma_stream_close(r->c);
	return NULL;
}

/* Accept every connection, demultiplex, hand RDMA ones their stream. */
static int accept_all(struct shared *sh, int ep)
{
	int rdma = 0;

	while (rdma < NR_CLIENTS || sh->tcp_seen + sh->junk_seen < 2) {
		int fd = accept(sh->lfd, NULL, NULL);
		struct kvf__rdma_stream *s;
		struct epoll_event ev = {.events = EPOLLIN};
		uint8_t first;

		if (fd < 0 || recv(fd, &first, 1, 0) != 1)
			return -1;
		switch (kvf__rdma_demux(first, true)) {
		case KVF_RDMA_DEMUX_TCP:
			sh->tcp_seen++;
			break;
		case KVF_RDMA_DEMUX_CLOSE:
			sh->junk_seen++;
			break;
		case KVF_RDMA_DEMUX_RDMA:
			if (kvf__rdma_serve_fd(fd, first, sh->dev, NULL,
					       HS_TIMEOUT_MS, &s))
				return -1;
			/* Every client sends the same requests, so the
			 * server half of replay i may serve any of them. */
			sh->r[rdma].s = s;
			ev.data.u32 = (uint32_t)rdma++;
			if (epoll_ctl(ep, EPOLL_CTL_ADD, kvf__rdma_stream_fd(s),
				      &ev))
				return -1;
			break;
		}
		close(fd);
	}
	return 0;
}

/* Serve until every client closed its stream. */
static int serve(struct shared *sh, int ep)
{
	int open = NR_CLIENTS, idle = 0;

	while (open && idle < IDLE_LIMIT) {
		struct epoll_event ev[NR_CLIENTS];
		int n = epoll_wait(ep, ev, NR_CLIENTS, 500);

		idle = n == 0 ? idle + 1 : 0;
		for (int i = 0; i < n; i++) {
			struct replay *r = &sh->r[ev[i].data.u32];

			if (!r->s)
				continue;
			if (replay_step_server(r) < 0)
				return -1;
			if (r->sin.eof) {
				kvf__rdma_stream_close(r->s);
				r->s = NULL;
				open--;
			}
		}
	}
	return open ? -1 : 0;
}

static void test_serve_clients(void **state)
{
	struct shared *sh = *state;
	struct client_arg args[NR_CLIENTS];
	pthread_t th[NR_CLIENTS], other;
	int ep = epoll_create1(0);
	void *other_bad;

	assert_true(ep >= 0);
	assert_int_equal(pthread_create(&other, NULL, other_clients, sh), 0);
	for (int i = 0; i < NR_CLIENTS; i++) {
		args[i] = (struct client_arg){sh, i};
		replay_init(&sh->r[i], NULL, NULL, &sh->set, 512);
	}
	for (int i = 0; i < NR_CLIENTS; i++)
		assert_int_equal(
			pthread_create(&th[i], NULL, client_thread, &args[i]),
			0);
	assert_int_equal(accept_all(sh, ep), 0);
	assert_int_equal(serve(sh, ep), 0);
	for (int i = 0; i < NR_CLIENTS; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(sh->client_ret[i], 0);
		assert_int_equal(sh->r[i].checked, sh->set.n);
		assert_int_equal(sh->r[i].answered, sh->set.n);
		assert_int_equal(sh->r[i].bad_client + sh->r[i].bad_server, 0);
		replay_free(&sh->r[i]);
	}
	pthread_join(other, &other_bad);
	assert_null(other_bad);
	assert_int_equal(sh->tcp_seen, 1);
	assert_int_equal(sh->junk_seen, 1);
	close(ep);
}

static int setup(void **state)
{
	static struct shared sh;
	socklen_t len = sizeof(sh.addr);
	char why[160];

	if (kvf__rdma_dev_open(kvf__verbs_fake(), &sh.dev, why, sizeof(why)) ||
	    fixtures_load("cpp-client", &sh.set))
		return -1;
	sh.lfd = socket(AF_INET, SOCK_STREAM, 0);
	sh.addr.sin_family = AF_INET;
	sh.addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (sh.lfd < 0 ||
	    bind(sh.lfd, (struct sockaddr *)&sh.addr, sizeof(sh.addr)) ||
	    listen(sh.lfd, 8) ||
	    getsockname(sh.lfd, (struct sockaddr *)&sh.addr, &len))
		return -1;
	*state = &sh;
	return 0;
}

static int teardown(void **state)
{
	struct shared *sh = *state;

	close(sh->lfd);
	fixtures_free(&sh->set);
	kvf__rdma_dev_close(sh->dev);
	return kvf__fake_live_objects() ? -1 : 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_serve_clients),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
