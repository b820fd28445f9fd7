// SPDX-License-Identifier: MIT
/*
 * tests/master/test_master_client.c - kvforge-master driven by the
 * project's own C client (client/client.h): the client flow with batch
 * RPCs, pipelined requests answered by seq_num, and the revision check
 * (a client of the other tabled Mooncake revision is refused per request
 * with invalid_rpc_arguments, the connection staying usable), and the
 * replica descriptors of BatchPutStart and BatchGetReplicaList: each names
 * the segment its replica is on, with a batch's replicas alternating
 * between two segments and after one is unmounted and another mounted
 * under its name.
 *
 * The master runs as a child process on an ephemeral loopback port (read
 * from its stdout); KVF_MASTER_BIN overrides ./kvforge-master.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client/client.h"
#include "tests/master/test_master_call.h"

#define TIMEOUT_MS 20000
#define MIB (1ULL << 20)

static pid_t master_pid;
static uint16_t master_port;

static int start_master(void **state)
{
	const char *bin = getenv("KVF_MASTER_BIN");
	int fds[2];
	char line[512];
	FILE *fp;

	(void)state;
	if (!bin)
		bin = "./kvforge-master";
	if (pipe(fds))
		return -1;
	master_pid = fork();
	if (master_pid < 0)
		return -1;
	if (master_pid == 0) {
		dup2(fds[1], STDOUT_FILENO);
		close(fds[0]);
		close(fds[1]);
		execl(bin, bin, "--rpc_port=0",
		      "--enable_metric_reporting=false",
		      "--default_kv_lease_ttl=2000ms", "--rpc_thread_num=2",
		      "--expected_objects=4096", (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	fp = fdopen(fds[0], "r");
	while (fp && fgets(line, sizeof(line), fp)) {
		char *p = strstr(line, "RPC listening on ");

		if (p) {
			p = strchr(p + 17, ' ');
			while (p && p > line && p[-1] != ':')
				p--;
			master_port = (uint16_t)atoi(p);
			break;
		}
	}
	if (fp)
		fclose(fp);
	return master_port ? 0 : -1;
}

static int stop_master(void **state)
{
	int status = 0;

	(void)state;
	kill(master_pid, SIGTERM);
	waitpid(master_pid, &status, 0);
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

static struct kvf_client *connect_latest(void)
{
	return connect_port(master_port);
}

static struct kvf_key key(const char *s)
{
	return (struct kvf_key){s, strlen(s)};
}

static const struct kvf_str dflt = {"default", 7};

static void mount(struct kvf_client *c, struct kvf_uuid me,
		  const struct kvf_msg_segment *seg)
{
	struct kvf_msg_req q = {
		.rpc = KVF_RPC_MountSegment, .client_id = me, .segment = *seg};
	struct answer a;

	assert_int_equal(call(c, &q, &a)->code, 0);
	q = (struct kvf_msg_req){.rpc = KVF_RPC_ReMountSegment,
				 .client_id = me,
				 .segment_array = seg,
				 .nsegments = 1};
	assert_int_equal(call(c, &q, &a)->code, 0);
}

static int32_t ping(struct kvf_client *c, struct kvf_uuid me)
{
	struct kvf_msg_req q = {.rpc = KVF_RPC_Ping, .client_id = me};
	struct answer a;

	assert_int_equal(call(c, &q, &a)->code, 0);
	return a.r.ping_status;
}

/* BatchPutEnd or BatchPutRevoke (ReplicaType ALL) of three keys by
 * @client: every key answers @code. */
static void batch_finish(struct kvf_client *c, enum kvf_rpc rpc,
			 struct kvf_uuid client, struct kvf_key keys[3],
			 int32_t code)
{
	struct kvf_msg_req q = {.rpc = rpc,
				.client_id = client,
				.keys = keys,
				.nkeys = 3,
				.replica_type = 4,
				.tenant = dflt};
	struct answer a;

	call(c, &q, &a);
	assert_int_equal(a.r.n, 3);
	for (int i = 0; i < 3; i++)
		assert_int_equal(a.items[i].code, code);
}

/*
 * Ended puts, as upstream answers them: the client is checked first. The
 * putter's PutEnd succeeds again and its PutRevoke is INVALID_WRITE (no
 * replica is processing); any other client, here one that never started
 * a put, gets ILLEGAL_CLIENT; a key nobody put, OBJECT_NOT_FOUND.
 */
static void check_ended_puts(struct kvf_client *c, struct kvf_uuid putter,
			     struct kvf_key keys[3])
{
	struct kvf_uuid other = {0xF1, 0xF2};
	struct kvf_msg_req q = {.rpc = KVF_RPC_PutEnd,
				.client_id = putter,
				.key = {"c1", 2},
				.replica_type = 4,
				.tenant = dflt};
	struct answer a;

	assert_int_equal(call(c, &q, &a)->code, 0);
	q.rpc = KVF_RPC_PutRevoke;
	assert_int_equal(call(c, &q, &a)->code, -700);
	q.client_id = other;
	assert_int_equal(call(c, &q, &a)->code, -601);
	q.rpc = KVF_RPC_PutEnd;
	assert_int_equal(call(c, &q, &a)->code, -601);
	q.key = (struct kvf_str){"nobody", 6};
	assert_int_equal(call(c, &q, &a)->code, -704);

	batch_finish(c, KVF_RPC_BatchPutEnd, other, keys, -601);
	batch_finish(c, KVF_RPC_BatchPutRevoke, other, keys, -601);
	batch_finish(c, KVF_RPC_BatchPutRevoke, putter, keys, -700);
	batch_finish(c, KVF_RPC_BatchPutEnd, putter, keys, 0);
}

static void test_client_flow(void **state)
{
	struct kvf_uuid me = {0xC1, 0xC2};
	struct kvf_msg_segment seg = {
		.id = {0xE1, 0xE2},
		.name = {"c-seg", 5},
		.base = 0x7B0000000000ULL,
		.size = 64 * MIB,
		.te_endpoint = {"127.0.0.1:23456", 15},
		.protocol = {"tcp", 3},
	};
	struct kvf_key keys[3] = {key("c1"), key("c2"), key("c3")};
	struct kvf_key probe[4] = {key("c1"), key("c2"), key("c3"),
				   key("missing")};
	uint64_t sizes[3] = {4096, 8192, 100};
	struct kvf_client *c = connect_latest();
	struct kvf_msg_req q = {.rpc = KVF_RPC_ServiceReady};
	uint64_t addr[3];
	struct answer a;

	(void)state;
	call(c, &q, &a);
	assert_int_equal(a.r.code, 0);
	assert_memory_equal(a.r.str.data, "2.0.0", 5);
	assert_int_equal(ping(c, me), KVF_MC_CLIENT_NEED_REMOUNT);
	mount(c, me, &seg);
	assert_int_equal(ping(c, me), KVF_MC_CLIENT_OK);

	q = (struct kvf_msg_req){.rpc = KVF_RPC_BatchPutStart,
				 .client_id = me,
				 .keys = keys,
				 .nkeys = 3,
				 .vals = sizes,
				 .nvals = 3,
				 .tenant = dflt};
	q.config.replica_num = 1;
	call(c, &q, &a);
	assert_int_equal(a.r.n, 3);
	for (int i = 0; i < 3; i++) {
		const struct kvf_msg_desc *d = a.items[i].descs;

		assert_int_equal(a.items[i].code, 0);
		assert_int_equal(a.items[i].n, 1);
		assert_int_equal(d->size, sizes[i]);
		assert_int_equal(d->status, KVF_MC_REPLICA_PROCESSING);
		assert_true(d->addr >= seg.base &&
			    d->addr + d->size <= seg.base + seg.size);
		assert_memory_equal(d->endpoint.data, "127.0.0.1:23456", 15);
		addr[i] = d->addr;
	}
	batch_finish(c, KVF_RPC_BatchPutEnd, me, keys, 0);
	check_ended_puts(c, me, keys);

	q = (struct kvf_msg_req){.rpc = KVF_RPC_BatchGetReplicaList,
				 .keys = probe,
				 .nkeys = 4,
				 .tenant = dflt};
	call(c, &q, &a);
	assert_int_equal(a.r.n, 4);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(a.items[i].code, 0);
		assert_int_equal(a.items[i].descs->addr, addr[i]);
		assert_int_equal(a.items[i].descs->status,
				 KVF_MC_REPLICA_COMPLETE);
		assert_int_equal(a.items[i].lease_ttl_ms, 2000);
	}
	assert_int_equal(a.items[3].code, -704);

	q = (struct kvf_msg_req){.rpc = KVF_RPC_BatchExistKey,
				 .keys = probe,
				 .nkeys = 4,
				 .tenant = dflt};
	call(c, &q, &a);
	assert_int_equal(a.r.n, 4);
	assert_true(a.bools[0] && a.bools[1] && a.bools[2] && !a.bools[3]);

	q = (struct kvf_msg_req){.rpc = KVF_RPC_PutStart,
				 .client_id = me,
				 .key = {"c1", 2},
				 .u64 = 10,
				 .tenant = dflt};
	q.config.replica_num = 1;
	assert_int_equal(call(c, &q, &a)->code, -705);

	q = (struct kvf_msg_req){
		.rpc = KVF_RPC_Remove, .key = {"c1", 2}, .tenant = dflt};
	assert_int_equal(call(c, &q, &a)->code, -706); /* leased */
	q = (struct kvf_msg_req){.rpc = KVF_RPC_BatchRemove,
				 .keys = probe,
				 .nkeys = 4,
				 .force = true,
				 .tenant = dflt};
	call(c, &q, &a);
	assert_int_equal(a.r.n, 4);
	assert_int_equal(a.items[0].code, 0);
	assert_int_equal(a.items[3].code, -704);

	q = (struct kvf_msg_req){.rpc = KVF_RPC_PutStart,
				 .client_id = me,
				 .key = {"rv", 2},
				 .u64 = 10,
				 .tenant = dflt};
	q.config.replica_num = 1;
	assert_int_equal(call(c, &q, &a)->code, 0);
	q = (struct kvf_msg_req){.rpc = KVF_RPC_PutRevoke,
				 .client_id = me,
				 .key = {"rv", 2},
				 .replica_type = 4,
				 .tenant = dflt};
	assert_int_equal(call(c, &q, &a)->code, 0);

	q = (struct kvf_msg_req){
		.rpc = KVF_RPC_RemoveAll, .force = true, .tenant = dflt};
	call(c, &q, &a);
	assert_int_equal(a.r.i64, 0);
	q = (struct kvf_msg_req){.rpc = KVF_RPC_UnmountSegment,
				 .client_id = me,
				 .segment_id = seg.id};
	assert_int_equal(call(c, &q, &a)->code, 0);
	kvf_client_close(c);
}

/* Whether @d lies in @seg and carries its endpoint and protocol. */
static bool desc_on(const struct kvf_msg_desc *d,
		    const struct kvf_msg_segment *seg)
{
	return d->addr >= seg->base &&
	       d->addr + d->size <= seg->base + seg->size &&
	       d->endpoint.len == seg->te_endpoint.len &&
	       !memcmp(d->endpoint.data, seg->te_endpoint.data,
		       d->endpoint.len) &&
	       d->protocol.len == seg->protocol.len &&
	       !memcmp(d->protocol.data, seg->protocol.data, d->protocol.len);
}

/*
 * BatchPutStart of @n keys "<prefix><i>" with two replicas on @a and @b:
 * every item has one descriptor on each, with that segment's endpoint and
 * protocol, however the replicas alternate between the segments within
 * the answer. Then ended and, through BatchGetReplicaList, the same.
 */
static void put_two_replicas(struct kvf_client *c, struct kvf_uuid me,
			     const char *prefix, size_t n,
			     const struct kvf_msg_segment *sa,
			     const struct kvf_msg_segment *sb)
{
	char names[16][16];
	struct kvf_key keys[16];
	uint64_t sizes[16];
	struct kvf_msg_req q;
	struct answer a;

	assert_true(n <= 16);
	for (size_t i = 0; i < n; i++) {
		snprintf(names[i], sizeof(names[i]), "%s%zu", prefix, i);
		keys[i] = key(names[i]);
		sizes[i] = 4096 * (i % 3 + 1);
	}
	q = (struct kvf_msg_req){.rpc = KVF_RPC_BatchPutStart,
				 .client_id = me,
				 .keys = keys,
				 .nkeys = n,
				 .vals = sizes,
				 .nvals = n,
				 .tenant = dflt};
	q.config.replica_num = 2;
	for (int rpc = 0; rpc < 2; rpc++) {
		call(c, &q, &a);
		assert_int_equal(a.r.n, n);
		for (size_t i = 0; i < n; i++) {
			const struct kvf_msg_desc *d = a.items[i].descs;

			assert_int_equal(a.items[i].code, 0);
			assert_int_equal(a.items[i].n, 2);
			assert_int_equal(d[0].size, sizes[i]);
			assert_int_equal(d[1].size, sizes[i]);
			assert_int_equal(d[0].status,
					 rpc ? KVF_MC_REPLICA_COMPLETE
					     : KVF_MC_REPLICA_PROCESSING);
			assert_int_equal(d[1].status, d[0].status);
			assert_true(
				(desc_on(&d[0], sa) && desc_on(&d[1], sb)) ||
				(desc_on(&d[0], sb) && desc_on(&d[1], sa)));
		}
		if (!rpc) {
			struct kvf_msg_req e = {.rpc = KVF_RPC_BatchPutEnd,
						.client_id = me,
						.keys = keys,
						.nkeys = n,
						.replica_type = 4,
						.tenant = dflt};

			call(c, &e, &a);
			for (size_t i = 0; i < n; i++)
				assert_int_equal(a.items[i].code, 0);
		}
		q = (struct kvf_msg_req){.rpc = KVF_RPC_BatchGetReplicaList,
					 .keys = keys,
					 .nkeys = n,
					 .tenant = dflt};
	}
}

/* Segment @n of test_client_descriptors' client. */
static struct kvf_msg_segment segment(uint64_t n, const char *name,
				      uint64_t base, uint64_t size,
				      const char *endpoint,
				      const char *protocol)
{
	return (struct kvf_msg_segment){
		.id = {0xA5, n},
		.name = {name, strlen(name)},
		.base = base,
		.size = size,
		.te_endpoint = {endpoint, strlen(endpoint)},
		.protocol = {protocol, strlen(protocol)},
	};
}

/*
 * Descriptors name the segment each replica is on, also after a segment
 * is unmounted and another is mounted in its place under the same name
 * with another address range and endpoint: the old one's endpoint must
 * not show up in any later answer.
 */
static void test_client_descriptors(void **state)
{
	struct kvf_uuid me = {0xA1, 0xA2};
	struct kvf_msg_segment sa = segment(1, "d-seg-a", 0x7C0000000000ULL,
					    64 * MIB, "10.0.0.1:1111", "tcp");
	struct kvf_msg_segment sb = segment(2, "d-seg-b", 0x7D0000000000ULL,
					    64 * MIB, "10.0.0.2:22222", "rdma");
	struct kvf_msg_segment sb2 = segment(3, "d-seg-b", 0x7E0000000000ULL,
					     32 * MIB, "10.0.0.3:3", "tcp");
	struct kvf_client *c = connect_latest();
	struct kvf_msg_req q;
	struct answer a;

	(void)state;
	mount(c, me, &sa);
	mount(c, me, &sb);
	put_two_replicas(c, me, "desc-", 12, &sa, &sb);
	q = (struct kvf_msg_req){.rpc = KVF_RPC_UnmountSegment,
				 .client_id = me,
				 .segment_id = sb.id};
	assert_int_equal(call(c, &q, &a)->code, 0);
	mount(c, me, &sb2);
	put_two_replicas(c, me, "desc2-", 12, &sa, &sb2);
	q = (struct kvf_msg_req){
		.rpc = KVF_RPC_RemoveAll, .force = true, .tenant = dflt};
	call(c, &q, &a);
	q = (struct kvf_msg_req){.rpc = KVF_RPC_UnmountSegment,
				 .client_id = me,
				 .segment_id = sa.id};
	assert_int_equal(call(c, &q, &a)->code, 0);
	q.segment_id = sb2.id;
	assert_int_equal(call(c, &q, &a)->code, 0);
	kvf_client_close(c);
}

/* Many requests in flight on one connection, each answer by its seq. */
static void test_client_pipeline(void **state)
{
	struct kvf_client *c = connect_latest();
	enum { N = 48 };
	bool seen[N] = {false};
	char names[N][16];
	struct kvf_key k[N];

	(void)state;
	for (int i = 0; i < N; i++) {
		struct kvf_msg_req q = {.rpc = KVF_RPC_BatchExistKey,
					.keys = &k[i],
					.nkeys = 1,
					.tenant = dflt};

		snprintf(names[i], sizeof(names[i]), "pipe-%d", i);
		k[i] = key(names[i]);
		assert_int_equal(kvf_client_send(c, &q, (uint64_t)i, NULL), 0);
	}
	assert_int_equal(kvf_client_outstanding(c), N);
	for (int i = 0; i < N; i++) {
		struct kvf_client_resp r;

		assert_int_equal(kvf_client_recv(c, TIMEOUT_MS, &r), 0);
		assert_int_equal(r.err_code, 0);
		assert_true(r.tag < N && !seen[r.tag]);
		seen[r.tag] = true;
	}
	assert_int_equal(kvf_client_outstanding(c), 0);
	kvf_client_close(c);
}

/* A client of the other revision: its data-path requests carry other type
 * hashes and are refused one by one; the connection stays usable. */
static void test_client_other_revision(void **state)
{
	const struct kvf_abi *old = kvf_abi_find("v0.3.12.post1");
	struct kvf_uuid me = {0xD1, 0xD2};
	struct kvf_key k = key("old");
	uint64_t size = 64;
	struct kvf_msg_req q = {.rpc = KVF_RPC_BatchPutStart,
				.client_id = me,
				.keys = &k,
				.nkeys = 1,
				.vals = &size,
				.nvals = 1,
				.tenant = dflt};
	struct kvf_client *c = NULL;
	struct answer a;

	(void)state;
	assert_non_null(old);
	assert_int_equal(
		kvf_client_connect("127.0.0.1", master_port, old, 4, &c), 0);
	q.config.replica_num = 1;
	memset(&a, 0, sizeof(a));
	a.r.items = a.items;
	a.r.cap = 16;
	a.r.descs = a.descs;
	a.r.desc_cap = 64;
	assert_int_equal(kvf_client_call(c, &q, TIMEOUT_MS, &a.r),
			 KVF_RPC_ERRC_INVALID_RPC_ARGUMENTS);
	q = (struct kvf_msg_req){.rpc = KVF_RPC_ServiceReady};
	assert_int_equal(call(c, &q, &a)->code, 0);
	kvf_client_close(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_client_flow),
		cmocka_unit_test(test_client_pipeline),
		cmocka_unit_test(test_client_descriptors),
		cmocka_unit_test(test_client_other_revision),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, start_master, stop_master);
}
