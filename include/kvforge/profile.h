/* SPDX-License-Identifier: MIT */
/*
 * kvforge/profile.h - per-stage counters of the batch hot path.
 *
 * Each engine owns a profiler (kvf_engine_profiler()). When enabled, every
 * batch call is divided into named stages (validate, hash, probe, allocate,
 * journal, publish, reply, other), and each stage accumulates, per
 * operation (put_start, put_end, get, ...), calls, keys, elapsed
 * nanoseconds and the counters of the best tier this machine offers:
 *
 *   hardware  cycles, instructions, LLC misses, dTLB misses (libpfm4 and
 *             perf_event_open; needs a PMU)
 *   software  task-clock, page-faults, context-switches (perf_event_open)
 *   clock     elapsed time only (rdtsc calibrated to ns, or CLOCK_MONOTONIC)
 *
 * The tier is discovered at run time, the first time the profiler is
 * enabled or queried: a tier that cannot be opened is recorded with its
 * reason (and reported in one line: to the engine's &kvf_config.log, or
 * once per process on stderr without one) and the next one is used;
 * profiling never fails for lack of counters. The environment variable
 * KVF_PROFILE_TIER=hardware|software|clock starts the search at that tier
 * (tests use it); KVF_PROFILE_QUIET=1 silences the stderr line.
 *
 * Thread safety: every call is thread-safe; a profiler lives as long as
 * its engine (until kvf_engine_close(), which no call may overlap).
 *
 * ABI: not stable. The snapshot structs and the text and JSON renderings
 * follow the counters a machine offers and may change in any release;
 * the calls themselves are stable.
 *
 * What is measured when:
 *   - Elapsed time, calls and keys: every stage of every batch (one clock
 *     read per mark, about 12 ns with rdtsc).
 *   - Counters: a perf read() is a system call (about 1 us), so counters
 *     are read only in *sampled* batches, at begin, at every mark and at
 *     end. By default sampling is adaptive: after a sampled batch the
 *     thread skips batches until they have run 100 times as long as the
 *     counter reads cost, so reads stay under about 1% of batch time.
 *     Counter sums therefore cover sampled_calls/sampled_keys, not every
 *     call; divide by those. kvf_profile_set_sampling() fixes the period.
 *   - The time spent reading counters is not charged to any stage, and a
 *     batch's total is the sum of its stages, so stages add up to the
 *     total exactly (up to rounding to nanoseconds).
 */
#ifndef KVFORGE_PROFILE_H
#define KVFORGE_PROFILE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

struct kvf_profiler;

/* Upper bound on counters per tier. */
#define KVF_PROFILE_MAX_COUNTERS 8

/* Tiers in the order they are tried. */
#define KVF_PROFILE_TIER_COUNT 3

/**
 * struct kvf_profile_cell - accumulated figures of one (op, stage).
 * @calls: times the stage was marked (for the total row: batches).
 * @keys: keys of the batches those calls belonged to.
 * @ns: elapsed nanoseconds charged to the stage.
 * @sampled_calls: calls during which counters were read.
 * @sampled_keys: keys of those calls.
 * @counters: counter sums over the sampled calls, in the order of
 *	&kvf_profile_snapshot.counter_names.
 */
struct kvf_profile_cell {
	uint64_t calls;
	uint64_t keys;
	uint64_t ns;
	uint64_t sampled_calls;
	uint64_t sampled_keys;
	uint64_t counters[KVF_PROFILE_MAX_COUNTERS];
};

/**
 * struct kvf_profile_tier_info - outcome of trying one counter tier.
 * @name: "hardware", "software" or "clock".
 * @tried: false if the search started below this tier (KVF_PROFILE_TIER)
 *	or stopped above it.
 * @available: the tier opened on this machine.
 * @reason: why it is unavailable or was skipped, or details of the events
 *	opened ("user-only", dropped events); may be empty.
 */
struct kvf_profile_tier_info {
	const char *name;
	bool tried;
	bool available;
	char reason[160];
};

/**
 * struct kvf_profile_snapshot - a consistent copy of every figure.
 * @tier: name of the active tier.
 * @clock: time source, "rdtsc" or "CLOCK_MONOTONIC".
 * @clock_ghz: calibrated rdtsc frequency (1.0 for CLOCK_MONOTONIC).
 * @n_counters: counters of the active tier (0 for the clock tier).
 * @counter_names: their names ("task-clock", "cycles", ...).
 * @user_only: counters exclude the kernel (perf_event_paranoid).
 * @tiers: every tier, in search order, with its outcome.
 * @sample_every: 0 for adaptive sampling, N for every Nth batch.
 * @threads: threads that have run a profiled batch (live and exited).
 * @n_ops: number of operations (rows groups).
 * @n_stages: number of stages; cell index @n_stages is the batch total.
 * @op_names: @n_ops names ("put_start", ..., "remove").
 * @stage_names: @n_stages names ("validate", ..., "other").
 * @cells: @n_ops * (@n_stages + 1) cells; use kvf_profile_snapshot_cell().
 */
struct kvf_profile_snapshot {
	const char *tier;
	const char *clock;
	double clock_ghz;
	unsigned n_counters;
	const char *counter_names[KVF_PROFILE_MAX_COUNTERS];
	bool user_only;
	struct kvf_profile_tier_info tiers[KVF_PROFILE_TIER_COUNT];
	unsigned sample_every;
	uint64_t threads;
	unsigned n_ops;
	unsigned n_stages;
	const char *const *op_names;
	const char *const *stage_names;
	struct kvf_profile_cell *cells;
};

/**
 * kvf_profile_enable() - switch profiling on or off at run time.
 * @p: the profiler.
 * @on: new state.
 *
 * The first call with @on true discovers the counter tier (opens and
 * closes a counter group on the calling thread; may report one line, see
 * above, if a tier is missing).
 *
 * Context: any thread; takes the profiler's mutex the first time only.
 * Batches already running finish in the state they started with.
 */
void kvf_profile_enable(struct kvf_profiler *p, bool on);

/**
 * kvf_profile_enabled() - whether profiling is on.
 * @p: the profiler.
 *
 * Return: the state last set by kvf_profile_enable(). Lock-free.
 */
bool kvf_profile_enabled(struct kvf_profiler *p);

/**
 * kvf_profile_set_sampling() - choose which batches read the counters.
 * @p: the profiler.
 * @every: 0 for adaptive sampling (default, keeps counter reads near 1%
 *	of batch time), 1 to read them in every batch, N for every Nth
 *	batch of each thread.
 *
 * Context: any thread; lock-free; takes effect at the next batch.
 */
void kvf_profile_set_sampling(struct kvf_profiler *p, unsigned every);

/**
 * kvf_profile_reset() - zero every accumulated figure.
 * @p: the profiler.
 *
 * Batches running concurrently are counted either before or after the
 * reset, never half. Context: any thread; takes the profiler's mutex.
 */
void kvf_profile_reset(struct kvf_profiler *p);

/**
 * kvf_profile_snapshot() - copy every accumulated figure.
 * @p: the profiler.
 * @out: receives a snapshot owned by the caller; free it with
 *	kvf_profile_snapshot_free().
 *
 * Discovers the tier if that has not happened yet. Figures of batches
 * running concurrently may be partly included.
 *
 * Context: any thread; takes the profiler's mutex; allocates.
 * Return: %KVF_OK or %KVF_ERR_NO_MEMORY.
 */
enum kvf_status kvf_profile_snapshot(struct kvf_profiler *p,
				     struct kvf_profile_snapshot **out);

/**
 * kvf_profile_snapshot_free() - release a snapshot.
 * @s: the snapshot, or NULL.
 */
void kvf_profile_snapshot_free(struct kvf_profile_snapshot *s);

/**
 * kvf_profile_snapshot_cell() - one cell of a snapshot.
 * @s: the snapshot.
 * @op: operation index, below @s->n_ops.
 * @stage: stage index, below @s->n_stages, or @s->n_stages for the total.
 *
 * Return: the cell, owned by @s; NULL if an index is out of range.
 */
const struct kvf_profile_cell *
kvf_profile_snapshot_cell(const struct kvf_profile_snapshot *s, unsigned op,
			  unsigned stage);

/**
 * kvf_profile_tier() - name of the active counter tier.
 * @p: the profiler.
 *
 * Discovers the tier if that has not happened yet.
 *
 * Return: "hardware", "software" or "clock"; a static string.
 * Context: any thread; may take the profiler's mutex.
 */
const char *kvf_profile_tier(struct kvf_profiler *p);

/**
 * kvf_profile_render_tiers() - print every tier tried, one line each.
 * @p: the profiler.
 * @f: output stream.
 *
 * Example: "hardware: unavailable: perf::cycles: No such file or
 * directory". Return: %KVF_OK, %KVF_ERR_NO_MEMORY or %KVF_ERR_IO.
 */
enum kvf_status kvf_profile_render_tiers(struct kvf_profiler *p, FILE *f);

/**
 * kvf_profile_render_text() - print the stage table.
 * @p: the profiler.
 * @f: output stream.
 *
 * One row per (op, stage) that ran, then the op's total: calls, keys,
 * ns/call, ns/key, share of the total, and each counter per key over the
 * sampled calls. Context: takes the profiler's mutex briefly.
 *
 * Return: %KVF_OK, %KVF_ERR_NO_MEMORY or %KVF_ERR_IO.
 */
enum kvf_status kvf_profile_render_text(struct kvf_profiler *p, FILE *f);

/**
 * kvf_profile_render_json() - print the stage table as one JSON object.
 * @p: the profiler.
 * @f: output stream.
 *
 * Layout (docs/profiling.md): {"tier", "clock": {"source", "ghz"},
 * "sampling": {"every"}, "user_only", "threads", "counters": [names],
 * "tiers": [{"name", "tried", "available", "reason"}], "ops": {<op>:
 * {"total": cell, "stages": {<stage>: cell}}}} where a cell is {"calls",
 * "keys", "ns", "ns_per_call", "ns_per_key", "sampled_calls",
 * "sampled_keys", "counters": {<name>: sum}}. Ops and stages that never
 * ran are left out.
 *
 * Return: %KVF_OK, %KVF_ERR_NO_MEMORY or %KVF_ERR_IO.
 */
enum kvf_status kvf_profile_render_json(struct kvf_profiler *p, FILE *f);

#ifdef __cplusplus
}
#endif
#endif /* KVFORGE_PROFILE_H */
