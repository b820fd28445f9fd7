/* SPDX-License-Identifier: MIT */
/*
 * tools/bench/floor.c - the machine's memory floor for a batched lookup.
 *
 * A batched get can do no better than touching, per key, the cache line of
 * its bucket and the first line of its record, with every miss of a batch
 * overlapped. This probe does exactly that and nothing else: two arrays
 * sized like the engine's own at the run's object count (the bucket table
 * the bucket index presizes, and one record per object at the record size
 * of the run's key length), one random line of each per key, prefetched for
 * the whole batch before any is read. Its ns per key is the floor the
 * engine's operations are quoted against (vs_floor), measured in the same
 * process as the operations, because memory speed here drifts between
 * processes and days far more than between variants.
 *
 * What it touches is a pure function of (sizes, seed): the line indices
 * come from xorshift64*, so two probes with one seed read the same lines.
 *
 * With several client threads the floor is also taken with as many probes
 * at once (threads_ns_per_key, thread_scaling): what this machine's memory
 * gives two threads (two vCPUs may share a core's miss buffers and the
 * host's memory) bounds what the engine's threads can reach.
 */
#include "config.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "metadata/hugemem.h"
#include "metadata/index.h"
#include "metadata/object.h"
#include "tools/bench/bench.h"

#define LINE 64

void bench_floor_sizes(uint64_t objects, size_t key_len,
		       struct bench_floor_sizes *s)
{
	/*
	 * A record is its hook, header, key and one replica (object.h), in
	 * an arena block of the next multiple of 8 (metadata/arena.c).
	 */
	s->record_bytes = (KVF__OBJ_HOOK_SIZE + kvf__object_bytes(key_len, 1) +
			   7) & ~(size_t)7;
	s->records_bytes = objects * s->record_bytes;
	s->table_bytes = kvf__index_bucket_table_bytes(objects);
}

/*
 * Mapped like the engine maps its bucket table and record chunks
 * (metadata/hugemem.c: 2 MiB-aligned, advised for transparent huge
 * pages), so the probe pays the TLB the engine pays: on 4 KiB pages
 * every random line also walked the page tables.
 */
static void *map_touched(uint64_t bytes)
{
	void *p = kvf__huge_alloc(bytes);

	if (!p)
		return NULL;
	/* Fault every page in now: the probe measures misses, not faults. */
	memset(p, 1, bytes);
	return p;
}

int bench_floor_init(struct bench_floor *f, uint64_t objects, size_t key_len)
{
	memset(f, 0, sizeof(*f));
	if (!objects)
		return KVF_ERR_INVALID_ARGUMENT;
	bench_floor_sizes(objects, key_len, &f->sizes);
	f->objects = objects;
	f->table = map_touched(f->sizes.table_bytes);
	f->records = map_touched(f->sizes.records_bytes);
	if (!f->table || !f->records) {
		bench_floor_free(f);
		return KVF_ERR_NO_MEMORY;
	}
	return KVF_OK;
}

void bench_floor_free(struct bench_floor *f)
{
	if (f->table)
		kvf__huge_free(f->table, f->sizes.table_bytes);
	if (f->records)
		kvf__huge_free(f->records, f->sizes.records_bytes);
	memset(f, 0, sizeof(*f));
}

void bench_floor_lines(const struct bench_floor *f, uint64_t *rng,
		       uint64_t *bucket_line, uint64_t *record_line)
{
	uint64_t buckets = f->sizes.table_bytes / LINE;

	*bucket_line = bench_rand(rng) % buckets;
	*record_line = (bench_rand(rng) % f->objects) * f->sizes.record_bytes /
		       LINE;
}

/* One batch: all bucket lines, then all record lines, then read them. */
static uint64_t probe_batch(const struct bench_floor *f, uint64_t *rng,
			    uint32_t n, uint64_t *bl, uint64_t *rl)
{
	const uint8_t *t = f->table, *r = f->records;
	uint64_t sum = 0;

	for (uint32_t i = 0; i < n; i++)
		bench_floor_lines(f, rng, &bl[i], &rl[i]);
	for (uint32_t i = 0; i < n; i++)
		__builtin_prefetch(t + bl[i] * LINE);
	for (uint32_t i = 0; i < n; i++)
		__builtin_prefetch(r + rl[i] * LINE);
	for (uint32_t i = 0; i < n; i++)
		sum += t[bl[i] * LINE] + r[rl[i] * LINE];
	return sum;
}

double bench_floor_measure(const struct bench_floor *f, uint32_t batch,
			   uint64_t keys, uint64_t seed)
{
	uint64_t *bl = malloc(batch * sizeof(*bl));
	uint64_t *rl = malloc(batch * sizeof(*rl));
	uint64_t rng = seed * 0x9e3779b97f4a7c15ULL | 1, t0, ns, done = 0;
	volatile uint64_t sink = 0;

	if (!bl || !rl || !batch || !keys) {
		free(bl);
		free(rl);
		return 0;
	}
	t0 = bench_now_ns();
	while (done < keys) {
		uint32_t n = keys - done < batch ? (uint32_t)(keys - done) :
						   batch;

		sink += probe_batch(f, &rng, n, bl, rl);
		done += n;
	}
	ns = bench_now_ns() - t0;
	(void)sink;
	free(bl);
	free(rl);
	return (double)ns / (double)keys;
}

struct floor_thread {
	pthread_t thread;
	const struct bench_floor *f;
	const struct bench_opts *o;
	int *go; /* 0: wait, 1: run, -1: a sibling could not start */
	unsigned id;
	uint64_t keys, seed;
	double ns;
};

static void *floor_thread_main(void *arg)
{
	struct floor_thread *t = arg;
	int go;

	bench_pin_thread(t->o, t->id);
	while (!(go = __atomic_load_n(t->go, __ATOMIC_ACQUIRE)))
		sched_yield();
	if (go > 0)
		t->ns = bench_floor_measure(t->f, t->o->batch, t->keys,
					    t->seed);
	return NULL;
}

double bench_floor_measure_threads(const struct bench_floor *f,
				   const struct bench_opts *o, unsigned threads,
				   uint64_t keys, uint64_t seed)
{
	struct floor_thread *t = calloc(threads, sizeof(*t));
	unsigned started = 0;
	double rate = 0;
	int go = 0;

	if (!t || !threads || keys < threads) {
		free(t);
		return 0;
	}
	for (; started < threads; started++) {
		t[started] = (struct floor_thread){
			.f = f, .o = o, .go = &go, .id = started,
			.keys = keys / threads, .seed = seed + started * 7919 };
		if (pthread_create(&t[started].thread, NULL, floor_thread_main,
				   &t[started]))
			break;
	}
	__atomic_store_n(&go, started == threads ? 1 : -1, __ATOMIC_RELEASE);
	for (unsigned i = 0; i < started; i++)
		pthread_join(t[i].thread, NULL);
	for (unsigned i = 0; i < started && started == threads; i++)
		rate += t[i].ns > 0 ? 1 / t[i].ns : 0;
	free(t);
	return rate > 0 ? 1 / rate : 0;
}

/* Runs of the probe on each side of the timed operations; median kept. */
#define FLOOR_RUNS_EACH_SIDE 3

void bench_floor_sample(struct bench_floor *f, uint32_t batch,
			uint64_t keys, uint64_t seed)
{
	for (int i = 0; i < FLOOR_RUNS_EACH_SIDE &&
			f->nr_samples < BENCH_FLOOR_MAX_SAMPLES;
	     i++)
		f->samples[f->nr_samples++] =
			bench_floor_measure(f, batch, keys, seed + i);
}

void bench_floor_sample_all(struct bench_floor *f, const struct bench_opts *o,
			    uint64_t keys)
{
	bench_floor_sample(f, o->batch, keys, o->seed);
	if (o->threads < 2)
		return;
	f->threads = o->threads;
	for (int i = 0; i < FLOOR_RUNS_EACH_SIDE &&
			f->nr_thread_samples < BENCH_FLOOR_MAX_SAMPLES;
	     i++) {
		double ns = bench_floor_measure_threads(f, o, o->threads, keys,
							o->seed + i);

		if (ns > 0)
			f->thread_samples[f->nr_thread_samples++] = ns;
	}
}

double bench_floor_result(struct bench_floor *f)
{
	if (!f->nr_samples)
		return 0;
	return bench_quantile(f->samples, f->nr_samples, 0.5);
}

void bench_floor_report(struct bench_results *r, double floor_ns,
			const char *const *ops, size_t nr_ops)
{
	if (floor_ns <= 0)
		return;
	bench_result(r, "floor", "ns_per_key", floor_ns);
	bench_extra(r, "floor_ns_per_key", floor_ns);
	for (size_t i = 0; i < nr_ops; i++) {
		double ns = bench_result_get(r, ops[i], "ns_per_key");

		if (ns > 0)
			bench_result(r, ops[i], "vs_floor", ns / floor_ns);
	}
}

void bench_floor_report_threads(struct bench_results *r, struct bench_floor *f)
{
	double one = bench_floor_result(f), all;

	if (!f->nr_thread_samples || one <= 0)
		return;
	all = bench_quantile(f->thread_samples, f->nr_thread_samples, 0.5);
	bench_result(r, "floor", "threads_ns_per_key", all);
	bench_result(r, "floor", "thread_scaling", one / all);
}
