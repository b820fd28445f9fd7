/* SPDX-License-Identifier: MIT */
/*
 * tools/bench/durability.c - what journaling costs the put path.
 *
 * put_start + put_end throughput of HiCache-shaped objects (keys from
 * bench_hicache_key(), 1-4 MB values, 16 segments) under each durability
 * mode (none, bounded, strict) with 1 and 2 threads, all in one run. Every
 * configuration runs once per round on a fresh engine and a fresh data
 * directory (o->data_dir/<mode>-<threads>t), configurations interleaved
 * within a round, in reverse order every other round (ABBA), so the
 * machine's drift hits them alike; a configuration's figures are those
 * of its median round. The ratios are paired: the median over rounds of
 * each round's ratio (bounded and none of one round ran back to back),
 * which the machine's slower drift does not move; the ratios of the
 * medians are reported too (*_of_medians).
 *
 * STRICT syncs every batch (~0.1 ms each here), so it puts at most
 * STRICT_CAP objects per run; the others put o->objects.
 *
 * After each round's configurations, the group-commit probe
 * (syncprobe.c) runs with 1 and 2 threads in o->data_dir: callers whose
 * CPU work per batch is what strict/1t spent beside its syncs in that
 * round, the same frame size and the cheapest possible group sync. Its
 * 2-thread/1-thread ratio is the ceiling strict_2t_vs_1t can reach on
 * this machine.
 *
 * Results: "<mode>/<threads>t".{keys_per_sec, ns_per_key, p50_us, p99_us}
 * (latency per batch of put_start + put_end; for bounded and strict also
 * write_bytes_per_put, the storage bytes the run dirtied from the first
 * put through close, procio.c) and the flat ratios
 * bounded_vs_none (1 thread) and strict_2t_vs_1t, and the same as ratios
 * of the medians: bounded_vs_none_of_medians, strict_2t_vs_1t_of_medians;
 * "syncprobe/<threads>t".{keys_per_sec, sync_us, batches_per_sync,
 * work_us} and strict_2t_vs_1t_ceiling (paired, like the others).
 */
#include "config.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tools/bench/bench.h"
#include "tools/bench/syncprobe.h"

#define KEY_CAP 96
#define STRICT_CAP 200000ULL
#define NR_MODES 3
#define NR_THREADS 2
/* Batches of the probe's calibration run (its own cost per batch). */
#define PROBE_CAL_BATCHES 300
/* Encoded bytes per put record in a STRICT frame (docs/journal.md). */
#define PROBE_RECORD_BYTES 96

static const enum kvf_durability modes[NR_MODES] = {
	KVF_DURABILITY_NONE, KVF_DURABILITY_BOUNDED, KVF_DURABILITY_STRICT
};
static const char *const mode_names[NR_MODES] = { "none", "bounded",
						   "strict" };

/* One configuration's keys and per-round measurements. */
struct dconf {
	int mode; /* index into modes[] */
	unsigned threads;
	uint64_t n;   /* puts per run */
	char *keybuf;
	struct kvf_key *keys;
	uint64_t *sizes;
	double *kps;        /* per round */
	uint64_t *ns;       /* per round */
	uint64_t *written;  /* per round: storage bytes, or BENCH_NO_IO */
	double **lat_us;    /* per round: per-batch latencies */
	size_t *nr_lat;     /* per round */
	uint64_t errors;
};

struct dworker {
	pthread_t thread;
	struct kvf_engine *e;
	const struct kvf_key *keys;
	const uint64_t *sizes;
	size_t n;
	uint32_t batch;
	double *lat_us;
	size_t nr_lat;
	uint64_t errors;
	pthread_barrier_t *start;
	const struct bench_opts *o;
	unsigned idx;
};

static void *dworker_main(void *arg)
{
	struct dworker *w = arg;
	struct kvf_put_config cfg = { .replica_num = 1 };
	struct kvf_replicas *out = calloc(w->batch, sizeof(*out));
	enum kvf_status *st = calloc(w->batch, sizeof(*st));

	kvf_thread_register();
	bench_pin_thread(w->o, w->idx);
	pthread_barrier_wait(w->start);
	for (size_t x = 0; out && st && x < w->n; x += w->batch) {
		size_t n = w->n - x < w->batch ? w->n - x : w->batch;
		uint64_t t0 = bench_now_ns();
		int ret;

		ret = kvf_batch_put_start(w->e, 1, w->keys + x, w->sizes + x,
					  n, &cfg, out, st);
		if (ret == KVF_OK)
			ret = kvf_batch_put_end(w->e, 1, w->keys + x, n, st);
		w->lat_us[w->nr_lat++] = (double)(bench_now_ns() - t0) / 1e3;
		w->errors += ret != KVF_OK;
	}
	free(out);
	free(st);
	kvf_thread_unregister();
	return NULL;
}

static int conf_init(struct dconf *c, const struct bench_opts *o, int mode,
		     unsigned threads, uint64_t *rng)
{
	size_t batches;

	c->mode = mode;
	c->threads = threads;
	c->n = o->objects;
	if (modes[mode] == KVF_DURABILITY_STRICT && c->n > STRICT_CAP)
		c->n = STRICT_CAP;
	batches = c->n / o->batch + threads + 1;
	c->keybuf = malloc(c->n * KEY_CAP);
	c->keys = calloc(c->n, sizeof(*c->keys));
	c->sizes = calloc(c->n, sizeof(*c->sizes));
	c->kps = calloc(o->rounds, sizeof(*c->kps));
	c->ns = calloc(o->rounds, sizeof(*c->ns));
	c->written = calloc(o->rounds, sizeof(*c->written));
	c->nr_lat = calloc(o->rounds, sizeof(*c->nr_lat));
	c->lat_us = calloc(o->rounds, sizeof(*c->lat_us));
	if (!c->keybuf || !c->keys || !c->sizes || !c->kps || !c->ns ||
	    !c->written || !c->nr_lat || !c->lat_us)
		return KVF_ERR_NO_MEMORY;
	for (uint32_t r = 0; r < o->rounds; r++) {
		c->lat_us[r] = calloc(batches, sizeof(double));
		if (!c->lat_us[r])
			return KVF_ERR_NO_MEMORY;
	}
	for (uint64_t i = 0; i < c->n; i++) {
		char *k = c->keybuf + i * KEY_CAP;

		c->keys[i].data = k;
		c->keys[i].len = bench_hicache_key(k, KEY_CAP, i);
		c->sizes[i] = (1u << 20) + (bench_rand(rng) % 768) * 4096;
	}
	return KVF_OK;
}

static void conf_free(struct dconf *c, uint32_t rounds)
{
	for (uint32_t r = 0; c->lat_us && r < rounds; r++)
		free(c->lat_us[r]);
	free(c->lat_us);
	free(c->nr_lat);
	free(c->ns);
	free(c->written);
	free(c->kps);
	free(c->sizes);
	free(c->keys);
	free(c->keybuf);
}

/* One timed run of @c on a fresh engine; fills round @r. */
static int run_conf(const struct bench_opts *o, struct dconf *c, uint32_t r)
{
	struct dworker w[NR_THREADS];
	struct kvf_config cfg;
	struct kvf_engine *e;
	pthread_barrier_t start;
	char dir[4096];
	uint64_t t0, ns, io0 = BENCH_NO_IO;
	int ret;

	snprintf(dir, sizeof(dir), "%s/%s-%ut", o->data_dir,
		 mode_names[c->mode], c->threads);
	bench_engine_config(o, &cfg);
	cfg.durability = modes[c->mode];
	cfg.data_dir = cfg.durability == KVF_DURABILITY_NONE ? NULL : dir;
	cfg.expected_objects = c->n;
	if (cfg.data_dir) {
		mkdir(o->data_dir, 0755);
		mkdir(dir, 0755);
		bench_wipe_dir(o, dir);
	}
	ret = kvf_engine_open(&cfg, &e);
	if (ret)
		return ret;
	ret = bench_mount_segments(e, c->n, "durability");
	if (ret)
		goto out;
	/* From here: not the side log files' creation at open. */
	io0 = bench_write_bytes();
	pthread_barrier_init(&start, NULL, c->threads + 1);
	for (unsigned t = 0; t < c->threads; t++) {
		uint64_t lo = c->n * t / c->threads;
		uint64_t hi = c->n * (t + 1) / c->threads;

		w[t] = (struct dworker){ .e = e, .keys = c->keys + lo,
					 .sizes = c->sizes + lo,
					 .n = (size_t)(hi - lo),
					 .batch = o->batch,
					 .lat_us = c->lat_us[r] + c->nr_lat[r],
					 .start = &start,
					 .o = o,
					 .idx = t };
		/* each thread writes its own slice of the latency array */
		c->nr_lat[r] += (hi - lo + o->batch - 1) / o->batch;
		pthread_create(&w[t].thread, NULL, dworker_main, &w[t]);
	}
	t0 = bench_now_ns();
	pthread_barrier_wait(&start);
	for (unsigned t = 0; t < c->threads; t++) {
		pthread_join(w[t].thread, NULL);
		c->errors += w[t].errors;
	}
	ns = bench_now_ns() - t0;
	pthread_barrier_destroy(&start);
	c->ns[r] = ns;
	c->kps[r] = (double)c->n * 1e9 / (double)ns;
out:
	kvf_engine_close(e);
	/* The close's moves and syncs are the run's too. */
	c->written[r] = bench_written_since(io0);
	return ret;
}

/* The group-commit probe's per-round figures, for 1 and 2 threads. */
struct dprobe {
	double kps[NR_THREADS][64];
	double sync_us[NR_THREADS][64];
	double per_sync[NR_THREADS][64];
	double work_us[64];
};

/*
 * Round @r of the probe: calibrate its own cost per batch with no work,
 * give each batch the CPU time strict/1t (@strict1) spent beside that,
 * then run 1 and 2 threads (in alternating order).
 */
static int run_probe(const struct bench_opts *o, const struct dconf *strict1,
		     struct dprobe *p, uint32_t r)
{
	size_t frame = (size_t)o->batch * PROBE_RECORD_BYTES + 32;
	uint64_t batches = strict1->n / o->batch, per_batch, own, work = 0;
	struct bench_syncprobe m;
	int ret;

	ret = bench_syncprobe_run(o->data_dir, 1, 0, frame, PROBE_CAL_BATCHES,
				  &m);
	if (ret)
		return ret;
	per_batch = strict1->ns[r] / (batches ? batches : 1);
	own = m.ns / PROBE_CAL_BATCHES;
	if (per_batch > own)
		work = per_batch - own;
	p->work_us[r] = (double)work / 1e3;
	for (unsigned k = 0; k < NR_THREADS; k++) {
		unsigned t = r & 1 ? NR_THREADS - k : k + 1;

		ret = bench_syncprobe_run(o->data_dir, t, work, frame,
					  batches, &m);
		if (ret)
			return ret;
		p->kps[t - 1][r] = (double)(m.batches * o->batch) * 1e9 /
				   (double)m.ns;
		p->sync_us[t - 1][r] = (double)m.sync_ns / 1e3;
		p->per_sync[t - 1][r] = m.syncs ? (double)m.batches /
							  (double)m.syncs :
						  0;
	}
	return 0;
}

/* The median of @n per-round values (left as they are). */
static double median_of(const double *v, uint32_t n)
{
	double q[64];

	memcpy(q, v, n * sizeof(double));
	return bench_quantile(q, n, 0.5);
}

static void record_probe(struct bench_results *res, struct dprobe *p,
			 uint32_t rounds)
{
	double q[64];
	char group[32];

	for (unsigned t = 0; t < NR_THREADS; t++) {
		snprintf(group, sizeof(group), "syncprobe/%ut", t + 1);
		bench_result(res, group, "keys_per_sec",
			     median_of(p->kps[t], rounds));
		bench_result(res, group, "sync_us",
			     median_of(p->sync_us[t], rounds));
		bench_result(res, group, "batches_per_sync",
			     median_of(p->per_sync[t], rounds));
		bench_result(res, group, "work_us",
			     median_of(p->work_us, rounds));
	}
	for (uint32_t r = 0; r < rounds; r++)
		q[r] = p->kps[0][r] > 0 ? p->kps[1][r] / p->kps[0][r] : 0;
	bench_result(res, NULL, "strict_2t_vs_1t_ceiling",
		     bench_quantile(q, rounds, 0.5));
	bench_note(res, "syncprobe: the same work per batch as strict/1t "
			"beside its syncs, a pwrite and the cheapest group "
			"fdatasync (tools/bench/syncprobe.c): what "
			"strict_2t_vs_1t can reach here at best");
}

/* The round whose throughput is the median of @c's rounds. */
static uint32_t median_round(const struct dconf *c, uint32_t rounds)
{
	uint32_t best = 0;

	for (uint32_t r = 0; r < rounds; r++) {
		uint32_t below = 0, equal_before = 0;

		for (uint32_t s = 0; s < rounds; s++) {
			below += c->kps[s] < c->kps[r];
			equal_before += s < r && c->kps[s] == c->kps[r];
		}
		if (below + equal_before == rounds / 2)
			best = r;
	}
	return best;
}

static void record_conf(struct bench_results *res, const struct dconf *c,
			uint32_t rounds)
{
	uint32_t m = median_round(c, rounds);
	char group[32], raw[512];
	size_t off = 0;

	snprintf(group, sizeof(group), "%s/%ut", mode_names[c->mode],
		 c->threads);
	bench_result_op(res, group, c->n, c->ns[m], c->lat_us[m],
			c->nr_lat[m]);
	if (modes[c->mode] != KVF_DURABILITY_NONE &&
	    c->written[m] != BENCH_NO_IO)
		bench_result(res, group, "write_bytes_per_put",
			     (double)c->written[m] / (double)c->n);
	for (uint32_t r = 0; r < rounds && off < sizeof(raw) - 16; r++)
		off += (size_t)snprintf(raw + off, sizeof(raw) - off, " %.0f",
					c->kps[r]);
	bench_note(res, "%-11s %llu puts/run, keys/s per round:%s",
		   group, (unsigned long long)c->n, raw);
	if (c->errors)
		bench_note(res, "warning: %s: %llu batches reported errors",
			   group, (unsigned long long)c->errors);
}

static double median_kps(const struct dconf *c, uint32_t rounds)
{
	return c->kps[median_round(c, rounds)];
}

/* Median over rounds of @a's throughput over @b's in the same round. */
static double paired_ratio(const struct dconf *a, const struct dconf *b,
			   uint32_t rounds)
{
	double q[64];
	uint32_t n = rounds < 64 ? rounds : 64;

	for (uint32_t i = 0; i < n; i++)
		q[i] = b->kps[i] > 0 ? a->kps[i] / b->kps[i] : 0;
	return bench_quantile(q, n, 0.5);
}

int bench_durability(const struct bench_opts *o, struct bench_results *r)
{
	struct dconf conf[NR_MODES * NR_THREADS];
	struct dprobe *probe = calloc(1, sizeof(*probe));
	uint32_t rounds = o->rounds < 64 ? o->rounds : 64;
	uint64_t rng = (o->seed + 1) * 0x9e3779b97f4a7c15ULL;
	char buf[64];
	int ret = KVF_OK;

	memset(conf, 0, sizeof(conf));
	if (!probe)
		return KVF_ERR_NO_MEMORY;
	for (int m = 0; m < NR_MODES && !ret; m++)
		for (unsigned t = 1; t <= NR_THREADS && !ret; t++)
			ret = conf_init(&conf[m * NR_THREADS + t - 1], o, m, t,
					&rng);
	snprintf(buf, sizeof(buf), "%llu",
		 (unsigned long long)(o->objects < STRICT_CAP ? o->objects :
								 STRICT_CAP));
	bench_config(r, "strict_objects", buf);
	snprintf(buf, sizeof(buf), "%u", rounds);
	bench_config(r, "rounds", buf);
	for (uint32_t round = 0; round < rounds && !ret; round++) {
		for (size_t k = 0; k < NR_MODES * NR_THREADS && !ret; k++) {
			size_t i = round & 1 ? NR_MODES * NR_THREADS - 1 - k : k;

			ret = run_conf(o, &conf[i], round);
		}
		if (!ret) {
			int err = run_probe(o, &conf[4], probe, round);

			if (err) {
				fprintf(stderr, "syncprobe in %s: %s\n",
					o->data_dir, strerror(err));
				ret = KVF_ERR_IO;
			}
		}
	}
	if (!ret) {
		for (size_t i = 0; i < NR_MODES * NR_THREADS; i++)
			record_conf(r, &conf[i], rounds);
		bench_result(r, NULL, "bounded_vs_none",
			     paired_ratio(&conf[2], &conf[0], rounds));
		bench_result(r, NULL, "strict_2t_vs_1t",
			     paired_ratio(&conf[5], &conf[4], rounds));
		bench_result(r, NULL, "bounded_vs_none_of_medians",
			     median_kps(&conf[2], rounds) /
				     median_kps(&conf[0], rounds));
		bench_result(r, NULL, "strict_2t_vs_1t_of_medians",
			     median_kps(&conf[5], rounds) /
				     median_kps(&conf[4], rounds));
		bench_note(r, "strict puts at most %llu objects per run "
			      "(every commit is synced)",
			   (unsigned long long)STRICT_CAP);
		record_probe(r, probe, rounds);
	}
	free(probe);
	for (size_t i = 0; i < NR_MODES * NR_THREADS; i++)
		conf_free(&conf[i], o->rounds);
	return ret;
}
