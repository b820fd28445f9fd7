/* SPDX-License-Identifier: MIT */
/*
 * tools/prof-overhead.c - kvf-prof-overhead: what profiling costs.
 *
 *   tools/kvf-prof-overhead [--objects N] [--batch B] [--rounds R]
 *                          [--batches S] [--sample every|adaptive]
 *
 * Fills an in-memory engine, then for get, exist and a put+remove cycle
 * runs R rounds of S batches with profiling off and on, interleaved in
 * one process (off on on off ...), because memory speed here drifts more
 * between processes than the effect being measured. Reports the mean
 * paired difference (on - off) of the time per batch, with its 95%
 * interval (tools/lib/stats.c). "Off" cost, which is the inline check in
 * stage.h, cannot be compared against a build without hooks in one
 * process, so it is measured directly: a span with every mark, profiling
 * off, in a tight loop, against the batch time.
 *
 * A benchmark tool: never run by make check.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvforge.h>

#include "profiling/stage.h"
#include "profiling/tier.h"
#include "tools/lib/stats.h"

#define KEY_LEN 68

struct ctx {
	struct kvf_engine *e;
	uint64_t objects;
	unsigned batch;
	unsigned rounds;
	unsigned batches;
	char *keybuf;	      /* objects + churn keys */
	struct kvf_key *keys; /* objects, then batch * batches churn keys */
	uint64_t *sizes;
	struct kvf_replicas *out;
	enum kvf_status *st;
	uint64_t rng;
};

static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

static int make_keys(struct ctx *c)
{
	size_t n = c->objects + (size_t)c->batch * c->batches;

	c->keybuf = malloc(n * KEY_LEN);
	c->keys = calloc(n, sizeof(*c->keys));
	c->sizes = calloc(c->batch, sizeof(*c->sizes));
	c->out = calloc(c->batch, sizeof(*c->out));
	c->st = calloc(c->batch, sizeof(*c->st));
	if (!c->keybuf || !c->keys || !c->sizes || !c->out || !c->st)
		return -1;
	for (size_t i = 0; i < n; i++) {
		char *k = c->keybuf + i * KEY_LEN;
		char tmp[KEY_LEN + 1];

		snprintf(tmp, sizeof(tmp), "%016llx%016llx%016llx%016llx_0_k",
			 (unsigned long long)mix(i * 4),
			 (unsigned long long)mix(i * 4 + 1),
			 (unsigned long long)mix(i * 4 + 2),
			 (unsigned long long)mix(i * 4 + 3));
		memcpy(k, tmp, KEY_LEN);
		c->keys[i] = (struct kvf_key){k, KEY_LEN};
	}
	for (unsigned i = 0; i < c->batch; i++)
		c->sizes[i] = 1u << 20;
	return 0;
}

static int open_engine(struct ctx *c)
{
	struct kvf_config cfg;
	int ret;

	kvf_config_init(&cfg);
	cfg.durability = KVF_DURABILITY_NONE;
	cfg.data_dir = NULL;
	cfg.expected_objects = c->objects;
	cfg.client_ttl_ms = 24ULL * 3600 * 1000;
	ret = kvf_engine_open(&cfg, &c->e);
	for (uint64_t i = 0; i < 16 && !ret; i++) {
		char name[32];
		struct kvf_segment_desc d = {
			.id = i + 1,
			.name = name,
			.base = (i + 1) << 50,
			.size = (c->objects + (uint64_t)c->batch * 4) << 17,
			.endpoint = "10.0.0.1:1",
		};

		snprintf(name, sizeof(name), "seg-%llu", (unsigned long long)i);
		ret = kvf_segment_mount(c->e, 1, &d);
	}
	return ret;
}

static int put(struct ctx *c, const struct kvf_key *keys)
{
	struct kvf_put_config pc = {.replica_num = 1};
	int ret = kvf_batch_put_start(c->e, 1, keys, c->sizes, c->batch, &pc,
				      c->out, c->st);

	return ret ? ret : kvf_batch_put_end(c->e, 1, keys, c->batch, c->st);
}

static int fill(struct ctx *c)
{
	for (uint64_t i = 0; i + c->batch <= c->objects; i += c->batch) {
		int ret = put(c, c->keys + i);

		if (ret)
			return ret;
	}
	return 0;
}

enum op { OP_GET, OP_EXIST, OP_CHURN, OP_NR };
static const char *const op_names[OP_NR] = {"get", "exist", "put+end+remove"};

/* Random keys of existing objects, gathered per batch. */
static void pick(struct ctx *c, struct kvf_key *dst)
{
	uint64_t n = c->objects - c->objects % c->batch;

	for (unsigned i = 0; i < c->batch; i++) {
		c->rng = mix(c->rng);
		dst[i] = c->keys[c->rng % n];
	}
}

/* Nanoseconds per batch of @op over c->batches batches. */
static double run(struct ctx *c, enum op op, struct kvf_key *scratch)
{
	const struct kvf_key *churn = c->keys + c->objects;
	uint64_t t0, t = 0;

	for (unsigned b = 0; b < c->batches; b++) {
		const struct kvf_key *ck = churn + (size_t)b * c->batch;

		if (op != OP_CHURN)
			pick(c, scratch); /* untimed */
		t0 = kvf__clock_mono_ns();
		switch (op) {
		case OP_GET:
			kvf_batch_get(c->e, scratch, c->batch, c->out, c->st,
				      NULL);
			break;
		case OP_EXIST:
			kvf_batch_exist(c->e, scratch, c->batch, c->st);
			break;
		default:
			put(c, ck);
			kvf_batch_remove(c->e, ck, c->batch, true, c->st);
			break;
		}
		t += kvf__clock_mono_ns() - t0;
	}
	return (double)t / c->batches;
}

/* Cost of an empty span with every mark (profiling on or off). */
static double span_ns(struct kvf_profiler *p, unsigned iters)
{
	uint64_t t0 = kvf__clock_mono_ns();

	for (unsigned i = 0; i < iters; i++) {
		struct kvf__prof_span sp;

		kvf__prof_begin(p, &sp, KVF__OP_GET, 128);
		for (int st = 0; st < KVF__STAGE_OTHER; st++)
			kvf__prof_mark(&sp, (enum kvf__stage)st);
		kvf__prof_end(&sp);
		__asm__ volatile("" ::: "memory");
	}
	return (double)(kvf__clock_mono_ns() - t0) / iters;
}

static void usage(void)
{
	fputs("usage: kvf-prof-overhead [--objects N] [--batch B] [--rounds R]"
	      " [--batches S] [--sample every|adaptive]\n",
	      stderr);
	exit(2);
}

int main(int argc, char **argv)
{
	struct ctx c = {.objects = 200000,
			.batch = 128,
			.rounds = 10,
			.batches = 500,
			.rng = 42};
	struct kvf_profiler *p;
	struct kvf_key *scratch;
	unsigned every = 0;
	double off_ns, on_ns, get_ns = 0;
	int ret;

	for (int i = 1; i < argc; i += 2) {
		if (i + 1 >= argc)
			usage();
		if (!strcmp(argv[i], "--objects"))
			c.objects = strtoull(argv[i + 1], NULL, 10);
		else if (!strcmp(argv[i], "--batch"))
			c.batch = (unsigned)strtoul(argv[i + 1], NULL, 10);
		else if (!strcmp(argv[i], "--rounds"))
			c.rounds = (unsigned)strtoul(argv[i + 1], NULL, 10);
		else if (!strcmp(argv[i], "--batches"))
			c.batches = (unsigned)strtoul(argv[i + 1], NULL, 10);
		else if (!strcmp(argv[i], "--sample"))
			every = !strcmp(argv[i + 1], "every");
		else
			usage();
	}
	if (c.rounds < 2 || !c.batch || c.objects < c.batch)
		usage();
	scratch = calloc(c.batch, sizeof(*scratch));
	ret = !scratch || make_keys(&c) ? KVF_ERR_NO_MEMORY : open_engine(&c);
	if (!ret)
		ret = fill(&c);
	if (ret) {
		fprintf(stderr, "kvf-prof-overhead: setup: %s\n",
			kvf_strerror(ret));
		return 1;
	}
	p = kvf_engine_profiler(c.e);
	kvf_profile_set_sampling(p, every);
	kvf_profile_enable(p, true); /* discover the tier before timing */
	kvf_profile_enable(p, false);
	printf("tier %s, clock %s, sampling %s, %llu objects, batch %u, "
	       "%u rounds x %u batches (off/on interleaved)\n",
	       kvf_profile_tier(p), kvf__clock_name(),
	       every ? "every batch" : "adaptive",
	       (unsigned long long)c.objects, c.batch, c.rounds, c.batches);
	printf("%-16s %12s %12s %10s %20s\n", "op", "off ns/batch",
	       "on ns/batch", "on-off %", "95% CI %");
	for (int op = 0; op < OP_NR; op++) {
		double *off = calloc(c.rounds, sizeof(double));
		double *on = calloc(c.rounds, sizeof(double));
		struct kvf__stats_paired r;

		if (!off || !on)
			return 1;
		run(&c, (enum op)op, scratch); /* warm up */
		for (unsigned i = 0; i < c.rounds; i++) {
			for (int k = 0; k < 2; k++) {
				bool prof_on = (i % 2 == 0) == (k == 1);

				kvf_profile_enable(p, prof_on);
				(prof_on ? on : off)[i] =
					run(&c, (enum op)op, scratch);
			}
		}
		kvf_profile_enable(p, false);
		kvf__stats_paired(off, on, c.rounds, 0.95, &r);
		printf("%-16s %12.0f %12.0f %+9.2f%% [%+7.2f, %+7.2f]%%\n",
		       op_names[op], r.mean_a, r.mean_b, r.rel, r.rel_lo,
		       r.rel_hi);
		if (op == OP_GET)
			get_ns = r.mean_a;
		free(off);
		free(on);
	}
	off_ns = span_ns(p, 20000000);
	printf("off: a span with all %d marks costs %.2f ns = %.4f%% of a "
	       "get batch\n",
	       KVF__STAGE_OTHER, off_ns, 100.0 * off_ns / get_ns);
	kvf_profile_enable(p, true);
	on_ns = span_ns(p, 2000000);
	kvf_profile_enable(p, false);
	printf("on:  a span with all %d marks costs %.2f ns = %.3f%% of a "
	       "get batch (counter reads included)\n",
	       KVF__STAGE_OTHER, on_ns, 100.0 * on_ns / get_ns);
	kvf_profile_reset(p);
	kvf_engine_close(c.e);
	free(scratch);
	free(c.keybuf);
	free(c.keys);
	free(c.sizes);
	free(c.out);
	free(c.st);
	return 0;
}
