/* SPDX-License-Identifier: MIT */
/*
 * tools/bench/placement.c - the "placement" workload: replica placement
 * strategies over a virtual pool (16 segments of 64 GiB; nothing is mapped,
 * the allocators only keep numbers).
 *
 * For each size mix and strategy, one run:
 *  1. fill the pool to 90% of its capacity;
 *  2. churn: free random objects whenever the pool is at or above 90%, then
 *     place one new object; this fragments the pool the way a cache does.
 *     Each kvf__place() call is timed (rdtsc where available);
 *  3. fill without freeing until the first NO_SPACE: the utilisation at that
 *     moment is what fragmentation cost.
 * The size sequence depends only on the seed, mix and round, so every
 * strategy sees the same requests. Strategies run interleaved (rotated per
 * round) so machine noise hits all of them; each metric is the median over
 * the rounds.
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define HAVE_TSC 1
#endif

#include <kvforge/status.h>

#include "alloc/placement.h"
#include "tools/bench/bench.h"

#define NR_SEGS 16
#define SEG_SIZE (64ULL << 30)
#define ALIGNMENT 64
#define FILL 0.90

enum { MIX_UNIFORM, MIX_BIMODAL, MIX_WIDE, NR_MIXES };
enum { NR_STRATS = 3 };

static const char *const mix_names[NR_MIXES] = { "uniform", "bimodal",
						 "wide" };

static const struct {
	const char *name;
	enum kvf_placement_strategy st;
} strats[NR_STRATS] = {
	{ "random", KVF_PLACEMENT_RANDOM },
	{ "free_ratio_first", KVF_PLACEMENT_FREE_RATIO_FIRST },
	{ "fragmentation_aware", KVF_PLACEMENT_FRAGMENTATION_AWARE },
};

enum metric {
	M_UTIL,
	M_FAIL_RATE,
	M_FIRST_CHOICE,
	M_FALLBACKS,
	M_ALLOCS_PER_SEC,
	M_P50,
	M_P99,
	NR_METRICS
};

static const char *const metric_names[NR_METRICS] = {
	"utilisation_at_first_failure", "churn_failure_rate",
	"first_choice_rate",            "fallbacks",
	"allocs_per_sec",               "ns_per_alloc_p50",
	"ns_per_alloc_p99",
};

static uint64_t mix_size(int mix, uint64_t *rng)
{
	uint64_t r = bench_rand(rng);

	switch (mix) {
	case MIX_UNIFORM:
		return 4ULL << 20;
	case MIX_BIMODAL:
		/* SGLang-like KV pages: 3.12 MB and 643 KB, 3:1. */
		return (r & 3) ? 3120000 : 643000;
	default:
		/* Log-uniform over [64 KiB, 8 MiB]. */
		return (uint64_t)exp2(16.0 + 7.0 * (double)(r >> 11) /
						     (double)(1ULL << 53));
	}
}

/* ---- timing: rdtsc calibrated against the monotonic clock ---- */

static inline uint64_t ticks(void)
{
#ifdef HAVE_TSC
	return __rdtsc();
#else
	return bench_now_ns();
#endif
}

struct clockcal {
	double ns_per_tick;
	double overhead_ticks; /* median cost of an empty ticks() pair */
};

static void calibrate(struct clockcal *c)
{
	uint64_t t0 = ticks(), n0 = bench_now_ns(), t1, n1;
	double d[1001];

	do {
		n1 = bench_now_ns();
	} while (n1 - n0 < 20000000);
	t1 = ticks();
	c->ns_per_tick = (double)(n1 - n0) / (double)(t1 - t0);
	for (int i = 0; i < 1001; i++) {
		uint64_t a = ticks();

		d[i] = (double)(ticks() - a);
	}
	c->overhead_ticks = bench_quantile(d, 1001, 0.5);
}

/* ---- one run ---- */

struct obj {
	uint32_t seg;
	uint64_t off, size;
};

struct run {
	struct kvf__segalloc *segs[NR_SEGS];
	struct obj *live;
	size_t nr_live, cap_live;
	uint64_t used, capacity;
	enum kvf_placement_strategy st;
	uint64_t size_rng, free_rng;
	struct kvf__placer placer;
	struct kvf__park_hint hint; /* where the segments park blocks */
};

static int place(struct run *w, uint64_t size, struct kvf__place_result *res)
{
	struct kvf__place_request req = { .size = size, .replica_num = 1 };
	int rc = kvf__place(w->st, w->segs, NR_SEGS, &req, &w->placer, res);

	if (rc != KVF_OK)
		return rc;
	if (w->nr_live == w->cap_live) {
		size_t cap = w->cap_live ? w->cap_live * 2 : 1 << 16;
		struct obj *p = realloc(w->live, cap * sizeof(*p));

		if (!p) {
			kvf__place_undo(w->segs, &req, res);
			return KVF_ERR_NO_MEMORY;
		}
		w->live = p;
		w->cap_live = cap;
	}
	w->live[w->nr_live++] = (struct obj){ res->seg[0], res->offset[0], size };
	w->used += (size + ALIGNMENT - 1) & ~(uint64_t)(ALIGNMENT - 1);
	return KVF_OK;
}

static void drop_random(struct run *w)
{
	size_t k = bench_rand(&w->free_rng) % w->nr_live;
	struct obj *o = &w->live[k];

	kvf__segalloc_free(w->segs[o->seg], o->off, o->size);
	kvf__placer_forget(&w->placer);
	w->used -= (o->size + ALIGNMENT - 1) & ~(uint64_t)(ALIGNMENT - 1);
	*o = w->live[--w->nr_live];
}

static int run_one(const struct clockcal *cal, enum kvf_placement_strategy st,
		   int mix, uint64_t seed, uint64_t churn_ops,
		   double out[NR_METRICS])
{
	struct run w = { .st = st };
	struct kvf__place_result res;
	uint64_t attempts = 0, failures = 0, first = 0, fallbacks = 0;
	double *lat = NULL, sum_ns = 0;
	int rc = KVF_OK;

	/* Same sizes and frees for every strategy; placement differs. */
	w.size_rng = seed * 0x9e3779b97f4a7c15ULL + (uint64_t)mix + 1;
	w.free_rng = w.size_rng ^ 0x5bd1e995ULL;
	kvf__placer_init(&w.placer, w.size_rng, 1);
	kvf__park_hint_init(&w.hint, ALIGNMENT);
	w.placer.hint = &w.hint; /* as the engine's placers have */
	if (!w.free_rng)
		w.free_rng = 1;
	for (int s = 0; s < NR_SEGS; s++) {
		rc = kvf__segalloc_create(SEG_SIZE, ALIGNMENT, &w.segs[s]);
		if (rc)
			goto out;
		kvf__segalloc_set_park_hint(w.segs[s], &w.hint, (uint32_t)s);
		w.capacity += SEG_SIZE;
	}
	lat = malloc(churn_ops * sizeof(*lat));
	if (!lat) {
		rc = KVF_ERR_NO_MEMORY;
		goto out;
	}

	/* 1. Fill to 90%. */
	while ((double)w.used < FILL * (double)w.capacity) {
		rc = place(&w, mix_size(mix, &w.size_rng), &res);
		if (rc)
			goto out;
	}

	/* 2. Churn at 90%, timing every placement. */
	for (uint64_t i = 0; i < churn_ops; i++) {
		uint64_t size = mix_size(mix, &w.size_rng), t0, t1;
		double ns;

		while ((double)w.used >= FILL * (double)w.capacity)
			drop_random(&w);
		t0 = ticks();
		rc = place(&w, size, &res);
		t1 = ticks();
		ns = ((double)(t1 - t0) - cal->overhead_ticks) *
		     cal->ns_per_tick;
		lat[i] = ns > 0 ? ns : 0;
		sum_ns += lat[i];
		attempts++;
		if (rc == KVF_ERR_NO_SPACE) {
			failures++;
			continue;
		}
		if (rc)
			goto out;
		first += res.first_choice;
		fallbacks += res.fallbacks;
	}

	/* 3. Fill until the first failure. */
	for (;;) {
		rc = place(&w, mix_size(mix, &w.size_rng), &res);
		if (rc == KVF_ERR_NO_SPACE)
			break;
		if (rc)
			goto out;
	}
	rc = KVF_OK;

	out[M_UTIL] = (double)w.used / (double)w.capacity;
	out[M_FAIL_RATE] = (double)failures / (double)attempts;
	out[M_FIRST_CHOICE] =
		attempts > failures ? (double)first / (double)(attempts - failures)
				    : 0;
	out[M_FALLBACKS] = (double)fallbacks;
	out[M_ALLOCS_PER_SEC] = sum_ns > 0 ? (double)attempts * 1e9 / sum_ns : 0;
	out[M_P50] = bench_quantile(lat, attempts, 0.50);
	out[M_P99] = bench_quantile(lat, attempts, 0.99);
out:
	free(lat);
	free(w.live);
	for (int s = 0; s < NR_SEGS; s++)
		kvf__segalloc_destroy(w.segs[s]);
	return rc;
}

/*
 * Workload arguments naming mixes or strategies restrict the run to them
 * (e.g. "wide fragmentation_aware"); the default runs everything.
 */
static bool selected(const struct bench_opts *o, const char *name,
		     const char *const *names, int n)
{
	bool any = false;

	for (int i = 0; i < o->argc; i++) {
		for (int k = 0; k < n; k++) {
			if (strcmp(o->argv[i], names[k]))
				continue;
			any = true;
			if (!strcmp(o->argv[i], name))
				return true;
		}
	}
	return !any;
}

int bench_placement(const struct bench_opts *o, struct bench_results *r)
{
	const char *snames[NR_STRATS];
	uint32_t rounds = o->rounds ? o->rounds : 1;
	/* Churn operations per run: --objects caps it (default 1M -> 400K). */
	uint64_t churn = o->objects < 400000 ? o->objects : 400000;
	double *v = calloc((size_t)NR_STRATS * NR_MIXES * NR_METRICS * rounds,
			   sizeof(*v));
	struct clockcal cal;
	char key[96], buf[64];
	int rc = KVF_OK;

	if (!v)
		return KVF_ERR_NO_MEMORY;
	if (!churn)
		churn = 1;
	for (int s = 0; s < NR_STRATS; s++)
		snames[s] = strats[s].name;
	calibrate(&cal);
#define V(s, m, k, i) v[(((size_t)(s) * NR_MIXES + (m)) * NR_METRICS + (k)) * rounds + (i)]
	for (uint32_t i = 0; i < rounds; i++) {
		for (int m = 0; m < NR_MIXES; m++) {
			for (int j = 0; j < NR_STRATS; j++) {
				int s = (int)((j + i) % NR_STRATS);
				double out[NR_METRICS];

				if (!selected(o, mix_names[m], mix_names,
					      NR_MIXES) ||
				    !selected(o, strats[s].name, snames,
					      NR_STRATS))
					continue;
				rc = run_one(&cal, strats[s].st, m,
					     o->seed + i, churn, out);
				if (rc)
					goto out;
				for (int k = 0; k < NR_METRICS; k++)
					V(s, m, k, i) = out[k];
			}
		}
	}
	for (int s = 0; s < NR_STRATS; s++) {
		for (int m = 0; m < NR_MIXES; m++) {
			if (!selected(o, mix_names[m], mix_names, NR_MIXES) ||
			    !selected(o, strats[s].name, snames, NR_STRATS))
				continue;
			for (int k = 0; k < NR_METRICS; k++) {
				double *p = &V(s, m, k, 0);

				snprintf(key, sizeof(key), "%s/%s/%s",
					 strats[s].name, mix_names[m],
					 metric_names[k]);
				bench_result(r, NULL, key,
					     bench_quantile(p, rounds, 0.5));
			}
		}
	}
#undef V
	bench_config(r, "segments", "16 x 64 GiB (virtual)");
	bench_config(r, "alignment", "64");
	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)churn);
	bench_config(r, "churn_ops_per_run", buf);
	snprintf(buf, sizeof(buf), "%u", rounds);
	bench_config(r, "rounds", buf);
	bench_note(r,
		   "placement: fill to 90%%, churn at 90%% (timed), then fill to "
		   "the first NO_SPACE; replica_num 1; medians over %u rounds; "
		   "timer overhead %.1f ns subtracted per call.",
		   rounds, cal.overhead_ticks * cal.ns_per_tick);
out:
	free(v);
	return rc;
}
