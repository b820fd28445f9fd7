/* SPDX-License-Identifier: MIT */
/*
 * ha/etcd.h - a small etcd v3 client over etcd's JSON gateway.
 *
 * The calls kvforge-master's election needs and nothing more: read a key,
 * create a key only if it is absent (bound to a lease), put and delete
 * (tests, tools), grant / renew / inspect / revoke a lease, and wait for
 * the next change of a key or prefix. Each call is one HTTP/1.1 POST to
 * /v3/... of one endpoint (etcd >= 3.4 serves the gateway on its client
 * port); keys and values travel base64-encoded, int64 fields as JSON
 * strings, and absent fields mean 0/false (the gateway omits defaults).
 */
#ifndef KVF_HA_ETCD_H
#define KVF_HA_ETCD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct kvf_etcd;

/**
 * struct kvf_etcd_kv - a key's value and metadata, from kvf_etcd_get().
 * @value: the value, NUL-terminated (malloc'd; kvf_etcd_kv_clear()).
 * @len: its length in bytes (the value may hold NULs).
 * @create_revision: the revision that created the key.
 * @mod_revision: the revision of its last change.
 * @lease: the lease the key is bound to (0: none).
 */
struct kvf_etcd_kv {
	char *value;
	size_t len;
	int64_t create_revision;
	int64_t mod_revision;
	int64_t lease;
};

/**
 * struct kvf_etcd_event - the first change kvf_etcd_watch() saw.
 * @deleted: a DELETE (the key was deleted, or its lease ended); else PUT.
 * @create_revision, @mod_revision, @lease: the key's, after the change
 *	(for a delete, @mod_revision is the deletion's revision).
 */
struct kvf_etcd_event {
	bool deleted;
	int64_t create_revision;
	int64_t mod_revision;
	int64_t lease;
};

/**
 * kvf_etcd_new() - a client for an etcd cluster.
 * @endpoints: one or more "host:port" (or "http://host:port"), separated
 *	by ';' or ',' (spaces around them are ignored), as upstream's
 *	--etcd_endpoints.
 * @timeout_ms: how long one request to one endpoint may take (connect
 *	included) before the next endpoint is tried; 0 means 2000.
 * @out: the client.
 *
 * No connection is made here. A call sends to the endpoint that answered
 * last and, when it cannot be reached, times out or answers that it is
 * unavailable (no etcd leader), tries the others in turn; the first one
 * that answers becomes the preferred one. A client may be used from
 * several threads at once (each call has its own connection).
 *
 * Return: %KVF_OK, %KVF_ERR_INVALID_ARGUMENT (no endpoint, an endpoint
 * without a port or with a scheme other than http), %KVF_ERR_NO_MEMORY.
 */
int kvf_etcd_new(const char *endpoints, unsigned timeout_ms,
		 struct kvf_etcd **out);

/** kvf_etcd_free() - free @e (NULL is ignored); no call may be running. */
void kvf_etcd_free(struct kvf_etcd *e);

/** kvf_etcd_endpoint_count() - how many endpoints @e was given. */
size_t kvf_etcd_endpoint_count(const struct kvf_etcd *e);

/**
 * kvf_etcd_get() - read one key.
 * @e: the client. @key, @klen: the key.
 * @kv: filled when the key exists (release with kvf_etcd_kv_clear()).
 * @found: whether it exists.
 *
 * Context: any thread; blocks for up to the endpoints' timeouts.
 * Return: %KVF_OK, %KVF_ERR_IO (no endpoint answered, or etcd refused),
 * %KVF_ERR_NO_MEMORY.
 */
int kvf_etcd_get(struct kvf_etcd *e, const void *key, size_t klen,
		 struct kvf_etcd_kv *kv, bool *found);

/**
 * kvf_etcd_get_at() - kvf_etcd_get(), and the store's revision the read
 * saw in *@revision (whether or not the key exists; may be NULL): a
 * watch from @revision + 1 misses no later change of the key.
 */
int kvf_etcd_get_at(struct kvf_etcd *e, const void *key, size_t klen,
		    struct kvf_etcd_kv *kv, bool *found, int64_t *revision);

/** kvf_etcd_kv_clear() - free @kv's value and zero it. */
void kvf_etcd_kv_clear(struct kvf_etcd_kv *kv);

/**
 * kvf_etcd_create() - put @key = @value only if @key does not exist, in
 * one transaction (compare CREATE revision == 0, then put).
 * @e: the client. @key, @klen, @value, @vlen: the pair.
 * @lease: the lease to bind the key to (0: none).
 * @created: whether this call created it.
 * @revision: when created, the transaction's revision, which is the
 *	key's create revision (may be NULL).
 *
 * Context: any thread; blocks.
 * Return: %KVF_OK (whether or not created), %KVF_ERR_OBJECT_NOT_FOUND
 * (@lease does not exist: it expired or was revoked), %KVF_ERR_IO,
 * %KVF_ERR_NO_MEMORY.
 */
int kvf_etcd_create(struct kvf_etcd *e, const void *key, size_t klen,
		    const void *value, size_t vlen, int64_t lease,
		    bool *created, int64_t *revision);

/** struct kvf_etcd_key - one key of kvf_etcd_create_all(). */
struct kvf_etcd_key {
	const void *key;
	size_t len;
};

/**
 * kvf_etcd_create_all() - put each of @n keys = @value, bound to @lease,
 * only if none of them exists, in one transaction (one CREATE revision
 * == 0 compare and one put per key): all are created, with the same
 * create revision, or none.
 * @keys, @n: the keys (at least one).
 * Other arguments, context and return: as kvf_etcd_create();
 * %KVF_ERR_INVALID_ARGUMENT when @n is 0.
 */
int kvf_etcd_create_all(struct kvf_etcd *e, const struct kvf_etcd_key *keys,
			size_t n, const void *value, size_t vlen, int64_t lease,
			bool *created, int64_t *revision);

/**
 * kvf_etcd_put() - put @key = @value unconditionally.
 * Return and context: as kvf_etcd_create().
 */
int kvf_etcd_put(struct kvf_etcd *e, const void *key, size_t klen,
		 const void *value, size_t vlen, int64_t lease);

/**
 * kvf_etcd_delete() - delete @key (deleting an absent key succeeds).
 * Return: %KVF_OK, %KVF_ERR_IO, %KVF_ERR_NO_MEMORY.
 */
int kvf_etcd_delete(struct kvf_etcd *e, const void *key, size_t klen);

/**
 * kvf_etcd_lease_grant() - a new lease of @ttl_s seconds.
 * @id: the lease's id.
 * Return: %KVF_OK, %KVF_ERR_INVALID_ARGUMENT (@ttl_s is 0), %KVF_ERR_IO,
 * %KVF_ERR_NO_MEMORY.
 */
int kvf_etcd_lease_grant(struct kvf_etcd *e, unsigned ttl_s, int64_t *id);

/**
 * kvf_etcd_lease_keepalive() - renew lease @id once: its time to live
 * starts again from its TTL, counted from when etcd handles the request.
 * @ttl_s: the TTL etcd granted (may be NULL).
 * Return: %KVF_OK, %KVF_ERR_OBJECT_NOT_FOUND (the lease expired or was
 * revoked), %KVF_ERR_IO, %KVF_ERR_NO_MEMORY.
 */
int kvf_etcd_lease_keepalive(struct kvf_etcd *e, int64_t id, int64_t *ttl_s);

/**
 * kvf_etcd_lease_ttl() - lease @id's remaining time to live.
 * @ttl_s: seconds left (rounded by etcd).
 * Return: %KVF_OK, %KVF_ERR_OBJECT_NOT_FOUND (no such lease any more),
 * %KVF_ERR_IO, %KVF_ERR_NO_MEMORY.
 */
int kvf_etcd_lease_ttl(struct kvf_etcd *e, int64_t id, int64_t *ttl_s);

/**
 * kvf_etcd_lease_revoke() - end lease @id now; etcd deletes every key
 * bound to it. A lease that no longer exists counts as revoked.
 * Return: %KVF_OK, %KVF_ERR_IO, %KVF_ERR_NO_MEMORY.
 */
int kvf_etcd_lease_revoke(struct kvf_etcd *e, int64_t id);

/**
 * kvf_etcd_watch() - wait for the next change of @key (or, with
 * @prefix, of any key starting with @key).
 * @e: the client. @key, @klen: the key or prefix.
 * @start_revision: report changes from this revision on (a change that
 *	happened between a read at revision R and this call is not missed
 *	when R + 1 is given); 0 means from now.
 * @timeout_ms: give up after this long.
 * @ev: the first change, when one came.
 * @fired: whether one came.
 *
 * One watch stream is opened on one endpoint and closed when this
 * returns. A stream that breaks (the endpoint restarted, the gateway
 * cancelled it, e.g. because @start_revision was compacted) returns
 * %KVF_ERR_IO: the caller re-reads the key and watches again, which is
 * how a watcher survives etcd restarts and leader changes.
 *
 * Context: any thread; blocks for up to @timeout_ms.
 * Return: %KVF_OK (with or without a change), %KVF_ERR_IO,
 * %KVF_ERR_NO_MEMORY.
 */
int kvf_etcd_watch(struct kvf_etcd *e, const void *key, size_t klen,
		   bool prefix, int64_t start_revision, unsigned timeout_ms,
		   struct kvf_etcd_event *ev, bool *fired);

#endif /* KVF_HA_ETCD_H */
