/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_syncprobe.c - the durability workload's group-commit
 * probe (tools/bench/syncprobe.c): every batch is counted and covered by a
 * sync, one thread syncs once per batch, two threads never put more than
 * two batches in one sync, bad arguments and a missing directory are
 * refused, and the probe's file is gone afterwards. No timings asserted.
 */
#include "config.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "tools/bench/syncprobe.h"

static char dir[4096];

static int setup(void **state)
{
	const char *base = getenv("KVF_TEST_TMPDIR");

	(void)state;
	snprintf(dir, sizeof(dir), "%s/syncprobe-XXXXXX", base ? base : "/tmp");
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	return rmdir(dir); /* fails if the probe left its file behind */
}

static void assert_no_probe_file(void)
{
	char path[4200];
	struct stat st;

	snprintf(path, sizeof(path), "%s/syncprobe.dat", dir);
	assert_int_equal(stat(path, &st), -1);
	assert_int_equal(errno, ENOENT);
}

static void test_one_thread(void **state)
{
	struct bench_syncprobe m = {0};

	(void)state;
	assert_int_equal(bench_syncprobe_run(dir, 1, 0, 12320, 25, &m), 0);
	assert_int_equal(m.batches, 25);
	assert_int_equal(m.syncs, 25); /* alone, every batch is a group */
	assert_true(m.ns > 0);
	assert_no_probe_file();
}

static void test_two_threads_share_syncs(void **state)
{
	struct bench_syncprobe m = {0};

	(void)state;
	/* an odd count: the threads' shares differ, both must finish */
	assert_int_equal(bench_syncprobe_run(dir, 2, 20000, 4096, 41, &m), 0);
	assert_int_equal(m.batches, 41);
	assert_true(m.syncs >= 21); /* at most one frame per thread waits */
	assert_true(m.syncs <= 41);
	assert_no_probe_file();
}

static void test_frames_wrap_around_the_file(void **state)
{
	struct bench_syncprobe m = {0};

	(void)state;
	/* 3 MiB frames in a 16 MiB file: the offset wraps twice */
	assert_int_equal(bench_syncprobe_run(dir, 1, 0, 3u << 20, 12, &m), 0);
	assert_int_equal(m.syncs, 12);
	assert_no_probe_file();
}

static void test_refused(void **state)
{
	struct bench_syncprobe m = {0};
	char missing[4200];

	(void)state;
	assert_int_equal(bench_syncprobe_run(dir, 0, 0, 4096, 1, &m), EINVAL);
	assert_int_equal(bench_syncprobe_run(dir, 9, 0, 4096, 1, &m), EINVAL);
	assert_int_equal(bench_syncprobe_run(dir, 1, 0, 0, 1, &m), EINVAL);
	assert_int_equal(bench_syncprobe_run(dir, 1, 0, 17u << 20, 1, &m),
			 EINVAL);
	snprintf(missing, sizeof(missing), "%s/no/such/dir", dir);
	assert_int_equal(bench_syncprobe_run(missing, 1, 0, 4096, 1, &m),
			 ENOENT);
	assert_no_probe_file();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_one_thread, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_two_threads_share_syncs,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_frames_wrap_around_the_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refused, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
