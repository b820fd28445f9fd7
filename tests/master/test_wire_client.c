// SPDX-License-Identifier: MIT
/*
 * tests/master/test_wire_client.c - the C client (client/client.h) and the
 * load generator (kvforge-bench --master, all phases or those --phases
 * names) against a stand-in master.
 *
 * The stand-in is built from the codec only: it answers every request of
 * the bench's flow with fixed, well-formed values, and it answers the
 * requests of one read in *reverse* order, so the client's matching by
 * seq_num is exercised. A key named "bad-seq" makes it answer with a
 * seq_num nobody asked for, which the client must refuse.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "client/client.h"

#ifndef KVF_BENCH_PATH
#error "KVF_BENCH_PATH must name tools/kvforge-bench"
#endif

#define FAKE_MAX_ITEMS 1024

struct fake {
	int lfd;
	uint16_t port;
	pthread_t tid;
	pthread_t conns[256];
	unsigned nconns;
};

struct fake_conn {
	int fd;
	const struct kvf_abi *abi;
	struct kvf_key keys[FAKE_MAX_ITEMS];
	uint64_t vals[FAKE_MAX_ITEMS];
	uint8_t has[FAKE_MAX_ITEMS];
	struct kvf_msg_desc descs[FAKE_MAX_ITEMS];
	struct kvf_msg_replicas reps[FAKE_MAX_ITEMS];
	int32_t codes[FAKE_MAX_ITEMS];
	uint8_t bools[FAKE_MAX_ITEMS];
};

static void fake_descs(struct fake_conn *fc, size_t n, int32_t status)
{
	for (size_t i = 0; i < n; i++) {
		fc->descs[i] = (struct kvf_msg_desc){
			.id = i,
			.kind = KVF_MC_DESC_MEMORY,
			.status = status,
			.size = 4096,
			.addr = (1ull << 44) + 4096 * i,
			.protocol = {"tcp", 3},
			.endpoint = {"127.0.0.1:1", 11},
		};
		fc->reps[i] = (struct kvf_msg_replicas){
			.descs = &fc->descs[i], .n = 1, .lease_ttl_ms = 500};
	}
}

/* Encode the answer to one request body into @w. */
static void fake_answer(struct fake_conn *fc, const struct kvf_frame_req *h,
			const uint8_t *body, struct kvf_wbuf *w)
{
	const struct kvf_abi *abi = fc->abi;
	struct kvf_msg_items items = {fc->keys, fc->vals, fc->has,
				      FAKE_MAX_ITEMS};
	struct kvf_msg_req q;
	enum kvf_rpc rpc;
	uint32_t seq = h->seq_num;
	size_t at;

	if (!kvf_abi_rpc_of(abi, h->function_id, &rpc)) {
		kvf_frame_resp_error(w, seq,
				     KVF_RPC_ERRC_FUNCTION_NOT_REGISTERED,
				     KVF_FRAME_MSG_NOT_REGISTERED);
		return;
	}
	if (kvf_msg_req_decode(abi, rpc, body, h->length, &items, &q, NULL)) {
		kvf_frame_resp_error(w, seq, KVF_RPC_ERRC_INVALID_RPC_ARGUMENTS,
				     KVF_FRAME_MSG_INVALID_ARGS);
		return;
	}
	if (q.nkeys && q.keys[0].len == 7 &&
	    !memcmp(q.keys[0].data, "bad-seq", 7))
		seq += 1000;
	memset(fc->codes, 0, sizeof(fc->codes));
	memset(fc->bools, 1, sizeof(fc->bools));
	at = kvf_frame_resp_begin(w);
	switch (rpc) {
	case KVF_RPC_ServiceReady:
		kvf_msg_enc_str(w, abi, rpc, (struct kvf_str){"2.0.0", 5});
		break;
	case KVF_RPC_Ping:
		kvf_msg_enc_ping(w, abi, 0, KVF_MC_CLIENT_OK);
		break;
	case KVF_RPC_MountSegment:
	case KVF_RPC_ReMountSegment:
	case KVF_RPC_UnmountSegment:
		kvf_msg_enc_ok(w, abi, rpc);
		break;
	case KVF_RPC_BatchPutStart:
	case KVF_RPC_BatchGetReplicaList:
		fake_descs(fc, q.nkeys,
			   rpc == KVF_RPC_BatchPutStart
				   ? KVF_MC_REPLICA_PROCESSING
				   : KVF_MC_REPLICA_COMPLETE);
		kvf_msg_enc_replicas_vec(w, abi, rpc, fc->reps, q.nkeys);
		break;
	case KVF_RPC_BatchExistKey:
		kvf_msg_enc_bools(w, abi, rpc, fc->codes, fc->bools, q.nkeys);
		break;
	case KVF_RPC_BatchPutEnd:
	case KVF_RPC_BatchRemove:
		kvf_msg_enc_codes(w, abi, rpc, fc->codes, q.nkeys);
		break;
	default:
		kvf_msg_enc_error(w, abi, rpc, KVF_MC_NOT_SUPPORTED, q.nkeys);
		break;
	}
	kvf_frame_resp_end(w, at, seq, 0);
}

static bool send_all(int fd, const uint8_t *p, size_t n)
{
	while (n) {
		ssize_t k = send(fd, p, n, MSG_NOSIGNAL);

		if (k <= 0)
			return false;
		p += k;
		n -= (size_t)k;
	}
	return true;
}

/* Answer whole frames of one read, last first. */
static size_t fake_serve(struct fake_conn *fc, const uint8_t *buf, size_t len,
			 struct kvf_wbuf *w)
{
	size_t off = 0, nmsg = 0, starts[512];

	kvf_wbuf_reset(w);
	while (len - off >= KVF_FRAME_REQ_LEN && nmsg < 511) {
		struct kvf_frame_req h;

		if (kvf_frame_req_parse(buf + off, &h))
			return SIZE_MAX;
		if (len - off - KVF_FRAME_REQ_LEN < h.length)
			break;
		starts[nmsg++] = w->len;
		fake_answer(fc, &h, buf + off + KVF_FRAME_REQ_LEN, w);
		off += KVF_FRAME_REQ_LEN + h.length;
	}
	starts[nmsg] = w->len;
	for (size_t i = nmsg; i-- > 0;)
		if (!send_all(fc->fd, w->data + starts[i],
			      starts[i + 1] - starts[i]))
			return SIZE_MAX;
	return off;
}

static void *fake_conn_thread(void *arg)
{
	struct fake_conn *fc = arg;
	size_t cap = 1 << 20, have = 0;
	uint8_t *buf = malloc(cap);
	struct kvf_wbuf w;

	kvf_wbuf_init(&w);
	while (buf) {
		ssize_t n = recv(fc->fd, buf + have, cap - have, 0);
		size_t used;

		if (n <= 0)
			break;
		have += (size_t)n;
		used = fake_serve(fc, buf, have, &w);
		if (used == SIZE_MAX)
			break;
		memmove(buf, buf + used, have - used);
		have -= used;
	}
	kvf_wbuf_free(&w);
	free(buf);
	close(fc->fd);
	free(fc);
	return NULL;
}

static void *fake_accept_thread(void *arg)
{
	struct fake *f = arg;

	for (;;) {
		int fd = accept(f->lfd, NULL, NULL);
		struct fake_conn *fc;
		pthread_t t;
		int one = 1;

		if (fd < 0)
			return NULL;
		fc = calloc(1, sizeof(*fc));
		assert_non_null(fc);
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		fc->fd = fd;
		fc->abi = kvf_abi_find(NULL);
		pthread_create(&t, NULL, fake_conn_thread, fc);
		if (f->nconns < 256)
			f->conns[f->nconns++] = t;
		else
			pthread_detach(t);
	}
}

static int fake_start(void **state)
{
	struct fake *f = calloc(1, sizeof(*f));
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t alen = sizeof(a);

	assert_non_null(f);
	f->lfd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(f->lfd >= 0);
	assert_int_equal(bind(f->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(f->lfd, 16), 0);
	assert_int_equal(getsockname(f->lfd, (struct sockaddr *)&a, &alen), 0);
	f->port = ntohs(a.sin_port);
	pthread_create(&f->tid, NULL, fake_accept_thread, f);
	*state = f;
	return 0;
}

static int fake_stop(void **state)
{
	struct fake *f = *state;

	shutdown(f->lfd, SHUT_RDWR);
	close(f->lfd);
	pthread_join(f->tid, NULL);
	/* every client closed its connection: the threads are ending */
	for (unsigned i = 0; i < f->nconns; i++)
		pthread_join(f->conns[i], NULL);
	free(f);
	return 0;
}

static struct kvf_client *connect_fake(void **state, unsigned depth)
{
	struct fake *f = *state;
	struct kvf_client *c;

	assert_int_equal(kvf_client_connect("127.0.0.1", f->port,
					    kvf_abi_find(NULL), depth, &c),
			 0);
	return c;
}

static void test_call(void **state)
{
	struct kvf_client *c = connect_fake(state, 4);
	struct kvf_msg_replicas item;
	struct kvf_msg_resp resp = {.items = &item, .cap = 1};
	struct kvf_msg_req q = {.rpc = KVF_RPC_ServiceReady};

	assert_int_equal(kvf_client_call(c, &q, 5000, &resp), 0);
	assert_int_equal(resp.code, 0);
	assert_int_equal(resp.str.len, 5);
	assert_memory_equal(resp.str.data, "2.0.0", 5);
	q = (struct kvf_msg_req){.rpc = KVF_RPC_Ping, .client_id = {1, 2}};
	assert_int_equal(kvf_client_call(c, &q, 5000, &resp), 0);
	assert_int_equal(resp.ping_status, KVF_MC_CLIENT_OK);
	/* an answer "not supported" in the RPC's own shape */
	q = (struct kvf_msg_req){.rpc = KVF_RPC_GetReplicaList,
				 .key = {"k", 1}};
	assert_int_equal(kvf_client_call(c, &q, 5000, &resp), 0);
	assert_int_equal(resp.code, KVF_MC_NOT_SUPPORTED);
	kvf_client_close(c);
}

/* Many batches in flight, answered out of order, each matched. */
static void test_pipeline(void **state)
{
	enum { DEPTH = 64, ROUNDS = 5 };
	struct kvf_client *c = connect_fake(state, DEPTH);
	struct kvf_key keys[8] = {
		{"a", 1}, {"b", 1}, {"c", 1}, {"d", 1},
		{"e", 1}, {"f", 1}, {"g", 1}, {"h", 1},
	};
	static struct kvf_msg_replicas items[16];
	static struct kvf_msg_desc descs[16];
	uint8_t bools[16];
	unsigned answered = 0, out_of_order = 0;
	uint32_t last_seq = 0;

	for (int round = 0; round < ROUNDS; round++) {
		for (uint64_t i = 0; i < DEPTH; i++) {
			struct kvf_msg_req q = {
				.rpc = i % 2 ? KVF_RPC_BatchExistKey
					     : KVF_RPC_BatchGetReplicaList,
				.keys = keys,
				.nkeys = i % 8 + 1,
				.tenant = {"default", 7},
			};

			assert_int_equal(kvf_client_send(c, &q, i, NULL), 0);
		}
		/* a full table refuses more */
		{
			struct kvf_msg_req q = {.rpc = KVF_RPC_BatchExistKey,
						.keys = keys,
						.nkeys = 1};

			assert_int_equal(kvf_client_send(c, &q, 0, NULL),
					 -EBUSY);
		}
		while (kvf_client_outstanding(c)) {
			struct kvf_client_resp r;
			struct kvf_msg_resp resp = {
				.items = items,
				.cap = 16,
				.descs = descs,
				.desc_cap = 16,
				.bools = bools,
			};

			assert_int_equal(kvf_client_recv(c, 5000, &r), 0);
			assert_int_equal(r.err_code, 0);
			assert_int_equal(
				r.rpc, r.tag % 2 ? KVF_RPC_BatchExistKey
						 : KVF_RPC_BatchGetReplicaList);
			assert_int_equal(kvf_msg_resp_decode(kvf_abi_find(NULL),
							     r.rpc, r.body,
							     r.len, &resp),
					 0);
			assert_int_equal(resp.n, r.tag % 8 + 1);
			out_of_order += answered && r.seq < last_seq;
			last_seq = r.seq;
			answered++;
		}
	}
	assert_int_equal(answered, DEPTH * ROUNDS);
	(void)out_of_order; /* depends on how reads were split */
	kvf_client_close(c);
}

static void test_unknown_seq(void **state)
{
	struct kvf_client *c = connect_fake(state, 4);
	struct kvf_key key = {"bad-seq", 7};
	struct kvf_msg_req q = {
		.rpc = KVF_RPC_BatchExistKey, .keys = &key, .nkeys = 1};
	struct kvf_client_resp r;

	assert_int_equal(kvf_client_send(c, &q, 0, NULL), 0);
	assert_int_equal(kvf_client_recv(c, 5000, &r), -EPROTO);
	kvf_client_close(c);
}

static void test_timeout(void **state)
{
	struct kvf_client *c = connect_fake(state, 4);
	struct kvf_client_resp r;

	/* nothing outstanding: nothing arrives */
	assert_int_equal(kvf_client_recv(c, 50, &r), -ETIMEDOUT);
	kvf_client_close(c);
	assert_int_equal(
		kvf_client_connect("127.0.0.1", 1, kvf_abi_find(NULL), 4, &c),
		-ECONNREFUSED);
}

/* Run kvforge-bench --master against the stand-in with @extra options
 * (NULL-terminated, at most 4); return its output, its exit status in
 * @code. */
static char *run_bench_code(struct fake *f, const char *const *extra, int *code)
{
	char master[32], out[] = "/tmp/kvf-bench-XXXXXX";
	int fd = mkstemp(out), status;
	pid_t pid;
	char *json;
	FILE *fp;
	long n;

	assert_true(fd >= 0);
	snprintf(master, sizeof(master), "127.0.0.1:%u", f->port);
	pid = fork();
	assert_true(pid >= 0);
	if (!pid) {
		const char *argv[32] = {
			"kvforge-bench",
			"--master",
			master,
			"--objects",
			"3000",
			"--batch",
			"128",
			"--connections",
			"2",
			"--depth",
			"3",
			"--json",
		};
		int argc = 12;

		for (int i = 0; extra[i] && i < 4; i++)
			argv[argc++] = extra[i];
		dup2(fd, 1);
		setenv("KVF_BENCH_QUIET", "1", 1);
		execv(KVF_BENCH_PATH, (char *const *)argv);
		_exit(127);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	*code = WEXITSTATUS(status);
	fp = fdopen(fd, "r");
	assert_non_null(fp);
	fseek(fp, 0, SEEK_END);
	n = ftell(fp);
	rewind(fp);
	json = calloc(1, (size_t)n + 1);
	assert_non_null(json);
	assert_int_equal(fread(json, 1, (size_t)n, fp), (size_t)n);
	fclose(fp);
	unlink(out);
	return json;
}

/* run_bench_code() that must exit 0; its JSON output. */
static char *run_bench(struct fake *f, const char *const *extra)
{
	int code;
	char *json = run_bench_code(f, extra, &code);

	assert_int_equal(code, 0);
	return json;
}

static size_t count_of(const char *hay, const char *needle)
{
	size_t n = 0;

	for (const char *p = hay; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

/* Every phase and batch RPC reported, every key done, none failed. */
static void check_bench_json(const char *json)
{
	assert_non_null(strstr(json, "\"workload\": \"master\""));
	for (const char *s = "batch_put_start\0batch_put_end\0"
			     "batch_get_replica_list\0batch_exist_key\0"
			     "batch_remove\0p90_us\0";
	     *s; s += strlen(s) + 1)
		if (!strstr(json, s))
			fail_msg("no %s in %s", s, json);
	assert_int_equal(count_of(json, "\"failed_items\": 0}"), 4);
	assert_int_equal(count_of(json, "\"failed_items\""), 4);
}

/* The load generator runs its whole flow and reports every batch RPC. */
static void test_bench(void **state)
{
	static const char *const extra[] = {"--rounds", "2", NULL};
	char *json = run_bench(*state, extra);

	check_bench_json(json);
	/* put and remove cover the 3000 keys once, get and exist twice */
	assert_int_equal(count_of(json, "\"keys\": 3000,"), 2);
	assert_int_equal(count_of(json, "\"keys\": 6000,"), 2);
	free(json);
}

/* Paced (open loop): the same flow on a schedule. */
static void test_bench_paced(void **state)
{
	static const char *const extra[] = {"--rounds", "1", "--rate", "60000",
					    NULL};
	char *json = run_bench(*state, extra);

	check_bench_json(json);
	assert_int_equal(count_of(json, "\"keys\": 3000,"), 4);
	assert_non_null(strstr(json, "\"rate\": \"60000\""));
	free(json);
}

/* --phases runs the phases named and no other; a list that names an
 * unknown phase, or get without put, is refused before any request. */
static void test_bench_phases(void **state)
{
	static const char *const extra[] = {"--phases", "put,remove", NULL};
	static const char *const bad[][3] = {
		{"--phases", "get", NULL},
		{"--phases", "put,gets", NULL},
		{"--phases", "", NULL},
	};
	char *json = run_bench(*state, extra);
	int code;

	for (const char *s = "batch_put_start\0batch_put_end\0batch_remove\0";
	     *s; s += strlen(s) + 1)
		if (!strstr(json, s))
			fail_msg("no %s in %s", s, json);
	assert_null(strstr(json, "batch_get_replica_list"));
	assert_null(strstr(json, "batch_exist_key"));
	assert_int_equal(count_of(json, "\"failed_items\": 0}"), 2);
	assert_int_equal(count_of(json, "\"keys\": 3000,"), 2);
	free(json);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		json = run_bench_code(*state, bad[i], &code);
		assert_int_not_equal(code, 0);
		assert_null(strstr(json, "batch_put_start"));
		free(json);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_call),
		cmocka_unit_test(test_pipeline),
		cmocka_unit_test(test_unknown_seq),
		cmocka_unit_test(test_timeout),
		cmocka_unit_test(test_bench),
		cmocka_unit_test(test_bench_paced),
		cmocka_unit_test(test_bench_phases),
	};

	return cmocka_run_group_tests(tests, fake_start, fake_stop);
}
