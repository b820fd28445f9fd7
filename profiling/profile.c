/* SPDX-License-Identifier: MIT */
/*
 * profiling/profile.c - per-stage profiler of the batch hot path.
 *
 * Shape. The engine opens a span per batch call (stage.h); with profiling
 * on, begin/mark/end land here. Each mark reads the clock once and charges
 * the time since the previous mark (or begin) to the marked stage; end
 * charges the tail to the "other" stage and the sum of all stages to the
 * op's total row. Counters (tier.h) are read only in sampled batches, at
 * begin, every mark and end; the read's own cost is excluded from the
 * stage times (t_ovh) and repaid by skipping later batches (adaptive
 * sampling: a sampled batch's read cost times KVF__PROF_BUDGET must be
 * worked off by unsampled batch time before the next sample). A read also
 * counts itself (task-clock runs during the system call): each thread
 * measures that bias once, as the smallest delta between back-to-back
 * reads, and subtracts it from every stage's delta.
 *
 * Per-thread contexts. Each (thread, profiler) pair has a context: its
 * counter group (a perf group counts only the thread that opened it) and
 * its own accumulation slots. A thread finds its context through a small
 * thread-local list keyed by the profiler's unique id (never its address,
 * which may be reused), creating it on the thread's first profiled batch.
 * Only the owning thread writes its slots, with relaxed atomic stores of
 * load+delta (no RMW needed: a single writer), so a snapshot taken by
 * another thread reads them race-free with relaxed loads.
 *
 * Lifetimes. A global registry (reg_mu) lists live profilers. At thread
 * exit a pthread key destructor retires the thread's contexts: under
 * reg_mu it looks each profiler up by id and, if alive, folds the
 * context's slots into the profiler's "retired" sums (under the
 * profiler's mu), closes the group and frees it. kvf__prof_destroy()
 * unregisters first, then frees every context, so the two never meet.
 * Thread-local entries of destroyed profilers are pruned when the thread
 * next creates a context. Lock order: reg_mu, then a profiler's mu.
 *
 * Reset never writes another thread's slots: it records the current sums
 * as a baseline that snapshots subtract (sums only grow, also across
 * retirement, so the difference is never negative).
 *
 * Discovery is reported once: to the engine's log callback once per
 * profiler (each embedder hears about its own engine), or, with the
 * default stderr sink, once per process (a process with many engines
 * prints one line), unless KVF_PROFILE_QUIET=1.
 *
 * Publication: the tier, the counter set and the clock are fixed before
 * "ready" is stored with release; begin loads it with acquire, so batch
 * threads see them complete. Batches start only once enabled, which is
 * set after ready.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvforge/engine.h>
#include <kvforge/status.h>

#include "base/die.h"
#include "profiling/stage.h"
#include "profiling/tier.h"

_Static_assert(KVF__PROF_MAX_COUNTERS == KVF_PROFILE_MAX_COUNTERS,
	       "internal and public counter bounds differ");
_Static_assert(KVF__TIER_COUNT == KVF_PROFILE_TIER_COUNT,
	       "internal and public tier counts differ");

/* Unsampled batch time owed per tick of counter reads (1%). */
#define KVF__PROF_BUDGET 100

/* Rows per op: every stage, then the batch total. */
#define KVF__ROWS (KVF__STAGE_COUNT + 1)
#define KVF__TOTAL KVF__STAGE_COUNT

/* One (op, row) cell. In a thread context: single writer, relaxed. */
struct kvf__slot {
	uint64_t calls;
	uint64_t keys;
	uint64_t ticks;
	uint64_t s_calls;
	uint64_t s_keys;
	uint64_t ctr[KVF__PROF_MAX_COUNTERS];
};

struct kvf__tctx {
	struct kvf__slot slot[KVF__OP_COUNT][KVF__ROWS];
	struct kvf__tctx *next; /* profiler's list, under its mu */
	int fds[KVF__PROF_MAX_COUNTERS];
	int leader; /* -1: no counters on this thread */
	uint64_t bias[KVF__PROF_MAX_COUNTERS]; /* what one read counts */
	/* Sampling state, owner thread only. */
	uint64_t batches;
	int64_t debt;
};

struct kvf_profiler {
	struct kvf__prof_head head; /* first: read inline by stage.h */
	int ready;		    /* atomic; release after discovery */
	unsigned sample_every;	    /* atomic */
	uint64_t id;
	pthread_mutex_t mu;
	struct kvf__tctx *threads; /* under mu */
	uint64_t n_threads;	   /* under mu, live and retired */
	struct kvf__slot retired[KVF__OP_COUNT][KVF__ROWS]; /* under mu */
	struct kvf__slot base[KVF__OP_COUNT][KVF__ROWS];    /* under mu */
	/* Discovery results: written under mu before ready, then fixed. */
	enum kvf__tier tier;
	struct kvf__ctr_set set;
	struct kvf_profile_tier_info tiers[KVF__TIER_COUNT];
	struct kvf_profiler *reg_next; /* under reg_mu */
	/* Set before first use, then fixed; NULL means stderr. */
	void (*log)(void *ctx, int level, const char *msg);
	void *log_ctx;
};

static const char *const op_names[] = {
#define KVF__X(name, str) str,
	KVF__PROF_OPS(KVF__X)
#undef KVF__X
};

static const char *const stage_names[] = {
#define KVF__X(name, str) str,
	KVF__PROF_STAGES(KVF__X)
#undef KVF__X
};

static const char *const tier_names[KVF__TIER_COUNT] = {"hardware", "software",
							"clock"};

/* ---- registry and thread-local contexts ---- */

struct kvf__tl_entry {
	uint64_t prof_id;
	struct kvf__tctx *t;
	struct kvf__tl_entry *next;
};

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static struct kvf_profiler *reg_head; /* under reg_mu */
static uint64_t reg_last_id;	      /* under reg_mu */
static bool reg_reported;	      /* under reg_mu: stderr line printed */
static pthread_once_t tl_once = PTHREAD_ONCE_INIT;
static pthread_key_t tl_key;
static __thread struct kvf__tl_entry *tl_list;

static struct kvf_profiler *reg_find(uint64_t id)
{
	for (struct kvf_profiler *p = reg_head; p; p = p->reg_next)
		if (p->id == id)
			return p;
	return NULL;
}

static inline void acc(uint64_t *x, uint64_t d)
{
	__atomic_store_n(x, __atomic_load_n(x, __ATOMIC_RELAXED) + d,
			 __ATOMIC_RELAXED);
}

static void slot_add(struct kvf__slot *dst, const struct kvf__slot *src,
		     bool atomic_src)
{
	const uint64_t *s = (const uint64_t *)src;
	uint64_t *d = (uint64_t *)dst;

	for (size_t i = 0; i < sizeof(*src) / sizeof(uint64_t); i++)
		d[i] += atomic_src ? __atomic_load_n(&s[i], __ATOMIC_RELAXED)
				   : s[i];
}

/* Caller holds p->mu. */
static void tctx_unlink(struct kvf_profiler *p, struct kvf__tctx *t)
{
	struct kvf__tctx **pp = &p->threads;

	while (*pp && *pp != t)
		pp = &(*pp)->next;
	if (!*pp)
		kvf__die("thread context %p not in profiler %p", (void *)t,
			 (void *)p);
	*pp = t->next;
}

static void tctx_free(struct kvf_profiler *p, struct kvf__tctx *t)
{
	if (t->leader >= 0)
		kvf__ctr_close(t->fds, p->set.n);
	free(t);
}

/* pthread key destructor: retire every context of the exiting thread. */
static void tl_destructor(void *unused)
{
	struct kvf__tl_entry *e, *next;

	pthread_mutex_lock(&reg_mu);
	for (e = tl_list; e; e = next) {
		struct kvf_profiler *p = reg_find(e->prof_id);

		next = e->next;
		if (p) {
			pthread_mutex_lock(&p->mu);
			tctx_unlink(p, e->t);
			for (int o = 0; o < KVF__OP_COUNT; o++)
				for (int r = 0; r < KVF__ROWS; r++)
					slot_add(&p->retired[o][r],
						 &e->t->slot[o][r], false);
			pthread_mutex_unlock(&p->mu);
			tctx_free(p, e->t);
		}
		free(e);
	}
	tl_list = NULL;
	pthread_mutex_unlock(&reg_mu);
}

static void tl_init_once(void)
{
	if (pthread_key_create(&tl_key, tl_destructor))
		kvf__die("pthread_key_create failed");
}

/* Caller holds reg_mu: forget entries of profilers destroyed since. */
static void tl_prune(void)
{
	struct kvf__tl_entry **pp = &tl_list;

	while (*pp) {
		struct kvf__tl_entry *e = *pp;

		if (reg_find(e->prof_id)) {
			pp = &e->next;
			continue;
		}
		*pp = e->next;
		free(e);
	}
}

/* Smallest per-counter delta over back-to-back reads: a read's own cost. */
static void measure_bias(struct kvf__tctx *t, unsigned n)
{
	uint64_t prev[KVF__PROF_MAX_COUNTERS], v[KVF__PROF_MAX_COUNTERS];

	for (unsigned i = 0; i < n; i++)
		t->bias[i] = UINT64_MAX;
	if (kvf__ctr_read(t->leader, n, prev))
		goto out;
	for (int round = 0; round < 16; round++) {
		if (kvf__ctr_read(t->leader, n, v))
			break;
		for (unsigned i = 0; i < n; i++) {
			if (v[i] - prev[i] < t->bias[i])
				t->bias[i] = v[i] - prev[i];
			prev[i] = v[i];
		}
	}
out:
	for (unsigned i = 0; i < n; i++)
		if (t->bias[i] == UINT64_MAX)
			t->bias[i] = 0;
}

/*
 * The calling thread's context for @p, created (with its counter group)
 * on first use. NULL only if memory runs out: the batch goes unprofiled.
 */
static struct kvf__tctx *tctx_create(struct kvf_profiler *p)
{
	struct kvf__tl_entry *e = malloc(sizeof(*e));
	struct kvf__tctx *t = calloc(1, sizeof(*t));

	if (!e || !t)
		goto err_free;
	pthread_once(&tl_once, tl_init_once);
	t->leader = -1;
	if (p->tier != KVF__TIER_CLOCK)
		t->leader = kvf__ctr_open(&p->set, t->fds);
	if (t->leader < 0)
		t->leader = -1; /* this thread times only */
	else
		measure_bias(t, p->set.n);
	pthread_setspecific(tl_key, &tl_list);

	pthread_mutex_lock(&reg_mu);
	tl_prune();
	pthread_mutex_lock(&p->mu);
	t->next = p->threads;
	p->threads = t;
	p->n_threads++;
	pthread_mutex_unlock(&p->mu);
	e->prof_id = p->id;
	e->t = t;
	e->next = tl_list;
	tl_list = e;
	pthread_mutex_unlock(&reg_mu);
	return t;

err_free:
	free(t);
	free(e);
	return NULL;
}

static inline struct kvf__tctx *tctx_get(struct kvf_profiler *p)
{
	for (struct kvf__tl_entry *e = tl_list; e; e = e->next)
		if (e->prof_id == p->id)
			return e->t;
	return tctx_create(p);
}

/* ---- tier discovery ---- */

static int tier_from_env(void)
{
	const char *v = getenv("KVF_PROFILE_TIER");

	if (!v || !*v)
		return 0;
	for (int i = 0; i < KVF__TIER_COUNT; i++)
		if (!strcmp(v, tier_names[i]))
			return i;
	return -1;
}

/* Caller holds p->mu. */
static void discover(struct kvf_profiler *p)
{
	int start = tier_from_env();
	int i;

	kvf__clock_init();
	for (i = 0; i < KVF__TIER_COUNT; i++)
		p->tiers[i].name = tier_names[i];
	if (start < 0) {
		snprintf(p->tiers[0].reason, sizeof(p->tiers[0].reason),
			 "KVF_PROFILE_TIER=%s unknown; searched all",
			 getenv("KVF_PROFILE_TIER"));
		start = 0;
	}
	for (i = 0; i < start; i++)
		snprintf(p->tiers[i].reason, sizeof(p->tiers[i].reason),
			 "skipped: KVF_PROFILE_TIER=%s", tier_names[start]);
	for (i = start; i < KVF__TIER_CLOCK; i++) {
		struct kvf_profile_tier_info *ti = &p->tiers[i];
		int ret = i == KVF__TIER_HARDWARE
				  ? kvf__tier_pfm_events(&p->set, ti->reason,
							 sizeof(ti->reason))
				  : kvf__tier_sw_events(&p->set, ti->reason,
							sizeof(ti->reason));

		ti->tried = true;
		if (!ret)
			ret = kvf__ctr_probe(&p->set, ti->reason,
					     sizeof(ti->reason));
		if (!ret) {
			ti->available = true;
			break;
		}
	}
	if (i == KVF__TIER_CLOCK) {
		memset(&p->set, 0, sizeof(p->set));
		p->tiers[i].tried = true;
	}
	p->tiers[KVF__TIER_CLOCK].available = true; /* always there */
	snprintf(p->tiers[KVF__TIER_CLOCK].reason,
		 sizeof(p->tiers[KVF__TIER_CLOCK].reason), "%s",
		 kvf__clock_name());
	p->tier = (enum kvf__tier)i;
}

/* The default stderr sink hears about the first profiler only. */
static bool first_stderr_report(void)
{
	const char *quiet = getenv("KVF_PROFILE_QUIET");
	bool first;

	if (quiet && *quiet == '1')
		return false;
	pthread_mutex_lock(&reg_mu);
	first = !reg_reported;
	reg_reported = true;
	pthread_mutex_unlock(&reg_mu);
	return first;
}

/* One line naming the tier chosen and why the faster ones are missing. */
static void report_once(struct kvf_profiler *p)
{
	char line[512];
	size_t len;

	if (p->tier == KVF__TIER_HARDWARE)
		return;
	if (!p->log && !first_stderr_report())
		return;
	len = (size_t)snprintf(line, sizeof(line), "profile tier %s",
			       tier_names[p->tier]);
	for (int i = 0; i < (int)p->tier && len < sizeof(line); i++)
		if (p->tiers[i].tried)
			len += (size_t)snprintf(line + len, sizeof(line) - len,
						"; %s unavailable: %s",
						tier_names[i],
						p->tiers[i].reason);
	kvf__log(p->log, p->log_ctx, KVF_LOG_INFO, "%s", line);
}

static void ensure_ready(struct kvf_profiler *p)
{
	bool fresh = false;

	if (__atomic_load_n(&p->ready, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&p->mu);
	if (!p->ready) {
		discover(p);
		__atomic_store_n(&p->ready, 1, __ATOMIC_RELEASE);
		fresh = true;
	}
	pthread_mutex_unlock(&p->mu);
	if (fresh)
		report_once(p);
}

/* ---- create / destroy ---- */

int kvf__prof_create(struct kvf_profiler **out)
{
	struct kvf_profiler *p = calloc(1, sizeof(*p));

	*out = NULL;
	if (!p)
		return KVF_ERR_NO_MEMORY;
	if (pthread_mutex_init(&p->mu, NULL)) {
		free(p);
		return KVF_ERR_NO_MEMORY;
	}
	pthread_mutex_lock(&reg_mu);
	p->id = ++reg_last_id;
	p->reg_next = reg_head;
	reg_head = p;
	pthread_mutex_unlock(&reg_mu);
	*out = p;
	return KVF_OK;
}

void kvf__prof_set_log(struct kvf_profiler *p,
		       void (*fn)(void *ctx, int level, const char *msg),
		       void *ctx)
{
	p->log = fn;
	p->log_ctx = ctx;
}

void kvf__prof_destroy(struct kvf_profiler *p)
{
	struct kvf_profiler **pp;
	struct kvf__tctx *t, *next;

	if (!p)
		return;
	pthread_mutex_lock(&reg_mu);
	for (pp = &reg_head; *pp && *pp != p; pp = &(*pp)->reg_next)
		;
	if (!*pp)
		kvf__die("profiler %p is not registered", (void *)p);
	*pp = p->reg_next;
	pthread_mutex_unlock(&reg_mu);
	for (t = p->threads; t; t = next) {
		next = t->next;
		tctx_free(p, t);
	}
	pthread_mutex_destroy(&p->mu);
	free(p);
}

/* ---- the hot path (profiling on) ---- */

static bool want_sample(struct kvf_profiler *p, struct kvf__tctx *t)
{
	unsigned every = __atomic_load_n(&p->sample_every, __ATOMIC_RELAXED);

	if (t->leader < 0)
		return false;
	if (every)
		return t->batches++ % every == 0;
	return t->debt <= 0;
}

/* Read the group; the read's time goes to t_ovh. Return: 0 or -1. */
static int read_ctrs(struct kvf__prof_span *sp, struct kvf__tctx *t,
		     uint64_t now, uint64_t *vals)
{
	int ret = kvf__ctr_read(t->leader, sp->prof->set.n, vals);
	uint64_t after = kvf__clock_ticks();

	sp->t_ovh += after - now;
	sp->t_last = after;
	if (ret)
		sp->sampled = false; /* group broke: keep timing only */
	return ret;
}

void kvf__prof_begin_slow(struct kvf__prof_span *sp)
{
	struct kvf_profiler *p = sp->prof;
	struct kvf__tctx *t;

	if (!__atomic_load_n(&p->ready, __ATOMIC_ACQUIRE) ||
	    !(t = tctx_get(p))) {
		sp->on = false;
		return;
	}
	sp->thread_ctx = t;
	sp->sampled = want_sample(p, t);
	sp->t_acc = 0;
	sp->t_ovh = 0;
	sp->t_begin = sp->t_last = kvf__clock_ticks();
	if (sp->sampled) {
		memset(sp->ctr_acc, 0, sizeof(sp->ctr_acc));
		read_ctrs(sp, t, sp->t_begin, sp->ctr_last);
	}
}

/* Charge the time since the last mark (and counters if sampled). */
static void charge(struct kvf__prof_span *sp, unsigned row)
{
	struct kvf__tctx *t = sp->thread_ctx;
	struct kvf__slot *s = &t->slot[sp->op][row];
	uint64_t now = kvf__clock_ticks();
	uint64_t d = now - sp->t_last;

	sp->t_acc += d;
	acc(&s->calls, 1);
	acc(&s->keys, sp->keys);
	acc(&s->ticks, d);
	sp->t_last = now;
	if (sp->sampled) {
		uint64_t v[KVF__PROF_MAX_COUNTERS];
		unsigned n = sp->prof->set.n;

		if (read_ctrs(sp, t, now, v))
			return;
		acc(&s->s_calls, 1);
		acc(&s->s_keys, sp->keys);
		for (unsigned i = 0; i < n; i++) {
			uint64_t dc = v[i] - sp->ctr_last[i];

			dc = dc > t->bias[i] ? dc - t->bias[i] : 0;
			acc(&s->ctr[i], dc);
			sp->ctr_acc[i] += dc;
			sp->ctr_last[i] = v[i];
		}
	}
}

void kvf__prof_mark_slow(struct kvf__prof_span *sp, enum kvf__stage st)
{
	if ((unsigned)st >= KVF__STAGE_COUNT)
		kvf__die("stage %d out of range", (int)st);
	charge(sp, st);
}

void kvf__prof_end_slow(struct kvf__prof_span *sp)
{
	struct kvf__tctx *t = sp->thread_ctx;
	struct kvf__slot *tot = &t->slot[sp->op][KVF__TOTAL];
	bool sampled;

	charge(sp, KVF__STAGE_OTHER);
	sampled = sp->sampled; /* charge() clears it if a read failed */
	acc(&tot->calls, 1);
	acc(&tot->keys, sp->keys);
	acc(&tot->ticks, sp->t_acc);
	if (sampled) {
		acc(&tot->s_calls, 1);
		acc(&tot->s_keys, sp->keys);
		for (unsigned i = 0; i < sp->prof->set.n; i++)
			acc(&tot->ctr[i], sp->ctr_acc[i]);
		t->debt = (int64_t)(sp->t_ovh * KVF__PROF_BUDGET);
	} else {
		t->debt -= (int64_t)sp->t_acc;
	}
}

/* ---- control and snapshots ---- */

void kvf_profile_enable(struct kvf_profiler *p, bool on)
{
	if (on)
		ensure_ready(p);
	__atomic_store_n(&p->head.enabled, on ? 1 : 0, __ATOMIC_RELAXED);
}

bool kvf_profile_enabled(struct kvf_profiler *p)
{
	return __atomic_load_n(&p->head.enabled, __ATOMIC_RELAXED) != 0;
}

void kvf_profile_set_sampling(struct kvf_profiler *p, unsigned every)
{
	__atomic_store_n(&p->sample_every, every, __ATOMIC_RELAXED);
}

const char *kvf_profile_tier(struct kvf_profiler *p)
{
	ensure_ready(p);
	return tier_names[p->tier];
}

/* Caller holds p->mu: retired plus every live thread, in raw ticks. */
static void sum_locked(struct kvf_profiler *p,
		       struct kvf__slot out[KVF__OP_COUNT][KVF__ROWS])
{
	memcpy(out, p->retired, sizeof(p->retired));
	for (struct kvf__tctx *t = p->threads; t; t = t->next)
		for (int o = 0; o < KVF__OP_COUNT; o++)
			for (int r = 0; r < KVF__ROWS; r++)
				slot_add(&out[o][r], &t->slot[o][r], true);
}

void kvf_profile_reset(struct kvf_profiler *p)
{
	pthread_mutex_lock(&p->mu);
	sum_locked(p, p->base);
	pthread_mutex_unlock(&p->mu);
}

static void cell_from_slot(struct kvf_profile_cell *c,
			   const struct kvf__slot *s, const struct kvf__slot *b)
{
	c->calls = s->calls - b->calls;
	c->keys = s->keys - b->keys;
	c->ns = kvf__clock_to_ns(s->ticks - b->ticks);
	c->sampled_calls = s->s_calls - b->s_calls;
	c->sampled_keys = s->s_keys - b->s_keys;
	for (int i = 0; i < KVF__PROF_MAX_COUNTERS; i++)
		c->counters[i] = s->ctr[i] - b->ctr[i];
}

enum kvf_status kvf_profile_snapshot(struct kvf_profiler *p,
				     struct kvf_profile_snapshot **out)
{
	struct kvf_profile_snapshot *s = calloc(1, sizeof(*s));
	struct kvf__slot(*sum)[KVF__ROWS] = malloc(sizeof(p->retired));

	*out = NULL;
	if (!s || !sum)
		goto err_free;
	s->cells = calloc(KVF__OP_COUNT * KVF__ROWS, sizeof(*s->cells));
	if (!s->cells)
		goto err_free;
	ensure_ready(p);
	s->tier = tier_names[p->tier];
	s->clock = kvf__clock_name();
	s->clock_ghz = kvf__clock_ghz();
	s->n_counters = p->set.n;
	memcpy(s->counter_names, p->set.names, sizeof(s->counter_names));
	s->user_only = p->set.user_only;
	memcpy(s->tiers, p->tiers, sizeof(s->tiers));
	s->sample_every = __atomic_load_n(&p->sample_every, __ATOMIC_RELAXED);
	s->n_ops = KVF__OP_COUNT;
	s->n_stages = KVF__STAGE_COUNT;
	s->op_names = op_names;
	s->stage_names = stage_names;

	pthread_mutex_lock(&p->mu);
	s->threads = p->n_threads;
	sum_locked(p, sum);
	for (int o = 0; o < KVF__OP_COUNT; o++)
		for (int r = 0; r < KVF__ROWS; r++)
			cell_from_slot(&s->cells[o * KVF__ROWS + r], &sum[o][r],
				       &p->base[o][r]);
	pthread_mutex_unlock(&p->mu);
	free(sum);
	*out = s;
	return KVF_OK;

err_free:
	free(sum);
	kvf_profile_snapshot_free(s);
	return KVF_ERR_NO_MEMORY;
}

void kvf_profile_snapshot_free(struct kvf_profile_snapshot *s)
{
	if (!s)
		return;
	free(s->cells);
	free(s);
}

const struct kvf_profile_cell *
kvf_profile_snapshot_cell(const struct kvf_profile_snapshot *s, unsigned op,
			  unsigned stage)
{
	if (op >= s->n_ops || stage > s->n_stages)
		return NULL;
	return &s->cells[op * (s->n_stages + 1) + stage];
}
