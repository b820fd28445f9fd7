/* SPDX-License-Identifier: MIT */
/*
 * tools/bench/trace.c - the "trace" workload: a Mooncake request trace
 * (--trace) replayed as SGLang HiCache drives a store (replay.c), against
 * an in-process engine or, with --master, a running Mooncake master
 * through the bench's own client (master.c).
 *
 * Capacity. --capacity F sizes the segments so that a fraction F of the
 * trace's unique blocks (times --copies) fits: floor(F x unique) blocks,
 * as tools/bench/trace-sim.py counts them, split over --segments; absent,
 * everything fits. --segment-size gives each segment's bytes instead.
 * In-process, eviction runs when a put finds no room (the watermark is
 * off), frees what the refused keys need and the put is retried once;
 * against a master, eviction is the master's own.
 *
 * CPU. In-process, this process's CPU time over the replay (the bench's
 * key making included); against a master on this machine, the master's
 * (the process listening on its port, from /proc).
 */
#include "config.h"

#include <dirent.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "tools/bench/bench.h"
#include "tools/bench/replay.h"

static const char *const rpc_names[TRACE_NR_RPCS] = {
	[BENCH_RPC_EXIST] = "batch_exist_key",
	[BENCH_RPC_GET] = "batch_get_replica_list",
	[BENCH_RPC_PUT_START] = "batch_put_start",
	[BENCH_RPC_PUT_END] = "batch_put_end",
};

static double self_cpu_s(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru))
		return NAN;
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* The socket inode listening on TCP @port (IPv4 or IPv6), or 0. */
static unsigned long listen_inode(uint16_t port)
{
	static const char *const files[] = { "/proc/net/tcp",
					     "/proc/net/tcp6" };
	char line[512];

	for (size_t i = 0; i < 2; i++) {
		FILE *f = fopen(files[i], "r");
		unsigned long inode = 0;

		if (!f)
			continue;
		while (!inode && fgets(line, sizeof(line), f)) {
			char local[64];
			unsigned st, lport;
			unsigned long ino;
			char *colon;

			if (sscanf(line,
				   " %*u: %63s %*s %x %*s %*s %*s %*s %*s %lu",
				   local, &st, &ino) != 3)
				continue;
			colon = strrchr(local, ':');
			if (!colon || sscanf(colon + 1, "%x", &lport) != 1)
				continue;
			if (st == 0x0A && lport == port)
				inode = ino;
		}
		fclose(f);
		if (inode)
			return inode;
	}
	return 0;
}

/* The process holding socket @inode, or -1 (not ours to see, or none). */
static long socket_owner(unsigned long inode)
{
	char want[64], path[600], link[64];
	DIR *proc = opendir("/proc");
	struct dirent *d;
	long pid = -1;

	if (!proc)
		return -1;
	snprintf(want, sizeof(want), "socket:[%lu]", inode);
	while (pid < 0 && (d = readdir(proc))) {
		DIR *fds;
		struct dirent *fd;

		if (d->d_name[0] < '1' || d->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/fd", d->d_name);
		fds = opendir(path);
		if (!fds)
			continue;
		while ((fd = readdir(fds))) {
			ssize_t n;

			snprintf(path, sizeof(path), "/proc/%s/fd/%s",
				 d->d_name, fd->d_name);
			n = readlink(path, link, sizeof(link) - 1);
			if (n <= 0)
				continue;
			link[n] = 0;
			if (!strcmp(link, want)) {
				pid = strtol(d->d_name, NULL, 10);
				break;
			}
		}
		closedir(fds);
	}
	closedir(proc);
	return pid;
}

/* The master's pid when it runs on this machine (a loopback --master). */
static long local_master_pid(const char *master)
{
	const char *colon = strrchr(master, ':');
	unsigned long inode;

	if (!colon || (strncmp(master, "127.", 4) &&
		       strncmp(master, "localhost:", 10) &&
		       strncmp(master, "[::1]:", 6)))
		return -1;
	inode = listen_inode((uint16_t)strtoul(colon + 1, NULL, 10));
	return inode ? socket_owner(inode) : -1;
}

/* utime + stime of @pid in seconds, NAN if unreadable. */
static double pid_cpu_s(long pid)
{
	char path[64], buf[1024], *p;
	unsigned long long ut, st;
	FILE *f;
	size_t n;

	if (pid < 0)
		return NAN;
	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	f = fopen(path, "r");
	if (!f)
		return NAN;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	p = strrchr(buf, ')'); /* comm may hold spaces */
	if (!p || sscanf(p + 1,
			 " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu "
			 "%llu",
			 &ut, &st) != 2)
		return NAN;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static void record_config(const struct bench_opts *o,
			  const struct trace_params *p, uint32_t segments,
			  uint64_t seg_size, uint64_t cap_blocks,
			  struct bench_results *r)
{
	char buf[64];

	bench_config(r, "trace", o->trace);
	bench_config(r, "target", o->master ? o->master : "in-process");
	snprintf(buf, sizeof(buf), "%g", o->speed);
	bench_config(r, "speed", buf);
	snprintf(buf, sizeof(buf), "%u", p->copies);
	bench_config(r, "copies", buf);
	snprintf(buf, sizeof(buf), "%g", o->capacity ? o->capacity : 1.0);
	bench_config(r, "capacity", o->segment_size ? "segment-size" : buf);
	snprintf(buf, sizeof(buf), "%" PRIu64, cap_blocks);
	bench_config(r, "capacity_blocks", buf);
	snprintf(buf, sizeof(buf), "%u", segments);
	bench_config(r, "segments", buf);
	snprintf(buf, sizeof(buf), "%" PRIu64, seg_size);
	bench_config(r, "segment_size", buf);
	snprintf(buf, sizeof(buf), "%u", p->tp);
	bench_config(r, "tp", buf);
	snprintf(buf, sizeof(buf), "%u", o->page_tokens);
	bench_config(r, "page_tokens", buf);
	snprintf(buf, sizeof(buf), "%" PRIu64, o->kv_bytes_per_token);
	bench_config(r, "kv_bytes_per_token", buf);
	snprintf(buf, sizeof(buf), "%" PRIu64, p->key_size);
	bench_config(r, "key_size", buf);
}

static void record_rpc(struct bench_results *r, struct trace_stats *s,
		       enum bench_rpc op)
{
	size_t n = s->nr_lat[op];

	if (!n)
		return;
	bench_result(r, rpc_names[op], "calls", (double)n);
	bench_result(r, rpc_names[op], "keys", (double)s->keys[op]);
	bench_result(r, rpc_names[op], "keys_per_sec",
		     (double)s->keys[op] * 1e9 /
			     (double)(s->rpc_ns[op] ? s->rpc_ns[op] : 1));
	bench_result(r, rpc_names[op], "p50_us",
		     bench_quantile(s->lat_us[op], n, 0.50));
	bench_result(r, rpc_names[op], "p99_us",
		     bench_quantile(s->lat_us[op], n, 0.99));
	bench_latency_dump(rpc_names[op], s->lat_us[op], n);
}

static void record(struct bench_results *r, const struct bench_trace *t,
		   const struct trace_params *p, struct trace_stats *s,
		   uint64_t cap_blocks, double cpu_s)
{
	uint64_t put = s->put_keys, evicted = put - s->live_keys, keys = 0;
	double wall = (double)s->wall_ns / 1e9;

	bench_result(r, "trace", "requests", (double)s->requests);
	bench_result(r, "trace", "blocks", (double)s->blocks);
	bench_result(r, "trace", "unique_blocks",
		     (double)t->nr_unique * p->copies);
	bench_result(r, "trace", "capacity_blocks", (double)cap_blocks);
	bench_result(r, "trace", "hits", (double)s->hits);
	bench_result(r, "trace", "hit_ratio",
		     s->blocks ? (double)s->hits / (double)s->blocks : 0.0);
	bench_result(r, "trace", "request_hit_ratio",
		     s->requests ? s->request_hit_sum / (double)s->requests
				 : 0.0);
	bench_result(r, "trace", "reuse_ratio",
		     (double)t->reuse_hits / (double)(t->nr_ids ? t->nr_ids
								: 1));
	bench_result(r, "trace", "puts", (double)put);
	bench_result(r, "trace", "evictions", (double)evicted);
	bench_result(r, "trace", "evicted_bytes",
		     (double)evicted * (double)p->key_size);
	bench_result(r, "trace", "refused_puts", (double)s->refused_keys);
	bench_result(r, "trace", "put_errors", (double)s->put_errors);
	bench_result(r, "trace", "live_keys", (double)s->live_keys);
	for (int i = 0; i < TRACE_NR_RPCS; i++)
		keys += s->keys[i];
	bench_result(r, "trace", "seconds", wall);
	bench_result(r, "trace", "requests_per_sec",
		     (double)s->requests / (wall > 0 ? wall : 1e-9));
	bench_result(r, "trace", "keys_per_sec",
		     (double)keys / (wall > 0 ? wall : 1e-9));
	if (!isnan(cpu_s)) {
		bench_result(r, "trace", "cpu_s_per_1k_requests",
			     cpu_s * 1000.0 / (double)s->requests);
		bench_result(r, "trace", "cpu_us_per_key",
			     cpu_s * 1e6 / (double)(keys ? keys : 1));
	}
	for (int i = 0; i < TRACE_NR_RPCS; i++)
		record_rpc(r, s, (enum bench_rpc)i);
}

/*
 * In-process: the store is consistent when no put is left processing,
 * the objects are the keys the sweep found, the used bytes are theirs
 * (every key one aligned value), and every key put and not found was
 * evicted by the engine.
 */
static void record_consistency(struct bench_results *r, struct kvf_engine *e,
			       const struct trace_stats *s, uint64_t key_size)
{
	struct kvf_engine_stats st;
	uint64_t aligned = (key_size + 63) / 64 * 64;
	bool ok;

	kvf_engine_get_stats(e, &st);
	ok = !st.processing && st.objects == s->live_keys &&
	     st.used_bytes == st.objects * aligned &&
	     st.evicted_objects == s->put_keys - s->live_keys;
	bench_result(r, "trace", "consistent", ok ? 1.0 : 0.0);
	if (!ok)
		bench_note(r,
			   "warning: store inconsistent at the end: %" PRIu64
			   " objects (%" PRIu64 " found), %" PRIu64
			   " processing, %" PRIu64 " bytes used, %" PRIu64
			   " evicted (%" PRIu64 " puts)",
			   st.objects, s->live_keys, st.processing,
			   st.used_bytes, st.evicted_objects, s->put_keys);
}

static int master_batch(void *ctx, enum bench_rpc op,
			const struct kvf_key *keys, const uint64_t *sizes,
			size_t n, int32_t *codes)
{
	return bench_master_batch(ctx, op, keys, sizes, n, codes);
}

int bench_trace(const struct bench_opts *o, struct bench_results *r)
{
	struct trace_params p = { .speed = o->speed,
				  .copies = o->copies,
				  .tp = o->tp };
	struct bench_trace t;
	struct trace_stats s;
	struct trace_target tg = { 0 };
	struct trace_engine *te = NULL;
	struct bench_master *m = NULL;
	uint64_t cap_blocks, seg_size, per_seg;
	uint32_t kpb = trace_keys_per_block(&p);
	double cpu0, cpu1;
	long pid = -1;
	char err[512];
	int ret;

	if (!o->trace) {
		fprintf(stderr, "kvforge-bench: --workload trace needs "
				"--trace FILE (tools/bench/traces/)\n");
		return KVF_ERR_INVALID_ARGUMENT;
	}
	if (o->capacity > 1e6 || (o->segment_size && o->capacity)) {
		fprintf(stderr, "kvforge-bench: --capacity F (0 < F) or "
				"--segment-size, not both\n");
		return KVF_ERR_INVALID_ARGUMENT;
	}
	p.key_size = o->kv_bytes_per_token * o->page_tokens / kpb;
	if (!p.key_size) {
		fprintf(stderr, "kvforge-bench: a page's share per key is 0 "
				"bytes (--kv-bytes-per-token)\n");
		return KVF_ERR_INVALID_ARGUMENT;
	}
	ret = bench_trace_load(o->trace, &t, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "kvforge-bench: %s\n", err);
		return ret;
	}
	cap_blocks = (uint64_t)((o->capacity ? o->capacity : 1.0) *
				(double)(t.nr_unique * p.copies));
	/* whole blocks per segment: one block's keys never straddle two */
	per_seg = (cap_blocks * kpb + o->segments - 1) / o->segments;
	seg_size = o->segment_size ? o->segment_size : per_seg * p.key_size;
	if (o->segment_size)
		cap_blocks = o->segment_size / p.key_size * o->segments / kpb;
	if (!cap_blocks || seg_size < (1u << 20)) {
		fprintf(stderr,
			"kvforge-bench: room for %" PRIu64 " blocks in "
			"segments of %" PRIu64 " bytes: too small (a segment "
			"holds at least 1 MiB)\n",
			cap_blocks, seg_size);
		bench_trace_free(&t);
		return KVF_ERR_INVALID_ARGUMENT;
	}
	record_config(o, &p, o->segments, seg_size, cap_blocks, r);
	if (o->master) {
		if (o->segments != 1)
			bench_note(r, "--master: one segment of the whole "
				      "capacity (--segments ignored)");
		seg_size *= o->segments;
		p.salt = bench_now_ns() ^ ((uint64_t)getpid() << 40);
		ret = bench_master_open(o, seg_size, (size_t)t.max_len * kpb,
					&m);
		tg = (struct trace_target){ .batch = master_batch, .ctx = m };
		pid = local_master_pid(o->master);
	} else {
		ret = trace_engine_open(o, o->segments, seg_size, &te, &tg);
	}
	if (ret)
		goto out;
	cpu0 = o->master ? pid_cpu_s(pid) : self_cpu_s();
	ret = bench_trace_replay(&t, &p, &tg, &s);
	cpu1 = o->master ? pid_cpu_s(pid) : self_cpu_s();
	if (ret)
		goto out;
	record(r, &t, &p, &s, cap_blocks, cpu1 - cpu0);
	if (te)
		record_consistency(r, trace_engine_get(te), &s, p.key_size);
	if (s.put_errors)
		bench_note(r, "warning: %" PRIu64 " puts failed for reasons "
			      "other than space", s.put_errors);
	trace_stats_free(&s);
out:
	bench_master_close(m);
	trace_engine_close(te);
	bench_trace_free(&t);
	return ret;
}
