/* SPDX-License-Identifier: MIT */
/*
 * tools/bench/bench.h - the kvforge-bench framework.
 *
 * A workload is a function that reads the parsed options and records named
 * results; main.c renders them as a table or as one JSON object:
 *   {"workload": ..., "config": {...}, "results": {...}, <extras>}
 * A result is (group, metric, value): with a group it lands at
 * results.<group>.<metric>, without one at results.<metric>. Extras are
 * top-level numbers (e.g. bytes_per_object).
 */
#ifndef KVF_TOOLS_BENCH_H
#define KVF_TOOLS_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <kvforge.h>

struct bench_opts {
	const char *workload;
	uint64_t objects;        /* --objects, default 1000000 */
	uint32_t batch;          /* --batch, default 128 */
	uint32_t threads;        /* --threads, default 1 */
	uint64_t seed;           /* --seed, default 42 */
	uint32_t rounds;         /* --rounds, default 3 (workload-specific) */
	enum kvf_durability durability; /* --durability none|bounded|strict */
	bool durability_set;     /* --durability was given */
	enum kvf_index_kind index;      /* --index lfht|bucket */
	enum kvf_placement_strategy placement; /* --placement ... */
	enum kvf_eviction_order eviction_order; /* --eviction-order */
	const char *data_dir;    /* --data-dir; default ./kvforge-data */
	uint32_t sync_ms;        /* --sync-ms; 0 = the engine's default */
	uint64_t checkpoint_records; /* --checkpoint-records; 0 = default */
	bool writemap;           /* --writemap */
	bool pin;                /* --pin: client thread i on CPU i */
	bool json;               /* --json */
	bool profile;            /* --profile */
	bool keep_data;          /* --keep-data: do not wipe data_dir first */
	bool scattered_keys;     /* --keys scattered (default: request) */
	const char *master;      /* --master HOST:PORT (workload "master") */
	bool rdma;               /* --transport rdma (default tcp) */
	uint32_t connections;    /* --connections, default 1 */
	uint32_t depth;          /* --depth: batch RPCs in flight per connection */
	double seconds;          /* --seconds: timed phases; 0 = by --rounds */
	double rate;             /* --rate: keys/s offered; 0 = closed loop */
	const char *mooncake_abi; /* --mooncake-abi; NULL = the newest */
	const char *phases;      /* --phases: master phases run; NULL = all */
	/* --workload trace (trace.c; defaults in docs/benchmarks.md) */
	const char *trace;       /* --trace FILE */
	double speed;            /* --speed X: X times the trace's pace; 0 = flat out */
	uint32_t copies;         /* --copies N: disjoint copies interleaved */
	double capacity;         /* --capacity F of the unique blocks; 0 = all */
	uint32_t segments;       /* --segments N (default 1) */
	uint64_t segment_size;   /* --segment-size BYTES; 0 = from --capacity */
	uint32_t tp;             /* --tp N: ranks, keys per page = 2 N */
	uint32_t page_tokens;    /* --page-tokens N: tokens per trace block */
	uint64_t kv_bytes_per_token; /* --kv-bytes-per-token N (all ranks) */
	int argc;                /* unparsed, workload-specific arguments */
	char **argv;
};

struct bench_results;

/* Record results.<group>.<metric> = value (group may be NULL). */
void bench_result(struct bench_results *r, const char *group,
		  const char *metric, double value);
/* The last value recorded for results.<group>.<metric>, or NAN. */
double bench_result_get(const struct bench_results *r, const char *group,
			const char *metric);
/* Record a top-level number next to "results". */
void bench_extra(struct bench_results *r, const char *name, double value);
/* Record a config entry shown under "config" (string value). */
void bench_config(struct bench_results *r, const char *name,
		  const char *value);
/* Render @p's stage table into the results (for --profile). */
void bench_capture_profile(struct bench_results *r, struct kvf_profiler *p);
/* Text printed verbatim after the table (not in JSON); may be NULL. */
void bench_note(struct bench_results *r, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * Record results.<op>.{keys_per_sec, ns_per_key, p50_us, p99_us} for @keys
 * keys done in @ns of wall time, from @n per-batch latencies (sorted in
 * place).
 */
void bench_result_op(struct bench_results *r, const char *op, uint64_t keys,
		     uint64_t ns, double *lat_us, size_t n);

/* Helpers shared by workloads. */
uint64_t bench_now_ns(void);
/* Sleep until bench_now_ns() reaches @ns (CLOCK_MONOTONIC). */
void bench_sleep_until(uint64_t ns);
/* With --pin, bind the calling client thread @i to CPU i (mod CPUs). */
void bench_pin_thread(const struct bench_opts *o, unsigned i);
uint64_t bench_rss_bytes(void);
/*
 * Storage traffic of this process (procio.c): bytes of pages its threads
 * dirtied so far (/proc/self/io write_bytes), or BENCH_NO_IO where the
 * kernel does not count them; bench_written_since() the bytes since a
 * reading @from (BENCH_NO_IO if either reading is missing).
 * bench_parse_write_bytes() reads that field out of the file's text.
 */
#define BENCH_NO_IO UINT64_MAX
uint64_t bench_write_bytes(void);
uint64_t bench_written_since(uint64_t from);
uint64_t bench_parse_write_bytes(const char *text);
/* xorshift64*; state must be non-zero. */
uint64_t bench_rand(uint64_t *state);
/* A multiplier coprime to @n (> 0): x -> x * a % n permutes [0, n). */
uint64_t bench_coprime_step(uint64_t n);
/* Sorts @v in place and returns the q-quantile (0..1) of n values. */
double bench_quantile(double *v, size_t n, double q);
/* Fill buf with a HiCache-shaped key: 64 hex chars + "_<rank>_k|v". */
size_t bench_hicache_key(char *buf, size_t cap, uint64_t id);
/*
 * Mount BENCH_SEGMENTS virtual segments for client 1, sized for @objects
 * values of up to 4 MB with slack (at least 1 GiB each), named
 * "<@prefix>-<n>". Nothing is touched: the engine never maps segments.
 */
#define BENCH_SEGMENTS 16
int bench_mount_segments(struct kvf_engine *e, uint64_t objects,
			 const char *prefix);
/* Default engine config from the options (durability, index, ...). */
void bench_engine_config(const struct bench_opts *o, struct kvf_config *cfg);
/* Remove a data directory's journal files (unless --keep-data). */
void bench_wipe_dir(const struct bench_opts *o, const char *dir);

/*
 * The machine's memory floor (floor.c): per key, one random bucket line and
 * one random record line in arrays sized like the engine's at the run's
 * object count, every miss of a batch overlapped. Workloads sample it on
 * both sides of their timed operations and quote each operation against
 * the median (results.<op>.vs_floor, results.floor.ns_per_key).
 */
struct bench_floor_sizes {
	uint64_t table_bytes;   /* the bucket index's presized table */
	uint64_t record_bytes;  /* one record: hook, header, key, a replica */
	uint64_t records_bytes; /* objects * record_bytes */
};

#define BENCH_FLOOR_MAX_SAMPLES 8

struct bench_floor {
	struct bench_floor_sizes sizes;
	uint64_t objects;
	void *table, *records;
	double samples[BENCH_FLOOR_MAX_SAMPLES];
	size_t nr_samples;
	/* With --threads N > 1: N probes at once, aggregate ns per key. */
	double thread_samples[BENCH_FLOOR_MAX_SAMPLES];
	size_t nr_thread_samples;
	unsigned threads;
};

void bench_floor_sizes(uint64_t objects, size_t key_len,
		       struct bench_floor_sizes *s);
/* Map and fault in both arrays. KVF_OK, or an error with @f empty. */
int bench_floor_init(struct bench_floor *f, uint64_t objects, size_t key_len);
void bench_floor_free(struct bench_floor *f);
/* The next key's bucket line and record line (deterministic in *@rng). */
void bench_floor_lines(const struct bench_floor *f, uint64_t *rng,
		       uint64_t *bucket_line, uint64_t *record_line);
/* ns per key of one probe over @keys keys in batches of @batch. */
double bench_floor_measure(const struct bench_floor *f, uint32_t batch,
			   uint64_t keys, uint64_t seed);
/* Add a few probe runs to @f's samples (call before and after timing). */
void bench_floor_sample(struct bench_floor *f, uint32_t batch, uint64_t keys,
			uint64_t seed);
/*
 * Aggregate ns per key of @threads probes running at once (thread i on
 * CPU i with --pin), each over @keys / @threads keys: 1 / sum of their
 * rates. What the machine's memory gives a client thread count.
 */
double bench_floor_measure_threads(const struct bench_floor *f,
				   const struct bench_opts *o, unsigned threads,
				   uint64_t keys, uint64_t seed);
/*
 * bench_floor_sample() and, with @o->threads > 1, as many runs of the
 * @o->threads-thread probe (results.floor.threads_ns_per_key).
 */
void bench_floor_sample_all(struct bench_floor *f, const struct bench_opts *o,
			    uint64_t keys);
/* Median of the samples, 0 when there are none. */
double bench_floor_result(struct bench_floor *f);
/* Record the floor and every listed op's vs_floor (ns_per_key / floor). */
void bench_floor_report(struct bench_results *r, double floor_ns,
			const char *const *ops, size_t nr_ops);
/*
 * With thread samples: results.floor.threads_ns_per_key (their median)
 * and results.floor.thread_scaling, the one-thread floor over it (how
 * many times one thread's keys per second the threads' probes reach).
 */
void bench_floor_report_threads(struct bench_results *r, struct bench_floor *f);

typedef int (*bench_workload_fn)(const struct bench_opts *o,
				 struct bench_results *r);

struct bench_workload {
	const char *name;
	const char *help;
	bench_workload_fn run;
};

/* Workloads (one file each). */
int bench_hicache(const struct bench_opts *o, struct bench_results *r);
int bench_placement(const struct bench_opts *o, struct bench_results *r);
int bench_durability(const struct bench_opts *o, struct bench_results *r);
int bench_recovery(const struct bench_opts *o, struct bench_results *r);
int bench_cleanup(const struct bench_opts *o, struct bench_results *r);
int bench_evict(const struct bench_opts *o, struct bench_results *r);
int bench_master(const struct bench_opts *o, struct bench_results *r);
int bench_trace(const struct bench_opts *o, struct bench_results *r);

/*
 * One client of a running master (master.c), for workloads that drive it
 * call by call (--workload trace --master): ServiceReady, a fake segment
 * of @seg_size bytes mounted (rounded up to 4 MiB), a ping thread; batch
 * RPCs of up to @max_keys keys. Prints why it failed on stderr.
 */
struct bench_master;

enum bench_rpc {
	BENCH_RPC_EXIST,     /* BatchExistKey */
	BENCH_RPC_GET,       /* BatchGetReplicaList */
	BENCH_RPC_PUT_START, /* BatchPutStart (@sizes) */
	BENCH_RPC_PUT_END,   /* BatchPutEnd */
};

/* Mooncake ErrorCodes the workloads look at. */
#define BENCH_MC_NO_AVAILABLE_HANDLE (-200)
#define BENCH_MC_OBJECT_NOT_FOUND (-704)
#define BENCH_MC_OBJECT_ALREADY_EXISTS (-705)

int bench_master_open(const struct bench_opts *o, uint64_t seg_size,
		      size_t max_keys, struct bench_master **out);
/*
 * One batch RPC; @codes[i] receives item i's ErrorCode (0: done; for
 * BENCH_RPC_EXIST, 0 means the key exists, BENCH_MC_OBJECT_NOT_FOUND
 * that it does not). Returns 0, or KVF_ERR_IO when the call failed.
 */
int bench_master_batch(struct bench_master *m, enum bench_rpc op,
		       const struct kvf_key *keys, const uint64_t *sizes,
		       size_t n, int32_t *codes);
/* Unmount, stop pinging, disconnect; NULL is ignored. */
void bench_master_close(struct bench_master *m);

/* "kvforge-bench compare ..." (compare.c); argv[0] is "compare". */
int bench_compare_main(int argc, char **argv);
/*
 * Latency CDF for profiling/scripts/plots.sh (compare.c): --latency-dump
 * FILE calls bench_latency_dump_to(FILE); bench_latency_dump() appends an
 * op's sorted per-batch latencies (us) to it, or to the file named by
 * $KVF_BENCH_LATENCY_DUMP; without either it does nothing.
 */
void bench_latency_dump_to(const char *path);
void bench_latency_dump(const char *op, const double *sorted_us, size_t n);

#endif /* KVF_TOOLS_BENCH_H */
