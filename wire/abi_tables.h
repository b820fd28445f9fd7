/* SPDX-License-Identifier: MIT */
/*
 * wire/abi_tables.h - the per-revision tables (wire/abi_*.c), newest
 * first in wire/abi.c's list.
 */
#ifndef KVF_SERVER_ABI_TABLES_H
#define KVF_SERVER_ABI_TABLES_H

#include "wire/abi.h"

extern const struct kvf_abi kvf__abi_3b5a5941;
extern const struct kvf_abi kvf__abi_v0_3_12_post1;

#endif /* KVF_SERVER_ABI_TABLES_H */
