/* SPDX-License-Identifier: MIT */
/*
 * tools/bench/syncprobe.h - the group-commit ceiling probe (syncprobe.c).
 */
#ifndef KVF_TOOLS_BENCH_SYNCPROBE_H
#define KVF_TOOLS_BENCH_SYNCPROBE_H

#include "tools/bench/bench.h"

/* What one probe run measured. */
struct bench_syncprobe {
	uint64_t ns;	  /* wall time of the run */
	uint64_t batches; /* batches done, over all threads */
	uint64_t syncs;	  /* fdatasync() calls */
	uint64_t sync_ns; /* mean fdatasync() duration */
};

/*
 * bench_syncprobe_run() - @threads synchronous callers, @batches batches
 * in all: each batch is @work_ns of busy CPU work, a pwrite() of
 * @frame_bytes into DIR/syncprobe.dat and a wait for a group fdatasync()
 * covering it (see syncprobe.c). The file is removed afterwards.
 *
 * Returns 0 or an errno value (the first failed write or sync).
 * Context: blocks (threads, file I/O); not thread-safe against another
 * probe on the same @dir.
 */
int bench_syncprobe_run(const char *dir, unsigned threads, uint64_t work_ns,
			size_t frame_bytes, uint64_t batches,
			struct bench_syncprobe *out);

#endif
