/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_profile_threads.c - profiled batches on several threads
 * at once (each with its own counter group), while another thread takes
 * snapshots, resets and toggles nothing it should not: the totals must
 * come out exact, including the figures of threads that already exited
 * (retired contexts). Built for ThreadSanitizer too (CONCURRENCY_TESTS).
 */
#include "config.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include <kvforge/status.h>

#include "profiling/stage.h"

#define THREADS 4
#define BATCHES 400

struct worker {
	struct kvf_profiler *p;
	enum kvf__op op;
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;

	for (int i = 0; i < BATCHES; i++) {
		struct kvf__prof_span sp;

		kvf__prof_begin(w->p, &sp, w->op, 16);
		kvf__prof_mark(&sp, KVF__STAGE_VALIDATE);
		kvf__prof_mark(&sp, KVF__STAGE_PROBE);
		kvf__prof_mark(&sp, KVF__STAGE_REPLY);
		kvf__prof_end(&sp);
	}
	return NULL;
}

static uint64_t total_calls(struct kvf_profiler *p, enum kvf__op op,
			    unsigned stage)
{
	struct kvf_profile_snapshot *s;
	uint64_t calls;

	assert_int_equal(kvf_profile_snapshot(p, &s), KVF_OK);
	calls = kvf_profile_snapshot_cell(s, op,
					  stage == ~0u ? s->n_stages : stage)
			->calls;
	kvf_profile_snapshot_free(s);
	return calls;
}

static void run_workers(struct kvf_profiler *p, bool snapshots)
{
	pthread_t th[THREADS];
	struct worker w[THREADS];

	for (int i = 0; i < THREADS; i++) {
		w[i].p = p;
		w[i].op = i % 2 ? KVF__OP_GET : KVF__OP_EXIST;
		assert_int_equal(
			pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
	}
	/* Readers race the writers; figures must only ever grow. */
	for (uint64_t last = 0; snapshots;) {
		uint64_t now = total_calls(p, KVF__OP_GET, ~0u);

		assert_true(now >= last);
		last = now;
		if (now == (uint64_t)BATCHES * THREADS / 2)
			break;
	}
	for (int i = 0; i < THREADS; i++)
		assert_int_equal(pthread_join(th[i], NULL), 0);
}

static void check_threads(const char *tier, unsigned every)
{
	struct kvf_profiler *p;
	struct kvf_profile_snapshot *s;

	setenv("KVF_PROFILE_TIER", tier, 1);
	assert_int_equal(kvf__prof_create(&p), KVF_OK);
	kvf_profile_set_sampling(p, every);
	kvf_profile_enable(p, true);
	run_workers(p, true);
	assert_int_equal(total_calls(p, KVF__OP_GET, ~0u),
			 BATCHES * THREADS / 2);
	assert_int_equal(total_calls(p, KVF__OP_EXIST, KVF__STAGE_PROBE),
			 BATCHES * THREADS / 2);
	/* Exited threads were retired, new ones add to their figures. */
	run_workers(p, false);
	assert_int_equal(total_calls(p, KVF__OP_GET, ~0u), BATCHES * THREADS);
	assert_int_equal(kvf_profile_snapshot(p, &s), KVF_OK);
	assert_int_equal(s->threads, 2 * THREADS);
	kvf_profile_snapshot_free(s);
	kvf_profile_reset(p);
	assert_int_equal(total_calls(p, KVF__OP_GET, ~0u), 0);
	kvf__prof_destroy(p);
}

static void test_threads_software(void **state)
{
	check_threads("software", 1);
}

static void test_threads_clock(void **state)
{
	check_threads("clock", 0);
}

static void *toggler(void *arg)
{
	struct kvf_profiler *p = arg;

	for (int i = 0; i < 200; i++)
		kvf_profile_enable(p, i % 2 == 0);
	kvf_profile_enable(p, true);
	return NULL;
}

/* Switching on and off while batches run: no race, no torn span. */
static void test_toggle_while_running(void **state)
{
	struct kvf_profiler *p;
	pthread_t t;

	setenv("KVF_PROFILE_TIER", "software", 1);
	assert_int_equal(kvf__prof_create(&p), KVF_OK);
	assert_int_equal(pthread_create(&t, NULL, toggler, p), 0);
	run_workers(p, false);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_true(total_calls(p, KVF__OP_GET, ~0u) <=
		    (uint64_t)BATCHES * THREADS / 2);
	kvf__prof_destroy(p);
}

/* Two profilers in one thread; stale thread entries are pruned. */
static void test_two_profilers_one_thread(void **state)
{
	struct kvf_profiler *a, *b;

	setenv("KVF_PROFILE_TIER", "clock", 1);
	assert_int_equal(kvf__prof_create(&a), KVF_OK);
	assert_int_equal(kvf__prof_create(&b), KVF_OK);
	kvf_profile_enable(a, true);
	kvf_profile_enable(b, true);
	for (int i = 0; i < 3; i++) {
		struct worker wa = {a, KVF__OP_GET}, wb = {b, KVF__OP_GET};

		worker_main(&wa);
		worker_main(&wb);
	}
	assert_int_equal(total_calls(a, KVF__OP_GET, ~0u), 3 * BATCHES);
	kvf__prof_destroy(a);
	assert_int_equal(total_calls(b, KVF__OP_GET, ~0u), 3 * BATCHES);
	kvf__prof_destroy(b);
	/* A new profiler in this thread prunes the stale entries. */
	assert_int_equal(kvf__prof_create(&a), KVF_OK);
	kvf_profile_enable(a, true);
	run_workers(a, false);
	kvf__prof_destroy(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_threads_software),
		cmocka_unit_test(test_threads_clock),
		cmocka_unit_test(test_toggle_while_running),
		cmocka_unit_test(test_two_profilers_one_thread),
	};

	setenv("KVF_PROFILE_QUIET", "1", 1);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
