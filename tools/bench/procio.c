/* SPDX-License-Identifier: MIT */
/*
 * tools/bench/procio.c - the bytes this process has sent towards storage,
 * as the kernel counts them (/proc/self/io "write_bytes").
 *
 * Why this counter: a journaled engine's disk traffic is its side log,
 * the moves into LMDB and the checkpoint folds, written by three threads
 * at their own pace; write_bytes adds up every page any thread of the
 * process dirtied (each page once per dirtying, whoever writes it back),
 * so a phase's delta is the storage traffic caused while it ran, whatever
 * batch it belongs to, and a whole run's delta over the records journaled
 * is its write amplification. "wchar" would count system call bytes, not
 * pages reaching the disk, and miss nothing LMDB rewrites in place.
 *
 * Kernels without task I/O accounting have no such line: the reader then
 * says so (BENCH_NO_IO) and the workloads leave the figure out.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/bench/bench.h"

uint64_t bench_parse_write_bytes(const char *text)
{
	static const char field[] = "write_bytes:";
	const char *p = text;

	while (p && *p) {
		if (!strncmp(p, field, sizeof(field) - 1)) {
			char *end;
			unsigned long long v;

			p += sizeof(field) - 1;
			v = strtoull(p, &end, 10);
			if (end == p || (*end && *end != '\n'))
				return BENCH_NO_IO;
			return (uint64_t)v;
		}
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	return BENCH_NO_IO;
}

uint64_t bench_write_bytes(void)
{
	char buf[1024];
	size_t n;
	FILE *f = fopen("/proc/self/io", "r");

	if (!f)
		return BENCH_NO_IO;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	return bench_parse_write_bytes(buf);
}

uint64_t bench_written_since(uint64_t from)
{
	uint64_t now = bench_write_bytes();

	return from == BENCH_NO_IO || now == BENCH_NO_IO ? BENCH_NO_IO :
							   now - from;
}
