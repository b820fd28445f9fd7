/* SPDX-License-Identifier: MIT */
/*
 * wire/abi.h - one table per supported Mooncake revision ("ABI"): for
 * every RPC its function id, request and response type hashes and type
 * literals, and the layout variants of the structs that changed between
 * revisions. Selected once per process (--mooncake-abi); read-only data.
 *
 * Contract notes (additive changes only):
 * - kvf_abi_find(NULL) and kvf_abi_find("latest") give the newest table.
 * - kvf_abi_rpc_of() maps a function id to enum kvf_rpc; it fails for ids
 *   the revision does not register (answer function_not_registered).
 * - A request's type hash is checked by the decoders in wire/msg.h
 *   against ->req_hash; on a mismatch they return %KVF_WIRE_ERR_HASH and
 *   leave the hash found in the reader for the log line.
 */
#ifndef KVF_SERVER_ABI_H
#define KVF_SERVER_ABI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wire/rpc_list.h"

/**
 * enum kvf_abi_shape - the top-level form of a response, which fixes how a
 * generic error answer is written.
 * @KVF_ABI_EXPECTED: tl::expected<T, ErrorCode>.
 * @KVF_ABI_EXPECTED_VEC: std::vector<tl::expected<T, ErrorCode>> (one per
 *	request item).
 * @KVF_ABI_BARE_I64: a plain int64 (RemoveAll).
 */
enum kvf_abi_shape {
	KVF_ABI_EXPECTED,
	KVF_ABI_EXPECTED_VEC,
	KVF_ABI_BARE_I64,
};

/**
 * struct kvf_abi_rpc - one RPC in one revision.
 * @registered: the revision's master registers it (else the id is unknown).
 * @function_id: MD5-derived id (protocol.md §2).
 * @nargs: request arguments (0 = empty body, 1 = bare, more = tuple).
 * @req_hash, @resp_hash: struct_pack type hashes, bit 0 clear.
 * @req_literal, @resp_literal: the type literals, lowercase hex strings
 *	(checked by the unit tests against @req_hash/@resp_hash via MD5).
 * @shape: the response's top-level form.
 */
struct kvf_abi_rpc {
	bool registered;
	uint8_t nargs;
	uint8_t shape; /* enum kvf_abi_shape */
	uint32_t function_id;
	uint32_t req_hash;
	uint32_t resp_hash;
	const char *req_literal;
	const char *resp_literal;
};

/** enum kvf_abi_rc - ReplicateConfig layouts. */
enum kvf_abi_rc {
	/* u64 replica_num, u64 nof_replica_num, bool with_soft_pin,
	 * bool with_hard_pin, ... (v0.3.12.post1) */
	KVF_ABI_RC_SOFT_PIN_BOOL,
	/* u64 replica_num, u64 nof_replica_num, u64 dfs_replica_num,
	 * u8 soft_pin_action, optional<u64> soft_pin_ttl_ms, bool
	 * with_hard_pin, ... (3b5a5941) */
	KVF_ABI_RC_SOFT_PIN_ACTION,
};

/**
 * struct kvf_abi - a Mooncake revision.
 * @name: the --mooncake-abi name. @aliases: NULL-terminated other names.
 * @describe: one line for --help and logs (upstream commit / tag).
 * @rc: ReplicateConfig layout.
 * @desc_variants: alternatives of Replica::Descriptor's variant (4 without
 *	DistributedFSDescriptor, 5 with it).
 * @put_end_meta: PutEnd/UpsertEnd take ObjectMeta (key + optional
 *	checksum) instead of a key, and the batch forms vector<ObjectMeta>.
 * @replica_list_checksum: GetReplicaListResponse ends with
 *	optional<u64> object_checksum.
 * @rpc: indexed by enum kvf_rpc.
 */
struct kvf_abi {
	const char *name;
	const char *const *aliases;
	const char *describe;
	uint8_t rc; /* enum kvf_abi_rc */
	uint8_t desc_variants;
	bool put_end_meta;
	bool replica_list_checksum;
	struct kvf_abi_rpc rpc[KVF_RPC__COUNT];
};

/**
 * kvf_abi_find() - the table named @name (or one of its aliases).
 * @name: NULL or "latest" for the newest revision.
 * Return: the table (static storage), or NULL for an unknown name.
 */
const struct kvf_abi *kvf_abi_find(const char *name);

/** kvf_abi_count() / kvf_abi_at() - enumerate the tables, newest first. */
size_t kvf_abi_count(void);
const struct kvf_abi *kvf_abi_at(size_t i);

/**
 * kvf_abi_rpc_of() - the RPC a request's function id names.
 * @abi: the revision. @function_id: from the request header.
 * @out: the RPC on success.
 * Return: true if @abi registers @function_id.
 */
bool kvf_abi_rpc_of(const struct kvf_abi *abi, uint32_t function_id,
		    enum kvf_rpc *out);

/** kvf_abi_rpc_name() - "PutStart" etc.; "?" for an out-of-range value. */
const char *kvf_abi_rpc_name(enum kvf_rpc rpc);

/** kvf_abi_rpc_by_name() - the enum for an RPC name; false if unknown. */
bool kvf_abi_rpc_by_name(const char *name, enum kvf_rpc *out);

#endif /* KVF_SERVER_ABI_H */
