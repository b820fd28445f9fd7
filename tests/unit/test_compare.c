/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_compare.c - kvforge-bench compare against a fake bench
 * (a shell script printing bench JSON): the ABBA run order, the metrics
 * read from "results", verdicts in both directions, --json output, and
 * --fail-on-regression.
 */
#include "config.h"

#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "tools/lib/json_read.h"
#include "tools/bench/bench.h"

static char dir[4096];
static char script[4200];

/* B ("--fast") is 20% faster and its latency 20% lower; noise per run. */
static const char fake_bench[] =
	"#!/bin/sh\n"
	"d=$(dirname \"$0\")\n"
	"n=$(cat \"$d/count\" 2>/dev/null || echo 0); n=$((n + 1))\n"
	"echo $n > \"$d/count\"\n"
	"v=100000; lat=10000; tag=A\n"
	"for a in \"$@\"; do\n"
	"  [ \"$a\" = --fast ] && { v=120000; lat=8000; tag=B; }\n"
	"done\n"
	"echo \"$tag $*\" >> \"$d/log\"\n"
	"v=$((v + (n % 3) * 500)); lat=$((lat + (n % 2) * 50))\n"
	"printf '{\"workload\":\"fake\",\"config\":{\"batch\":\"128\"},'\n"
	"printf '\"results\":{\"get\":{\"keys_per_sec\":%d,\"ns_per_key\":%d},'"
	" $v $lat\n"
	"printf '\"same\":5},\"bytes_per_object\":100}\\n'\n";

static int setup(void **state)
{
	const char *base = getenv("KVF_TEST_TMPDIR");
	FILE *f;

	snprintf(dir, sizeof(dir), "%s/compare-XXXXXX", base ? base : "/tmp");
	if (!mkdtemp(dir))
		return -1;
	snprintf(script, sizeof(script), "%s/fake-bench", dir);
	f = fopen(script, "w");
	if (!f)
		return -1;
	fputs(fake_bench, f);
	fclose(f);
	return chmod(script, 0755);
}

static int teardown(void **state)
{
	char path[4300];

	snprintf(path, sizeof(path), "%s/count", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/log", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/out", dir);
	unlink(path);
	unlink(script);
	rmdir(dir);
	return 0;
}

/* Run compare with stdout captured; return exit code, output in *out. */
static int run_compare(char **argv, int argc, char **out)
{
	char path[4300];
	int fd, saved, ret;
	FILE *f;
	long len;

	snprintf(path, sizeof(path), "%s/log", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/out", dir);
	fflush(stdout);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(fd >= 0);
	saved = dup(STDOUT_FILENO);
	dup2(fd, STDOUT_FILENO);
	close(fd);
	ret = bench_compare_main(argc, argv);
	fflush(stdout);
	dup2(saved, STDOUT_FILENO);
	close(saved);
	f = fopen(path, "r");
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	rewind(f);
	*out = calloc(1, (size_t)len + 1);
	assert_int_equal(fread(*out, 1, (size_t)len, f), (size_t)len);
	fclose(f);
	return ret;
}

struct verdict {
	const char *path;
	char val[64];
};

static int verdict_cb(void *ctx, const char *path, enum kvf__json_kind kind,
		      double num, const char *str)
{
	struct verdict *v = ctx;

	if (kind == KVF__JSON_STRING && !strcmp(path, v->path))
		snprintf(v->val, sizeof(v->val), "%s", str);
	return 0;
}

static const char *verdict(const char *js, const char *metric)
{
	static struct verdict v;
	static char path[128];

	snprintf(path, sizeof(path), "metrics.%s.verdict", metric);
	v.path = path;
	v.val[0] = '\0';
	assert_int_equal(
		kvf__json_flatten(js, strlen(js), verdict_cb, &v, NULL), 0);
	return v.val;
}

static void test_improvement_json(void **state)
{
	char *argv[] = {"compare", "--rounds", "4",	    "--threshold",
			"5%",	   "--b",      "--fast",    "--bin-a",
			script,	   "--bin-b",  script,	    "--json",
			"--",	   "fake",     "--objects", "10"};
	char *out, log[256] = "", line[256], path[4300];
	double v;
	FILE *f;

	assert_int_equal(run_compare(argv, 16, &out), 0);
	assert_string_equal(verdict(out, "get.keys_per_sec"), "IMPROVED");
	assert_string_equal(verdict(out, "get.ns_per_key"), "IMPROVED");
	assert_string_equal(verdict(out, "same"), "no-change");
	assert_int_equal(kvf__json_number(out, strlen(out), "rounds", &v), 0);
	assert_true(v == 4);
	assert_int_equal(kvf__json_number(out, strlen(out),
					  "metrics.get.keys_per_sec.rel_pct",
					  &v),
			 0);
	assert_true(v > 15 && v < 25);
	/* Top-level extras are not metrics. */
	assert_null(strstr(out, "bytes_per_object"));
	free(out);

	/* Order A B B A A B B A; common args first, then the variant's. */
	snprintf(path, sizeof(path), "%s/log", dir);
	f = fopen(path, "r");
	assert_non_null(f);
	for (size_t n = 0; fgets(line, sizeof(line), f) && n + 1 < sizeof(log);)
		log[n++] = line[0];
	fclose(f);
	assert_string_equal(log, "ABBAABBA");
	f = fopen(path, "r");
	assert_non_null(fgets(line, sizeof(line), f));
	assert_non_null(fgets(line, sizeof(line), f));
	fclose(f);
	assert_string_equal(line, "B fake --objects 10 --fast --json\n");
}

static void test_regression_text(void **state)
{
	char *argv[] = {"compare",     "--rounds",
			"3",	       "--a",
			"--fast",      "--bin-a",
			script,	       "--bin-b",
			script,	       "--fail-on-regression",
			"--bootstrap", "500"};
	char *out;

	assert_int_equal(run_compare(argv, 12, &out), 3);
	assert_non_null(strstr(out, "get.keys_per_sec"));
	assert_non_null(strstr(out, "REGRESSED"));
	assert_non_null(strstr(out, "bootstrap"));
	free(out);
}

static void test_bad_usage(void **state)
{
	char *argv1[] = {"compare", "--rounds", "1", "--bin-a", script};
	char *argv2[] = {"compare", "--bogus", "x"};
	char *argv3[] = {"compare",	 "--rounds", "2",   "--bin-a",
			 "/nonexistent", "--bin-b",  script};
	char *out;

	assert_int_equal(run_compare(argv1, 5, &out), 1);
	free(out);
	assert_int_equal(run_compare(argv2, 3, &out), 1);
	free(out);
	assert_int_equal(run_compare(argv3, 7, &out), 1);
	free(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_improvement_json),
		cmocka_unit_test(test_regression_text),
		cmocka_unit_test(test_bad_usage),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
