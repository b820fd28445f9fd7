/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_remove_rcu.c - removal, mount and unmount (which drops
 * the segment's replicas) never hold a read-side section across a journal
 * wait, the segment-walking sweep removes each object
 * once, and eviction removes through the same path without counting as
 * a client's remove.
 *
 * The journal's syncs are held at a gate: this program defines fsync,
 * fdatasync and msync itself (the engine, linked statically, and LMDB
 * call these), so while the gate is closed a STRICT append cannot
 * finish. A removal is started on a thread and, once a sync is waiting
 * at the gate, another thread waits for a grace period. That grace
 * period must end while the gate is still closed: a remover inside a
 * read-side section across its journal wait would hold it up until the
 * gate opens. The gate opens after a bounded wait either way, so a
 * regression fails the assertion instead of hanging.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "tests/unit/helpers.h"
#include "tests/stress/audit.h"

#include "base/rcu.h"
#include "engine/internal.h"
#include "journal/journal.h"

#define C1 41
/* More objects than one sweep window (engine/remove.c): several appends. */
#define NOBJ 700
#define OBJ_SIZE (16 * 1024)
/* Longest the test waits for an event that must happen. */
#define WAIT_S 20

/* ---- the sync gate ------------------------------------------------------ */

static pthread_mutex_t gate_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static bool gate_closed;
static unsigned gate_waiters;

static void deadline_in(struct timespec *ts, int seconds)
{
	clock_gettime(CLOCK_REALTIME, ts);
	ts->tv_sec += seconds;
}

/* Hold a sync while the gate is closed (at most WAIT_S: never hang). */
static void gate_pass(void)
{
	struct timespec until;

	deadline_in(&until, WAIT_S);
	pthread_mutex_lock(&gate_mu);
	if (gate_closed) {
		gate_waiters++;
		pthread_cond_broadcast(&gate_cv);
		while (gate_closed &&
		       pthread_cond_timedwait(&gate_cv, &gate_mu, &until) !=
			       ETIMEDOUT)
			;
		gate_waiters--;
	}
	pthread_mutex_unlock(&gate_mu);
}

int fsync(int fd)
{
	gate_pass();
	return (int)syscall(SYS_fsync, fd);
}

int fdatasync(int fd)
{
	gate_pass();
	return (int)syscall(SYS_fdatasync, fd);
}

int msync(void *addr, size_t len, int flags)
{
	gate_pass();
	return (int)syscall(SYS_msync, addr, len, flags);
}

static void gate_set(bool closed)
{
	pthread_mutex_lock(&gate_mu);
	gate_closed = closed;
	pthread_cond_broadcast(&gate_cv);
	pthread_mutex_unlock(&gate_mu);
}

/* Wait until a sync is held at the gate; false after WAIT_S. */
static bool gate_wait_for_waiter(void)
{
	struct timespec until;
	int rc = 0;

	deadline_in(&until, WAIT_S);
	pthread_mutex_lock(&gate_mu);
	while (!gate_waiters && rc != ETIMEDOUT)
		rc = pthread_cond_timedwait(&gate_cv, &gate_mu, &until);
	rc = gate_waiters != 0;
	pthread_mutex_unlock(&gate_mu);
	return rc;
}

/* ---- a grace period on its own thread ----------------------------------- */

struct grace {
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool done;
};

static void *grace_main(void *arg)
{
	struct grace *g = arg;

	kvf__rcu_ensure_registered();
	kvf__rcu_synchronize();
	pthread_mutex_lock(&g->mu);
	g->done = true;
	pthread_cond_broadcast(&g->cv);
	pthread_mutex_unlock(&g->mu);
	return NULL;
}

/* Did the grace period end within WAIT_S? */
static bool grace_ended(struct grace *g)
{
	struct timespec until;
	int rc = 0;
	bool done;

	deadline_in(&until, WAIT_S);
	pthread_mutex_lock(&g->mu);
	while (!g->done && rc != ETIMEDOUT)
		rc = pthread_cond_timedwait(&g->cv, &g->mu, &until);
	done = g->done;
	pthread_mutex_unlock(&g->mu);
	return done;
}

/* ---- fixture ------------------------------------------------------------ */

struct rfix {
	struct fixture f;
	char *dir;
	char keys[NOBJ][32];
	struct kvf_key k[NOBJ];
};

static int rsetup(void **state)
{
	struct rfix *r = calloc(1, sizeof(*r));

	assert_non_null(r);
	fixture_config(&r->f);
	r->dir = test_tmpdir("remove-rcu");
	r->f.cfg.durability = KVF_DURABILITY_STRICT;
	r->f.cfg.data_dir = r->dir;
	assert_int_equal(kvf_engine_open(&r->f.cfg, &r->f.e), KVF_OK);
	assert_test_index(r->f.e);
	assert_int_equal(kvf_client_register(r->f.e, C1), KVF_OK);
	for (uint64_t id = 1; id <= 3; id++)
		assert_int_equal(mount(r->f.e, C1, id, 64 * MIB), KVF_OK);
	for (int i = 0; i < NOBJ; i++) {
		snprintf(r->keys[i], sizeof(r->keys[i]), "%s/%d",
			 i % 2 ? "odd" : "even", i);
		r->k[i] = key_of(r->keys[i]);
	}
	*state = r;
	return 0;
}

static int rteardown(void **state)
{
	struct rfix *r = *state;

	gate_set(false);
	kvf_engine_close(r->f.e);
	free(r->dir);
	free(r);
	return 0;
}

/* Put every object with @replicas replicas, in batches. */
static void put_all(struct rfix *r, uint32_t replicas)
{
	struct kvf_put_config cfg = { .replica_num = replicas };
	static uint64_t sizes[NOBJ];
	static struct kvf_replicas out[NOBJ];
	static enum kvf_status st[NOBJ];

	for (int i = 0; i < NOBJ; i++)
		sizes[i] = OBJ_SIZE;
	assert_int_equal(kvf_batch_put_start(r->f.e, C1, r->k, sizes, NOBJ,
					     &cfg, out, st),
			 KVF_OK);
	assert_int_equal(kvf_batch_put_end(r->f.e, C1, r->k, NOBJ, st), KVF_OK);
	assert_int_equal(stats_of(r->f.e).objects, NOBJ);
}

/* The engine holds nothing: no object, no allocated byte. */
static void assert_empty(struct rfix *r)
{
	struct audit_held h = audit_held(r->f.e);
	struct kvf_engine_stats s = stats_of(r->f.e);

	assert_int_equal(h.complete, 0);
	assert_int_equal(s.objects, 0);
	assert_int_equal(s.used_bytes, h.deferred_bytes);
}

/* ---- removal across a held sync ----------------------------------------- */

enum op { OP_REMOVE_ALL, OP_REMOVE_PREFIX, OP_BATCH_REMOVE, OP_MOUNT, OP_UNMOUNT };

struct remover {
	struct rfix *r;
	enum op op;
	int ret;
	uint64_t removed;
	enum kvf_status st[NOBJ];
};

static void *remover_main(void *arg)
{
	struct remover *m = arg;
	struct kvf_key pre = key_of("odd/");

	switch (m->op) {
	case OP_REMOVE_ALL:
		m->ret = kvf_remove_all(m->r->f.e, false, &m->removed);
		break;
	case OP_REMOVE_PREFIX:
		m->ret = kvf_remove_prefix(m->r->f.e, &pre, false, &m->removed);
		break;
	case OP_BATCH_REMOVE:
		m->ret = kvf_batch_remove(m->r->f.e, m->r->k, NOBJ, false,
					  m->st);
		m->removed = NOBJ;
		for (int i = 0; i < NOBJ; i++)
			m->removed -= m->st[i] != KVF_OK;
		break;
	case OP_MOUNT:
		m->ret = mount(m->r->f.e, C1, 10, 64 * MIB);
		break;
	case OP_UNMOUNT:
		m->ret = kvf_segment_unmount(m->r->f.e, C1, 1);
		break;
	}
	return NULL;
}

/*
 * Run @op with the journal's syncs held; a grace period must end while
 * they are. Returns how many objects @op removed.
 */
static uint64_t remove_with_sync_held(struct rfix *r, enum op op)
{
	struct remover m = { .r = r, .op = op };
	struct grace g = { .done = false };
	pthread_t remover;
	bool held, ended;

	pthread_mutex_init(&g.mu, NULL);
	pthread_cond_init(&g.cv, NULL);
	gate_set(true);
	assert_int_equal(pthread_create(&remover, NULL, remover_main, &m), 0);
	held = gate_wait_for_waiter();
	assert_int_equal(pthread_create(&g.thread, NULL, grace_main, &g), 0);
	ended = held && grace_ended(&g);
	gate_set(false);
	pthread_join(remover, NULL);
	pthread_join(g.thread, NULL);
	pthread_mutex_destroy(&g.mu);
	pthread_cond_destroy(&g.cv);
	assert_true(held);  /* the removal did wait on a sync */
	assert_true(ended); /* and no read-side section spanned that wait */
	assert_int_equal(m.ret, KVF_OK);
	return m.removed;
}

static void test_remove_all_lets_grace_periods_pass(void **state)
{
	struct rfix *r = *state;

	put_all(r, 1);
	assert_int_equal(remove_with_sync_held(r, OP_REMOVE_ALL), NOBJ);
	assert_empty(r);
}

static void test_remove_prefix_lets_grace_periods_pass(void **state)
{
	struct rfix *r = *state;

	put_all(r, 1);
	assert_int_equal(remove_with_sync_held(r, OP_REMOVE_PREFIX), NOBJ / 2);
	assert_int_equal(exist1(r->f.e, "odd/1"), KVF_ERR_OBJECT_NOT_FOUND);
	assert_int_equal(exist1(r->f.e, "even/0"), KVF_OK);
}

static void test_batch_remove_lets_grace_periods_pass(void **state)
{
	struct rfix *r = *state;

	put_all(r, 1);
	assert_int_equal(remove_with_sync_held(r, OP_BATCH_REMOVE), NOBJ);
	assert_empty(r);
}

/* A mount journals its segment outside any read-side section. */
static void test_mount_lets_grace_periods_pass(void **state)
{
	struct rfix *r = *state;

	remove_with_sync_held(r, OP_MOUNT);
	assert_int_equal(stats_of(r->f.e).segments, 4);
}

/*
 * An unmount journals the replica drops of its segment's objects (here
 * every object loses one of its two replicas) outside the read-side
 * sections of its walk.
 */
static void test_unmount_lets_grace_periods_pass(void **state)
{
	struct rfix *r = *state;
	struct kvf_replicas rep;

	put_all(r, 2);
	remove_with_sync_held(r, OP_UNMOUNT);
	assert_int_equal(stats_of(r->f.e).segments, 2);
	assert_int_equal(stats_of(r->f.e).objects, NOBJ);
	for (int i = 0; i < NOBJ; i++) {
		assert_int_equal(get1(r->f.e, r->keys[i], &rep), KVF_OK);
		assert_int_equal(rep.count, 1);
		assert_true(rep.replica[0].segment_id != 1);
	}
	assert_accounting(r->f.e);
}

/* ---- the sweep over segments -------------------------------------------- */

/*
 * Objects with replicas in two or three segments are met once per
 * replica by the segment walk and removed (and counted) once; leased
 * ones stay without force; a processing one stays even with force.
 */
static void test_sweep_counts_each_object_once(void **state)
{
	struct rfix *r = *state;
	uint64_t removed = 0;

	put_all(r, 3);
	assert_int_equal(put1(r->f.e, C1, "odd/processing", OBJ_SIZE, 2, NULL),
			 KVF_OK);
	assert_int_equal(exist1(r->f.e, r->keys[1]), KVF_OK); /* leased */
	assert_int_equal(exist1(r->f.e, r->keys[2]), KVF_OK);
	assert_int_equal(kvf_remove_all(r->f.e, false, &removed), KVF_OK);
	assert_int_equal(removed, NOBJ - 2);
	assert_int_equal(stats_of(r->f.e).objects, 2);
	assert_int_equal(kvf_remove_all(r->f.e, true, &removed), KVF_OK);
	assert_int_equal(removed, 2);
	assert_int_equal(stats_of(r->f.e).processing, 1);
	assert_int_equal(revoke1(r->f.e, C1, "odd/processing"), KVF_OK);
	assert_empty(r);
}

/* A journal that refuses the appends: the objects stay, the error shows. */
static void test_sweep_reports_journal_error(void **state)
{
	struct rfix *r = *state;
	uint64_t removed = 1;

#ifndef KVF_FAULT_INJECTION
	skip(); /* ./configure --enable-fault-injection compiles the hook in */
#endif
	put_all(r, 2);
	kvf__journal_inject_fault(r->f.e->journal, EIO, 1000);
	assert_int_equal(kvf_remove_all(r->f.e, true, &removed), KVF_ERR_IO);
	assert_int_equal(removed, 0);
	assert_int_equal(stats_of(r->f.e).objects, NOBJ);
	kvf__journal_inject_fault(r->f.e->journal, 0, 0);
	assert_int_equal(kvf_remove_all(r->f.e, true, &removed), KVF_OK);
	assert_int_equal(removed, NOBJ);
	assert_empty(r);
}

/* Calls the profiler counted for operation @name (its total row). */
static uint64_t profiled_calls(struct kvf_engine *e, const char *name)
{
	struct kvf_profile_snapshot *s;
	uint64_t calls = UINT64_MAX;

	assert_int_equal(kvf_profile_snapshot(kvf_engine_profiler(e), &s),
			 KVF_OK);
	for (unsigned op = 0; op < s->n_ops; op++)
		if (!strcmp(s->op_names[op], name))
			calls = kvf_profile_snapshot_cell(s, op, s->n_stages)
					->calls;
	kvf_profile_snapshot_free(s);
	assert_int_not_equal(calls, UINT64_MAX);
	return calls;
}

/*
 * Eviction removes its victims through the engine's removal path: they
 * are journaled and gone, their bytes freed, a leased object stays, and
 * none of it is counted as a client's remove.
 */
static void test_eviction_is_not_a_client_remove(void **state)
{
	struct rfix *r = *state;
	uint64_t freed = 0, evicted = 0;

	put_all(r, 1);
	assert_int_equal(exist1(r->f.e, r->keys[0]), KVF_OK); /* leased */
	kvf_profile_enable(kvf_engine_profiler(r->f.e), true);
	assert_int_equal(kvf_engine_evict(r->f.e, (uint64_t)NOBJ * OBJ_SIZE,
					  &freed, &evicted),
			 KVF_OK);
	assert_int_equal(evicted, NOBJ - 1);
	assert_int_equal(freed, (NOBJ - 1) * OBJ_SIZE);
	assert_int_equal(profiled_calls(r->f.e, "remove"), 0);
	assert_int_equal(stats_of(r->f.e).objects, 1);
	assert_int_equal(exist1(r->f.e, r->keys[0]), KVF_OK);
	assert_accounting(r->f.e);
	assert_int_equal(remove1(r->f.e, r->keys[0], true), KVF_OK);
	assert_int_equal(profiled_calls(r->f.e, "remove"), 1);
	assert_empty(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
			test_remove_all_lets_grace_periods_pass, rsetup,
			rteardown),
		cmocka_unit_test_setup_teardown(
			test_mount_lets_grace_periods_pass, rsetup, rteardown),
		cmocka_unit_test_setup_teardown(
			test_unmount_lets_grace_periods_pass, rsetup,
			rteardown),
		cmocka_unit_test_setup_teardown(
			test_remove_prefix_lets_grace_periods_pass, rsetup,
			rteardown),
		cmocka_unit_test_setup_teardown(
			test_batch_remove_lets_grace_periods_pass, rsetup,
			rteardown),
		cmocka_unit_test_setup_teardown(
			test_sweep_counts_each_object_once, rsetup, rteardown),
		cmocka_unit_test_setup_teardown(
			test_sweep_reports_journal_error, rsetup, rteardown),
		cmocka_unit_test_setup_teardown(
			test_eviction_is_not_a_client_remove, rsetup, rteardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
