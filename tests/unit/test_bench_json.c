/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_bench_json.c - kvforge-bench's --json output is JSON a
 * strict reader takes whole: each results group is one object naming each
 * metric once, even when the metrics of a group were added at different
 * times (a phase's time first, its vs_floor after the floor probe), and
 * every value comes back at its path.
 */
#include "config.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tools/bench/bench.h"
#include "tools/bench/results.h"
#include "tools/lib/json_read.h"

#define MAX_PATHS 64

struct seen {
	char paths[MAX_PATHS][256];
	int n;
	int duplicates;
};

static int note_path(void *ctx, const char *path, enum kvf__json_kind kind,
		     double num, const char *str)
{
	struct seen *s = ctx;

	(void)kind;
	(void)num;
	(void)str;
	for (int i = 0; i < s->n; i++)
		if (!strcmp(s->paths[i], path))
			s->duplicates++;
	if (s->n < MAX_PATHS)
		snprintf(s->paths[s->n++], sizeof(s->paths[0]), "%s", path);
	return 0;
}

static char *render(const struct bench_results *r, size_t *len)
{
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);

	assert_non_null(f);
	bench_render_json(r, f);
	fclose(f);
	return buf;
}

static void group_added_twice_is_one_object(void **state)
{
	struct bench_results r = { .workload = "hicache" };
	struct seen seen = { .n = 0 };
	size_t len;
	double v;
	char *text;

	(void)state;
	bench_config(&r, "objects", "1000");
	bench_result(&r, "put", "ns_per_key", 300);
	bench_result(&r, "get", "ns_per_key", 100);
	bench_result(&r, "floor", "ns_per_key", 40);
	bench_result(&r, "put", "vs_floor", 7.5);
	bench_result(&r, "get", "vs_floor", 2.5);
	bench_extra(&r, "bytes_per_object", 150);
	text = render(&r, &len);

	assert_int_equal(kvf__json_flatten(text, len, note_path, &seen, NULL),
			 0);
	assert_int_equal(seen.duplicates, 0);
	assert_int_equal(seen.n, 8); /* workload, objects, 5 results, extra */
	assert_int_equal(kvf__json_number(text, len, "results.put.ns_per_key",
					  &v),
			 0);
	assert_true(v == 300);
	assert_int_equal(kvf__json_number(text, len, "results.put.vs_floor",
					  &v),
			 0);
	assert_true(v == 7.5);
	assert_int_equal(kvf__json_number(text, len, "results.get.vs_floor",
					  &v),
			 0);
	assert_true(v == 2.5);
	assert_int_equal(kvf__json_number(text, len, "bytes_per_object", &v),
			 0);
	assert_true(v == 150);
	/* The groups keep the order of their first entries. */
	assert_true(strstr(text, "\"put\"") < strstr(text, "\"get\""));
	assert_true(strstr(text, "\"get\"") < strstr(text, "\"floor\""));
	free(text);
	bench_results_free(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(group_added_twice_is_one_object),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
