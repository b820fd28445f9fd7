/* SPDX-License-Identifier: MIT */
/*
 * tests/stress/test_unmount_replay.c - unmounts racing puts and removes,
 * then a clean close and a reopen.
 *
 * A writer puts and removes its own keys with one or two replicas while
 * another client mounts and unmounts a segment over and over, so replicas
 * are dropped copy-on-write while puts and removes of the same objects are
 * in flight. The journal must hold those drops in an order replay can
 * follow: the reopen must succeed and restore exactly what was there.
 * Every durability mode with a journal, both index kinds.
 */
#include "config.h"

#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "tests/unit/helpers.h"
#include "tests/stress/audit.h"

#define NKEYS 64
#define RUN_MS 1000
/* Progress the run must show; a loaded machine gets up to a minute. */
#define MIN_EVENTS 5
#define MAX_RUN_MS 60000
#define FLAP_SEG 900

struct run {
	struct kvf_engine *e;
	int stop; /* atomic */
	uint64_t puts, removes, flaps; /* atomic */
	int errors;
	int last_error;
	const char *what;
};

static void key_n(char *buf, size_t cap, int i)
{
	snprintf(buf, cap, "w-%02d", i);
}

static void note_error(struct run *r, const char *what, int ret)
{
	__atomic_fetch_add(&r->errors, 1, __ATOMIC_RELAXED);
	r->last_error = ret;
	r->what = what;
}

static void sleep_us(unsigned us)
{
	struct timespec ts = { 0, (long)us * 1000 };

	nanosleep(&ts, NULL);
}

static bool enough_progress(struct run *r)
{
	return __atomic_load_n(&r->flaps, __ATOMIC_RELAXED) >= MIN_EVENTS &&
	       __atomic_load_n(&r->removes, __ATOMIC_RELAXED) >= MIN_EVENTS;
}

/*
 * Let the threads race for RUN_MS, and longer (to MAX_RUN_MS) until both
 * made progress: the race is what is tested, not how fast it runs.
 */
static void race(struct run *r)
{
	int ms = 0;

	while (ms < RUN_MS || (!enough_progress(r) && ms < MAX_RUN_MS)) {
		usleep(10 * 1000);
		ms += 10;
	}
}

static void *writer(void *arg)
{
	struct run *r = arg;
	unsigned seed = 12345;
	char name[16];

	while (!__atomic_load_n(&r->stop, __ATOMIC_RELAXED)) {
		struct kvf_put_config cfg = {
			.replica_num = 1 + (unsigned)(rand_r(&seed) % 2) };
		uint64_t size = 4096 + (uint64_t)(rand_r(&seed) % 3) * 6144;
		struct kvf_key k;
		struct kvf_replicas out;
		enum kvf_status st;
		int ret;

		key_n(name, sizeof(name), rand_r(&seed) % NKEYS);
		k = key_of(name);
		ret = kvf_batch_put_start(r->e, 1, &k, &size, 1, &cfg, &out,
					  &st);
		ret = ret == KVF_ERR_PARTIAL ? (int)st : ret;
		if (ret == KVF_OK) {
			ret = end1(r->e, 1, name);
			/* Not found: an unmount took its only replica. */
			if (ret && ret != KVF_ERR_OBJECT_NOT_FOUND)
				note_error(r, "put_end", ret);
			__atomic_fetch_add(&r->puts, 1, __ATOMIC_RELAXED);
		} else if (ret == KVF_ERR_OBJECT_ALREADY_EXISTS) {
			ret = kvf_batch_remove(r->e, &k, 1, false, &st);
			ret = ret == KVF_ERR_PARTIAL ? (int)st : ret;
			/* Not found: an unmount took its only replica. */
			if (ret && ret != KVF_ERR_OBJECT_NOT_FOUND)
				note_error(r, "remove", ret);
			__atomic_fetch_add(&r->removes, 1, __ATOMIC_RELAXED);
		} else {
			note_error(r, "put_start", ret);
		}
	}
	return NULL;
}

static void *flapper(void *arg)
{
	struct run *r = arg;
	unsigned seed = 777;
	int ret;

	while (!__atomic_load_n(&r->stop, __ATOMIC_RELAXED)) {
		ret = mount(r->e, 3, FLAP_SEG, 4 * MIB);
		if (ret)
			note_error(r, "mount", ret);
		sleep_us(500 + (unsigned)(rand_r(&seed) % 2000));
		ret = kvf_segment_unmount(r->e, 3, FLAP_SEG);
		if (ret)
			note_error(r, "unmount", ret);
		__atomic_fetch_add(&r->flaps, 1, __ATOMIC_RELAXED);
		sleep_us(200 + (unsigned)(rand_r(&seed) % 500));
	}
	return NULL;
}

/* What a reader sees of every key, to compare across the reopen. */
struct view {
	struct kvf_engine_stats stats;
	int status[NKEYS];
	struct kvf_replicas rep[NKEYS];
};

static void take_view(struct kvf_engine *e, struct view *v)
{
	char name[16];

	memset(v, 0, sizeof(*v));
	assert_int_equal(kvf_engine_get_stats(e, &v->stats), KVF_OK);
	for (int i = 0; i < NKEYS; i++) {
		key_n(name, sizeof(name), i);
		v->status[i] = get1(e, name, &v->rep[i]);
	}
}

static void assert_same_view(const struct view *a, const struct view *b)
{
	assert_int_equal(a->stats.objects, b->stats.objects);
	assert_int_equal(a->stats.used_bytes, b->stats.used_bytes);
	assert_int_equal(a->stats.segments, b->stats.segments);
	for (int i = 0; i < NKEYS; i++) {
		assert_int_equal(a->status[i], b->status[i]);
		if (a->status[i] != KVF_OK)
			continue;
		assert_int_equal(a->rep[i].count, b->rep[i].count);
		assert_memory_equal(a->rep[i].replica, b->rep[i].replica,
				    a->rep[i].count *
					    sizeof(a->rep[i].replica[0]));
	}
}

static void run(enum kvf_durability mode, enum kvf_index_kind kind)
{
	struct view before, after;
	struct run r = { 0 };
	struct kvf_config cfg;
	pthread_t w, m;
	char *dir = test_tmpdir("unmount-replay");
	int ret;

	kvf_config_init(&cfg);
	cfg.durability = mode;
	cfg.data_dir = dir;
	cfg.index = kind;
	cfg.background = false;
	assert_int_equal(kvf_engine_open(&cfg, &r.e), KVF_OK);
	assert_int_equal(mount(r.e, 1, 1, 8 * MIB), KVF_OK);
	assert_int_equal(mount(r.e, 2, 2, 8 * MIB), KVF_OK);
	assert_int_equal(pthread_create(&w, NULL, writer, &r), 0);
	assert_int_equal(pthread_create(&m, NULL, flapper, &r), 0);
	race(&r);
	__atomic_store_n(&r.stop, 1, __ATOMIC_RELAXED);
	pthread_join(w, NULL);
	pthread_join(m, NULL);
	if (r.errors)
		print_error("%d errors, last: %s %s\n", r.errors, r.what,
			    kvf_status_name(r.last_error));
	assert_int_equal(r.errors, 0);
	assert_true(enough_progress(&r));
	assert_accounting(r.e);
	take_view(r.e, &before);
	kvf_engine_close(r.e);
	r.e = NULL;

	ret = kvf_engine_open(&cfg, &r.e);
	if (ret)
		print_error("reopen: %s\n", kvf_status_name(ret));
	assert_int_equal(ret, KVF_OK);
	take_view(r.e, &after);
	assert_same_view(&before, &after);
	assert_accounting(r.e);
	kvf_engine_close(r.e);
	free(dir);
}

static void test_bounded_lfht(void **state)
{
	(void)state;
	run(KVF_DURABILITY_BOUNDED, KVF_INDEX_LFHT);
}

static void test_bounded_bucket(void **state)
{
	(void)state;
	run(KVF_DURABILITY_BOUNDED, KVF_INDEX_BUCKET);
}

static void test_strict_lfht(void **state)
{
	(void)state;
	run(KVF_DURABILITY_STRICT, KVF_INDEX_LFHT);
}

static void test_strict_bucket(void **state)
{
	(void)state;
	run(KVF_DURABILITY_STRICT, KVF_INDEX_BUCKET);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bounded_lfht),
		cmocka_unit_test(test_bounded_bucket),
		cmocka_unit_test(test_strict_lfht),
		cmocka_unit_test(test_strict_bucket),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
