// SPDX-License-Identifier: MIT
/*
 * master/main.c - kvforge-master: a Mooncake Store master on KVForge.
 *
 * Start-up order: flags, the Mooncake ABI, the engine (recovering a data
 * directory), the registry (its persisted segment table), metrics, the
 * RPC service and its event-loop threads, then the HTTP servers. The main
 * thread then only waits for SIGINT/SIGTERM (blocked in every thread and
 * taken with sigtimedwait) and, once a second, lets the registry forget
 * what the engine expired. Client liveness runs on the serving clock
 * (master/stallclock.h), which the loop threads stop while one of them is
 * stuck. Shutdown runs the same order backwards; closing
 * the engine flushes its journal.
 *
 * With --enable_ha the RPC server runs only while this master leads
 * (ha/election.h), and the engine only while it leads; standing by, it
 * holds the RPC port bound without listening (master/port_claim.h:
 * clients are refused there as upstream's standbys refuse them, and the
 * port cannot be found taken once elected): a standby's
 * journal belongs to the replication follower (ha/replication.h), which
 * appends the leader's records to it. The main thread polls the election
 * every 50 ms; once kvf_ha_may_serve() holds it stops the follower, opens
 * the engine from the journal (the promotion cost: a recovery), starts
 * the leader's replication (the journal tap; from then on a mutation is
 * answered only once --ha_sync_standbys standbys have it) and the RPC
 * server; if any of that fails it steps aside (kvf_ha_step_aside(): the
 * lease revoked, no campaign for two TTLs) rather than lead without
 * serving. As soon as the election no longer allows serving it aborts the
 * appends waiting for standbys, stops the RPC server (closing the port),
 * the replication, the engine, and follows the new leader again. The
 * service itself refuses every request past the fencing deadline, so the
 * polling interval never lets a deposed leader answer. Shutdown closes
 * the port before the lease is revoked.
 *
 * Besides the journal, the leader replicates two state items whole
 * (kvf_repl_lead_set_state()): the registry's segment table, from its
 * persist hook (a mutation is answered once the sync set has it, as for
 * the journal; the main thread's sweep does not wait), and the HTTP
 * metadata store, from its change hook (asynchronously: the HTTP thread
 * does not wait for standbys). A standby writes the table into its data
 * directory, where the registry loads it on promotion, and imports the
 * store into its own metadata server (with HA the metadata server starts
 * before the follower, so the store exists; the metrics server after the
 * election, whose state it shows). leader_mu orders the
 * store's hook against promotion and demotion; the RPC threads, the only
 * other users of m->leader, run only while it is set.
 *
 * stdout carries one line per listening server ("... listening on
 * HOST:PORT ..."), flushed at once, so scripts and tests that start the
 * master on port 0 learn the port it bound.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <kvforge/engine.h>
#include <kvforge/status.h>

#include "base/clock.h"
#include "engine/replication.h"
#include "ha/election.h"
#include "ha/replication.h"
#include "rdma/listener.h"
#include "wire/abi.h"
#include "master/flags.h"
#include "master/ha_config.h"
#include "http/http.h"
#include "master/loop.h"
#include "master/port_claim.h"
#include "base/fault.h"
#include "http/metastore.h"
#include "http/metrics.h"
#include "master/registry.h"
#include "master/service.h"
#include "master/stallclock.h"

struct master {
	struct kvf_master_flags flags;
	const struct kvf_abi *abi;
	struct kvf_engine *engine;
	struct kvf_registry *registry;
	struct kvf_metrics *metrics;
	struct kvf_service *service;
	struct kvf_loop *loop;
	struct kvf__rdma_listener *rdma;
	struct kvf_http_server *http_metrics;
	struct kvf_http_server *http_metadata;
	struct kvf_stallclock *stall;
	struct kvf_ha *ha; /* --enable_ha, else NULL */
	int port_fd;	   /* with HA, standing by: the RPC port held (or -1) */
	struct kvf_ha_options ha_opts;
	char advertise[KVF_HA_ADDR_MAX];
	/* replication (with --enable_ha) */
	struct kvf_repl_options repl_opts;
	char repl_host[KVF_HA_ADDR_MAX];
	char token[KVF_HA_TOKEN_MAX];
	struct kvf_repl_leader *leader;	    /* while leading */
	pthread_mutex_t follower_mu;	    /* follower vs the election */
	struct kvf_repl_follower *follower; /* while standing by */
	uint64_t promote_after; /* after a failed promotion */
	pthread_mutex_t leader_mu; /* m->leader vs the metadata store's hook */
	pthread_t main_thread;
};

/* The state items replicated besides the journal. */
enum { STATE_SEGMENTS = 0, STATE_METASTORE = 1 };

/* After a failed promotion, no campaign for this many lease TTLs. */
#define STEP_ASIDE_TTLS 2

/* A loop thread busy this long with one wake-up stalls the serving clock
 * that client liveness is measured on (master/stallclock.h). */
#define STALL_MS 100

static void die_status(const char *what, int ret)
{
	fprintf(stderr, "kvforge-master: %s: %s\n", what, kvf_strerror(ret));
}

static uint64_t live_clients(void *ctx)
{
	return kvf_registry_live_clients(ctx);
}

static int pick_abi(struct master *m)
{
	const char *name =
		m->flags.mooncake_abi[0] ? m->flags.mooncake_abi : NULL;

	m->abi = kvf_abi_find(name);
	if (m->abi)
		return KVF_OK;
	fprintf(stderr,
		"kvforge-master: unknown --mooncake-abi '%s'; known:", name);
	for (size_t i = 0; i < kvf_abi_count(); i++)
		fprintf(stderr, " %s", kvf_abi_at(i)->name);
	fputc('\n', stderr);
	return KVF_ERR_INVALID_ARGUMENT;
}

static int start_stallclock(struct master *m)
{
	int ret = kvf_stallclock_new(STALL_MS, &m->stall);

	if (!ret)
		ret = kvf_stallclock_start(m->stall);
	if (ret)
		die_status("creating the serving clock", ret);
	return ret;
}

/* The registry wrote a new segment table: to the standbys. */
static int segments_changed(void *ctx, const char *text, size_t len)
{
	struct master *m = ctx;

	if (!m->leader)
		return KVF_OK;
	/* the sweep (main thread) must not hold up the election */
	return kvf_repl_lead_set_state(
		m->leader, STATE_SEGMENTS, text, len,
		!pthread_equal(pthread_self(), m->main_thread));
}

/* With leader_mu held: the metadata store's content, to the standbys. */
static void publish_metastore(struct master *m)
{
	uint8_t *buf;
	size_t len;
	int ret;

	if (!m->leader || !m->http_metadata)
		return;
	ret = kvf__metastore_export(kvf_http_metadata_store(m->http_metadata),
				    &buf, &len);
	if (!ret) {
		ret = kvf_repl_lead_set_state(m->leader, STATE_METASTORE, buf,
					      len, false);
		free(buf);
	}
	if (ret)
		fprintf(stderr,
			"kvforge-master: cannot replicate the metadata "
			"store: %s\n",
			kvf_strerror(ret));
}

static void metastore_changed(void *ctx)
{
	struct master *m = ctx;

	pthread_mutex_lock(&m->leader_mu);
	publish_metastore(m);
	pthread_mutex_unlock(&m->leader_mu);
}

/* Standby: a state item from the leader. */
static int apply_state(void *ctx, unsigned item, const uint8_t *data,
		       size_t len)
{
	struct master *m = ctx;

	if (item == STATE_SEGMENTS)
		return kvf_registry_store_table(m->repl_opts.data_dir,
						(const char *)data, len);
	if (item != STATE_METASTORE)
		return KVF_ERR_INVALID_ARGUMENT;
	if (!m->http_metadata) /* no metadata server here */
		return KVF_OK;
	return kvf__metastore_import(kvf_http_metadata_store(m->http_metadata),
				     data, len);
}

static int open_engine(struct master *m)
{
	struct kvf_config cfg;
	char err[256];
	int ret = kvf_flags_engine_config(&m->flags, &cfg, err, sizeof(err));

	if (ret) {
		fprintf(stderr, "kvforge-master: %s\n", err);
		return ret;
	}
	cfg.clock = kvf_stallclock_now;
	cfg.clock_ctx = m->stall;
	ret = kvf_engine_open(&cfg, &m->engine);
	if (ret) {
		die_status("opening the engine", ret);
		return ret;
	}
	ret = kvf_registry_open(m->engine, cfg.data_dir, cfg.client_ttl_ms,
				&m->registry);
	if (ret) {
		die_status("loading the segment table", ret);
		return ret;
	}
	kvf_registry_set_clock(m->registry, kvf_stallclock_now, m->stall);
	if (m->flags.enable_ha)
		kvf_registry_set_persist_hook(m->registry, segments_changed, m);
	kvf_metrics_set_source(m->metrics, m->engine, live_clients,
			       m->registry);
	return KVF_OK;
}

static void close_engine(struct master *m)
{
	kvf_metrics_set_source(m->metrics, NULL, NULL, NULL);
	kvf_registry_close(m->registry);
	kvf_engine_close(m->engine); /* flushes the journal */
	m->registry = NULL;
	m->engine = NULL;
}

/*
 * Descriptors: raise the soft limit to the hard one, and keep
 * --max_connections below it (with room for the engine's and HTTP's own
 * files); otherwise accept() would fail with EMFILE while the listening
 * socket stays readable, and the loop threads would spin on it.
 */
static void fit_connection_limit(struct kvf_master_flags *f)
{
	struct rlimit rl;
	uint64_t room;

	if (getrlimit(RLIMIT_NOFILE, &rl))
		return;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl))
			getrlimit(RLIMIT_NOFILE, &rl);
	}
	room = rl.rlim_cur > 128 ? rl.rlim_cur - 128 : 1;
	if (rl.rlim_cur != RLIM_INFINITY && f->max_connections > room) {
		fprintf(stderr,
			"kvforge-master: warning: --max_connections "
			"%llu lowered to %llu (open file limit %llu)\n",
			(unsigned long long)f->max_connections,
			(unsigned long long)room,
			(unsigned long long)rl.rlim_cur);
		f->max_connections = room;
	}
}

static int start_rpc(struct master *m)
{
	const struct kvf_master_flags *f = &m->flags;
	struct kvf_service_options so = {.abi = m->abi,
					 .engine = m->engine,
					 .registry = m->registry,
					 .metrics = m->metrics,
					 .flags = f,
					 .ha = m->ha};
	struct kvf_loop_options lo;
	int ret;

	fit_connection_limit(&m->flags);
	lo = (struct kvf_loop_options){
		.address = f->rpc_address,
		.port = kvf_flags_rpc_port(f),
		.threads = kvf_flags_rpc_threads(f),
		.max_request_bytes = f->max_request_bytes,
		.max_connections = f->max_connections,
		.idle_timeout_sec =
			f->rpc_conn_timeout_seconds > 0
				? (uint64_t)f->rpc_conn_timeout_seconds
				: f->idle_timeout_sec,
		.request_timeout_sec = f->request_timeout_sec,
		.tcp_nodelay = f->rpc_enable_tcp_no_delay,
		.metrics = m->metrics,
		.stall = m->stall,
	};
	ret = kvf_service_new(&so, &m->service);
	if (ret) {
		die_status("creating the service", ret);
		return ret;
	}
	lo.service = m->service;
	if (kvf__rdma_wanted(f->enable_rdma)) {
		ret = kvf__rdma_listener_open(NULL, NULL, NULL, &m->rdma);
		if (ret) {
			die_status("preparing RDMA", ret);
			return ret;
		}
		lo.rdma = m->rdma;
	}
	/* the held port is the loop's from here on, whatever happens */
	lo.claimed = m->port_fd >= 0;
	lo.claimed_fd = m->port_fd;
	m->port_fd = -1;
	ret = kvf_loop_start(&lo, &m->loop);
	if (ret) {
		fprintf(stderr, "kvforge-master: cannot listen on %s:%u: %s\n",
			f->rpc_address, lo.port, kvf_strerror(ret));
		return ret;
	}
	printf("kvforge-master: RPC listening on %s:%u (%u threads, "
	       "Mooncake ABI %s%s)\n",
	       f->rpc_address, kvf_loop_port(m->loop), lo.threads, m->abi->name,
	       kvf__rdma_listener_ready(m->rdma) ? ", TCP and RDMA" : "");
	fflush(stdout);
	return KVF_OK;
}

static int start_metrics(struct master *m)
{
	const struct kvf_master_flags *f = &m->flags;
	int ret;

	if (f->enable_metric_reporting) {
		struct kvf_http_options o = {.host = f->metrics_host_set
							     ? f->metrics_host
							     : f->rpc_address,
					     .port = (uint16_t)f->metrics_port};

		ret = kvf_http_metrics_start(&o, m->metrics, &m->http_metrics);
		if (ret) {
			fprintf(stderr,
				"kvforge-master: metrics server on "
				"%s:%u: %s\n",
				o.host, o.port, kvf_strerror(ret));
			return ret;
		}
		printf("kvforge-master: metrics listening on %s:%u\n", o.host,
		       kvf_http_port(m->http_metrics));
	}
	fflush(stdout);
	return KVF_OK;
}

static int start_metadata(struct master *m)
{
	const struct kvf_master_flags *f = &m->flags;
	int ret;

	if (f->enable_http_metadata_server) {
		struct kvf_http_options o = {
			.host = f->http_metadata_server_host,
			.port = (uint16_t)f->http_metadata_server_port,
			.max_store_bytes = f->http_metadata_server_max_bytes,
			.on_change = f->enable_ha ? metastore_changed : NULL,
			.on_change_ctx = m};

		ret = kvf_http_metadata_start(&o, &m->http_metadata);
		if (ret) {
			fprintf(stderr,
				"kvforge-master: metadata server on "
				"%s:%u: %s\n",
				o.host, o.port, kvf_strerror(ret));
			return ret;
		}
		printf("kvforge-master: HTTP metadata listening on %s:%u\n",
		       o.host, kvf_http_port(m->http_metadata));
	}
	fflush(stdout);
	return KVF_OK;
}

static void stop_rpc(struct master *m)
{
	kvf_loop_stop(m->loop);
	kvf__rdma_listener_close(m->rdma);
	kvf_service_free(m->service);
	m->loop = NULL;
	m->rdma = NULL;
	m->service = NULL;
}

/* --- replication ----------------------------------------------------- */

static void repl_stats(void *ctx, struct kvf_repl_stats *st)
{
	struct master *m = ctx;

	/* main thread changes these under the metrics' source lock */
	if (m->leader)
		kvf_repl_lead_stats(m->leader, st);
	else
		kvf_repl_follow_stats(m->follower, st);
}

static bool may_campaign(void *ctx)
{
	struct master *m = ctx;
	bool may;

	pthread_mutex_lock(&m->follower_mu);
	may = kvf_repl_may_campaign(m->follower);
	pthread_mutex_unlock(&m->follower_mu);
	return may;
}

static int start_follower(struct master *m)
{
	struct kvf_repl_follower *f;
	int ret = kvf_repl_follow_start(&m->repl_opts, &f);

	if (ret) {
		die_status("following the leader (--data-dir)", ret);
		return ret;
	}
	kvf_metrics_set_repl(m->metrics, NULL, NULL);
	pthread_mutex_lock(&m->follower_mu);
	m->follower = f;
	pthread_mutex_unlock(&m->follower_mu);
	kvf_metrics_set_repl(m->metrics, repl_stats, m);
	return KVF_OK;
}

static void stop_follower(struct master *m, struct kvf_repl_backlog **keep)
{
	struct kvf_repl_follower *f;

	kvf_metrics_set_repl(m->metrics, NULL, NULL);
	pthread_mutex_lock(&m->follower_mu);
	f = m->follower;
	m->follower = NULL;
	pthread_mutex_unlock(&m->follower_mu);
	kvf_repl_follow_stop(f, keep);
}

#ifdef KVF_FAULT_INJECTION
/*
 * Test hooks, said at start-up. Main thread.
 * $KVF_FAULT_PROMOTE=N fails the first N promotions as if the engine
 * could not be opened (KVF_ERR_IO), before the view is published.
 * $KVF_FAULT_PROMOTE_LATE=N fails the first N that get past that as if
 * the RPC service could not start: after the view's sync set is
 * published.
 */
static long promotions_to_fail, late_promotions_to_fail;

static long fault_count(const char *var, const char *what)
{
	const char *v = getenv(var);
	long n = v ? strtol(v, NULL, 10) : 0;

	if (n > 0) {
		printf("kvforge-master: fault injection: the next %ld "
		       "promotions fail%s\n",
		       n, what);
		fflush(stdout);
	}
	return n;
}

static int promote_fault_arm(void)
{
	promotions_to_fail = fault_count("KVF_FAULT_PROMOTE", "");
	late_promotions_to_fail = fault_count("KVF_FAULT_PROMOTE_LATE",
					      " after publishing their view");
	return 0;
}

static int take_fault(long *left)
{
	if (*left <= 0)
		return KVF_OK;
	--*left;
	return KVF_ERR_IO;
}

static int promote_fault(void)
{
	return take_fault(&promotions_to_fail);
}

static int promote_late_fault(void)
{
	return take_fault(&late_promotions_to_fail);
}
#endif

/* Standby -> leader: the engine from the replicated journal, the tap. */
static int promote(struct master *m)
{
	uint64_t t0 = kvf__now_ns();
	struct kvf_repl_backlog *bl;
	struct kvf_repl_leader *l;
	struct kvf__journal *j;
	char *table;
	size_t len;
	int ret;

	stop_follower(m, &bl);
	ret = KVF__FAULT(promote_fault());
	if (!ret)
		ret = open_engine(m);
	if (ret) {
		kvf_repl_backlog_free(bl);
		return ret;
	}
	/* what the standbys get after their handshake; taken before the
	 * replication starts, which publishes this view's sync set */
	ret = kvf_registry_export(m->registry, &table, &len);
	if (ret) {
		kvf_repl_backlog_free(bl);
		die_status("exporting the segment table", ret);
		return ret;
	}
	j = kvf__engine_journal_of(m->engine);
	ret = kvf_repl_lead_start(&m->repl_opts, j, kvf_ha_view_version(m->ha),
				  kvf_ha_lease(m->ha), bl, &l);
	if (ret) {
		free(table);
		die_status("starting replication", ret);
		return ret;
	}
	ret = kvf_repl_lead_set_state(l, STATE_SEGMENTS, table, len, false);
	free(table);
	pthread_mutex_lock(&m->leader_mu);
	m->leader = l;
	publish_metastore(m);
	pthread_mutex_unlock(&m->leader_mu);
	if (ret) {
		die_status("replicating the segment table", ret);
		return ret;
	}
	kvf_metrics_set_repl(m->metrics, repl_stats, m);
	printf("kvforge-master: promoted: engine opened from the replicated "
	       "journal in %.1f ms\n",
	       (double)(kvf__now_ns() - t0) / 1e6);
	return KVF_OK;
}

static void stop_rpc(struct master *m);

/* Stop the leader's replication (the RPC threads are stopped). */
static void drop_leader(struct master *m)
{
	struct kvf_repl_leader *l;

	pthread_mutex_lock(&m->leader_mu);
	l = m->leader;
	m->leader = NULL;
	pthread_mutex_unlock(&m->leader_mu);
	kvf_repl_lead_stop(l);
}

/*
 * With HA, standing by: hold the RPC port (master/port_claim.h), so the
 * port a standby will serve on is its own before it can be elected.
 * @must: at start-up and before a promotion, a port taken is the
 * caller's error; on leaving the lead it is only logged, and the next
 * promotion tries again first.
 */
static int hold_rpc_port(struct master *m, bool must)
{
	const struct kvf_master_flags *f = &m->flags;
	uint16_t port = kvf_flags_rpc_port(f);
	int ret;

	if (m->port_fd >= 0)
		return KVF_OK;
	ret = kvf_port_claim(f->rpc_address, port, &m->port_fd);
	if (ret)
		fprintf(stderr,
			"kvforge-master: cannot hold the RPC port %s:%u for "
			"when this standby leads: %s%s\n",
			f->rpc_address, port, kvf_strerror(ret),
			must ? "" : " (tried again before a promotion)");
	return must ? ret : KVF_OK;
}

/* Leader -> standby: nothing may wait for standbys; the port held again. */
static void demote(struct master *m)
{
	kvf_repl_lead_abort(m->leader);
	stop_rpc(m);
	hold_rpc_port(m, false);
	kvf_metrics_set_repl(m->metrics, NULL, NULL);
	drop_leader(m);
	close_engine(m);
}

static int start_ha(struct master *m)
{
	int ret;

	m->ha_opts.may_campaign = may_campaign;
	m->ha_opts.campaign_ctx = m;
	ret = kvf_ha_start(&m->ha_opts, &m->ha);

	if (ret) {
		die_status("starting the election (--etcd_endpoints?)", ret);
		return ret;
	}
	kvf_metrics_set_ha(m->metrics, m->ha); /* /health shows the role */
	printf("kvforge-master: HA on, publishing %s\n", m->advertise);
	fflush(stdout);
	return KVF_OK;
}

/* HA: serve exactly while the election allows it. */
static int follow_ha(struct master *m)
{
	bool may = kvf_ha_may_serve(m->ha);

	if (may && !m->loop && kvf__now_ns() >= m->promote_after) {
		int ret;

		printf("kvforge-master: leading, view version %llu\n",
		       (unsigned long long)kvf_ha_view_version(m->ha));
		/* the port first: a master that cannot serve fails before
		 * its promotion publishes anything of the new view */
		ret = hold_rpc_port(m, true);
		if (!ret)
			ret = promote(m);
		if (!ret)
			ret = KVF__FAULT(promote_late_fault());
		if (!ret)
			ret = start_rpc(m);
		if (!ret)
			return KVF_OK;
		/* The RPC port was taken, the engine did not open, or the
		 * lease ran out meanwhile: leading without serving would keep
		 * every other standby from taking over. Stand aside for a
		 * while, then campaign again like any standby. */
		fprintf(stderr,
			"kvforge-master: promotion failed (%s): "
			"stepping aside for %u s\n",
			kvf_strerror(ret), STEP_ASIDE_TTLS * m->ha_opts.ttl_s);
		/* Past the publication of this view's sync set (a leader
		 * exists), which names this master alone: the others may
		 * campaign only once they are in it, and with nothing of the
		 * view acknowledged they join it as soon as they follow. */
		if (m->leader && kvf_ha_may_serve(m->ha))
			kvf_repl_lead_await_set(m->leader);
		demote(m);
		kvf_ha_step_aside(m->ha, (uint64_t)STEP_ASIDE_TTLS *
						 m->ha_opts.ttl_s *
						 KVF__NS_PER_SEC);
		m->promote_after = kvf__now_ns() + KVF__NS_PER_SEC;
		return start_follower(m);
	}
	if (!may && m->loop) {
		demote(m);
		printf("kvforge-master: not the leader any more: RPC port "
		       "closed\n");
		fflush(stdout);
		return start_follower(m);
	}
	return KVF_OK;
}

/* Wait for SIGINT/SIGTERM; sweep the registry once a second; with HA,
 * follow the election. */
static int serve(struct master *m, const sigset_t *sigs)
{
	uint64_t sweep_at = kvf__now_ns() + KVF__NS_PER_SEC;

	for (;;) {
		struct timespec tick = {.tv_sec = m->ha ? 0 : 1,
					.tv_nsec = m->ha ? 50000000 : 0};
		int sig = sigtimedwait(sigs, NULL, &tick);

		if (sig == SIGINT || sig == SIGTERM) {
			fprintf(stderr, "kvforge-master: %s, shutting down\n",
				strsignal(sig));
			return KVF_OK;
		}
		if (m->ha && follow_ha(m))
			return KVF_ERR_IO;
		if (kvf__now_ns() < sweep_at)
			continue;
		sweep_at = kvf__now_ns() + KVF__NS_PER_SEC;
		if (m->registry && kvf_registry_sweep(m->registry))
			fprintf(stderr, "kvforge-master: warning: could not "
					"persist the segment table\n");
	}
}

static void shutdown_master(struct master *m)
{
	kvf_http_stop(m->http_metrics);
	/* the answers in flight are sent (or not) first: they may be
	 * waiting for the sync standbys, which are still here */
	stop_rpc(m);
	if (m->port_fd >= 0)
		close(m->port_fd);
	m->port_fd = -1;
	/* the hand-over: every standby has every record before the lease
	 * is revoked, so the one that takes over lacks nothing */
	kvf_repl_lead_drain(m->leader);
	kvf_repl_lead_abort(m->leader);
	/* after the port closed: revokes the lease */
	kvf_ha_stop(m->ha);
	drop_leader(m);
	stop_follower(m, NULL);
	/* after the follower, which writes into its store */
	kvf_http_stop(m->http_metadata);
	close_engine(m);
	kvf_stallclock_free(m->stall);
	kvf_metrics_free(m->metrics);
	pthread_mutex_destroy(&m->follower_mu);
	pthread_mutex_destroy(&m->leader_mu);
}

int main(int argc, char **argv)
{
	struct master m = {.abi = NULL, .port_fd = -1};
	sigset_t sigs;
	char err[512];
	int ret;

	kvf_flags_defaults(&m.flags);
	ret = kvf_flags_parse(&m.flags, argc, argv, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "kvforge-master: %s (see --help)\n", err);
		return 2;
	}
	if (m.flags.help) {
		kvf_flags_help(stdout);
		return 0;
	}
	if (pick_abi(&m))
		return 2;
	if (m.flags.enable_ha) {
		struct kvf_config cfg;

		if (kvf_flags_ha_options(&m.flags, &m.ha_opts, m.advertise, err,
					 sizeof(err)) ||
		    kvf_flags_engine_config(&m.flags, &cfg, err,
					    sizeof(err)) ||
		    kvf_flags_repl_options(&m.flags, &cfg, m.advertise,
					   &m.repl_opts, m.repl_host, m.token,
					   err, sizeof(err))) {
			fprintf(stderr, "kvforge-master: %s\n", err);
			return 2;
		}
		m.repl_opts.state_fn = apply_state;
		m.repl_opts.state_ctx = &m;
	}
	pthread_mutex_init(&m.follower_mu, NULL);
	pthread_mutex_init(&m.leader_mu, NULL);
	m.main_thread = pthread_self();
	/* Signals are taken by the main thread only: block them before any
	 * thread (engine, loop, HTTP) is created so all inherit the mask. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);

	ret = kvf_metrics_new(&m.metrics);
	if (ret) {
		die_status("creating metrics", ret);
		return 1;
	}
	ret = start_stallclock(&m);
	if (!ret && m.flags.enable_ha) {
		(void)KVF__FAULT(promote_fault_arm());
		/* the follower imports the leader's metadata store */
		ret = hold_rpc_port(&m, true);
		if (!ret)
			ret = start_metadata(&m);
		if (!ret)
			ret = start_follower(&m);
		if (!ret)
			ret = start_ha(&m);
		if (!ret)
			ret = start_metrics(&m); /* after the HA it shows */
	} else if (!ret) {
		ret = open_engine(&m);
		if (!ret)
			ret = start_rpc(&m);
		if (!ret)
			ret = start_metrics(&m);
		if (!ret)
			ret = start_metadata(&m);
	}
	if (!ret)
		ret = serve(&m, &sigs);
	shutdown_master(&m);
	return ret ? 1 : 0;
}
