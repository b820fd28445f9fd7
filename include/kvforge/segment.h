/* SPDX-License-Identifier: MIT */
/*
 * kvforge/segment.h - clients and the memory segments they lend the pool.
 *
 * A client is known from its first segment mount until it is expired
 * (silent for &kvf_config.client_ttl_ms) or unregistered; unmounting its
 * last segment does not forget it. The set of known clients is journaled
 * and survives a reopen (each with a fresh TTL from the open). The engine
 * never touches segment memory: it only hands out (segment, address,
 * size) descriptors inside [base, base + size).
 *
 * Addresses are the owning client's: two segments of one client must not
 * overlap, while segments of different clients may use the same range
 * (they live in different processes or hosts). The rule is the same for
 * every client, at mount and at recovery.
 */
#ifndef KVFORGE_SEGMENT_H
#define KVFORGE_SEGMENT_H

#include <stddef.h>
#include <stdint.h>

#include <kvforge/engine.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Longest segment name and transport endpoint, bytes (NUL excluded). */
#define KVF_SEGMENT_NAME_MAX 127
#define KVF_ENDPOINT_MAX 127

/**
 * struct kvf_segment_desc - a segment to mount.
 * @id: caller-chosen identifier, unique in the engine, non-zero.
 * @name: NUL-terminated, at most %KVF_SEGMENT_NAME_MAX bytes.
 * @base: first address of the segment in the client's address space.
 * @size: bytes; at least 1 MiB and at least &kvf_config.alloc_alignment,
 *        at most 2^48.
 *        A tail past the last multiple of the alignment is never handed
 *        out and counts as neither used nor free.
 * @endpoint: transport endpoint ("host:port" or RDMA GID), may be empty.
 *
 * Stable layout within a major version.
 */
struct kvf_segment_desc {
	uint64_t id;
	const char *name;
	uint64_t base;
	uint64_t size;
	const char *endpoint;
};

/**
 * struct kvf_segment_info - what kvf_segment_query() reports.
 *
 * Growable: later releases only append fields. kvf_segment_query() passes
 * the caller's sizeof; the library fills what both know, zeroes the rest.
 */
struct kvf_segment_info {
	/** Bytes the library filled: the smaller of the caller's and the
	 *  library's sizeof (a field at or past it reads zero). */
	size_t struct_size;
	uint64_t id;
	uint64_t client_id;
	uint64_t base;
	uint64_t size;
	uint64_t used_bytes;
	uint64_t free_bytes;
	uint64_t largest_free;
	char name[KVF_SEGMENT_NAME_MAX + 1];
	char endpoint[KVF_ENDPOINT_MAX + 1];
};

/**
 * kvf_segment_mount() - lend a segment to the pool.
 * @engine: the engine.
 * @client_id: owner; non-zero. An unknown client becomes known.
 * @seg: description; strings are copied.
 *
 * Also counts as a heartbeat of @client_id. Journaled.
 *
 * Context: any thread; may block (journal, RCU grace period).
 * Return: %KVF_OK, %KVF_ERR_INVALID_ARGUMENT (NULL @engine or @seg),
 * %KVF_ERR_SEGMENT_EXISTS (same id mounted), %KVF_ERR_SEGMENT_OVERLAP
 * (overlaps another segment of @client_id), %KVF_ERR_INVALID_PARAMS (size
 * below 1 MiB or below the alignment or above 2^48, base+size overflows,
 * NULL or too long name, endpoint too long, zero ids),
 * %KVF_ERR_NO_MEMORY, a journal error.
 */
enum kvf_status kvf_segment_mount(struct kvf_engine *engine, uint64_t client_id,
				  const struct kvf_segment_desc *seg);

/** Most segments one kvf_segment_mount_batch() call takes. */
#define KVF_SEGMENT_BATCH_MAX (1u << 24)

/**
 * kvf_segment_mount_batch() - lend several segments of one client at once.
 * @engine: the engine.
 * @client_id: owner of every segment; non-zero.
 * @segs: @n descriptions; strings are copied.
 * @n: how many; at most %KVF_SEGMENT_BATCH_MAX.
 * @status: @n per-item answers, filled on every return.
 *
 * Each item is decided as if kvf_segment_mount() were called for the
 * items one after the other, in order, and gets the status that call
 * would return: an item whose id an earlier item of the batch mounted
 * gets %KVF_ERR_SEGMENT_EXISTS, one overlapping an earlier item the batch
 * mounted gets %KVF_ERR_SEGMENT_OVERLAP, and a refused item leaves no
 * trace (a later item may take its id or range). Not all-or-nothing:
 * the items that may be mounted are, as upstream Mooncake's
 * ReMountSegment keeps the segments it mounted before a failing one. All
 * mounted items are journaled in one append and published in one table
 * swap, so a reader sees none or all of them, and a journal error or
 * want of memory fails every item that would have mounted (none is
 * mounted). Counts as a heartbeat of @client_id when an item mounted.
 *
 * Cost: O(n + k log k) for k items with n segments mounted, under the
 * engine's segment lock (one lookup and overlap check per item are
 * binary searches); readers are never blocked.
 *
 * Context: any thread; may block (journal).
 * Return: %KVF_OK when every item mounted; %KVF_ERR_PARTIAL when some
 * were refused (see @status: the codes of kvf_segment_mount());
 * %KVF_ERR_INVALID_ARGUMENT (NULL @engine, or NULL @segs or @status with
 * @n > 0; @status untouched); %KVF_ERR_INVALID_PARAMS (@client_id 0 or
 * @n too large: every item gets it, nothing is mounted);
 * %KVF_ERR_NO_MEMORY (no scratch space: every item gets it, nothing is
 * mounted).
 */
enum kvf_status kvf_segment_mount_batch(struct kvf_engine *engine,
					uint64_t client_id,
					const struct kvf_segment_desc *segs,
					size_t n, enum kvf_status *status);

/**
 * kvf_segment_unmount() - withdraw a segment; drop every replica in it.
 * @engine: the engine.
 * @client_id: the owner that mounted it.
 * @segment_id: the segment.
 *
 * Replicas in the segment disappear from their objects; an object left
 * with no replica is removed (leases notwithstanding: its memory is gone).
 * Readers never see a replica in the segment after this returns.
 *
 * Context: any thread; blocks for RCU grace periods and the journal.
 * Return: %KVF_OK, %KVF_ERR_INVALID_ARGUMENT (NULL @engine),
 * %KVF_ERR_INVALID_PARAMS (@client_id 0), %KVF_ERR_SEGMENT_NOT_FOUND,
 * %KVF_ERR_ILLEGAL_CLIENT (another client owns it), %KVF_ERR_NO_MEMORY,
 * a journal error.
 */
enum kvf_status kvf_segment_unmount(struct kvf_engine *engine,
				    uint64_t client_id, uint64_t segment_id);

/* Smallest struct kvf_segment_info accepted: this release's layout. */
#define KVF_SEGMENT_INFO_SIZE_MIN                                              \
	(offsetof(struct kvf_segment_info, endpoint) + KVF_ENDPOINT_MAX + 1)

/**
 * kvf_segment_query_sized() - what kvf_segment_query() calls.
 * @engine: the engine.
 * @segment_id: the segment.
 * @info: receives @size bytes on success; untouched on failure.
 * @size: sizeof(*@info) as the caller was compiled.
 *
 * Context: any thread; lock-free.
 * Return: %KVF_OK, %KVF_ERR_SEGMENT_NOT_FOUND, %KVF_ERR_INVALID_ARGUMENT
 * (NULL @engine or @info), %KVF_ERR_INVALID_PARAMS (@size below
 * %KVF_SEGMENT_INFO_SIZE_MIN).
 */
enum kvf_status kvf_segment_query_sized(struct kvf_engine *engine,
					uint64_t segment_id,
					struct kvf_segment_info *info,
					size_t size);

/**
 * kvf_segment_query() - describe a mounted segment.
 * @engine: the engine.
 * @segment_id: the segment.
 * @info: filled on success (&kvf_segment_info.struct_size included).
 *
 * Context: any thread; lock-free.
 * Return: %KVF_OK, %KVF_ERR_SEGMENT_NOT_FOUND or %KVF_ERR_INVALID_ARGUMENT.
 */
static inline enum kvf_status kvf_segment_query(struct kvf_engine *engine,
						uint64_t segment_id,
						struct kvf_segment_info *info)
{
	return kvf_segment_query_sized(engine, segment_id, info,
				       sizeof(*info));
}

/**
 * kvf_client_heartbeat() - a client says it is alive.
 * @engine: the engine.
 * @client_id: the client.
 *
 * Context: any thread; lock-free, never blocks.
 * Return: %KVF_OK or %KVF_ERR_CLIENT_NOT_FOUND (never mounted, or expired:
 * the client should mount its segments again).
 */
enum kvf_status kvf_client_heartbeat(struct kvf_engine *engine,
				     uint64_t client_id);

/**
 * kvf_client_register() - make a client known without mounting a segment.
 * @engine: the engine.
 * @client_id: the client (non-zero).
 *
 * A client that lends no memory may still write objects into other
 * clients' segments; put_start requires a known client, so such a client
 * registers first (a known client is only touched, as by a heartbeat). It
 * then lives by its heartbeats and expires after &kvf_config.client_ttl_ms
 * like any client. Not journaled: a client known only this way is unknown
 * after a reopen and registers again (its complete objects survive; puts it
 * left processing never do).
 *
 * Context: any thread; may take the segment lock briefly; never blocks on
 * I/O.
 * Return: %KVF_OK, %KVF_ERR_INVALID_ARGUMENT (NULL engine or client 0),
 * %KVF_ERR_NO_MEMORY.
 */
enum kvf_status kvf_client_register(struct kvf_engine *engine,
				    uint64_t client_id);

/**
 * kvf_client_unregister() - a client leaves: unmount all its segments.
 * @engine: the engine.
 * @client_id: the client.
 *
 * Context: any thread; blocks like kvf_segment_unmount().
 * Return: %KVF_OK, %KVF_ERR_CLIENT_NOT_FOUND, a journal error.
 */
enum kvf_status kvf_client_unregister(struct kvf_engine *engine,
				      uint64_t client_id);

#ifdef __cplusplus
}
#endif
#endif /* KVFORGE_SEGMENT_H */
