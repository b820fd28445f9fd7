/* SPDX-License-Identifier: MIT */
/*
 * engine/engine.c - configuration, open/close, housekeeping and stats.
 *
 * Lifetime: open builds the index, the segment table, the profiler and
 * (with a data directory) the journal, replays it, then starts the
 * background thread. Close stops that thread first, so nothing runs
 * housekeeping while state is torn down, then frees in reverse order.
 *
 * Housekeeping (kvf_engine_tick) is serialised by tick_lock so concurrent
 * ticks (the background thread and an embedder) do not duplicate work;
 * every step it runs is also safe against all batch operations.
 *
 * Growable structs: the config, the stats and a segment's info cross the
 * ABI with the caller's sizeof (the config's struct_size field, the other
 * calls' size argument). The engine works on its own full-size copy: an
 * older caller's missing fields take defaults, a newer caller's unknown
 * fields must be zero (a config) or read as zero (the others, through
 * base/abi.h). This holds only while fields are appended past the
 * previous struct's end, never into its tail padding.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <kvforge/segment.h>
#include <kvforge/version.h>

#include "base/abi.h"
#include "base/clock.h"
#include "base/die.h"
#include "engine/internal.h"
#include "journal/journal.h"

#define MS (1000ULL * 1000ULL)

static uint64_t monotonic_ns(void *ctx)
{
	(void)ctx;
	return kvf__now_ns();
}

const char *kvf_version(void)
{
	return KVF_VERSION_STRING;
}

/*
 * Largest size a config may claim (KVF_CONFIG_SIZE_MAX): an uninitialised
 * struct_size must not send the zero-tail check through unrelated memory.
 */
_Static_assert(KVF_CONFIG_SIZE_MAX >= sizeof(struct kvf_config),
	       "the config outgrew KVF_CONFIG_SIZE_MAX");

static bool tail_is_zero(const void *p, size_t from, size_t to)
{
	const unsigned char *b = p;

	for (size_t i = from; i < to; i++)
		if (b[i])
			return false;
	return true;
}

static void config_defaults(struct kvf_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->struct_size = sizeof(*cfg);
	cfg->durability = KVF_DURABILITY_DEFAULT;
	cfg->sync_interval_ms = 50;
	cfg->lease_ttl_ms = 10000;
	cfg->client_ttl_ms = 10000;
	cfg->put_discard_timeout_ms = 30000;
	cfg->put_release_timeout_ms = 600000;
	cfg->soft_pin_ttl_ms = 30 * 60 * 1000;
	cfg->max_key_len = 4096;
	cfg->max_batch = 65536;
	cfg->expected_objects = 65536;
	cfg->alloc_alignment = 64;
	cfg->placement = KVF_PLACEMENT_FRAGMENTATION_AWARE;
	cfg->index = KVF_INDEX_BUCKET;
	cfg->eviction_high_watermark = 0.90;
	cfg->eviction_ratio = 0.05;
	cfg->background = true;
	cfg->tick_interval_ms = 100;
}

enum kvf_status kvf_config_init_sized(struct kvf_config *cfg, size_t size)
{
	struct kvf_config d;

	if (!cfg)
		return KVF_ERR_INVALID_ARGUMENT;
	if (size < KVF_CONFIG_SIZE_MIN || size > KVF_CONFIG_SIZE_MAX)
		return KVF_ERR_INVALID_PARAMS;
	config_defaults(&d);
	/* Fields of a newer header than this library's: their zero default. */
	kvf__abi_copy_out(cfg, size, &d, sizeof(d));
	cfg->struct_size = size; /* the caller's, as open expects it */
	return KVF_OK;
}

/*
 * The caller's config, whatever header it was built with, as this
 * library's full struct in @out.
 */
static int import_config(const struct kvf_config *in, struct kvf_config *out)
{
	size_t size = in->struct_size;

	if (size < KVF_CONFIG_SIZE_MIN || size > KVF_CONFIG_SIZE_MAX)
		return KVF_ERR_INVALID_PARAMS;
	if (!tail_is_zero(in, sizeof(*out), size))
		return KVF_ERR_INVALID_PARAMS;
	config_defaults(out);
	memcpy(out, in, size < sizeof(*out) ? size : sizeof(*out));
	out->struct_size = sizeof(*out);
	return KVF_OK;
}

static int check_config(const struct kvf_config *c)
{
	if (!c->max_key_len || c->max_key_len > UINT16_MAX)
		return KVF_ERR_INVALID_ARGUMENT;
	if (!c->max_batch || c->max_batch > (1u << 24))
		return KVF_ERR_INVALID_ARGUMENT;
	/* A zero lease is allowed: gets and exists then hold nothing. */
	if (!c->client_ttl_ms || !c->tick_interval_ms)
		return KVF_ERR_INVALID_ARGUMENT;
	if (c->alloc_alignment < 8 ||
	    (c->alloc_alignment & (c->alloc_alignment - 1)))
		return KVF_ERR_INVALID_ARGUMENT;
	if (!(c->eviction_high_watermark >= 0 &&
	      c->eviction_high_watermark <= 1) ||
	    !(c->eviction_ratio >= 0 && c->eviction_ratio <= 1))
		return KVF_ERR_INVALID_ARGUMENT;
	if ((unsigned)c->durability > KVF_DURABILITY_DEFAULT ||
	    (unsigned)c->placement > KVF_PLACEMENT_FREE_RATIO_FIRST ||
	    (unsigned)c->eviction_order > KVF_EVICTION_AGE ||
	    (unsigned)c->index > KVF_INDEX_BUCKET)
		return KVF_ERR_INVALID_ARGUMENT;
	/* An explicit request for a journal without a directory is a
	 * mistake to report, not to downgrade silently. */
	if ((c->durability == KVF_DURABILITY_BOUNDED ||
	     c->durability == KVF_DURABILITY_STRICT) && !c->data_dir)
		return KVF_ERR_INVALID_ARGUMENT;
	return KVF_OK;
}

static const struct kvf__index_ops *index_ops(enum kvf_index_kind kind)
{
	switch (kind) {
	case KVF_INDEX_LFHT:
		return &kvf__index_lfht_ops;
	case KVF_INDEX_BUCKET:
		return &kvf__index_bucket_ops;
	}
	return NULL;
}

void kvf__request_eviction(struct kvf_engine *e)
{
	if (__atomic_exchange_n(&e->evict_requested, 1, __ATOMIC_ACQ_REL))
		return; /* already asked */
	if (e->bg_started) {
		pthread_mutex_lock(&e->bg_lock);
		pthread_cond_signal(&e->bg_cond);
		pthread_mutex_unlock(&e->bg_lock);
	}
}

static void *background_main(void *arg)
{
	struct kvf_engine *e = arg;
	struct timespec deadline;

	kvf__rcu_ensure_registered();
	pthread_mutex_lock(&e->bg_lock);
	while (!e->bg_stop) {
		kvf__deadline_ts(kvf__now_ns() + (uint64_t)e->cfg.tick_interval_ms *
						  KVF__NS_PER_MS,
				 &deadline);
		pthread_cond_timedwait(&e->bg_cond, &e->bg_lock, &deadline);
		if (e->bg_stop)
			break;
		pthread_mutex_unlock(&e->bg_lock);
		kvf_engine_tick(e);
		pthread_mutex_lock(&e->bg_lock);
	}
	pthread_mutex_unlock(&e->bg_lock);
	kvf_thread_unregister();
	return NULL;
}

static int start_background(struct kvf_engine *e)
{
	pthread_condattr_t attr;

	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&e->bg_cond, &attr);
	pthread_condattr_destroy(&attr);
	if (!e->cfg.background)
		return KVF_OK;
	if (pthread_create(&e->bg_thread, NULL, background_main, e))
		return KVF_ERR_NO_MEMORY;
	e->bg_started = true;
	return KVF_OK;
}

static void stop_background(struct kvf_engine *e)
{
	if (e->bg_started) {
		pthread_mutex_lock(&e->bg_lock);
		e->bg_stop = true;
		pthread_cond_signal(&e->bg_cond);
		pthread_mutex_unlock(&e->bg_lock);
		pthread_join(e->bg_thread, NULL);
		e->bg_started = false;
	}
	pthread_cond_destroy(&e->bg_cond);
}

static void copy_config(struct kvf_engine *e, const struct kvf_config *cfg)
{
	e->cfg = *cfg;
	if (e->cfg.durability == KVF_DURABILITY_DEFAULT)
		e->cfg.durability = cfg->data_dir ? KVF_DURABILITY_BOUNDED :
						    KVF_DURABILITY_NONE;
	if (!e->cfg.clock)
		e->cfg.clock = monotonic_ns;
	e->lease_ttl_ns = cfg->lease_ttl_ms * MS;
	e->client_ttl_ns = cfg->client_ttl_ms * MS;
	e->discard_ns = cfg->put_discard_timeout_ms * MS;
	e->release_ns = cfg->put_release_timeout_ms * MS;
	e->soft_pin_ns = cfg->soft_pin_ttl_ms * MS;
	e->place_seed = cfg->seed ? cfg->seed : kvf__now(e);
	kvf__park_hint_init(&e->park_hint, cfg->alloc_alignment);
}

struct unlink_ctx {
	struct kvf_engine *e;
	struct kvf__reclaim rc;
};

static void unlink_for_close(struct kvf__object *o, void *arg)
{
	struct unlink_ctx *c = arg;
	uint64_t hash = kvf__object_hash(o);

	if (kvf__index_remove(c->e->index, o, hash) == KVF_OK)
		kvf__reclaim_add(&c->rc, o);
}

/* Empty the index (no other thread may use the engine). */
static void unlink_all(struct kvf_engine *e)
{
	struct unlink_ctx c = { .e = e };

	kvf__rcu_read_lock();
	kvf__index_foreach(e->index, unlink_for_close, &c);
	kvf__reclaim_flush(&c.rc);
	kvf__rcu_read_unlock();
	kvf__rcu_barrier();
}

static int open_journal(struct kvf_engine *e, uint64_t *expected)
{
	struct kvf__journal_config jc = {
		.dir = e->data_dir,
		.durability = e->cfg.durability,
		.sync_interval_ms = e->cfg.sync_interval_ms,
		.writemap = e->cfg.journal_writemap,
		.wal_bytes = e->cfg.journal_wal_bytes,
		.checkpoint_records = e->cfg.journal_checkpoint_records,
	};
	uint64_t estimate;
	int ret;

	if (e->cfg.durability == KVF_DURABILITY_NONE)
		return KVF_OK;
	ret = kvf__journal_open(&jc, &e->journal);
	if (ret)
		return ret;
	estimate = kvf__journal_object_estimate(e->journal);
	if (estimate > *expected)
		*expected = estimate;
	return KVF_OK;
}

enum kvf_status kvf_engine_open(const struct kvf_config *cfg,
				struct kvf_engine **out)
{
	struct kvf_config full;
	struct kvf_engine *e;
	uint64_t expected;
	int ret;

	if (!cfg || !out)
		return KVF_ERR_INVALID_ARGUMENT;
	ret = import_config(cfg, &full);
	if (ret)
		return ret;
	cfg = &full;
	ret = check_config(cfg);
	if (ret)
		return ret;
	if (!index_ops(cfg->index))
		return KVF_ERR_UNAVAILABLE;
	kvf__rcu_ensure_registered();
	e = calloc(1, sizeof(*e));
	if (!e)
		return KVF_ERR_NO_MEMORY;
	copy_config(e, cfg);
	ret = KVF_ERR_NO_MEMORY;
	if (cfg->data_dir) {
		e->data_dir = strdup(cfg->data_dir);
		if (!e->data_dir)
			goto err_free;
		e->cfg.data_dir = e->data_dir;
	}
	pthread_mutex_init(&e->seg_lock, NULL);
	pthread_mutex_init(&e->deferred_lock, NULL);
	pthread_mutex_init(&e->bg_lock, NULL);
	pthread_mutex_init(&e->tick_lock, NULL);
	ret = kvf__prof_create(&e->prof);
	if (ret)
		goto err_locks;
	kvf__prof_set_log(e->prof, cfg->log, cfg->log_ctx);
	expected = cfg->expected_objects;
	ret = open_journal(e, &expected);
	if (ret)
		goto err_prof;
	ret = kvf__arena_create(cfg->background, expected, &e->arena);
	if (ret)
		goto err_journal;
	ret = index_ops(cfg->index)->create(expected, &e->index);
	if (ret)
		goto err_arena;
	ret = kvf__segments_init(e);
	if (ret)
		goto err_index;
	if (e->journal) {
		ret = kvf__engine_recover(e);
		if (ret)
			goto err_recovered;
	}
	ret = start_background(e);
	if (ret)
		goto err_recovered;
	*out = e;
	return KVF_OK;

err_recovered:
	unlink_all(e);
	kvf__segments_fini(e);
err_index:
	kvf__index_destroy(e->index);
err_arena:
	kvf__arena_destroy(e->arena);
err_journal:
	kvf__journal_close(e->journal);
err_prof:
	kvf__prof_destroy(e->prof);
err_locks:
	pthread_mutex_destroy(&e->tick_lock);
	pthread_mutex_destroy(&e->bg_lock);
	pthread_mutex_destroy(&e->deferred_lock);
	pthread_mutex_destroy(&e->seg_lock);
err_free:
	free(e->data_dir);
	free(e);
	return ret;
}


void kvf_engine_close(struct kvf_engine *e)
{
	if (!e)
		return;
	kvf__rcu_ensure_registered();
	stop_background(e);
	kvf__journal_close(e->journal);
	unlink_all(e);
	kvf__index_destroy(e->index);
	kvf__deferred_release(e, true);
	free(e->deferred);
	kvf__segments_fini(e);
	kvf__arena_destroy(e->arena); /* after every record went back to it */
	kvf__prof_destroy(e->prof);
	pthread_mutex_destroy(&e->tick_lock);
	pthread_mutex_destroy(&e->bg_lock);
	pthread_mutex_destroy(&e->deferred_lock);
	pthread_mutex_destroy(&e->seg_lock);
	free(e->data_dir);
	free(e);
}

enum kvf_status kvf_engine_tick(struct kvf_engine *e)
{
	int ret, ev;

	if (!e)
		return KVF_ERR_INVALID_ARGUMENT;
	kvf__rcu_ensure_registered();
	pthread_mutex_lock(&e->tick_lock);
	ret = kvf__expire_clients(e);
	kvf__rcu_read_lock();
	kvf__deferred_release(e, false);
	kvf__rcu_read_unlock();
	ev = kvf__evict_if_needed(e);
	pthread_mutex_unlock(&e->tick_lock);
	return ret ? ret : ev;
}

static void collect_stats(struct kvf_engine *e, struct kvf_engine_stats *st)
{
	struct kvf__seg_table *t;

	memset(st, 0, sizeof(*st));
	st->objects = (uint64_t)__atomic_load_n(&e->nr_complete, __ATOMIC_RELAXED);
	st->processing =
		(uint64_t)__atomic_load_n(&e->nr_processing, __ATOMIC_RELAXED);
	st->evicted_objects = __atomic_load_n(&e->nr_evicted, __ATOMIC_RELAXED);
	st->eviction_passes =
		__atomic_load_n(&e->nr_evict_passes, __ATOMIC_RELAXED);
	st->eviction_successes =
		__atomic_load_n(&e->nr_evict_successes, __ATOMIC_RELAXED);
	st->evicted_bytes = __atomic_load_n(&e->evicted_bytes, __ATOMIC_RELAXED);
	st->put_alloc_failures =
		__atomic_load_n(&e->nr_alloc_failures, __ATOMIC_RELAXED);
	st->soft_pinned = (uint64_t)__atomic_load_n(&e->nr_soft_pinned,
						    __ATOMIC_RELAXED);
	st->expired_clients = __atomic_load_n(&e->nr_expired, __ATOMIC_RELAXED);
	st->recovered_objects = e->recovered_objects;
	st->recovery_ns = e->recovery_ns;
	st->record_bytes = kvf__arena_mapped_bytes(e->arena);
	st->record_reserve_bytes = kvf__arena_reserved_bytes(e->arena);
	pthread_mutex_lock(&e->deferred_lock);
	st->deferred_frees = e->nr_deferred;
	st->discarded_puts = e->nr_discarded_puts;
	st->released_puts = e->nr_released_puts;
	st->discarded_bytes = e->deferred_bytes;
	pthread_mutex_unlock(&e->deferred_lock);
	kvf__rcu_read_lock();
	t = kvf__segs(e);
	st->segments = t->nr;
	for (uint32_t i = 0; i < t->nr; i++) {
		st->capacity_bytes += t->seg[i]->size;
		st->used_bytes += kvf__segalloc_used_bytes(t->alloc[i]);
		st->allocator_bytes += kvf__segalloc_meta_bytes(t->alloc[i]);
	}
	st->index_bytes = kvf__index_bytes(e->index);
	{
		long before, after;
		unsigned long count;

		cds_lfht_count_nodes(e->clients, &before, &count, &after);
		st->clients = count;
	}
	kvf__rcu_read_unlock();
}

enum kvf_status kvf_engine_get_stats_sized(struct kvf_engine *e,
					   struct kvf_engine_stats *st,
					   size_t size)
{
	struct kvf_engine_stats all;

	if (!e || !st)
		return KVF_ERR_INVALID_ARGUMENT;
	if (size < KVF_ENGINE_STATS_SIZE_MIN)
		return KVF_ERR_INVALID_PARAMS;
	kvf__rcu_ensure_registered();
	collect_stats(e, &all);
	kvf__abi_copy_out(st, size, &all, sizeof(all));
	return KVF_OK;
}

enum kvf_status kvf_segment_query_sized(struct kvf_engine *e,
					uint64_t segment_id,
					struct kvf_segment_info *info,
					size_t size)
{
	struct kvf_segment_info all;
	int ret;

	if (!e || !info)
		return KVF_ERR_INVALID_ARGUMENT;
	if (size < KVF_SEGMENT_INFO_SIZE_MIN)
		return KVF_ERR_INVALID_PARAMS;
	ret = kvf__segment_query(e, segment_id, &all);
	if (!ret)
		kvf__abi_copy_out(info, size, &all, sizeof(all));
	return ret;
}

struct kvf_profiler *kvf_engine_profiler(struct kvf_engine *e)
{
	return e ? e->prof : NULL;
}
