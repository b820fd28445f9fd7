/* SPDX-License-Identifier: MIT */
/*
 * tools/bench/main.c - kvforge-bench: options, workloads, output.
 *
 * Every workload but "master" (which drives a running master over its RPC
 * protocol) runs against an embedded engine in this process and
 * records its figures through bench_result(); this file parses options,
 * runs the chosen workload and prints a table or one JSON object.
 */
#include "config.h"

#include <dirent.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tools/bench/bench.h"
#include "tools/bench/results.h"

static const struct bench_workload workloads[] = {
	{ "hicache", "fill HiCache-shaped objects, then batch exist/get/remove",
	  bench_hicache },
	{ "placement", "placement strategies x size mixes: utilisation, churn",
	  bench_placement },
	{ "durability", "put throughput per durability mode, 1 and 2 threads",
	  bench_durability },
	{ "recovery", "fill, close, time kvf_engine_open (log tail, image)",
	  bench_recovery },
	{ "cleanup", "expire a client of 8 under a batch_get reader: stall?",
	  bench_cleanup },
	{ "evict", "one eviction pass at 100K/1M/4M objects (or sizes given)",
	  bench_evict },
	{ "master", "Mooncake RPC batch put/get/exist/remove against --master",
	  bench_master },
	{ "trace", "replay a Mooncake trace (--trace) as SGLang HiCache does",
	  bench_trace },
};

#define NR_WORKLOADS (sizeof(workloads) / sizeof(workloads[0]))

uint64_t bench_rss_bytes(void)
{
	long pages = 0, resident = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (!f)
		return 0;
	if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
		resident = 0;
	fclose(f);
	return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

void bench_result_op(struct bench_results *r, const char *op, uint64_t keys,
		     uint64_t ns, double *lat_us, size_t n)
{
	bench_result(r, op, "keys_per_sec", (double)keys * 1e9 / (double)ns);
	bench_result(r, op, "ns_per_key", (double)ns / (double)keys);
	bench_result(r, op, "p50_us", bench_quantile(lat_us, n, 0.50));
	bench_result(r, op, "p99_us", bench_quantile(lat_us, n, 0.99));
	bench_latency_dump(op, lat_us, n); /* sorted by bench_quantile */
}

static uint64_t splitmix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

size_t bench_hicache_key(char *buf, size_t cap, uint64_t id)
{
	/* A page's 64-hex hash, then the rank and the k/v half. */
	uint64_t page = id / 16;
	int n = snprintf(buf, cap, "%016llx%016llx%016llx%016llx_%u_%c",
			 (unsigned long long)splitmix(page * 4),
			 (unsigned long long)splitmix(page * 4 + 1),
			 (unsigned long long)splitmix(page * 4 + 2),
			 (unsigned long long)splitmix(page * 4 + 3),
			 (unsigned)(id % 16 / 2), id % 2 ? 'v' : 'k');

	return n < 0 ? 0 : (size_t)n;
}

int bench_mount_segments(struct kvf_engine *e, uint64_t objects,
			 const char *prefix)
{
	uint64_t per = (objects * (5ULL << 20)) / BENCH_SEGMENTS;
	int ret = KVF_OK;

	per = per < (1ULL << 30) ? (1ULL << 30) : per;
	for (uint64_t i = 0; i < BENCH_SEGMENTS && !ret; i++) {
		char name[48];
		struct kvf_segment_desc d = { .id = i + 1, .name = name,
					      .base = (i + 1) << 50,
					      .size = per,
					      .endpoint = "10.0.0.1:17812" };

		snprintf(name, sizeof(name), "%s-%llu", prefix,
			 (unsigned long long)i);
		ret = kvf_segment_mount(e, 1, &d);
	}
	return ret;
}

void bench_engine_config(const struct bench_opts *o, struct kvf_config *cfg)
{
	kvf_config_init(cfg);
	cfg->durability = o->durability;
	cfg->data_dir = o->durability == KVF_DURABILITY_NONE ? NULL :
							     o->data_dir;
	cfg->index = o->index;
	cfg->placement = o->placement;
	cfg->eviction_order = o->eviction_order;
	cfg->expected_objects = o->objects;
	cfg->seed = o->seed;
	if (o->sync_ms)
		cfg->sync_interval_ms = o->sync_ms;
	cfg->journal_writemap = o->writemap;
	cfg->journal_checkpoint_records = o->checkpoint_records;
	/* Benchmarks call from one client that never heartbeats. */
	cfg->client_ttl_ms = 24ULL * 3600 * 1000;
}

void bench_wipe_dir(const struct bench_opts *o, const char *dir)
{
	static const char *const files[] = { "data.mdb", "lock.mdb",
					     "wal-0.log", "wal-1.log" };
	char path[4096];

	if (o->keep_data || !dir)
		return;
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
		unlink(path);
	}
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: kvforge-bench [options]\n"
		"  --workload NAME     workload to run (default hicache)\n"
		"  --objects N         objects (default 1000000)\n"
		"  --batch N           keys per batch (default 128)\n"
		"  --threads N         client threads (default 1)\n"
		"  --seed N            random seed (default 42)\n"
		"  --rounds N          rounds, where a workload repeats (default 3)\n"
		"  --durability MODE   none | bounded | strict (default bounded\n"
		"                      with --data-dir, else none)\n"
		"  --data-dir DIR      journal directory (default ./kvforge-data)\n"
		"  --keep-data         do not wipe the journal first\n"
		"  --sync-ms N         bounded mode's sync interval, ms\n"
		"                      (default: the engine's, 50)\n"
		"  --writemap          bounded journal through MDB_WRITEMAP\n"
		"                      (kvf_config.journal_writemap)\n"
		"  --checkpoint-records N  fold the journal's log into its\n"
		"                      image every N records, or half the\n"
		"                      image's objects if more (default: the\n"
		"                      engine's, 1000000;\n"
		"                      kvf_config.journal_checkpoint_records)\n"
		"  --pin               bind client thread i to CPU i\n"
		"  --index KIND        bucket | lfht (default bucket)\n"
		"  --placement NAME    fragmentation_aware | random |\n"
		"                      free_ratio_first\n"
		"  --eviction-order O  prefix | age: which evictable objects\n"
		"                      go first (default prefix)\n"
		"  --profile           add the per-stage profile\n"
		"  --json              one JSON object instead of a table\n"
		"  --latency-dump FILE per-batch latencies per op (for plots)\n"
		"  --keys MODE         request: each batch's keys copied into one\n"
		"                      request buffer, as a master receives them\n"
		"                      (default); scattered: pointers into the\n"
		"                      whole cold key pool\n"
		"  --master HOST:PORT  drive a running Mooncake master over RPC\n"
		"                      (kvforge-master or mooncake_master;\n"
		"                      selects --workload master);\n"
		"                      etcd://HOST:PORT[;HOST:PORT]: the HA\n"
		"                      leader of $MC_STORE_CLUSTER_ID, followed\n"
		"                      across failovers\n"
		"  --connections N     master: connections, one thread each (1)\n"
		"  --depth N           master: batch RPCs in flight per\n"
		"                      connection (default 4)\n"
		"  --seconds S         master: run get and exist S seconds each\n"
		"                      (default: --rounds passes over the keys)\n"
		"  --phases LIST       master: the phases run, of put,get,exist,\n"
		"                      remove, in that order (default all;\n"
		"                      get and exist need put)\n"
		"  --rate KEYS         master: offer KEYS keys/s in all, on a\n"
		"                      fixed schedule (default: as fast as the\n"
		"                      pipelines allow)\n"
		"  --mooncake-abi NAME master: the Mooncake revision spoken\n"
		"                      (default latest; also v0.3.12.post1)\n"
		"  --transport T       master: tcp (default) or rdma (coro_rpc's\n"
		"                      RDMA handshake on each connection; needs\n"
		"                      an RDMA device)\n"
		"  --trace FILE        trace: a Mooncake request trace (JSON\n"
		"                      lines; tools/bench/traces/)\n"
		"  --speed X           trace: X times the trace's own pace;\n"
		"                      0 = as fast as possible (default 0)\n"
		"  --copies N          trace: N copies, disjoint block ids,\n"
		"                      interleaved by time (default 1)\n"
		"  --capacity F        trace: room for a fraction F of the\n"
		"                      trace's unique blocks (default 1: all)\n"
		"  --segments N        trace: segments the room is split into\n"
		"                      (default 1)\n"
		"  --segment-size B    trace: each segment's bytes (K/M/G/T:\n"
		"                      binary), instead of --capacity\n"
		"  --tp N              trace: tensor-parallel ranks; a page is\n"
		"                      2 N keys, K and V per rank (default 1)\n"
		"  --page-tokens N     trace: tokens per page, one trace block\n"
		"                      (default 512)\n"
		"  --kv-bytes-per-token N  trace: KV bytes per token, all ranks\n"
		"                      (default 131072: 32 layers x K,V x 8\n"
		"                      heads x 128 x bf16)\n"
		"  --list              list workloads\n"
		"or:    kvforge-bench compare --help   (paired A/B runs)\n");
}

static int parse_enum(const char *arg, const char *const *names, int n)
{
	for (int i = 0; i < n; i++)
		if (names[i] && !strcmp(arg, names[i]))
			return i;
	fprintf(stderr, "kvforge-bench: unknown value '%s'\n", arg);
	exit(2);
}

static uint64_t parse_u64(const char *arg)
{
	char *end;
	unsigned long long v = strtoull(arg, &end, 10);

	if (*end == 'k' || *end == 'K')
		v *= 1000, end++;
	else if (*end == 'm' || *end == 'M')
		v *= 1000000, end++;
	if (*end || end == arg) {
		fprintf(stderr, "kvforge-bench: not a number: '%s'\n", arg);
		exit(2);
	}
	return v;
}

static double parse_seconds(const char *arg)
{
	char *end;
	double v = strtod(arg, &end);

	if (*end || end == arg || v < 0) {
		fprintf(stderr, "kvforge-bench: not a duration: '%s'\n", arg);
		exit(2);
	}
	return v;
}

/* A size: a number with an optional binary K, M, G or T suffix. */
static uint64_t parse_bytes(const char *arg)
{
	char *end;
	unsigned long long v = strtoull(arg, &end, 10);
	const char *units = "KMGT", *u = *end ? strchr(units, *end) : NULL;

	if (u && !end[1])
		v <<= 10 * (u - units + 1);
	if (end == arg || (*end && (!u || end[1]))) {
		fprintf(stderr, "kvforge-bench: not a size: '%s'\n", arg);
		exit(2);
	}
	return v;
}

/* A finite number >= 0. */
static double parse_double(const char *arg)
{
	char *end;
	double v = strtod(arg, &end);

	if (*end || end == arg || !(v >= 0) || isinf(v)) {
		fprintf(stderr, "kvforge-bench: not a number >= 0: '%s'\n",
			arg);
		exit(2);
	}
	return v;
}

static const char *const durability_names[] = { "bounded", "strict", "none" };
static const char *const index_names[] = { "lfht", "bucket" };
static const char *const key_mode_names[] = { "request", "scattered" };
static const char *const transport_names[] = { "tcp", "rdma" };
static const char *const placement_names[] = { "fragmentation_aware", "random",
						"free_ratio_first" };
static const char *const eviction_order_names[] = { "prefix", "age" };

static void parse_options(int argc, char **argv, struct bench_opts *o)
{
	static const struct option longopts[] = {
		{ "workload", required_argument, NULL, 'w' },
		{ "objects", required_argument, NULL, 'n' },
		{ "batch", required_argument, NULL, 'b' },
		{ "threads", required_argument, NULL, 't' },
		{ "seed", required_argument, NULL, 's' },
		{ "rounds", required_argument, NULL, 'r' },
		{ "durability", required_argument, NULL, 'd' },
		{ "data-dir", required_argument, NULL, 'D' },
		{ "keep-data", no_argument, NULL, 'K' },
		{ "sync-ms", required_argument, NULL, 'S' },
		{ "writemap", no_argument, NULL, 'W' },
		{ "pin", no_argument, NULL, 'C' },
		{ "index", required_argument, NULL, 'i' },
		{ "placement", required_argument, NULL, 'p' },
		{ "eviction-order", required_argument, NULL, 'E' },
		{ "profile", no_argument, NULL, 'P' },
		{ "json", no_argument, NULL, 'j' },
		{ "list", no_argument, NULL, 'l' },
		{ "latency-dump", required_argument, NULL, 'L' },
		{ "keys", required_argument, NULL, 'k' },
		{ "master", required_argument, NULL, 'M' },
		{ "connections", required_argument, NULL, 'c' },
		{ "depth", required_argument, NULL, 'e' },
		{ "seconds", required_argument, NULL, 'T' },
		{ "mooncake-abi", required_argument, NULL, 'A' },
		{ "rate", required_argument, NULL, 'R' },
		{ "transport", required_argument, NULL, 'X' },
		{ "trace", required_argument, NULL, 1000 },
		{ "speed", required_argument, NULL, 1001 },
		{ "copies", required_argument, NULL, 1002 },
		{ "capacity", required_argument, NULL, 1003 },
		{ "segments", required_argument, NULL, 1004 },
		{ "segment-size", required_argument, NULL, 1005 },
		{ "tp", required_argument, NULL, 1006 },
		{ "page-tokens", required_argument, NULL, 1007 },
		{ "kv-bytes-per-token", required_argument, NULL, 1008 },
		{ "phases", required_argument, NULL, 1009 },
		{ "checkpoint-records", required_argument, NULL, 1010 },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 'w': o->workload = optarg; break;
		case 'n': o->objects = parse_u64(optarg); break;
		case 'b': o->batch = (uint32_t)parse_u64(optarg); break;
		case 't': o->threads = (uint32_t)parse_u64(optarg); break;
		case 's': o->seed = parse_u64(optarg); break;
		case 'r': o->rounds = (uint32_t)parse_u64(optarg); break;
		case 'd':
			o->durability = parse_enum(optarg, durability_names, 3);
			o->durability_set = true;
			break;
		case 'D': o->data_dir = optarg; break;
		case 'K': o->keep_data = true; break;
		case 'S': o->sync_ms = (uint32_t)parse_u64(optarg); break;
		case 'W': o->writemap = true; break;
		case 'C': o->pin = true; break;
		case 'i': o->index = parse_enum(optarg, index_names, 2); break;
		case 'p':
			o->placement = parse_enum(optarg, placement_names, 3);
			break;
		case 'E':
			o->eviction_order =
				parse_enum(optarg, eviction_order_names, 2);
			break;
		case 'P': o->profile = true; break;
		case 'L': bench_latency_dump_to(optarg); break;
		case 'k':
			o->scattered_keys =
				parse_enum(optarg, key_mode_names, 2) == 1;
			break;
		case 'j': o->json = true; break;
		case 'M': o->master = optarg; break;
		case 'c': o->connections = (uint32_t)parse_u64(optarg); break;
		case 'e': o->depth = (uint32_t)parse_u64(optarg); break;
		case 'T': o->seconds = parse_seconds(optarg); break;
		case 'A': o->mooncake_abi = optarg; break;
		case 'R': o->rate = (double)parse_u64(optarg); break;
		case 'X':
			o->rdma = parse_enum(optarg, transport_names, 2) == 1;
			break;
		case 1000: o->trace = optarg; break;
		case 1001: o->speed = parse_double(optarg); break;
		case 1002: o->copies = (uint32_t)parse_u64(optarg); break;
		case 1003: o->capacity = parse_double(optarg); break;
		case 1004: o->segments = (uint32_t)parse_u64(optarg); break;
		case 1005: o->segment_size = parse_bytes(optarg); break;
		case 1006: o->tp = (uint32_t)parse_u64(optarg); break;
		case 1007: o->page_tokens = (uint32_t)parse_u64(optarg); break;
		case 1008: o->kv_bytes_per_token = parse_u64(optarg); break;
		case 1010: o->checkpoint_records = parse_u64(optarg); break;
		case 1009: o->phases = optarg; break;
		case 'l':
			for (size_t i = 0; i < NR_WORKLOADS; i++)
				printf("%-12s %s\n", workloads[i].name,
				       workloads[i].help);
			exit(0);
		case 'h': usage(stdout); exit(0);
		default: usage(stderr); exit(2);
		}
	}
	o->argc = argc - optind;
	o->argv = argv + optind;
	/* --master names the workload unless one was chosen */
	if (o->master && !o->workload)
		o->workload = "master";
	if (!o->workload)
		o->workload = "hicache";
	if (!o->batch || !o->threads || !o->objects || !o->rounds ||
	    !o->connections || !o->depth || !o->copies || !o->segments ||
	    !o->tp || !o->page_tokens || !o->kv_bytes_per_token) {
		fprintf(stderr, "kvforge-bench: counts must be positive\n");
		exit(2);
	}
}

static void record_config(const struct bench_opts *o, struct bench_results *r)
{
	char buf[64];

	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)o->objects);
	bench_config(r, "objects", buf);
	snprintf(buf, sizeof(buf), "%u", o->batch);
	bench_config(r, "batch", buf);
	snprintf(buf, sizeof(buf), "%u", o->threads);
	bench_config(r, "threads", buf);
	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)o->seed);
	bench_config(r, "seed", buf);
	bench_config(r, "durability", durability_names[o->durability]);
	bench_config(r, "index", index_names[o->index]);
	bench_config(r, "placement", placement_names[o->placement]);
	bench_config(r, "eviction_order",
		     eviction_order_names[o->eviction_order]);
	bench_config(r, "keys", key_mode_names[o->scattered_keys]);
	if (o->durability != KVF_DURABILITY_NONE)
		bench_config(r, "data_dir", o->data_dir);
	if (o->sync_ms) {
		snprintf(buf, sizeof(buf), "%u", o->sync_ms);
		bench_config(r, "sync_ms", buf);
	}
	if (o->writemap)
		bench_config(r, "writemap", "yes");
	if (o->checkpoint_records) {
		snprintf(buf, sizeof(buf), "%llu",
			 (unsigned long long)o->checkpoint_records);
		bench_config(r, "checkpoint_records", buf);
	}
	if (o->pin)
		bench_config(r, "pin", "yes");
}

int main(int argc, char **argv)
{
	struct bench_opts o = {
		.connections = 1,
		.depth = 4,
		.objects = 1000000,
		.batch = 128,
		.threads = 1,
		.seed = 42,
		.rounds = 3,
		.durability = KVF_DURABILITY_NONE,
		.index = KVF_INDEX_BUCKET,
		.placement = KVF_PLACEMENT_FRAGMENTATION_AWARE,
		.data_dir = "./kvforge-data",
		.copies = 1,
		.segments = 1,
		.tp = 1,
		.page_tokens = 512,
		.kv_bytes_per_token = 131072,
	};
	struct bench_results r = { 0 };
	const struct bench_workload *w = NULL;
	bool dir_given;
	int ret;

	if (argc > 1 && !strcmp(argv[1], "compare"))
		return bench_compare_main(argc - 1, argv + 1);
	dir_given = false;
	for (int i = 1; i < argc; i++)
		dir_given |= !strncmp(argv[i], "--data-dir", 10);
	parse_options(argc, argv, &o);
	/* A data directory means the journal, unless told otherwise. */
	if (dir_given && !o.durability_set)
		o.durability = KVF_DURABILITY_BOUNDED;
	for (size_t i = 0; i < NR_WORKLOADS; i++)
		if (!strcmp(workloads[i].name, o.workload))
			w = &workloads[i];
	if (!w) {
		fprintf(stderr, "kvforge-bench: unknown workload '%s' (--list)\n",
			o.workload);
		return 2;
	}
	if (o.durability != KVF_DURABILITY_NONE)
		mkdir(o.data_dir, 0755);
	r.workload = w->name;
	record_config(&o, &r);
	ret = w->run(&o, &r);
	if (ret) {
		fprintf(stderr, "kvforge-bench: %s failed: %s\n", w->name,
			kvf_strerror(ret));
		bench_results_free(&r);
		return 1;
	}
	if (o.json)
		bench_render_json(&r, stdout);
	else
		bench_render_text(&r, stdout);
	bench_results_free(&r);
	return 0;
}
