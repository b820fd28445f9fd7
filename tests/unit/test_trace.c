/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_trace.c - kvforge-bench --workload trace (replay.c):
 * the replay's accounting on 200-request cuts of both Mooncake traces
 * against an embedded engine (with room for everything, every reused
 * prefix block is served: the hits are the offline simulator's, and the
 * store is consistent at the end; under pressure every key put is either
 * found or was evicted by the engine), and the loader's refusals (a
 * malformed line names its line and nothing is loaded, an empty trace).
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tools/bench/bench.h"
#include "tools/bench/replay.h"

#define CONVERSATION KVF_TRACE_DATA "/trace_conversation_200.jsonl"
#define SYNTHETIC KVF_TRACE_DATA "/trace_synthetic_200.jsonl"

/*
 * The cuts' blocks, unique blocks and prefix blocks served with room for
 * everything, from the offline simulator:
 *   tools/bench/trace-sim.py --capacity 1 --json tests/unit/data/trace_*
 * (reuse_ratio x blocks).
 */
static const struct cut {
	const char *path;
	uint64_t blocks, unique, hits;
} cuts[] = {
	{ CONVERSATION, 5537, 5215, 322 },
	{ SYNTHETIC, 5330, 5007, 323 },
};

static struct bench_opts opts(void)
{
	return (struct bench_opts){
		.objects = 65536,
		.seed = 42,
		.index = KVF_INDEX_BUCKET,
		.placement = KVF_PLACEMENT_FRAGMENTATION_AWARE,
	};
}

static void load_cut(const struct cut *c, struct bench_trace *t)
{
	char err[512] = "";

	assert_int_equal(bench_trace_load(c->path, t, err, sizeof(err)),
			 KVF_OK);
	assert_int_equal(t->nr_requests, 200);
	assert_int_equal(t->nr_ids, c->blocks);
	assert_int_equal(t->nr_unique, c->unique);
	assert_int_equal(t->reuse_hits, c->hits);
}

/* Replay @t, @copies times, with room for @blocks blocks in 2 segments. */
static void replay(const struct bench_trace *t, uint32_t copies,
		   uint64_t blocks, struct trace_stats *s,
		   struct kvf_engine_stats *st)
{
	struct bench_opts o = opts();
	struct trace_params p = { .copies = copies, .tp = 2,
				  .key_size = 1 << 20 };
	struct trace_target tg;
	struct trace_engine *te;
	uint64_t keys = blocks * trace_keys_per_block(&p);

	assert_int_equal(trace_engine_open(&o, 2, (keys + 1) / 2 * p.key_size,
					   &te, &tg),
			 KVF_OK);
	assert_int_equal(bench_trace_replay(t, &p, &tg, s), KVF_OK);
	kvf_engine_get_stats(trace_engine_get(te), st);
	trace_engine_close(te);
}

static void room_for_everything_serves_every_reused_block(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
		const struct cut *c = &cuts[i];
		struct bench_trace t;
		struct trace_stats s;
		struct kvf_engine_stats st;

		load_cut(c, &t);
		for (uint32_t copies = 1; copies <= 2; copies++) {
			replay(&t, copies, c->unique * copies, &s, &st);
			assert_int_equal(s.requests, 200 * copies);
			assert_int_equal(s.blocks, c->blocks * copies);
			assert_int_equal(s.hits, c->hits * copies);
			assert_int_equal(s.refused_keys, 0);
			assert_int_equal(s.put_errors, 0);
			/* 2 ranks x K, V: every unique block put once */
			assert_int_equal(s.put_keys, c->unique * 4 * copies);
			assert_int_equal(s.live_keys, s.put_keys);
			assert_int_equal(st.objects, s.put_keys);
			assert_int_equal(st.processing, 0);
			assert_int_equal(st.evicted_objects, 0);
			assert_int_equal(st.used_bytes, st.objects << 20);
			/* exist once per request, get when a prefix hit */
			assert_int_equal(s.nr_lat[BENCH_RPC_EXIST],
					 200 * copies);
			assert_int_equal(s.keys[BENCH_RPC_EXIST],
					 c->blocks * 4 * copies);
			assert_int_equal(s.keys[BENCH_RPC_GET], c->hits * 4 *
								copies);
			trace_stats_free(&s);
		}
		bench_trace_free(&t);
	}
}

static void pressure_evicts_and_stays_consistent(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
		const struct cut *c = &cuts[i];
		struct bench_trace t;
		struct trace_stats s;
		struct kvf_engine_stats st;

		load_cut(c, &t);
		replay(&t, 1, c->unique / 10, &s, &st);
		assert_true(s.hits <= c->hits);
		assert_int_equal(s.refused_keys, 0);
		assert_int_equal(s.put_errors, 0);
		assert_true(s.put_keys > c->unique * 4);
		assert_true(st.evicted_objects > 0);
		assert_int_equal(st.evicted_objects, s.put_keys - s.live_keys);
		assert_int_equal(st.objects, s.live_keys);
		assert_true(st.objects <= c->unique / 10 * 4);
		assert_int_equal(st.processing, 0);
		assert_int_equal(st.used_bytes, st.objects << 20);
		trace_stats_free(&s);
		bench_trace_free(&t);
	}
}

/* Write @text to a temporary file; its path into @path. */
static void write_trace(char *path, size_t len, const char *text)
{
	int fd;

	snprintf(path, len, "/tmp/kvf-test-trace-XXXXXX");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

#define GOOD "{\"timestamp\": 0, \"input_length\": 1024, " \
	     "\"output_length\": 3, \"hash_ids\": [0, 1]}\n"

static void malformed_line_is_named_and_nothing_loaded(void **state)
{
	static const struct {
		const char *line;
		const char *why;
	} bad[] = {
		{ "{\"timestamp\": 5, \"hash_ids\": [0, 1,]}\n", "a number" },
		{ "{\"timestamp\": 5, \"hash_ids\": [0, -1]}\n",
		  "non-negative integer" },
		{ "{\"timestamp\": 5, \"hash_ids\": [0, 1.5]}\n",
		  "non-negative integer" },
		{ "{\"timestamp\": 5}\n", "no \"hash_ids\"" },
		{ "{\"hash_ids\": [3]}\n", "no \"timestamp\"" },
		{ "{\"timestamp\": \"5\", \"hash_ids\": [3]}\n",
		  "\"timestamp\" must be" },
		{ "{\"timestamp\": 5, \"hash_ids\": [3]\n", "'}' expected" },
		{ "{\"timestamp\": 5, \"hash_ids\": [3]} x\n", "after" },
		{ "[1, 2]\n", "'{' expected" },
		{ "{\"timestamp\": 0, \"hash_ids\": [3]}\n", "goes back" },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char path[64], err[512] = "", text[512], want[96];
		struct bench_trace t;

		/* lines 1-3 good (line 2 blank), line 4 bad, line 5 good */
		snprintf(text, sizeof(text),
			 GOOD "\n{\"timestamp\": 1, \"hash_ids\": [0]}\n%s"
			      "{\"timestamp\": 9, \"hash_ids\": [7]}\n",
			 bad[i].line);
		write_trace(path, sizeof(path), text);
		assert_int_equal(bench_trace_load(path, &t, err, sizeof(err)),
				 KVF_ERR_INVALID_ARGUMENT);
		snprintf(want, sizeof(want), "%s:4: malformed trace line",
			 path);
		if (!strstr(err, want) || !strstr(err, bad[i].why))
			fail_msg("line '%s': error '%s'", bad[i].line, err);
		assert_int_equal(t.nr_requests, 0);
		assert_null(t.ids);
		unlink(path);
	}
}

static void good_lines_load(void **state)
{
	char path[64], err[512] = "";
	struct bench_trace t;

	(void)state;
	write_trace(path, sizeof(path),
		    GOOD "\n  \n{\"timestamp\": 0, \"hash_ids\": [0, 2]}\n"
			 "{\"hash_ids\": [], \"timestamp\": 7}");
	assert_int_equal(bench_trace_load(path, &t, err, sizeof(err)), KVF_OK);
	assert_int_equal(t.nr_requests, 3);
	assert_int_equal(t.nr_ids, 4);
	assert_int_equal(t.nr_unique, 3);
	assert_int_equal(t.reuse_hits, 1);
	assert_int_equal(t.max_len, 2);
	assert_int_equal(t.ts_ms[2], 7);
	assert_int_equal(t.len[2], 0);
	bench_trace_free(&t);
	unlink(path);
}

static void empty_trace_is_refused(void **state)
{
	static const char *const texts[] = { "", "\n\n  \n" };

	(void)state;
	for (size_t i = 0; i < 2; i++) {
		char path[64], err[512] = "";
		struct bench_trace t;

		write_trace(path, sizeof(path), texts[i]);
		assert_int_equal(bench_trace_load(path, &t, err, sizeof(err)),
				 KVF_ERR_INVALID_ARGUMENT);
		assert_non_null(strstr(err, "no requests"));
		assert_int_equal(t.nr_requests, 0);
		unlink(path);
	}
	{
		char err[512] = "";
		struct bench_trace t;

		assert_int_equal(bench_trace_load("/nonexistent/trace", &t,
						  err, sizeof(err)),
				 KVF_ERR_IO);
		assert_non_null(strstr(err, "/nonexistent/trace"));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(room_for_everything_serves_every_reused_block),
		cmocka_unit_test(pressure_evicts_and_stays_consistent),
		cmocka_unit_test(malformed_line_is_named_and_nothing_loaded),
		cmocka_unit_test(good_lines_load),
		cmocka_unit_test(empty_trace_is_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
