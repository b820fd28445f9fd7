/* SPDX-License-Identifier: MIT */
/*
 * http/metastore.c - the transfer engine's metadata key-value store.
 *
 * Design: a chained hash table under one reader-writer lock. The traffic
 * is tiny (a transfer engine writes its segment descriptor and RPC
 * endpoint once at start-up and reads a peer's when it first talks to
 * it), so one lock costs nothing measurable and keeps the invariants
 * obvious: every entry is reachable from exactly one bucket, and the
 * entry count equals the number of reachable entries. The table doubles
 * when the load passes one entry per bucket and never shrinks (the key
 * count of a deployment is bounded by its processes).
 *
 * Values are returned as copies made under the lock, so a concurrent
 * delete can never free bytes a reader is still sending.
 *
 * Replication (kvforge-master --enable_ha): the change hook runs after
 * every put or removal, outside the lock; the leader then exports the
 * whole store (a few KiB per transfer engine) to its standbys, which
 * import it: the new content is built and checked aside, then swapped
 * in under the lock, so a reader sees the old store or the new one.
 */
#include "config.h"

#include "http/metastore.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <kvforge/status.h>

#include "metadata/hash.h"

#define METASTORE_MIN_BUCKETS 64

/*
 * Upstream refuses to overwrite keys containing this marker: they name a
 * transfer engine's RPC endpoint, and a second writer would hijack it.
 */
static const char RPC_META_MARKER[] = "rpc_meta";

struct meta_entry {
	struct meta_entry *next;
	uint64_t hash;
	size_t klen;
	size_t vlen;
	char *val;
	char key[]; /* klen bytes */
};

struct kvf_metastore {
	pthread_rwlock_t lock;
	struct meta_entry **buckets;
	size_t nbuckets; /* power of two */
	size_t count;
	size_t bytes;	  /* keys and values stored */
	size_t max_bytes; /* 0: no limit */
	void (*hook)(void *ctx);
	void *hook_ctx;
};

void kvf__metastore_set_limit(struct kvf_metastore *s, size_t max_bytes)
{
	pthread_rwlock_wrlock(&s->lock);
	s->max_bytes = max_bytes;
	pthread_rwlock_unlock(&s->lock);
}

size_t kvf__metastore_bytes(struct kvf_metastore *s)
{
	size_t n;

	pthread_rwlock_rdlock(&s->lock);
	n = s->bytes;
	pthread_rwlock_unlock(&s->lock);
	return n;
}

/* Would replacing @old bytes by @add keep the store within its limit? */
static bool fits_locked(const struct kvf_metastore *s, size_t old, size_t add)
{
	return !s->max_bytes || s->bytes - old + add <= s->max_bytes;
}

int kvf__metastore_new(struct kvf_metastore **out)
{
	struct kvf_metastore *s = calloc(1, sizeof(*s));

	if (!s)
		return KVF_ERR_NO_MEMORY;
	s->nbuckets = METASTORE_MIN_BUCKETS;
	s->buckets = calloc(s->nbuckets, sizeof(*s->buckets));
	if (!s->buckets)
		goto err_buckets;
	if (pthread_rwlock_init(&s->lock, NULL))
		goto err_lock;
	*out = s;
	return KVF_OK;

err_lock:
	free(s->buckets);
err_buckets:
	free(s);
	return KVF_ERR_NO_MEMORY;
}

void kvf__metastore_free(struct kvf_metastore *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->nbuckets; i++) {
		struct meta_entry *e = s->buckets[i];

		while (e) {
			struct meta_entry *next = e->next;

			free(e->val);
			free(e);
			e = next;
		}
	}
	pthread_rwlock_destroy(&s->lock);
	free(s->buckets);
	free(s);
}

/* The link that points at @key's entry, or at the NULL ending its chain. */
static struct meta_entry **find_link(struct kvf_metastore *s, uint64_t hash,
				     const char *key, size_t klen)
{
	struct meta_entry **link = &s->buckets[hash & (s->nbuckets - 1)];

	for (; *link; link = &(*link)->next) {
		const struct meta_entry *e = *link;

		if (e->hash == hash && e->klen == klen &&
		    memcmp(e->key, key, klen) == 0)
			break;
	}
	return link;
}

/* Double the table; on allocation failure keep the longer chains. */
static void grow_locked(struct kvf_metastore *s)
{
	size_t n = s->nbuckets * 2;
	struct meta_entry **b = calloc(n, sizeof(*b));

	if (!b)
		return;
	for (size_t i = 0; i < s->nbuckets; i++) {
		struct meta_entry *e = s->buckets[i];

		while (e) {
			struct meta_entry *next = e->next;
			struct meta_entry **head = &b[e->hash & (n - 1)];

			e->next = *head;
			*head = e;
			e = next;
		}
	}
	free(s->buckets);
	s->buckets = b;
	s->nbuckets = n;
}

static bool is_rpc_meta_key(const char *key, size_t klen)
{
	return memmem(key, klen, RPC_META_MARKER,
		      sizeof(RPC_META_MARKER) - 1) != NULL;
}

/* A malloc()ed copy of @len bytes, NUL-terminated; NULL on ENOMEM. */
static char *copy_bytes(const char *src, size_t len)
{
	char *p = malloc(len + 1);

	if (!p)
		return NULL;
	memcpy(p, src, len);
	p[len] = '\0';
	return p;
}

int kvf__metastore_get(struct kvf_metastore *s, const char *key, size_t klen,
		       char **val, size_t *vlen)
{
	uint64_t hash = kvf__key_hash(key, klen);
	const struct meta_entry *e;
	int ret = KVF_OK;

	pthread_rwlock_rdlock(&s->lock);
	e = *find_link(s, hash, key, klen);
	if (!e) {
		ret = KVF_ERR_OBJECT_NOT_FOUND;
	} else {
		*val = copy_bytes(e->val, e->vlen);
		*vlen = e->vlen;
		if (!*val)
			ret = KVF_ERR_NO_MEMORY;
	}
	pthread_rwlock_unlock(&s->lock);
	return ret;
}

int kvf__metastore_put(struct kvf_metastore *s, const char *key, size_t klen,
		       const char *val, size_t vlen)
{
	uint64_t hash = kvf__key_hash(key, klen);
	struct meta_entry **link, *e;
	char *copy;
	int ret = KVF_OK;

	if (klen == 0)
		return KVF_ERR_INVALID_KEY;
	/* Allocate outside the lock; a refused put frees it again. */
	copy = copy_bytes(val, vlen);
	if (!copy)
		return KVF_ERR_NO_MEMORY;

	pthread_rwlock_wrlock(&s->lock);
	link = find_link(s, hash, key, klen);
	e = *link;
	if (e && is_rpc_meta_key(key, klen)) {
		ret = KVF_ERR_OBJECT_ALREADY_EXISTS;
		goto out_unlock;
	}
	if (!fits_locked(s, e ? e->klen + e->vlen : 0, klen + vlen)) {
		ret = KVF_ERR_NO_SPACE;
		goto out_unlock;
	}
	if (e) {
		s->bytes += vlen - e->vlen;
		free(e->val);
		e->val = copy;
		e->vlen = vlen;
		copy = NULL;
		goto out_unlock;
	}
	e = malloc(sizeof(*e) + klen);
	if (!e) {
		ret = KVF_ERR_NO_MEMORY;
		goto out_unlock;
	}
	e->hash = hash;
	e->klen = klen;
	memcpy(e->key, key, klen);
	e->val = copy;
	e->vlen = vlen;
	e->next = NULL;
	*link = e;
	copy = NULL;
	s->bytes += klen + vlen;
	if (++s->count > s->nbuckets)
		grow_locked(s);

out_unlock:
	pthread_rwlock_unlock(&s->lock);
	free(copy);
	if (!ret && s->hook)
		s->hook(s->hook_ctx);
	return ret;
}

int kvf__metastore_remove(struct kvf_metastore *s, const char *key, size_t klen)
{
	uint64_t hash = kvf__key_hash(key, klen);
	struct meta_entry **link, *e;

	pthread_rwlock_wrlock(&s->lock);
	link = find_link(s, hash, key, klen);
	e = *link;
	if (e) {
		*link = e->next;
		s->count--;
		s->bytes -= e->klen + e->vlen;
	}
	pthread_rwlock_unlock(&s->lock);
	if (!e)
		return KVF_ERR_OBJECT_NOT_FOUND;
	free(e->val);
	free(e);
	if (s->hook)
		s->hook(s->hook_ctx);
	return KVF_OK;
}

void kvf__metastore_set_hook(struct kvf_metastore *s, void (*fn)(void *ctx),
			     void *ctx)
{
	s->hook = fn;
	s->hook_ctx = ctx;
}

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (24 - 8 * i));
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
}

int kvf__metastore_export(struct kvf_metastore *s, uint8_t **out, size_t *len)
{
	uint8_t *buf, *p;
	size_t n;

	pthread_rwlock_rdlock(&s->lock);
	n = s->bytes + 8 * s->count;
	buf = malloc(n ? n : 1);
	if (!buf) {
		pthread_rwlock_unlock(&s->lock);
		return KVF_ERR_NO_MEMORY;
	}
	p = buf;
	for (size_t i = 0; i < s->nbuckets; i++) {
		for (const struct meta_entry *e = s->buckets[i]; e;
		     e = e->next) {
			put32(p, (uint32_t)e->klen);
			put32(p + 4, (uint32_t)e->vlen);
			memcpy(p + 8, e->key, e->klen);
			memcpy(p + 8 + e->klen, e->val, e->vlen);
			p += 8 + e->klen + e->vlen;
		}
	}
	pthread_rwlock_unlock(&s->lock);
	*out = buf;
	*len = n;
	return KVF_OK;
}

int kvf__metastore_import(struct kvf_metastore *s, const uint8_t *data,
			  size_t len)
{
	struct kvf_metastore *n;
	size_t off = 0;
	int ret = kvf__metastore_new(&n);

	while (!ret && off < len) {
		uint32_t kl, vl;

		if (len - off < 8) {
			ret = KVF_ERR_INVALID_ARGUMENT;
			break;
		}
		kl = get32(data + off);
		vl = get32(data + off + 4);
		off += 8;
		if (len - off < (uint64_t)kl + vl) {
			ret = KVF_ERR_INVALID_ARGUMENT;
			break;
		}
		/* a key twice: a malformed export */
		if (n &&
		    find_link(n, kvf__key_hash((const char *)data + off, kl),
			      (const char *)data + off, kl)[0]) {
			ret = KVF_ERR_INVALID_ARGUMENT;
			break;
		}
		ret = kvf__metastore_put(n, (const char *)data + off, kl,
					 (const char *)data + off + kl, vl);
		if (ret == KVF_ERR_INVALID_KEY)
			ret = KVF_ERR_INVALID_ARGUMENT;
		off += (size_t)kl + vl;
	}
	if (ret) {
		kvf__metastore_free(n);
		return ret;
	}
	/* Swap the contents; the old ones leave with @n. */
	pthread_rwlock_wrlock(&s->lock);
#define SWAP(f)                                                                \
	do {                                                                   \
		__typeof__(s->f) t = s->f;                                     \
		s->f = n->f;                                                   \
		n->f = t;                                                      \
	} while (0)
	SWAP(buckets);
	SWAP(nbuckets);
	SWAP(count);
	SWAP(bytes);
#undef SWAP
	pthread_rwlock_unlock(&s->lock);
	kvf__metastore_free(n);
	return KVF_OK;
}

size_t kvf__metastore_count(struct kvf_metastore *s)
{
	size_t n;

	pthread_rwlock_rdlock(&s->lock);
	n = s->count;
	pthread_rwlock_unlock(&s->lock);
	return n;
}
