// SPDX-License-Identifier: MIT
/*
 * wire/abi.c - choosing a Mooncake revision's table and dispatching a
 * function id.
 *
 * A revision is data (wire/abi_<name>.c): Mooncake changes struct
 * layouts without changing its version string, and a request whose type
 * hash does not match is silently undecodable, so the master pins one
 * revision per process (--mooncake-abi) and checks every request's hash
 * against it. Dispatch is a linear scan of at most KVF_RPC__COUNT ids: a
 * few dozen compares per request, far below the cost of the request.
 *
 * How to add another revision
 * ---------------------------
 * 1. Generate its rpc_table TSV (name, function id, nargs, request hash
 *    and literal, response hash and literal per registered RPC) by
 *    compiling against that revision's headers, as for the two tables in
 *    tests/master/fixtures/ (rpc_table*.tsv); add the TSV there.
 * 2. If it registers an RPC that is not in wire/rpc_list.h, add the name
 *    there (alphabetical; everything per-RPC is indexed by that enum).
 * 3. Write wire/abi_<name>.c: a `const struct kvf_abi` with one entry per
 *    TSV row ([KVF_RPC_<Name>] = { .registered, .nargs, .shape,
 *    .function_id, .req_hash, .resp_hash, .req_literal, .resp_literal }),
 *    .shape from the response literal (84... = a vector of expected,
 *    03 = RemoveAll's bare int64, else expected). Declare it in
 *    wire/abi_tables.h, list it in `tables` below (newest first) and in
 *    wire/local.mk, and register the TSV in tests/master/test_wire.c's
 *    table list so the hash test covers it.
 * 4. Compare its struct literals with the existing tables' (the
 *    type_table TSV helps) and set the layout fields: .rc (ReplicateConfig
 *    layout), .desc_variants (alternatives of Replica::Descriptor),
 *    .put_end_meta (PutEnd takes ObjectMeta), .replica_list_checksum
 *    (GetReplicaListResponse carries object_checksum). A layout that fits
 *    none of these needs a new field and a branch in wire/msg.c's codec
 *    for that struct; the unit test's literal check (every typed codec is
 *    checked against the literal it claims to implement) catches a miss.
 * 5. Capture fixtures against a master of that revision (both body forms)
 *    and add them under tests/master/fixtures/ so the replay test covers
 *    its bytes.
 */
#include "wire/abi.h"

#include <string.h>

#include "wire/abi_tables.h"

static const struct kvf_abi *const tables[] = {
	&kvf__abi_3b5a5941,
	&kvf__abi_v0_3_12_post1,
};

#define NR_TABLES (sizeof(tables) / sizeof(tables[0]))

static const char *const rpc_names[] = {
#define KVF_RPC_NAME(name) #name,
	KVF_RPC_LIST(KVF_RPC_NAME)
#undef KVF_RPC_NAME
};

size_t kvf_abi_count(void)
{
	return NR_TABLES;
}

const struct kvf_abi *kvf_abi_at(size_t i)
{
	return i < NR_TABLES ? tables[i] : NULL;
}

static bool abi_has_name(const struct kvf_abi *abi, const char *name)
{
	if (!strcmp(abi->name, name))
		return true;
	for (const char *const *a = abi->aliases; a && *a; a++)
		if (!strcmp(*a, name))
			return true;
	return false;
}

const struct kvf_abi *kvf_abi_find(const char *name)
{
	if (!name)
		return tables[0];
	for (size_t i = 0; i < NR_TABLES; i++)
		if (abi_has_name(tables[i], name))
			return tables[i];
	return NULL;
}

bool kvf_abi_rpc_of(const struct kvf_abi *abi, uint32_t function_id,
		    enum kvf_rpc *out)
{
	for (int i = 0; i < KVF_RPC__COUNT; i++) {
		const struct kvf_abi_rpc *e = &abi->rpc[i];

		if (e->registered && e->function_id == function_id) {
			*out = (enum kvf_rpc)i;
			return true;
		}
	}
	return false;
}

const char *kvf_abi_rpc_name(enum kvf_rpc rpc)
{
	return (unsigned)rpc < KVF_RPC__COUNT ? rpc_names[rpc] : "?";
}

bool kvf_abi_rpc_by_name(const char *name, enum kvf_rpc *out)
{
	for (int i = 0; i < KVF_RPC__COUNT; i++) {
		if (!strcmp(rpc_names[i], name)) {
			*out = (enum kvf_rpc)i;
			return true;
		}
	}
	return false;
}
