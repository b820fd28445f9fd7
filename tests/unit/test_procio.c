/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_procio.c - kvforge-bench's storage traffic counter: the
 * write_bytes field read out of /proc/self/io's text wherever it sits,
 * anything malformed or missing reported as BENCH_NO_IO (never as 0
 * bytes), and the live counter moving by at least the bytes of a file
 * this process writes and syncs on a disk-backed directory.
 */
#include "config.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cmocka.h>

#include "tools/bench/bench.h"

static const char proc_io[] = "rchar: 4308\n"
			      "wchar: 1057\n"
			      "syscr: 12\n"
			      "syscw: 3\n"
			      "read_bytes: 8192\n"
			      "write_bytes: 123456789012\n"
			      "cancelled_write_bytes: 4096\n";

static void test_parse_field(void **state)
{
	(void)state;
	assert_int_equal(bench_parse_write_bytes(proc_io), 123456789012ULL);
	/* cancelled_write_bytes must not be taken for it. */
	assert_int_equal(bench_parse_write_bytes("cancelled_write_bytes: 7\n"
						 "write_bytes: 9\n"),
			 9);
	/* The last line may end without a newline. */
	assert_int_equal(bench_parse_write_bytes("write_bytes: 0"), 0);
}

static void test_parse_missing(void **state)
{
	(void)state;
	assert_int_equal(bench_parse_write_bytes(""), BENCH_NO_IO);
	assert_int_equal(bench_parse_write_bytes("rchar: 1\nwchar: 2\n"),
			 BENCH_NO_IO);
	assert_int_equal(bench_parse_write_bytes("cancelled_write_bytes: 5\n"),
			 BENCH_NO_IO);
	assert_int_equal(bench_parse_write_bytes("write_bytes: \n"),
			 BENCH_NO_IO);
	assert_int_equal(bench_parse_write_bytes("write_bytes: 12ab\n"),
			 BENCH_NO_IO);
}

/* Write and sync @bytes to a new file in the current directory. */
static void write_file(const char *path, size_t bytes)
{
	char buf[65536];
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	assert_true(fd >= 0);
	memset(buf, 0xa5, sizeof(buf));
	for (size_t done = 0; done < bytes; done += sizeof(buf))
		assert_int_equal(write(fd, buf, sizeof(buf)), sizeof(buf));
	assert_int_equal(fdatasync(fd), 0);
	close(fd);
}

static void test_live_counter(void **state)
{
	const size_t bytes = 4u << 20;
	char path[64];
	struct statfs fs;
	uint64_t before, after;

	(void)state;
	before = bench_write_bytes();
	if (before == BENCH_NO_IO)
		skip(); /* a kernel without task I/O accounting */
	/* tmpfs pages never go to storage, so they are not counted. */
	if (statfs(".", &fs) == 0 && fs.f_type == TMPFS_MAGIC)
		skip();
	snprintf(path, sizeof(path), "test_procio.%d.tmp", (int)getpid());
	write_file(path, bytes);
	after = bench_write_bytes();
	unlink(path);
	assert_int_not_equal(after, BENCH_NO_IO);
	/* A file system that keeps no dirty pages of its own (some network
	 * and FUSE ones) moves no counter: nothing to check there. */
	if (after == before)
		skip();
	assert_true(after >= before + bytes);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_field),
		cmocka_unit_test(test_parse_missing),
		cmocka_unit_test(test_live_counter),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
