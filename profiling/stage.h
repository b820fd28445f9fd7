/* SPDX-License-Identifier: MIT */
/*
 * profiling/stage.h - the engine's hooks into the per-stage profiler.
 *
 * A batch call opens a span, marks the end of each stage it runs, and
 * closes the span. Counters are read once per stage per batch, never per
 * key. With profiling off a span costs one relaxed load and a branch.
 *
 *	struct kvf__prof_span sp;
 *	kvf__prof_begin(e->prof, &sp, KVF__OP_GET, n);
 *	... validate ...  kvf__prof_mark(&sp, KVF__STAGE_VALIDATE);
 *	... hash ...      kvf__prof_mark(&sp, KVF__STAGE_HASH);
 *	kvf__prof_end(&sp);
 *
 * Time between the previous mark (or begin) and a mark is charged to the
 * marked stage, so the stages of a batch add up to its total.
 */
#ifndef KVF_PROFILING_STAGE_H
#define KVF_PROFILING_STAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <kvforge/profile.h>

/* Operations that are profiled (one row group each). */
#define KVF__PROF_OPS(X)                                                       \
	X(PUT_START, "put_start")                                              \
	X(PUT_END, "put_end")                                                  \
	X(PUT_REVOKE, "put_revoke")                                            \
	X(GET, "get")                                                          \
	X(EXIST, "exist")                                                      \
	X(REMOVE, "remove")

/* Stages a batch is divided into. */
#define KVF__PROF_STAGES(X)                                                    \
	X(VALIDATE, "validate")                                                \
	X(HASH, "hash")                                                        \
	X(PROBE, "probe")                                                      \
	X(ALLOCATE, "allocate")                                                \
	X(JOURNAL, "journal")                                                  \
	X(PUBLISH, "publish")                                                  \
	X(REPLY, "reply")                                                      \
	X(OTHER, "other") /* end of batch after its last mark */

enum kvf__op {
#define KVF__X(name, str) KVF__OP_##name,
	KVF__PROF_OPS(KVF__X)
#undef KVF__X
	KVF__OP_COUNT
};

enum kvf__stage {
#define KVF__X(name, str) KVF__STAGE_##name,
	KVF__PROF_STAGES(KVF__X)
#undef KVF__X
	KVF__STAGE_COUNT
};

#define KVF__PROF_MAX_COUNTERS 8

/* The profiler starts with this, so the off-switch is readable inline. */
struct kvf__prof_head {
	int enabled; /* atomic */
};

/*
 * One batch call in flight, on the caller's stack. Fields past @on are
 * private to profiling/profile.c and only set when @on is true.
 */
struct kvf__prof_span {
	struct kvf_profiler *prof;
	uint32_t op;
	uint32_t keys;
	bool on;
	bool sampled; /* counters are read at every mark of this batch */
	uint64_t t_begin;
	uint64_t t_last;
	uint64_t t_acc; /* ticks charged to stages so far */
	uint64_t t_ovh; /* ticks spent reading counters (not charged) */
	uint64_t ctr_last[KVF__PROF_MAX_COUNTERS];
	uint64_t ctr_acc[KVF__PROF_MAX_COUNTERS]; /* counters charged so far */
	void *thread_ctx; /* per-thread counter group, owned by the profiler */
};

int kvf__prof_create(struct kvf_profiler **out);
/*
 * Send the profiler's one discovery line to @fn(@ctx) (a kvf_log_fn; NULL:
 * stderr). Call before the profiler is first enabled or snapshotted.
 */
void kvf__prof_set_log(struct kvf_profiler *p,
		       void (*fn)(void *ctx, int level, const char *msg),
		       void *ctx);
void kvf__prof_destroy(struct kvf_profiler *p);

void kvf__prof_begin_slow(struct kvf__prof_span *sp);
void kvf__prof_mark_slow(struct kvf__prof_span *sp, enum kvf__stage st);
void kvf__prof_end_slow(struct kvf__prof_span *sp);

static inline void kvf__prof_begin(struct kvf_profiler *p,
				   struct kvf__prof_span *sp, enum kvf__op op,
				   size_t keys)
{
	const struct kvf__prof_head *h = (const struct kvf__prof_head *)p;

	sp->on = h && __atomic_load_n(&h->enabled, __ATOMIC_RELAXED);
	if (__builtin_expect(sp->on, 0)) {
		sp->prof = p;
		sp->op = op;
		sp->keys = (uint32_t)keys;
		kvf__prof_begin_slow(sp);
	}
}

static inline void kvf__prof_mark(struct kvf__prof_span *sp,
				  enum kvf__stage st)
{
	if (__builtin_expect(sp->on, 0))
		kvf__prof_mark_slow(sp, st);
}

static inline void kvf__prof_end(struct kvf__prof_span *sp)
{
	if (__builtin_expect(sp->on, 0))
		kvf__prof_end_slow(sp);
}

#endif /* KVF_PROFILING_STAGE_H */
