/* SPDX-License-Identifier: MIT */
/*
 * tools/lib/stats.h - paired-difference statistics for A/B comparisons
 * (kvforge-bench compare). Internal: kvf__stats_*.
 */
#ifndef KVF_TOOLS_LIB_STATS_H
#define KVF_TOOLS_LIB_STATS_H

#include <stddef.h>
#include <stdint.h>

/* Result of comparing paired samples a[i], b[i] (same round). */
struct kvf__stats_paired {
	size_t n;
	double mean_a;
	double mean_b;
	double mean_diff; /* mean of b[i] - a[i] */
	double sd_diff;	  /* sample standard deviation (n - 1) */
	double lo;	  /* confidence interval of mean_diff */
	double hi;
	double rel;    /* mean_diff / mean_a, in percent */
	double rel_lo; /* lo / mean_a, hi / mean_a, in percent */
	double rel_hi;
};

enum kvf__stats_verdict {
	KVF__STATS_NO_CHANGE,	 /* the interval contains zero */
	KVF__STATS_SMALL_CHANGE, /* excludes zero, not the threshold */
	KVF__STATS_IMPROVED,	 /* beyond the threshold, for the better */
	KVF__STATS_REGRESSED,	 /* beyond the threshold, for the worse */
	KVF__STATS_HIGHER,	 /* beyond it, direction of "better" unknown */
	KVF__STATS_LOWER,
};

/* P(T <= t) for Student's t with @df degrees of freedom (df > 0). */
double kvf__stats_t_cdf(double t, double df);
/* The @p quantile (0 < p < 1) of Student's t with @df degrees. */
double kvf__stats_t_quantile(double p, double df);

/*
 * Mean paired difference b - a with a Student-t interval at confidence
 * @conf (e.g. 0.95). Return: 0, or -1 if n < 2.
 */
int kvf__stats_paired(const double *a, const double *b, size_t n, double conf,
		      struct kvf__stats_paired *out);

/*
 * Percentile bootstrap interval of the mean paired difference, from
 * @resamples resamples drawn with a xorshift generator seeded by @seed
 * (deterministic). Replaces out->lo/hi and rel_lo/rel_hi. Return: 0 or -1.
 */
int kvf__stats_bootstrap(const double *a, const double *b, size_t n,
			 double conf, unsigned resamples, uint64_t seed,
			 struct kvf__stats_paired *out);

/*
 * Judge @r against a relative @threshold_pct. @direction: +1 if higher is
 * better, -1 if lower is better, 0 if unknown.
 */
enum kvf__stats_verdict kvf__stats_judge(const struct kvf__stats_paired *r,
					 double threshold_pct, int direction);
const char *kvf__stats_verdict_name(enum kvf__stats_verdict v);

/* +1, -1 or 0 from a metric name (keys_per_sec: +1, ns_per_key: -1). */
int kvf__stats_direction(const char *metric);

#endif /* KVF_TOOLS_LIB_STATS_H */
