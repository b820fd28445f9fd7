/* SPDX-License-Identifier: MIT */
/*
 * master/registry.h - Mooncake's clients and segments on the engine's ids.
 *
 * Mooncake names clients and segments by 128-bit UUIDs; the engine by
 * non-zero u64s. The map is a fixed hash of the UUID (kvf_registry_id()),
 * so it needs no table to survive a restart; a second UUID hashing to an
 * id already taken is refused at mount (never silently merged).
 *
 * What the engine does not keep, the registry does: each segment's
 * transport protocol ("tcp", "rdma") and UUIDs, the name -> segment map
 * for preferred segments, and which clients are "live" in Mooncake's sense
 * (Ping answers OK only after the client remounted in this process).
 * With a data directory the segment table is persisted after every
 * request that changed it (write to a temporary file, fsync, rename, fsync
 * the directory; outside the lock),
 * so recovered objects are described with their protocol before their
 * owner comes back.
 *
 * Concurrency: one rwlock (writers preferred). Lookups on the hot path
 * take it shared once per request (kvf_registry_read_lock()); mounts and
 * unmounts take it exclusively across their engine call, so the registry
 * and the engine never disagree about a segment; they are rare, and a
 * reader waits for at most one of them (milliseconds: a journal write and
 * an RCU grace period). No thread waits for the lock inside an engine
 * read-side section, so a mount's grace period cannot wait on a reader.
 */
#ifndef KVF_SERVER_REGISTRY_H
#define KVF_SERVER_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <kvforge/engine.h>
#include <kvforge/segment.h>

#include "wire/msg.h" /* struct kvf_uuid */

/** Longest protocol name kept, bytes. */
#define KVF_PROTOCOL_MAX 31

/**
 * struct kvf_seg_view - a segment as described by MountSegment (views
 * into the request; not NUL-terminated).
 */
struct kvf_seg_view {
	struct kvf_uuid id;
	const char *name;
	size_t name_len;
	uint64_t base;
	uint64_t size;
	const char *te_endpoint;
	size_t te_endpoint_len;
	const char *protocol;
	size_t protocol_len;
};

/**
 * struct kvf_seg_entry - what a replica descriptor needs of its segment.
 * Valid while the registry's read lock is held.
 */
struct kvf_seg_entry {
	uint64_t id;
	uint64_t client;
	struct kvf_uuid uuid;
	struct kvf_uuid client_uuid;
	uint64_t base;
	uint64_t size;
	char name[KVF_SEGMENT_NAME_MAX + 1];
	char endpoint[KVF_ENDPOINT_MAX + 1];
	char protocol[KVF_PROTOCOL_MAX + 1];
	size_t name_len;
	size_t endpoint_len;
	size_t protocol_len;
	/* registry-internal: name index key, the owner's list links */
	uint64_t name_key;
	uint32_t cnext, cprev;
};

struct kvf_registry;

/**
 * kvf_registry_id() - the engine id of a Mooncake UUID.
 * Return: a non-zero u64, the same in every process.
 */
uint64_t kvf_registry_id(struct kvf_uuid u);

/**
 * kvf_registry_open() - create the registry of @engine.
 * @engine: the engine (already open, possibly recovered).
 * @data_dir: where the segment table is persisted, or NULL for memory only.
 * @client_ttl_ms: a client without segments stops being live after this
 *	long without Ping (clients with segments follow the engine's TTL).
 * @out: receives the registry.
 *
 * Loads the persisted table, keeping the segments the engine recovered;
 * every client starts not live (its first Ping answers NEED_REMOUNT).
 *
 * Context: main thread, before the workers start; may block (disk I/O).
 * Return: %KVF_OK, %KVF_ERR_NO_MEMORY, %KVF_ERR_IO or
 * %KVF_ERR_JOURNAL_CORRUPT (a damaged table file).
 */
int kvf_registry_open(struct kvf_engine *engine, const char *data_dir,
		      uint64_t client_ttl_ms, struct kvf_registry **out);

/** kvf_registry_close() - free the registry (no other user may remain). */
void kvf_registry_close(struct kvf_registry *reg);

/**
 * kvf_registry_mount() - MountSegment / one segment of ReMountSegment.
 * @reg: the registry.
 * @client: the client's UUID.
 * @seg: the segment.
 *
 * Mounting a segment the same client already has mounted (a retry, or a
 * remount after a restart recovered it) succeeds and refreshes what the
 * registry keeps (protocol, UUIDs); one mounted by another client is
 * refused.
 *
 * Context: any thread; blocks (engine journal, persistence).
 * Return: %KVF_OK, %KVF_ERR_SEGMENT_EXISTS (another client's),
 * %KVF_ERR_INVALID_PARAMS (sizes, strings too long or empty, an id
 * collision), engine or %KVF_ERR_IO errors.
 */
int kvf_registry_mount(struct kvf_registry *reg, struct kvf_uuid client,
		       const struct kvf_seg_view *seg);

/**
 * kvf_registry_mount_batch() - mount @n segments of @client, each as
 * kvf_registry_mount() does, under one hold of the lock, without
 * persisting the table (call kvf_registry_persist() once after the last
 * batch of a request). Every segment is tried; the answer is the first
 * error. The engine mounts the segments that pass the registry's checks
 * in one kvf_segment_mount_batch() (one journal append, one table swap,
 * O(log n) checks per segment); each is then O(1) in the registry, so
 * callers bound @n to keep the hold short (ReMountSegment mounts in
 * slices).
 *
 * Context: any thread; blocks (engine journal). Return: as
 * kvf_registry_mount(), for the first segment that failed.
 */
int kvf_registry_mount_batch(struct kvf_registry *reg, struct kvf_uuid client,
			     const struct kvf_seg_view *segs, size_t n);

/**
 * kvf_registry_persist() - write the segment table now (no-op without a
 * data directory). The table is formatted under the lock and written,
 * synced and renamed into place outside it.
 *
 * Context: any thread; blocks (fsync). Return: %KVF_OK, %KVF_ERR_IO or
 * %KVF_ERR_NO_MEMORY.
 */
int kvf_registry_persist(struct kvf_registry *reg);

/**
 * kvf_registry_set_persist_hook() - call @fn with every table written
 * (@text, @len bytes: the file's content), in the order they are
 * written, before the request that changed it is answered; its non-zero
 * kvf_status is then the persist's error (the file is written). The
 * master replicates the table to its standbys with it. Call before the
 * registry is shared. Context of @fn: the persisting thread, with the
 * persistence mutex held (never the registry's lock); may block.
 */
void kvf_registry_set_persist_hook(struct kvf_registry *reg,
				   int (*fn)(void *ctx, const char *text,
					     size_t len),
				   void *ctx);

/**
 * kvf_registry_export() - the segment table as the file holds it.
 * @reg: the registry. @text: receives a malloc()ed copy (the caller frees
 *	it). @len: its length.
 * Context: any thread; takes the lock exclusively for the formatting.
 * Return: %KVF_OK or %KVF_ERR_NO_MEMORY.
 */
int kvf_registry_export(struct kvf_registry *reg, char **text, size_t *len);

/**
 * kvf_registry_store_table() - write a table another master exported
 * (kvf_registry_export(), a persist hook) into @data_dir, where
 * kvf_registry_open() loads it: a standby keeps its leader's table.
 * @text is checked whole first; a malformed one changes nothing.
 * Context: any thread; blocks (fsync). Return: %KVF_OK,
 * %KVF_ERR_JOURNAL_CORRUPT (malformed), %KVF_ERR_IO, %KVF_ERR_NO_MEMORY.
 */
int kvf_registry_store_table(const char *data_dir, const char *text,
			     size_t len);

/**
 * kvf_registry_set_clock() - the clock for the liveness of clients
 * without segments (last Ping against --client_ttl); NULL: monotonic.
 * Call before the registry is shared. The master passes its serving
 * clock (master/stallclock.h), which stops while the master is stalled.
 */
void kvf_registry_set_clock(struct kvf_registry *reg, kvf_clock_fn clock,
			    void *ctx);

/**
 * kvf_registry_unmount() - withdraw a segment (its replicas disappear).
 * Return: %KVF_OK, %KVF_ERR_SEGMENT_NOT_FOUND, %KVF_ERR_ILLEGAL_CLIENT, or
 * an engine/persistence error.
 * Context: any thread; blocks.
 */
int kvf_registry_unmount(struct kvf_registry *reg, struct kvf_uuid client,
			 struct kvf_uuid segment);

/**
 * kvf_registry_set_live() - mark @client live (after a ReMountSegment).
 * Context: any thread; takes the lock exclusively.
 */
void kvf_registry_set_live(struct kvf_registry *reg, struct kvf_uuid client);

/**
 * kvf_registry_ping() - a heartbeat; tells whether the client is live.
 * @reg: the registry.
 * @client: the client.
 *
 * Refreshes the engine's liveness for the client. A client the engine
 * expired (or never knew) stops being live.
 *
 * Context: any thread; lock-free on the engine side, shared lock here.
 * Return: true if the client is live (Ping answers OK), false if it must
 * remount (NEED_REMOUNT).
 */
bool kvf_registry_ping(struct kvf_registry *reg, struct kvf_uuid client);

/**
 * kvf_registry_sweep() - forget segments the engine no longer has (their
 * client expired) and clients left with no segment that are not live.
 * Context: any thread; takes the lock exclusively when something changed;
 * may block (persistence). Return: %KVF_OK or %KVF_ERR_IO.
 */
int kvf_registry_sweep(struct kvf_registry *reg);

/** kvf_registry_live_clients() - how many clients are live. */
uint64_t kvf_registry_live_clients(struct kvf_registry *reg);

/** kvf_registry_read_lock() / _unlock() - hold for lookups below. */
void kvf_registry_read_lock(struct kvf_registry *reg);
void kvf_registry_read_unlock(struct kvf_registry *reg);

/**
 * kvf_registry_segment() - a segment by engine id (read lock held).
 * Return: the entry, or NULL if the registry does not know it.
 */
const struct kvf_seg_entry *kvf_registry_segment(struct kvf_registry *reg,
						 uint64_t id);

/**
 * kvf_registry_segment_by_name() - a mounted segment by name (read lock
 * held). Return: the entry or NULL.
 */
const struct kvf_seg_entry *
kvf_registry_segment_by_name(struct kvf_registry *reg, const char *name,
			     size_t len);

/**
 * kvf_registry_segment_by_uuid() - a mounted segment by UUID (read lock
 * held). Return: the entry or NULL.
 */
const struct kvf_seg_entry *
kvf_registry_segment_by_uuid(struct kvf_registry *reg, struct kvf_uuid id);

/**
 * kvf_registry_client_segments() - visit @client's segments (read lock
 * held). Return: how many were visited.
 */
size_t
kvf_registry_client_segments(struct kvf_registry *reg, struct kvf_uuid client,
			     void (*fn)(const struct kvf_seg_entry *, void *),
			     void *ctx);

#endif /* KVF_SERVER_REGISTRY_H */
