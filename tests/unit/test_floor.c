/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_floor.c - kvforge-bench's memory-floor probe
 * (tools/bench/floor.c): its arrays are sized like the engine's (the bucket
 * table the index presizes, one record per object at the record size of
 * the key length), what it touches is a pure function of the seed and stays
 * inside the arrays, and the report gives a positive floor and a positive
 * vs_floor for every operation that has a time. No timings asserted.
 */
#include "config.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "metadata/object.h"
#include "tools/bench/bench.h"
#include "tools/bench/results.h"

static void table_holds_objects_at_index_load(void **state)
{
	static const uint64_t counts[] = { 1, 1000, 65536, 1000000, 10000000 };

	(void)state;
	for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
		struct bench_floor_sizes s;
		uint64_t buckets;

		bench_floor_sizes(counts[i], 68, &s);
		buckets = s.table_bytes / 64;
		/* The index's presized table: whole pages of buckets... */
		assert_int_equal(s.table_bytes % 4096, 0);
		/* ...the fewest holding 7-slot buckets at load <= 9/16. */
		assert_true(buckets * 7 * 9 / 16 >= counts[i]);
		if (s.table_bytes > (2 << 20)) /* whole 2 MiB pages */
			assert_true((buckets - 32768) * 7 * 9 / 16 < counts[i]);
	}
}

static void record_size_follows_key_length(void **state)
{
	struct bench_floor_sizes a, b;

	(void)state;
	bench_floor_sizes(1000, 68, &a);
	bench_floor_sizes(1000, 68 + 8, &b);
	assert_int_equal(a.record_bytes % 8, 0);
	assert_true(a.record_bytes >= KVF__OBJ_HOOK_SIZE +
					      sizeof(struct kvf__object) + 68 +
					      sizeof(struct kvf__replica));
	assert_int_equal(b.record_bytes - a.record_bytes, 8);
	assert_int_equal(a.records_bytes, 1000 * a.record_bytes);
}

static void lines_are_deterministic_and_in_bounds(void **state)
{
	struct bench_floor f;
	uint64_t r1 = 7, r2 = 7;

	(void)state;
	assert_int_equal(bench_floor_init(&f, 5000, 68), KVF_OK);
	for (int i = 0; i < 10000; i++) {
		uint64_t b1, l1, b2, l2;

		bench_floor_lines(&f, &r1, &b1, &l1);
		bench_floor_lines(&f, &r2, &b2, &l2);
		assert_int_equal(b1, b2);
		assert_int_equal(l1, l2);
		assert_true(b1 < f.sizes.table_bytes / 64);
		assert_true(l1 * 64 < f.sizes.records_bytes);
	}
	bench_floor_free(&f);
	assert_null(f.table);
	assert_int_equal(bench_floor_init(&f, 0, 68), KVF_ERR_INVALID_ARGUMENT);
}

static void report_has_positive_ratios(void **state)
{
	static const char *const ops[] = { "get", "exist", "absent" };
	struct bench_results r = { .workload = "test" };
	struct bench_floor f;
	double floor_ns;

	(void)state;
	assert_int_equal(bench_floor_init(&f, 20000, 68), KVF_OK);
	bench_floor_sample(&f, 128, 20000, 1);
	bench_floor_sample(&f, 128, 20000, 1);
	assert_int_equal(f.nr_samples, 6);
	floor_ns = bench_floor_result(&f);
	assert_true(floor_ns > 0);
	bench_result(&r, "get", "ns_per_key", 3 * floor_ns);
	bench_result(&r, "exist", "ns_per_key", floor_ns / 2);
	bench_floor_report(&r, floor_ns, ops, 3);
	assert_true(bench_result_get(&r, "floor", "ns_per_key") == floor_ns);
	assert_true(fabs(bench_result_get(&r, "get", "vs_floor") - 3) < 1e-9);
	assert_true(fabs(bench_result_get(&r, "exist", "vs_floor") - 0.5) <
		    1e-9);
	/* An op without a time gets no ratio. */
	assert_true(isnan(bench_result_get(&r, "absent", "vs_floor")));
	bench_results_free(&r);
	bench_floor_free(&f);
}

/* Several probes at once: their aggregate and the scaling are reported. */
static void threads_floor_reported(void **state)
{
	struct bench_opts o = { .batch = 128, .threads = 2, .seed = 3 };
	struct bench_results r = { .workload = "test" };
	struct bench_floor f;

	(void)state;
	assert_int_equal(bench_floor_init(&f, 20000, 68), KVF_OK);
	/* Nothing to report before the threads' probe ran. */
	bench_floor_sample(&f, 128, 20000, 1);
	bench_floor_report_threads(&r, &f);
	assert_true(isnan(bench_result_get(&r, "floor", "thread_scaling")));
	bench_floor_sample_all(&f, &o, 20000);
	assert_int_equal(f.nr_samples, 6);
	assert_int_equal(f.nr_thread_samples, 3);
	assert_int_equal(f.threads, 2);
	for (size_t i = 0; i < f.nr_thread_samples; i++)
		assert_true(f.thread_samples[i] > 0);
	bench_floor_report_threads(&r, &f);
	assert_true(bench_result_get(&r, "floor", "threads_ns_per_key") > 0);
	assert_true(bench_result_get(&r, "floor", "thread_scaling") > 0);
	/* One client thread: no threads' probe. */
	o.threads = 1;
	bench_floor_sample_all(&f, &o, 20000);
	assert_int_equal(f.nr_thread_samples, 3);
	/* Fewer keys than threads: no figure. */
	assert_true(bench_floor_measure_threads(&f, &o, 4, 3, 1) == 0);
	bench_results_free(&r);
	bench_floor_free(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(table_holds_objects_at_index_load),
		cmocka_unit_test(record_size_follows_key_length),
		cmocka_unit_test(lines_are_deterministic_and_in_bounds),
		cmocka_unit_test(report_has_positive_ratios),
		cmocka_unit_test(threads_floor_reported),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
