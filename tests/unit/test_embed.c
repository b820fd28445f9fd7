/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_embed.c - living inside a host process: the engine's
 * lines reach the host's log callback (and nothing else does), and a host
 * that uses urcu-memb itself keeps its own RCU registration whatever the
 * engine does on the same thread.
 *
 * The RCU scenarios each run on a fresh thread (registration is per
 * thread) and record their first failed check, which the main thread
 * asserts after the join: cmocka's failure path is not for other threads.
 */
#include "config.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/unit/helpers.h"

#include "base/rcu.h"
#include "journal/journal.h"

/* ---- the log callback ---- */

#define MAX_LINES 8

struct log_rec {
	pthread_mutex_t mu;
	int n;
	int level[MAX_LINES];
	char msg[MAX_LINES][1024];
};

static void record_line(void *ctx, int level, const char *msg)
{
	struct log_rec *r = ctx;

	pthread_mutex_lock(&r->mu);
	if (r->n < MAX_LINES) {
		r->level[r->n] = level;
		snprintf(r->msg[r->n], sizeof(r->msg[0]), "%s", msg);
	}
	r->n++;
	pthread_mutex_unlock(&r->mu);
}

static void log_config(struct fixture *f, struct log_rec *rec)
{
	fixture_config(f);
	f->cfg.log = record_line;
	f->cfg.log_ctx = rec;
}

static void test_defaults_log_to_stderr(void **state)
{
	struct kvf_config cfg;

	(void)state;
	kvf_config_init(&cfg);
	assert_null(cfg.log);
	assert_null(cfg.log_ctx);
}

/*
 * The profiler's tier line, forced to the clock tier (present on every
 * machine), reaches each engine's own callback once, with its level.
 */
static void test_profiler_line_reaches_each_engine(void **state)
{
	struct log_rec rec[2] = { { .mu = PTHREAD_MUTEX_INITIALIZER },
				  { .mu = PTHREAD_MUTEX_INITIALIZER } };
	struct fixture f[2];

	(void)state;
	setenv("KVF_PROFILE_TIER", "clock", 1);
	for (int i = 0; i < 2; i++) {
		log_config(&f[i], &rec[i]);
		assert_int_equal(kvf_engine_open(&f[i].cfg, &f[i].e), KVF_OK);
		kvf_profile_enable(kvf_engine_profiler(f[i].e), true);
		kvf_profile_enable(kvf_engine_profiler(f[i].e), false);
		kvf_profile_enable(kvf_engine_profiler(f[i].e), true);
	}
	for (int i = 0; i < 2; i++) {
		kvf_engine_close(f[i].e);
		assert_int_equal(rec[i].n, 1);
		assert_int_equal(rec[i].level[0], KVF_LOG_INFO);
		assert_string_equal(rec[i].msg[0], "profile tier clock");
	}
	unsetenv("KVF_PROFILE_TIER");
}

/* A journal whose only object lies outside its segment. */
static char *write_bad_journal(void)
{
	char *dir = test_tmpdir("embed-log");
	struct kvf__journal_config jc = { .dir = dir,
					  .durability = KVF_DURABILITY_STRICT };
	struct kvf__jrec rec[2] = { { .type = KVF__JREC_SEGMENT_MOUNT },
				    { .type = KVF__JREC_OBJECT_PUT } };
	struct kvf__journal *j;

	rec[0].mount.segment_id = 1;
	rec[0].mount.client_id = 1;
	rec[0].mount.base = 1ULL << 40;
	rec[0].mount.size = 1 * MIB;
	rec[0].mount.name = "seg";
	rec[0].mount.name_len = 3;
	rec[0].mount.endpoint = "";
	rec[1].obj.key = "far-away";
	rec[1].obj.key_len = 8;
	rec[1].obj.size = 4096;
	rec[1].obj.nr_replicas = 1;
	rec[1].obj.replicas[0].segment_id = 1;
	rec[1].obj.replicas[0].offset = 2 * MIB;
	assert_int_equal(kvf__journal_open(&jc, &j), KVF_OK);
	assert_int_equal(kvf__journal_append(j, rec, 2), KVF_OK);
	kvf__journal_close(j);
	return dir;
}

/* An open that refuses a journal names the record through the callback. */
static void test_refused_open_names_record(void **state)
{
	struct log_rec rec = { .mu = PTHREAD_MUTEX_INITIALIZER };
	struct fixture f;
	char *dir = write_bad_journal();

	(void)state;
	log_config(&f, &rec);
	f.cfg.durability = KVF_DURABILITY_STRICT;
	f.cfg.data_dir = dir;
	f.e = NULL;
	assert_int_equal(kvf_engine_open(&f.cfg, &f.e),
			 KVF_ERR_JOURNAL_CORRUPT);
	assert_null(f.e);
	assert_int_equal(rec.n, 1);
	assert_int_equal(rec.level[0], KVF_LOG_ERROR);
	assert_non_null(strstr(rec.msg[0], "key far-away"));
	assert_non_null(strstr(rec.msg[0], "refusing to open"));
	assert_null(strchr(rec.msg[0], '\n'));
	free(dir);
}

/* ---- a host that uses urcu-memb itself ---- */

struct scenario {
	int failed_line; /* 0: every check held */
	bool flag;	 /* set by a call_rcu callback */
	struct rcu_head head;
};

#define CHECK(s, cond)                                                         \
	do {                                                                   \
		if (!(cond) && !(s)->failed_line)                              \
			(s)->failed_line = __LINE__;                           \
	} while (0)

static bool registered(void)
{
	return URCU_TLS(urcu_memb_reader).registered;
}

static void set_flag(struct rcu_head *head)
{
	struct scenario *s = caa_container_of(head, struct scenario, head);

	__atomic_store_n(&s->flag, true, __ATOMIC_RELEASE);
}

/* Engine calls of every kind, including ones that wait for grace periods. */
static void use_engine(struct scenario *s)
{
	struct fixture f;

	fixture_config(&f);
	CHECK(s, kvf_engine_open(&f.cfg, &f.e) == KVF_OK);
	if (!f.e)
		return;
	CHECK(s, mount(f.e, 1, 1, 16 * MIB) == KVF_OK);
	CHECK(s, put_complete(f.e, 1, "k", 4096, 1) == KVF_OK);
	CHECK(s, get1(f.e, "k", NULL) == KVF_OK);
	CHECK(s, kvf_segment_unmount(f.e, 1, 1) == KVF_OK);
	CHECK(s, kvf_engine_tick(f.e) == KVF_OK);
	kvf_engine_close(f.e);
}

/* The host's own RCU use: a section, a grace period, a callback. */
static void use_rcu_as_host(struct scenario *s)
{
	urcu_memb_read_lock();
	CHECK(s, urcu_memb_read_ongoing());
	urcu_memb_read_unlock();
	urcu_memb_synchronize_rcu();
	s->flag = false;
	urcu_memb_call_rcu(&s->head, set_flag);
	urcu_memb_barrier();
	CHECK(s, __atomic_load_n(&s->flag, __ATOMIC_ACQUIRE));
}

/*
 * Registered by the host before the engine's first call: still registered
 * after the engine's calls, an explicit kvf_thread_register/unregister
 * pair and close, and the host's RCU use works after each.
 */
static void *host_registered_first(void *arg)
{
	struct scenario *s = arg;

	urcu_memb_register_thread();
	use_rcu_as_host(s);
	use_engine(s);
	CHECK(s, registered());
	use_rcu_as_host(s);
	CHECK(s, kvf_thread_register() == KVF_OK);
	kvf_thread_unregister();
	CHECK(s, registered());
	use_engine(s);
	CHECK(s, registered());
	use_rcu_as_host(s);
	urcu_memb_unregister_thread();
	CHECK(s, !registered());
	return NULL;
}

/*
 * A host that drops its registration between engine calls: the engine
 * registers the thread itself next time, and gives that one back.
 */
static void *host_unregisters_between_calls(void *arg)
{
	struct scenario *s = arg;

	urcu_memb_register_thread();
	use_engine(s);
	urcu_memb_unregister_thread();
	CHECK(s, !registered());
	use_engine(s);
	CHECK(s, registered());
	kvf_thread_unregister();
	CHECK(s, !registered());
	/* Free again: the host may register it once more. */
	urcu_memb_register_thread();
	use_rcu_as_host(s);
	urcu_memb_unregister_thread();
	return NULL;
}

/* A thread nobody registered: the engine's registration, and only it. */
static void *engine_registers(void *arg)
{
	struct scenario *s = arg;

	CHECK(s, !registered());
	use_engine(s);
	CHECK(s, registered());
	kvf_thread_unregister();
	CHECK(s, !registered());
	kvf_thread_unregister(); /* harmless twice */
	CHECK(s, !registered());
	CHECK(s, kvf_thread_register() == KVF_OK);
	CHECK(s, registered());
	return NULL; /* the exit destructor unregisters */
}

static void run_on_fresh_thread(void *(*fn)(void *))
{
	struct scenario s = { 0 };
	pthread_t t;

	assert_int_equal(pthread_create(&t, NULL, fn, &s), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	if (s.failed_line)
		fail_msg("check at line %d failed", s.failed_line);
}

static void test_host_registered_first(void **state)
{
	(void)state;
	run_on_fresh_thread(host_registered_first);
}

static void test_host_unregisters_between_calls(void **state)
{
	(void)state;
	run_on_fresh_thread(host_unregisters_between_calls);
}

static void test_engine_registers_unowned_thread(void **state)
{
	(void)state;
	run_on_fresh_thread(engine_registers);
}

/*
 * A host calling a grace-period-waiting engine call (unmount) from inside
 * its own read-side section would deadlock; the engine aborts instead,
 * saying why. Runs in a child (SIGALRM there means it hung). Not under
 * TSan, which does not follow fork() in a threaded process.
 */
static void test_call_inside_host_section_aborts(void **state)
{
	int status;
	pid_t pid;

	(void)state;
#if defined(__SANITIZE_THREAD__)
	skip();
#endif
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct fixture f;
		int null = open("/dev/null", O_WRONLY);

		if (null >= 0)
			dup2(null, STDERR_FILENO);
		alarm(10);
		fixture_config(&f); /* open registers the thread, if need be */
		if (kvf_engine_open(&f.cfg, &f.e) || mount(f.e, 1, 1, 16 * MIB))
			_exit(3);
		urcu_memb_read_lock();
		kvf_segment_unmount(f.e, 1, 1);
		_exit(4); /* returned: neither aborted nor hung */
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status));
	assert_int_equal(WTERMSIG(status), SIGABRT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults_log_to_stderr),
		cmocka_unit_test(test_profiler_line_reaches_each_engine),
		cmocka_unit_test(test_refused_open_names_record),
		cmocka_unit_test(test_host_registered_first),
		cmocka_unit_test(test_host_unregisters_between_calls),
		cmocka_unit_test(test_engine_registers_unowned_thread),
		cmocka_unit_test(test_call_inside_host_section_aborts),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
