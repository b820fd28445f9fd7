// SPDX-License-Identifier: MIT
/*
 * server/registry.c - clients and segments: UUIDs, protocols, liveness.
 *
 * Design notes.
 *
 * Ids: kvf_registry_id() is a 64-bit mix of both UUID halves (never 0).
 * Deterministic, so the engine's recovered segments and clients keep the
 * ids their UUIDs map to; a collision (two live UUIDs, one id) is
 * detected at mount against the registry's tables and refused.
 *
 * Tables: segments and clients live in two arrays; each has an
 * open-addressing index (id -> slot) rebuilt after every change. Changes
 * are mounts, unmounts and expiries (seconds apart), lookups are per
 * batch, so a rebuild is cheaper overall than incremental deletes.
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
 * each change, through a temporary file, fsync, rename and a directory
 * fsync, so a crash leaves the old or the new table, never a torn one.
 * A segment the engine recovered without a table line (a crash between
 * the two writes) is still served: its descriptors fall back to the
 * protocol "tcp" until its owner remounts it.
 */
#include "config.h"

#include "server/registry.h"

#include "base/clock.h"

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

struct client_ent {
	struct kvf_uuid uuid;
	uint64_t id;
	uint64_t last_ping_ns; /* atomic */
	unsigned nsegs;
	bool live; /* atomic */
};

struct index {
	uint64_t *keys; /* 0 = empty */
	uint32_t *slots;
	size_t mask;
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
	struct index seg_idx, cli_idx;
	uint64_t live; /* atomic */
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

static bool uuid_eq(struct kvf_uuid a, struct kvf_uuid b)
{
	return a.first == b.first && a.second == b.second;
}

/* ---- index -------------------------------------------------------------- */

static size_t idx_home(const struct index *ix, uint64_t key)
{
	return (size_t)(key * 0x9e3779b97f4a7c15ULL >> 17) & ix->mask;
}

static long idx_find(const struct index *ix, uint64_t key)
{
	if (!ix->keys)
		return -1;
	for (size_t i = idx_home(ix, key);; i = (i + 1) & ix->mask) {
		if (ix->keys[i] == key)
			return ix->slots[i];
		if (!ix->keys[i])
			return -1;
	}
}

/* Rebuild @ix over @n ids read by @id_of(@base, slot). */
static int idx_rebuild(struct index *ix, size_t n,
		       uint64_t (*id_of)(const void *, size_t),
		       const void *base)
{
	size_t cap = 16;
	uint64_t *keys;
	uint32_t *slots;

	while (cap < 2 * n)
		cap *= 2;
	keys = calloc(cap, sizeof(*keys));
	slots = calloc(cap, sizeof(*slots));
	if (!keys || !slots) {
		free(keys);
		free(slots);
		return KVF_ERR_NO_MEMORY;
	}
	free(ix->keys);
	free(ix->slots);
	ix->keys = keys;
	ix->slots = slots;
	ix->mask = cap - 1;
	for (size_t s = 0; s < n; s++) {
		uint64_t key = id_of(base, s);
		size_t i = idx_home(ix, key);

		while (keys[i])
			i = (i + 1) & ix->mask;
		keys[i] = key;
		slots[i] = (uint32_t)s;
	}
	return KVF_OK;
}

static uint64_t seg_id_of(const void *base, size_t s)
{
	return ((const struct kvf_seg_entry *)base)[s].id;
}

static uint64_t cli_id_of(const void *base, size_t s)
{
	return ((const struct client_ent *)base)[s].id;
}

static int reindex(struct kvf_registry *r)
{
	int ret = idx_rebuild(&r->seg_idx, r->nsegs, seg_id_of, r->segs);

	return ret ? ret
		   : idx_rebuild(&r->cli_idx, r->nclients, cli_id_of,
				 r->clients);
}

static int grow(void **arr, size_t *cap, size_t need, size_t size)
{
	size_t ncap = *cap ? *cap * 2 : 16;
	void *p;

	if (need <= *cap)
		return KVF_OK;
	while (ncap < need)
		ncap *= 2;
	p = realloc(*arr, ncap * size);
	if (!p)
		return KVF_ERR_NO_MEMORY;
	*arr = p;
	*cap = ncap;
	return KVF_OK;
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

/* Find or add @uuid's client entry (exclusive lock, index rebuilt by the
 * caller). NULL on allocation failure. */
static struct client_ent *client_get(struct kvf_registry *r,
				     struct kvf_uuid uuid, uint64_t id)
{
	for (size_t i = 0; i < r->nclients; i++)
		if (r->clients[i].id == id)
			return &r->clients[i];
	if (grow((void **)&r->clients, &r->cap_clients, r->nclients + 1,
		 sizeof(*r->clients)))
		return NULL;
	r->clients[r->nclients] = (struct client_ent){
		.uuid = uuid, .id = id, .last_ping_ns = kvf__now_ns()};
	return &r->clients[r->nclients++];
}

static void client_unlive(struct kvf_registry *r, struct client_ent *c)
{
	if (__atomic_exchange_n(&c->live, false, __ATOMIC_RELAXED))
		__atomic_fetch_sub(&r->live, 1, __ATOMIC_RELAXED);
}

static void client_drop(struct kvf_registry *r, size_t i)
{
	client_unlive(r, &r->clients[i]);
	r->clients[i] = r->clients[--r->nclients];
}

static void seg_drop(struct kvf_registry *r, size_t i)
{
	struct client_ent *c = client_find(r, r->segs[i].client);

	if (c && c->nsegs)
		c->nsegs--;
	r->segs[i] = r->segs[--r->nsegs];
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

static int persist(struct kvf_registry *r)
{
	FILE *fp;
	int bad;

	if (!r->path)
		return KVF_OK;
	fp = fopen(r->tmp_path, "w");
	if (!fp)
		return KVF_ERR_IO;
	bad = fprintf(fp, "%s\n", TABLE_MAGIC) < 0;
	for (size_t i = 0; i < r->nsegs && !bad; i++) {
		const struct kvf_seg_entry *s = &r->segs[i];

		bad = fprintf(fp, "%016llx %016llx %016llx %016llx %s\n",
			      (unsigned long long)s->uuid.first,
			      (unsigned long long)s->uuid.second,
			      (unsigned long long)s->client_uuid.first,
			      (unsigned long long)s->client_uuid.second,
			      s->protocol_len ? s->protocol : "-") < 0;
	}
	bad |= fflush(fp) != 0 || fsync(fileno(fp)) != 0;
	bad |= fclose(fp) != 0;
	if (bad || rename(r->tmp_path, r->path) ||
	    fsync_path(r->dir, O_RDONLY | O_DIRECTORY)) {
		unlink(r->tmp_path);
		return KVF_ERR_IO;
	}
	return KVF_OK;
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
}

/* Add (or refresh) the entry of a segment the engine has (exclusive). */
static int add_segment(struct kvf_registry *r,
		       const struct kvf_segment_info *info,
		       struct kvf_uuid uuid, struct kvf_uuid client,
		       const char *protocol, size_t protocol_len)
{
	struct kvf_seg_entry *e = seg_find(r, info->id);
	struct client_ent *c;

	if (!e) {
		if (grow((void **)&r->segs, &r->cap_segs, r->nsegs + 1,
			 sizeof(*r->segs)))
			return KVF_ERR_NO_MEMORY;
		c = client_get(r, client, info->client_id);
		if (!c)
			return KVF_ERR_NO_MEMORY;
		c->nsegs++;
		e = &r->segs[r->nsegs++];
	}
	fill_entry(e, info, uuid, client, protocol, protocol_len);
	return reindex(r);
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
	ret = reindex(r);
	if (ret)
		goto err;
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
	free(r->segs);
	free(r->clients);
	free(r->seg_idx.keys);
	free(r->seg_idx.slots);
	free(r->cli_idx.keys);
	free(r->cli_idx.slots);
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

static int mount_locked(struct kvf_registry *r, struct kvf_uuid client,
			const struct kvf_seg_view *seg)
{
	char name[KVF_SEGMENT_NAME_MAX + 1], ep[KVF_ENDPOINT_MAX + 1];
	uint64_t cid = kvf_registry_id(client);
	struct kvf_segment_desc d = {.id = kvf_registry_id(seg->id),
				     .name = name,
				     .base = seg->base,
				     .size = seg->size,
				     .endpoint = ep};
	struct kvf_segment_info info;
	int ret;

	if (!copy_str(name, sizeof(name), seg->name, seg->name_len) ||
	    !copy_str(ep, sizeof(ep), seg->te_endpoint, seg->te_endpoint_len) ||
	    !protocol_ok(seg->protocol, seg->protocol_len) ||
	    collides(r, seg, client))
		return KVF_ERR_INVALID_PARAMS;
	ret = kvf_segment_mount(r->engine, cid, &d);
	if (ret == KVF_ERR_SEGMENT_EXISTS) {
		/* Already there: the same client's retry or remount. */
		if (kvf_segment_query(r->engine, d.id, &info) ||
		    info.client_id != cid)
			return KVF_ERR_SEGMENT_EXISTS;
		ret = kvf_client_heartbeat(r->engine, cid);
	}
	if (ret)
		return ret;
	ret = kvf_segment_query(r->engine, d.id, &info);
	if (ret)
		return ret;
	ret = add_segment(r, &info, seg->id, client, seg->protocol,
			  seg->protocol_len);
	return ret ? ret : persist(r);
}

int kvf_registry_mount(struct kvf_registry *r, struct kvf_uuid client,
		       const struct kvf_seg_view *seg)
{
	int ret;

	pthread_rwlock_wrlock(&r->lock);
	ret = mount_locked(r, client, seg);
	pthread_rwlock_unlock(&r->lock);
	return ret;
}

int kvf_registry_unmount(struct kvf_registry *r, struct kvf_uuid client,
			 struct kvf_uuid segment)
{
	uint64_t sid = kvf_registry_id(segment);
	struct kvf_seg_entry *e;
	int ret;

	pthread_rwlock_wrlock(&r->lock);
	ret = kvf_segment_unmount(r->engine, kvf_registry_id(client), sid);
	e = seg_find(r, sid);
	if (e && (ret == KVF_OK || ret == KVF_ERR_SEGMENT_NOT_FOUND)) {
		seg_drop(r, (size_t)(e - r->segs));
		int ret2 = reindex(r);

		if (!ret2)
			ret2 = persist(r);
		if (!ret)
			ret = ret2;
	}
	pthread_rwlock_unlock(&r->lock);
	return ret;
}

/* ---- liveness ----------------------------------------------------------- */

void kvf_registry_set_live(struct kvf_registry *r, struct kvf_uuid client)
{
	uint64_t id = kvf_registry_id(client);
	struct client_ent *c;

	pthread_rwlock_wrlock(&r->lock);
	c = client_find(r, id);
	if (!c) {
		c = client_get(r, client, id);
		if (c && reindex(r))
			c = NULL;
	}
	if (c && uuid_eq(c->uuid, client)) {
		__atomic_store_n(&c->last_ping_ns, kvf__now_ns(), __ATOMIC_RELAXED);
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
		__atomic_store_n(&c->last_ping_ns, kvf__now_ns(), __ATOMIC_RELAXED);
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

/* Is anything stale? (shared lock) */
static bool sweep_needed(struct kvf_registry *r, uint64_t now)
{
	struct kvf_segment_info info;

	for (size_t i = 0; i < r->nsegs; i++)
		if (kvf_segment_query(r->engine, r->segs[i].id, &info))
			return true;
	for (size_t i = 0; i < r->nclients; i++) {
		const struct client_ent *c = &r->clients[i];
		uint64_t seen =
			__atomic_load_n(&c->last_ping_ns, __ATOMIC_RELAXED);

		if (!c->nsegs && seen + r->client_ttl_ns < now)
			return true;
	}
	return false;
}

int kvf_registry_sweep(struct kvf_registry *r)
{
	struct kvf_segment_info info;
	uint64_t now = kvf__now_ns();
	bool changed = false;
	int ret = KVF_OK;

	pthread_rwlock_rdlock(&r->lock);
	changed = sweep_needed(r, now);
	pthread_rwlock_unlock(&r->lock);
	if (!changed)
		return KVF_OK;
	pthread_rwlock_wrlock(&r->lock);
	for (size_t i = r->nsegs; i-- > 0;) {
		struct client_ent *c;

		if (!kvf_segment_query(r->engine, r->segs[i].id, &info))
			continue;
		/* The engine expired the owner: it must remount. */
		c = client_find(r, r->segs[i].client);
		if (c)
			client_unlive(r, c);
		seg_drop(r, i);
	}
	/* A client without segments lapses by its own pings. */
	for (size_t i = r->nclients; i-- > 0;) {
		const struct client_ent *c = &r->clients[i];

		if (!c->nsegs && c->last_ping_ns + r->client_ttl_ns < now)
			client_drop(r, i);
	}
	ret = reindex(r);
	if (!ret)
		ret = persist(r);
	pthread_rwlock_unlock(&r->lock);
	return ret;
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
	for (size_t i = 0; i < r->nsegs; i++)
		if (r->segs[i].name_len == len &&
		    !memcmp(r->segs[i].name, name, len))
			return &r->segs[i];
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
	size_t n = 0;

	for (size_t i = 0; i < r->nsegs; i++)
		if (uuid_eq(r->segs[i].client_uuid, client)) {
			fn(&r->segs[i], ctx);
			n++;
		}
	return n;
}
