/* SPDX-License-Identifier: MIT */
/*
 * tools/bench/replay.h - a Mooncake request trace and its replay as SGLang
 * HiCache drives a store (--workload trace; replay.c).
 */
#ifndef KVF_TOOLS_BENCH_REPLAY_H
#define KVF_TOOLS_BENCH_REPLAY_H

#include <stddef.h>
#include <stdint.h>

#include "tools/bench/bench.h"

/* A loaded trace: request i asks for ids[first[i] .. first[i] + len[i]). */
struct bench_trace {
	size_t nr_requests;
	uint64_t *ts_ms;  /* arrival, ms after the first; non-decreasing */
	size_t *first;
	uint32_t *len;
	uint32_t max_len; /* the longest request's blocks */
	uint64_t *ids;
	size_t nr_ids;
	uint64_t *unique; /* each distinct id once */
	size_t nr_unique;
	/* Blocks a store with room for everything serves: the prefix blocks
	 * some earlier request asked for. */
	uint64_t reuse_hits;
};

/*
 * Read a trace file (tools/bench/traces/README.md): one JSON object per
 * line with a "timestamp" (ms, non-decreasing) and "hash_ids" (a list of
 * non-negative integers); other members must be numbers; blank lines are
 * skipped. On a malformed line or a trace without requests, @err says why
 * ("FILE:LINE: ..."), @t is left empty and KVF_ERR_INVALID_ARGUMENT is
 * returned; KVF_ERR_IO if the file cannot be read, KVF_ERR_NO_MEMORY.
 */
int bench_trace_load(const char *path, struct bench_trace *t, char *err,
		     size_t errlen);
void bench_trace_free(struct bench_trace *t);

/*
 * Where a replay sends its batches: one function for the four RPCs, with
 * Mooncake's ErrorCodes per item as bench_master_batch() gives them (which
 * is the master target's @batch); @evict (in-process only) makes room for
 * @bytes now; @set_time (in-process only) moves the engine's clock.
 */
struct trace_target {
	int (*batch)(void *ctx, enum bench_rpc op, const struct kvf_key *keys,
		     const uint64_t *sizes, size_t n, int32_t *codes);
	int (*evict)(void *ctx, uint64_t bytes);
	void (*set_time)(void *ctx, uint64_t ns);
	void *ctx;
};

struct trace_params {
	double speed;     /* 0: as fast as possible */
	uint32_t copies;  /* >= 1 */
	uint32_t tp;      /* ranks; 2 * tp keys a block */
	uint64_t key_size; /* bytes of one key's value */
	uint64_t salt;    /* mixed into every key (runs against one master) */
};

#define TRACE_NR_RPCS 4

struct trace_stats {
	uint64_t requests, blocks, hits;
	double request_hit_sum;   /* sum of each request's served fraction */
	uint64_t keys[TRACE_NR_RPCS]; /* keys sent, by enum bench_rpc */
	uint64_t rpc_ns[TRACE_NR_RPCS];
	double *lat_us[TRACE_NR_RPCS]; /* one per call */
	size_t nr_lat[TRACE_NR_RPCS];
	uint64_t put_keys;        /* puts ended */
	uint64_t refused_keys;    /* puts refused for no space, after a retry */
	uint64_t put_errors;      /* puts refused for any other reason */
	uint64_t evict_calls;     /* refused puts that made room and retried */
	uint64_t wall_ns;         /* the replay, pacing included */
	uint64_t live_keys;       /* keys found at the end */
};

/* The target's key count of one block. */
static inline uint32_t trace_keys_per_block(const struct trace_params *p)
{
	return 2 * p->tp;
}

/*
 * Replay @t through @tg: per request (request i of copies 0 .. copies-1,
 * then request i + 1), BatchExistKey of every key of its blocks, then
 * BatchGetReplicaList of the leading blocks whose keys all exist (the
 * prefix served), then BatchPutStart and BatchPutEnd of the missing keys
 * of the blocks from there on. A put refused for space makes room through
 * @tg->evict (when there is one) and is retried once. At the end, a
 * BatchExistKey sweep over every block counts the live keys. Fills @s
 * (free with trace_stats_free()). Returns KVF_OK or the first failed
 * call's error.
 */
int bench_trace_replay(const struct bench_trace *t,
		       const struct trace_params *p,
		       const struct trace_target *tg, struct trace_stats *s);
void trace_stats_free(struct trace_stats *s);

/*
 * An in-process engine as a target: memory only, housekeeping left to the
 * replay (no background thread), its clock the trace's (so leases, 10 s
 * by default, run in trace time whatever the replay's speed), and
 * @segments segments of @segment_size bytes mounted.
 */
struct trace_engine;

int trace_engine_open(const struct bench_opts *o, uint32_t segments,
		      uint64_t segment_size, struct trace_engine **out,
		      struct trace_target *tg);
struct kvf_engine *trace_engine_get(struct trace_engine *te);
void trace_engine_close(struct trace_engine *te);

#endif /* KVF_TOOLS_BENCH_REPLAY_H */
