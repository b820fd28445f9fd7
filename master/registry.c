// SPDX-License-Identifier: MIT
/*
 * master/registry.c - clients and segments: UUIDs, protocols, liveness.
 *
 * Design notes.
 *
 * Ids: kvf_registry_id() is a 64-bit mix of both UUID halves (never 0).
 * Deterministic, so the engine's recovered segments and clients keep the
 * ids their UUIDs map to; a collision (two live UUIDs, one id) is
 * detected at mount against the registry's tables and refused.
 *
 * Tables: segments and clients live in two dense arrays (a removal moves
 * the last entry into the hole). Open-addressing indexes, kept up to date
 * entry by entry (linear probing, backward-shift deletion, doubled when
 * half full), find a segment by id or by name and a client by id in O(1),
 * and each client threads its segments on a list through the array
 * (slot links, fixed when an entry moves), so nothing a request does
 * under the lock grows with the number of segments other clients have:
 * a peer may mount tens of thousands of segments in one ReMountSegment,
 * and a rebuild per change (what this once did) made that quadratic
 * under the write lock. Segment names are not unique (a client mounts
 * several buffers under its host name): the name index is a multimap and
 * a lookup by name answers one of them.
 *
 * Liveness (Mooncake's ok-client set): a client becomes live when it
 * remounts; Ping answers OK only for live clients. It stops being live
 * when the engine no longer knows it (it expired: silent for the client
 * TTL, its segments unmounted by the engine) or, for a client without
 * segments, when its own pings stop for the TTL (checked by the sweep).
 * The live flag and last-ping time are atomics written under the shared
 * lock, so Ping never takes the lock exclusively.
 *
 * Persistence: the segment table (UUIDs and protocol; the engine keeps
 * name, base, size and endpoint in its journal) is rewritten whole after
 * each request that changed it (one ReMountSegment of many segments
 * writes it once), through a temporary file, fsync, rename and a
 * directory fsync, so a crash leaves the old or the new table, never a
 * torn one. The table is formatted into memory under the lock, and
 * written and synced outside it (persist_lock orders the writers; a
 * snapshot older than the one on disk is not written), so no reader
 * waits for the disk; the request that made the change is answered only
 * once a snapshot holding it is on disk.
 * A segment the engine recovered without a table line (a crash between
 * the two writes) is still served: its descriptors fall back to the
 * protocol "tcp" until its owner remounts it.
 *
 * Replication (kvforge-master --enable_ha): the persist hook sees every
 * table written, in order, under persist_lock (so a table a standby is
 * sent is never older than one sent before); the standby stores the
 * leader's table with kvf_registry_store_table() where kvf_registry_open()
 * loads it, so a promoted standby knows the segments as the leader did.
 */
#include "config.h"

#include "master/registry.h"

#include "base/clock.h"
#include "base/grow.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <kvforge/status.h>

#define TABLE_FILE "kvforge-master.segments"
#define TABLE_MAGIC "kvforge-master segments 1"

#define NO_SLOT UINT32_MAX

struct client_ent {
	struct kvf_uuid uuid;
	uint64_t id;
	uint64_t last_ping_ns; /* atomic */
	unsigned nsegs;
	uint32_t first_seg; /* head of its segments' list, NO_SLOT if none */
	bool live;	    /* atomic */
};

/* key (never 0) -> array slot; several slots may share a key. */
struct index {
	uint64_t *keys; /* 0 = empty */
	uint32_t *slots;
	size_t mask;
	size_t n;
};

struct kvf_registry {
	pthread_rwlock_t lock;
	struct kvf_engine *engine;
	char *path;
	char *tmp_path;
	char *dir;
	uint64_t client_ttl_ns;
	struct kvf_seg_entry *segs;
	size_t nsegs, cap_segs;
	struct client_ent *clients;
	size_t nclients, cap_clients;
	struct index seg_idx, name_idx, cli_idx;
	uint64_t live; /* atomic */
	kvf_clock_fn clock;
	void *clock_ctx;
	uint64_t seen_expired; /* atomic: engine expiries the sweep handled */
	/* persistence outside the lock (see the design notes) */
	pthread_mutex_t persist_lock;
	uint64_t snap_gen;    /* under the write lock */
	uint64_t written_gen; /* under persist_lock */
	int (*hook)(void *ctx, const char *text, size_t len);
	void *hook_ctx;
};

uint64_t kvf_registry_id(struct kvf_uuid u)
{
	/* splitmix64 finaliser over both halves: every input bit reaches
	 * every output bit, so UUIDs differing anywhere map apart. */
	uint64_t x = u.first ^ (u.second * 0x9e3779b97f4a7c15ULL);

	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	x ^= x >> 31;
	x ^= u.second;
	return x ? x : 1;
}

static uint64_t reg_now(const struct kvf_registry *r)
{
	return r->clock ? r->clock(r->clock_ctx) : kvf__now_ns();
}

void kvf_registry_set_clock(struct kvf_registry *r, kvf_clock_fn clock,
			    void *ctx)
{
	r->clock = clock;
	r->clock_ctx = ctx;
}

static bool uuid_eq(struct kvf_uuid a, struct kvf_uuid b)
{
	return a.first == b.first && a.second == b.second;
}

/* ---- index -------------------------------------------------------------- */

static size_t idx_home(const struct index *ix, uint64_t key)
{
	return (size_t)(key * 0x9e3779b97f4a7c15ULL >> 17) & ix->mask;
}

/* Where @key's entry for @slot sits, or -1. */
static long idx_pos(const struct index *ix, uint64_t key, uint32_t slot)
{
	if (!ix->n)
		return -1;
	for (size_t i = idx_home(ix, key);; i = (i + 1) & ix->mask) {
		if (!ix->keys[i])
			return -1;
		if (ix->keys[i] == key && ix->slots[i] == slot)
			return (long)i;
	}
}

static void idx_place(struct index *ix, uint64_t key, uint32_t slot)
{
	size_t i = idx_home(ix, key);

	while (ix->keys[i])
		i = (i + 1) & ix->mask;
	ix->keys[i] = key;
	ix->slots[i] = slot;
	ix->n++;
}

/* Room for one more entry: double (and re-place) at half full. */
static int idx_reserve(struct index *ix)
{
	size_t cap = ix->keys ? ix->mask + 1 : 0;
	struct index nx = {0};

	if (2 * (ix->n + 1) <= cap)
		return KVF_OK;
	cap = cap ? 2 * cap : 16;
	nx.keys = calloc(cap, sizeof(*nx.keys));
	nx.slots = calloc(cap, sizeof(*nx.slots));
	if (!nx.keys || !nx.slots) {
		free(nx.keys);
		free(nx.slots);
		return KVF_ERR_NO_MEMORY;
	}
	nx.mask = cap - 1;
	for (size_t i = 0; ix->keys && i <= ix->mask; i++)
		if (ix->keys[i])
			idx_place(&nx, ix->keys[i], ix->slots[i]);
	free(ix->keys);
	free(ix->slots);
	*ix = nx;
	return KVF_OK;
}

/* Add an entry; the caller reserved room (idx_reserve()). */
static void idx_add(struct index *ix, uint64_t key, uint32_t slot)
{
	idx_place(ix, key, slot);
}

/* Remove @key's entry for @slot (backward-shift deletion). */
static void idx_del(struct index *ix, uint64_t key, uint32_t slot)
{
	long at = idx_pos(ix, key, slot);
	size_t hole, i;

	if (at < 0)
		return;
	hole = (size_t)at;
	ix->keys[hole] = 0;
	ix->n--;
	for (i = (hole + 1) & ix->mask; ix->keys[i]; i = (i + 1) & ix->mask) {
		size_t home = idx_home(ix, ix->keys[i]);

		/* Moves back unless its home lies cyclically in (hole, i]. */
		if (((i - home) & ix->mask) < ((i - hole) & ix->mask))
			continue;
		ix->keys[hole] = ix->keys[i];
		ix->slots[hole] = ix->slots[i];
		ix->keys[i] = 0;
		hole = i;
	}
}

/* An entry moved from array slot @from to @to. */
static void idx_move(struct index *ix, uint64_t key, uint32_t from,
		     uint32_t to)
{
	long at = idx_pos(ix, key, from);

	if (at >= 0)
		ix->slots[at] = to;
}

static void idx_free(struct index *ix)
{
	free(ix->keys);
	free(ix->slots);
}

/* FNV-1a, never 0. */
static uint64_t name_key(const char *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (size_t i = 0; i < n; i++)
		h = (h ^ (uint8_t)p[i]) * 0x100000001b3ULL;
	return h ? h : 1;
}

static int grow(void **arr, size_t *cap, size_t need, size_t size)
{
	void *p = need ? kvf__grow(*arr, cap, need, size, 16) : *arr;

	if (need && !p)
		return KVF_ERR_NO_MEMORY;
	*arr = p;
	return KVF_OK;
}

/* The slot of @key's first entry, or -1 (unique keys: ids). */
static long idx_find(const struct index *ix, uint64_t key)
{
	if (!ix->n)
		return -1;
	for (size_t i = idx_home(ix, key); ix->keys[i]; i = (i + 1) & ix->mask)
		if (ix->keys[i] == key)
			return ix->slots[i];
	return -1;
}

static struct client_ent *client_find(struct kvf_registry *r, uint64_t id)
{
	long s = idx_find(&r->cli_idx, id);

	return s < 0 ? NULL : &r->clients[s];
}

static struct kvf_seg_entry *seg_find(struct kvf_registry *r, uint64_t id)
{
	long s = idx_find(&r->seg_idx, id);

	return s < 0 ? NULL : &r->segs[s];
}

/* Find or add @uuid's client entry (exclusive lock). NULL on allocation
 * failure. */
static struct client_ent *client_get(struct kvf_registry *r,
				     struct kvf_uuid uuid, uint64_t id)
{
	struct client_ent *c = client_find(r, id);

	if (c)
		return c;
	if (grow((void **)&r->clients, &r->cap_clients, r->nclients + 1,
		 sizeof(*r->clients)) ||
	    idx_reserve(&r->cli_idx))
		return NULL;
	r->clients[r->nclients] =
		(struct client_ent){.uuid = uuid,
				    .id = id,
				    .last_ping_ns = reg_now(r),
				    .first_seg = NO_SLOT};
	idx_add(&r->cli_idx, id, (uint32_t)r->nclients);
	return &r->clients[r->nclients++];
}

static void client_unlive(struct kvf_registry *r, struct client_ent *c)
{
	if (__atomic_exchange_n(&c->live, false, __ATOMIC_RELAXED))
		__atomic_fetch_sub(&r->live, 1, __ATOMIC_RELAXED);
}

/* Drop client slot @i (it has no segments left). */
static void client_drop(struct kvf_registry *r, size_t i)
{
	size_t last = r->nclients - 1;

	client_unlive(r, &r->clients[i]);
	idx_del(&r->cli_idx, r->clients[i].id, (uint32_t)i);
	if (i != last) {
		idx_move(&r->cli_idx, r->clients[last].id, (uint32_t)last,
			 (uint32_t)i);
		r->clients[i] = r->clients[last];
	}
	r->nclients--;
}

/* Thread segment slot @i onto its client's list. */
static void seg_link(struct kvf_registry *r, struct client_ent *c, uint32_t i)
{
	struct kvf_seg_entry *e = &r->segs[i];

	e->cprev = NO_SLOT;
	e->cnext = c->first_seg;
	if (c->first_seg != NO_SLOT)
		r->segs[c->first_seg].cprev = i;
	c->first_seg = i;
	c->nsegs++;
}

static void seg_unlink(struct kvf_registry *r, struct client_ent *c,
		       uint32_t i)
{
	struct kvf_seg_entry *e = &r->segs[i];

	if (e->cprev != NO_SLOT)
		r->segs[e->cprev].cnext = e->cnext;
	else if (c)
		c->first_seg = e->cnext;
	if (e->cnext != NO_SLOT)
		r->segs[e->cnext].cprev = e->cprev;
	if (c && c->nsegs)
		c->nsegs--;
}

/* Drop segment slot @i; the last entry moves into it. */
static void seg_drop(struct kvf_registry *r, size_t i)
{
	size_t last = r->nsegs - 1;
	struct kvf_seg_entry *e = &r->segs[i];

	seg_unlink(r, client_find(r, e->client), (uint32_t)i);
	idx_del(&r->seg_idx, e->id, (uint32_t)i);
	idx_del(&r->name_idx, e->name_key, (uint32_t)i);
	if (i != last) {
		struct kvf_seg_entry *m = &r->segs[last];

		idx_move(&r->seg_idx, m->id, (uint32_t)last, (uint32_t)i);
		idx_move(&r->name_idx, m->name_key, (uint32_t)last,
			 (uint32_t)i);
		if (m->cprev != NO_SLOT)
			r->segs[m->cprev].cnext = (uint32_t)i;
		else
			client_find(r, m->client)->first_seg = (uint32_t)i;
		if (m->cnext != NO_SLOT)
			r->segs[m->cnext].cprev = (uint32_t)i;
		*e = *m;
	}
	r->nsegs--;
}

/* ---- persistence -------------------------------------------------------- */

static int fsync_path(const char *path, int flags)
{
	int fd = open(path, flags | O_CLOEXEC);
	int ret;

	if (fd < 0)
		return -1;
	ret = fsync(fd);
	close(fd);
	return ret;
}

/* A formatted table, written outside the lock. */
struct snapshot {
	char *text;
	size_t len;
	uint64_t gen;
};

#define LINE_MAX_LEN (4 * 17 + KVF_PROTOCOL_MAX + 2)

/* Format the table (write lock held). */
static int format_table(struct kvf_registry *r, struct snapshot *snap)
{
	size_t cap = sizeof(TABLE_MAGIC) + 1 + r->nsegs * LINE_MAX_LEN;
	char *p;

	memset(snap, 0, sizeof(*snap));
	snap->text = malloc(cap);
	if (!snap->text)
		return KVF_ERR_NO_MEMORY;
	p = snap->text + sprintf(snap->text, "%s\n", TABLE_MAGIC);
	for (size_t i = 0; i < r->nsegs; i++) {
		const struct kvf_seg_entry *s = &r->segs[i];

		p += sprintf(p, "%016llx %016llx %016llx %016llx %s\n",
			     (unsigned long long)s->uuid.first,
			     (unsigned long long)s->uuid.second,
			     (unsigned long long)s->client_uuid.first,
			     (unsigned long long)s->client_uuid.second,
			     s->protocol_len ? s->protocol : "-");
	}
	snap->len = (size_t)(p - snap->text);
	snap->gen = ++r->snap_gen;
	return KVF_OK;
}

/* Format the table (write lock held). No path: nothing to write. */
static int snapshot_take(struct kvf_registry *r, struct snapshot *snap)
{
	memset(snap, 0, sizeof(*snap));
	return r->path ? format_table(r, snap) : KVF_OK;
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/*
 * Write @snap (no registry lock held) and free it. A snapshot older than
 * the one already written is dropped: that one holds this one's changes
 * (or their undoing).
 */
/* Replace @path by @text through @tmp, durably (fsync, rename, the
 * directory's fsync). KVF_OK or KVF_ERR_IO. */
static int write_file(const char *dir, const char *path, const char *tmp,
		      const char *text, size_t len)
{
	int ret = KVF_OK;
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	if (fd < 0)
		return KVF_ERR_IO;
	if (write_all(fd, text, len) || fsync(fd)) {
		close(fd);
		ret = KVF_ERR_IO;
	} else if (close(fd) || rename(tmp, path) ||
		   fsync_path(dir, O_RDONLY | O_DIRECTORY)) {
		ret = KVF_ERR_IO;
	}
	if (ret)
		unlink(tmp);
	return ret;
}

static int snapshot_write(struct kvf_registry *r, struct snapshot *snap)
{
	int ret = KVF_OK;

	if (!snap->text)
		return KVF_OK;
	pthread_mutex_lock(&r->persist_lock);
	if (snap->gen <= r->written_gen)
		goto out;
	ret = write_file(r->dir, r->path, r->tmp_path, snap->text, snap->len);
	if (!ret) {
		r->written_gen = snap->gen;
		if (r->hook)
			ret = r->hook(r->hook_ctx, snap->text, snap->len);
	}
out:
	pthread_mutex_unlock(&r->persist_lock);
	free(snap->text);
	snap->text = NULL;
	return ret;
}

/* A protocol name is a short word; it is stored as a token in the file. */
static bool protocol_ok(const char *p, size_t n)
{
	if (n > KVF_PROTOCOL_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = p[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '_' || c == '-' ||
		      c == '.' || c == '+'))
			return false;
	}
	return !(n == 1 && p[0] == '-');
}

static void fill_entry(struct kvf_seg_entry *e,
		       const struct kvf_segment_info *info,
		       struct kvf_uuid uuid, struct kvf_uuid client,
		       const char *protocol, size_t protocol_len)
{
	memset(e, 0, sizeof(*e));
	e->id = info->id;
	e->client = info->client_id;
	e->uuid = uuid;
	e->client_uuid = client;
	e->base = info->base;
	e->size = info->size;
	memcpy(e->name, info->name, sizeof(e->name));
	memcpy(e->endpoint, info->endpoint, sizeof(e->endpoint));
	e->name_len = strlen(e->name);
	e->endpoint_len = strlen(e->endpoint);
	memcpy(e->protocol, protocol, protocol_len);
	e->protocol_len = protocol_len;
	e->name_key = name_key(e->name, e->name_len);
}

/* Add (or refresh) the entry of a segment the engine has (exclusive). */
static int add_segment(struct kvf_registry *r,
		       const struct kvf_segment_info *info,
		       struct kvf_uuid uuid, struct kvf_uuid client,
		       const char *protocol, size_t protocol_len)
{
	struct kvf_seg_entry *e = seg_find(r, info->id);
	struct client_ent *c;
	uint32_t slot, next, prev;

	/*
	 * The entry of an owner the engine expired (the sweep has not run
	 * yet), now mounted by another client: it leaves the old owner's
	 * list and is entered afresh on the new one's.
	 */
	if (e && e->client != info->client_id) {
		seg_drop(r, (size_t)(e - r->segs));
		e = NULL;
	}
	if (e) {
		/* A refresh: same client (checked by the callers), same
		 * list position; the name is indexed again. */
		slot = (uint32_t)(e - r->segs);
		next = e->cnext;
		prev = e->cprev;
		idx_del(&r->name_idx, e->name_key, slot);
		fill_entry(e, info, uuid, client, protocol, protocol_len);
		e->cnext = next;
		e->cprev = prev;
		idx_add(&r->name_idx, e->name_key, slot);
		return KVF_OK;
	}
	if (grow((void **)&r->segs, &r->cap_segs, r->nsegs + 1,
		 sizeof(*r->segs)) ||
	    idx_reserve(&r->seg_idx) || idx_reserve(&r->name_idx))
		return KVF_ERR_NO_MEMORY;
	c = client_get(r, client, info->client_id);
	if (!c)
		return KVF_ERR_NO_MEMORY;
	slot = (uint32_t)r->nsegs++;
	e = &r->segs[slot];
	fill_entry(e, info, uuid, client, protocol, protocol_len);
	idx_add(&r->seg_idx, e->id, slot);
	idx_add(&r->name_idx, e->name_key, slot);
	seg_link(r, c, slot);
	return KVF_OK;
}

static int parse_line(const char *line, struct kvf_uuid *seg,
		      struct kvf_uuid *cli, char *proto)
{
	unsigned long long a, b, c, d;
	char p[KVF_PROTOCOL_MAX + 2];

	if (sscanf(line, "%16llx %16llx %16llx %16llx %32s", &a, &b, &c, &d,
		   p) != 5 ||
	    (!protocol_ok(p, strlen(p)) && strcmp(p, "-")))
		return KVF_ERR_JOURNAL_CORRUPT;
	*seg = (struct kvf_uuid){a, b};
	*cli = (struct kvf_uuid){c, d};
	strcpy(proto, strcmp(p, "-") ? p : "");
	return KVF_OK;
}

static int load(struct kvf_registry *r)
{
	char line[256], proto[KVF_PROTOCOL_MAX + 2];
	FILE *fp = fopen(r->path, "r");
	int ret = KVF_OK;

	if (!fp)
		return errno == ENOENT ? KVF_OK : KVF_ERR_IO;
	if (!fgets(line, sizeof(line), fp) ||
	    strncmp(line, TABLE_MAGIC "\n", sizeof(TABLE_MAGIC))) {
		fclose(fp);
		return KVF_ERR_JOURNAL_CORRUPT;
	}
	while (!ret && fgets(line, sizeof(line), fp)) {
		struct kvf_segment_info info;
		struct kvf_uuid seg, cli;

		ret = parse_line(line, &seg, &cli, proto);
		if (ret)
			break;
		/* Keep only what the engine recovered, owned as recorded. */
		if (kvf_segment_query(r->engine, kvf_registry_id(seg), &info) ||
		    info.client_id != kvf_registry_id(cli))
			continue;
		ret = add_segment(r, &info, seg, cli, proto, strlen(proto));
	}
	fclose(fp);
	return ret;
}

static char *path_join(const char *dir, const char *name)
{
	char *p;

	return asprintf(&p, "%s/%s", dir, name) < 0 ? NULL : p;
}

int kvf_registry_open(struct kvf_engine *engine, const char *data_dir,
		      uint64_t client_ttl_ms, struct kvf_registry **out)
{
	struct kvf_registry *r = calloc(1, sizeof(*r));
	pthread_rwlockattr_t attr;
	int ret = KVF_ERR_NO_MEMORY;

	if (!r)
		return ret;
	r->engine = engine;
	r->client_ttl_ns = client_ttl_ms * 1000000ULL;
	/* Writers first: a steady stream of batch readers must not starve a
	 * mount. Safe because no reader takes the lock twice. */
	pthread_rwlockattr_init(&attr);
	pthread_rwlockattr_setkind_np(
		&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&r->lock, &attr);
	pthread_rwlockattr_destroy(&attr);
	pthread_mutex_init(&r->persist_lock, NULL);
	if (data_dir) {
		r->dir = strdup(data_dir);
		r->path = path_join(data_dir, TABLE_FILE);
		r->tmp_path = path_join(data_dir, TABLE_FILE ".tmp");
		if (!r->dir || !r->path || !r->tmp_path)
			goto err;
		ret = load(r);
		if (ret)
			goto err;
	}
	*out = r;
	return KVF_OK;
err:
	kvf_registry_close(r);
	return ret;
}

void kvf_registry_close(struct kvf_registry *r)
{
	if (!r)
		return;
	pthread_rwlock_destroy(&r->lock);
	pthread_mutex_destroy(&r->persist_lock);
	free(r->segs);
	free(r->clients);
	idx_free(&r->seg_idx);
	idx_free(&r->name_idx);
	idx_free(&r->cli_idx);
	free(r->path);
	free(r->tmp_path);
	free(r->dir);
	free(r);
}

/* ---- mount / unmount ---------------------------------------------------- */

/* Copy a view into a NUL-terminated buffer of @cap bytes. */
static bool copy_str(char *dst, size_t cap, const char *src, size_t n)
{
	if (n >= cap || memchr(src, 0, n))
		return false;
	memcpy(dst, src, n);
	dst[n] = 0;
	return true;
}

/* A UUID whose id another UUID already holds is a collision. */
static bool collides(struct kvf_registry *r, const struct kvf_seg_view *seg,
		     struct kvf_uuid client)
{
	struct kvf_seg_entry *e = seg_find(r, kvf_registry_id(seg->id));
	struct client_ent *c = client_find(r, kvf_registry_id(client));

	return (e && !uuid_eq(e->uuid, seg->id)) ||
	       (c && !uuid_eq(c->uuid, client));
}

/* One segment of a batch: its strings NUL-terminated for the engine. */
struct mount_item {
	char name[KVF_SEGMENT_NAME_MAX + 1];
	char ep[KVF_ENDPOINT_MAX + 1];
	int ret; /* the registry's refusal, before the engine sees it */
};

/* Why @seg cannot be handed to the engine (KVF_OK: it can). */
static int mount_prepare(struct kvf_registry *r, struct kvf_uuid client,
			 const struct kvf_seg_view *seg, struct mount_item *it,
			 struct kvf_segment_desc *d)
{
	*d = (struct kvf_segment_desc){.id = kvf_registry_id(seg->id),
				       .name = it->name,
				       .base = seg->base,
				       .size = seg->size,
				       .endpoint = it->ep};
	if (!copy_str(it->name, sizeof(it->name), seg->name, seg->name_len) ||
	    !copy_str(it->ep, sizeof(it->ep), seg->te_endpoint,
		      seg->te_endpoint_len) ||
	    !protocol_ok(seg->protocol, seg->protocol_len) ||
	    collides(r, seg, client))
		return KVF_ERR_INVALID_PARAMS;
	return KVF_OK;
}

/*
 * Enter @seg, which the engine answered @ret, into the table (write lock
 * held). Segments are entered in request order, so an id an earlier
 * segment of the request entered under another UUID is a collision, as
 * it was when each segment was mounted on its own.
 */
static int mount_finish(struct kvf_registry *r, struct kvf_uuid client,
			const struct kvf_seg_view *seg, int ret)
{
	uint64_t cid = kvf_registry_id(client), id = kvf_registry_id(seg->id);
	struct kvf_segment_info info;

	if (ret == KVF_ERR_SEGMENT_EXISTS) {
		/* Already there: the same client's retry or remount. */
		if (collides(r, seg, client))
			return KVF_ERR_INVALID_PARAMS;
		if (kvf_segment_query(r->engine, id, &info) ||
		    info.client_id != cid)
			return KVF_ERR_SEGMENT_EXISTS;
		ret = kvf_client_heartbeat(r->engine, cid);
	}
	if (ret)
		return ret;
	ret = kvf_segment_query(r->engine, id, &info);
	if (ret)
		return ret;
	return add_segment(r, &info, seg->id, client, seg->protocol,
			   seg->protocol_len);
}

int kvf_registry_mount_batch(struct kvf_registry *r, struct kvf_uuid client,
			     const struct kvf_seg_view *segs, size_t n)
{
	struct kvf_segment_desc *d = calloc(n ? n : 1, sizeof(*d));
	struct mount_item *it = calloc(n ? n : 1, sizeof(*it));
	enum kvf_status *st = calloc(n ? n : 1, sizeof(*st));
	size_t nd = 0, k = 0;
	int ret = KVF_ERR_NO_MEMORY, one;

	if (!d || !it || !st)
		goto out;
	pthread_rwlock_wrlock(&r->lock);
	/* The engine mounts what passed in one call (one journal append,
	 * one table swap), then each is entered here in order. */
	for (size_t i = 0; i < n; i++) {
		it[i].ret = mount_prepare(r, client, &segs[i], &it[i], &d[nd]);
		nd += !it[i].ret;
	}
	ret = kvf_segment_mount_batch(r->engine, kvf_registry_id(client), d, nd,
				      st);
	if (ret == KVF_ERR_INVALID_ARGUMENT)
		goto unlock;
	/* Every segment is entered; the answer is the first refusal. */
	ret = KVF_OK;
	for (size_t i = 0; i < n; i++) {
		one = it[i].ret ? it[i].ret
				: mount_finish(r, client, &segs[i], st[k++]);
		if (one && !ret)
			ret = one;
	}
unlock:
	pthread_rwlock_unlock(&r->lock);
out:
	free(d);
	free(it);
	free(st);
	return ret;
}

int kvf_registry_persist(struct kvf_registry *r)
{
	struct snapshot snap;
	int ret;

	if (!r->path)
		return KVF_OK;
	pthread_rwlock_wrlock(&r->lock);
	ret = snapshot_take(r, &snap);
	pthread_rwlock_unlock(&r->lock);
	return ret ? ret : snapshot_write(r, &snap);
}

void kvf_registry_set_persist_hook(struct kvf_registry *r,
				   int (*fn)(void *ctx, const char *text,
					     size_t len),
				   void *ctx)
{
	r->hook = fn;
	r->hook_ctx = ctx;
}

int kvf_registry_export(struct kvf_registry *r, char **text, size_t *len)
{
	struct snapshot snap;
	int ret;

	pthread_rwlock_wrlock(&r->lock); /* format_table() counts a snapshot */
	ret = format_table(r, &snap);
	pthread_rwlock_unlock(&r->lock);
	if (!ret) {
		*text = snap.text;
		*len = snap.len;
	}
	return ret;
}

int kvf_registry_store_table(const char *data_dir, const char *text, size_t len)
{
	char line[LINE_MAX_LEN + 2], proto[KVF_PROTOCOL_MAX + 2];
	char *path = NULL, *tmp = NULL;
	size_t off = sizeof(TABLE_MAGIC);
	int ret = KVF_ERR_JOURNAL_CORRUPT;

	/* The whole table is checked before anything is written. */
	if (len < off || memcmp(text, TABLE_MAGIC "\n", off))
		return ret;
	while (off < len) {
		const char *nl = memchr(text + off, '\n', len - off);
		struct kvf_uuid seg, cli;
		size_t n;

		if (!nl || (size_t)(nl - (text + off)) >= sizeof(line))
			return ret;
		n = (size_t)(nl - (text + off));
		memcpy(line, text + off, n);
		line[n] = '\0';
		if (memchr(line, '\0', n) ||
		    parse_line(line, &seg, &cli, proto))
			return ret;
		off += n + 1;
	}
	path = path_join(data_dir, TABLE_FILE);
	tmp = path_join(data_dir, TABLE_FILE ".tmp");
	ret = path && tmp ? write_file(data_dir, path, tmp, text, len)
			  : KVF_ERR_NO_MEMORY;
	free(path);
	free(tmp);
	return ret;
}

int kvf_registry_mount(struct kvf_registry *r, struct kvf_uuid client,
		       const struct kvf_seg_view *seg)
{
	int ret = kvf_registry_mount_batch(r, client, seg, 1);

	return ret ? ret : kvf_registry_persist(r);
}

int kvf_registry_unmount(struct kvf_registry *r, struct kvf_uuid client,
			 struct kvf_uuid segment)
{
	uint64_t sid = kvf_registry_id(segment);
	struct snapshot snap = {0};
	struct kvf_seg_entry *e;
	int ret, ret2 = KVF_OK;

	pthread_rwlock_wrlock(&r->lock);
	ret = kvf_segment_unmount(r->engine, kvf_registry_id(client), sid);
	e = seg_find(r, sid);
	if (e && (ret == KVF_OK || ret == KVF_ERR_SEGMENT_NOT_FOUND)) {
		seg_drop(r, (size_t)(e - r->segs));
		ret2 = snapshot_take(r, &snap);
	}
	pthread_rwlock_unlock(&r->lock);
	if (!ret2)
		ret2 = snapshot_write(r, &snap);
	return ret ? ret : ret2;
}

/* ---- liveness ----------------------------------------------------------- */

void kvf_registry_set_live(struct kvf_registry *r, struct kvf_uuid client)
{
	uint64_t id = kvf_registry_id(client);
	struct client_ent *c;

	pthread_rwlock_wrlock(&r->lock);
	c = client_get(r, client, id);
	if (c && uuid_eq(c->uuid, client)) {
		__atomic_store_n(&c->last_ping_ns, reg_now(r), __ATOMIC_RELAXED);
		if (!__atomic_exchange_n(&c->live, true, __ATOMIC_RELAXED))
			__atomic_fetch_add(&r->live, 1, __ATOMIC_RELAXED);
	}
	pthread_rwlock_unlock(&r->lock);
}

bool kvf_registry_ping(struct kvf_registry *r, struct kvf_uuid client)
{
	uint64_t id = kvf_registry_id(client);
	int hb = kvf_client_heartbeat(r->engine, id);
	struct client_ent *c;
	bool live = false;

	pthread_rwlock_rdlock(&r->lock);
	c = client_find(r, id);
	if (c && uuid_eq(c->uuid, client)) {
		__atomic_store_n(&c->last_ping_ns, reg_now(r), __ATOMIC_RELAXED);
		live = __atomic_load_n(&c->live, __ATOMIC_RELAXED);
		/* The engine expired it (its segments are gone): it must
		 * mount again, as upstream's TTL rule says. */
		if (live && hb == KVF_ERR_CLIENT_NOT_FOUND && c->nsegs) {
			client_unlive(r, c);
			live = false;
		}
	}
	pthread_rwlock_unlock(&r->lock);
	return live;
}

uint64_t kvf_registry_live_clients(struct kvf_registry *r)
{
	return __atomic_load_n(&r->live, __ATOMIC_RELAXED);
}

/*
 * Is anything stale? (shared lock) Segments leave the engine behind the
 * registry's back only when their client expires, and then all of them:
 * so one segment per client is looked up (a query is linear in the
 * engine's table), and only when the engine's expiry count or segment
 * count moved since the last sweep.
 */
static bool client_expired(struct kvf_registry *r, const struct client_ent *c)
{
	struct kvf_segment_info info;

	return c->nsegs &&
	       kvf_segment_query(r->engine, r->segs[c->first_seg].id, &info);
}

static bool sweep_needed(struct kvf_registry *r, uint64_t now,
			 uint64_t *expired)
{
	struct kvf_engine_stats st;
	bool check = true;

	if (!kvf_engine_get_stats(r->engine, &st)) {
		*expired = st.expired_clients;
		check = st.expired_clients !=
				__atomic_load_n(&r->seen_expired,
						__ATOMIC_RELAXED) ||
			st.segments != r->nsegs;
	}
	for (size_t i = 0; i < r->nclients; i++) {
		const struct client_ent *c = &r->clients[i];
		uint64_t seen =
			__atomic_load_n(&c->last_ping_ns, __ATOMIC_RELAXED);

		if (!c->nsegs && seen + r->client_ttl_ns < now)
			return true;
		if (check && client_expired(r, c))
			return true;
	}
	return false;
}

int kvf_registry_sweep(struct kvf_registry *r)
{
	uint64_t now = reg_now(r), expired = 0;
	struct snapshot snap = {0};
	bool changed = false;
	int ret = KVF_OK;

	pthread_rwlock_rdlock(&r->lock);
	changed = sweep_needed(r, now, &expired);
	pthread_rwlock_unlock(&r->lock);
	if (!changed) {
		__atomic_store_n(&r->seen_expired, expired, __ATOMIC_RELAXED);
		return KVF_OK;
	}
	pthread_rwlock_wrlock(&r->lock);
	for (size_t i = 0; i < r->nclients; i++) {
		struct client_ent *c = &r->clients[i];

		if (!client_expired(r, c))
			continue;
		/* The engine expired it: it must remount. */
		client_unlive(r, c);
		while (c->first_seg != NO_SLOT)
			seg_drop(r, c->first_seg);
	}
	/* A client without segments lapses by its own pings. */
	for (size_t i = r->nclients; i-- > 0;) {
		const struct client_ent *c = &r->clients[i];

		if (!c->nsegs && c->last_ping_ns + r->client_ttl_ns < now)
			client_drop(r, i);
	}
	__atomic_store_n(&r->seen_expired, expired, __ATOMIC_RELAXED);
	ret = snapshot_take(r, &snap);
	pthread_rwlock_unlock(&r->lock);
	return ret ? ret : snapshot_write(r, &snap);
}

/* ---- lookups ------------------------------------------------------------ */

void kvf_registry_read_lock(struct kvf_registry *r)
{
	pthread_rwlock_rdlock(&r->lock);
}

void kvf_registry_read_unlock(struct kvf_registry *r)
{
	pthread_rwlock_unlock(&r->lock);
}

const struct kvf_seg_entry *kvf_registry_segment(struct kvf_registry *r,
						 uint64_t id)
{
	return seg_find(r, id);
}

const struct kvf_seg_entry *kvf_registry_segment_by_name(struct kvf_registry *r,
							 const char *name,
							 size_t len)
{
	const struct index *ix = &r->name_idx;
	uint64_t key;

	if (!ix->n || len > KVF_SEGMENT_NAME_MAX)
		return NULL;
	key = name_key(name, len);
	for (size_t i = idx_home(ix, key); ix->keys[i];
	     i = (i + 1) & ix->mask) {
		const struct kvf_seg_entry *e = &r->segs[ix->slots[i]];

		if (ix->keys[i] == key && e->name_len == len &&
		    !memcmp(e->name, name, len))
			return e;
	}
	return NULL;
}

const struct kvf_seg_entry *kvf_registry_segment_by_uuid(struct kvf_registry *r,
							 struct kvf_uuid id)
{
	const struct kvf_seg_entry *e = seg_find(r, kvf_registry_id(id));

	return e && uuid_eq(e->uuid, id) ? e : NULL;
}

size_t
kvf_registry_client_segments(struct kvf_registry *r, struct kvf_uuid client,
			     void (*fn)(const struct kvf_seg_entry *, void *),
			     void *ctx)
{
	const struct client_ent *c = client_find(r, kvf_registry_id(client));
	size_t n = 0;

	if (!c || !uuid_eq(c->uuid, client))
		return 0;
	for (uint32_t i = c->first_seg; i != NO_SLOT; i = r->segs[i].cnext) {
		fn(&r->segs[i], ctx);
		n++;
	}
	return n;
}
