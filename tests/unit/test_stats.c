/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_stats.c - paired-difference statistics against values
 * computed by hand and from published t tables.
 */
#include "config.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tools/lib/stats.h"

#define assert_near(x, y, eps)                                                 \
	do {                                                                   \
		double x_ = (x), y_ = (y);                                     \
		if (!(fabs(x_ - y_) <= (eps)))                                 \
			fail_msg("%s = %.9g, expected %.9g", #x, x_, y_);      \
	} while (0)

/* Two-sided 95% and one-sided 95% critical values (any t table). */
static void test_t_quantiles(void **state)
{
	assert_near(kvf__stats_t_quantile(0.975, 1), 12.706205, 1e-5);
	assert_near(kvf__stats_t_quantile(0.975, 4), 2.776445, 1e-6);
	assert_near(kvf__stats_t_quantile(0.975, 9), 2.262157, 1e-6);
	assert_near(kvf__stats_t_quantile(0.975, 29), 2.045230, 1e-6);
	assert_near(kvf__stats_t_quantile(0.95, 30), 1.697261, 1e-6);
	assert_near(kvf__stats_t_quantile(0.025, 4), -2.776445, 1e-6);
	assert_near(kvf__stats_t_quantile(0.5, 7), 0.0, 1e-9);
	assert_near(kvf__stats_t_cdf(0.0, 3), 0.5, 1e-12);
	/* df = 1 is Cauchy: F(1) = 3/4 exactly. */
	assert_near(kvf__stats_t_cdf(1.0, 1), 0.75, 1e-12);
	/* Large df approaches the normal: z(0.975) = 1.959964. */
	assert_near(kvf__stats_t_quantile(0.975, 1e6), 1.959966, 1e-5);
}

/*
 * a = {10,12,11,13,9}, b = {11,14,11,15,10}: d = {1,2,0,2,1},
 * mean 1.2; squared deviations .04+.64+1.44+.64+.04 = 2.8, var 2.8/4 =
 * 0.7, sd 0.836660, se = sd/sqrt(5) = 0.374166; t(0.975,4) = 2.776445,
 * half-width 1.038851: CI [0.161149, 2.238851]; mean a = 11, so
 * rel = 10.909091%, CI [1.464994, 20.353187]%.
 */
static void test_paired_known(void **state)
{
	const double a[] = {10, 12, 11, 13, 9}, b[] = {11, 14, 11, 15, 10};
	struct kvf__stats_paired r;

	assert_int_equal(kvf__stats_paired(a, b, 5, 0.95, &r), 0);
	assert_int_equal(r.n, 5);
	assert_near(r.mean_a, 11.0, 1e-12);
	assert_near(r.mean_b, 12.2, 1e-12);
	assert_near(r.mean_diff, 1.2, 1e-12);
	assert_near(r.sd_diff, 0.836660, 1e-6);
	assert_near(r.lo, 0.161149, 1e-6);
	assert_near(r.hi, 2.238851, 1e-6);
	assert_near(r.rel, 10.909091, 1e-6);
	assert_near(r.rel_lo, 1.464994, 1e-5);
	assert_near(r.rel_hi, 20.353187, 1e-5);
	/* Beyond 1% with the CI excluding it; not beyond 5%. */
	assert_int_equal(kvf__stats_judge(&r, 1.0, +1), KVF__STATS_IMPROVED);
	assert_int_equal(kvf__stats_judge(&r, 1.0, -1), KVF__STATS_REGRESSED);
	assert_int_equal(kvf__stats_judge(&r, 1.0, 0), KVF__STATS_HIGHER);
	assert_int_equal(kvf__stats_judge(&r, 5.0, +1),
			 KVF__STATS_SMALL_CHANGE);
	assert_int_equal(kvf__stats_paired(a, b, 1, 0.95, &r), -1);
}

static void test_no_change(void **state)
{
	const double a[] = {5, 6, 5, 6}, b[] = {6, 5, 6, 5};
	struct kvf__stats_paired r;

	assert_int_equal(kvf__stats_paired(a, b, 4, 0.95, &r), 0);
	assert_near(r.mean_diff, 0.0, 1e-12);
	assert_true(r.lo < 0 && r.hi > 0);
	assert_int_equal(kvf__stats_judge(&r, 5.0, +1), KVF__STATS_NO_CHANGE);
	assert_string_equal(kvf__stats_verdict_name(KVF__STATS_NO_CHANGE),
			    "no-change");
}

/* Bootstrap: deterministic per seed, inside the range of differences. */
static void test_bootstrap(void **state)
{
	const double a[] = {10, 12, 11, 13, 9, 10, 12, 11};
	const double b[] = {11, 14, 11, 15, 10, 12, 13, 11};
	struct kvf__stats_paired r1, r2;

	assert_int_equal(kvf__stats_bootstrap(a, b, 8, 0.95, 2000, 7, &r1), 0);
	assert_int_equal(kvf__stats_bootstrap(a, b, 8, 0.95, 2000, 7, &r2), 0);
	assert_true(r1.lo == r2.lo && r1.hi == r2.hi);
	/* d = {1,2,0,2,1,2,1,0}: mean 9/8. */
	assert_near(r1.mean_diff, 1.125, 1e-12);
	assert_true(r1.lo >= 0.0 && r1.lo < 1.125);
	assert_true(r1.hi > 1.125 && r1.hi <= 2.0);
	assert_int_equal(kvf__stats_bootstrap(a, b, 8, 0.95, 5, 7, &r1), -1);
}

static void test_direction(void **state)
{
	assert_int_equal(kvf__stats_direction("get.keys_per_sec"), 1);
	assert_int_equal(kvf__stats_direction("get.ns_per_key"), -1);
	assert_int_equal(kvf__stats_direction("get.p99_us"), -1);
	assert_int_equal(kvf__stats_direction("bytes_per_object"), -1);
	assert_int_equal(kvf__stats_direction("items"), 0);
	assert_int_equal(kvf__stats_direction("fill.objects"), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_t_quantiles),
		cmocka_unit_test(test_paired_known),
		cmocka_unit_test(test_no_change),
		cmocka_unit_test(test_bootstrap),
		cmocka_unit_test(test_direction),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
