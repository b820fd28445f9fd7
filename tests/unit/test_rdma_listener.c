/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_rdma_listener.c - RDMA on a server's TCP port: the
 * switch (MC_RPC_PROTOCOL=rdma or the flag), the peeked first byte, the
 * handshake on the accepted socket, recv/send conventions on the stream,
 * and a machine without a device: TCP classification unchanged, RDMA
 * handshakes refused, one log line.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include <kvforge/status.h>

#include "rdma/fake.h"
#include "rdma/listener.h"
#include "rdma/stream.h"

static void test_wanted(void **state)
{
	(void)state;
	unsetenv("MC_RPC_PROTOCOL");
	assert_false(kvf__rdma_wanted(false));
	assert_true(kvf__rdma_wanted(true));
	setenv("MC_RPC_PROTOCOL", "rdma", 1);
	assert_true(kvf__rdma_wanted(false));
	/* Exactly "rdma", case-sensitive, as upstream. */
	setenv("MC_RPC_PROTOCOL", "RDMA", 1);
	assert_false(kvf__rdma_wanted(false));
	setenv("MC_RPC_PROTOCOL", "tcp", 1);
	assert_false(kvf__rdma_wanted(false));
	unsetenv("MC_RPC_PROTOCOL");
}

static void sockpair(int sv[2])
{
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
}

static void test_classify(void **state)
{
	struct kvf__rdma_listener *l;
	uint8_t b;
	int sv[2];

	(void)state;
	assert_int_equal(kvf__rdma_listener_open(kvf__verbs_fake(), NULL, NULL, &l),
			 KVF_OK);
	sockpair(sv);
	assert_int_equal(kvf__rdma_classify(l, sv[1]), KVF_RDMA_FIRST_WAIT);
	b = 0x15;
	assert_int_equal(write(sv[0], &b, 1), 1);
	assert_int_equal(kvf__rdma_classify(l, sv[1]), KVF_RDMA_FIRST_TCP);
	/* Peeked, not consumed: the request parser still sees its magic. */
	b = 0;
	assert_int_equal(read(sv[1], &b, 1), 1);
	assert_int_equal(b, 0x15);
	b = 0x3e;
	assert_int_equal(write(sv[0], &b, 1), 1);
	assert_int_equal(kvf__rdma_classify(l, sv[1]), KVF_RDMA_FIRST_RDMA);
	/* RDMA disabled: the handshake byte is a bad first byte. */
	assert_int_equal(kvf__rdma_classify(NULL, sv[1]), KVF_RDMA_FIRST_CLOSE);
	assert_int_equal(read(sv[1], &b, 1), 1);
	b = 0x00;
	assert_int_equal(write(sv[0], &b, 1), 1);
	assert_int_equal(kvf__rdma_classify(l, sv[1]), KVF_RDMA_FIRST_CLOSE);
	assert_int_equal(read(sv[1], &b, 1), 1);
	close(sv[0]);
	assert_int_equal(kvf__rdma_classify(l, sv[1]), KVF_RDMA_FIRST_CLOSE);
	close(sv[1]);
	kvf__rdma_listener_close(l);
}

/* The client half of the handshake, by hand over a socketpair. */
static struct kvf__rdma_stream *client_hello(struct kvf__rdma_dev *dev, int fd)
{
	uint8_t block[KVF_RDMA_HS_LEN];
	struct kvf__rdma_stream *c;
	struct kvf__rdma_hs hs;

	assert_int_equal(kvf__rdma_stream_create(dev, NULL, &c), KVF_OK);
	kvf__rdma_stream_local(c, &hs);
	kvf__rdma_hs_encode(&hs, block);
	assert_int_equal(write(fd, block, sizeof(block)), sizeof(block));
	return c;
}

static void client_finish(struct kvf__rdma_stream *c, int fd)
{
	uint8_t block[KVF_RDMA_HS_LEN];
	struct kvf__rdma_hs hs;

	assert_int_equal(read(fd, block, sizeof(block)), sizeof(block));
	assert_int_equal(kvf__rdma_hs_decode(block, &hs), KVF_OK);
	assert_int_equal(kvf__rdma_stream_connect(c, &hs), KVF_OK);
}

/* A connection through the listener, as a client on @cdev makes it. */
static void connect_via(struct kvf__rdma_listener *l,
			struct kvf__rdma_dev *cdev, struct kvf__rdma_stream **c,
			struct kvf__rdma_stream **s)
{
	int sv[2];

	sockpair(sv);
	*c = client_hello(cdev, sv[0]);
	assert_int_equal(kvf__rdma_classify(l, sv[1]), KVF_RDMA_FIRST_RDMA);
	assert_int_equal(kvf__rdma_listener_accept(l, sv[1], 1000, s), KVF_OK);
	client_finish(*c, sv[0]);
	close(sv[0]);
	close(sv[1]);
}

/* A listener and a client device, both on the fake fabric. */
struct lenv {
	struct kvf__rdma_listener *l;
	struct kvf__rdma_dev *cdev;
};

static int open_env(void **state)
{
	static struct lenv e;
	char why[160];

	if (kvf__rdma_listener_open(kvf__verbs_fake(), NULL, NULL, &e.l) ||
	    kvf__rdma_dev_open(kvf__verbs_fake(), &e.cdev, why, sizeof(why)))
		return -1;
	*state = &e;
	return 0;
}

static int close_env(void **state)
{
	struct lenv *e = *state;

	kvf__rdma_dev_close(e->cdev);
	kvf__rdma_listener_close(e->l);
	return kvf__fake_live_objects() ? -1 : 0;
}

static void test_accept_and_io(void **state)
{
	struct lenv *e = *state;
	struct kvf__rdma_stream *c, *s;
	const uint8_t req[24] = {0x15, 0, 0, 0, 7};
	uint8_t got[64];

	assert_true(kvf__rdma_listener_ready(e->l));
	connect_via(e->l, e->cdev, &c, &s);

	/* recv/send conventions. */
	errno = 0;
	assert_int_equal(kvf__rdma_recv(s, got, sizeof(got)), -1);
	assert_int_equal(errno, EAGAIN);
	assert_int_equal(kvf__rdma_send(c, req, sizeof(req)), sizeof(req));
	assert_int_equal(kvf__rdma_recv(s, got, sizeof(got)), sizeof(req));
	assert_memory_equal(got, req, sizeof(req));
	assert_int_equal(kvf__rdma_send(s, req, 16), 16);
	assert_int_equal(kvf__rdma_recv(c, got, sizeof(got)), 16);
	/* The client fails: the server's next send reports it. */
	assert_int_equal(kvf__fake_force_error(kvf__rdma_stream_qpn(c)), 0);
	assert_int_equal(kvf__rdma_send(s, req, 16), 16);
	errno = 0;
	assert_int_equal(kvf__rdma_recv(s, got, sizeof(got)), -1);
	assert_int_equal(errno, ECONNRESET);
	kvf__rdma_stream_close(s);
	kvf__rdma_stream_close(c);
}

static void test_end_of_stream(void **state)
{
	struct lenv *e = *state;
	struct kvf__rdma_stream *c, *s;
	uint8_t got[8];

	connect_via(e->l, e->cdev, &c, &s);
	kvf__rdma_stream_close(c);
	assert_int_equal(kvf__rdma_recv(s, got, sizeof(got)), 0);
	kvf__rdma_stream_close(s);
}

/* No device: TCP still classified, RDMA refused, one log line. */
static void test_no_device(void **state)
{
	struct kvf__rdma_listener *l;
	struct kvf__rdma_stream *s = NULL;
	FILE *tmp = tmpfile();
	char line[512];
	int saved, lines = 0, sv[2];
	uint8_t b = 0x3e;

	(void)state;
	kvf__fake_set_device_errno(ENOSYS);
	saved = dup(STDERR_FILENO);
	fflush(stderr);
	assert_true(dup2(fileno(tmp), STDERR_FILENO) >= 0);
	assert_int_equal(kvf__rdma_listener_open(kvf__verbs_fake(), NULL, NULL, &l),
			 KVF_OK);
	assert_false(kvf__rdma_listener_ready(l));
	for (int i = 0; i < 3; i++) {
		sockpair(sv);
		assert_int_equal(write(sv[0], &b, 1), 1);
		assert_int_equal(kvf__rdma_classify(l, sv[1]),
				 KVF_RDMA_FIRST_RDMA);
		assert_int_equal(kvf__rdma_listener_accept(l, sv[1], 100, &s),
				 KVF_ERR_UNAVAILABLE);
		assert_null(s);
		close(sv[0]);
		close(sv[1]);
	}
	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(saved);
	rewind(tmp);
	while (fgets(line, sizeof(line), tmp)) {
		lines++;
		assert_non_null(strstr(line, strerror(ENOSYS)));
	}
	fclose(tmp);
	assert_int_equal(lines, 1);
	kvf__rdma_listener_close(l);
	kvf__fake_set_device_errno(0);
	assert_int_equal(kvf__fake_live_objects(), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_wanted),
		cmocka_unit_test(test_classify),
		cmocka_unit_test_setup_teardown(test_accept_and_io, open_env,
						close_env),
		cmocka_unit_test_setup_teardown(test_end_of_stream, open_env,
						close_env),
		cmocka_unit_test(test_no_device),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
