// SPDX-License-Identifier: MIT
/*
 * tests/master/test_master_stall.c - the serving clock (it stops while a
 * loop thread is stuck, resumes after, never goes backwards) and a
 * connection's output buffer (freed once a large answer has left).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <kvforge.h>

#include "base/clock.h"
#include "wire/abi.h"
#include "master/conn.h"
#include "master/flags.h"
#include "wire/frame.h"
#include "master/registry.h"
#include "master/service.h"
#include "master/stallclock.h"

/* Read the clock until two readings @gap_us apart are equal (or not). */
static bool clock_settles(struct kvf_stallclock *sc, bool want_equal,
			  uint64_t *last)
{
	for (int i = 0; i < 100; i++) {
		uint64_t a = kvf_stallclock_now(sc), b;

		usleep(50 * 1000);
		b = kvf_stallclock_now(sc);
		assert_true(a >= *last && b >= a); /* never backwards */
		*last = b;
		if ((a == b) == want_equal)
			return true;
	}
	return false;
}

static void test_clock_stops_while_stalled(void **state)
{
	struct kvf_stallclock *sc = NULL;
	uint64_t *beacon, last = 0;

	(void)state;
	/*
	 * A 2 s threshold: a wake-up that began 10 s ago is a stall at once,
	 * one that began now is serving time however late this thread reads
	 * the clock after it (with 100 ms, a sanitized thread descheduled
	 * that long between the two saw a "short" wake-up stall the clock).
	 */
	assert_int_equal(kvf_stallclock_new(2000, &sc), KVF_OK);
	beacon = kvf_stallclock_beacon(sc);
	assert_non_null(beacon);
	assert_int_equal(kvf_stallclock_start(sc), KVF_OK);
	/* Idle: the clock runs. */
	assert_true(clock_settles(sc, false, &last));
	/* A wake-up that began 10 s ago: stalled, the clock stops. */
	kvf_stallclock_busy(beacon, kvf__now_ns() - 10000000000ULL);
	assert_true(clock_settles(sc, true, &last));
	/* Back in epoll_wait(): it runs again, from where it stopped. */
	kvf_stallclock_idle(beacon);
	assert_true(clock_settles(sc, false, &last));
	assert_true(kvf_stallclock_stalled_ns(sc) > 0);
	/* A short wake-up is serving time. */
	kvf_stallclock_busy(beacon, kvf__now_ns());
	assert_true(clock_settles(sc, false, &last));
	/* A thread that exits busy gives its beacon back: no stall. */
	kvf_stallclock_busy(beacon, kvf__now_ns() - 10000000000ULL);
	kvf_stallclock_release(sc, beacon);
	assert_true(clock_settles(sc, false, &last));
	kvf_stallclock_free(sc);
}

/* Beacons are reused once given back (an RPC server restarted). */
static void test_beacons_reused(void **state)
{
	struct kvf_stallclock *sc = NULL;
	uint64_t *b[KVF_STALLCLOCK_BEACONS];

	(void)state;
	assert_int_equal(kvf_stallclock_new(100, &sc), KVF_OK);
	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < KVF_STALLCLOCK_BEACONS; i++) {
			b[i] = kvf_stallclock_beacon(sc);
			assert_non_null(b[i]);
		}
		assert_null(kvf_stallclock_beacon(sc));
		for (int i = 0; i < KVF_STALLCLOCK_BEACONS; i++)
			kvf_stallclock_release(sc, b[i]);
	}
	kvf_stallclock_free(sc);
}

/* ---- the output buffer -------------------------------------------------- */

static void set_nonblock(int fd)
{
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

static void test_output_buffer_shrinks(void **state)
{
	const size_t nkeys = 65536;
	struct kvf_master_flags flags;
	struct kvf_config cfg;
	struct kvf_engine *e = NULL;
	struct kvf_registry *reg = NULL;
	struct kvf_service *svc = NULL;
	struct kvf_service_options so;
	struct kvf_conn_env env;
	struct kvf_key *keys = calloc(nkeys, sizeof(*keys));
	char *names = malloc(nkeys * 8);
	struct kvf_msg_req q = {.rpc = KVF_RPC_BatchGetReplicaList,
				.tenant = {"default", 7}};
	struct kvf_wbuf req;
	struct kvf_conn *c;
	uint8_t *ans = malloc(1 << 20);
	size_t sent = 0, got = 0, want = 0;
	int sv[2];
	size_t at;

	(void)state;
	assert_non_null(keys);
	assert_non_null(names);
	assert_non_null(ans);
	kvf_config_init(&cfg);
	cfg.background = false;
	cfg.expected_objects = 1024;
	assert_int_equal(kvf_engine_open(&cfg, &e), KVF_OK);
	assert_int_equal(kvf_registry_open(e, NULL, 10000, &reg), KVF_OK);
	kvf_flags_defaults(&flags);
	so = (struct kvf_service_options){.abi = kvf_abi_find(NULL),
					  .engine = e,
					  .registry = reg,
					  .flags = &flags};
	assert_int_equal(kvf_service_new(&so, &svc), KVF_OK);
	env = (struct kvf_conn_env){.service = svc,
				    .scratch = kvf_service_scratch_new(svc),
				    .max_request_bytes = 8 << 20};
	assert_non_null(env.scratch);

	/* One BatchGetReplicaList of 65,536 missing keys: an answer of 100s of
	 * KiB. */
	for (size_t i = 0; i < nkeys; i++) {
		int n = snprintf(names + 8 * i, 8, "k%05zu", i);

		keys[i] = (struct kvf_key){names + 8 * i, (size_t)n};
	}
	q.keys = keys;
	q.nkeys = nkeys;
	kvf_wbuf_init(&req);
	at = kvf_frame_req_begin(&req);
	assert_int_equal(kvf_msg_req_encode(&req, so.abi, &q), 0);
	kvf_frame_req_end(&req, at, 1,
			  so.abi->rpc[KVF_RPC_BatchGetReplicaList].function_id);

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv),
			 0);
	set_nonblock(sv[0]);
	set_nonblock(sv[1]);
	c = kvf_conn_new(sv[0], kvf__now_ns());
	assert_non_null(c);
	while (!want || got < want) {
		ssize_t n;

		if (sent < req.len) {
			n = send(sv[1], req.data + sent, req.len - sent, 0);
			if (n > 0)
				sent += (size_t)n;
		}
		assert_int_equal(kvf_conn_readable(c, &env), KVF_CONN_KEEP);
		n = recv(sv[1], ans + (got < (1 << 20) ? got : 0),
			 got < (1 << 20) ? (1 << 20) - got : (1 << 20), 0);
		if (n > 0)
			got += (size_t)n;
		if (!want && got >= KVF_FRAME_RESP_LEN) {
			struct kvf_frame_resp h;

			kvf_frame_resp_parse(ans, &h);
			want = KVF_FRAME_RESP_LEN + h.length + h.attach_length;
		}
		if (kvf_conn_wants_write(c))
			assert_int_equal(kvf_conn_writable(c, &env),
					 KVF_CONN_KEEP);
	}
	/* The answer was larger than what an idle connection keeps... */
	assert_true(want > KVF_CONN_OUT_KEEP);
	/* ...and, all of it sent, its buffer is gone. */
	assert_false(kvf_conn_wants_write(c));
	assert_true(c->out.cap <= KVF_CONN_OUT_KEEP);

	kvf_conn_free(c);
	close(sv[1]);
	kvf_wbuf_free(&req);
	kvf_service_scratch_free(env.scratch);
	kvf_service_free(svc);
	kvf_registry_close(reg);
	kvf_engine_close(e);
	free(keys);
	free(names);
	free(ans);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_clock_stops_while_stalled),
		cmocka_unit_test(test_beacons_reused),
		cmocka_unit_test(test_output_buffer_shrinks),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
