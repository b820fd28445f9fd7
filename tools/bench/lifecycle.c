/* SPDX-License-Identifier: MIT */
/*
 * tools/bench/lifecycle.c - the "cleanup" and "evict" workloads: what the
 * engine's housekeeping costs, and whether readers notice it.
 *
 * cleanup: N HiCache objects (one replica) over 8 clients; each client
 * mounts 2 segments and its puts prefer them, so each owns N/8 objects.
 * The engine runs on an injected manual clock without the background
 * thread. One reader thread runs batch_get over random surviving objects
 * back to back, recording each batch's latency, first alone (the
 * baseline, as long as the previous round's cleanup took, 1 s in the first
 * round), then while the main thread advances the clock past client_ttl
 * for one client only (the 7 others heartbeat) and calls kvf_engine_tick,
 * which expires that client and unmounts its segments. Each round uses a
 * fresh engine; every metric is the median over the rounds.
 *
 * evict: for each size in the list (positional arguments; default 100000
 * 1000000 4000000), fill a fresh engine (no reads, so no leases), then
 * time --rounds kvf_engine_evict() passes, each asking for the bytes of
 * EVICT_PASS_OBJECTS average objects. A sampled-LRU pass should cost the
 * same at every size.
 *
 * Keys are bench_hicache_key(id); sizes 1 MB + 0..767 pages of 4 KiB (a
 * spread of sizes, so the allocator's trees are exercised). Segments are virtual (only numbers).
 */
#include "config.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "tools/bench/bench.h"

#define KEY_CAP 96
#define NR_CLIENTS 8
#define SEGS_PER_CLIENT 2
#define EVICT_SEGMENTS 16
#define EVICT_PASS_OBJECTS 5000
#define VICTIM 0 /* index of the client that dies */

/* ---- shared helpers ----------------------------------------------------- */

static uint64_t manual_clock(void *ctx)
{
	return atomic_load_explicit((_Atomic uint64_t *)ctx,
				    memory_order_relaxed);
}

static uint64_t object_size(uint64_t *rng)
{
	return (1u << 20) + (bench_rand(rng) % 768) * 4096;
}

static double median(double *v, size_t n)
{
	return bench_quantile(v, n, 0.5);
}

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000ULL),
			       (long)(ns % 1000000000ULL) };

	nanosleep(&ts, NULL);
}

static int mount(struct kvf_engine *e, uint64_t client, uint64_t id,
		 uint64_t size)
{
	char name[32];
	struct kvf_segment_desc d = { .id = id, .name = name,
				      .base = id << 44, .size = size,
				      .endpoint = "10.0.0.1:17812" };

	snprintf(name, sizeof(name), "seg-%llu", (unsigned long long)id);
	return kvf_segment_mount(e, client, &d);
}

/* Room for @objects objects of at most ~4 MB, with slack; at least 1 GiB. */
static uint64_t segment_size(uint64_t objects, unsigned nr_segments)
{
	uint64_t per = objects * (5ULL << 20) / nr_segments;

	return per < (1ULL << 30) ? (1ULL << 30) : per;
}

/*
 * Put objects [0, @n) in batches. Batch b belongs to client
 * b % @nr_clients + 1; with @prefer it asks for that client's segments
 * (ids 2c+1, 2c+2, alternating which comes first).
 */
static int fill(struct kvf_engine *e, const struct bench_opts *o, uint64_t n,
		unsigned nr_clients, bool prefer)
{
	size_t bs = o->batch;
	char *buf = malloc(bs * KEY_CAP);
	struct kvf_key *keys = calloc(bs, sizeof(*keys));
	uint64_t *sizes = calloc(bs, sizeof(*sizes));
	struct kvf_replicas *out = calloc(bs, sizeof(*out));
	enum kvf_status *st = calloc(bs, sizeof(*st));
	uint64_t rng = (o->seed + 7) * 0x9e3779b97f4a7c15ULL | 1;
	int ret = KVF_ERR_NO_MEMORY;

	if (!buf || !keys || !sizes || !out || !st)
		goto out;
	ret = KVF_OK;
	for (uint64_t b = 0; b * bs < n && !ret; b++) {
		uint64_t client = b % nr_clients + 1, lo = b * bs;
		size_t cnt = n - lo < bs ? (size_t)(n - lo) : bs;
		uint64_t pref[2] = { 2 * client - 1, 2 * client };
		struct kvf_put_config pc = { .replica_num = 1 };

		if (prefer) {
			if ((b / nr_clients) % 2) {
				pref[0] = 2 * client;
				pref[1] = 2 * client - 1;
			}
			pc.preferred_segments = pref;
			pc.nr_preferred = 2;
		}
		for (size_t i = 0; i < cnt; i++) {
			keys[i].data = buf + i * KEY_CAP;
			keys[i].len = bench_hicache_key(buf + i * KEY_CAP,
							KEY_CAP, lo + i);
			sizes[i] = object_size(&rng);
		}
		ret = kvf_batch_put_start(e, client, keys, sizes, cnt, &pc, out,
					  st);
		if (!ret)
			ret = kvf_batch_put_end(e, client, keys, cnt, st);
	}
out:
	free(buf);
	free(keys);
	free(sizes);
	free(out);
	free(st);
	return ret;
}

static uint64_t nr_objects(struct kvf_engine *e)
{
	struct kvf_engine_stats s;

	kvf_engine_get_stats(e, &s);
	return s.objects;
}

/* ---- cleanup: the reader ------------------------------------------------ */

enum read_phase { RP_WARMUP, RP_BASELINE, RP_CLEANUP, RP_STOP };

struct lat {
	double *us;
	size_t n, cap;
};

struct reader {
	pthread_t thread;
	struct kvf_engine *e;
	size_t batch;
	/* Keys of the surviving objects, KEY_CAP bytes each. */
	const char *pool;
	const uint16_t *pool_len;
	uint64_t pool_n, step, x;
	_Atomic int phase;
	struct lat lat[2]; /* baseline, cleanup */
	/* Involuntary context switches of the reader at each phase start. */
	long nivcsw[RP_STOP + 1];
	uint64_t errors;
	_Atomic uint64_t warm; /* batches done in warm-up */
	int err;
};

static int lat_push(struct lat *l, double us)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 65536;
		double *v = realloc(l->us, cap * sizeof(*v));

		if (!v)
			return KVF_ERR_NO_MEMORY;
		l->us = v;
		l->cap = cap;
	}
	l->us[l->n++] = us;
	return KVF_OK;
}

/* Times this thread was preempted so far. */
static long preemptions(void)
{
	struct rusage ru;

	return getrusage(RUSAGE_THREAD, &ru) ? 0 : ru.ru_nivcsw;
}

static void *reader_main(void *arg)
{
	struct reader *rd = arg;
	struct kvf_key *keys = calloc(rd->batch, sizeof(*keys));
	struct kvf_replicas *out = calloc(rd->batch, sizeof(*out));
	enum kvf_status *st = calloc(rd->batch, sizeof(*st));
	int ph, last = -1;

	kvf_thread_register();
	if (!keys || !out || !st) {
		rd->err = KVF_ERR_NO_MEMORY;
		goto out;
	}
	while ((ph = atomic_load(&rd->phase)) != RP_STOP) {
		uint64_t t0;
		int ret;

		if (ph != last)
			rd->nivcsw[ph] = preemptions();
		last = ph;
		/* Consecutive x: distinct keys within a batch. */
		for (size_t i = 0; i < rd->batch; i++) {
			uint64_t k = rd->x++ * rd->step % rd->pool_n;

			keys[i].data = rd->pool + k * KEY_CAP;
			keys[i].len = rd->pool_len[k];
		}
		t0 = bench_now_ns();
		ret = kvf_batch_get(rd->e, keys, rd->batch, out, st, NULL);
		if (ret != KVF_OK)
			rd->errors++;
		if (ph == RP_WARMUP)
			atomic_fetch_add(&rd->warm, 1);
		if (ph != RP_WARMUP &&
		    lat_push(&rd->lat[ph - RP_BASELINE],
			     (double)(bench_now_ns() - t0) / 1e3)) {
			rd->err = KVF_ERR_NO_MEMORY;
			break;
		}
	}
	rd->nivcsw[RP_STOP] = preemptions();
out:
	free(keys);
	free(out);
	free(st);
	kvf_thread_unregister();
	return NULL;
}

/* The keys of every object not owned by client VICTIM + 1. */
static int make_pool(const struct bench_opts *o, char **pool,
		     uint16_t **len, uint64_t *n)
{
	uint64_t k = 0;

	*pool = malloc(o->objects * KEY_CAP);
	*len = calloc(o->objects, sizeof(**len));
	if (!*pool || !*len)
		return KVF_ERR_NO_MEMORY;
	for (uint64_t id = 0; id < o->objects; id++) {
		if ((id / o->batch) % NR_CLIENTS == VICTIM)
			continue;
		(*len)[k] = (uint16_t)bench_hicache_key(*pool + k * KEY_CAP,
							KEY_CAP, id);
		k++;
	}
	*n = k;
	return k ? KVF_OK : KVF_ERR_INVALID_PARAMS;
}

/* ---- cleanup: one round --------------------------------------------------- */

enum cm {
	CM_SECONDS,
	CM_CLEANED,
	CM_P99_DURING,
	CM_P99_WITHOUT,
	CM_MAX_DURING,
	CM_P50_DURING,
	CM_P50_WITHOUT,
	CM_BATCHES_DURING,
	CM_PREEMPT_DURING,
	CM_PREEMPT_WITHOUT,
	NR_CM
};

static const char *const cm_names[NR_CM] = {
	"cleanup_seconds",          "cleaned_objects",
	"get_p99_us_during_cleanup", "get_p99_us_without_cleanup",
	"get_max_us_during_cleanup", "get_p50_us_during_cleanup",
	"get_p50_us_without_cleanup", "get_batches_during_cleanup",
	"reader_preemptions_during_cleanup",
	"reader_preemptions_without_cleanup",
};

struct cleanup {
	const struct bench_opts *o;
	struct bench_results *r;
	char *pool;
	uint16_t *pool_len;
	uint64_t pool_n;
	uint64_t baseline_ns;
	_Atomic uint64_t now;
};

static int cleanup_setup(struct cleanup *c, struct kvf_engine **out)
{
	struct kvf_config cfg;
	uint64_t size = segment_size(c->o->objects,
				     NR_CLIENTS * SEGS_PER_CLIENT);
	int ret;

	bench_wipe_dir(c->o, c->o->data_dir);
	bench_engine_config(c->o, &cfg);
	cfg.background = false;
	cfg.clock = manual_clock;
	cfg.clock_ctx = &c->now;
	cfg.client_ttl_ms = 10000;
	atomic_store(&c->now, 1000000000ULL);
	ret = kvf_engine_open(&cfg, out);
	if (ret)
		return ret;
	for (uint64_t cl = 1; cl <= NR_CLIENTS && !ret; cl++)
		for (uint64_t s = 0; s < SEGS_PER_CLIENT && !ret; s++)
			ret = mount(*out, cl, SEGS_PER_CLIENT * (cl - 1) + s + 1,
				    size);
	if (!ret)
		ret = fill(*out, c->o, c->o->objects, NR_CLIENTS, true);
	return ret;
}

/* Expire client VICTIM + 1 through kvf_engine_tick; returns its time. */
static int expire_victim(struct cleanup *c, struct kvf_engine *e,
			 uint64_t *ns)
{
	uint64_t t0;
	int ret;

	atomic_fetch_add(&c->now, 10001ULL * 1000 * 1000);
	for (uint64_t cl = 1; cl <= NR_CLIENTS; cl++) {
		if (cl == VICTIM + 1)
			continue;
		ret = kvf_client_heartbeat(e, cl);
		if (ret)
			return ret;
	}
	t0 = bench_now_ns();
	ret = kvf_engine_tick(e);
	*ns = bench_now_ns() - t0;
	return ret;
}

static int cleanup_round(struct cleanup *c, unsigned round, double *m)
{
	struct reader rd = { 0 };
	struct kvf_engine *e = NULL;
	uint64_t before, ns = 0;
	int ret;

	ret = cleanup_setup(c, &e);
	if (ret)
		goto out;
	for (uint64_t cl = 1; cl <= NR_CLIENTS && !ret; cl++)
		ret = kvf_client_heartbeat(e, cl);
	if (ret)
		goto out;
	before = nr_objects(e);
	rd.e = e;
	rd.batch = c->o->batch;
	rd.pool = c->pool;
	rd.pool_len = c->pool_len;
	rd.pool_n = c->pool_n;
	rd.step = bench_coprime_step(c->pool_n);
	rd.x = (c->o->seed + round) * 104729;
	atomic_store(&rd.phase, RP_WARMUP);
	if (pthread_create(&rd.thread, NULL, reader_main, &rd)) {
		ret = KVF_ERR_NO_MEMORY;
		goto out;
	}
	/* Warm up for 100 ms and at least 100 batches (a busy machine may
	 * not run a new thread at once). */
	sleep_ns(100000000ULL);
	while (atomic_load(&rd.warm) < 100)
		sleep_ns(1000000ULL);
	atomic_store(&rd.phase, RP_BASELINE);
	sleep_ns(c->baseline_ns);
	atomic_store(&rd.phase, RP_CLEANUP);
	ret = expire_victim(c, e, &ns);
	atomic_store(&rd.phase, RP_STOP);
	pthread_join(rd.thread, NULL);
	if (!ret)
		ret = rd.err;
	if (ret)
		goto out;
	if (rd.errors)
		bench_note(c->r, "warning: round %u: %llu get batches failed",
			   round, (unsigned long long)rd.errors);
	m[CM_SECONDS] = (double)ns / 1e9;
	m[CM_CLEANED] = (double)(before - nr_objects(e));
	m[CM_P99_DURING] = bench_quantile(rd.lat[1].us, rd.lat[1].n, 0.99);
	m[CM_P50_DURING] = bench_quantile(rd.lat[1].us, rd.lat[1].n, 0.50);
	m[CM_MAX_DURING] = bench_quantile(rd.lat[1].us, rd.lat[1].n, 1.0);
	m[CM_P99_WITHOUT] = bench_quantile(rd.lat[0].us, rd.lat[0].n, 0.99);
	m[CM_P50_WITHOUT] = bench_quantile(rd.lat[0].us, rd.lat[0].n, 0.50);
	m[CM_BATCHES_DURING] = (double)rd.lat[1].n;
	m[CM_PREEMPT_DURING] =
		(double)(rd.nivcsw[RP_STOP] - rd.nivcsw[RP_CLEANUP]);
	m[CM_PREEMPT_WITHOUT] =
		(double)(rd.nivcsw[RP_CLEANUP] - rd.nivcsw[RP_BASELINE]);
	bench_note(c->r,
		   "round %u: cleanup %.3f s, %.0f objects; get p99 %.1f us "
		   "during (%zu batches) vs %.1f us without (%zu batches, "
		   "%.3f s); max %.1f us; reader preempted %.0f / %.0f times",
		   round, m[CM_SECONDS], m[CM_CLEANED], m[CM_P99_DURING],
		   rd.lat[1].n, m[CM_P99_WITHOUT], rd.lat[0].n,
		   (double)c->baseline_ns / 1e9, m[CM_MAX_DURING],
		   m[CM_PREEMPT_DURING], m[CM_PREEMPT_WITHOUT]);
	/* The next baseline lasts as long as this cleanup did. */
	c->baseline_ns = ns > 50000000ULL ? ns : 50000000ULL;
out:
	free(rd.lat[0].us);
	free(rd.lat[1].us);
	kvf_engine_close(e);
	return ret;
}

int bench_cleanup(const struct bench_opts *o, struct bench_results *r)
{
	struct cleanup c = { .o = o, .r = r, .baseline_ns = 1000000000ULL };
	double *m = calloc((size_t)o->rounds * NR_CM, sizeof(*m));
	double *col = calloc(o->rounds, sizeof(*col));
	int ret = KVF_ERR_NO_MEMORY;

	if (!m || !col)
		goto out;
	ret = make_pool(o, &c.pool, &c.pool_len, &c.pool_n);
	for (unsigned i = 0; i < o->rounds && !ret; i++)
		ret = cleanup_round(&c, i, m + (size_t)i * NR_CM);
	if (ret)
		goto out;
	for (int k = 0; k < NR_CM; k++) {
		for (unsigned i = 0; i < o->rounds; i++)
			col[i] = m[(size_t)i * NR_CM + k];
		bench_result(r, NULL, cm_names[k], median(col, o->rounds));
	}
out:
	free(c.pool);
	free(c.pool_len);
	free(m);
	free(col);
	return ret;
}

/* ---- evict ----------------------------------------------------------------- */

static const uint64_t default_sizes[] = { 100000, 1000000, 4000000 };

static int evict_size(const struct bench_opts *o, struct bench_results *r,
		      uint64_t n, double *ms, double *evicted)
{
	struct bench_opts so = *o;
	struct kvf_engine_stats s;
	struct kvf_engine *e = NULL;
	struct kvf_config cfg;
	uint64_t size = segment_size(n, EVICT_SEGMENTS), bytes;
	double *t = calloc(o->rounds, sizeof(*t));
	double *cnt = calloc(o->rounds, sizeof(*cnt));
	int ret = KVF_ERR_NO_MEMORY;

	if (!t || !cnt)
		goto out;
	so.objects = n;
	bench_wipe_dir(o, o->data_dir);
	bench_engine_config(&so, &cfg);
	cfg.background = false;
	ret = kvf_engine_open(&cfg, &e);
	for (uint64_t i = 0; i < EVICT_SEGMENTS && !ret; i++)
		ret = mount(e, 1, i + 1, size);
	if (!ret)
		ret = fill(e, &so, n, 1, false);
	if (ret)
		goto out;
	kvf_engine_get_stats(e, &s);
	bytes = EVICT_PASS_OBJECTS * (s.used_bytes / (s.objects ? s.objects : 1));
	for (unsigned i = 0; i < o->rounds && !ret; i++) {
		uint64_t freed = 0, ev = 0, t0 = bench_now_ns();

		ret = kvf_engine_evict(e, bytes, &freed, &ev);
		t[i] = (double)(bench_now_ns() - t0) / 1e6;
		cnt[i] = (double)ev;
		bench_note(r, "%llu objects, pass %u: %.2f ms, %llu evicted, "
			   "%.1f MB freed", (unsigned long long)n, i, t[i],
			   (unsigned long long)ev, (double)freed / 1e6);
	}
	*ms = median(t, o->rounds);
	*evicted = median(cnt, o->rounds);
out:
	kvf_engine_close(e);
	free(t);
	free(cnt);
	return ret;
}

int bench_evict(const struct bench_opts *o, struct bench_results *r)
{
	size_t nr = o->argc ? (size_t)o->argc :
			      sizeof(default_sizes) / sizeof(default_sizes[0]);
	double ms, evicted = 0;
	char name[64];
	int ret = KVF_OK;

	for (size_t i = 0; i < nr && !ret; i++) {
		uint64_t n = o->argc ? strtoull(o->argv[i], NULL, 10) :
				       default_sizes[i];

		if (!n)
			return KVF_ERR_INVALID_PARAMS;
		ret = evict_size(o, r, n, &ms, &evicted);
		if (ret)
			break;
		snprintf(name, sizeof(name), "evict_pass_ms_%llu",
			 (unsigned long long)n);
		bench_result(r, NULL, name, ms);
	}
	if (!ret)
		bench_result(r, NULL, "evicted_per_pass", evicted);
	return ret;
}
