/* SPDX-License-Identifier: MIT */
/*
 * wire/msg.h - typed decode/encode of the Mooncake master's messages:
 * requests the master receives (decode; encode for clients) and responses
 * it sends (encode; decode for clients and tests), for one struct kvf_abi.
 *
 * Decoding is one pass with no allocation: strings are views into the
 * body (which must outlive the decoded struct), a batch's keys land in the
 * caller's struct kvf_key array (struct kvf_msg_items), and rarer vectors
 * (segments, UUIDs, preferred segment names) are validated during the pass
 * and left as views (struct kvf_msg_view) to iterate afterwards.
 *
 * Encoding appends the body to a caller-owned struct kvf_wbuf in the short
 * (NDEBUG) form with the container length width upstream would choose, so
 * deterministic answers are byte-identical to a release-built upstream
 * master. The caller frames it (wire/frame.h). Errors of the buffer show
 * in wbuf->failed.
 *
 * Error codes in responses are Mooncake ErrorCode values (int32, 0 = OK,
 * e.g. -704 OBJECT_NOT_FOUND, -1012 NOT_SUPPORTED); the server maps
 * engine statuses onto them.
 *
 * Contract notes (additive changes only; tell the server engineer in this
 * comment when something is added):
 * - kvf_msg_req_decode() handles every registered RPC: the core set gets
 *   typed fields (see struct kvf_msg_req), the others are validated against
 *   their type literal only (so they can be answered NOT_SUPPORTED, or
 *   invalid_rpc_arguments when the body is bad, as upstream).
 * - kvf_msg_enc_error() answers any RPC with an ErrorCode in its own shape.
 * - Added: kvf_msg_req_use_arrays() (a decoded request's views to the
 *   arrays the encoder reads); struct kvf_msg_resp's @map also carries
 *   the value of untyped answers, whose ErrorCode now lands in @code.
 * - The codec links as libkvforge-wire.la (wire/local.mk), which
 *   libkvforge-master.la pulls in; tools and tests may link it alone.
 */
#ifndef KVF_SERVER_MSG_H
#define KVF_SERVER_MSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <kvforge/batch.h>

#include "wire/abi.h"
#include "wire/spack.h"

/* Mooncake ErrorCode values the codec itself refers to. */
#define KVF_MC_OK 0
#define KVF_MC_INVALID_PARAMS (-600)
#define KVF_MC_NOT_SUPPORTED (-1012)

/* Mooncake's ClientStatus (PingResponse) and SoftPinAction values. */
enum kvf_mc_client_status {
	KVF_MC_CLIENT_UNDEFINED = 0,
	KVF_MC_CLIENT_OK = 1,
	KVF_MC_CLIENT_NEED_REMOUNT = 2,
};

enum kvf_mc_soft_pin_action {
	KVF_MC_SOFT_PIN_PRESERVE = 0,
	KVF_MC_SOFT_PIN_ENABLE = 1,
	KVF_MC_SOFT_PIN_DISABLE = 2,
};

/* Replica::Descriptor variant alternatives and ReplicaStatus values. */
enum kvf_mc_desc_kind {
	KVF_MC_DESC_MEMORY = 0,
	KVF_MC_DESC_NOF = 1,
	KVF_MC_DESC_DISK = 2,
	KVF_MC_DESC_LOCAL_DISK = 3,
	KVF_MC_DESC_DFS = 4,
};

enum kvf_mc_replica_status {
	KVF_MC_REPLICA_UNDEFINED = 0,
	KVF_MC_REPLICA_INITIALIZED = 1,
	KVF_MC_REPLICA_PROCESSING = 2,
	KVF_MC_REPLICA_COMPLETE = 3,
	KVF_MC_REPLICA_REMOVED = 4,
	KVF_MC_REPLICA_FAILED = 5,
};

/** struct kvf_uuid - Mooncake's UUID (std::pair<u64, u64>). */
struct kvf_uuid {
	uint64_t first;
	uint64_t second;
};

/** struct kvf_str - a string view (not NUL-terminated). */
struct kvf_str {
	const char *data;
	size_t len;
};

/**
 * struct kvf_msg_view - a validated vector inside a decoded message, read
 * with the kvf_msg_view_*() iterator of its element type. Copy it to
 * iterate again.
 */
struct kvf_msg_view {
	const uint8_t *at;
	const uint8_t *end;
	uint64_t n;
	uint8_t width;
};

/** struct kvf_msg_segment - Mooncake's Segment. */
struct kvf_msg_segment {
	struct kvf_uuid id;
	struct kvf_str name;
	uint64_t base;
	uint64_t size;
	struct kvf_str te_endpoint;
	struct kvf_str protocol;
	struct kvf_str host_id;
};

/**
 * struct kvf_msg_replicate_config - ReplicateConfig, both layouts. With the
 * older layout @with_soft_pin is the wire value and @soft_pin_action is
 * derived (ENABLE / PRESERVE); with the newer one the reverse. @*_view are
 * vectors of strings (kvf_msg_view_str()).
 */
struct kvf_msg_replicate_config {
	uint64_t replica_num;
	uint64_t nof_replica_num;
	uint64_t dfs_replica_num;
	uint8_t soft_pin_action;
	bool with_soft_pin;
	bool has_soft_pin_ttl;
	uint64_t soft_pin_ttl_ms;
	bool with_hard_pin;
	struct kvf_msg_view preferred_segments;
	struct kvf_str preferred_segment;
	struct kvf_msg_view preferred_nof_segments;
	bool prefer_alloc_in_same_node;
	uint8_t data_type;
	struct kvf_str host_id;
	bool has_group_ids;
	struct kvf_msg_view group_ids;
};

/**
 * struct kvf_msg_items - the caller's per-item arrays for a batch request,
 * @cap entries each. @keys receives the keys (views into the body); @vals
 * the u64 column of the batch when there is one (BatchPutStart's sizes,
 * BatchPutEnd's checksums) and @has_val whether each is present (checksums
 * are optional; NULL allowed when not needed). A batch with more than @cap
 * items fails with %KVF_WIRE_ERR_TOO_MANY.
 */
struct kvf_msg_items {
	struct kvf_key *keys;
	uint64_t *vals;
	uint8_t *has_val;
	size_t cap;
};

/**
 * struct kvf_msg_req - a decoded request; which fields are meaningful
 * depends on @rpc (the rest are zero):
 *
 * - Ping, PollRemoveAll, PromotionObjectHeartbeat, UnmountLocalDiskSegment,
 *   QueryTask: @client_id. QuerySegmentStatusById: @segment_id.
 * - MountSegment: @segment, @client_id. ReMountSegment: @segments (view of
 *   Segment, kvf_msg_view_segment()), @client_id.
 * - UnmountSegment: @segment_id, @client_id; GracefulUnmountSegment also
 *   @u64 = grace_ms.
 * - QuerySegmentStatus: @key = the segment name.
 * - ExistKey, GetReplicaList, GetReplicaListByRegex (@key = the regex):
 *   @key, @tenant. BatchExistKey, BatchGetReplicaList: @nkeys keys in
 *   items->keys, @tenant.
 * - PutStart/UpsertStart: @client_id, @key, @u64 = total length, @config,
 *   @tenant. BatchPutStart/BatchUpsertStart: @client_id, keys, @nvals sizes
 *   in items->vals (the server checks @nvals == @nkeys), @config, @tenant.
 * - PutEnd/UpsertEnd: @client_id, @key, @has_checksum/@checksum (ABIs with
 *   ObjectMeta), @replica_type, @tenant. BatchPutEnd: @client_id, keys,
 *   checksums in items->vals/has_val, @replica_type, @tenant;
 *   BatchUpsertEnd the same without @replica_type.
 * - PutRevoke/UpsertRevoke: @client_id, @key, @replica_type, @tenant.
 *   BatchPutRevoke: @client_id, keys, @replica_type, @tenant;
 *   BatchUpsertRevoke without @replica_type.
 * - Remove, RemoveByRegex (@key = regex): @key, @force, @tenant.
 *   BatchRemove: keys, @force, @tenant. RemoveAll: @force, @tenant.
 * - BatchQueryIp: @uuids (view, kvf_msg_view_uuid()).
 * - FetchTasks: @client_id, @u64 = batch size.
 * - ServiceReady, GetStorageConfig, GetFsdir: nothing.
 * - Every other RPC: nothing (@typed false: the body was only validated).
 *
 * For encoding (clients), @segment_array/@nsegments replace @segments and
 * @uuid_array/@nuuids replace @uuids; keys come from @keys/@nkeys.
 */
struct kvf_msg_req {
	enum kvf_rpc rpc;
	bool typed;
	struct kvf_uuid client_id;
	struct kvf_uuid segment_id;
	struct kvf_str key;
	struct kvf_str tenant;
	struct kvf_key *keys;
	size_t nkeys;
	uint64_t *vals;
	uint8_t *has_val;
	size_t nvals;
	uint64_t u64;
	bool has_checksum;
	uint64_t checksum;
	int32_t replica_type;
	bool force;
	struct kvf_msg_replicate_config config;
	struct kvf_msg_segment segment;
	struct kvf_msg_view segments;
	struct kvf_msg_view uuids;
	const struct kvf_msg_segment *segment_array;
	size_t nsegments;
	const struct kvf_uuid *uuid_array;
	size_t nuuids;
};

/**
 * kvf_msg_req_decode() - decode a request body.
 * @abi: the revision. @rpc: from kvf_abi_rpc_of(). @body, @len: the body
 * (the views in @out point into it). @items: arrays for batch keys (may be
 * NULL for non-batch RPCs). @out: the result.
 * @found_hash: if not NULL, the type hash read from the body (for logging
 * a %KVF_WIRE_ERR_HASH).
 *
 * Return: 0, or a negative enum kvf_wire_status (the server answers
 * invalid_rpc_arguments and changes nothing).
 */
int kvf_msg_req_decode(const struct kvf_abi *abi, enum kvf_rpc rpc,
		       const void *body, size_t len,
		       const struct kvf_msg_items *items,
		       struct kvf_msg_req *out, uint32_t *found_hash);

/**
 * kvf_msg_req_encode() - append the body of request @req (its @rpc) to
 * @w. Supported for the RPCs with typed fields; others return
 * %KVF_WIRE_ERR_UNSUPPORTED. Return: 0 or a negative kvf_wire_status.
 */
int kvf_msg_req_encode(struct kvf_wbuf *w, const struct kvf_abi *abi,
		       const struct kvf_msg_req *req);

/**
 * kvf_msg_req_use_arrays() - copy a decoded request's segment and UUID
 * views into @segs / @uuids (@cap entries each) and point the encode-side
 * fields at them, so the request can be encoded again (proxies, tests).
 * Return: false if a view held more than @cap elements (the rest dropped).
 */
bool kvf_msg_req_use_arrays(struct kvf_msg_req *q, struct kvf_msg_segment *segs,
			    struct kvf_uuid *uuids, size_t cap);

/* Iterators over views (return false at the end). */
bool kvf_msg_view_str(struct kvf_msg_view *v, struct kvf_str *out);
bool kvf_msg_view_uuid(struct kvf_msg_view *v, struct kvf_uuid *out);
bool kvf_msg_view_segment(struct kvf_msg_view *v, struct kvf_msg_segment *out);

/**
 * struct kvf_msg_desc - a Replica::Descriptor. @kind selects the fields:
 * MEMORY/NOF: @size, @addr (buffer_address_), @protocol, @endpoint;
 * DISK: @path, @size; LOCAL_DISK: @client_id, @size, @endpoint;
 * DFS: @path, @offset, @size, @aligned_size, @shard_idx. Decoding sets
 * only the fields of the decoded kind.
 */
struct kvf_msg_desc {
	uint64_t id;
	uint8_t kind;	/* enum kvf_mc_desc_kind */
	int32_t status; /* enum kvf_mc_replica_status */
	uint64_t size;
	uint64_t addr;
	struct kvf_str protocol;
	struct kvf_str endpoint;
	struct kvf_str path;
	struct kvf_uuid client_id;
	uint64_t offset;
	uint64_t aligned_size;
	int32_t shard_idx;
};

/**
 * struct kvf_msg_replicas - one item's answer: PutStart's replicas, or a
 * GetReplicaListResponse (@lease_ttl_ms, @has_checksum/@checksum; the
 * checksum is written only by ABIs that carry it). @code != 0 makes the
 * item an error (the other fields are ignored).
 */
struct kvf_msg_replicas {
	int32_t code;
	const struct kvf_msg_desc *descs;
	size_t n;
	uint64_t lease_ttl_ms;
	bool has_checksum;
	uint64_t checksum;
};

/** struct kvf_msg_storage_config - GetStorageConfigResponse. */
struct kvf_msg_storage_config {
	struct kvf_str fsdir;
	bool enable_disk_eviction;
	uint64_t quota_bytes;
};

/** struct kvf_msg_key_replicas - one entry of GetReplicaListByRegex. */
struct kvf_msg_key_replicas {
	struct kvf_str key;
	const struct kvf_msg_desc *descs;
	size_t n;
};

/** struct kvf_msg_client_ips - one entry of BatchQueryIp's map. */
struct kvf_msg_client_ips {
	struct kvf_uuid client_id;
	const struct kvf_str *ips;
	size_t n;
};

/*
 * Response encoders: each appends one body for @rpc (which fixes the type
 * hash) of @abi to @w. Per-item @codes are ErrorCodes (0 = success).
 */

/**
 * kvf_msg_enc_error() - the answer "ErrorCode @code" in @rpc's own shape:
 * an expected with the error; for a vector-of-expected RPC, @nitems
 * copies; for RemoveAll (a bare int64) the code as that integer.
 */
void kvf_msg_enc_error(struct kvf_wbuf *w, const struct kvf_abi *abi,
		       enum kvf_rpc rpc, int32_t code, size_t nitems);

/** E<void> success (MountSegment, PutEnd, Remove, ...). */
void kvf_msg_enc_ok(struct kvf_wbuf *w, const struct kvf_abi *abi,
		    enum kvf_rpc rpc);
/** E<std::string> success (ServiceReady, GetFsdir). */
void kvf_msg_enc_str(struct kvf_wbuf *w, const struct kvf_abi *abi,
		     enum kvf_rpc rpc, struct kvf_str s);
/** E<bool> success (ExistKey, PollRemoveAll). */
void kvf_msg_enc_bool(struct kvf_wbuf *w, const struct kvf_abi *abi,
		      enum kvf_rpc rpc, bool v);
/** E<int32> success (QuerySegmentStatus*: SegmentStatus). */
void kvf_msg_enc_i32(struct kvf_wbuf *w, const struct kvf_abi *abi,
		     enum kvf_rpc rpc, int32_t v);
/** E<int64> (RemoveByRegex) or the bare int64 of RemoveAll. */
void kvf_msg_enc_i64(struct kvf_wbuf *w, const struct kvf_abi *abi,
		     enum kvf_rpc rpc, int64_t v);
/** E<PingResponse>. */
void kvf_msg_enc_ping(struct kvf_wbuf *w, const struct kvf_abi *abi,
		      int64_t view_version_id, int32_t client_status);
/** E<GetStorageConfigResponse>. */
void kvf_msg_enc_storage_config(struct kvf_wbuf *w, const struct kvf_abi *abi,
				const struct kvf_msg_storage_config *c);
/** VE<void> (BatchPutEnd, BatchRemove, ...): @n items. */
void kvf_msg_enc_codes(struct kvf_wbuf *w, const struct kvf_abi *abi,
		       enum kvf_rpc rpc, const int32_t *codes, size_t n);
/** VE<bool> (BatchExistKey): @vals[i] where @codes[i] == 0. */
void kvf_msg_enc_bools(struct kvf_wbuf *w, const struct kvf_abi *abi,
		       enum kvf_rpc rpc, const int32_t *codes,
		       const uint8_t *vals, size_t n);
/**
 * kvf_msg_enc_replicas() - E<vector<Desc>> (PutStart, UpsertStart) or
 * E<GetReplicaListResponse> (GetReplicaList), from one item.
 */
void kvf_msg_enc_replicas(struct kvf_wbuf *w, const struct kvf_abi *abi,
			  enum kvf_rpc rpc, const struct kvf_msg_replicas *r);
/**
 * kvf_msg_enc_replicas_vec() - VE<vector<Desc>> (BatchPutStart,
 * BatchUpsertStart) or VE<GetReplicaListResponse> (BatchGetReplicaList).
 */
void kvf_msg_enc_replicas_vec(struct kvf_wbuf *w, const struct kvf_abi *abi,
			      enum kvf_rpc rpc,
			      const struct kvf_msg_replicas *items, size_t n);
/**
 * struct kvf_msg_mem_seg - what a memory replica's descriptor takes from
 * its segment (the same for every replica on it): its transport's
 * protocol and endpoint.
 */
struct kvf_msg_mem_seg {
	struct kvf_str protocol;
	struct kvf_str endpoint;
};

/** struct kvf_msg_mem_desc - a memory replica's descriptor, compact. */
struct kvf_msg_mem_desc {
	uint64_t id;
	uint64_t size;
	uint64_t addr;
	const struct kvf_msg_mem_seg *seg;
};

/**
 * struct kvf_msg_mem_replicas - one item of kvf_msg_enc_mem_replicas_vec():
 * @code != 0 makes it an error, else its @n (at most %KVF_MAX_REPLICAS)
 * descriptors are @descs.
 */
struct kvf_msg_mem_replicas {
	int32_t code;
	uint32_t n;
	const struct kvf_msg_mem_desc *descs;
};

/**
 * kvf_msg_enc_mem_replicas_vec() - the bytes kvf_msg_enc_replicas_vec()
 * writes for @n items whose descriptors are all memory replicas in state
 * @status, every GetReplicaListResponse with @lease_ttl_ms and no
 * checksum; from the compact form, which a batch answer fills without
 * building a struct kvf_msg_desc per replica.
 */
void kvf_msg_enc_mem_replicas_vec(struct kvf_wbuf *w, const struct kvf_abi *abi,
				  enum kvf_rpc rpc,
				  const struct kvf_msg_mem_replicas *items,
				  size_t n, int32_t status,
				  uint64_t lease_ttl_ms);
/** E<unordered_map<string, vector<Desc>>> (GetReplicaListByRegex). */
void kvf_msg_enc_regex_map(struct kvf_wbuf *w, const struct kvf_abi *abi,
			   const struct kvf_msg_key_replicas *e, size_t n);
/** E<unordered_map<UUID, vector<string>>> (BatchQueryIp). */
void kvf_msg_enc_ip_map(struct kvf_wbuf *w, const struct kvf_abi *abi,
			const struct kvf_msg_client_ips *e, size_t n);
/** E<vector<T>> with no element (FetchTasks with no task, ...). */
void kvf_msg_enc_empty_vec(struct kvf_wbuf *w, const struct kvf_abi *abi,
			   enum kvf_rpc rpc);

/**
 * struct kvf_msg_resp - a decoded response (clients, tests). The caller
 * provides the arrays (@cap items, @desc_cap descriptors in all); views
 * point into the body.
 * @code: the top-level expected's error (0 = success; unused for vectors).
 * @n: items of a vector-of-expected response (or descriptors / map
 *	entries in a single expected's vector or map: see @items[0]).
 * @items: per item: code, descriptors (into @descs), lease, checksum;
 *	for VE<bool> the value is in @bools.
 * @str, @i64, @i32, @b, @ping_*, @storage: scalar answers.
 * @map: the value of any other answer (maps, task vectors, structs of
 *	unsupported RPCs) as a view, validated against its type literal but
 *	not decoded further; @map.n is the entry count of a map or vector.
 */
struct kvf_msg_resp {
	int32_t code;
	size_t n;
	struct kvf_msg_replicas *items;
	uint8_t *bools;
	size_t cap;
	struct kvf_msg_desc *descs;
	size_t desc_cap;
	size_t ndescs;
	struct kvf_str str;
	int64_t i64;
	int32_t i32;
	bool b;
	int64_t ping_view_version;
	int32_t ping_status;
	struct kvf_msg_storage_config storage;
	struct kvf_msg_view map;
};

/**
 * kvf_msg_resp_decode() - decode a response body of @rpc into @out (whose
 * arrays the caller set). Return: 0 or a negative kvf_wire_status.
 */
int kvf_msg_resp_decode(const struct kvf_abi *abi, enum kvf_rpc rpc,
			const void *body, size_t len, struct kvf_msg_resp *out);

/**
 * kvf_msg_resp_reencode() - encode @resp (as decoded from @rpc's
 * response) again with the encoders above; used to check the encoders
 * against upstream's bytes. Return: 0 or %KVF_WIRE_ERR_UNSUPPORTED.
 */
int kvf_msg_resp_reencode(struct kvf_wbuf *w, const struct kvf_abi *abi,
			  enum kvf_rpc rpc, const struct kvf_msg_resp *resp);

/*
 * kvf__msg_req_prog() - internal, for tests: the request field program of
 * @rpc (one character per argument, see wire/msg.c), NULL for RPCs
 * decoded by literal only.
 */
const char *kvf__msg_req_prog(enum kvf_rpc rpc);

#endif /* KVF_SERVER_MSG_H */
