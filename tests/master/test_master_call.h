/* SPDX-License-Identifier: MIT */
/*
 * tests/master/test_master_call.h - one RPC and its decoded answer, for
 * the tests that drive a kvforge-master child with client/client.h.
 * Include after <cmocka.h>.
 */
#ifndef KVF_TEST_MASTER_CALL_H
#define KVF_TEST_MASTER_CALL_H

#include <string.h>

#include "client/client.h"

#ifndef TIMEOUT_MS
#define TIMEOUT_MS 20000 /* a call's answer, ms */
#endif

/* Answers of one call, with room for 16 items. */
struct answer {
	struct kvf_msg_resp r;
	struct kvf_msg_replicas items[16];
	struct kvf_msg_desc descs[64];
	uint8_t bools[16];
};

/* Send @q on @c, wait for its answer into @a; 0 or kvf_client_call()'s
 * error. */
static inline int try_call(struct kvf_client *c, const struct kvf_msg_req *q,
			   struct answer *a)
{
	memset(a, 0, sizeof(*a));
	a->r.items = a->items;
	a->r.cap = 16;
	a->r.descs = a->descs;
	a->r.desc_cap = 64;
	a->r.bools = a->bools;
	return kvf_client_call(c, q, TIMEOUT_MS, &a->r);
}

/* try_call() that must succeed (at the transport level). */
static inline struct kvf_msg_resp *
call(struct kvf_client *c, const struct kvf_msg_req *q, struct answer *a)
{
	assert_int_equal(try_call(c, q, a), 0);
	return &a->r;
}

/* A connection to the master on 127.0.0.1:@port, at the newest ABI. */
static inline struct kvf_client *connect_port(uint16_t port)
{
	struct kvf_client *c = NULL;

	assert_int_equal(kvf_client_connect("127.0.0.1", port,
					    kvf_abi_find(NULL), 64, &c),
			 0);
	return c;
}

#endif /* KVF_TEST_MASTER_CALL_H */
