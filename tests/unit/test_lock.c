/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_lock.c - the spin locks (base/lock.h).
 *
 * Mutual exclusion: threads add to a counter with a read, a pause and a
 * write under the lock, so any overlap of two sections loses an update.
 * A waiter outlasting the spin (a holder that sleeps) still gets the lock
 * once it is released; trylock fails on a held lock and succeeds on a
 * free one. Run under ThreadSanitizer too (a concurrency test), which
 * checks that the acquire and release order the sections.
 */
#include "config.h"

#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <cmocka.h>

#include "base/lock.h"

#define THREADS 4
#define ROUNDS 20000

struct shared {
	uint32_t lock;
	uint64_t counter; /* only under lock */
	uint32_t held;    /* atomic: the holder has the lock */
};

static void *add_many(void *arg)
{
	struct shared *s = arg;

	for (int i = 0; i < ROUNDS; i++) {
		uint64_t v;

		kvf__spin_lock(&s->lock);
		v = s->counter;
		__asm__ volatile("" ::: "memory");
		if (i % 64 == 0)
			sched_yield();
		s->counter = v + 1;
		kvf__spin_unlock(&s->lock);
	}
	return NULL;
}

static void test_mutual_exclusion(void **state)
{
	struct shared s = { 0 };
	pthread_t t[THREADS];

	(void)state;
	for (int i = 0; i < THREADS; i++)
		assert_int_equal(pthread_create(&t[i], NULL, add_many, &s), 0);
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	assert_int_equal(s.counter, (uint64_t)THREADS * ROUNDS);
	assert_int_equal(s.lock, 0);
}

static void *take_after_holder(void *arg)
{
	struct shared *s = arg;

	kvf__spin_lock(&s->lock);
	s->counter++;
	kvf__spin_unlock(&s->lock);
	return NULL;
}

static void test_waiter_outlasts_spin(void **state)
{
	struct timespec nap = { .tv_nsec = 20 * 1000 * 1000 };
	struct shared s = { 0 };
	pthread_t t;

	(void)state;
	kvf__spin_lock(&s.lock);
	assert_int_equal(pthread_create(&t, NULL, take_after_holder, &s), 0);
	/* Long enough for the waiter to spend its spins and yield. */
	nanosleep(&nap, NULL);
	assert_int_equal(s.counter, 0);
	kvf__spin_unlock(&s.lock);
	pthread_join(t, NULL);
	assert_int_equal(s.counter, 1);
	assert_int_equal(s.lock, 0);
}

static void test_trylock(void **state)
{
	uint32_t lock = 0;

	(void)state;
	assert_true(kvf__spin_trylock(&lock));
	assert_false(kvf__spin_trylock(&lock));
	kvf__spin_unlock(&lock);
	assert_true(kvf__spin_trylock(&lock));
	kvf__spin_unlock(&lock);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mutual_exclusion),
		cmocka_unit_test(test_waiter_outlasts_spin),
		cmocka_unit_test(test_trylock),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
