/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_profile.c - per-stage profiler: tier discovery and
 * fallback (forced through KVF_PROFILE_TIER), what each tier must
 * produce (the hardware and software tiers each as their own test run,
 * skipped only where the machine lacks that tier), stage sums against
 * the batch total with a fake workload driving the stage.h hooks
 * directly, the on/off switch, reset, and the text and JSON renderings.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>

#include <cmocka.h>

#include <kvforge/status.h>

#include "tools/lib/json_read.h"
#include "profiling/stage.h"

static struct kvf_profiler *new_prof(const char *tier)
{
	struct kvf_profiler *p;

	if (tier)
		setenv("KVF_PROFILE_TIER", tier, 1);
	else
		unsetenv("KVF_PROFILE_TIER");
	assert_int_equal(kvf__prof_create(&p), KVF_OK);
	return p;
}

static volatile uint64_t sink;

static void spin(unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		sink += i * 2654435761u;
}

/* A fake batch: every stage but journal, with uneven work per stage. */
/* The probe stage of a fake batch takes at least this long. */
#define PROBE_US 100

static void sleep_at_least_us(long us)
{
	struct timespec ts = { 0, us * 1000 };

	while (nanosleep(&ts, &ts))
		;
}

static void fake_batch(struct kvf_profiler *p, enum kvf__op op, size_t keys)
{
	struct kvf__prof_span sp;

	kvf__prof_begin(p, &sp, op, keys);
	spin(100);
	kvf__prof_mark(&sp, KVF__STAGE_VALIDATE);
	spin(300);
	kvf__prof_mark(&sp, KVF__STAGE_HASH);
	sleep_at_least_us(PROBE_US);
	kvf__prof_mark(&sp, KVF__STAGE_PROBE);
	spin(50);
	kvf__prof_mark(&sp, KVF__STAGE_ALLOCATE);
	kvf__prof_mark(&sp, KVF__STAGE_PUBLISH);
	spin(10);
	kvf__prof_mark(&sp, KVF__STAGE_REPLY);
	kvf__prof_end(&sp);
}

static struct kvf_profile_snapshot *snap(struct kvf_profiler *p)
{
	struct kvf_profile_snapshot *s;

	assert_int_equal(kvf_profile_snapshot(p, &s), KVF_OK);
	return s;
}

static const struct kvf_profile_tier_info *
tier_info(const struct kvf_profile_snapshot *s, const char *name)
{
	for (int i = 0; i < KVF_PROFILE_TIER_COUNT; i++)
		if (!strcmp(s->tiers[i].name, name))
			return &s->tiers[i];
	fail_msg("no tier %s", name);
	return NULL;
}

static void test_auto_tier_never_fails(void **state)
{
	struct kvf_profiler *p = new_prof(NULL);
	struct kvf_profile_snapshot *s;
	const struct kvf_profile_tier_info *hw;

	kvf_profile_enable(p, true);
	assert_true(kvf_profile_enabled(p));
	s = snap(p);
	hw = tier_info(s, "hardware");
	assert_true(hw->tried);
	if (!hw->available) {
		/* This VM has no PMU: the reason says why, and we moved on. */
		assert_true(hw->reason[0] != '\0');
		assert_string_not_equal(s->tier, "hardware");
	}
	assert_true(tier_info(s, "clock")->available);
	assert_string_equal(kvf_profile_tier(p), s->tier);
	kvf_profile_snapshot_free(s);
	kvf__prof_destroy(p);
}

static void test_forced_clock(void **state)
{
	struct kvf_profiler *p = new_prof("clock");
	struct kvf_profile_snapshot *s;

	kvf_profile_enable(p, true);
	s = snap(p);
	assert_string_equal(s->tier, "clock");
	assert_int_equal(s->n_counters, 0);
	assert_false(tier_info(s, "hardware")->tried);
	assert_false(tier_info(s, "software")->tried);
	assert_non_null(strstr(tier_info(s, "hardware")->reason, "skipped"));
	kvf_profile_snapshot_free(s);
	kvf__prof_destroy(p);
}

static void test_forced_software(void **state)
{
	struct kvf_profiler *p = new_prof("software");
	struct kvf_profile_snapshot *s;

	kvf_profile_enable(p, true);
	s = snap(p);
	assert_false(tier_info(s, "hardware")->tried);
	assert_true(tier_info(s, "software")->tried);
	if (!strcmp(s->tier, "software")) {
		assert_int_equal(s->n_counters, 3);
		assert_string_equal(s->counter_names[0], "task-clock");
	} else {
		/* No perf_event_open at all (seccomp): clock, with a reason. */
		assert_string_equal(s->tier, "clock");
		assert_true(tier_info(s, "software")->reason[0] != '\0');
	}
	kvf_profile_snapshot_free(s);
	kvf__prof_destroy(p);
}

static void test_forced_hardware_falls_back(void **state)
{
	struct kvf_profiler *p = new_prof("hardware");
	struct kvf_profile_snapshot *s;

	kvf_profile_enable(p, true);
	fake_batch(p, KVF__OP_GET, 8); /* must work whatever the tier */
	s = snap(p);
	assert_true(tier_info(s, "hardware")->tried);
	if (!tier_info(s, "hardware")->available) {
		assert_string_not_equal(s->tier, "hardware");
		assert_true(tier_info(s, "hardware")->reason[0] != '\0');
	}
	assert_int_equal(
		kvf_profile_snapshot_cell(s, KVF__OP_GET, s->n_stages)->calls,
		1);
	kvf_profile_snapshot_free(s);
	kvf__prof_destroy(p);
}

static void test_unknown_tier_name(void **state)
{
	struct kvf_profiler *p = new_prof("warp-drive");

	kvf_profile_enable(p, true);
	assert_non_null(kvf_profile_tier(p));
	kvf__prof_destroy(p);
}

/* Stages add up to the total; counts per stage match the batches. */
static void check_sums(const char *tier, unsigned every)
{
	struct kvf_profiler *p = new_prof(tier);
	struct kvf_profile_snapshot *s;
	const struct kvf_profile_cell *tot;
	uint64_t ns = 0, ctr[KVF_PROFILE_MAX_COUNTERS] = {0};
	unsigned stages_run = 0;

	kvf_profile_set_sampling(p, every);
	kvf_profile_enable(p, true);
	for (int i = 0; i < 50; i++)
		fake_batch(p, KVF__OP_PUT_START, 128);
	for (int i = 0; i < 20; i++)
		fake_batch(p, KVF__OP_GET, 64);
	s = snap(p);
	tot = kvf_profile_snapshot_cell(s, KVF__OP_PUT_START, s->n_stages);
	assert_int_equal(tot->calls, 50);
	assert_int_equal(tot->keys, 50 * 128);
	assert_true(tot->ns > 0);
	for (unsigned st = 0; st < s->n_stages; st++) {
		const struct kvf_profile_cell *c =
			kvf_profile_snapshot_cell(s, KVF__OP_PUT_START, st);

		if (st == KVF__STAGE_JOURNAL) {
			assert_int_equal(c->calls, 0); /* never marked */
			continue;
		}
		assert_int_equal(c->calls, 50);
		assert_int_equal(c->keys, 50 * 128);
		assert_int_equal(c->sampled_calls, tot->sampled_calls);
		ns += c->ns;
		stages_run++;
		for (unsigned i = 0; i < s->n_counters; i++)
			ctr[i] += c->counters[i];
	}
	/* Each cell is rounded to ns on its own: at most 1/2 ns apart. */
	assert_true(ns <= tot->ns + stages_run && tot->ns <= ns + stages_run);
	/*
	 * Time went to the right stage: the probe stage slept at least
	 * PROBE_US per batch (a lower bound, so no timing race).
	 */
	assert_true(kvf_profile_snapshot_cell(s, KVF__OP_PUT_START,
					      KVF__STAGE_PROBE)
			    ->ns >= 50ULL * PROBE_US * 1000);
	for (unsigned i = 0; i < s->n_counters; i++)
		assert_int_equal(ctr[i], tot->counters[i]);
	if (every == 1 && s->n_counters)
		assert_int_equal(tot->sampled_calls, 50);
	if (!s->n_counters)
		assert_int_equal(tot->sampled_calls, 0);
	assert_int_equal(
		kvf_profile_snapshot_cell(s, KVF__OP_GET, s->n_stages)->keys,
		20 * 64);
	kvf_profile_snapshot_free(s);
	kvf__prof_destroy(p);
}

static void test_sums_software_every(void **state)
{
	check_sums("software", 1);
}

static void test_sums_software_adaptive(void **state)
{
	check_sums("software", 0);
}

static void test_sums_clock(void **state)
{
	check_sums("clock", 1);
}

static void test_off_and_reset(void **state)
{
	struct kvf_profiler *p = new_prof(NULL);
	struct kvf_profile_snapshot *s;
	struct kvf__prof_span sp;

	/* Never enabled: the inline check keeps the span off. */
	kvf__prof_begin(p, &sp, KVF__OP_GET, 4);
	assert_false(sp.on);
	kvf__prof_end(&sp);
	/* A NULL profiler is off too (an engine built without one). */
	kvf__prof_begin(NULL, &sp, KVF__OP_GET, 4);
	assert_false(sp.on);

	kvf_profile_enable(p, true);
	fake_batch(p, KVF__OP_REMOVE, 10);
	kvf_profile_enable(p, false);
	fake_batch(p, KVF__OP_REMOVE, 10);
	s = snap(p);
	assert_int_equal(
		kvf_profile_snapshot_cell(s, KVF__OP_REMOVE, s->n_stages)
			->calls,
		1);
	kvf_profile_snapshot_free(s);

	kvf_profile_reset(p);
	s = snap(p);
	for (unsigned o = 0; o < s->n_ops; o++)
		for (unsigned st = 0; st <= s->n_stages; st++) {
			const struct kvf_profile_cell *c =
				kvf_profile_snapshot_cell(s, o, st);

			assert_int_equal(c->calls, 0);
			assert_int_equal(c->ns, 0);
		}
	assert_null(kvf_profile_snapshot_cell(s, s->n_ops, 0));
	assert_null(kvf_profile_snapshot_cell(s, 0, s->n_stages + 1));
	kvf_profile_snapshot_free(s);

	kvf_profile_enable(p, true);
	fake_batch(p, KVF__OP_REMOVE, 10);
	s = snap(p);
	assert_int_equal(
		kvf_profile_snapshot_cell(s, KVF__OP_REMOVE, s->n_stages)
			->calls,
		1);
	kvf_profile_snapshot_free(s);
	kvf__prof_destroy(p);
}

static char *render(struct kvf_profiler *p,
		    int (*fn)(struct kvf_profiler *, FILE *), size_t *len)
{
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);

	assert_non_null(f);
	assert_int_equal(fn(p, f), KVF_OK);
	assert_int_equal(fclose(f), 0);
	return buf;
}

struct find_str {
	const char *path;
	char val[200];
	int found;
};

static int find_str_cb(void *ctx, const char *path, enum kvf__json_kind kind,
		       double num, const char *str)
{
	struct find_str *f = ctx;

	if (strcmp(path, f->path))
		return 0;
	f->found = 1;
	if (kind == KVF__JSON_STRING)
		snprintf(f->val, sizeof(f->val), "%s", str);
	else
		snprintf(f->val, sizeof(f->val), "%g", num);
	return 0;
}

static const char *json_get(const char *js, size_t len, const char *path,
			    struct find_str *f)
{
	f->path = path;
	f->found = 0;
	assert_int_equal(kvf__json_flatten(js, len, find_str_cb, f, NULL), 0);
	if (!f->found)
		fail_msg("JSON has no %s:\n%s", path, js);
	return f->val;
}

static void test_json_fields(void **state)
{
	struct kvf_profiler *p = new_prof("software");
	struct find_str f;
	double calls, probe_ns, total_ns, sc;
	size_t len;
	char *js;

	kvf_profile_set_sampling(p, 1);
	kvf_profile_enable(p, true);
	for (int i = 0; i < 3; i++)
		fake_batch(p, KVF__OP_GET, 32);
	js = render(p, kvf_profile_render_json, &len);

	json_get(js, len, "tier", &f);
	assert_string_equal(f.val, kvf_profile_tier(p));
	json_get(js, len, "clock.source", &f);
	json_get(js, len, "clock.ghz", &f);
	json_get(js, len, "sampling.every", &f);
	assert_string_equal(f.val, "1");
	json_get(js, len, "user_only", &f);
	json_get(js, len, "threads", &f);
	assert_string_equal(f.val, "1");
	assert_string_equal(json_get(js, len, "tiers.0.name", &f), "hardware");
	json_get(js, len, "tiers.0.available", &f);
	json_get(js, len, "tiers.0.tried", &f);
	json_get(js, len, "tiers.0.reason", &f);
	assert_string_equal(json_get(js, len, "tiers.2.name", &f), "clock");
	assert_int_equal(
		kvf__json_number(js, len, "ops.get.total.calls", &calls), 0);
	assert_true(calls == 3);
	assert_int_equal(
		kvf__json_number(js, len, "ops.get.total.ns", &total_ns), 0);
	assert_int_equal(
		kvf__json_number(js, len, "ops.get.stages.probe.ns", &probe_ns),
		0);
	assert_true(probe_ns > 0 && probe_ns <= total_ns);
	json_get(js, len, "ops.get.total.ns_per_key", &f);
	json_get(js, len, "ops.get.total.ns_per_call", &f);
	json_get(js, len, "ops.get.total.keys", &f);
	assert_int_equal(kvf__json_number(js, len,
					  "ops.get.stages.hash.sampled_calls",
					  &sc),
			 0);
	if (!strcmp(kvf_profile_tier(p), "software")) {
		assert_true(sc == 3);
		assert_string_equal(json_get(js, len, "counters.0", &f),
				    "task-clock");
		json_get(js, len, "ops.get.stages.hash.counters.page-faults",
			 &f);
	}
	/* Ops and stages that never ran are left out. */
	assert_int_equal(
		kvf__json_number(js, len, "ops.put_end.total.calls", &calls),
		1);
	assert_int_equal(kvf__json_number(js, len,
					  "ops.get.stages.journal.calls",
					  &calls),
			 1);
	free(js);

	js = render(p, kvf_profile_render_text, &len);
	assert_non_null(strstr(js, "TOTAL"));
	assert_non_null(strstr(js, "probe"));
	assert_non_null(strstr(js, "get "));
	free(js);

	js = render(p, kvf_profile_render_tiers, &len);
	assert_non_null(strstr(js, "hardware: "));
	assert_non_null(strstr(js, "(active)"));
	free(js);
	kvf__prof_destroy(p);
}

static void test_json_reader(void **state)
{
	static const char doc[] =
		" {\"a\": {\"b\": [1, 2.5e1, -3]}, \"s\": \"x\\\"y\\u0041\","
		" \"t\": true, \"n\": null, \"e\": {}, \"r\": {\"g.m\": 7}} ";
	static const char *const bad[] = {
		"",    "{",	"{\"a\":}",    "[1,]",	"{\"a\":1,}",
		"01x", "\"abc", "{\"a\":1} x", "[1 2]", "{\"a\" 1}",
		"-",   "1.",	"tru",
	};
	struct find_str f;
	double v;

	assert_int_equal(kvf__json_number(doc, strlen(doc), "a.b.1", &v), 0);
	assert_true(v == 25.0);
	assert_int_equal(kvf__json_number(doc, strlen(doc), "a.b.2", &v), 0);
	assert_true(v == -3.0);
	assert_int_equal(kvf__json_number(doc, strlen(doc), "r.g.m", &v), 0);
	assert_true(v == 7.0);
	assert_int_equal(kvf__json_number(doc, strlen(doc), "a.b.3", &v), 1);
	assert_string_equal(json_get(doc, strlen(doc), "s", &f), "x\"yA");
	assert_string_equal(json_get(doc, strlen(doc), "t", &f), "1");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(
			kvf__json_number(bad[i], strlen(bad[i]), "zz", &v), -1);
}

/* Total of counter @name over every put_start stage, or -1 if absent. */
static int64_t counter_total(const struct kvf_profile_snapshot *s,
			     const char *name)
{
	const struct kvf_profile_cell *tot =
		kvf_profile_snapshot_cell(s, KVF__OP_PUT_START, s->n_stages);

	for (unsigned i = 0; i < s->n_counters; i++)
		if (!strcmp(s->counter_names[i], name))
			return (int64_t)tot->counters[i];
	return -1;
}

/*
 * What tier @state (a name) must produce when the machine has it: its
 * own counters, named, non-zero over real work; and the stage sums.
 */
static void test_tier_produces(void **state)
{
	const char *tier = *state;
	struct kvf_profiler *p = new_prof(tier);
	struct kvf_profile_snapshot *s;

	kvf_profile_set_sampling(p, 1);
	kvf_profile_enable(p, true);
	for (int i = 0; i < 10; i++)
		fake_batch(p, KVF__OP_PUT_START, 16);
	s = snap(p);
	assert_string_equal(s->tier, tier);
	assert_true(tier_info(s, tier)->tried);
	assert_true(tier_info(s, tier)->available);
	assert_string_equal(kvf_profile_tier(p), tier);
	if (!strcmp(tier, "hardware")) {
		/* Cycles lead the group; the rest may be missing on a CPU. */
		assert_true(s->n_counters >= 1 && s->n_counters <= 4);
		assert_string_equal(s->counter_names[0], "cycles");
		assert_true(counter_total(s, "cycles") > 0);
		assert_int_not_equal(counter_total(s, "instructions"), 0);
	} else if (!strcmp(tier, "software")) {
		assert_int_equal(s->n_counters, 3);
		assert_string_equal(s->counter_names[0], "task-clock");
		assert_string_equal(s->counter_names[1], "page-faults");
		assert_string_equal(s->counter_names[2], "context-switches");
		/* The spins and the sleep's entry took CPU time. */
		assert_true(counter_total(s, "task-clock") > 0);
	} else {
		assert_int_equal(s->n_counters, 0);
	}
	assert_int_equal(kvf_profile_snapshot_cell(s, KVF__OP_PUT_START,
						   s->n_stages)->sampled_calls,
			 s->n_counters ? 10 : 0);
	kvf_profile_snapshot_free(s);
	kvf__prof_destroy(p);
	check_sums(tier, 1);
}

/* Whether forcing @tier gets it here; *@why says why not. */
static bool tier_present(const char *tier, char *why, size_t cap)
{
	struct kvf_profiler *p;
	struct kvf_profile_snapshot *s;
	bool present;

	setenv("KVF_PROFILE_TIER", tier, 1);
	if (kvf__prof_create(&p) != KVF_OK) {
		snprintf(why, cap, "profiler could not be created");
		return false;
	}
	kvf_profile_enable(p, true);
	if (kvf_profile_snapshot(p, &s) != KVF_OK) {
		kvf__prof_destroy(p);
		snprintf(why, cap, "no snapshot");
		return false;
	}
	present = !strcmp(s->tier, tier);
	for (int i = 0; i < KVF_PROFILE_TIER_COUNT; i++)
		if (!strcmp(s->tiers[i].name, tier))
			snprintf(why, cap, "%s", s->tiers[i].reason);
	kvf_profile_snapshot_free(s);
	kvf__prof_destroy(p);
	return present;
}

/*
 * KVF_TEST_PROFILE_TIER=hardware|software (the test_profile_<tier>.sh
 * wrappers): check only that tier, and exit 77 (SKIP) when this machine
 * lacks it. Unset: everything else, with the clock tier, which every
 * machine has.
 */
static int run_one_tier(const char *tier)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_prestate(test_tier_produces, (void *)tier),
	};
	char why[256] = "";

	if (strcmp(tier, "hardware") && strcmp(tier, "software")) {
		fprintf(stderr, "KVF_TEST_PROFILE_TIER=%s: want hardware or "
				"software\n", tier);
		return 99;
	}
	if (!tier_present(tier, why, sizeof(why))) {
		printf("# SKIP: no %s tier on this machine: %s\n", tier, why);
		return 77;
	}
	return cmocka_run_group_tests_name(tier, tests, NULL, NULL);
}

int main(void)
{
	const char *only = getenv("KVF_TEST_PROFILE_TIER");

	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_auto_tier_never_fails),
		cmocka_unit_test(test_forced_clock),
		cmocka_unit_test(test_forced_software),
		cmocka_unit_test(test_forced_hardware_falls_back),
		cmocka_unit_test(test_unknown_tier_name),
		cmocka_unit_test(test_sums_software_every),
		cmocka_unit_test(test_sums_software_adaptive),
		cmocka_unit_test(test_sums_clock),
		cmocka_unit_test(test_off_and_reset),
		cmocka_unit_test(test_json_fields),
		cmocka_unit_test(test_json_reader),
		cmocka_unit_test_prestate(test_tier_produces, "clock"),
	};

	setenv("KVF_PROFILE_QUIET", "1", 1);
	if (only && *only)
		return run_one_tier(only);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
