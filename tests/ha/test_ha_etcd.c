// SPDX-License-Identifier: MIT
/*
 * tests/ha/test_ha_etcd.c - ha/etcd.c against a real etcd on loopback:
 * endpoint parsing, key/value and the create-if-absent transaction,
 * leases (grant, keep-alive, time to live, revoke, a key bound to a
 * revoked lease), watches (no change missed between a read and the watch,
 * prefix, time-out), failover past a dead endpoint, and keep-alive and
 * watch working again after etcd is killed and restarted.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include <kvforge/status.h>

#include "ha/etcd.h"
#include "tests/ha/etcd_fixture.h"

static struct kvf_etcd *client(void)
{
	struct kvf_etcd *e;

	assert_int_equal(kvf_etcd_new(etcd_fx.endpoint, 2000, &e), KVF_OK);
	return e;
}

static void test_endpoints(void **state)
{
	static const char *const bad[] = {
		"",   " ; , ",	     "host",	   "h:",   "h:x",
		":1", "https://h:1", "unix://x:1", "a:1;b"};
	struct kvf_etcd *e;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(kvf_etcd_new(bad[i], 0, &e),
				 KVF_ERR_INVALID_ARGUMENT);
	assert_int_equal(kvf_etcd_new(" a:1; b:2 ,http://c:3/;[::1]:4", 0, &e),
			 KVF_OK);
	assert_int_equal(kvf_etcd_endpoint_count(e), 4);
	kvf_etcd_free(e);
}

static void test_kv_and_create(void **state)
{
	struct kvf_etcd *e = client();
	struct kvf_etcd_kv kv;
	bool found, created;
	int64_t rev = 0;

	(void)state;
	assert_int_equal(kvf_etcd_get(e, "t/kv", 4, &kv, &found), KVF_OK);
	assert_false(found);
	assert_int_equal(
		kvf_etcd_create(e, "t/kv", 4, "v\0x", 3, 0, &created, &rev),
		KVF_OK);
	assert_true(created);
	assert_true(rev > 0);
	assert_int_equal(kvf_etcd_get(e, "t/kv", 4, &kv, &found), KVF_OK);
	assert_true(found);
	assert_int_equal(kv.len, 3);
	assert_memory_equal(kv.value, "v\0x", 3);
	/* the transaction's revision is the key's create revision */
	assert_int_equal(kv.create_revision, rev);
	assert_int_equal(kv.lease, 0);
	kvf_etcd_kv_clear(&kv);
	/* a second create loses and changes nothing */
	assert_int_equal(
		kvf_etcd_create(e, "t/kv", 4, "w", 1, 0, &created, NULL),
		KVF_OK);
	assert_false(created);
	assert_int_equal(kvf_etcd_put(e, "t/kv", 4, "w", 1, 0), KVF_OK);
	assert_int_equal(kvf_etcd_get(e, "t/kv", 4, &kv, &found), KVF_OK);
	assert_true(found && kv.len == 1 && kv.value[0] == 'w');
	assert_int_equal(kv.create_revision, rev);
	assert_true(kv.mod_revision > rev);
	kvf_etcd_kv_clear(&kv);
	assert_int_equal(kvf_etcd_delete(e, "t/kv", 4), KVF_OK);
	assert_int_equal(kvf_etcd_get(e, "t/kv", 4, &kv, &found), KVF_OK);
	assert_false(found);
	kvf_etcd_free(e);
}

static void test_leases(void **state)
{
	struct kvf_etcd *e = client();
	struct kvf_etcd_kv kv;
	int64_t id, ttl = 0;
	bool found, created;

	(void)state;
	assert_int_equal(kvf_etcd_lease_grant(e, 0, &id),
			 KVF_ERR_INVALID_ARGUMENT);
	assert_int_equal(kvf_etcd_lease_grant(e, 7, &id), KVF_OK);
	assert_int_equal(kvf_etcd_lease_keepalive(e, id, &ttl), KVF_OK);
	assert_int_equal(ttl, 7);
	assert_int_equal(kvf_etcd_lease_ttl(e, id, &ttl), KVF_OK);
	assert_true(ttl > 0 && ttl <= 7);
	assert_int_equal(
		kvf_etcd_create(e, "t/lk", 4, "v", 1, id, &created, NULL),
		KVF_OK);
	assert_true(created);
	assert_int_equal(kvf_etcd_get(e, "t/lk", 4, &kv, &found), KVF_OK);
	assert_true(found);
	assert_int_equal(kv.lease, id);
	kvf_etcd_kv_clear(&kv);
	/* revoking deletes the bound key at once */
	assert_int_equal(kvf_etcd_lease_revoke(e, id), KVF_OK);
	assert_int_equal(kvf_etcd_get(e, "t/lk", 4, &kv, &found), KVF_OK);
	assert_false(found);
	assert_int_equal(kvf_etcd_lease_keepalive(e, id, &ttl),
			 KVF_ERR_OBJECT_NOT_FOUND);
	assert_int_equal(kvf_etcd_lease_ttl(e, id, &ttl),
			 KVF_ERR_OBJECT_NOT_FOUND);
	assert_int_equal(kvf_etcd_lease_revoke(e, id), KVF_OK);
	/* a key cannot be bound to a lease that is gone */
	assert_int_equal(
		kvf_etcd_create(e, "t/lk", 4, "v", 1, id, &created, NULL),
		KVF_ERR_OBJECT_NOT_FOUND);
	assert_false(created);
	kvf_etcd_free(e);
}

static void test_watch(void **state)
{
	struct kvf_etcd *e = client();
	struct kvf_etcd_event ev;
	struct kvf_etcd_kv kv;
	bool found, fired;
	int64_t rev;

	(void)state;
	assert_int_equal(kvf_etcd_put(e, "t/w", 3, "1", 1, 0), KVF_OK);
	assert_int_equal(kvf_etcd_get(e, "t/w", 3, &kv, &found), KVF_OK);
	assert_true(found);
	rev = kv.mod_revision;
	kvf_etcd_kv_clear(&kv);
	/* nothing changes: the watch times out */
	assert_int_equal(
		kvf_etcd_watch(e, "t/w", 3, false, rev + 1, 300, &ev, &fired),
		KVF_OK);
	assert_false(fired);
	/* a deletion between the read and the watch is reported */
	assert_int_equal(kvf_etcd_delete(e, "t/w", 3), KVF_OK);
	assert_int_equal(
		kvf_etcd_watch(e, "t/w", 3, false, rev + 1, 5000, &ev, &fired),
		KVF_OK);
	assert_true(fired);
	assert_true(ev.deleted);
	assert_true(ev.mod_revision > rev);
	/* prefix: a new key under it; another key beside it is not */
	rev = ev.mod_revision;
	assert_int_equal(kvf_etcd_put(e, "t/x", 3, "1", 1, 0), KVF_OK);
	assert_int_equal(kvf_etcd_put(e, "t/w/a", 5, "2", 1, 0), KVF_OK);
	assert_int_equal(
		kvf_etcd_watch(e, "t/w", 3, true, rev + 1, 5000, &ev, &fired),
		KVF_OK);
	assert_true(fired);
	assert_false(ev.deleted);
	assert_int_equal(ev.mod_revision, ev.create_revision);
	assert_int_equal(ev.mod_revision, rev + 2);
	kvf_etcd_free(e);
}

static void test_failover(void **state)
{
	char eps[160];
	struct kvf_etcd *e;
	struct kvf_etcd_kv kv;
	bool found, fired;
	struct kvf_etcd_event ev;
	int64_t id;

	(void)state;
	/* a dead endpoint first: every call moves on to the live one */
	snprintf(eps, sizeof(eps), "127.0.0.1:%u;%s", etcd_fixture_free_port(),
		 etcd_fx.endpoint);
	assert_int_equal(kvf_etcd_new(eps, 1000, &e), KVF_OK);
	assert_int_equal(kvf_etcd_get(e, "t/f", 3, &kv, &found), KVF_OK);
	assert_false(found);
	assert_int_equal(kvf_etcd_lease_grant(e, 5, &id), KVF_OK);
	assert_int_equal(kvf_etcd_lease_revoke(e, id), KVF_OK);
	/* a watch that lands on the dead one fails; the next one works */
	if (kvf_etcd_watch(e, "t/f", 3, false, 0, 200, &ev, &fired))
		assert_int_equal(
			kvf_etcd_watch(e, "t/f", 3, false, 0, 200, &ev, &fired),
			KVF_OK);
	kvf_etcd_free(e);
	/* nothing alive at all */
	snprintf(eps, sizeof(eps), "127.0.0.1:%u", etcd_fixture_free_port());
	assert_int_equal(kvf_etcd_new(eps, 500, &e), KVF_OK);
	assert_int_equal(kvf_etcd_get(e, "t/f", 3, &kv, &found), KVF_ERR_IO);
	assert_int_equal(kvf_etcd_lease_keepalive(e, 1, NULL), KVF_ERR_IO);
	kvf_etcd_free(e);
}

static void test_etcd_restart(void **state)
{
	struct kvf_etcd *e = client();
	struct kvf_etcd_event ev;
	struct kvf_etcd_kv kv;
	bool found, fired, created;
	int64_t id, rev = 0;

	(void)state;
	assert_int_equal(kvf_etcd_lease_grant(e, 30, &id), KVF_OK);
	assert_int_equal(
		kvf_etcd_create(e, "t/r", 3, "v", 1, id, &created, &rev),
		KVF_OK);
	assert_true(created);
	etcd_fixture_kill(&etcd_fx);
	assert_int_equal(kvf_etcd_lease_keepalive(e, id, NULL), KVF_ERR_IO);
	assert_int_equal(
		kvf_etcd_watch(e, "t/r", 3, false, rev + 1, 200, &ev, &fired),
		KVF_ERR_IO);
	etcd_fixture_restart(&etcd_fx);
	/* the same client carries on: the lease and its key survived */
	assert_int_equal(kvf_etcd_lease_keepalive(e, id, NULL), KVF_OK);
	assert_int_equal(kvf_etcd_get(e, "t/r", 3, &kv, &found), KVF_OK);
	assert_true(found);
	assert_int_equal(kv.create_revision, rev);
	kvf_etcd_kv_clear(&kv);
	assert_int_equal(kvf_etcd_lease_revoke(e, id), KVF_OK);
	assert_int_equal(
		kvf_etcd_watch(e, "t/r", 3, false, rev + 1, 5000, &ev, &fired),
		KVF_OK);
	assert_true(fired && ev.deleted);
	kvf_etcd_free(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_endpoints),
		cmocka_unit_test(test_kv_and_create),
		cmocka_unit_test(test_leases),
		cmocka_unit_test(test_watch),
		cmocka_unit_test(test_failover),
		cmocka_unit_test(test_etcd_restart),
	};

	etcd_fixture_require();
	return cmocka_run_group_tests(tests, etcd_fixture_setup,
				      etcd_fixture_teardown);
}
