/* SPDX-License-Identifier: MIT */
/*
 * tools/bench/recovery.c - how long kvf_engine_open() takes to recover.
 *
 * Fills o->objects HiCache-shaped objects into a BOUNDED engine on
 * o->data_dir (16 segments, batches of o->batch, one thread), closes it,
 * then times kvf_engine_open() end to end o->rounds times: first on the
 * journal as the fill left it (objects mostly in the log tail: a
 * checkpoint starts only once the log holds 1M records), then again after
 * an explicit checkpoint has folded the whole log into the image. Each
 * reopen closes the engine again without changing anything.
 *
 * Results: recovery.{recovery_seconds, objects, engine_recovery_seconds}
 * (log-tail path, medians; engine_recovery_seconds is the engine's own
 * recovery_ns, i.e. the replay without opening LMDB and building the
 * empty index), image.{...} the same after the checkpoint, fill.* and
 * checkpoint_seconds. The directory is left for kvforge-inspect. With
 * --keep-data, nothing is written: the existing journal is reopened
 * o->rounds times (for profiling recovery alone).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "journal/journal.h"
#include "tools/bench/bench.h"

#define KEY_CAP 96

static int fill(const struct bench_opts *o, const struct kvf_config *cfg,
		struct bench_results *r)
{
	struct kvf_put_config pc = { .replica_num = 1 };
	uint32_t b = o->batch;
	char *keybuf = malloc((size_t)b * KEY_CAP);
	struct kvf_key *keys = calloc(b, sizeof(*keys));
	uint64_t *sizes = calloc(b, sizeof(*sizes));
	struct kvf_replicas *out = calloc(b, sizeof(*out));
	enum kvf_status *st = calloc(b, sizeof(*st));
	uint64_t rng = (o->seed + 1) * 0x9e3779b97f4a7c15ULL, t0;
	struct kvf_engine *e = NULL;
	int ret = KVF_ERR_NO_MEMORY;

	if (!keybuf || !keys || !sizes || !out || !st)
		goto out;
	ret = kvf_engine_open(cfg, &e);
	if (!ret)
		ret = bench_mount_segments(e, o->objects, "recovery");
	t0 = bench_now_ns();
	for (uint64_t x = 0; !ret && x < o->objects; x += b) {
		size_t n = o->objects - x < b ? (size_t)(o->objects - x) : b;

		for (size_t i = 0; i < n; i++) {
			keys[i].data = keybuf + i * KEY_CAP;
			keys[i].len = bench_hicache_key(keybuf + i * KEY_CAP,
							KEY_CAP, x + i);
			sizes[i] = (1u << 20) + (bench_rand(&rng) % 768) * 4096;
		}
		ret = kvf_batch_put_start(e, 1, keys, sizes, n, &pc, out, st);
		if (!ret)
			ret = kvf_batch_put_end(e, 1, keys, n, st);
	}
	if (!ret)
		bench_result(r, "fill", "seconds",
			     (double)(bench_now_ns() - t0) / 1e9);
out:
	kvf_engine_close(e);
	free(st);
	free(out);
	free(sizes);
	free(keys);
	free(keybuf);
	return ret;
}

/* Reopen o->rounds times; record medians under @group. */
static int reopen(const struct bench_opts *o, const struct kvf_config *cfg,
		  struct bench_results *r, const char *group)
{
	double *wall = calloc(o->rounds, sizeof(double));
	double *eng = calloc(o->rounds, sizeof(double));
	struct kvf_engine_stats st = { 0 };
	char raw[512];
	size_t off = 0;
	int ret = wall && eng ? KVF_OK : KVF_ERR_NO_MEMORY;

	for (uint32_t i = 0; i < o->rounds && !ret; i++) {
		struct kvf_engine *e;
		uint64_t t0 = bench_now_ns();

		ret = kvf_engine_open(cfg, &e);
		if (ret)
			break;
		wall[i] = (double)(bench_now_ns() - t0) / 1e9;
		kvf_engine_get_stats(e, &st);
		eng[i] = (double)st.recovery_ns / 1e9;
		kvf_engine_close(e);
		if (off < sizeof(raw) - 24)
			off += (size_t)snprintf(raw + off, sizeof(raw) - off,
						" %.3f", wall[i]);
	}
	if (!ret) {
		bench_result(r, group, "recovery_seconds",
			     bench_quantile(wall, o->rounds, 0.5));
		bench_result(r, group, "engine_recovery_seconds",
			     bench_quantile(eng, o->rounds, 0.5));
		bench_result(r, group, "objects", (double)st.recovered_objects);
		bench_note(r, "%-8s kvf_engine_open seconds per round:%s",
			   group, raw);
		if (st.recovered_objects != o->objects)
			bench_note(r, "warning: %s recovered %llu of %llu",
				   group,
				   (unsigned long long)st.recovered_objects,
				   (unsigned long long)o->objects);
	}
	free(wall);
	free(eng);
	return ret;
}

/* Fold the whole log into the image with the engine closed. */
static int checkpoint(const struct bench_opts *o, struct bench_results *r)
{
	struct kvf__journal_config jc = {
		.dir = o->data_dir,
		.durability = KVF_DURABILITY_BOUNDED,
	};
	struct kvf__journal_stats st;
	struct kvf__journal *j;
	uint64_t t0 = bench_now_ns();
	int ret;

	ret = kvf__journal_open(&jc, &j);
	if (ret)
		return ret;
	ret = kvf__journal_checkpoint(j);
	kvf__journal_get_stats(j, &st);
	kvf__journal_close(j);
	if (!ret) {
		bench_result(r, NULL, "checkpoint_seconds",
			     (double)(bench_now_ns() - t0) / 1e9);
		bench_result(r, NULL, "image_objects", (double)st.objects);
	}
	return ret;
}

int bench_recovery(const struct bench_opts *o, struct bench_results *r)
{
	struct kvf_config cfg, rcfg;
	int ret;

	bench_wipe_dir(o, o->data_dir);
	bench_engine_config(o, &cfg);
	cfg.durability = o->durability_set && o->durability !=
							  KVF_DURABILITY_NONE ?
				 o->durability :
				 KVF_DURABILITY_BOUNDED;
	cfg.data_dir = o->data_dir;
	/* At reopen the index is presized from the journal's estimate. */
	rcfg = cfg;
	rcfg.expected_objects = 65536;
	if (o->keep_data) /* re-time an existing journal only */
		return reopen(o, &rcfg, r, "recovery");
	ret = fill(o, &cfg, r);
	if (!ret)
		ret = reopen(o, &rcfg, r, "recovery");
	if (!ret)
		ret = checkpoint(o, r);
	if (!ret)
		ret = reopen(o, &rcfg, r, "image");
	if (!ret)
		bench_note(r, "journal left in %s for kvforge-inspect",
			   o->data_dir);
	return ret;
}
