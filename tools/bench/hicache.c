/* SPDX-License-Identifier: MIT */
/*
 * tools/bench/hicache.c - the default workload, shaped like SGLang HiCache.
 *
 * Fill N objects (64-hex page hash + "_<rank>_k|v" keys) in batches
 * through put_start + put_end, then batch exist over random keys (half of
 * them missing), batch get over random existing keys, batch remove of
 * everything, a second fill ("refill") into the emptied engine, and
 * "churn": N more puts, each batch preceded (untimed) by the remove of as
 * many random live objects, so the engine stays at N objects. The first
 * fill pays for touching fresh memory (page faults and zeroing, which
 * dominate at 10M objects on this VM), the refill is a fill of a master
 * whose memory is warm, and churn is a master's steady state: puts into
 * space that removes have just freed, of the sizes it has seen before.
 * Threads split every phase evenly and run it together; a phase's
 * throughput is its keys over its wall time, its latencies are per batch.
 *
 * Values are KV-cache pages of a model with two page sizes (a DSA model:
 * 3.12 MB and 643 KB, 3:1, by key id), as a HiCache rank sees: a master
 * holds a handful of distinct sizes, not a spread.
 *
 * Each thread generates its share of a phase's keys before the phase's
 * clock starts, so formatting keys is not timed, and RSS is sampled after
 * that, so its growth over the fill is the engine's memory alone.
 *
 * Keys reach the engine as a master receives them (--keys request, the
 * default): before each batch, untimed, they are copied into one small
 * request buffer laid out as a struct_pack vector<string> (a length byte,
 * then the bytes), and the keys point into it; a phase's time is then the
 * sum of its engine calls (the slowest thread's). --keys scattered hands
 * the engine pointers into the phase's whole key pool instead (cold lines,
 * as no master sees them) and times the phase's wall clock. The machine's
 * memory floor is sampled before the fill and after the refill, and every
 * phase is also quoted against it (vs_floor).
 * Random keys within a batch are distinct: ids come from an affine
 * bijection of [0, N).
 *
 * With a journal, each mutating phase also reports the storage traffic
 * its wall time saw, per key (results.<phase>.write_bytes_per_key: the
 * side log, the moves into LMDB and the checkpoint folds, whatever batch
 * they belong to; churn's covers its removes too), and the whole run,
 * close included, per journaled record (write_bytes_per_record): what a
 * disk sees of the journal's write amplification.
 */
#include "config.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "tools/bench/bench.h"

#define KEY_CAP 96

enum phase {
	PH_FILL,
	PH_EXIST,
	PH_GET,
	PH_REMOVE,
	PH_REFILL,
	PH_CHURN,
	PH_COUNT
};

/*
 * Results: one per phase, and churn's removes (untimed in churn's figure)
 * as a steady-state master's removes, timed on their own.
 */
#define RES_CHURN_REMOVE PH_COUNT
#define NR_RESULTS (PH_COUNT + 1)

static const char *const phase_names[NR_RESULTS] = {
	"put", "exist", "get", "remove", "refill", "churn", "churn_remove"
};

/* The model's two page sizes; one key in four holds the small one. */
#define PAGE_BIG 3120000
#define PAGE_SMALL 643000

struct worker {
	pthread_t thread;
	struct hicache *h;
	unsigned id;
	uint64_t rng;
	/* The phase's keys and sizes, made before the clock starts. */
	char *keybuf;
	struct kvf_key *keys;
	uint64_t *sizes;
	size_t nr_keys;
	struct kvf_replicas *out;
	enum kvf_status *st;
	/* --keys request: one batch's request buffer and its keys. */
	char *reqbuf;
	struct kvf_key *req;
	/* churn: the ids this thread holds, and one batch of victims. */
	uint64_t first_id; /* the id of the phase's key 0 */
	uint64_t *live;
	char *victim_buf;
	struct kvf_key *victims;
	uint64_t busy_ns[NR_RESULTS];
	double *lat_us[NR_RESULTS];
	size_t nr_lat[NR_RESULTS];
	uint64_t errors[NR_RESULTS];
};

struct hicache {
	const struct bench_opts *o;
	struct bench_results *r;
	struct kvf_engine *e;
	uint64_t perm_a;
	/* prepare -> workers make keys -> ready -> start -> run -> done */
	pthread_barrier_t prepare, ready, start, done;
	enum phase phase;
	struct worker *w;
};

/* The x-th id of a fixed pseudo-random permutation of [0, n). */
static uint64_t perm(const struct hicache *h, uint64_t x)
{
	return (unsigned __int128)(x % h->o->objects) * h->perm_a %
	       h->o->objects;
}

/* This thread's share [lo, hi) of @total. */
static void share(const struct hicache *h, unsigned id, uint64_t total,
		  uint64_t *lo, uint64_t *hi)
{
	uint64_t t = h->o->threads;

	*lo = total * id / t;
	*hi = total * (id + 1) / t;
}

/* Copy @n keys into the request buffer as they would arrive on the wire. */
static const struct kvf_key *receive_keys(struct worker *w, size_t first,
					  size_t n)
{
	char *p = w->reqbuf;

	for (size_t i = 0; i < n; i++) {
		const struct kvf_key *k = &w->keys[first + i];

		*p++ = (char)k->len;
		memcpy(p, k->data, k->len);
		w->req[i] = (struct kvf_key){ .data = p, .len = k->len };
		p += k->len;
	}
	return w->req;
}

static uint64_t page_size(uint64_t id)
{
	return id % 4 == 3 ? PAGE_SMALL : PAGE_BIG;
}

/* Count one timed batch of result @res: its time, latency and outcome. */
static void note_batch(struct worker *w, unsigned res, uint64_t ns, int ret)
{
	w->busy_ns[res] += ns;
	w->lat_us[res][w->nr_lat[res]++] = (double)ns / 1e3;
	if (ret != KVF_OK)
		w->errors[res]++;
}

/*
 * churn: remove @n distinct random objects of this thread's (spaced
 * positions from a random start) and note that the batch's new ids
 * (w->keys[first...]) take their places. Only the remove call is timed,
 * as churn_remove.
 */
static void remove_victims(struct worker *w, size_t first, size_t n)
{
	size_t held = w->nr_keys, stride = held / n;
	size_t at = (size_t)(bench_rand(&w->rng) % held);
	uint64_t t0;
	int ret;

	for (size_t j = 0; j < n; j++) {
		size_t pos = (at + j * stride) % held;
		char *k = w->victim_buf + j * KEY_CAP;

		w->victims[j] = (struct kvf_key){
			.data = k,
			.len = bench_hicache_key(k, KEY_CAP, w->live[pos]),
		};
		w->live[pos] = w->first_id + first + j;
	}
	t0 = bench_now_ns();
	ret = kvf_batch_remove(w->h->e, w->victims, n, true, w->st);
	note_batch(w, RES_CHURN_REMOVE, bench_now_ns() - t0, ret);
}

static void run_batch(struct worker *w, enum phase ph, size_t first,
		      size_t n)
{
	struct kvf_put_config cfg = { .replica_num = 1 };
	struct kvf_engine *e = w->h->e;
	const struct kvf_key *keys = w->keys + first;
	uint64_t t0;
	int ret = KVF_OK;

	if (ph == PH_CHURN)
		remove_victims(w, first, n);
	if (!w->h->o->scattered_keys)
		keys = receive_keys(w, first, n);
	t0 = bench_now_ns();
	switch (ph) {
	case PH_FILL:
	case PH_REFILL:
	case PH_CHURN:
		ret = kvf_batch_put_start(e, 1, keys, w->sizes + first, n, &cfg,
					  w->out, w->st);
		if (ret == KVF_OK)
			ret = kvf_batch_put_end(e, 1, keys, n, w->st);
		break;
	case PH_EXIST:
		ret = kvf_batch_exist(e, keys, n, w->st);
		break;
	case PH_GET:
		ret = kvf_batch_get(e, keys, n, w->out, w->st, NULL);
		break;
	case PH_REMOVE:
		ret = kvf_batch_remove(e, keys, n, true, w->st);
		break;
	case PH_COUNT:
		break;
	}
	note_batch(w, ph, bench_now_ns() - t0, ret);
}

/* The id of the x-th key of a phase. */
static uint64_t phase_id(const struct hicache *h, enum phase ph, uint64_t x)
{
	uint64_t n = h->o->objects;

	switch (ph) {
	case PH_EXIST:
		/* Half hits, half keys never written. */
		return perm(h, x) + (x % 2 ? n : 0);
	case PH_GET:
		return perm(h, x);
	case PH_CHURN:
		/* New objects, never written before. */
		return x + n;
	default:
		return x;
	}
}

/* Make this thread's keys (and sizes) for @ph. */
static void prepare_phase(struct worker *w, enum phase ph)
{
	uint64_t lo, hi;

	share(w->h, w->id, w->h->o->objects, &lo, &hi);
	w->nr_keys = (size_t)(hi - lo);
	w->first_id = phase_id(w->h, ph, lo);
	for (size_t i = 0; i < w->nr_keys; i++) {
		char *k = w->keybuf + i * KEY_CAP;
		uint64_t id = phase_id(w->h, ph, lo + i);

		w->keys[i].data = k;
		w->keys[i].len = bench_hicache_key(k, KEY_CAP, id);
		w->sizes[i] = page_size(id);
		/* The refill's objects are the ones churn replaces. */
		if (ph == PH_REFILL)
			w->live[i] = id;
	}
}

static void run_phase(struct worker *w, enum phase ph)
{
	size_t b = w->h->o->batch;

	for (size_t x = 0; x < w->nr_keys; x += b)
		run_batch(w, ph, x, w->nr_keys - x < b ? w->nr_keys - x : b);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;

	kvf_thread_register();
	bench_pin_thread(w->h->o, w->id);
	for (;;) {
		pthread_barrier_wait(&w->h->prepare);
		if (w->h->phase == PH_COUNT)
			break;
		prepare_phase(w, w->h->phase);
		pthread_barrier_wait(&w->h->ready);
		pthread_barrier_wait(&w->h->start);
		run_phase(w, w->h->phase);
		pthread_barrier_wait(&w->h->done);
	}
	kvf_thread_unregister();
	return NULL;
}

static void record_phase(struct hicache *h, unsigned ph, uint64_t ns)
{
	const struct bench_opts *o = h->o;
	size_t total = 0, k = 0;
	uint64_t errors = 0, busy = 0;
	double *all;

	for (unsigned t = 0; t < o->threads; t++) {
		total += h->w[t].nr_lat[ph];
		errors += h->w[t].errors[ph];
		if (h->w[t].busy_ns[ph] > busy)
			busy = h->w[t].busy_ns[ph];
	}
	/*
	 * Request keys: the engine's time, not the untimed key copies;
	 * churn: its puts' time, not the removes between them (which are
	 * churn_remove's).
	 */
	if ((!o->scattered_keys || ph >= PH_CHURN) && busy)
		ns = busy;
	all = malloc((total ? total : 1) * sizeof(*all));
	for (unsigned t = 0; t < o->threads; t++)
		for (size_t i = 0; i < h->w[t].nr_lat[ph]; i++)
			all[k++] = h->w[t].lat_us[ph][i];
	bench_result_op(h->r, phase_names[ph], o->objects, ns, all, total);
	if (errors)
		bench_note(h->r,
			   "warning: %llu %s batches reported item errors",
			   (unsigned long long)errors, phase_names[ph]);
	free(all);
}

/* Records a phase of @objects keys journals: churn removes and puts. */
static uint64_t phase_records(enum phase ph, uint64_t objects)
{
	switch (ph) {
	case PH_FILL:
	case PH_REMOVE:
	case PH_REFILL:
		return objects;
	case PH_CHURN:
		return 2 * objects;
	default:
		return 0;
	}
}

/*
 * results.<phase>.write_bytes_per_key for the mutating phases and
 * write_bytes_per_record for the run, from @io (per phase) and @run.
 */
static void report_writes(struct bench_results *r, uint64_t objects,
			  const uint64_t *io, uint64_t run)
{
	uint64_t records = 0;

	for (enum phase p = PH_FILL; p < PH_COUNT; p++) {
		if (!phase_records(p, objects) || io[p] == BENCH_NO_IO)
			continue;
		records += phase_records(p, objects);
		bench_result(r, phase_names[p], "write_bytes_per_key",
			     (double)io[p] / (double)objects);
	}
	if (run == BENCH_NO_IO) {
		bench_note(r, "no write_bytes in /proc/self/io: storage "
			      "traffic not reported");
		return;
	}
	bench_extra(r, "write_bytes_per_record",
		    (double)run / (double)(records ? records : 1));
}

static int workers_init(struct hicache *h)
{
	const struct bench_opts *o = h->o;
	size_t batches = o->objects / o->batch + o->threads + 1;

	h->w = calloc(o->threads, sizeof(*h->w));
	if (!h->w)
		return KVF_ERR_NO_MEMORY;
	for (unsigned t = 0; t < o->threads; t++) {
		struct worker *w = &h->w[t];

		w->h = h;
		w->id = t;
		w->rng = (o->seed + 1) * 0x9e3779b97f4a7c15ULL + t + 1;
		size_t share_max = o->objects / o->threads + 1;

		w->keybuf = malloc(share_max * KEY_CAP);
		w->keys = calloc(share_max, sizeof(*w->keys));
		w->sizes = calloc(share_max, sizeof(*w->sizes));
		w->out = calloc(o->batch, sizeof(*w->out));
		w->st = calloc(o->batch, sizeof(*w->st));
		w->reqbuf = malloc((size_t)o->batch * (KEY_CAP + 1));
		w->req = calloc(o->batch, sizeof(*w->req));
		w->live = calloc(share_max, sizeof(*w->live));
		w->victim_buf = malloc((size_t)o->batch * KEY_CAP);
		w->victims = calloc(o->batch, sizeof(*w->victims));
		if (!w->keybuf || !w->keys || !w->sizes || !w->out || !w->st ||
		    !w->reqbuf || !w->req || !w->live || !w->victim_buf ||
		    !w->victims)
			return KVF_ERR_NO_MEMORY;
		for (int p = 0; p < NR_RESULTS; p++) {
			w->lat_us[p] = calloc(batches, sizeof(double));
			if (!w->lat_us[p])
				return KVF_ERR_NO_MEMORY;
		}
	}
	return KVF_OK;
}

static void workers_free(struct hicache *h)
{
	for (unsigned t = 0; h->w && t < h->o->threads; t++) {
		struct worker *w = &h->w[t];

		free(w->keybuf);
		free(w->keys);
		free(w->sizes);
		free(w->out);
		free(w->st);
		free(w->reqbuf);
		free(w->req);
		free(w->live);
		free(w->victim_buf);
		free(w->victims);
		for (int p = 0; p < NR_RESULTS; p++)
			free(w->lat_us[p]);
	}
	free(h->w);
}

/* Let the workers prepare @ph; returns once they are ready to start. */
static void prepare(struct hicache *h, enum phase ph)
{
	h->phase = ph;
	pthread_barrier_wait(&h->prepare);
	if (ph != PH_COUNT)
		pthread_barrier_wait(&h->ready);
}

static uint64_t timed_phase(struct hicache *h)
{
	uint64_t t0 = bench_now_ns();

	pthread_barrier_wait(&h->start);
	pthread_barrier_wait(&h->done);
	return bench_now_ns() - t0;
}

/* The floor probe's key length: the workload's keys are all this long. */
static size_t hicache_key_len(void)
{
	char buf[KEY_CAP];

	return bench_hicache_key(buf, sizeof(buf), 0);
}

/*
 * Where the filled engine's memory is, per object: its records (mapped
 * chunks, the reserve faulted in ahead included), the index's table and
 * the allocators' bookkeeping, as the engine counts them.
 */
static void report_memory(struct bench_results *r,
			  const struct kvf_engine_stats *st, uint64_t objects)
{
	double n = (double)objects;

	bench_extra(r, "record_bytes_per_object",
		    (double)(st->record_bytes + st->record_reserve_bytes) / n);
	bench_extra(r, "index_bytes_per_object", (double)st->index_bytes / n);
	bench_extra(r, "allocator_bytes_per_object",
		    (double)st->allocator_bytes / n);
}

int bench_hicache(const struct bench_opts *o, struct bench_results *r)
{
	struct hicache h = { .o = o, .r = r };
	struct bench_floor floor = { 0 };
	struct kvf_config cfg;
	struct kvf_engine_stats st;
	uint64_t rss_open, reserve_open, rss0, rss1, ns[NR_RESULTS];
	uint64_t io[PH_COUNT], io_run = BENCH_NO_IO, io0;
	bool journaled;
	int ret;

	h.perm_a = bench_coprime_step(o->objects);
	bench_wipe_dir(o, o->data_dir);
	bench_engine_config(o, &cfg);
	journaled = cfg.durability != KVF_DURABILITY_NONE;
	/* The engine's own memory counts too (e.g. a presized index). */
	rss_open = bench_rss_bytes();
	ret = kvf_engine_open(&cfg, &h.e);
	if (ret)
		return ret;
	rss_open = bench_rss_bytes() - rss_open;
	kvf_engine_get_stats(h.e, &st);
	reserve_open = st.record_reserve_bytes;
	ret = bench_mount_segments(h.e, o->objects, "hicache");
	if (!ret)
		ret = workers_init(&h);
	if (!ret)
		ret = bench_floor_init(&floor, o->objects, hicache_key_len());
	if (ret)
		goto out;
	bench_floor_sample_all(&floor, o, o->objects);
	if (o->profile)
		kvf_profile_enable(kvf_engine_profiler(h.e), true);
	pthread_barrier_init(&h.prepare, NULL, o->threads + 1);
	pthread_barrier_init(&h.ready, NULL, o->threads + 1);
	pthread_barrier_init(&h.start, NULL, o->threads + 1);
	pthread_barrier_init(&h.done, NULL, o->threads + 1);
	for (unsigned t = 0; t < o->threads; t++)
		pthread_create(&h.w[t].thread, NULL, worker_main, &h.w[t]);
	prepare(&h, PH_FILL);
	rss0 = bench_rss_bytes();
	/*
	 * Record memory the engine faulted in ahead (its expected objects)
	 * after open returned is in neither rss_open nor rss1 - rss0.
	 */
	kvf_engine_get_stats(h.e, &st);
	rss_open += st.record_reserve_bytes - reserve_open;
	io_run = io0 = bench_write_bytes();
	ns[PH_FILL] = timed_phase(&h);
	io[PH_FILL] = bench_written_since(io0);
	rss1 = bench_rss_bytes();
	kvf_engine_get_stats(h.e, &st); /* the filled engine's memory */
	for (enum phase p = PH_EXIST; p < PH_COUNT; p++) {
		prepare(&h, p);
		io0 = bench_write_bytes();
		ns[p] = timed_phase(&h);
		io[p] = bench_written_since(io0);
	}
	prepare(&h, PH_COUNT);
	bench_floor_sample_all(&floor, o, o->objects);
	for (unsigned t = 0; t < o->threads; t++)
		pthread_join(h.w[t].thread, NULL);
	pthread_barrier_destroy(&h.prepare);
	pthread_barrier_destroy(&h.ready);
	pthread_barrier_destroy(&h.start);
	pthread_barrier_destroy(&h.done);
	ns[RES_CHURN_REMOVE] = 0;
	for (unsigned p = PH_FILL; p < NR_RESULTS; p++)
		record_phase(&h, p, ns[p]);
	bench_floor_report(r, bench_floor_result(&floor), phase_names,
			   NR_RESULTS);
	bench_floor_report_threads(r, &floor);
	bench_extra(r, "bytes_per_object",
		    (double)(rss1 - rss0 + rss_open) / (double)o->objects);
	report_memory(r, &st, o->objects);
	if (o->profile)
		bench_capture_profile(r, kvf_engine_profiler(h.e));
	if (journaled) {
		/* Closing moves and syncs what the run left: part of it. */
		kvf_engine_close(h.e);
		h.e = NULL;
		report_writes(r, o->objects, io, bench_written_since(io_run));
	}
out:
	bench_floor_free(&floor);
	workers_free(&h);
	kvf_engine_close(h.e);
	return ret;
}
