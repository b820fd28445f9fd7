/* SPDX-License-Identifier: MIT */
/*
 * http/metrics.c - kvforge-master's metrics registry and its renderings.
 *
 * Recording. RPC workers call kvf_metrics_rpc_done() once per answered
 * RPC. Every figure lives in one of KVF_METRICS_SHARDS shards; a thread
 * picks its shard once (round robin, kept in a thread-local) and adds
 * there with relaxed atomic increments. With no more workers than shards
 * each worker owns its cache lines, so recording costs a few uncontended
 * atomic adds (2 for a successful single RPC, at most 7); with more, two
 * threads may share a shard and the adds stay correct, just contended.
 * Nothing is allocated, locked or waited for on this path.
 *
 * A request is counted in its latency histogram bucket; the request count
 * is the sum of the buckets, so the count and the histogram can never
 * disagree on a page.
 *
 * Reading. A render sums every shard with relaxed loads. A counter read
 * while it moves is its value at some instant of the scrape; counters are
 * monotonic, so successive scrapes never see one go backwards. Counters of
 * one RPC may be read at slightly different instants (a failure counted
 * before its request shows up in the histogram, for a few nanoseconds);
 * Prometheus tolerates that, and upstream's registry behaves the same.
 *
 * Names: the families upstream's mooncake_master exports for the same
 * quantity keep upstream's names, help texts and label-free shape
 * (master_put_start_requests_total, ...), so existing dashboards keep
 * working; everything else is prefixed kvforge_ and labelled by RPC name.
 * Upstream-named families are always present (as upstream's are); the
 * rpc-labelled series appear once that RPC was first answered, as with a
 * Prometheus client library's labelled metrics.
 */
#include "config.h"

#include "http/metrics.h"

#include "base/clock.h"
#include "ha/election.h"
#include "ha/replication.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <kvforge/engine.h>
#include <kvforge/profile.h>

/* Enough for the worker threads of a 2-16 core master plus the loop. */
#define KVF_METRICS_SHARDS 16

/*
 * RPC latency buckets: 1 us to 10 s in 1-2.5-5 steps. A batch-128 get
 * answers in tens of microseconds, a journalled put or a stalled client
 * in milliseconds; one table covers both.
 */
static const struct {
	uint64_t ns;
	const char *le;
} latency_bounds[] = {
	{1000, "0.000001"},	{2500, "0.0000025"},	{5000, "0.000005"},
	{10000, "0.00001"},	{25000, "0.000025"},	{50000, "0.00005"},
	{100000, "0.0001"},	{250000, "0.00025"},	{500000, "0.0005"},
	{1000000, "0.001"},	{2500000, "0.0025"},	{5000000, "0.005"},
	{10000000, "0.01"},	{25000000, "0.025"},	{50000000, "0.05"},
	{100000000, "0.1"},	{250000000, "0.25"},	{500000000, "0.5"},
	{1000000000, "1"},	{2500000000ULL, "2.5"}, {5000000000ULL, "5"},
	{10000000000ULL, "10"},
};
#define N_LATENCY (sizeof(latency_bounds) / sizeof(latency_bounds[0]))

/* Upstream's master_value_size_bytes buckets (4 KiB ... 64 MiB). */
static const uint64_t value_size_bounds[] = {
	4096, 65536, 262144, 1048576, 4194304, 16777216, 67108864,
};
#define N_VALUE_SIZE (sizeof(value_size_bounds) / sizeof(value_size_bounds[0]))

/* One RPC's figures in one shard. Buckets are per bucket, not cumulative. */
struct rpc_cell {
	_Atomic uint64_t latency[N_LATENCY + 1]; /* last: +Inf */
	_Atomic uint64_t latency_sum_ns;
	_Atomic uint64_t failures;
	_Atomic uint64_t partial;
	_Atomic uint64_t items;
	_Atomic uint64_t failed_items;
	_Atomic uint64_t unsupported;
	_Atomic uint64_t valid_gets; /* the get RPCs only: see record_gets() */
};

struct shard {
	struct rpc_cell rpc[KVF_RPC__COUNT];
	_Atomic uint64_t value_size[N_VALUE_SIZE + 1];
	_Atomic uint64_t value_size_sum;
} __attribute__((aligned(64)));

struct kvf_metrics {
	struct shard shards[KVF_METRICS_SHARDS];
	_Atomic int64_t connections;
	struct kvf_engine *engine;
	uint64_t (*active_clients)(void *ctx);
	void *active_clients_ctx;
	uint64_t started_ns; /* CLOCK_MONOTONIC at creation */
	struct kvf_ha *ha;   /* --enable_ha, else NULL */
	/* HA: the engine comes and goes with the leadership; renderers
	 * hold src_mu while they use it (kvf_metrics_set_source()). */
	pthread_mutex_t src_mu;
	void (*repl)(void *ctx, struct kvf_repl_stats *st);
	void *repl_ctx;
};

/* One RPC summed over the shards, for rendering. */
struct rpc_totals {
	uint64_t latency[N_LATENCY + 1];
	uint64_t requests;
	uint64_t latency_sum_ns;
	uint64_t failures;
	uint64_t partial;
	uint64_t items;
	uint64_t failed_items;
	uint64_t unsupported;
	uint64_t valid_gets;
};

static const char *const rpc_names[KVF_RPC__COUNT] = {
#define KVF_RPC_NAME(name) [KVF_RPC_##name] = #name,
	KVF_RPC_LIST(KVF_RPC_NAME)
#undef KVF_RPC_NAME
};

/*
 * The RPCs upstream counts under its own family names, in the order of
 * its /metrics page. @what is the noun of upstream's help text.
 */
static const struct upstream_rpc {
	enum kvf_rpc rpc;
	const char *family; /* master_<family>_requests_total */
	const char *what;
} upstream_rpcs[] = {
	{KVF_RPC_ExistKey, "exist_key", "ExistKey"},
	{KVF_RPC_PutStart, "put_start", "PutStart"},
	{KVF_RPC_PutEnd, "put_end", "PutEnd"},
	{KVF_RPC_PutRevoke, "put_revoke", "PutRevoke"},
	{KVF_RPC_GetReplicaList, "get_replica_list", "GetReplicaList"},
	{KVF_RPC_GetReplicaListByRegex, "get_replica_list_by_regex",
	 "GetReplicaListByRegex"},
	{KVF_RPC_Remove, "remove", "Remove"},
	{KVF_RPC_RemoveByRegex, "remove_by_regex", "RemoveByRegex"},
	{KVF_RPC_RemoveAll, "remove_all", "Remove all"},
	{KVF_RPC_MountSegment, "mount_segment", "MountSegment"},
	{KVF_RPC_UnmountSegment, "unmount_segment", "UnmountSegment"},
	{KVF_RPC_ReMountSegment, "remount_segment", "RemountSegment"},
	{KVF_RPC_Ping, "ping", "ping"},
	{KVF_RPC_CopyStart, "copy_start", "CopyStart"},
	{KVF_RPC_CopyEnd, "copy_end", "CopyEnd"},
	{KVF_RPC_CopyRevoke, "copy_revoke", "CopyRevoke"},
	{KVF_RPC_MoveStart, "move_start", "MoveStart"},
	{KVF_RPC_MoveEnd, "move_end", "MoveEnd"},
	{KVF_RPC_MoveRevoke, "move_revoke", "MoveRevoke"},
	{KVF_RPC_EvictDiskReplica, "evict_disk_replica", "EvictDiskReplica"},
	{KVF_RPC_CreateCopyTask, "create_copy_task", "Copy"},
	{KVF_RPC_CreateMoveTask, "create_move_task", "Move"},
	{KVF_RPC_MarkTaskToComplete, "update_task", "MarkTaskToComplete"},
	{KVF_RPC_QueryTask, "query_task", "QueryTask"},
	{KVF_RPC_FetchTasks, "fetch_tasks", "FetchTasks"},
	{KVF_RPC_BatchExistKey, "batch_exist_key", "BatchExistKey"},
	{KVF_RPC_BatchQueryIp, "batch_query_ip", "BatchQueryIp"},
	{KVF_RPC_BatchReplicaClear, "batch_replica_clear", "BatchReplicaClear"},
	{KVF_RPC_BatchGetReplicaList, "batch_get_replica_list",
	 "BatchGetReplicaList"},
	{KVF_RPC_BatchPutStart, "batch_put_start", "BatchPutStart"},
	{KVF_RPC_BatchPutEnd, "batch_put_end", "BatchPutEnd"},
	{KVF_RPC_BatchPutRevoke, "batch_put_revoke", "BatchPutRevoke"},
};

/* Batch RPCs carry per-item figures; their names all start "Batch". */
static bool is_batch_rpc(enum kvf_rpc rpc)
{
	return strncmp(rpc_names[rpc], "Batch", 5) == 0;
}

static uint64_t uptime_s(const struct kvf_metrics *m)
{
	return (kvf__now_ns() - m->started_ns) / 1000000000ULL;
}

int kvf_metrics_new(struct kvf_metrics **out)
{
	struct kvf_metrics *m;

	if (!out)
		return KVF_ERR_INVALID_ARGUMENT;
	m = aligned_alloc(64, sizeof(*m));
	if (!m)
		return KVF_ERR_NO_MEMORY;
	memset(m, 0, sizeof(*m));
	m->started_ns = kvf__now_ns();
	pthread_mutex_init(&m->src_mu, NULL);
	*out = m;
	return KVF_OK;
}

void kvf_metrics_free(struct kvf_metrics *m)
{
	if (m)
		pthread_mutex_destroy(&m->src_mu);
	free(m);
}

void kvf_metrics_set_repl(struct kvf_metrics *m,
			  void (*fn)(void *ctx, struct kvf_repl_stats *st),
			  void *ctx)
{
	if (!m)
		return;
	pthread_mutex_lock(&m->src_mu);
	m->repl = fn;
	m->repl_ctx = ctx;
	pthread_mutex_unlock(&m->src_mu);
}

void kvf_metrics_set_ha(struct kvf_metrics *m, struct kvf_ha *ha)
{
	if (m)
		m->ha = ha;
}

void kvf_metrics_set_source(struct kvf_metrics *m, struct kvf_engine *engine,
			    uint64_t (*active_clients)(void *), void *ctx)
{
	if (!m)
		return;
	pthread_mutex_lock(&m->src_mu);
	m->engine = engine;
	m->active_clients = active_clients;
	m->active_clients_ctx = ctx;
	pthread_mutex_unlock(&m->src_mu);
}

/* ---- recording (hot path) ---- */

static _Atomic unsigned next_shard;
static _Thread_local unsigned my_shard_plus1; /* 0: not chosen yet */

static struct shard *this_thread_shard(struct kvf_metrics *m)
{
	unsigned s = my_shard_plus1;

	if (__builtin_expect(s == 0, 0)) {
		s = atomic_fetch_add_explicit(&next_shard, 1,
					      memory_order_relaxed) %
			    KVF_METRICS_SHARDS +
		    1;
		my_shard_plus1 = s;
	}
	return &m->shards[s - 1];
}

static inline void add(_Atomic uint64_t *c, uint64_t v)
{
	atomic_fetch_add_explicit(c, v, memory_order_relaxed);
}

static inline uint64_t load(const _Atomic uint64_t *c)
{
	return atomic_load_explicit(c, memory_order_relaxed);
}

static unsigned latency_bucket(uint64_t ns)
{
	unsigned i = 0;

	/* Most RPCs land in the first few buckets: scan from the bottom. */
	while (i < N_LATENCY && ns > latency_bounds[i].ns)
		i++;
	return i;
}

/*
 * Upstream's valid_get_nums_ counts gets that returned a replica. It is
 * counted, not derived at render time as requests - failures: the two
 * are read a moment apart, and a difference of counters can go down
 * between scrapes, which Prometheus takes for a counter reset.
 */
static void record_gets(struct rpc_cell *c, enum kvf_rpc rpc, bool failed,
			uint32_t items, uint32_t failed_items)
{
	uint64_t valid;

	if (rpc == KVF_RPC_GetReplicaList)
		valid = !failed;
	else if (rpc == KVF_RPC_BatchGetReplicaList)
		valid = items - failed_items;
	else
		return;
	if (valid)
		add(&c->valid_gets, valid);
}

void kvf_metrics_rpc_done(struct kvf_metrics *m, enum kvf_rpc rpc,
			  uint64_t latency_ns, bool failed, uint32_t items,
			  uint32_t failed_items)
{
	struct rpc_cell *c;

	if (!m || (unsigned)rpc >= KVF_RPC__COUNT)
		return;
	if (failed_items > items)
		failed_items = items;
	c = &this_thread_shard(m)->rpc[rpc];
	add(&c->latency[latency_bucket(latency_ns)], 1);
	add(&c->latency_sum_ns, latency_ns);
	if (failed)
		add(&c->failures, 1);
	record_gets(c, rpc, failed, items, failed_items);
	if (items == 0)
		return;
	add(&c->items, items);
	if (failed_items == 0)
		return;
	add(&c->failed_items, failed_items);
	if (!failed && failed_items < items)
		add(&c->partial, 1);
}

void kvf_metrics_unsupported(struct kvf_metrics *m, enum kvf_rpc rpc)
{
	if (!m || (unsigned)rpc >= KVF_RPC__COUNT)
		return;
	add(&this_thread_shard(m)->rpc[rpc].unsupported, 1);
}

void kvf_metrics_connections(struct kvf_metrics *m, int delta)
{
	if (!m)
		return;
	atomic_fetch_add_explicit(&m->connections, delta, memory_order_relaxed);
}

static unsigned value_size_bucket(uint64_t bytes)
{
	unsigned i = 0;

	while (i < N_VALUE_SIZE && bytes > value_size_bounds[i])
		i++;
	return i;
}

void kvf_metrics_value_sizes(struct kvf_metrics *m, const uint64_t *sizes,
			     const enum kvf_status *status, size_t n)
{
	uint64_t counts[N_VALUE_SIZE + 1] = {0};
	uint64_t sum = 0;
	struct shard *s;

	if (!m || !sizes)
		return;
	for (size_t i = 0; i < n; i++) {
		if (status && status[i] != KVF_OK)
			continue;
		counts[value_size_bucket(sizes[i])]++;
		sum += sizes[i];
	}
	s = this_thread_shard(m);
	for (unsigned b = 0; b <= N_VALUE_SIZE; b++)
		if (counts[b])
			add(&s->value_size[b], counts[b]);
	if (sum)
		add(&s->value_size_sum, sum);
}

/* ---- reading ---- */

static void sum_rpc(const struct kvf_metrics *m, enum kvf_rpc rpc,
		    struct rpc_totals *t)
{
	memset(t, 0, sizeof(*t));
	for (unsigned s = 0; s < KVF_METRICS_SHARDS; s++) {
		const struct rpc_cell *c = &m->shards[s].rpc[rpc];

		for (unsigned b = 0; b <= N_LATENCY; b++) {
			uint64_t v = load(&c->latency[b]);

			t->latency[b] += v;
			t->requests += v;
		}
		t->latency_sum_ns += load(&c->latency_sum_ns);
		t->failures += load(&c->failures);
		t->partial += load(&c->partial);
		t->items += load(&c->items);
		t->failed_items += load(&c->failed_items);
		t->unsupported += load(&c->unsupported);
		t->valid_gets += load(&c->valid_gets);
	}
}

/* A growable text buffer; after an allocation failure it only records it. */
struct text {
	char *p;
	size_t len;
	size_t cap;
	bool oom;
};

__attribute__((format(printf, 2, 3))) static void put(struct text *t,
						      const char *fmt, ...)
{
	va_list ap;
	int n;

	if (t->oom)
		return;
	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(t->p + t->len, t->cap - t->len, fmt, ap);
		va_end(ap);
		if (n < 0) {
			t->oom = true;
			return;
		}
		if ((size_t)n < t->cap - t->len)
			break;
		size_t cap = (t->cap + (size_t)n + 1) * 2;
		char *p = realloc(t->p, cap);

		if (!p) {
			t->oom = true;
			return;
		}
		t->p = p;
		t->cap = cap;
	}
	t->len += (size_t)n;
}

static int text_begin(struct text *t)
{
	t->len = 0;
	t->cap = 16384;
	t->oom = false;
	t->p = malloc(t->cap);
	if (!t->p)
		return KVF_ERR_NO_MEMORY;
	t->p[0] = '\0';
	return KVF_OK;
}

static int text_finish(struct text *t, char **out, size_t *len)
{
	if (t->oom) {
		free(t->p);
		return KVF_ERR_NO_MEMORY;
	}
	*out = t->p;
	*len = t->len;
	return KVF_OK;
}

static void family(struct text *t, const char *name, const char *type,
		   const char *help)
{
	put(t, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void single(struct text *t, const char *name, const char *type,
		   const char *help, uint64_t v)
{
	family(t, name, type, help);
	put(t, "%s %" PRIu64 "\n", name, v);
}

/* Engine-derived figures, zero when no engine is attached. */
struct gauges {
	bool have_engine;
	struct kvf_engine_stats st;
	uint64_t active_clients;
};

static void read_gauges(const struct kvf_metrics *m, struct gauges *g)
{
	memset(g, 0, sizeof(*g));
	if (m->engine && kvf_engine_get_stats(m->engine, &g->st) == KVF_OK)
		g->have_engine = true;
	if (m->active_clients)
		g->active_clients = m->active_clients(m->active_clients_ctx);
	else
		g->active_clients = g->st.clients;
}

static void render_upstream_gauges(struct text *t, const struct gauges *g)
{
	single(t, "master_allocated_bytes", "gauge",
	       "Total memory bytes currently allocated across all segments",
	       g->st.used_bytes);
	single(t, "master_total_capacity_bytes", "gauge",
	       "Total memory capacity across all mounted segments",
	       g->st.capacity_bytes);
	single(t, "master_key_count", "gauge",
	       "Total number of keys managed by the master",
	       g->st.objects + g->st.processing);
	single(t, "master_active_clients", "gauge",
	       "Total number of active clients", g->active_clients);
}

static void render_value_sizes(struct text *t, const struct kvf_metrics *m)
{
	uint64_t counts[N_VALUE_SIZE + 1] = {0}, sum = 0, cum = 0;

	for (unsigned s = 0; s < KVF_METRICS_SHARDS; s++) {
		for (unsigned b = 0; b <= N_VALUE_SIZE; b++)
			counts[b] += load(&m->shards[s].value_size[b]);
		sum += load(&m->shards[s].value_size_sum);
	}
	family(t, "master_value_size_bytes", "histogram",
	       "Distribution of object value sizes");
	for (unsigned b = 0; b < N_VALUE_SIZE; b++) {
		cum += counts[b];
		/* Upstream prints its bounds with six decimals. */
		put(t,
		    "master_value_size_bytes_bucket{le=\"%" PRIu64
		    ".000000\"} %" PRIu64 "\n",
		    value_size_bounds[b], cum);
	}
	cum += counts[N_VALUE_SIZE];
	put(t, "master_value_size_bytes_bucket{le=\"+Inf\"} %" PRIu64 "\n",
	    cum);
	put(t, "master_value_size_bytes_sum %" PRIu64 "\n", sum);
	put(t, "master_value_size_bytes_count %" PRIu64 "\n", cum);
}

static void upstream_counter(struct text *t, const struct upstream_rpc *u,
			     const char *suffix, const char *help_fmt,
			     uint64_t v)
{
	char name[96], help[160];

	snprintf(name, sizeof(name), "master_%s_%s", u->family, suffix);
	snprintf(help, sizeof(help), help_fmt, u->what);
	single(t, name, "counter", help, v);
}

static void render_upstream_rpcs(struct text *t, const struct rpc_totals *tot)
{
	for (size_t i = 0; i < sizeof(upstream_rpcs) / sizeof(upstream_rpcs[0]);
	     i++) {
		const struct upstream_rpc *u = &upstream_rpcs[i];
		const struct rpc_totals *r = &tot[u->rpc];

		upstream_counter(t, u, "requests_total",
				 "Total number of %s requests received",
				 r->requests);
		upstream_counter(t, u, "failures_total",
				 "Total number of failed %s requests",
				 r->failures);
		if (!is_batch_rpc(u->rpc))
			continue;
		upstream_counter(
			t, u, "partial_successes_total",
			"Total number of partially successful %s requests",
			r->partial);
		upstream_counter(
			t, u, "items_total",
			"Total number of items processed in %s requests",
			r->items);
		upstream_counter(t, u, "failed_items_total",
				 "Total number of failed items in %s requests",
				 r->failed_items);
	}
}

/*
 * Upstream's get counters: every GetReplicaList and every key of a
 * BatchGetReplicaList is one "get"; a valid one returned a replica. All
 * of KVForge's replicas are in memory, so every valid get is a memory
 * cache hit.
 */
static void render_upstream_gets(struct text *t, const struct rpc_totals *tot)
{
	const struct rpc_totals *one = &tot[KVF_RPC_GetReplicaList];
	const struct rpc_totals *batch = &tot[KVF_RPC_BatchGetReplicaList];
	uint64_t total = one->requests + batch->items;
	uint64_t valid = one->valid_gets + batch->valid_gets;

	single(t, "mem_cache_hit_nums_", "counter",
	       "Total number of GetReplicaList results served from the memory "
	       "pool",
	       valid);
	single(t, "valid_get_nums_", "counter",
	       "Total number of GetReplicaList operations that returned at "
	       "least one completed replica",
	       valid);
	single(t, "total_get_nums_", "counter",
	       "Total number of GetReplicaList operations", total);
}

/* The rpc-labelled counter families and the field each one shows. */
static const struct labelled_family {
	const char *name;
	const char *help;
	size_t offset; /* in struct rpc_totals */
	bool batch_only;
} labelled_families[] = {
	{"kvforge_rpc_requests_total", "RPCs answered, per RPC",
	 offsetof(struct rpc_totals, requests), false},
	{"kvforge_rpc_failures_total", "RPCs answered with an error, per RPC",
	 offsetof(struct rpc_totals, failures), false},
	{"kvforge_rpc_not_supported_total",
	 "RPCs answered NOT_SUPPORTED because kvforge-master does not "
	 "implement them",
	 offsetof(struct rpc_totals, unsupported), false},
	{"kvforge_rpc_items_total", "Items (keys) in batch RPCs, per RPC",
	 offsetof(struct rpc_totals, items), true},
	{"kvforge_rpc_failed_items_total",
	 "Items of batch RPCs answered with an error, per RPC",
	 offsetof(struct rpc_totals, failed_items), true},
	{"kvforge_rpc_partial_successes_total",
	 "Batch RPCs in which some but not all items failed, per RPC",
	 offsetof(struct rpc_totals, partial), true},
};

/* One rpc-labelled counter family, over the RPCs answered at least once. */
static void render_labelled(struct text *t, const struct rpc_totals *tot,
			    const struct labelled_family *f)
{
	family(t, f->name, "counter", f->help);
	for (unsigned r = 0; r < KVF_RPC__COUNT; r++) {
		const uint64_t *v;

		if (tot[r].requests == 0 && tot[r].unsupported == 0)
			continue;
		if (f->batch_only && !is_batch_rpc((enum kvf_rpc)r))
			continue;
		v = (const uint64_t *)((const char *)&tot[r] + f->offset);
		put(t, "%s{rpc=\"%s\"} %" PRIu64 "\n", f->name, rpc_names[r],
		    *v);
	}
}

static void render_latency(struct text *t, const struct rpc_totals *tot)
{
	family(t, "kvforge_rpc_latency_seconds", "histogram",
	       "Time from a request's arrival to its answer, per RPC");
	for (unsigned r = 0; r < KVF_RPC__COUNT; r++) {
		const struct rpc_totals *x = &tot[r];
		uint64_t cum = 0;

		if (x->requests == 0)
			continue;
		for (unsigned b = 0; b < N_LATENCY; b++) {
			cum += x->latency[b];
			put(t,
			    "kvforge_rpc_latency_seconds_bucket{rpc=\"%s\",le="
			    "\"%s\"} %" PRIu64 "\n",
			    rpc_names[r], latency_bounds[b].le, cum);
		}
		put(t,
		    "kvforge_rpc_latency_seconds_bucket{rpc=\"%s\",le=\"+Inf\"}"
		    " %" PRIu64 "\n",
		    rpc_names[r], x->requests);
		put(t, "kvforge_rpc_latency_seconds_sum{rpc=\"%s\"} %.9f\n",
		    rpc_names[r], (double)x->latency_sum_ns / 1e9);
		put(t,
		    "kvforge_rpc_latency_seconds_count{rpc=\"%s\"} %" PRIu64
		    "\n",
		    rpc_names[r], x->requests);
	}
}

static void render_kvforge_rpcs(struct text *t, const struct kvf_metrics *m,
				const struct rpc_totals *tot)
{
	single(t, "kvforge_rpc_connections", "gauge", "Open RPC connections",
	       (uint64_t)atomic_load_explicit(&m->connections,
					      memory_order_relaxed));
	for (size_t i = 0;
	     i < sizeof(labelled_families) / sizeof(labelled_families[0]); i++)
		render_labelled(t, tot, &labelled_families[i]);
	render_latency(t, tot);
}

/*
 * Upstream's families for what the engine counts (docs/metrics.md says
 * where each comes from), with upstream's names, types and help texts.
 */
static void render_upstream_engine(struct text *t,
				   const struct kvf_engine_stats *s)
{
	single(t, "master_soft_pin_key_count", "gauge",
	       "Total number of soft-pinned keys managed by the master",
	       s->soft_pinned);
	single(t, "master_put_start_alloc_failures_total", "counter",
	       "Total number of PutStart failures caused by replica "
	       "allocation failure",
	       s->put_alloc_failures);
	/* A put gets every replica it asks for or fails: never fewer. */
	single(t, "master_put_start_partial_allocations_total", "counter",
	       "Total number of PutStart requests that succeeded with fewer "
	       "replicas than requested (best-effort degradation)",
	       0);
	single(t, "master_successful_evictions_total", "counter",
	       "Total number of successful eviction operations",
	       s->eviction_successes);
	single(t, "master_attempted_evictions_total", "counter",
	       "Total number of attempted eviction operations",
	       s->eviction_passes);
	single(t, "master_evicted_key_count", "counter",
	       "Total number of keys evicted", s->evicted_objects);
	single(t, "master_evicted_size_bytes", "counter",
	       "Total bytes of evicted objects", s->evicted_bytes);
	single(t, "master_put_start_discard_cnt", "counter",
	       "Total number of discarded PutStart operations",
	       s->discarded_puts);
	single(t, "master_put_start_release_cnt", "counter",
	       "Total number of released PutStart operations",
	       s->released_puts);
	single(t, "master_put_start_discarded_staging_size", "gauge",
	       "Total size of memory replicas in discarded but not yet "
	       "released PutStart operations",
	       s->discarded_bytes);
}

static void render_engine(struct text *t, const struct gauges *g,
			  const struct kvf_metrics *m)
{
	const struct kvf_engine_stats *s = &g->st;

	single(t, "kvforge_uptime_seconds", "gauge",
	       "Seconds since the metrics registry was created", uptime_s(m));
	if (!g->have_engine)
		return;
	render_upstream_engine(t, s);
	single(t, "kvforge_engine_objects", "gauge",
	       "Complete objects in the engine", s->objects);
	single(t, "kvforge_engine_processing_objects", "gauge",
	       "Objects whose put started and has not ended", s->processing);
	single(t, "kvforge_engine_clients", "gauge", "Clients the engine knows",
	       s->clients);
	single(t, "kvforge_engine_segments", "gauge", "Mounted segments",
	       s->segments);
	single(t, "kvforge_engine_deferred_frees", "gauge",
	       "Buffers of pre-empted puts awaiting release",
	       s->deferred_frees);
	single(t, "kvforge_engine_expired_clients_total", "counter",
	       "Clients dropped for missing their TTL since start",
	       s->expired_clients);
	single(t, "kvforge_engine_recovered_objects", "gauge",
	       "Objects restored from the journal at start",
	       s->recovered_objects);
	single(t, "kvforge_engine_record_bytes", "gauge",
	       "Memory mapped for object records", s->record_bytes);
	single(t, "kvforge_engine_index_bytes", "gauge",
	       "Memory of the key index's table (0: not reported)",
	       s->index_bytes);
	single(t, "kvforge_engine_allocator_bytes", "gauge",
	       "Memory of the segment allocators' bookkeeping",
	       s->allocator_bytes);
}

/* One family of the stage profile: a field of every cell that ran. */
static void render_stage_family(struct text *t,
				const struct kvf_profile_snapshot *s,
				const char *name, const char *help,
				size_t field_offset, bool nanoseconds)
{
	family(t, name, "counter", help);
	for (unsigned op = 0; op < s->n_ops; op++) {
		for (unsigned st = 0; st <= s->n_stages; st++) {
			const struct kvf_profile_cell *c =
				kvf_profile_snapshot_cell(s, op, st);
			const char *stage =
				st < s->n_stages ? s->stage_names[st] : "total";
			uint64_t v;

			if (!c || c->calls == 0)
				continue;
			v = *(const uint64_t *)((const char *)c + field_offset);
			put(t, "%s{op=\"%s\",stage=\"%s\"} ", name,
			    s->op_names[op], stage);
			if (nanoseconds)
				put(t, "%.9f\n", (double)v / 1e9);
			else
				put(t, "%" PRIu64 "\n", v);
		}
	}
}

/* Per-stage profile, only while the engine's profiler is enabled. */
static void render_stages(struct text *t, const struct kvf_metrics *m)
{
	struct kvf_profiler *p;
	struct kvf_profile_snapshot *s;

	if (!m->engine)
		return;
	p = kvf_engine_profiler(m->engine);
	if (!p || !kvf_profile_enabled(p))
		return;
	if (kvf_profile_snapshot(p, &s) != KVF_OK) {
		t->oom = true;
		return;
	}
	render_stage_family(t, s, "kvforge_stage_calls_total",
			    "Engine batch calls that ran a stage "
			    "(stage=\"total\": batches)",
			    offsetof(struct kvf_profile_cell, calls), false);
	render_stage_family(t, s, "kvforge_stage_keys_total",
			    "Keys of the batch calls that ran a stage",
			    offsetof(struct kvf_profile_cell, keys), false);
	render_stage_family(
		t, s, "kvforge_stage_seconds_total",
		"Time charged to a stage of the engine's batch calls",
		offsetof(struct kvf_profile_cell, ns), true);
	family(t, "kvforge_profile_tier", "gauge",
	       "The profiler's counter tier (value 1 on the active one)");
	put(t, "kvforge_profile_tier{tier=\"%s\"} 1\n", s->tier);
	kvf_profile_snapshot_free(s);
}

static struct rpc_totals *sum_all(const struct kvf_metrics *m)
{
	struct rpc_totals *tot = calloc(KVF_RPC__COUNT, sizeof(*tot));

	if (!tot)
		return NULL;
	for (unsigned r = 0; r < KVF_RPC__COUNT; r++)
		sum_rpc(m, (enum kvf_rpc)r, &tot[r]);
	return tot;
}

/* --enable_ha: the election's state and counts (upstream has no family). */
static void render_ha(struct text *t, struct kvf_metrics *m)
{
	struct kvf_ha_status st;

	if (!m->ha)
		return;
	kvf_ha_status(m->ha, &st);
	put(t,
	    "# HELP kvforge_ha_is_leader 1 while this master leads and may "
	    "serve\n# TYPE kvforge_ha_is_leader gauge\n"
	    "kvforge_ha_is_leader %d\n",
	    st.serving);
	put(t,
	    "# HELP kvforge_ha_view_version the master_view key's create "
	    "revision as last seen\n# TYPE kvforge_ha_view_version gauge\n"
	    "kvforge_ha_view_version %" PRIu64 "\n",
	    st.view);
	put(t,
	    "# HELP kvforge_ha_elections_won_total times this master took "
	    "the key\n# TYPE kvforge_ha_elections_won_total counter\n"
	    "kvforge_ha_elections_won_total %" PRIu64 "\n",
	    st.elected);
	put(t,
	    "# HELP kvforge_ha_leadership_lost_total times it gave the "
	    "leadership up (not counting a stop)\n"
	    "# TYPE kvforge_ha_leadership_lost_total counter\n"
	    "kvforge_ha_leadership_lost_total %" PRIu64 "\n",
	    st.lost);
	put(t,
	    "# HELP kvforge_ha_fencing_events_total of those, because the "
	    "fencing deadline passed unrenewed\n"
	    "# TYPE kvforge_ha_fencing_events_total counter\n"
	    "kvforge_ha_fencing_events_total %" PRIu64 "\n",
	    st.fenced);
}

/* HA with replication: lag and standbys (under src_mu). */
static void render_repl(struct text *t, struct kvf_metrics *m)
{
	struct kvf_repl_stats st;

	if (!m->repl)
		return;
	m->repl(m->repl_ctx, &st);
	put(t,
	    "# HELP kvforge_ha_replication_standbys standbys connected to "
	    "this leader\n# TYPE kvforge_ha_replication_standbys gauge\n"
	    "kvforge_ha_replication_standbys %u\n",
	    st.standbys);
	put(t,
	    "# HELP kvforge_ha_replication_sync_standbys standbys that "
	    "acknowledged the last record\n"
	    "# TYPE kvforge_ha_replication_sync_standbys gauge\n"
	    "kvforge_ha_replication_sync_standbys %u\n",
	    st.synced);
	put(t,
	    "# HELP kvforge_ha_replication_sync_required --ha_sync_standbys\n"
	    "# TYPE kvforge_ha_replication_sync_required gauge\n"
	    "kvforge_ha_replication_sync_required %u\n",
	    st.sync_standbys);
	put(t,
	    "# HELP kvforge_ha_replication_degraded 1 while the leader "
	    "acknowledges without its sync standbys\n"
	    "# TYPE kvforge_ha_replication_degraded gauge\n"
	    "kvforge_ha_replication_degraded %d\n",
	    st.degraded);
	put(t,
	    "# HELP kvforge_ha_replication_last_seq last journal sequence "
	    "here\n# TYPE kvforge_ha_replication_last_seq gauge\n"
	    "kvforge_ha_replication_last_seq %" PRIu64 "\n",
	    st.last_seq);
	put(t,
	    "# HELP kvforge_ha_replication_lag_records records the slowest "
	    "standby lacks (leader) or this standby lacks (standby)\n"
	    "# TYPE kvforge_ha_replication_lag_records gauge\n"
	    "kvforge_ha_replication_lag_records %" PRIu64 "\n",
	    st.lag_records);
	put(t,
	    "# HELP kvforge_ha_replication_lag_bytes bytes of records the "
	    "slowest standby lacks (leader)\n"
	    "# TYPE kvforge_ha_replication_lag_bytes gauge\n"
	    "kvforge_ha_replication_lag_bytes %" PRIu64 "\n",
	    st.lag_bytes);
	put(t,
	    "# HELP kvforge_ha_replication_refused_total hellos and frames "
	    "refused\n# TYPE kvforge_ha_replication_refused_total counter\n"
	    "kvforge_ha_replication_refused_total %" PRIu64 "\n",
	    st.refused);
}

int kvf_metrics_render_prometheus(struct kvf_metrics *m, char **out,
				  size_t *len)
{
	struct rpc_totals *tot;
	struct gauges g;
	struct text t;

	if (!m || !out || !len)
		return KVF_ERR_INVALID_ARGUMENT;
	tot = sum_all(m);
	if (!tot)
		return KVF_ERR_NO_MEMORY;
	if (text_begin(&t) != KVF_OK) {
		free(tot);
		return KVF_ERR_NO_MEMORY;
	}
	pthread_mutex_lock(&m->src_mu);
	read_gauges(m, &g);
	render_upstream_gauges(&t, &g);
	render_value_sizes(&t, m);
	render_upstream_rpcs(&t, tot);
	render_upstream_gets(&t, tot);
	render_kvforge_rpcs(&t, m, tot);
	render_engine(&t, &g, m);
	render_stages(&t, m);
	render_ha(&t, m);
	render_repl(&t, m);
	pthread_mutex_unlock(&m->src_mu);
	free(tot);
	return text_finish(&t, out, len);
}

/* "1.5 GiB": byte counts for people. */
static void put_bytes(struct text *t, uint64_t b)
{
	static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	double v = (double)b;
	unsigned u = 0;

	while (v >= 1024.0 && u + 1 < sizeof(unit) / sizeof(unit[0])) {
		v /= 1024.0;
		u++;
	}
	if (u == 0)
		put(t, "%" PRIu64 " B", b);
	else
		put(t, "%.1f %s", v, unit[u]);
}

int kvf_metrics_render_summary(struct kvf_metrics *m, char **out, size_t *len)
{
	struct rpc_totals *tot;
	struct gauges g;
	struct text t;
	const char *sep;

	if (!m || !out || !len)
		return KVF_ERR_INVALID_ARGUMENT;
	tot = sum_all(m);
	if (!tot)
		return KVF_ERR_NO_MEMORY;
	if (text_begin(&t) != KVF_OK) {
		free(tot);
		return KVF_ERR_NO_MEMORY;
	}
	pthread_mutex_lock(&m->src_mu);
	read_gauges(m, &g);
	pthread_mutex_unlock(&m->src_mu);
	put(&t,
	    "role=leader, state=serving, service_ready=true, uptime=%" PRIu64
	    "s\n",
	    uptime_s(m));
	put(&t, "Mem Storage: ");
	put_bytes(&t, g.st.used_bytes);
	put(&t, " / ");
	put_bytes(&t, g.st.capacity_bytes);
	put(&t,
	    " | Keys: %" PRIu64 " (processing: %" PRIu64 ") | Clients: %" PRIu64
	    " | Segments: %" PRIu64 " | Connections: %" PRId64 "\n",
	    g.st.objects + g.st.processing, g.st.processing, g.active_clients,
	    g.st.segments,
	    (int64_t)atomic_load_explicit(&m->connections,
					  memory_order_relaxed));

	put(&t, "Requests (total/failed, mean latency):");
	sep = " ";
	for (unsigned r = 0; r < KVF_RPC__COUNT; r++) {
		const struct rpc_totals *x = &tot[r];

		if (x->requests == 0)
			continue;
		put(&t, "%s%s=%" PRIu64 "/%" PRIu64 " (%.1f us)", sep,
		    rpc_names[r], x->requests, x->failures,
		    (double)x->latency_sum_ns / 1e3 / (double)x->requests);
		sep = ", ";
	}
	put(&t, "%s\n", sep[0] == ' ' ? " none" : "");

	put(&t, "Batch items (total/failed, partial requests):");
	sep = " ";
	for (unsigned r = 0; r < KVF_RPC__COUNT; r++) {
		const struct rpc_totals *x = &tot[r];

		if (x->requests == 0 || !is_batch_rpc((enum kvf_rpc)r))
			continue;
		put(&t, "%s%s=%" PRIu64 "/%" PRIu64 " (%" PRIu64 ")", sep,
		    rpc_names[r], x->items, x->failed_items, x->partial);
		sep = ", ";
	}
	put(&t, "%s\n", sep[0] == ' ' ? " none" : "");

	put(&t, "Not supported:");
	sep = " ";
	for (unsigned r = 0; r < KVF_RPC__COUNT; r++) {
		if (tot[r].unsupported == 0)
			continue;
		put(&t, "%s%s=%" PRIu64, sep, rpc_names[r], tot[r].unsupported);
		sep = ", ";
	}
	put(&t, "%s\n", sep[0] == ' ' ? " none" : "");
	free(tot);
	return text_finish(&t, out, len);
}

/* --enable_ha: the role, the view and the leader's address, as seen. */
static int render_ha_health(struct kvf_metrics *m, struct kvf_ha *ha,
			    char **out, size_t *len)
{
	struct kvf_ha_status st;
	struct kvf_repl_stats rs;
	char leader[300] = "null", view[32] = "null", repl[512] = "";
	int n;

	kvf_ha_status(ha, &st);
	pthread_mutex_lock(&m->src_mu);
	if (m->repl) {
		m->repl(m->repl_ctx, &rs);
		snprintf(repl, sizeof(repl),
			 ",\"replication\":{\"side\":\"%s\",\"connected\":%s,"
			 "\"standbys\":%u,\"sync_standbys\":%u,"
			 "\"sync_required\":%u,\"degraded\":%s,"
			 "\"last_seq\":%" PRIu64 ",\"lag_records\":%" PRIu64
			 "}",
			 rs.leading ? "leader" : "standby",
			 rs.connected || rs.leading ? "true" : "false",
			 rs.standbys, rs.synced, rs.sync_standbys,
			 rs.degraded ? "true" : "false", rs.last_seq,
			 rs.lag_records);
	}
	pthread_mutex_unlock(&m->src_mu);
	/* an address is host:port, nothing to escape */
	if (st.leader[0])
		snprintf(leader, sizeof(leader), "\"%s\"", st.leader);
	if (st.view)
		snprintf(view, sizeof(view), "%" PRIu64, st.view);
	n = asprintf(out,
		     "{\"status\":\"ok\",\"role\":\"%s\",\"ha_state\":"
		     "\"%s\",\"service_ready\":%s,\"leader_address\":%s,"
		     "\"view_version\":%s%s}",
		     kvf_ha_role_name(st.role),
		     st.serving ? "serving" : "not_serving",
		     st.serving ? "true" : "false", leader, view, repl);
	if (n < 0)
		return KVF_ERR_NO_MEMORY;
	*len = (size_t)n;
	return KVF_OK;
}

int kvf_metrics_render_health(struct kvf_metrics *m, char **out, size_t *len)
{
	static const char body[] =
		"{\"status\":\"ok\",\"role\":\"leader\",\"ha_state\":"
		"\"serving\","
		"\"service_ready\":true,\"leader_address\":null,"
		"\"view_version\":null}";

	if (!m || !out || !len)
		return KVF_ERR_INVALID_ARGUMENT;
	if (m->ha)
		return render_ha_health(m, m->ha, out, len);
	*out = strdup(body);
	if (!*out)
		return KVF_ERR_NO_MEMORY;
	*len = sizeof(body) - 1;
	return KVF_OK;
}
