/* SPDX-License-Identifier: MIT */
/*
 * http/metastore.h - the transfer engine's metadata key-value store.
 *
 * The store behind the HTTP metadata service (http/http.c serves it as
 * GET/PUT/DELETE /metadata?key=K). Keys and values are byte strings of
 * any content (a key may hold any byte once URL-decoded). One rule beyond
 * a plain map, kept from upstream: a key containing "rpc_meta" may be
 * written only once, so two transfer engines cannot claim the same RPC
 * endpoint name; it can be written again after it is deleted.
 */
#ifndef KVF_SERVER_METASTORE_H
#define KVF_SERVER_METASTORE_H

#include <stddef.h>
#include <stdint.h>

struct kvf_metastore;

/**
 * kvf__metastore_new() - create an empty store.
 * @out: receives the store; untouched on failure.
 *
 * Return: %KVF_OK or %KVF_ERR_NO_MEMORY.
 */
int kvf__metastore_new(struct kvf_metastore **out);

/**
 * kvf__metastore_free() - release a store and every entry.
 * @s: the store, or NULL. No other thread may use it any more.
 */
void kvf__metastore_free(struct kvf_metastore *s);

/**
 * kvf__metastore_get() - copy the value of a key.
 * @s: the store.
 * @key: the key, @klen bytes.
 * @klen: its length.
 * @val: receives a malloc()ed copy (NUL-terminated for convenience) that
 *	the caller frees.
 * @vlen: receives the value's length.
 *
 * Context: any thread; takes the store's lock shared.
 * Return: %KVF_OK, %KVF_ERR_OBJECT_NOT_FOUND or %KVF_ERR_NO_MEMORY.
 */
int kvf__metastore_get(struct kvf_metastore *s, const char *key, size_t klen,
		       char **val, size_t *vlen);

/**
 * kvf__metastore_put() - store a value, replacing any previous one.
 * @s: the store.
 * @key: the key, @klen bytes.
 * @klen: its length (at least 1).
 * @val: the value, @vlen bytes; copied.
 * @vlen: its length (may be 0).
 *
 * Context: any thread; takes the store's lock exclusive.
 * Return: %KVF_OK, %KVF_ERR_OBJECT_ALREADY_EXISTS (an "rpc_meta" key that
 * already exists; nothing changes), %KVF_ERR_INVALID_KEY (empty key),
 * %KVF_ERR_NO_SPACE (the store would exceed its limit,
 * kvf__metastore_set_limit(); nothing changes) or %KVF_ERR_NO_MEMORY
 * (nothing changes).
 */
int kvf__metastore_put(struct kvf_metastore *s, const char *key, size_t klen,
		       const char *val, size_t vlen);

/**
 * kvf__metastore_set_limit() - bound the bytes of keys plus values the
 * store holds (0: no bound, the default). Entries already stored stay.
 * Context: any thread; takes the store's lock exclusive.
 */
void kvf__metastore_set_limit(struct kvf_metastore *s, size_t max_bytes);

/**
 * kvf__metastore_bytes() - bytes of keys plus values stored.
 * Context: any thread; takes the store's lock shared.
 */
size_t kvf__metastore_bytes(struct kvf_metastore *s);

/**
 * kvf__metastore_remove() - delete a key.
 * @s: the store.
 * @key: the key, @klen bytes.
 * @klen: its length.
 *
 * Context: any thread; takes the store's lock exclusive.
 * Return: %KVF_OK or %KVF_ERR_OBJECT_NOT_FOUND.
 */
int kvf__metastore_remove(struct kvf_metastore *s, const char *key,
			  size_t klen);

/**
 * kvf__metastore_count() - number of keys stored.
 * @s: the store.
 *
 * Context: any thread; takes the store's lock shared.
 */
size_t kvf__metastore_count(struct kvf_metastore *s);

/**
 * kvf__metastore_set_hook() - call @fn(@ctx) after every put or removal
 * that changed the store (not after an import), outside the store's
 * lock, on the thread that made the change. Set before the store is
 * shared. kvforge-master replicates the store to its standbys with it.
 */
void kvf__metastore_set_hook(struct kvf_metastore *s, void (*fn)(void *ctx),
			     void *ctx);

/**
 * kvf__metastore_export() - the whole store as bytes: for each entry a
 * 4-byte key length, a 4-byte value length (big endian), the key, the
 * value.
 * @s: the store. @out: receives a malloc()ed buffer the caller frees.
 * @len: its length.
 * Context: any thread; takes the store's lock shared.
 * Return: %KVF_OK or %KVF_ERR_NO_MEMORY.
 */
int kvf__metastore_export(struct kvf_metastore *s, uint8_t **out, size_t *len);

/**
 * kvf__metastore_import() - replace the whole content of @s by an export
 * (kvf__metastore_export(), possibly of another master's store). The
 * new content is checked and built first: a malformed export (truncated,
 * an empty or repeated key) changes nothing. The limit is not applied
 * (the exporting store applied its own). The hook is not called.
 * Context: any thread; takes the store's lock exclusive for the swap.
 * Return: %KVF_OK, %KVF_ERR_INVALID_ARGUMENT or %KVF_ERR_NO_MEMORY.
 */
int kvf__metastore_import(struct kvf_metastore *s, const uint8_t *data,
			  size_t len);

#endif /* KVF_SERVER_METASTORE_H */
