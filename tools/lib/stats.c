/* SPDX-License-Identifier: MIT */
/*
 * tools/lib/stats.c - paired-difference statistics.
 *
 * Why paired: memory speed on these VMs drifts 2-3x between processes and
 * minutes, so A and B runs are interleaved (A B B A ...) and each round
 * yields one difference b - a; drift common to a round cancels. The mean
 * difference gets a Student-t interval (the differences are few, 5-20),
 * optionally a percentile bootstrap one, which does not assume normality.
 *
 * Student's t distribution function comes from the regularized incomplete
 * beta function, evaluated by its continued fraction (modified Lentz);
 * quantiles by bisection on the distribution function, which is monotone,
 * so 200 halvings are exact to double precision without derivatives.
 */
#include "config.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "tools/lib/stats.h"

/* Continued fraction of I_x(a, b), valid for x < (a + 1) / (a + b + 2). */
static double beta_cf(double a, double b, double x)
{
	const double tiny = 1e-300, eps = 1e-15;
	double c = 1.0, d = 1.0 - (a + b) * x / (a + 1.0), h;

	d = 1.0 / (fabs(d) < tiny ? tiny : d);
	h = d;
	for (int m = 1; m <= 300; m++) {
		double m2 = 2.0 * m;
		/* Even step, then odd step of the fraction. */
		double num = m * (b - m) * x / ((a + m2 - 1.0) * (a + m2));

		d = 1.0 + num * d;
		d = 1.0 / (fabs(d) < tiny ? tiny : d);
		c = 1.0 + num / c;
		c = fabs(c) < tiny ? tiny : c;
		h *= d * c;
		num = -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1.0));
		d = 1.0 + num * d;
		d = 1.0 / (fabs(d) < tiny ? tiny : d);
		c = 1.0 + num / c;
		c = fabs(c) < tiny ? tiny : c;
		h *= d * c;
		if (fabs(d * c - 1.0) < eps)
			break;
	}
	return h;
}

/*
 * Regularized incomplete beta I_x(a, b), given x and y = 1 - x computed
 * separately: near x = 1 (t near 0) the subtraction would lose digits.
 */
static double beta_inc(double a, double b, double x, double y)
{
	double front;

	if (x <= 0.0)
		return 0.0;
	if (y <= 0.0)
		return 1.0;
	front = exp(lgamma(a + b) - lgamma(a) - lgamma(b) + a * log(x) +
		    b * log(y));
	if (x < (a + 1.0) / (a + b + 2.0))
		return front * beta_cf(a, b, x) / a;
	return 1.0 - front * beta_cf(b, a, y) / b;
}

double kvf__stats_t_cdf(double t, double df)
{
	double t2 = t * t;
	double tail =
		0.5 * beta_inc(df / 2.0, 0.5, df / (df + t2), t2 / (df + t2));

	return t >= 0 ? 1.0 - tail : tail;
}

double kvf__stats_t_quantile(double p, double df)
{
	double lo = -1.0, hi = 1.0;

	while (kvf__stats_t_cdf(lo, df) > p && lo > -1e12)
		lo *= 2.0;
	while (kvf__stats_t_cdf(hi, df) < p && hi < 1e12)
		hi *= 2.0;
	for (int i = 0; i < 200; i++) {
		double mid = 0.5 * (lo + hi);

		if (kvf__stats_t_cdf(mid, df) < p)
			lo = mid;
		else
			hi = mid;
	}
	return 0.5 * (lo + hi);
}

static void set_relative(struct kvf__stats_paired *r)
{
	double base = r->mean_a != 0.0 ? fabs(r->mean_a) : NAN;

	r->rel = 100.0 * r->mean_diff / base;
	r->rel_lo = 100.0 * r->lo / base;
	r->rel_hi = 100.0 * r->hi / base;
}

int kvf__stats_paired(const double *a, const double *b, size_t n, double conf,
		      struct kvf__stats_paired *out)
{
	double sa = 0, sb = 0, ss = 0, half;

	memset(out, 0, sizeof(*out));
	if (n < 2)
		return -1;
	for (size_t i = 0; i < n; i++) {
		sa += a[i];
		sb += b[i];
	}
	out->n = n;
	out->mean_a = sa / (double)n;
	out->mean_b = sb / (double)n;
	out->mean_diff = out->mean_b - out->mean_a;
	for (size_t i = 0; i < n; i++) {
		double dev = (b[i] - a[i]) - out->mean_diff;

		ss += dev * dev;
	}
	out->sd_diff = sqrt(ss / (double)(n - 1));
	half = kvf__stats_t_quantile(0.5 + conf / 2.0, (double)(n - 1)) *
	       out->sd_diff / sqrt((double)n);
	out->lo = out->mean_diff - half;
	out->hi = out->mean_diff + half;
	set_relative(out);
	return 0;
}

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545F4914F6CDD1DULL;
}

static int cmp_double(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;

	return (a > b) - (a < b);
}

int kvf__stats_bootstrap(const double *a, const double *b, size_t n,
			 double conf, unsigned resamples, uint64_t seed,
			 struct kvf__stats_paired *out)
{
	double *means;
	uint64_t s = seed ? seed : 0x9E3779B97F4A7C15ULL;
	size_t lo_i, hi_i;

	if (n < 2 || resamples < 10 || kvf__stats_paired(a, b, n, conf, out))
		return -1;
	means = malloc(resamples * sizeof(*means));
	if (!means)
		return -1;
	for (unsigned r = 0; r < resamples; r++) {
		double sum = 0;

		for (size_t i = 0; i < n; i++) {
			size_t j = (size_t)(xorshift(&s) % n);

			sum += b[j] - a[j];
		}
		means[r] = sum / (double)n;
	}
	qsort(means, resamples, sizeof(*means), cmp_double);
	lo_i = (size_t)floor((1.0 - conf) / 2.0 * resamples);
	hi_i = (size_t)ceil((1.0 + conf) / 2.0 * resamples) - 1;
	if (hi_i >= resamples)
		hi_i = resamples - 1;
	out->lo = means[lo_i];
	out->hi = means[hi_i];
	free(means);
	set_relative(out);
	return 0;
}

enum kvf__stats_verdict kvf__stats_judge(const struct kvf__stats_paired *r,
					 double threshold_pct, int direction)
{
	bool up = r->rel_lo > threshold_pct;
	bool down = r->rel_hi < -threshold_pct;

	if (up || down) {
		if (!direction)
			return up ? KVF__STATS_HIGHER : KVF__STATS_LOWER;
		return (up == (direction > 0)) ? KVF__STATS_IMPROVED
					       : KVF__STATS_REGRESSED;
	}
	if (r->lo > 0 || r->hi < 0)
		return KVF__STATS_SMALL_CHANGE;
	return KVF__STATS_NO_CHANGE;
}

const char *kvf__stats_verdict_name(enum kvf__stats_verdict v)
{
	static const char *const names[] = {
		[KVF__STATS_NO_CHANGE] = "no-change",
		[KVF__STATS_SMALL_CHANGE] = "below-threshold",
		[KVF__STATS_IMPROVED] = "IMPROVED",
		[KVF__STATS_REGRESSED] = "REGRESSED",
		[KVF__STATS_HIGHER] = "HIGHER",
		[KVF__STATS_LOWER] = "LOWER",
	};

	return (unsigned)v < sizeof(names) / sizeof(names[0]) ? names[v] : "?";
}

/* @tok occurs in @name delimited by '_' or the ends ("ns" in "ns_per_key"). */
static bool has_token(const char *name, const char *tok)
{
	size_t len = strlen(tok);

	for (const char *h = strstr(name, tok); h; h = strstr(h + 1, tok))
		if ((h == name || h[-1] == '_') &&
		    (h[len] == '\0' || h[len] == '_'))
			return true;
	return false;
}

int kvf__stats_direction(const char *metric)
{
	static const char *const higher[] = {"per_sec", "throughput", "ops",
					     "hits", "hit"};
	static const char *const lower[] = {"ns",    "us",  "ms",     "latency",
					    "bytes", "rss", "misses", "time",
					    "p50",   "p90", "p99",    "p999"};
	const char *last = strrchr(metric, '.');

	last = last ? last + 1 : metric;
	for (size_t i = 0; i < sizeof(higher) / sizeof(higher[0]); i++)
		if (has_token(last, higher[i]))
			return 1;
	for (size_t i = 0; i < sizeof(lower) / sizeof(lower[0]); i++)
		if (has_token(last, lower[i]))
			return -1;
	return 0;
}
