/* SPDX-License-Identifier: MIT */
/*
 * http/metrics.h - kvforge-master's counters, gauges and histograms.
 *
 * The RPC side records once per answered RPC (kvf_metrics_rpc_done());
 * the HTTP side renders everything as a Prometheus text page, a one-line
 * human-readable summary and a health answer. Recording is lock-free and
 * never blocks: counters are relaxed atomics spread over per-thread
 * shards, so workers on different cores do not share cache lines, and a
 * reader sums the shards. A scrape therefore sees each counter at some
 * moment during the scrape, never a torn value; different counters are
 * not a single atomic snapshot (neither are upstream's).
 *
 * Names follow upstream's mooncake_master where the same quantity exists
 * (master_<rpc>_requests_total, ...); KVForge's own families start with
 * kvforge_. docs/metrics.md lists every family.
 *
 * Contract between the server and the HTTP side: change only additively.
 * Additions since the first version: kvf_metrics_value_sizes() (call it
 * with the sizes of the objects a PutStart / BatchPutStart / UpsertStart
 * created, to fill upstream's master_value_size_bytes), and the three
 * render functions.
 */
#ifndef KVF_SERVER_METRICS_H
#define KVF_SERVER_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <kvforge/status.h>

#include "wire/rpc_list.h"

struct kvf_engine;
struct kvf_metrics;

/**
 * kvf_metrics_new() - create an empty metrics registry.
 * @out: receives the registry; untouched on failure.
 *
 * Context: any thread; allocates; never blocks on locks.
 * Return: %KVF_OK, %KVF_ERR_INVALID_ARGUMENT (@out NULL) or
 * %KVF_ERR_NO_MEMORY.
 */
int kvf_metrics_new(struct kvf_metrics **out);

/**
 * kvf_metrics_free() - release a registry.
 * @m: the registry, or NULL.
 *
 * Context: no thread may record into @m or render it any more (stop the
 * HTTP server and the RPC workers first).
 */
void kvf_metrics_free(struct kvf_metrics *m);

/**
 * kvf_metrics_rpc_done() - record one answered RPC.
 * @m: the registry.
 * @rpc: which RPC (values outside the enum are ignored).
 * @latency_ns: time from the request's arrival to its answer.
 * @failed: the RPC failed as a whole (upstream's failures_total: a
 *	transport error, an error expected, or for a batch, every item
 *	failed).
 * @items: items in the request (keys of a batch; 0 for single RPCs).
 * @failed_items: items whose answer is an error (at most @items).
 *
 * For a batch RPC, @failed_items between 1 and @items - 1 counts as a
 * partial success (upstream's _partial_successes_total).
 *
 * Context: any thread, concurrently with every other call; lock-free,
 * never blocks, never allocates after the thread's first call.
 */
void kvf_metrics_rpc_done(struct kvf_metrics *m, enum kvf_rpc rpc,
			  uint64_t latency_ns, bool failed, uint32_t items,
			  uint32_t failed_items);

/**
 * kvf_metrics_unsupported() - count an RPC answered "not supported".
 * @m: the registry.
 * @rpc: the RPC the master does not implement.
 *
 * Counted in kvforge_rpc_not_supported_total{rpc=...}; the caller also
 * records the RPC with kvf_metrics_rpc_done() (as a failure).
 *
 * Context: any thread; lock-free, never blocks.
 */
void kvf_metrics_unsupported(struct kvf_metrics *m, enum kvf_rpc rpc);

/**
 * kvf_metrics_connections() - move the open RPC connection gauge.
 * @m: the registry.
 * @delta: +1 when a connection is accepted, -1 when it closes.
 *
 * Context: any thread; lock-free, never blocks.
 */
void kvf_metrics_connections(struct kvf_metrics *m, int delta);

/**
 * kvf_metrics_value_sizes() - record the sizes of objects a put created.
 * @m: the registry.
 * @sizes: @n value lengths, bytes (a PutStart's total_len, per key).
 * @status: @n per-item statuses; only items with %KVF_OK are recorded.
 *	NULL records every item.
 * @n: number of items.
 *
 * Feeds upstream's master_value_size_bytes histogram, which upstream
 * observes when a put creates an object. Sums the batch locally first, so
 * a batch costs at most one atomic add per bucket, not per key.
 *
 * Added after the first version of this contract (additive).
 * Context: any thread; lock-free, never blocks.
 */
void kvf_metrics_value_sizes(struct kvf_metrics *m, const uint64_t *sizes,
			     const enum kvf_status *status, size_t n);

/**
 * kvf_metrics_set_source() - where gauges and the stage profile come from.
 * @m: the registry.
 * @engine: the engine whose kvf_engine_get_stats() fills the
 *	master_*_bytes / master_key_count gauges and whose profiler (when
 *	enabled) is rendered as kvforge_stage_*; NULL for none.
 * @active_clients: returns the number of live clients for
 *	master_active_clients (called at render time, from the HTTP thread;
 *	must be thread-safe); NULL to use the engine's client count.
 * @ctx: passed to @active_clients.
 *
 * Context: any thread; waits for a render in progress, so @engine and
 * @ctx may be freed once it returned with others (or NULL) in place
 * (with --enable_ha the engine opens and closes with the leadership).
 */
void kvf_metrics_set_source(struct kvf_metrics *m, struct kvf_engine *engine,
			    uint64_t (*active_clients)(void *), void *ctx);

struct kvf_ha;

/**
 * kvf_metrics_set_ha() - with --enable_ha, the election whose state
 * /health (role, view version, leader address) and /metrics
 * (kvforge_ha_*) show. Context: as kvf_metrics_set_source(); @ha must
 * outlive every render.
 */
void kvf_metrics_set_ha(struct kvf_metrics *m, struct kvf_ha *ha);

struct kvf_repl_stats;

/**
 * kvf_metrics_set_repl() - with replication, the function /metrics
 * (kvforge_ha_replication_*) and /health ("replication") call for its
 * figures; NULL removes it. @fn runs with the source lock held, so it
 * must not call back into the metrics. Context: any thread; waits for a
 * render in progress.
 */
void kvf_metrics_set_repl(struct kvf_metrics *m,
			  void (*fn)(void *ctx, struct kvf_repl_stats *st),
			  void *ctx);

/*
 * Rendering (used by http/http.c and tests). Each writes a complete,
 * NUL-terminated document into a malloc()ed buffer owned by the caller.
 */

/**
 * kvf_metrics_render_prometheus() - the /metrics page.
 * @m: the registry.
 * @out: receives the text (Prometheus exposition format 0.0.4).
 * @len: receives its length, without the NUL.
 *
 * Context: any thread; reads the engine's stats and profiler (the latter
 * takes the profiler's mutex); allocates.
 * Return: %KVF_OK or %KVF_ERR_NO_MEMORY.
 */
int kvf_metrics_render_prometheus(struct kvf_metrics *m, char **out,
				  size_t *len);

/**
 * kvf_metrics_render_summary() - the /metrics/summary text.
 * @m: the registry.
 * @out: receives one human-readable line per section.
 * @len: receives its length, without the NUL.
 *
 * Context: as kvf_metrics_render_prometheus().
 * Return: %KVF_OK or %KVF_ERR_NO_MEMORY.
 */
int kvf_metrics_render_summary(struct kvf_metrics *m, char **out, size_t *len);

/**
 * kvf_metrics_render_health() - the /health JSON object.
 * @m: the registry.
 * @out: receives the JSON, shaped like upstream's.
 * @len: receives its length, without the NUL.
 *
 * Return: %KVF_OK or %KVF_ERR_NO_MEMORY.
 */
int kvf_metrics_render_health(struct kvf_metrics *m, char **out, size_t *len);

#endif /* KVF_SERVER_METRICS_H */
