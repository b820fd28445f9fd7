/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_lanes.c - placement lanes: a lone thread has one lane,
 * threads placing together get distinct ranks, a thread keeps its bit,
 * and an idle thread's bit is given back and counts for nobody. Threads
 * take turns (each join runs alone), and every time is given, so the
 * outcome does not depend on scheduling.
 */
#include "config.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "alloc/lanes.h"

static struct kvf__lanes lanes;

struct join {
	uint64_t now;
	struct kvf__placer p;
};

static void *join_main(void *arg)
{
	struct join *j = arg;

	kvf__lanes_join(&lanes, j->now, &j->p);
	return NULL;
}

/* One join at @now from a thread of its own (a fresh thread each time). */
static struct kvf__placer join_from_new_thread(uint64_t now)
{
	struct join j = {.now = now};
	pthread_t t;

	assert_int_equal(pthread_create(&t, NULL, join_main, &j), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	return j.p;
}

static struct kvf__placer join_here(uint64_t now)
{
	struct kvf__placer p = {.rng = 1};

	kvf__lanes_join(&lanes, now, &p);
	return p;
}

static void test_lone_thread_has_every_segment(void **state)
{
	struct kvf__placer p;

	(void)state;
	memset(&lanes, 0, sizeof(lanes));
	for (uint64_t t = 1; t < 5; t++) {
		p = join_here(t * 1000);
		assert_int_equal(p.lanes, 1);
		assert_int_equal(p.lane, 0);
	}
	assert_int_equal(__builtin_popcountll(lanes.held), 1);
}

static void test_threads_split_then_idle(void **state)
{
	const uint64_t t0 = 100 * KVF__LANE_IDLE_NS;
	struct kvf__placer me, other;

	(void)state;
	memset(&lanes, 0, sizeof(lanes));
	me = join_here(t0);
	assert_int_equal(me.lanes, 1);
	/* Another thread placing at the same time: two lanes, its own. */
	other = join_from_new_thread(t0 + 10);
	assert_int_equal(other.lanes, 2);
	assert_int_equal(other.lane, 1);
	me = join_here(t0 + 20);
	assert_int_equal(me.lanes, 2);
	assert_int_equal(me.lane, 0);
	/* The other thread is gone: once idle, its bit counts no more. */
	me = join_here(t0 + 10 + KVF__LANE_IDLE_NS - 1);
	assert_int_equal(me.lanes, 2);
	me = join_here(t0 + 10 + KVF__LANE_IDLE_NS);
	assert_int_equal(me.lanes, 1);
	assert_int_equal(me.lane, 0);
	assert_int_equal(__builtin_popcountll(lanes.held), 1);
	/* A newcomer takes the freed bit. */
	other = join_from_new_thread(t0 + 2 * KVF__LANE_IDLE_NS);
	assert_int_equal(other.lanes, 2);
	assert_int_equal(other.lane, 1);
}

/*
 * A putting thread that the scheduler kept off its CPU for tens of
 * milliseconds (common on a shared 2-vCPU guest) is not idle: the other
 * thread keeps to its own lane meanwhile, and both keep their lanes.
 */
static void test_descheduled_thread_keeps_its_lane(void **state)
{
	const uint64_t t0 = 100 * KVF__LANE_IDLE_NS, ms = 1000 * 1000;
	struct kvf__placer me, other;

	(void)state;
	memset(&lanes, 0, sizeof(lanes));
	me = join_here(t0);
	other = join_from_new_thread(t0 + 10);
	assert_int_equal(other.lane, 1);
	for (uint64_t gap = 10 * ms; gap <= 200 * ms; gap += 10 * ms) {
		me = join_here(t0 + 10 + gap);
		assert_int_equal(me.lanes, 2);
		assert_int_equal(me.lane, 0);
	}
	assert_int_equal(__builtin_popcountll(lanes.held), 2);
}

static void test_all_bits_held(void **state)
{
	struct kvf__placer p;

	(void)state;
	memset(&lanes, 0, sizeof(lanes));
	lanes.held = ~UINT64_C(0);
	for (int b = 0; b < KVF__LANE_BITS; b++)
		lanes.seen[b].ns = 1000;
	/* A thread with no bit: every segment, nothing taken. */
	p = join_from_new_thread(1000);
	assert_int_equal(p.lanes, 1);
	assert_int_equal(p.lane, 0);
	assert_int_equal(lanes.held, ~UINT64_C(0));
}

/* A thread that feeds two engines keeps one bit, one lane, in each. */
static void test_thread_alternating_sets(void **state)
{
	static struct kvf__lanes other_set;
	struct kvf__placer p = {.rng = 1};

	(void)state;
	memset(&lanes, 0, sizeof(lanes));
	memset(&other_set, 0, sizeof(other_set));
	for (uint64_t t = 1; t < 6; t++) {
		p = join_here(t * 1000);
		assert_int_equal(p.lanes, 1);
		kvf__lanes_join(&other_set, t * 1000 + 500, &p);
		assert_int_equal(p.lanes, 1);
	}
	assert_int_equal(__builtin_popcountll(lanes.held), 1);
	assert_int_equal(__builtin_popcountll(other_set.held), 1);
}

/*
 * A thread idle long enough loses its bit; when another thread has taken
 * that bit since, the returning thread does not share it but claims its
 * own: three active threads, three lanes.
 */
static void test_returning_thread_does_not_share(void **state)
{
	const uint64_t t0 = 100 * KVF__LANE_IDLE_NS;
	struct kvf__placer p;

	(void)state;
	memset(&lanes, 0, sizeof(lanes));
	p = join_here(t0);
	assert_int_equal(p.lanes, 1);
	/* This thread is idle now: the next joiner gives its bit back. */
	p = join_from_new_thread(t0 + KVF__LANE_IDLE_NS);
	assert_int_equal(p.lanes, 1);
	/* A third thread takes the freed bit. */
	p = join_from_new_thread(t0 + KVF__LANE_IDLE_NS + 1);
	assert_int_equal(p.lanes, 2);
	p = join_here(t0 + KVF__LANE_IDLE_NS + 2);
	assert_int_equal(p.lanes, 3);
	assert_int_equal(__builtin_popcountll(lanes.held), 3);
}

/*
 * Three engines fed in turn, closed, and three new ones fed in turn, one
 * of them where a closed one was (malloc reuses the address): each keeps
 * one bit, one lane. Run on a fresh thread, whose remembered sets start
 * empty.
 */
static void *engines_reopened_main(void *arg)
{
	static struct kvf__lanes set[5];
	struct kvf__lanes *round1[3] = {&set[0], &set[1], &set[2]},
			  *round2[3] = {&set[3], &set[0], &set[4]};
	struct kvf__placer p = {.rng = 1};
	uint64_t now = 1000, *worst = arg;

	for (int r = 0; r < 4; r++)
		for (int k = 0; k < 3; k++)
			kvf__lanes_join(round1[k], now++, &p);
	memset(&set[0], 0, sizeof(set[0])); /* closed; calloc'ed again */
	for (int r = 0; r < 4; r++)
		for (int k = 0; k < 3; k++) {
			kvf__lanes_join(round2[k], now++, &p);
			if (p.lanes > *worst)
				*worst = p.lanes;
		}
	return NULL;
}

static void test_engines_reopened(void **state)
{
	pthread_t t;
	uint64_t worst = 0;

	(void)state;
	assert_int_equal(
		pthread_create(&t, NULL, engines_reopened_main, &worst), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(worst, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lone_thread_has_every_segment),
		cmocka_unit_test(test_threads_split_then_idle),
		cmocka_unit_test(test_descheduled_thread_keeps_its_lane),
		cmocka_unit_test(test_all_bits_held),
		cmocka_unit_test(test_thread_alternating_sets),
		cmocka_unit_test(test_returning_thread_does_not_share),
		cmocka_unit_test(test_engines_reopened),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
