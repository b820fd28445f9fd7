/* SPDX-License-Identifier: MIT */
/*
 * tests/stress/audit.h - the accounting invariant concurrency tests check
 * after every run: every allocated byte is held by a live record (complete
 * or processing) or by a pre-empted put's buffer awaiting release, and the
 * engine's object counters match the records in the index.
 */
#ifndef KVF_TESTS_STRESS_AUDIT_H
#define KVF_TESTS_STRESS_AUDIT_H

#include "engine/internal.h"

/* Call with every worker thread joined. Needs cmocka (tests/unit/helpers.h). */
static inline void assert_accounting(struct kvf_engine *e)
{
	struct kvf__audit a;

	kvf__engine_audit(e, &a);
	if (a.used_bytes != a.live_bytes + a.deferred_bytes)
		print_error("used %llu != live %llu + deferred %llu\n",
			    (unsigned long long)a.used_bytes,
			    (unsigned long long)a.live_bytes,
			    (unsigned long long)a.deferred_bytes);
	assert_int_equal(a.used_bytes, a.live_bytes + a.deferred_bytes);
	assert_int_equal(a.complete, (uint64_t)a.nr_complete);
	assert_int_equal(a.processing, (uint64_t)a.nr_processing);
}

#endif /* KVF_TESTS_STRESS_AUDIT_H */
