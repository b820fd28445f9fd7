// SPDX-License-Identifier: MIT
/*
 * tools/bench/master.c - the "master" workload: Mooncake RPC load against a
 * running master (kvforge-master or upstream's mooncake_master), through
 * the project's own C client (client/client.h).
 *
 * Flow, as a real client does it: ServiceReady, MountSegment of a fake
 * segment (addresses are never touched: the master only hands out ranges),
 * ReMountSegment, and a Ping thread on its own connection every second so
 * the master keeps the client live. Then four phases, each on
 * --connections connections (one thread each) with --depth batch RPCs in
 * flight per connection: put (BatchPutStart, then BatchPutEnd of the same
 * keys), get (BatchGetReplicaList), exist (BatchExistKey), remove
 * (BatchRemove, forced: the gets left read leases). Put and remove cover
 * the --objects keys once; get and exist run --seconds each, or --rounds
 * passes over the keys. Latency is per batch RPC, from queueing the
 * request to decoding its answer. With --rate, batches are sent on a
 * fixed schedule (open loop) and latency counts from each batch's due
 * time, so a master that falls behind shows it in the percentiles.
 *
 * Keys carry a per-run prefix so runs against one master never collide.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client/client.h"
#include "tools/bench/bench.h"

#define MB_VALUE_SIZE 4096u
#define MB_KEY_MAX 48
#define MB_TIMEOUT_MS 30000
#define MB_SEG_ALIGN (4ull << 20)
#define MB_INTERNAL_ERROR (-1) /* Mooncake's ErrorCode */

enum mb_phase { MB_PUT, MB_GET, MB_EXIST, MB_REMOVE, MB__PHASES };

static const char *const phase_names[MB__PHASES] = {"put", "get", "exist",
						    "remove"};

/* Latency series recorded per batch RPC. */
enum mb_series {
	MB_S_PUT_START,
	MB_S_PUT_END,
	MB_S_GET,
	MB_S_EXIST,
	MB_S_REMOVE,
	MB__SERIES
};

static const char *const series_names[MB__SERIES] = {
	"batch_put_start", "batch_put_end", "batch_get_replica_list",
	"batch_exist_key", "batch_remove",
};

struct mb_lat {
	double *v;
	size_t n, cap;
};

struct mb_run {
	const struct bench_opts *o;
	const struct kvf_abi *abi;
	struct kvf_client_master *master;
	/* --master etcd://: the view whose leader has the segment mounted,
	 * and the last view whose first answer was reported (under @lock) */
	pthread_mutex_t lock;
	int64_t mounted_view, reported_view;
	uint64_t failed_ns; /* when a connection to @failed_view failed */
	int64_t failed_view;
	unsigned failovers;
	double failover_ms_max;
	uint64_t run_id;
	unsigned phases; /* --phases: a bit per enum mb_phase */
	struct kvf_uuid client_id;
	struct kvf_msg_segment seg;
	struct kvf__rdma_dev *dev; /* --transport rdma; NULL: TCP */
	atomic_bool stop_ping;
};

/*
 * --phases: a bit per enum mb_phase named in @list (comma separated), all
 * of them for NULL; 0 for a name not known or a get or exist without put.
 */
static unsigned parse_phases(const char *list)
{
	unsigned mask = 0;

	if (!list)
		return (1u << MB__PHASES) - 1;
	while (*list) {
		size_t len = strcspn(list, ",");
		int p;

		for (p = 0; p < MB__PHASES; p++)
			if (strlen(phase_names[p]) == len &&
			    !strncmp(list, phase_names[p], len))
				break;
		if (p == MB__PHASES)
			return 0;
		mask |= 1u << p;
		list += len + (list[len] == ',');
	}
	if ((mask & (1u << MB_GET | 1u << MB_EXIST)) && !(mask & 1u << MB_PUT))
		return 0;
	return mask;
}

/* One connection and its thread's view of a phase. */
struct mb_conn {
	struct mb_run *run;
	struct kvf_client *c;
	int64_t view;	       /* of the leader @c goes to */
	bool new_view;	       /* reconnected: report the first answer */
	uint64_t lost_batches; /* in flight when a connection failed */
	unsigned idx;
	uint64_t lo, hi; /* its keys */
	enum mb_phase phase;
	uint64_t deadline; /* time-bounded phases; 0 = by rounds */
	uint64_t next, passes;
	uint64_t keys_done, items_failed;
	struct mb_lat lat[MB__SERIES];
	int err;
	/* --rate: one batch per interval_ns; a request's latency counts from
	 * when it was due (sched[seq & sched_mask]), not from when a full
	 * pipeline let it go, so falling behind shows in the figures */
	uint64_t interval_ns, next_due;
	uint64_t *sched;
	unsigned sched_mask;
	/* per-request scratch, --batch entries each */
	char *keybuf;
	struct kvf_key *keys;
	uint64_t *sizes;
	struct kvf_msg_replicas *items;
	struct kvf_msg_desc *descs;
	uint8_t *bools;
};

static void lat_add(struct mb_lat *l, double us)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 4096;
		double *v = realloc(l->v, cap * sizeof(*v));

		if (!v)
			return;
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n++] = us;
}

static size_t make_key(const struct mb_run *run, uint64_t i, char *buf)
{
	int n = snprintf(buf, MB_KEY_MAX, "kvfb-%016" PRIx64 "-%012" PRIu64,
			 run->run_id, i);

	return n < 0 ? 0 : (size_t)n;
}

static struct kvf_str cstr(const char *s)
{
	return (struct kvf_str){s, strlen(s)};
}

/* Keys [first, first + n) of the run into the connection's scratch. */
static void fill_keys(struct mb_conn *mc, uint64_t first, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char *b = mc->keybuf + i * MB_KEY_MAX;

		mc->keys[i].data = b;
		mc->keys[i].len = make_key(mc->run, first + i, b);
		mc->sizes[i] = MB_VALUE_SIZE;
	}
}

static enum kvf_rpc phase_rpc(enum mb_phase p)
{
	static const enum kvf_rpc rpc[MB__PHASES] = {
		KVF_RPC_BatchPutStart,
		KVF_RPC_BatchGetReplicaList,
		KVF_RPC_BatchExistKey,
		KVF_RPC_BatchRemove,
	};

	return rpc[p];
}

/* Queue one batch RPC, due at @due_ns (its latency counts from then). */
static int send_batch(struct mb_conn *mc, enum kvf_rpc rpc, uint64_t first,
		      size_t n, uint64_t due_ns)
{
	struct kvf_msg_req q = {
		.rpc = rpc,
		.client_id = mc->run->client_id,
		.tenant = cstr("default"),
		.keys = mc->keys,
		.nkeys = n,
		.vals = mc->sizes,
		.nvals = n,
		.force = true,
		.replica_type = 4, /* ReplicaType::ALL, as the client sends */
		.config = {.replica_num = 1},
	};

	uint32_t seq;
	int rc;

	fill_keys(mc, first, n);
	rc = kvf_client_send(mc->c, &q, first << 16 | n, &seq);
	if (!rc)
		mc->sched[seq & mc->sched_mask] = due_ns;
	return rc;
}

/* The next batch of the phase, or false when the phase has no more. */
static bool next_batch(struct mb_conn *mc, uint64_t *first, size_t *n)
{
	uint64_t batch = mc->run->o->batch;

	if (mc->next >= mc->hi) {
		bool timed = mc->deadline;

		if (mc->phase == MB_PUT || mc->phase == MB_REMOVE)
			return false;
		mc->passes++;
		if (!timed && mc->passes >= mc->run->o->rounds)
			return false;
		mc->next = mc->lo;
	}
	if (mc->deadline && kvf_client_now_ns() >= mc->deadline)
		return false;
	*first = mc->next;
	*n = (size_t)(mc->hi - mc->next < batch ? mc->hi - mc->next : batch);
	mc->next += *n;
	return *n > 0;
}

static enum mb_series series_of(enum kvf_rpc rpc)
{
	switch (rpc) {
	case KVF_RPC_BatchPutStart:
		return MB_S_PUT_START;
	case KVF_RPC_BatchPutEnd:
		return MB_S_PUT_END;
	case KVF_RPC_BatchGetReplicaList:
		return MB_S_GET;
	case KVF_RPC_BatchExistKey:
		return MB_S_EXIST;
	default:
		return MB_S_REMOVE;
	}
}

/* Decode a batch answer and count its failed items. */
static int count_failures(struct mb_conn *mc, const struct kvf_client_resp *r,
			  size_t n)
{
	struct kvf_msg_replicas *items = mc->items;
	struct kvf_msg_resp resp = {
		.items = items,
		.cap = mc->run->o->batch,
		.descs = mc->descs,
		.desc_cap = mc->run->o->batch,
		.bools = mc->bools,
	};
	int rc;

	if (r->err_code) {
		mc->items_failed += n;
		return 0;
	}
	rc = kvf_msg_resp_decode(mc->run->abi, r->rpc, r->body, r->len, &resp);
	if (rc) {
		fprintf(stderr, "kvforge-bench: undecodable %s answer: %s\n",
			kvf_abi_rpc_name(r->rpc), kvf_wire_strerror(rc));
		return KVF_ERR_IO;
	}
	for (size_t i = 0; i < resp.n; i++)
		/* OBJECT_ALREADY_EXISTS (-705): the client treats it as done */
		mc->items_failed += items[i].code && items[i].code != -705;
	if (r->rpc == KVF_RPC_BatchExistKey)
		for (size_t i = 0; i < resp.n; i++)
			mc->items_failed += !items[i].code && !mc->bools[i];
	return 0;
}

/*
 * The first answer from a new leader: the failover as this client saw it,
 * on one line per view (the wall clock too, for scripts that noted when
 * they killed the old leader: scripts/run-ha.sh).
 */
static void report_failover(struct mb_conn *mc)
{
	struct mb_run *run = mc->run;
	struct timespec wall;
	double ms;

	mc->new_view = false;
	clock_gettime(CLOCK_REALTIME, &wall);
	pthread_mutex_lock(&run->lock);
	if (mc->view > run->reported_view) {
		run->reported_view = mc->view;
		ms = (double)(kvf_client_now_ns() - run->failed_ns) / 1e6;
		run->failovers++;
		if (ms > run->failover_ms_max)
			run->failover_ms_max = ms;
		fprintf(stderr,
			"kvforge-bench: failover: view %" PRId64
			" first answer at %lld.%09ld, %.1f ms after the "
			"old leader's connection failed\n",
			mc->view, (long long)wall.tv_sec, wall.tv_nsec, ms);
	}
	pthread_mutex_unlock(&run->lock);
}

static int on_response(struct mb_conn *mc, const struct kvf_client_resp *r)
{
	uint64_t first = r->tag >> 16;
	size_t n = (size_t)(r->tag & 0xffff);
	int rc;

	lat_add(&mc->lat[series_of(r->rpc)],
		(double)(kvf_client_now_ns() -
			 mc->sched[r->seq & mc->sched_mask]) /
			1e3);
	rc = count_failures(mc, r, n);
	if (rc)
		return rc;
	if (mc->new_view && !r->err_code)
		report_failover(mc);
	if (r->rpc == KVF_RPC_BatchPutStart)
		return send_batch(mc, KVF_RPC_BatchPutEnd, first, n,
				  kvf_client_now_ns());
	mc->keys_done += n;
	return 0;
}

/* Queue every batch that is due (all of them when not paced). */
static bool send_due(struct mb_conn *mc, uint64_t now)
{
	unsigned depth = mc->run->o->depth;
	uint64_t first;
	size_t n;

	while (kvf_client_outstanding(mc->c) < depth &&
	       (!mc->interval_ns || mc->next_due <= now)) {
		uint64_t due = mc->interval_ns ? mc->next_due : now;

		if (!next_batch(mc, &first, &n))
			return false;
		mc->err = send_batch(mc, phase_rpc(mc->phase), first, n, due);
		mc->next_due += mc->interval_ns;
		if (mc->err)
			return false;
	}
	return true;
}

static int setup_client(struct mb_run *run, struct kvf_client *c,
			const struct kvf_client_leader *l);

/*
 * setup_client() until @deadline while it is answered INTERNAL_ERROR (-1):
 * through etcd, a leader just elected refuses mutations until a standby
 * follows it (--ha_sync_standbys); a client mounts again on its next Ping.
 */
static int setup_until(struct mb_run *run, struct kvf_client *c,
		       const struct kvf_client_leader *l, uint64_t deadline)
{
	int rc = setup_client(run, c, l);

	while (rc == MB_INTERNAL_ERROR &&
	       kvf_client_master_is_etcd(run->master) &&
	       kvf_client_now_ns() < deadline) {
		usleep(100000);
		rc = setup_client(run, c, l);
	}
	return rc;
}

/*
 * --master etcd://: after a connection error, dial the leader etcd names
 * (the same one again if it only lost this connection) until MB_TIMEOUT_MS
 * passed. The first connection to reach a new view mounts the segment
 * there, as a client re-mounts after NEED_REMOUNT. Batches that were in
 * flight are lost (counted, not retried: the bench's keys move on).
 */
static int reconnect(struct mb_conn *mc, int err)
{
	struct mb_run *run = mc->run;
	struct kvf_client_leader l;
	uint64_t now = kvf_client_now_ns();
	uint64_t deadline = now + (uint64_t)MB_TIMEOUT_MS * 1000000u;
	int rc;

	if (!kvf_client_master_is_etcd(run->master) || err < -1000 ||
	    err == -EPROTO || err == -ENOMEM || err == -EBUSY)
		return err;
	pthread_mutex_lock(&run->lock);
	if (mc->view == run->reported_view && run->failed_view != mc->view) {
		run->failed_ns = now; /* the first to see this leader fail */
		run->failed_view = mc->view;
	}
	pthread_mutex_unlock(&run->lock);
	mc->lost_batches += kvf_client_outstanding(mc->c);
	for (;;) {
		kvf_client_close(mc->c);
		mc->c = NULL;
		rc = kvf_client_master_connect(run->master, run->abi,
					       run->o->depth * 2, run->dev,
					       deadline, &mc->c, &l);
		if (rc) {
			fprintf(stderr,
				"kvforge-bench: no master through %s: %s\n",
				run->o->master, strerror(-rc));
			return rc;
		}
		pthread_mutex_lock(&run->lock);
		rc = l.view > run->mounted_view
			     ? setup_until(run, mc->c, &l, deadline)
			     : 0;
		if (!rc && l.view > run->mounted_view)
			run->mounted_view = l.view;
		pthread_mutex_unlock(&run->lock);
		/* A transport error: the master it dialled died meanwhile
		 * (etcd still named a leader being killed): dial again. */
		if (rc < MB_INTERNAL_ERROR && rc > -1000 &&
		    kvf_client_now_ns() < deadline) {
			usleep(50000);
			continue;
		}
		break;
	}
	if (rc)
		return rc;
	mc->new_view = l.view != mc->view;
	mc->view = l.view;
	return rc;
}

static void *conn_phase(void *arg)
{
	struct mb_conn *mc = arg;
	bool more = true;

	bench_pin_thread(mc->run->o, mc->idx);
	/* Paced sends wake on timers: the default 50 us slack would be
	 * counted in every latency. */
	if (mc->interval_ns)
		prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
	mc->next = mc->lo;
	mc->passes = 0;
	while (!mc->err) {
		uint64_t now = kvf_client_now_ns(), until;
		struct kvf_client_resp r;
		int rc;

		if (more)
			more = send_due(mc, now);
		if (mc->err)
			mc->err = reconnect(mc, mc->err);
		if (mc->err)
			break;
		if (!kvf_client_outstanding(mc->c)) {
			if (!more)
				break;
			bench_sleep_until(mc->next_due); /* paced, early */
			continue;
		}
		/* paced with room in the pipeline: wake when the next is due */
		until = now + (uint64_t)MB_TIMEOUT_MS * 1000000u;
		if (more && mc->interval_ns &&
		    kvf_client_outstanding(mc->c) < mc->run->o->depth)
			until = mc->next_due;
		rc = kvf_client_recv_by(mc->c, until, &r);
		if (rc == -ETIMEDOUT && until == mc->next_due)
			continue;
		mc->err = rc ? rc : on_response(mc, &r);
		if (mc->err && mc->err != KVF_ERR_IO)
			mc->err = reconnect(mc, mc->err);
	}
	return NULL;
}

static int call(struct kvf_client *c, const struct kvf_msg_req *q,
		struct kvf_msg_resp *resp)
{
	int rc = kvf_client_call(c, q, MB_TIMEOUT_MS, resp);

	if (rc)
		fprintf(stderr, "kvforge-bench: %s failed: %d (%s)\n",
			kvf_abi_rpc_name(q->rpc), rc,
			rc < -1000 ? kvf_wire_strerror(rc)
			: rc < 0   ? strerror(-rc)
				   : "transport error");
	else if (resp->code)
		fprintf(stderr, "kvforge-bench: %s answered ErrorCode %d\n",
			kvf_abi_rpc_name(q->rpc), resp->code);
	return rc ? rc : resp->code;
}

/* ServiceReady, MountSegment, ReMountSegment, Ping: as a client starts. */
static int setup_client(struct mb_run *run, struct kvf_client *c,
			const struct kvf_client_leader *l)
{
	struct kvf_msg_replicas item;
	struct kvf_msg_resp resp = {.items = &item, .cap = 1};
	struct kvf_msg_req q = {.rpc = KVF_RPC_ServiceReady};
	int rc = call(c, &q, &resp);

	if (rc)
		return rc;
	if (!getenv("KVF_BENCH_QUIET"))
		fprintf(stderr,
			"kvforge-bench: master %s:%u version %.*s view %" PRId64
			"\n",
			l->host, l->port, (int)resp.str.len, resp.str.data,
			l->view);
	q = (struct kvf_msg_req){.rpc = KVF_RPC_MountSegment,
				 .segment = run->seg,
				 .client_id = run->client_id};
	rc = call(c, &q, &resp);
	if (rc)
		return rc;
	q = (struct kvf_msg_req){.rpc = KVF_RPC_ReMountSegment,
				 .segment_array = &run->seg,
				 .nsegments = 1,
				 .client_id = run->client_id};
	rc = call(c, &q, &resp);
	if (rc)
		return rc;
	q = (struct kvf_msg_req){.rpc = KVF_RPC_Ping,
				 .client_id = run->client_id};
	return call(c, &q, &resp);
}

static void *ping_thread(void *arg)
{
	struct mb_run *run = arg;
	struct kvf_client *c = NULL;
	struct kvf_client_leader l;
	struct kvf_msg_resp resp = {0};
	struct kvf_msg_req q = {.rpc = KVF_RPC_Ping,
				.client_id = run->client_id};

	while (!atomic_load(&run->stop_ping)) {
		/* etcd: a new connection (to the new leader) after a failure */
		if (!c &&
		    kvf_client_master_connect(
			    run->master, run->abi, 4, run->dev,
			    kvf_client_now_ns() + 1000000000u, &c, &l) &&
		    !kvf_client_master_is_etcd(run->master))
			return NULL;
		if (c && kvf_client_call(c, &q, MB_TIMEOUT_MS, &resp) < 0 &&
		    kvf_client_master_is_etcd(run->master)) {
			kvf_client_close(c);
			c = NULL;
		}
		for (int i = 0; i < 10 && !atomic_load(&run->stop_ping); i++)
			usleep(100000);
	}
	kvf_client_close(c);
	return NULL;
}

static uint64_t random_u64(uint64_t seed)
{
	uint64_t v = seed ^ kvf_client_now_ns() ^ ((uint64_t)getpid() << 32);
	FILE *f = fopen("/dev/urandom", "rb");

	if (f) {
		if (fread(&v, sizeof(v), 1, f) != 1)
			v ^= seed;
		fclose(f);
	}
	return v ? v : 1;
}

static void record_series(struct bench_results *r, struct mb_conn *conns,
			  unsigned nconn, enum mb_series s, uint64_t keys,
			  uint64_t ns)
{
	size_t n = 0;
	double *all;

	for (unsigned i = 0; i < nconn; i++)
		n += conns[i].lat[s].n;
	if (!n)
		return;
	all = malloc(n * sizeof(*all));
	if (!all)
		return;
	n = 0;
	for (unsigned i = 0; i < nconn; i++) {
		memcpy(all + n, conns[i].lat[s].v,
		       conns[i].lat[s].n * sizeof(*all));
		n += conns[i].lat[s].n;
	}
	bench_result_op(r, series_names[s], keys, ns, all, n);
	bench_result(r, series_names[s], "p90_us",
		     bench_quantile(all, n, 0.90));
	bench_result(r, series_names[s], "batches", (double)n);
	free(all);
}

static int run_phase(struct mb_run *run, struct mb_conn *conns,
		     enum mb_phase ph, struct bench_results *r)
{
	const struct bench_opts *o = run->o;
	unsigned nconn = o->connections;
	pthread_t tid[nconn];
	uint64_t t0, ns, keys = 0, failed = 0;
	int err = 0;

	t0 = kvf_client_now_ns();
	for (unsigned i = 0; i < nconn; i++) {
		struct mb_conn *mc = &conns[i];

		mc->phase = ph;
		mc->deadline =
			o->seconds > 0 && (ph == MB_GET || ph == MB_EXIST)
				? t0 + (uint64_t)(o->seconds * 1e9)
				: 0;
		mc->keys_done = mc->items_failed = 0;
		/* connections start staggered across one interval */
		mc->next_due = t0 + mc->interval_ns * i / nconn;
		for (int s = 0; s < MB__SERIES; s++)
			mc->lat[s].n = 0;
		pthread_create(&tid[i], NULL, conn_phase, mc);
	}
	for (unsigned i = 0; i < nconn; i++) {
		pthread_join(tid[i], NULL);
		keys += conns[i].keys_done;
		failed += conns[i].items_failed;
		if (conns[i].err && !err)
			err = conns[i].err;
	}
	ns = kvf_client_now_ns() - t0;
	if (err) {
		fprintf(stderr, "kvforge-bench: %s phase failed: %d\n",
			phase_names[ph], err);
		return KVF_ERR_IO;
	}
	bench_result(r, phase_names[ph], "keys_per_sec",
		     (double)keys * 1e9 / (double)(ns ? ns : 1));
	bench_result(r, phase_names[ph], "keys", (double)keys);
	bench_result(r, phase_names[ph], "failed_items", (double)failed);
	for (int s = 0; s < MB__SERIES; s++)
		record_series(r, conns, nconn, (enum mb_series)s, keys, ns);
	return 0;
}

static void record_master_config(const struct mb_run *run,
				 struct bench_results *r)
{
	char buf[64];

	bench_config(r, "master", run->o->master);
	bench_config(r, "mooncake_abi", run->abi->name);
	snprintf(buf, sizeof(buf), "%u", run->o->connections);
	bench_config(r, "connections", buf);
	snprintf(buf, sizeof(buf), "%u", run->o->depth);
	bench_config(r, "depth", buf);
	snprintf(buf, sizeof(buf), "%u", MB_VALUE_SIZE);
	bench_config(r, "value_size", buf);
	if (run->o->seconds > 0) {
		snprintf(buf, sizeof(buf), "%g", run->o->seconds);
		bench_config(r, "seconds", buf);
	}
	if (run->o->rate > 0) {
		snprintf(buf, sizeof(buf), "%.0f", run->o->rate);
		bench_config(r, "rate", buf);
	}
}

static void free_scratch(struct mb_conn *mc)
{
	free(mc->sched);
	free(mc->keybuf);
	free(mc->keys);
	free(mc->sizes);
	free(mc->items);
	free(mc->descs);
	free(mc->bools);
}

static int alloc_scratch(struct mb_conn *mc, size_t batch, unsigned depth)
{
	unsigned ring = 1;

	/* due times by seq: more slots than requests ever in flight */
	while (ring < 2 * depth)
		ring <<= 1;
	mc->sched = calloc(ring, sizeof(*mc->sched));
	mc->sched_mask = ring - 1;
	mc->keybuf = malloc(batch * MB_KEY_MAX);
	mc->keys = calloc(batch, sizeof(*mc->keys));
	mc->sizes = calloc(batch, sizeof(*mc->sizes));
	mc->items = calloc(batch, sizeof(*mc->items));
	/* one replica per object is what the bench asks for */
	mc->descs = calloc(batch, sizeof(*mc->descs));
	mc->bools = calloc(batch, 1);
	if (mc->sched && mc->keybuf && mc->keys && mc->sizes && mc->items &&
	    mc->descs && mc->bools)
		return 0;
	return KVF_ERR_NO_MEMORY;
}

static void close_conns(struct mb_conn *conns, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		kvf_client_close(conns[i].c);
		free_scratch(&conns[i]);
		for (int s = 0; s < MB__SERIES; s++)
			free(conns[i].lat[s].v);
	}
	free(conns);
}

/*
 * What every run against a master shares: the address, the Mooncake
 * revision, fresh client and segment ids, and a fake segment of
 * @seg_size bytes (rounded up to 4 MiB; never touched).
 */
static int run_init(struct mb_run *run, const struct bench_opts *o,
		    struct kvf__rdma_dev *dev, uint64_t seg_size)
{
	*run = (struct mb_run){
		.o = o, .dev = dev, .lock = PTHREAD_MUTEX_INITIALIZER};
	if (!o->master || kvf_client_master_new(o->master, &run->master)) {
		fprintf(stderr, "kvforge-bench: --master HOST:PORT or "
				"etcd://HOST:PORT[;HOST:PORT...] required\n");
		return KVF_ERR_INVALID_ARGUMENT;
	}
	run->phases = parse_phases(o->phases);
	if (!run->phases) {
		fprintf(stderr,
			"kvforge-bench: --phases: a list of put, get, exist, "
			"remove (get and exist need put)\n");
		kvf_client_master_free(run->master);
		run->master = NULL;
		return KVF_ERR_INVALID_ARGUMENT;
	}
	run->abi = kvf_abi_find(o->mooncake_abi);
	if (!run->abi) {
		fprintf(stderr, "kvforge-bench: unknown --mooncake-abi '%s'\n",
			o->mooncake_abi);
		kvf_client_master_free(run->master);
		run->master = NULL;
		return KVF_ERR_INVALID_ARGUMENT;
	}
	run->run_id = random_u64(o->seed);
	run->client_id =
		(struct kvf_uuid){random_u64(run->run_id), run->run_id};
	run->seg = (struct kvf_msg_segment){
		.id = {random_u64(run->run_id + 1), run->run_id + 1},
		.name = cstr("kvforge-bench"),
		.base = 1ull << 44,
		.size = (seg_size + MB_SEG_ALIGN - 1) / MB_SEG_ALIGN *
			MB_SEG_ALIGN,
		.te_endpoint = cstr("127.0.0.1:1"),
		.protocol = cstr("tcp"),
		.host_id = cstr(""),
	};
	return 0;
}

/*
 * Set the client up on @c, connected to @l (through etcd, mounting again
 * until MB_TIMEOUT_MS while a just-elected leader refuses), and start
 * pinging.
 */
static int run_start(struct mb_run *run, struct kvf_client *c,
		     const struct kvf_client_leader *l, pthread_t *pinger)
{
	uint64_t deadline =
		kvf_client_now_ns() + (uint64_t)MB_TIMEOUT_MS * 1000000u;

	if (setup_until(run, c, l, deadline))
		return KVF_ERR_IO;
	run->mounted_view = run->reported_view = l->view;
	pthread_create(pinger, NULL, ping_thread, run);
	return 0;
}

/* Stop pinging; after a clean run, unmount the segment on @c. */
static void run_stop(struct mb_run *run, struct kvf_client *c,
		     pthread_t pinger, bool unmount)
{
	struct kvf_msg_resp resp = {0};
	struct kvf_msg_req q = {.rpc = KVF_RPC_UnmountSegment,
				.segment_id = run->seg.id,
				.client_id = run->client_id};

	atomic_store(&run->stop_ping, true);
	pthread_join(pinger, NULL);
	if (unmount && c)
		call(c, &q, &resp);
}

/* --master etcd://: how the failovers went, as results. */
static void record_failovers(struct mb_run *run, struct mb_conn *conns,
			     struct bench_results *r)
{
	uint64_t lost = 0;

	if (!kvf_client_master_is_etcd(run->master))
		return;
	for (unsigned i = 0; i < run->o->connections; i++)
		lost += conns[i].lost_batches;
	bench_result(r, "failover", "count", run->failovers);
	bench_result(r, "failover", "max_ms", run->failover_ms_max);
	bench_result(r, "failover", "lost_batches", (double)lost);
}

static int run_conns(struct mb_run *run, struct bench_results *r);

static int run_master(const struct bench_opts *o, struct kvf__rdma_dev *dev,
		      struct bench_results *r)
{
	struct mb_run run;
	int rc = 0;

	if (o->batch > 65535 || !o->connections || !o->depth) {
		fprintf(stderr, "kvforge-bench: --batch <= 65535, "
				"--connections and --depth > 0\n");
		return KVF_ERR_INVALID_ARGUMENT;
	}
	rc = run_init(&run, o, dev,
		      (o->objects * MB_VALUE_SIZE / 4 * 5 + (64ull << 20)) /
			      MB_SEG_ALIGN * MB_SEG_ALIGN);
	if (rc)
		return rc;
	rc = run_conns(&run, r);
	kvf_client_master_free(run.master);
	return rc;
}

static int run_conns(struct mb_run *run, struct bench_results *r)
{
	const struct bench_opts *o = run->o;
	struct kvf_client_leader l = {0};
	uint64_t per;
	struct mb_conn *conns;
	pthread_t pinger;
	int rc = 0;

	record_master_config(run, r);
	conns = calloc(o->connections, sizeof(*conns));
	if (!conns)
		return KVF_ERR_NO_MEMORY;
	per = (o->objects + o->connections - 1) / o->connections;
	for (unsigned i = 0; i < o->connections; i++) {
		conns[i].run = run;
		conns[i].idx = i;
		conns[i].lo = i * per < o->objects ? i * per : o->objects;
		conns[i].hi =
			(i + 1) * per < o->objects ? (i + 1) * per : o->objects;
		if (alloc_scratch(&conns[i], o->batch, o->depth)) {
			close_conns(conns, i + 1);
			return KVF_ERR_NO_MEMORY;
		}
		if (o->rate > 0)
			conns[i].interval_ns =
				(uint64_t)((double)o->batch * 1e9 *
					   o->connections / o->rate);
		/* etcd: wait up to MB_TIMEOUT_MS for a leader */
		rc = kvf_client_master_connect(
			run->master, run->abi, o->depth * 2, run->dev,
			kvf_client_now_ns() +
				(uint64_t)MB_TIMEOUT_MS * 1000000u,
			&conns[i].c, &l);
		conns[i].view = l.view;
		if (rc) {
			fprintf(stderr,
				"kvforge-bench: cannot connect to %s: "
				"%s\n",
				o->master, strerror(-rc));
			close_conns(conns, i + 1);
			return KVF_ERR_IO;
		}
	}
	rc = run_start(run, conns[0].c, &l, &pinger);
	if (rc) {
		close_conns(conns, o->connections);
		return rc;
	}
	for (int ph = 0; ph < MB__PHASES && !rc; ph++)
		if (run->phases & 1u << ph)
			rc = run_phase(run, conns, (enum mb_phase)ph, r);
	run_stop(run, conns[0].c, pinger, !rc);
	record_failovers(run, conns, r);
	close_conns(conns, o->connections);
	return rc;
}

/* --transport rdma: the device every connection dials through. */
static int open_transport(const struct bench_opts *o,
			  struct kvf__rdma_dev **dev)
{
	char why[256] = "";
	int rc;

	if (!o->rdma)
		return 0;
	rc = kvf_client_rdma_open(dev, why, sizeof(why));
	if (rc)
		fprintf(stderr,
			"kvforge-bench: --transport rdma: no RDMA device: %s\n",
			why[0] ? why : kvf_strerror(rc));
	return rc;
}

int bench_master(const struct bench_opts *o, struct bench_results *r)
{
	struct kvf__rdma_dev *dev = NULL;
	int rc = open_transport(o, &dev);

	if (rc)
		return rc;
	rc = run_master(o, dev, r);
	kvf_client_rdma_close(dev);
	return rc;
}

/*
 * One client of a master, one call at a time (--workload trace): the run
 * (a fake segment of the capacity asked for), one connection, the pinger.
 */
struct bench_master {
	struct mb_run run;
	struct kvf_client *c;
	struct kvf__rdma_dev *dev;
	pthread_t pinger;
	bool started;
	size_t cap; /* answer arrays, items */
	struct kvf_msg_replicas *items;
	struct kvf_msg_desc *descs;
	uint8_t *bools;
};

int bench_master_open(const struct bench_opts *o, uint64_t seg_size,
		      size_t max_keys, struct bench_master **out)
{
	struct bench_master *m = calloc(1, sizeof(*m));
	struct kvf_client_leader l;
	int rc;

	if (!m)
		return KVF_ERR_NO_MEMORY;
	m->cap = max_keys;
	m->items = calloc(max_keys, sizeof(*m->items));
	m->descs = calloc(max_keys, sizeof(*m->descs));
	m->bools = calloc(max_keys, 1);
	rc = !m->items || !m->descs || !m->bools ? KVF_ERR_NO_MEMORY
						 : open_transport(o, &m->dev);
	if (!rc)
		rc = run_init(&m->run, o, m->dev, seg_size);
	if (!rc &&
	    kvf_client_master_connect(
		    m->run.master, m->run.abi, 4, m->dev,
		    kvf_client_now_ns() + (uint64_t)MB_TIMEOUT_MS * 1000000u,
		    &m->c, &l)) {
		fprintf(stderr, "kvforge-bench: cannot connect to %s\n",
			o->master);
		rc = KVF_ERR_IO;
	}
	if (!rc)
		rc = run_start(&m->run, m->c, &l, &m->pinger);
	m->started = !rc;
	if (rc) {
		bench_master_close(m);
		return rc;
	}
	*out = m;
	return 0;
}

int bench_master_batch(struct bench_master *m, enum bench_rpc op,
		       const struct kvf_key *keys, const uint64_t *sizes,
		       size_t n, int32_t *codes)
{
	static const enum kvf_rpc rpc[] = {
		[BENCH_RPC_EXIST] = KVF_RPC_BatchExistKey,
		[BENCH_RPC_GET] = KVF_RPC_BatchGetReplicaList,
		[BENCH_RPC_PUT_START] = KVF_RPC_BatchPutStart,
		[BENCH_RPC_PUT_END] = KVF_RPC_BatchPutEnd,
	};
	struct kvf_msg_req q = {
		.rpc = rpc[op],
		.client_id = m->run.client_id,
		.tenant = cstr("default"),
		.keys = (struct kvf_key *)keys,
		.nkeys = n,
		.vals = (uint64_t *)sizes,
		.nvals = sizes ? n : 0,
		.replica_type = 4, /* ReplicaType::ALL, as the client sends */
		.config = {.replica_num = 1},
	};
	struct kvf_msg_resp resp = {
		.items = m->items,
		.cap = m->cap,
		.descs = m->descs,
		.desc_cap = m->cap,
		.bools = m->bools,
	};
	int rc;

	if (n > m->cap)
		return KVF_ERR_INVALID_ARGUMENT;
	rc = call(m->c, &q, &resp);
	if (rc)
		return KVF_ERR_IO;
	if (resp.n != n) {
		fprintf(stderr, "kvforge-bench: %s answered %zu items for %zu\n",
			kvf_abi_rpc_name(q.rpc), resp.n, n);
		return KVF_ERR_IO;
	}
	for (size_t i = 0; i < n; i++) {
		codes[i] = m->items[i].code;
		/* BatchExistKey: a false answer is "not found" here */
		if (op == BENCH_RPC_EXIST && !codes[i] && !m->bools[i])
			codes[i] = BENCH_MC_OBJECT_NOT_FOUND;
	}
	return 0;
}

void bench_master_close(struct bench_master *m)
{
	if (!m)
		return;
	if (m->started)
		run_stop(&m->run, m->c, m->pinger, true);
	kvf_client_close(m->c);
	kvf_client_master_free(m->run.master);
	kvf_client_rdma_close(m->dev);
	free(m->items);
	free(m->descs);
	free(m->bools);
	free(m);
}
