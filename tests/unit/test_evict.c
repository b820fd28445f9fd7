/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_evict.c - eviction and dead-client cleanup, on an
 * injected clock: leases, pins, targets, what is freed, what survives.
 */
#include "config.h"

#include "tests/unit/helpers.h"

#define C1 41
#define C2 42
#define OBJ (1 * MIB)

/* Put and end "<prefix>-0" .. "<prefix>-<n-1>" as client C1 under @cfg. */
static void fill_with(struct kvf_engine *e, const char *prefix, int n,
		      const struct kvf_put_config *cfg, uint64_t size)
{
	char key[64];

	for (int i = 0; i < n; i++) {
		struct kvf_key k;
		struct kvf_replicas out;
		enum kvf_status st;

		snprintf(key, sizeof(key), "%s-%d", prefix, i);
		k = key_of(key);
		assert_int_equal(kvf_batch_put_start(e, C1, &k, &size, 1, cfg,
						     &out, &st),
				 KVF_OK);
		assert_int_equal(end1(e, C1, key), KVF_OK);
	}
}

static void fill(struct kvf_engine *e, const char *prefix, int n,
		 bool hard, bool soft)
{
	struct kvf_put_config cfg = { .replica_num = 1, .hard_pin = hard,
				      .soft_pin = soft };

	fill_with(e, prefix, n, &cfg, OBJ);
}

static int count_present(struct kvf_engine *e, const char *prefix, int n)
{
	char key[64];
	int present = 0;

	for (int i = 0; i < n; i++) {
		snprintf(key, sizeof(key), "%s-%d", prefix, i);
		present += exist1(e, key) == KVF_OK;
	}
	return present;
}

/* Read (get) "<prefix>-<i>" for i = @from, @from + @step, ... < @to. */
static void read_range(struct kvf_engine *e, const char *prefix, int from,
		       int to, int step)
{
	char key[64];

	for (int i = from; i < to; i += step) {
		snprintf(key, sizeof(key), "%s-%d", prefix, i);
		assert_int_equal(get1(e, key, NULL), KVF_OK);
	}
}

/* Ask for @n objects' bytes: exactly @n objects of OBJ bytes must go. */
static void evict_n(struct kvf_engine *e, uint64_t n)
{
	uint64_t evicted = 0;

	assert_int_equal(kvf_engine_evict(e, n * OBJ, NULL, &evicted), KVF_OK);
	assert_int_equal(evicted, n);
}

static void test_evict_respects_leases_and_pins(void **state)
{
	struct fixture *f = *state;
	uint64_t freed = 0, evicted = 0, before;

	assert_int_equal(mount(f->e, C1, 1, 256 * MIB), KVF_OK);
	fill(f->e, "hard", 20, true, false);
	fill(f->e, "soft", 20, false, true);
	fill(f->e, "plain", 100, false, false);
	fill(f->e, "read", 20, false, false);
	/* Leased: read just now. */
	for (int i = 0; i < 20; i++) {
		char key[32];

		snprintf(key, sizeof(key), "read-%d", i);
		assert_int_equal(get1(f->e, key, NULL), KVF_OK);
	}
	before = stats_of(f->e).used_bytes;
	/* Ask for 30 objects' worth: only plain ones may go. */
	assert_int_equal(kvf_engine_evict(f->e, 30 * OBJ, &freed, &evicted),
			 KVF_OK);
	assert_int_equal(evicted, 30);
	assert_int_equal(freed, 30 * OBJ);
	assert_int_equal(stats_of(f->e).used_bytes, before - freed);
	assert_int_equal(stats_of(f->e).objects, 160 - 30);
	assert_int_equal(stats_of(f->e).evicted_objects, 30);
	/* Ask for everything: leased and hard-pinned stay; soft pins go last. */
	assert_int_equal(kvf_engine_evict(f->e, 1000 * OBJ, &freed, &evicted),
			 KVF_OK);
	assert_int_equal(evicted, 70 + 20);
	assert_int_equal(stats_of(f->e).objects, 40);
	test_clock_advance_ms(&f->clock, f->cfg.lease_ttl_ms + 1);
	assert_int_equal(count_present(f->e, "hard", 20), 20);
	assert_int_equal(count_present(f->e, "read", 20), 20);
	assert_int_equal(count_present(f->e, "soft", 20), 0);
}

static void test_evict_prefers_least_recently_used(void **state)
{
	struct fixture *f = *state;
	uint64_t evicted = 0;
	char key[32];
	int recent = 0;

	assert_int_equal(mount(f->e, C1, 1, 512 * MIB), KVF_OK);
	fill(f->e, "o", 200, false, false);
	/* Read the first half late: they are the recently used ones. */
	test_clock_advance_ms(&f->clock, 60000);
	read_range(f->e, "o", 0, 100, 1);
	test_clock_advance_ms(&f->clock, f->cfg.lease_ttl_ms + 1);
	assert_int_equal(kvf_engine_evict(f->e, 50 * OBJ, NULL, &evicted),
			 KVF_OK);
	assert_int_equal(evicted, 50);
	for (int i = 0; i < 100; i++) {
		snprintf(key, sizeof(key), "o-%d", i);
		recent += exist1(f->e, key) == KVF_OK;
	}
	/* Sampling is approximate; the old half should take nearly all. */
	assert_true(recent >= 90);
}

/*
 * The clock hands read windows of neighbouring blocks and evict the oldest
 * part of each: with every other object read recently, across two
 * segments and several windows per segment, a pass that frees a quarter
 * must take only unread objects, and so must a second pass.
 */
static void test_evict_windows_keep_recently_read(void **state)
{
	struct fixture *f = *state;
	const int n = 1200;
	char key[32];
	int old = 0;

	assert_int_equal(mount(f->e, C1, 1, 1 * GIB), KVF_OK);
	assert_int_equal(mount(f->e, C1, 2, 1 * GIB), KVF_OK);
	fill(f->e, "w", n, false, false);
	test_clock_advance_ms(&f->clock, 60000);
	read_range(f->e, "w", 1, n, 2);
	test_clock_advance_ms(&f->clock, f->cfg.lease_ttl_ms + 1);
	evict_n(f->e, n / 4);
	evict_n(f->e, n / 8);
	for (int i = 0; i < n; i++) {
		snprintf(key, sizeof(key), "w-%d", i);
		if (i % 2)
			assert_int_equal(exist1(f->e, key), KVF_OK);
		else
			old += exist1(f->e, key) == KVF_OK;
	}
	assert_int_equal(old, n / 2 - n / 4 - n / 8);
}

/*
 * A victim must be old for the whole table, not only among its window's
 * neighbours: after windows of old objects set the age bar, a window of
 * objects read recently loses none of them (the oldest eighth of each
 * window would take 32), while the next window of old objects gives more
 * than its eighth.
 */
static void test_evict_bar_spares_recent_window(void **state)
{
	struct fixture *f = *state;
	const int n = 256; /* one window each: old, then read, then old */
	char key[32];

	assert_int_equal(mount(f->e, C1, 1, 1 * GIB), KVF_OK);
	fill(f->e, "a", n, false, false);
	fill(f->e, "b", n, false, false);
	fill(f->e, "c", n, false, false);
	test_clock_advance_ms(&f->clock, 60000);
	read_range(f->e, "b", 0, n, 1);
	test_clock_advance_ms(&f->clock, f->cfg.lease_ttl_ms + 1);
	/* The first window ("a"): its oldest eighth, which sets the bar. */
	evict_n(f->e, n / 8);
	/* Then "b" (none clears the bar) and "c" (a quarter does). */
	evict_n(f->e, n / 4);
	for (int i = 0; i < n; i++) {
		snprintf(key, sizeof(key), "b-%d", i);
		assert_int_equal(exist1(f->e, key), KVF_OK);
	}
}

/*
 * Among equally old objects (put, as a prefix's blocks are, at one time)
 * the later placed go first: a prefix's deeper blocks before its head.
 */
static void test_evict_equal_ages_deepest_first(void **state)
{
	struct fixture *f = *state;
	const int n = 64;
	char key[32];

	assert_int_equal(mount(f->e, C1, 1, 1 * GIB), KVF_OK);
	fill(f->e, "p", n, false, false);
	test_clock_advance_ms(&f->clock, 60000);
	evict_n(f->e, n / 8);
	for (int i = 0; i < n; i++) {
		snprintf(key, sizeof(key), "p-%d", i);
		assert_int_equal(exist1(f->e, key),
				 i < n - n / 8 ? KVF_OK
					       : KVF_ERR_OBJECT_NOT_FOUND);
	}
}

/*
 * An object read since its put ranks younger than an unread one last
 * used at the same time: once a window of objects read later has set the
 * age bar, a window whose deeper half was read when put loses only unread
 * objects, though by place alone the read ones would go first.
 */
static void test_evict_read_ranks_younger(void **state)
{
	struct fixture *f = *state;
	const int n = 256; /* one window each */
	char key[32];
	int unread = 0;

	assert_int_equal(mount(f->e, C1, 1, 1 * GIB), KVF_OK);
	fill(f->e, "a", n, false, false);
	fill(f->e, "b", n, false, false);
	read_range(f->e, "b", n / 2, n, 1);
	/* "a" read 10 s later: the bar is then 50 s, a bonus 12.5 s. */
	test_clock_advance_ms(&f->clock, 10000);
	read_range(f->e, "a", 0, n, 1);
	test_clock_advance_ms(&f->clock, 50000 + f->cfg.lease_ttl_ms);
	/* The first window ("a"): its oldest eighth, which sets the bar. */
	evict_n(f->e, n / 8);
	evict_n(f->e, n / 8);
	for (int i = 0; i < n; i++) {
		snprintf(key, sizeof(key), "b-%d", i);
		if (i >= n / 2)
			assert_int_equal(exist1(f->e, key), KVF_OK);
		else
			unread += exist1(f->e, key) == KVF_OK;
	}
	assert_int_equal(unread, n / 2 - n / 8);
}

/*
 * Objects "r" put and read at t, then objects "u" put 2 s later and never
 * read, one window together after a window "a" that sets a 50 s age bar.
 * One pass for an eighth of a window: with @order PREFIX the read ones
 * rank 12.5 s younger and only "u" objects go; with AGE the older "r"
 * objects go, read or not.
 */
static void read_against_age(struct fixture *f, enum kvf_eviction_order order,
			     int *kept_r, int *kept_u)
{
	const int n = 256; /* one window */

	kvf_engine_close(f->e);
	f->cfg.eviction_order = order;
	assert_int_equal(kvf_engine_open(&f->cfg, &f->e), KVF_OK);
	assert_int_equal(mount(f->e, C1, 1, 1 * GIB), KVF_OK);
	fill(f->e, "a", n, false, false);
	fill(f->e, "r", n / 2, false, false);
	read_range(f->e, "r", 0, n / 2, 1);
	test_clock_advance_ms(&f->clock, 2000);
	fill(f->e, "u", n / 2, false, false);
	test_clock_advance_ms(&f->clock, 8000);
	read_range(f->e, "a", 0, n, 1);
	test_clock_advance_ms(&f->clock, 50000 + f->cfg.lease_ttl_ms);
	evict_n(f->e, n / 8);
	evict_n(f->e, n / 8);
	*kept_r = count_present(f->e, "r", n / 2);
	*kept_u = count_present(f->e, "u", n / 2);
}

static void test_eviction_order_flag(void **state)
{
	struct fixture *f = *state;
	struct kvf_engine *e;
	int r, u;

	read_against_age(f, KVF_EVICTION_PREFIX, &r, &u);
	assert_int_equal(r, 128);
	assert_int_equal(u, 128 - 32);
	read_against_age(f, KVF_EVICTION_AGE, &r, &u);
	assert_int_equal(r, 128 - 32);
	assert_int_equal(u, 128);
	/* An order this library does not know is refused. */
	f->cfg.eviction_order = (enum kvf_eviction_order)2;
	assert_int_equal(kvf_engine_open(&f->cfg, &e), KVF_ERR_INVALID_ARGUMENT);
}

static void test_watermark_and_failed_allocation(void **state)
{
	struct fixture *f = *state;
	struct kvf_engine_stats s;

	/* 64 MiB segment, 1 MiB objects: 58 fills past 0.90. */
	assert_int_equal(mount(f->e, C1, 1, 64 * MIB), KVF_OK);
	fill(f->e, "w", 57, false, false);
	assert_int_equal(kvf_engine_tick(f->e), KVF_OK);
	assert_int_equal(stats_of(f->e).objects, 57); /* 89%: nothing */
	fill(f->e, "x", 2, false, false);
	assert_int_equal(kvf_client_heartbeat(f->e, C1), KVF_OK);
	assert_int_equal(kvf_engine_tick(f->e), KVF_OK);
	s = stats_of(f->e);
	/* 5% of 64 MiB: about 3 objects, no more. */
	assert_int_equal(s.objects, 59 - 4);
	assert_true(s.used_bytes <= 64 * MIB * 90 / 100);
	/* A put that cannot be placed asks for eviction. */
	fill(f->e, "y", 9, false, false);
	assert_int_equal(put1(f->e, C1, "too-big", 8 * MIB, 1, NULL),
			 KVF_ERR_NO_SPACE);
	assert_int_equal(kvf_client_heartbeat(f->e, C1), KVF_OK);
	assert_int_equal(kvf_engine_tick(f->e), KVF_OK);
	assert_true(stats_of(f->e).evicted_objects >= 4 + 3);
}

static void test_dead_client_cleanup(void **state)
{
	struct fixture *f = *state;
	uint64_t pref[2] = { 1, 2 }, size = 4 * MIB;
	struct kvf_put_config cfg = { .replica_num = 2,
				      .preferred_segments = pref,
				      .nr_preferred = 2 };
	struct kvf_replicas out;
	char key[32];

	assert_int_equal(mount(f->e, C1, 1, 256 * MIB), KVF_OK);
	assert_int_equal(mount(f->e, C2, 2, 256 * MIB), KVF_OK);
	assert_int_equal(mount(f->e, C2, 3, 256 * MIB), KVF_OK);
	fill_with(f->e, "both", 30, &cfg, size);
	cfg.replica_num = 1;
	cfg.nr_preferred = 1;
	fill(f->e, "only", 10, false, false); /* placement's choice */
	fill_with(f->e, "dead", 10, &cfg, size);
	for (int i = 0; i < 10; i++) {
		snprintf(key, sizeof(key), "dead-%d", i);
		assert_int_equal(get1(f->e, key, NULL), KVF_OK); /* leased */
	}
	/* C1 (segment 1) goes silent. */
	test_clock_advance_ms(&f->clock, 6000);
	assert_int_equal(kvf_client_heartbeat(f->e, C2), KVF_OK);
	test_clock_advance_ms(&f->clock, 6000);
	assert_int_equal(kvf_engine_tick(f->e), KVF_OK);
	for (int i = 0; i < 10; i++) {
		snprintf(key, sizeof(key), "dead-%d", i);
		assert_int_equal(exist1(f->e, key), KVF_ERR_OBJECT_NOT_FOUND);
	}
	for (int i = 0; i < 30; i++) {
		snprintf(key, sizeof(key), "both-%d", i);
		assert_int_equal(get1(f->e, key, &out), KVF_OK);
		assert_int_equal(out.count, 1);
		assert_int_equal(out.replica[0].segment_id, 2);
	}
	assert_int_equal(stats_of(f->e).segments, 2);
	assert_int_equal(stats_of(f->e).capacity_bytes, 512 * MIB);
	/* What is left: the surviving replicas, nothing of segment 1. */
	assert_int_equal(stats_of(f->e).used_bytes,
			 30 * size +
				 (uint64_t)count_present(f->e, "only", 10) * OBJ);
	assert_int_equal(stats_of(f->e).objects,
			 30 + (uint64_t)count_present(f->e, "only", 10));
}

/*
 * A pre-empted put's buffer keeps its key's hash as its tag, so a window
 * that holds it and the key's live block counts the live record twice.
 * One 16 MiB segment, 4 KiB objects: the live "k" at 0 and the stale
 * buffer of its pre-empted put at 8192 (@stale_first: the other way
 * round), and at 4096 a soft-pinned object (@soft) or a hole. Asking for
 * one object's worth must evict "k", and the soft-pinned one must stay.
 */
#define SMALL 4096

static void check_stale_twin(struct fixture *f, bool stale_first, bool soft)
{
	struct kvf_put_config soft_cfg = { .replica_num = 1, .soft_pin = true };
	struct kvf_key sk = key_of("soft");
	uint64_t size = SMALL, freed = 0, evicted = 0, base = 1ULL << 40;
	struct kvf_replicas out;
	enum kvf_status st;

	assert_int_equal(mount(f->e, C1, 1, 16 * MIB), KVF_OK);
	assert_int_equal(kvf_client_register(f->e, C2), KVF_OK);
	/* The pre-empted put's buffer goes where the pad would not. */
	if (stale_first)
		assert_int_equal(put1(f->e, C1, "k", SMALL, 1, &out), KVF_OK);
	else
		assert_int_equal(put_complete(f->e, C1, "pad", SMALL, 1),
				 KVF_OK);
	if (soft) {
		assert_int_equal(kvf_batch_put_start(f->e, C1, &sk, &size, 1,
						     &soft_cfg, &out, &st),
				 KVF_OK);
		assert_int_equal(out.replica[0].addr, base + SMALL);
		assert_int_equal(end1(f->e, C1, "soft"), KVF_OK);
	} else {
		assert_int_equal(put_complete(f->e, C1, "gap", SMALL, 1),
				 KVF_OK);
	}
	if (!stale_first) {
		assert_int_equal(put1(f->e, C1, "k", SMALL, 1, &out), KVF_OK);
		assert_int_equal(out.replica[0].addr, base + 2 * SMALL);
		assert_int_equal(remove1(f->e, "pad", false), KVF_OK);
	}
	if (!soft)
		assert_int_equal(remove1(f->e, "gap", false), KVF_OK);
	/* C2 pre-empts C1's stuck put; C1's buffer waits for its release. */
	test_clock_advance_ms(&f->clock, f->cfg.put_discard_timeout_ms + 1);
	assert_int_equal(put1(f->e, C2, "k", SMALL, 1, &out), KVF_OK);
	assert_int_equal(out.replica[0].addr,
			 base + (stale_first ? 2 * SMALL : 0));
	assert_int_equal(end1(f->e, C2, "k"), KVF_OK);
	assert_int_equal(stats_of(f->e).deferred_frees, 1);

	assert_int_equal(kvf_engine_evict(f->e, SMALL, &freed, &evicted),
			 KVF_OK);
	assert_int_equal(evicted, 1);
	assert_int_equal(freed, SMALL);
	assert_int_equal(exist1(f->e, "k"), KVF_ERR_OBJECT_NOT_FOUND);
	if (soft)
		assert_int_equal(exist1(f->e, "soft"), KVF_OK);
}

static void test_evict_stale_twin_after_victim_soft(void **state)
{
	check_stale_twin(*state, false, true);
}

static void test_evict_stale_twin_after_victim(void **state)
{
	check_stale_twin(*state, false, false);
}

static void test_evict_stale_twin_before_victim_soft(void **state)
{
	check_stale_twin(*state, true, true);
}

/*
 * Randomized: a mix of plain, soft-pinned, hard-pinned, leased and
 * processing objects, pre-empted puts (their buffers left behind, the new
 * put ended or not) and holes, over three or four segments with one or
 * two replicas each, against a model of what may go. Asking for exactly the
 * bytes of the evictable objects must take all of them and nothing else;
 * asking next for the soft-pinned ones' bytes must take exactly those;
 * then nothing is left to evict.
 */
enum rk {
	RK_PLAIN,
	RK_SOFT,
	RK_HARD,
	RK_LEASED,
	RK_PROCESSING,
	RK_PREEMPTED_PLAIN, /* pre-empted, the new put ended */
	RK_PREEMPTED_SOFT,  /* ... ended, soft-pinned */
	RK_PREEMPTED_OPEN,  /* ... the new put still processing */
	RK_HOLE,	    /* put, then removed */
};

#define RS_KEYS 160 /* at most */
#define RS_SEGS 4   /* at most */
#define RS_ROUNDS 128

struct rs_key {
	enum rk kind;
	uint64_t size;
	uint32_t replicas;
	bool late; /* put in the second stage, after the pre-emption delay */
	uint64_t segs; /* seeds the order of its preferred segments */
};

/*
 * Dense in evictable objects (6/16 plain, 3/16 pre-empted then ended):
 * with few of them a window's oldest eighth covers them all, and which
 * of two equally old candidates is ranked first never matters.
 */
static enum rk rs_kind(uint64_t r)
{
	static const enum rk rare[] = { RK_SOFT,	  RK_PREEMPTED_SOFT,
					RK_HARD,	  RK_LEASED,
					RK_PROCESSING,	  RK_PREEMPTED_OPEN,
					RK_HOLE };

	r %= 16;
	if (r < 6)
		return RK_PLAIN;
	return r < 9 ? RK_PREEMPTED_PLAIN : rare[r - 9];
}

static uint64_t rs_next(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

static void rs_put(struct kvf_engine *e, int nr_segs, uint64_t client,
		   const char *key, const struct rs_key *k, bool soft,
		   bool hard, bool end)
{
	uint64_t pref[RS_SEGS] = { 1, 2, 3, 4 }, size = k->size;
	struct kvf_put_config cfg = { .replica_num = k->replicas,
				      .preferred_segments = pref,
				      .nr_preferred = k->replicas,
				      .hard_pin = hard,
				      .soft_pin = soft };
	struct kvf_key kk = key_of(key);
	struct kvf_replicas out;
	enum kvf_status st;
	uint64_t rng = k->segs;

	/* Random distinct preferred segments: scatter the replicas. */
	for (int i = nr_segs - 1; i > 0; i--) {
		int j = (int)(rs_next(&rng) % (uint64_t)(i + 1));
		uint64_t t = pref[i];

		pref[i] = pref[j];
		pref[j] = t;
	}
	assert_int_equal(kvf_batch_put_start(e, client, &kk, &size, 1, &cfg,
					     &out, &st),
			 KVF_OK);
	if (end)
		assert_int_equal(end1(e, client, key), KVF_OK);
}

/* Ask for @bytes: exactly @count objects of @want bytes must go. */
static void rs_evict(struct kvf_engine *e, uint64_t seed, const char *what,
		     uint64_t bytes, uint64_t count)
{
	uint64_t freed = 0, evicted = 0, want = count ? bytes : 0;

	assert_int_equal(kvf_engine_evict(e, bytes, &freed, &evicted), KVF_OK);
	if (evicted != count || freed != want)
		fail_msg("seed %llu, %s: evicted %llu objects, %llu bytes; "
			 "want %llu, %llu",
			 (unsigned long long)seed, what,
			 (unsigned long long)evicted, (unsigned long long)freed,
			 (unsigned long long)count, (unsigned long long)want);
}

static void rs_round(uint64_t seed)
{
	static const uint64_t sizes[] = { 4096, 4096, 8192, 12288, 16384 };
	/*
	 * Mostly ~6 blocks per segment, where a window's oldest eighth is
	 * one candidate; every 16th round, windows of a hundred blocks.
	 */
	bool small = seed % 16;
	int nr_keys = small ? 12 : RS_KEYS, nr_segs = small ? 4 : 3;
	uint64_t scale = small ? 16 : 1, seg_size = small ? 2 * MIB : 16 * MIB;
	struct rs_key k[RS_KEYS];
	int order[RS_KEYS];
	uint64_t rng = seed * 0x9e3779b97f4a7c15ULL + 1;
	uint64_t plain_bytes = 0, soft_bytes = 0, nr_plain = 0, nr_soft = 0;
	struct fixture *f;
	char key[32];

	fixture_setup((void **)&f);
	for (uint64_t s = 1; s <= (uint64_t)nr_segs; s++)
		assert_int_equal(mount(f->e, C1, s, seg_size), KVF_OK);
	assert_int_equal(kvf_client_register(f->e, C2), KVF_OK);
	for (int i = 0; i < nr_keys; i++) {
		k[i].kind = rs_kind(rs_next(&rng));
		k[i].size = sizes[rs_next(&rng) % 5] * scale;
		k[i].replicas = 1 + (uint32_t)(rs_next(&rng) % 2);
		k[i].late = rs_next(&rng) % 2;
		k[i].segs = rs_next(&rng) | 1;
		order[i] = i;
	}
	/* Stage 1: stuck puts to pre-empt, holes, early objects. */
	for (int i = nr_keys - 1; i > 0; i--) {
		int j = (int)(rs_next(&rng) % (uint64_t)(i + 1)), t = order[i];

		order[i] = order[j];
		order[j] = t;
	}
	for (int n = 0; n < nr_keys; n++) {
		const struct rs_key *x = &k[order[n]];
		enum rk kind = x->kind;

		snprintf(key, sizeof(key), "r-%d", order[n]);
		test_clock_advance_ms(&f->clock, rs_next(&rng) % 3);
		if (kind >= RK_PREEMPTED_PLAIN && kind <= RK_PREEMPTED_OPEN)
			rs_put(f->e, nr_segs, C1, key, x, false, false, false);
		else if (kind == RK_HOLE || !x->late)
			rs_put(f->e, nr_segs, C1, key, x, kind == RK_SOFT,
			       kind == RK_HARD, kind != RK_PROCESSING);
	}
	/* Stage 2, in another random order: fill holes, pre-empt, put. */
	test_clock_advance_ms(&f->clock, f->cfg.put_discard_timeout_ms + 1);
	for (int i = nr_keys - 1; i > 0; i--) {
		int j = (int)(rs_next(&rng) % (uint64_t)(i + 1)), t = order[i];

		order[i] = order[j];
		order[j] = t;
	}
	for (int n = 0; n < nr_keys; n++) {
		struct rs_key *x = &k[order[n]];
		enum rk kind = x->kind;

		snprintf(key, sizeof(key), "r-%d", order[n]);
		test_clock_advance_ms(&f->clock, rs_next(&rng) % 3);
		/* Half the pre-empting puts go where the stuck one went. */
		if (rs_next(&rng) % 2)
			x->segs = rs_next(&rng) | 1;
		if (kind == RK_HOLE)
			assert_int_equal(remove1(f->e, key, false), KVF_OK);
		else if (kind >= RK_PREEMPTED_PLAIN && kind <= RK_PREEMPTED_OPEN)
			rs_put(f->e, nr_segs, C2, key, x, kind == RK_PREEMPTED_SOFT,
			       false, kind != RK_PREEMPTED_OPEN);
		else if (x->late)
			rs_put(f->e, nr_segs, C1, key, x, kind == RK_SOFT,
			       kind == RK_HARD, kind != RK_PROCESSING);
	}
	/* Leases last: the clock does not move past them. */
	for (int i = 0; i < nr_keys; i++) {
		snprintf(key, sizeof(key), "r-%d", i);
		if (k[i].kind == RK_LEASED)
			assert_int_equal(get1(f->e, key, NULL), KVF_OK);
		if (k[i].kind == RK_PLAIN || k[i].kind == RK_PREEMPTED_PLAIN) {
			plain_bytes += k[i].size * k[i].replicas;
			nr_plain++;
		}
		if (k[i].kind == RK_SOFT || k[i].kind == RK_PREEMPTED_SOFT) {
			soft_bytes += k[i].size * k[i].replicas;
			nr_soft++;
		}
	}

	/* Exactly the evictable objects' bytes: all of them, nothing else. */
	rs_evict(f->e, seed, "plain", plain_bytes, nr_plain);
	/* Then the soft-pinned ones, and then nothing is left. */
	rs_evict(f->e, seed, "soft", soft_bytes, nr_soft);
	rs_evict(f->e, seed, "rest", 64 * MIB, 0);
	for (int i = 0; i < nr_keys; i++) {
		int want;

		snprintf(key, sizeof(key), "r-%d", i);
		switch (k[i].kind) {
		case RK_HARD:
		case RK_LEASED:
			want = KVF_OK;
			break;
		case RK_PROCESSING:
		case RK_PREEMPTED_OPEN:
			want = KVF_ERR_OBJECT_NOT_READY;
			break;
		default:
			want = KVF_ERR_OBJECT_NOT_FOUND;
			break;
		}
		if (get1(f->e, key, NULL) != want)
			fail_msg("seed %llu: key %s (kind %d) answers %d, want %d",
				 (unsigned long long)seed, key, k[i].kind,
				 get1(f->e, key, NULL), want);
	}
	fixture_teardown((void **)&f);
}

static void test_evict_random_against_model(void **state)
{
	(void)state;
	for (uint64_t seed = 1; seed <= RS_ROUNDS; seed++)
		rs_round(seed);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
			test_evict_respects_leases_and_pins, fixture_setup,
			fixture_teardown),
		cmocka_unit_test_setup_teardown(
			test_evict_prefers_least_recently_used, fixture_setup,
			fixture_teardown),
		cmocka_unit_test_setup_teardown(
			test_evict_windows_keep_recently_read, fixture_setup,
			fixture_teardown),
		cmocka_unit_test_setup_teardown(
			test_evict_bar_spares_recent_window, fixture_setup,
			fixture_teardown),
		cmocka_unit_test_setup_teardown(
			test_evict_equal_ages_deepest_first, fixture_setup,
			fixture_teardown),
		cmocka_unit_test_setup_teardown(test_evict_read_ranks_younger,
						fixture_setup, fixture_teardown),
		cmocka_unit_test_setup_teardown(test_eviction_order_flag,
						fixture_setup, fixture_teardown),
		cmocka_unit_test_setup_teardown(
			test_watermark_and_failed_allocation, fixture_setup,
			fixture_teardown),
		cmocka_unit_test_setup_teardown(test_dead_client_cleanup,
						fixture_setup, fixture_teardown),
		cmocka_unit_test_setup_teardown(
			test_evict_stale_twin_after_victim_soft, fixture_setup,
			fixture_teardown),
		cmocka_unit_test_setup_teardown(
			test_evict_stale_twin_after_victim, fixture_setup,
			fixture_teardown),
		cmocka_unit_test_setup_teardown(
			test_evict_stale_twin_before_victim_soft,
			fixture_setup, fixture_teardown),
		cmocka_unit_test(test_evict_random_against_model),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
