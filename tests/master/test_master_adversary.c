// SPDX-License-Identifier: MIT
/*
 * tests/master/test_master_adversary.c - one peer's request must not cost
 * other clients their objects, nor make the master hold memory out of
 * proportion to it.
 *
 * Each case starts a fresh kvforge-master (a child process on ephemeral
 * loopback ports, one RPC thread so the attacker and the bystander share
 * it, --client_ttl=2) with a bystander: a client that mounted a segment,
 * put one object, and pings every 100 ms from its own thread. The
 * attacker then sends one hostile request; afterwards the bystander must
 * never have been told to remount and its object must still be there.
 * Timings are never asserted, except as generous liveness bounds (a
 * call's 20 s timeout). KVF_MASTER_BIN overrides ./kvforge-master;
 * KVF_TEST_FILTER runs the cases whose names match.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "client/client.h"
#include "tests/master/test_master_call.h"
#include "master/service.h"

#define TIMEOUT_MS 20000
#define MIB (1ULL << 20)

static pid_t master_pid;
static uint16_t rpc_port, meta_port;
static char data_dir[64];
static bool want_http;

static uint16_t port_after(const char *line, const char *what)
{
	const char *p = strstr(line, what);

	const char *end;

	if (!p)
		return 0;
	p += strlen(what);
	end = p + strcspn(p, " \n");
	while (end > p && end[-1] != ':')
		end--;
	return end > p ? (uint16_t)atoi(end) : 0;
}

/* Start the master with the common flags and @extra (NULL-terminated). */
static void start_master(const char *const *extra)
{
	const char *bin = getenv("KVF_MASTER_BIN");
	const char *argv[32];
	int fds[2], n = 0;
	char line[512];
	FILE *fp;

	if (!bin)
		bin = "./kvforge-master";
	argv[n++] = bin;
	argv[n++] = "--rpc_port=0";
	argv[n++] = "--enable_metric_reporting=false";
	argv[n++] = "--rpc_thread_num=1";
	argv[n++] = "--client_ttl=2";
	argv[n++] = "--expected_objects=4096";
	for (; extra && *extra; extra++)
		argv[n++] = *extra;
	argv[n] = NULL;
	rpc_port = meta_port = 0;
	assert_int_equal(pipe(fds), 0);
	master_pid = fork();
	assert_true(master_pid >= 0);
	if (master_pid == 0) {
		dup2(fds[1], STDOUT_FILENO);
		close(fds[0]);
		close(fds[1]);
		execv(bin, (char *const *)argv);
		_exit(127);
	}
	close(fds[1]);
	fp = fdopen(fds[0], "r");
	while (fp && fgets(line, sizeof(line), fp)) {
		uint16_t p = port_after(line, "RPC listening on ");

		if (p)
			rpc_port = p;
		p = port_after(line, "HTTP metadata listening on ");
		if (p)
			meta_port = p;
		if (rpc_port && (meta_port || !want_http))
			break;
	}
	if (fp)
		fclose(fp);
	assert_true(rpc_port != 0);
}

static void stop_master(void)
{
	int status = 0;

	kill(master_pid, SIGTERM);
	waitpid(master_pid, &status, 0);
	master_pid = 0;
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	if (data_dir[0]) {
		char cmd[128];

		snprintf(cmd, sizeof(cmd), "rm -rf %s", data_dir);
		assert_int_equal(system(cmd), 0);
		data_dir[0] = 0;
	}
}

static struct kvf_client *connect_master(void)
{
	return connect_port(rpc_port);
}

static const struct kvf_str dflt = {"default", 7};

/* ---- the bystander ------------------------------------------------------ */

struct bystander {
	struct kvf_uuid me;
	pthread_t thread;
	bool stop;    /* atomic */
	bool running; /* the thread was started and not joined */
	int remounts; /* NEED_REMOUNT answers seen */
	int failures; /* calls that failed or timed out */
	int pings;
};

static struct bystander by;

static void *ping_loop(void *arg)
{
	struct bystander *b = arg;
	struct kvf_client *c = NULL;
	struct kvf_msg_req q = {.rpc = KVF_RPC_Ping, .client_id = b->me};

	if (kvf_client_connect("127.0.0.1", rpc_port, kvf_abi_find(NULL), 4,
			       &c)) {
		b->failures++;
		return NULL;
	}
	while (!__atomic_load_n(&b->stop, __ATOMIC_RELAXED)) {
		struct answer a;

		if (try_call(c, &q, &a) || a.r.code)
			b->failures++;
		else if (a.r.ping_status != KVF_MC_CLIENT_OK)
			b->remounts++;
		b->pings++;
		usleep(100 * 1000);
	}
	kvf_client_close(c);
	return NULL;
}

/* Mount, remount, put "bystander-key", start pinging. */
static void bystander_start(void)
{
	struct kvf_msg_segment seg = {
		.id = {0xB1, 0xB2},
		.name = {"bystander", 9},
		.base = 0x7B0000000000ULL,
		.size = 64 * MIB,
		.te_endpoint = {"127.0.0.1:23456", 15},
		.protocol = {"tcp", 3},
	};
	struct kvf_key k = {"bystander-key", 13};
	struct kvf_client *c = connect_master();
	struct kvf_msg_req q = {.rpc = KVF_RPC_MountSegment,
				.client_id = {0xB0, 0xB0},
				.segment = seg};
	struct answer a;

	memset(&by, 0, sizeof(by));
	by.me = q.client_id;
	assert_int_equal(call(c, &q, &a)->code, 0);
	q = (struct kvf_msg_req){.rpc = KVF_RPC_ReMountSegment,
				 .client_id = by.me,
				 .segment_array = &seg,
				 .nsegments = 1};
	assert_int_equal(call(c, &q, &a)->code, 0);
	q = (struct kvf_msg_req){.rpc = KVF_RPC_PutStart,
				 .client_id = by.me,
				 .key = {k.data, k.len},
				 .u64 = 4096,
				 .tenant = dflt};
	q.config.replica_num = 1;
	assert_int_equal(call(c, &q, &a)->code, 0);
	q = (struct kvf_msg_req){.rpc = KVF_RPC_PutEnd,
				 .client_id = by.me,
				 .key = {k.data, k.len},
				 .replica_type = 0,
				 .tenant = dflt};
	assert_int_equal(call(c, &q, &a)->code, 0);
	kvf_client_close(c);
	assert_int_equal(pthread_create(&by.thread, NULL, ping_loop, &by), 0);
	by.running = true;
}

/* Stop pinging; the bystander stayed live and its object is there. */
static void bystander_check(void)
{
	struct kvf_client *c;
	struct kvf_msg_req q = {.rpc = KVF_RPC_ExistKey,
				.key = {"bystander-key", 13},
				.tenant = dflt};
	struct answer a;

	/* Pings keep going for two TTLs after the attack. */
	usleep(500 * 1000);
	__atomic_store_n(&by.stop, true, __ATOMIC_RELAXED);
	pthread_join(by.thread, NULL);
	by.running = false;
	assert_true(by.pings > 0);
	assert_int_equal(by.failures, 0);
	assert_int_equal(by.remounts, 0);
	c = connect_master();
	assert_int_equal(call(c, &q, &a)->code, 0);
	assert_true(a.r.b);
	kvf_client_close(c);
}

/* ---- cases -------------------------------------------------------------- */

/*
 * A ReMountSegment of many segments, with the table persisted: over the
 * limit it is refused and mounts nothing; at the limit every segment is
 * mounted (and findable by name).
 */
static void test_remount_many(void **state)
{
	const size_t big = 25000, n = KVF_SERVICE_MAX_REMOUNT;
	struct kvf_msg_segment *segs = calloc(big, sizeof(*segs));
	char *names = malloc(big * 16);
	const char *extra[] = {NULL, NULL};
	struct kvf_client *c;
	struct kvf_msg_req q;
	struct answer a;

	(void)state;
	assert_non_null(segs);
	assert_non_null(names);
	{
		static char flag[96];

		snprintf(data_dir, sizeof(data_dir), "/tmp/kvf-adv-XXXXXX");
		assert_non_null(mkdtemp(data_dir));
		snprintf(flag, sizeof(flag), "--data-dir=%s", data_dir);
		extra[0] = flag;
	}
	start_master(extra);
	bystander_start();
	for (size_t i = 0; i < big; i++) {
		int len = snprintf(names + 16 * i, 16, "m%zu", i);

		segs[i] = (struct kvf_msg_segment){
			.id = {0xA0, i + 1},
			.name = {names + 16 * i, (size_t)len},
			.base = 0x100000000000ULL + i * MIB,
			.size = MIB,
			.te_endpoint = {"127.0.0.2:1", 11},
			.protocol = {"tcp", 3},
		};
	}
	c = connect_master();
	q = (struct kvf_msg_req){.rpc = KVF_RPC_ReMountSegment,
				 .client_id = {0xA0, 0xA0},
				 .segment_array = segs,
				 .nsegments = big};
	assert_int_equal(call(c, &q, &a)->code, KVF_MC_INVALID_PARAMS);
	q.nsegments = n;
	assert_int_equal(call(c, &q, &a)->code, 0);
	/* Every segment is there, findable by name. */
	q = (struct kvf_msg_req){
		.rpc = KVF_RPC_QuerySegmentStatus,
		.key = {names + 16 * (n - 1), strlen(names + 16 * (n - 1))}};
	assert_int_equal(call(c, &q, &a)->code, 0);
	q.key = (struct kvf_str){names + 16 * n, strlen(names + 16 * n)};
	assert_int_equal(call(c, &q, &a)->code, -101); /* SEGMENT_NOT_FOUND */
	kvf_client_close(c);
	bystander_check();
	stop_master();
	free(segs);
	free(names);
}

/* Build a vector<string> view of @n names "p<i>" (4-byte lengths). */
static uint8_t *name_list(size_t n, size_t *len, struct kvf_msg_view *v)
{
	uint8_t *buf = malloc(n * 16), *p = buf;

	assert_non_null(buf);
	for (size_t i = 0; i < n; i++) {
		int l = snprintf((char *)p + 4, 12, "p%zu", i);

		p[0] = (uint8_t)l;
		p[1] = p[2] = p[3] = 0;
		p += 4 + l;
	}
	*len = (size_t)(p - buf);
	*v = (struct kvf_msg_view){.at = buf, .end = p, .n = n, .width = 4};
	return buf;
}

/* A put whose preferred_segments lists far too many names. */
static void test_preferred_many(void **state)
{
	struct kvf_msg_view v;
	size_t len;
	uint8_t *buf;
	struct kvf_client *c;
	struct kvf_msg_req q = {.rpc = KVF_RPC_PutStart,
				.client_id = {0xA1, 0xA1},
				.key = {"attacker-key", 12},
				.u64 = 4096,
				.tenant = dflt};
	struct answer a;

	(void)state;
	start_master(NULL);
	bystander_start();
	c = connect_master();
	q.config.replica_num = 1;
	buf = name_list(400000, &len, &v);
	q.config.preferred_segments = v;
	assert_int_equal(call(c, &q, &a)->code, KVF_MC_INVALID_PARAMS);
	free(buf);
	/* At the limit: accepted (none of the names is mounted). */
	buf = name_list(KVF_SERVICE_MAX_PREFERRED, &len, &v);
	q.config.preferred_segments = v;
	assert_int_equal(call(c, &q, &a)->code, 0);
	free(buf);
	kvf_client_close(c);
	bystander_check();
	stop_master();
}

/* BatchQueryIp: repeated ids answered once; too many refused. */
static void test_query_ip(void **state)
{
	const size_t n = KVF_SERVICE_MAX_QUERY_IDS + 1;
	struct kvf_uuid *ids = malloc(n * sizeof(*ids));
	struct kvf_client *c;
	struct kvf_msg_req q = {.rpc = KVF_RPC_BatchQueryIp};
	struct answer a;

	(void)state;
	assert_non_null(ids);
	start_master(NULL);
	bystander_start();
	c = connect_master();
	for (size_t i = 0; i < n; i++)
		ids[i] = by.me;
	q.uuid_array = ids;
	q.nuuids = n - 1;
	assert_int_equal(call(c, &q, &a)->code, 0);
	assert_int_equal(a.r.map.n, 1);
	q.nuuids = n;
	assert_int_equal(call(c, &q, &a)->code, KVF_MC_INVALID_PARAMS);
	for (size_t i = 0; i < n - 1; i++)
		ids[i] = (struct kvf_uuid){0xDEAD, i + 1};
	q.nuuids = n - 1;
	assert_int_equal(call(c, &q, &a)->code, 0);
	assert_int_equal(a.r.map.n, 0);
	kvf_client_close(c);
	bystander_check();
	stop_master();
	free(ids);
}

static int raw_connect(uint16_t port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons(port)};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

struct streamer {
	int fd;
	bool stop; /* atomic */
};

static void *stream_loop(void *arg)
{
	struct streamer *s = arg;
	uint8_t junk[4096];

	memset(junk, 0x3e, sizeof(junk));
	while (!__atomic_load_n(&s->stop, __ATOMIC_RELAXED))
		if (send(s->fd, junk, sizeof(junk), MSG_NOSIGNAL) < 0)
			break;
	return NULL;
}

/* RDMA asked for, no device: a handshake that never ends streaming. */
static void test_rdma_refusal_stream(void **state)
{
	const char *extra[] = {"--enable_rdma=true", NULL};
	struct streamer s[4];
	pthread_t t[4];

	(void)state;
	start_master(extra);
	bystander_start();
	for (int i = 0; i < 4; i++) {
		s[i] = (struct streamer){.fd = raw_connect(rpc_port)};
		assert_int_equal(
			pthread_create(&t[i], NULL, stream_loop, &s[i]), 0);
	}
	sleep(3); /* longer than the client TTL */
	bystander_check();
	for (int i = 0; i < 4; i++) {
		__atomic_store_n(&s[i].stop, true, __ATOMIC_RELAXED);
		shutdown(s[i].fd, SHUT_RDWR);
		pthread_join(t[i], NULL);
		close(s[i].fd);
	}
	stop_master();
}

/* Send an HTTP request on @fd, return the status of the answer. */
static int http_status(int fd, const char *req)
{
	char buf[4096];
	size_t got = 0;
	struct timeval tv = {.tv_sec = 20};

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	assert_int_equal(send(fd, req, strlen(req), MSG_NOSIGNAL),
			 (ssize_t)strlen(req));
	while (got < sizeof(buf) - 1) {
		ssize_t n = recv(fd, buf + got, sizeof(buf) - 1 - got, 0);

		if (n <= 0)
			break;
		got += (size_t)n;
		buf[got] = 0;
		if (strstr(buf, "\r\n\r\n"))
			break;
	}
	buf[got] = 0;
	return got > 12 ? atoi(buf + 9) : -1;
}

/* Slow senders hold every HTTP slot: a new client still gets served. */
static void test_http_slow_heads(void **state)
{
	const char *extra[] = {"--enable_http_metadata_server=true",
			       "--http_metadata_server_port=0", NULL};
	int slow[128], fd;

	(void)state;
	want_http = true;
	start_master(extra);
	want_http = false;
	assert_true(meta_port != 0);
	for (int i = 0; i < 128; i++) {
		slow[i] = raw_connect(meta_port);
		assert_int_equal(send(slow[i], "GET /hea", 8, MSG_NOSIGNAL), 8);
	}
	usleep(300 * 1000);
	fd = raw_connect(meta_port);
	assert_int_equal(http_status(fd, "GET /health HTTP/1.1\r\n"
					 "Host: x\r\n\r\n"),
			 200);
	close(fd);
	for (int i = 0; i < 128; i++)
		close(slow[i]);
	stop_master();
}

/* The metadata store's total size is bounded. */
static void test_http_store_limit(void **state)
{
	const char *extra[] = {"--enable_http_metadata_server=true",
			       "--http_metadata_server_port=0",
			       "--http_metadata_server_max_bytes=3100000",
			       NULL};
	size_t vlen = 1000000;
	char *req = malloc(vlen + 256);
	int fd;

	(void)state;
	assert_non_null(req);
	want_http = true;
	start_master(extra);
	want_http = false;
	assert_true(meta_port != 0);
	fd = raw_connect(meta_port);
	for (int i = 0; i < 4; i++) {
		int h = snprintf(req, 256,
				 "PUT /metadata?key=k%d HTTP/1.1\r\nHost: x\r\n"
				 "Content-Length: %zu\r\n\r\n",
				 i, vlen);

		memset(req + h, 'v', vlen);
		req[h + vlen] = 0;
		/* Three fit; the fourth would pass the limit. */
		assert_int_equal(http_status(fd, req), i < 3 ? 200 : 507);
	}
	/* Room comes back when a key is deleted. */
	assert_int_equal(http_status(fd, "DELETE /metadata?key=k0 HTTP/1.1\r\n"
					 "Host: x\r\n\r\n"),
			 200);
	{
		int h = snprintf(req, 256,
				 "PUT /metadata?key=k9 HTTP/1.1\r\nHost: x\r\n"
				 "Content-Length: %zu\r\n\r\n",
				 vlen);

		memset(req + h, 'v', vlen);
		req[h + vlen] = 0;
		assert_int_equal(http_status(fd, req), 200);
	}
	close(fd);
	stop_master();
	free(req);
}

/* After a failed case: no pinging thread, no master, no directory left. */
static int cleanup(void **state)
{
	(void)state;
	if (by.running) {
		__atomic_store_n(&by.stop, true, __ATOMIC_RELAXED);
		pthread_join(by.thread, NULL);
		by.running = false;
	}
	if (master_pid > 0) {
		kill(master_pid, SIGKILL);
		waitpid(master_pid, NULL, 0);
		master_pid = 0;
	}
	if (data_dir[0]) {
		char cmd[128];

		snprintf(cmd, sizeof(cmd), "rm -rf %s", data_dir);
		if (system(cmd))
			return -1;
		data_dir[0] = 0;
	}
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_remount_many, cleanup),
		cmocka_unit_test_teardown(test_preferred_many, cleanup),
		cmocka_unit_test_teardown(test_query_ip, cleanup),
		cmocka_unit_test_teardown(test_rdma_refusal_stream, cleanup),
		cmocka_unit_test_teardown(test_http_slow_heads, cleanup),
		cmocka_unit_test_teardown(test_http_store_limit, cleanup),
	};

	signal(SIGPIPE, SIG_IGN);
	if (getenv("KVF_TEST_FILTER"))
		cmocka_set_test_filter(getenv("KVF_TEST_FILTER"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
