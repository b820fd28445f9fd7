// SPDX-License-Identifier: MIT
/*
 * tests/ha/test_ha_election.c - ha/election.c against a real etcd, two
 * candidates in one process (TTL 1 s, 2 s if sanitized):
 *  - one leads: the key is mooncake-store/<cluster>/master_view, its value
 *    the plain address, bound to a lease, and the view version is the
 *    key's create revision;
 *  - the second waits as a standby and never may serve;
 *  - the leader's stop revokes its lease and the standby leads, with a
 *    higher view version;
 *  - a leader whose key is deleted steps down;
 *  - after etcd is killed and restarted, one of them leads again;
 *  - a standby that takes the key serves as soon as the previous
 *    holder's lease is gone, whether it watched the deletion or found
 *    the key absent on a read, and not while that lease lives;
 *  - with legacy_key, the <= v0.3.7 key is published in the same
 *    transaction, and another master's copy of it blocks the election;
 *  - cluster id: one trailing '/' dropped; empty means
 *    $MC_STORE_CLUSTER_ID, else mooncake_cluster.
 * A sampling thread checks throughout that the two never may serve at
 * the same moment (run under TSan as well: the atomics and the condition
 * variable are what the master's threads use).
 */
#include "config.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include <kvforge/status.h>

#include "ha/election.h"
#include "ha/etcd.h"
#include "tests/ha/etcd_fixture.h"

#define KEY "mooncake-store/ha_test/master_view"

/*
 * The candidates' lease TTL. A leader fences itself when no renewal is
 * confirmed within 3/4 of it: a sanitized build starved of CPU on a
 * loaded machine missed 750 ms now and then, and a leader that steps
 * down by itself fails the checks that it still leads.
 */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TTL_S 2
#else
#define TTL_S 1
#endif

/* The candidates; the sampler reads them under cand_mu, so the main
 * thread takes a candidate out under it before stopping (freeing) it. */
static struct kvf_ha *cand[2];
static pthread_mutex_t cand_mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool sampling, both_served;

static void set_cand(int i, struct kvf_ha *ha)
{
	pthread_mutex_lock(&cand_mu);
	cand[i] = ha;
	pthread_mutex_unlock(&cand_mu);
}

static void stop_cand(int i)
{
	struct kvf_ha *ha;

	pthread_mutex_lock(&cand_mu);
	ha = cand[i];
	cand[i] = NULL;
	pthread_mutex_unlock(&cand_mu);
	kvf_ha_stop(ha);
}

static void *sampler(void *arg)
{
	struct timespec ts = {0, 2000000};

	(void)arg;
	while (atomic_load(&sampling)) {
		pthread_mutex_lock(&cand_mu);
		if (cand[0] && cand[1] && kvf_ha_may_serve(cand[0]) &&
		    kvf_ha_may_serve(cand[1]))
			atomic_store(&both_served, true);
		pthread_mutex_unlock(&cand_mu);
		nanosleep(&ts, NULL);
	}
	return NULL;
}

static struct kvf_ha *start_ttl(const char *advertise, unsigned ttl_s)
{
	struct kvf_ha_options o = {.endpoints = etcd_fx.endpoint,
				   .cluster_id = "ha_test/",
				   .advertise = advertise,
				   .ttl_s = ttl_s};
	struct kvf_ha *ha;

	assert_int_equal(kvf_ha_start(&o, &ha), KVF_OK);
	return ha;
}

static struct kvf_ha *start(const char *advertise)
{
	return start_ttl(advertise, TTL_S);
}

/*
 * kvf_ha_wait() for 100 ms, and at least that long: it returns at once
 * while a leader's deadline has passed and its thread has not stepped
 * down yet (blocked on an etcd that is restarting, say), and the loops of
 * 200 of them below bound their waits to 20 s only if each takes 100 ms.
 */
static void wait_100ms(struct kvf_ha *ha)
{
	struct timespec a, b, rest = {0, 0};
	long ms;

	clock_gettime(CLOCK_MONOTONIC, &a);
	kvf_ha_wait(ha, 100);
	clock_gettime(CLOCK_MONOTONIC, &b);
	ms = (long)(b.tv_sec - a.tv_sec) * 1000 +
	     (b.tv_nsec - a.tv_nsec) / 1000000;
	if (ms < 100) {
		rest.tv_nsec = (100 - ms) * 1000000L;
		nanosleep(&rest, NULL);
	}
}

/* Wait (20 s at most) until @ha may serve, or until it is a standby. */
static bool wait_serving(struct kvf_ha *ha)
{
	for (int i = 0; i < 200 && !kvf_ha_may_serve(ha); i++)
		wait_100ms(ha);
	return kvf_ha_may_serve(ha);
}

static void wait_role(struct kvf_ha *ha, enum kvf_ha_role role)
{
	for (int i = 0; i < 200 && kvf_ha_role(ha) != role; i++)
		wait_100ms(ha);
	assert_int_equal(kvf_ha_role(ha), role);
}

static void check_key(const char *value, uint64_t view)
{
	struct kvf_etcd *e;
	struct kvf_etcd_kv kv;
	bool found;

	assert_int_equal(kvf_etcd_new(etcd_fx.endpoint, 2000, &e), KVF_OK);
	assert_int_equal(kvf_etcd_get(e, KEY, strlen(KEY), &kv, &found),
			 KVF_OK);
	assert_true(found);
	assert_string_equal(kv.value, value);
	assert_int_equal(kv.len, strlen(value));
	assert_int_equal((uint64_t)kv.create_revision, view);
	assert_true(kv.lease != 0);
	kvf_etcd_kv_clear(&kv);
	kvf_etcd_free(e);
}

static void test_key_name(void **state)
{
	char buf[128];

	(void)state;
	assert_int_equal(kvf_ha_key("c1/", buf, sizeof(buf)),
			 strlen("mooncake-store/c1/master_view"));
	assert_string_equal(buf, "mooncake-store/c1/master_view");
	setenv("MC_STORE_CLUSTER_ID", "from_env", 1);
	kvf_ha_key("", buf, sizeof(buf));
	assert_string_equal(buf, "mooncake-store/from_env/master_view");
	unsetenv("MC_STORE_CLUSTER_ID");
	kvf_ha_key(NULL, buf, sizeof(buf));
	assert_string_equal(buf, "mooncake-store/mooncake_cluster/master_view");
	assert_int_equal(kvf_ha_key("c1", buf, 10), 0);
}

static void test_bad_options(void **state)
{
	struct kvf_ha_options o = {
		.endpoints = "h", .advertise = "a:1", .ttl_s = 1};
	struct kvf_ha *ha;

	(void)state;
	assert_int_equal(kvf_ha_start(&o, &ha), KVF_ERR_INVALID_ARGUMENT);
	o.endpoints = etcd_fx.endpoint;
	o.ttl_s = 0;
	assert_int_equal(kvf_ha_start(&o, &ha), KVF_ERR_INVALID_ARGUMENT);
	o.ttl_s = 1;
	o.advertise = "";
	assert_int_equal(kvf_ha_start(&o, &ha), KVF_ERR_INVALID_ARGUMENT);
}

static void test_election(void **state)
{
	pthread_t th;
	uint64_t view_a, view_b;

	(void)state;
	atomic_store(&sampling, true);
	assert_int_equal(pthread_create(&th, NULL, sampler, NULL), 0);

	set_cand(0, start("10.0.0.1:5001"));
	assert_true(wait_serving(cand[0]));
	view_a = kvf_ha_view_version(cand[0]);
	assert_true(view_a > 0);
	assert_int_equal(kvf_ha_role(cand[0]), KVF_HA_LEADER);
	check_key("10.0.0.1:5001", view_a);

	/* the second candidate waits */
	set_cand(1, start("10.0.0.2:5002"));
	wait_role(cand[1], KVF_HA_STANDBY);
	assert_false(kvf_ha_may_serve(cand[1]));
	assert_int_equal(kvf_ha_view_version(cand[1]), 0);
	/* several renewals later, still so */
	for (int i = 0; i < 3; i++)
		kvf_ha_wait(cand[1], 500);
	assert_int_equal(kvf_ha_role(cand[1]), KVF_HA_STANDBY);
	assert_true(kvf_ha_may_serve(cand[0]));
	check_key("10.0.0.1:5001", view_a);

	/* the leader stops: its lease is revoked, the standby leads */
	stop_cand(0);
	assert_true(wait_serving(cand[1]));
	view_b = kvf_ha_view_version(cand[1]);
	assert_true(view_b > view_a);
	check_key("10.0.0.2:5002", view_b);

	/* the first comes back as a standby */
	set_cand(0, start("10.0.0.1:5001"));
	wait_role(cand[0], KVF_HA_STANDBY);

	/* the key deleted under the leader: it steps down, and one of the
	 * two leads under a new view */
	{
		struct kvf_etcd *e;

		assert_int_equal(kvf_etcd_new(etcd_fx.endpoint, 2000, &e),
				 KVF_OK);
		assert_int_equal(kvf_etcd_delete(e, KEY, strlen(KEY)), KVF_OK);
		kvf_etcd_free(e);
	}
	for (int i = 0; i < 200; i++) {
		struct kvf_ha *a = cand[0], *b = cand[1];

		if ((kvf_ha_may_serve(a) && kvf_ha_view_version(a) > view_b) ||
		    (kvf_ha_may_serve(b) && kvf_ha_view_version(b) > view_b))
			break;
		wait_100ms(b);
	}
	assert_true(kvf_ha_view_version(cand[0]) > view_b ||
		    kvf_ha_view_version(cand[1]) > view_b);

	/* etcd killed and restarted under them: one leads again */
	etcd_fixture_restart(&etcd_fx);
	for (int i = 0; i < 200; i++) {
		if (kvf_ha_may_serve(cand[0]) || kvf_ha_may_serve(cand[1]))
			break;
		wait_100ms(cand[0]);
	}
	assert_true(kvf_ha_may_serve(cand[0]) || kvf_ha_may_serve(cand[1]));

	atomic_store(&sampling, false);
	pthread_join(th, NULL);
	stop_cand(0);
	stop_cand(1);
	assert_false(atomic_load(&both_served));
}

/* A fake leader: KEY = "10.0.0.9:9" bound to a fresh lease of @ttl_s. */
static int64_t fake_leader(struct kvf_etcd *e, unsigned ttl_s)
{
	int64_t lease, rev;
	bool created;

	assert_int_equal(kvf_etcd_delete(e, KEY, strlen(KEY)), KVF_OK);
	assert_int_equal(kvf_etcd_lease_grant(e, ttl_s, &lease), KVF_OK);
	assert_int_equal(kvf_etcd_create(e, KEY, strlen(KEY), "10.0.0.9:9", 10,
					 lease, &created, &rev),
			 KVF_OK);
	assert_true(created);
	return lease;
}

/* Wait (20 s at most) until @ha may serve; return the seconds it took. */
static double secs_to_serve(struct kvf_ha *ha)
{
	struct timespec a, b;

	clock_gettime(CLOCK_MONOTONIC, &a);
	wait_serving(ha);
	clock_gettime(CLOCK_MONOTONIC, &b);
	return (double)(b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9;
}

/* A standby (TTL 30 s) behind a fake leader whose lease (TTL 30 s) is
 * *@lease; *@e: a client of the fixture's member. */
static struct kvf_ha *standby_behind_fake(struct kvf_etcd **e, int64_t *lease)
{
	struct kvf_ha *b;

	assert_int_equal(kvf_etcd_new(etcd_fx.endpoint, 2000, e), KVF_OK);
	*lease = fake_leader(*e, 30);
	b = start_ttl("10.0.0.2:5002", 30);
	wait_role(b, KVF_HA_STANDBY);
	return b;
}

/*
 * The key deleted by hand while its holder's lease lives: the standby
 * takes the key but does not serve until that lease is gone (the holder
 * would step down and revoke it at its next renewal), and then serves at
 * once, not after its own TTL + TTL/4 (37.5 s here; 15 s is the bound).
 */
static void test_waits_for_live_lease(void **state)
{
	struct kvf_etcd *e;
	int64_t lease;
	struct kvf_ha *b = standby_behind_fake(&e, &lease);

	(void)state;
	assert_int_equal(kvf_etcd_delete(e, KEY, strlen(KEY)), KVF_OK);
	wait_role(b, KVF_HA_WARMUP);
	for (int i = 0; i < 5; i++) /* the old lease lives: no serving */
		assert_false(kvf_ha_wait(b, 100));
	assert_int_equal(kvf_ha_role(b), KVF_HA_WARMUP);
	assert_int_equal(kvf_etcd_lease_revoke(e, lease), KVF_OK);
	assert_true(secs_to_serve(b) < 15.0);
	assert_true(kvf_ha_may_serve(b));
	kvf_ha_stop(b);
	kvf_etcd_free(e);
}

/* Point the fixture's member at client port @port (restarting it). */
static void move_etcd(uint16_t port)
{
	etcd_fixture_kill(&etcd_fx);
	etcd_fx.client_port = port;
	snprintf(etcd_fx.endpoint, sizeof(etcd_fx.endpoint), "127.0.0.1:%u",
		 port);
	etcd_fixture_restart(&etcd_fx);
}

/*
 * The holder's lease ends while the standby cannot reach etcd (the
 * member moved to another client port meanwhile): its next read finds
 * no key, no watch ever saw the deletion. The key's history tells it
 * whom it replaces, so it serves at once rather than after its own
 * TTL + TTL/4 (37.5 s; 15 s is the bound).
 */
static void test_missed_deletion(void **state)
{
	uint16_t port = etcd_fx.client_port;
	struct kvf_etcd *e;
	int64_t lease;
	struct kvf_ha *b = standby_behind_fake(&e, &lease);

	(void)state;
	kvf_etcd_free(e);		     /* its endpoint moves */
	move_etcd(etcd_fixture_free_port()); /* out of the standby's reach */
	assert_int_equal(kvf_etcd_new(etcd_fx.endpoint, 2000, &e), KVF_OK);
	assert_int_equal(kvf_etcd_lease_revoke(e, lease), KVF_OK);
	kvf_etcd_free(e);
	move_etcd(port);
	assert_true(secs_to_serve(b) < 15.0);
	assert_true(kvf_ha_may_serve(b));
	kvf_ha_stop(b);
}

/* @key's value, create revision and lease (value NULL: absent). */
static void key_is(struct kvf_etcd *e, const char *key, const char *value,
		   uint64_t view, int64_t *lease)
{
	struct kvf_etcd_kv kv;
	bool found;

	assert_int_equal(kvf_etcd_get(e, key, strlen(key), &kv, &found),
			 KVF_OK);
	assert_int_equal(found, value != NULL);
	if (!found)
		return;
	assert_string_equal(kv.value, value);
	assert_int_equal((uint64_t)kv.create_revision, view);
	*lease = kv.lease;
	kvf_etcd_kv_clear(&kv);
}

/*
 * legacy_key: the leader publishes mooncake-store/master_view too, with
 * the same value, lease and create revision (one transaction); both go
 * with its stop. Held by someone else, that key keeps the candidate from
 * leading (nothing is published) until it is gone.
 */
static void test_legacy_key(void **state)
{
	struct kvf_ha_options o = {.endpoints = etcd_fx.endpoint,
				   .cluster_id = "ha_test",
				   .advertise = "10.0.0.3:5003",
				   .ttl_s = TTL_S,
				   .legacy_key = true};
	const char *lk = KVF_HA_LEGACY_KEY;
	int64_t l1 = 0, l2 = 0;
	struct kvf_etcd *e;
	struct kvf_ha *ha;
	uint64_t view;

	(void)state;
	assert_string_equal(lk, "mooncake-store/master_view");
	assert_int_equal(kvf_etcd_new(etcd_fx.endpoint, 2000, &e), KVF_OK);
	assert_int_equal(kvf_etcd_delete(e, KEY, strlen(KEY)), KVF_OK);
	assert_int_equal(kvf_etcd_delete(e, lk, strlen(lk)), KVF_OK);

	assert_int_equal(kvf_ha_start(&o, &ha), KVF_OK);
	assert_true(wait_serving(ha));
	view = kvf_ha_view_version(ha);
	key_is(e, KEY, "10.0.0.3:5003", view, &l1);
	key_is(e, lk, "10.0.0.3:5003", view, &l2);
	assert_true(l1 != 0);
	assert_int_equal(l1, l2);
	kvf_ha_stop(ha);
	key_is(e, KEY, NULL, 0, &l1);
	key_is(e, lk, NULL, 0, &l1);

	/* the old key held by another master: no leading, nothing written */
	assert_int_equal(kvf_etcd_put(e, lk, strlen(lk), "10.9.9.9:1", 10, 0),
			 KVF_OK);
	assert_int_equal(kvf_ha_start(&o, &ha), KVF_OK);
	for (int i = 0; i < 20; i++)
		assert_false(kvf_ha_wait(ha, 100));
	key_is(e, KEY, NULL, 0, &l1);
	assert_int_equal(kvf_etcd_delete(e, lk, strlen(lk)), KVF_OK);
	assert_true(wait_serving(ha));
	view = kvf_ha_view_version(ha);
	key_is(e, KEY, "10.0.0.3:5003", view, &l1);
	key_is(e, lk, "10.0.0.3:5003", view, &l2);
	assert_int_equal(l1, l2);

	/* the old key deleted under the leader: it steps down */
	assert_int_equal(kvf_etcd_delete(e, lk, strlen(lk)), KVF_OK);
	for (int i = 0; i < 200 && kvf_ha_view_version(ha) == view; i++)
		wait_100ms(ha);
	assert_true(kvf_ha_view_version(ha) != view);
	kvf_ha_stop(ha);
	kvf_etcd_free(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_key_name),
		cmocka_unit_test(test_bad_options),
		cmocka_unit_test(test_election),
		cmocka_unit_test(test_waits_for_live_lease),
		cmocka_unit_test(test_missed_deletion),
		cmocka_unit_test(test_legacy_key),
	};

	etcd_fixture_require();
	return cmocka_run_group_tests(tests, etcd_fixture_setup,
				      etcd_fixture_teardown);
}
