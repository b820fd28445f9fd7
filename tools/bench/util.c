/* SPDX-License-Identifier: MIT */
/*
 * tools/bench/util.c - the benchmark's small numeric helpers: its random
 * numbers, key permutations and quantiles. Kept apart from main.c so the
 * pieces tests exercise (the floor probe) link without the program.
 */
#include "config.h"

#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/xorshift.h"
#include "tools/bench/bench.h"

uint64_t bench_rand(uint64_t *s)
{
	return kvf__xorshift64s(s);
}

static uint64_t gcd(uint64_t a, uint64_t b)
{
	while (b) {
		uint64_t t = a % b;

		a = b;
		b = t;
	}
	return a;
}

uint64_t bench_coprime_step(uint64_t n)
{
	uint64_t a = 0x9e3779b97f4a7c15ULL % n;

	while (a < 2 || gcd(a, n) != 1)
		a++;
	return n < 3 ? 1 : a;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

double bench_quantile(double *v, size_t n, double q)
{
	size_t i;

	if (!n)
		return NAN;
	qsort(v, n, sizeof(*v), cmp_double);
	i = (size_t)(q * (double)(n - 1) + 0.5);
	return v[i < n ? i : n - 1];
}

void bench_pin_thread(const struct bench_opts *o, unsigned i)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	cpu_set_t set;

	if (!o->pin || n < 1)
		return;
	CPU_ZERO(&set);
	CPU_SET(i % (unsigned)n, &set);
	if (pthread_setaffinity_np(pthread_self(), sizeof(set), &set))
		fprintf(stderr, "kvforge-bench: --pin: cannot bind to CPU %u\n",
			i % (unsigned)n);
}
