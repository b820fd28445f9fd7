// SPDX-License-Identifier: MIT
/*
 * ha/election.c - campaign for Mooncake's master_view key, renew its
 * lease, fence on the local clock.
 *
 * One thread per election runs the whole state machine; everything else
 * only reads three atomics (role, view version, fencing deadline) or
 * waits on the condition variable that a role change broadcasts.
 *
 *   loop:
 *     read the key
 *     present  -> STANDBY: remember its lease and revision; watch the
 *                 key from that revision + 1 (at most 1 s), then read
 *                 again
 *     absent   -> CANDIDATE: grant a lease (t0 = when the grant was
 *                 sent), create the key if absent bound to it (and,
 *                 with legacy_key, the <= v0.3.7 key in the same
 *                 transaction, both required absent); lost the race ->
 *                 revoke, read again
 *     created  -> WARMUP: view = the transaction's revision (= the key's
 *                 create revision); deadline = t0 + TTL - margin; renew
 *                 every TTL/4 and after each renewal (sent at t) set
 *                 deadline = t + TTL - margin and check that the key is
 *                 still ours (present, same create revision)
 *                 LEADER once the previous holder's lease is gone: when
 *                 the key's history after our last read is its
 *                 deletion then our creation, that holder is the one
 *                 we replace, and we serve as soon as etcd says its
 *                 lease no longer exists (asked every 200 ms: it
 *                 expired, or its leader revoked it after it stopped
 *                 serving); otherwise (first start, another holder in
 *                 between) after a full TTL + margin
 *     renewal refused (lease gone), key no longer ours, or the deadline
 *     passed -> STANDBY (revoke the lease, best effort) and loop
 *     kvf_ha_step_aside() (the master could not serve) -> the same, and
 *     an absent key is not campaigned for until the hold has passed
 *
 * Why the deadline makes a leader stop before its lease can expire:
 * etcd starts a lease's TTL again when it handles a renewal, which is
 * after we sent it, so last-send + TTL is no later than the expiry on
 * etcd's clock; the margin (TTL/4) absorbs clock-rate differences
 * between the hosts and the time the master takes to close its listener
 * (it answers nothing after the deadline anyway: kvf_ha_may_serve() is
 * checked per request). Nothing here waits for etcd to answer before the
 * deadline passes: a frozen or partitioned etcd member only means no
 * renewal is confirmed, and the deadline runs out on its own.
 *
 * Why a new leader may skip the wait: the key disappears only when its
 * lease ends (expired: its leader's deadline passed earlier; revoked:
 * kvf_ha_stop() and step_down() revoke after the master stopped
 * serving) or when someone deletes it; in the last case the old lease
 * is still alive, which the time-to-live query tells, and the new
 * leader waits until that leader's next renewal finds the key gone and
 * it steps down (revoking), or the full TTL + margin. The history is
 * read rather than trusted to the watch, so a deletion that fell
 * between two watches (or during an etcd restart) is known too: only
 * the holder immediately before us matters, because it could only have
 * served after its own predecessor's lease was gone.
 */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvforge/status.h>

#include "base/clock.h"
#include "ha/election.h"
#include "ha/etcd.h"

#define HA_KEY_MAX 512
#define HA_RETRY_NS (200 * KVF__NS_PER_MS)
#define HA_WATCH_MS 1000u
#define HA_HISTORY_MS 1000u /* past changes come at once */

struct kvf_ha {
	struct kvf_etcd *etcd;
	char key[HA_KEY_MAX];
	size_t klen;
	/* what a win publishes: key, and the <= v0.3.7 key if asked */
	struct kvf_etcd_key keys[2];
	size_t nkeys;
	char *advertise;
	uint64_t ttl_ns, renew_ns, margin_ns;
	unsigned ttl_s;

	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv; /* CLOCK_MONOTONIC; broadcast on role change */
	bool stop;	   /* under mu */
	/* kvf_ha_step_aside(): give the key up (under mu), then no
	 * campaign before aside_until (monotonic ns) */
	bool aside;
	_Atomic uint64_t aside_until;
	/* the key as last read or written, for kvf_ha_status(); under mu */
	char seen_leader[256];
	uint64_t seen_view;

	_Atomic uint64_t elected, lost, fenced; /* kvf_ha_status() counts */

	_Atomic int role;
	_Atomic uint64_t view;
	_Atomic uint64_t deadline_ns; /* serve only before this */
	_Atomic int64_t held_lease;   /* kvf_ha_lease() */

	bool (*may_campaign)(void *ctx); /* kvf_ha_options */
	void *campaign_ctx;

	/* the campaign thread's own */
	int64_t lease; /* held, or 0 */
	bool legacy_logged;
	/* the key as this standby last read it: its lease and the
	 * revision of its last change (0: not read since leading) */
	int64_t seen_lease, seen_mod;
};

const char *kvf_ha_role_name(enum kvf_ha_role role)
{
	switch (role) {
	case KVF_HA_CANDIDATE:
		return "candidate";
	case KVF_HA_STANDBY:
		return "standby";
	case KVF_HA_WARMUP:
		return "leader_warmup";
	case KVF_HA_LEADER:
		return "leader";
	case KVF_HA_STOPPED:
		return "stopped";
	}
	return "unknown";
}

size_t kvf_ha_key(const char *cluster_id, char *buf, size_t len)
{
	const char *ns = cluster_id && *cluster_id ? cluster_id : NULL;
	size_t nlen;
	int n;

	if (!ns) {
		ns = getenv("MC_STORE_CLUSTER_ID");
		if (!ns || !*ns)
			ns = "mooncake_cluster";
	}
	nlen = strlen(ns);
	if (nlen && ns[nlen - 1] == '/')
		nlen--; /* one trailing slash, as upstream */
	n = snprintf(buf, len, "mooncake-store/%.*s/master_view", (int)nlen,
		     ns);
	return n > 0 && (size_t)n < len ? (size_t)n : 0;
}

/* ---- shared state ------------------------------------------------------ */

enum kvf_ha_role kvf_ha_role(const struct kvf_ha *ha)
{
	return (enum kvf_ha_role)atomic_load_explicit(&ha->role,
						      memory_order_acquire);
}

uint64_t kvf_ha_view_version(const struct kvf_ha *ha)
{
	return ha ? atomic_load_explicit(&ha->view, memory_order_acquire) : 0;
}

bool kvf_ha_may_serve(const struct kvf_ha *ha)
{
	if (kvf_ha_role(ha) != KVF_HA_LEADER)
		return false;
	return kvf__now_ns() <
	       atomic_load_explicit(&ha->deadline_ns, memory_order_acquire);
}

void kvf_ha_status(struct kvf_ha *ha, struct kvf_ha_status *st)
{
	pthread_mutex_lock(&ha->mu);
	snprintf(st->leader, sizeof(st->leader), "%s", ha->seen_leader);
	st->view = ha->seen_view;
	pthread_mutex_unlock(&ha->mu);
	st->role = kvf_ha_role(ha);
	st->serving = kvf_ha_may_serve(ha);
	st->elected = atomic_load(&ha->elected);
	st->lost = atomic_load(&ha->lost);
	st->fenced = atomic_load(&ha->fenced);
}

static void set_role(struct kvf_ha *ha, enum kvf_ha_role role)
{
	pthread_mutex_lock(&ha->mu);
	if (!ha->stop) /* STOPPED stays */
		atomic_store_explicit(&ha->role, (int)role,
				      memory_order_release);
	pthread_cond_broadcast(&ha->cv);
	pthread_mutex_unlock(&ha->mu);
}

bool kvf_ha_wait(struct kvf_ha *ha, unsigned timeout_ms)
{
	uint64_t until = kvf__now_ns() + timeout_ms * KVF__NS_PER_MS;
	enum kvf_ha_role role = kvf_ha_role(ha);
	struct timespec ts;

	pthread_mutex_lock(&ha->mu);
	if (role == KVF_HA_LEADER) {
		uint64_t d = atomic_load_explicit(&ha->deadline_ns,
						  memory_order_acquire);

		if (d < until)
			until = d;
	}
	kvf__deadline_ts(until, &ts);
	while (kvf_ha_role(ha) == role && !ha->stop && kvf__now_ns() < until)
		if (pthread_cond_timedwait(&ha->cv, &ha->mu, &ts))
			break;
	pthread_mutex_unlock(&ha->mu);
	return kvf_ha_may_serve(ha);
}

/* Sleep until @until_ns (monotonic) or a stop; false when stopping. */
static bool sleep_until(struct kvf_ha *ha, uint64_t until_ns)
{
	struct timespec ts;
	bool stop;

	kvf__deadline_ts(until_ns, &ts);
	pthread_mutex_lock(&ha->mu);
	while (!ha->stop && !ha->aside && kvf__now_ns() < until_ns)
		if (pthread_cond_timedwait(&ha->cv, &ha->mu, &ts))
			break;
	stop = ha->stop;
	pthread_mutex_unlock(&ha->mu);
	return !stop;
}

/* A step aside asked for (cleared: it is acted on now). */
static bool take_aside(struct kvf_ha *ha)
{
	bool aside;

	pthread_mutex_lock(&ha->mu);
	aside = ha->aside;
	ha->aside = false;
	pthread_mutex_unlock(&ha->mu);
	return aside;
}

static bool stopping(struct kvf_ha *ha)
{
	bool stop;

	pthread_mutex_lock(&ha->mu);
	stop = ha->stop;
	pthread_mutex_unlock(&ha->mu);
	return stop;
}

/* ---- the campaign --------------------------------------------------------
 */

/* Give the key up: not serving first, then the lease (best effort: if
 * etcd cannot be told, the lease expires on its own). */
static void step_down(struct kvf_ha *ha, const char *why, bool fenced)
{
	bool was = kvf_ha_role(ha) == KVF_HA_LEADER;

	atomic_fetch_add(&ha->lost, 1);
	if (fenced)
		atomic_fetch_add(&ha->fenced, 1);

	set_role(ha, KVF_HA_STANDBY);
	atomic_store_explicit(&ha->deadline_ns, 0, memory_order_release);
	atomic_store_explicit(&ha->view, 0, memory_order_release);
	fprintf(stderr, "ha: %s leadership: %s\n", was ? "lost" : "gave up",
		why);
	if (ha->lease)
		kvf_etcd_lease_revoke(ha->etcd, ha->lease);
	ha->lease = 0;
}

static const char fencing_why[] =
	"no renewal confirmed before the fencing deadline";

/* Remember the key's value and view for kvf_ha_status(). */
static void seen(struct kvf_ha *ha, const char *leader, uint64_t view)
{
	pthread_mutex_lock(&ha->mu);
	snprintf(ha->seen_leader, sizeof(ha->seen_leader), "%s", leader);
	ha->seen_view = view;
	pthread_mutex_unlock(&ha->mu);
}

/* 1 when every key we published is still ours (same create revision,
 * same lease), 0 when one is not, negative when etcd did not answer. */
static int keys_ours(struct kvf_ha *ha)
{
	for (size_t i = 0; i < ha->nkeys; i++) {
		struct kvf_etcd_kv kv;
		bool found, ours;
		int ret = kvf_etcd_get(ha->etcd, ha->keys[i].key,
				       ha->keys[i].len, &kv, &found);

		if (ret)
			return ret;
		ours = found &&
		       (uint64_t)kv.create_revision ==
			       kvf_ha_view_version(ha) &&
		       kv.lease == ha->lease;
		if (found)
			kvf_etcd_kv_clear(&kv);
		if (!ours)
			return 0;
	}
	return 1;
}

/*
 * Renew once: 1 when etcd confirmed it (and the key is still ours), 0
 * when it did not answer (retry; the deadline runs on), -1 when the
 * leadership is over (the lease is gone, the key is no longer ours, or
 * the deadline passed), with *@why saying which.
 */
static int renew(struct kvf_ha *ha, const char **why)
{
	uint64_t sent = kvf__now_ns(), deadline;
	bool confirmed = false;
	int ret;

	ret = kvf_etcd_lease_keepalive(ha->etcd, ha->lease, NULL);
	if (ret == KVF_ERR_OBJECT_NOT_FOUND) {
		*why = "the lease expired";
		return -1;
	}
	deadline = atomic_load_explicit(&ha->deadline_ns, memory_order_relaxed);
	/* A renewal sent after the deadline does not revive a leader that
	 * already stopped serving: it steps down below. */
	if (!ret && sent < deadline) {
		atomic_store_explicit(&ha->deadline_ns,
				      sent + ha->ttl_ns - ha->margin_ns,
				      memory_order_release);
		ret = keys_ours(ha);
		if (!ret) {
			*why = "the key was deleted or replaced";
			return -1;
		}
		confirmed = ret > 0;
	}
	if (kvf__now_ns() >=
	    atomic_load_explicit(&ha->deadline_ns, memory_order_acquire)) {
		*why = fencing_why;
		return -1;
	}
	return confirmed;
}

/*
 * Is the holder this standby last saw the one it replaces? Yes when the
 * key's history after that read is exactly its deletion, then our
 * creation at @rev. Both are past changes, which etcd sends as soon as
 * the watch is made; anything else (another holder in between, history
 * compacted, etcd unreachable) is a no: we do not know whom we replace.
 */
static bool replaces_seen(struct kvf_ha *ha, int64_t rev)
{
	struct kvf_etcd_event ev;
	bool fired;

	if (!ha->seen_lease ||
	    kvf_etcd_watch(ha->etcd, ha->key, ha->klen, false, ha->seen_mod + 1,
			   HA_HISTORY_MS, &ev, &fired) ||
	    !fired || !ev.deleted)
		return false;
	return !kvf_etcd_watch(ha->etcd, ha->key, ha->klen, false,
			       ev.mod_revision + 1, HA_HISTORY_MS, &ev,
			       &fired) &&
	       fired && !ev.deleted && ev.create_revision == rev;
}

/* Warm-up: serve once the previous holder's lease @prev is gone, or at
 * *@warm_until; *@poll_at is when to ask etcd again. */
static void warm_up(struct kvf_ha *ha, int64_t prev, uint64_t *warm_until,
		    uint64_t *poll_at)
{
	uint64_t now = kvf__now_ns();

	if (prev && now >= *poll_at) {
		if (kvf_etcd_lease_ttl(ha->etcd, prev, NULL) ==
		    KVF_ERR_OBJECT_NOT_FOUND) {
			fprintf(stderr, "ha: the previous lease is over\n");
			*warm_until = now;
		}
		*poll_at = kvf__now_ns() + HA_RETRY_NS;
	}
	if (now < *warm_until)
		return;
	set_role(ha, KVF_HA_LEADER);
	fprintf(stderr, "ha: leading, view version %llu\n",
		(unsigned long long)kvf_ha_view_version(ha));
}

/* Hold the key created at @rev until it is lost or we stop. */
static void lead(struct kvf_ha *ha, uint64_t granted_at, int64_t rev)
{
	uint64_t warm_until = kvf__now_ns() + ha->ttl_ns + ha->margin_ns;
	uint64_t next = granted_at + ha->renew_ns, poll_at = 0;
	int64_t prev = replaces_seen(ha, rev) ? ha->seen_lease : 0;
	const char *why = NULL;

	ha->seen_lease = 0;
	(void)take_aside(ha); /* asked of an earlier term */
	fprintf(stderr, "ha: elected, view version %llu; %s\n",
		(unsigned long long)rev,
		prev ? "serving once the previous leader's lease is gone"
		     : "serving after a full TTL (the previous leader is "
		       "not known)");
	for (;;) {
		uint64_t wake = next;

		if (kvf_ha_role(ha) == KVF_HA_WARMUP)
			warm_up(ha, prev, &warm_until, &poll_at);
		if (kvf_ha_role(ha) == KVF_HA_WARMUP) {
			if (warm_until < wake)
				wake = warm_until;
			if (prev && poll_at < wake)
				wake = poll_at;
		}
		if (!sleep_until(ha, wake))
			return; /* kvf_ha_stop() revokes */
		if (take_aside(ha)) {
			step_down(ha,
				  "stepped aside (this master cannot serve)",
				  false);
			return;
		}
		if (kvf__now_ns() < next)
			continue;
		switch (renew(ha, &why)) {
		case -1:
			step_down(ha, why, why == fencing_why);
			return;
		case 0: /* retry sooner: the deadline leaves room */
			next = kvf__now_ns() + ha->renew_ns / 2;
			break;
		default:
			next = kvf__now_ns() + ha->renew_ns;
		}
	}
}

/*
 * After a lost race with --ha_publish_legacy_key: is it the <= v0.3.7
 * key, not ours, that another master (another cluster, or an upstream
 * master) holds while ours is absent? Then say so once and retry slowly:
 * that key names one leader per etcd, whatever the cluster.
 */
static bool legacy_held(struct kvf_ha *ha)
{
	struct kvf_etcd_kv kv;
	bool found;

	if (ha->nkeys < 2 ||
	    kvf_etcd_get(ha->etcd, ha->key, ha->klen, &kv, &found))
		return false;
	if (found) {
		kvf_etcd_kv_clear(&kv);
		return false; /* a competitor of our own cluster won */
	}
	if (!ha->legacy_logged)
		fprintf(stderr,
			"ha: cannot lead: the key %s is held by a "
			"master of another cluster; retrying\n",
			KVF_HA_LEGACY_KEY);
	ha->legacy_logged = true;
	return true;
}

static void *campaign(void *arg)
{
	struct kvf_ha *ha = arg;
	bool logged_standby = false;

	while (!stopping(ha)) {
		struct kvf_etcd_kv kv;
		struct kvf_etcd_event ev;
		bool found, created, fired;
		int64_t rev = 0;
		uint64_t t0;
		int ret;

		/* not leading: a step aside is only its hold (below) */
		(void)take_aside(ha);
		ret = kvf_etcd_get(ha->etcd, ha->key, ha->klen, &kv, &found);
		if (ret) {
			sleep_until(ha, kvf__now_ns() + HA_RETRY_NS);
			continue;
		}
		if (found) {
			if (!logged_standby)
				fprintf(stderr, "ha: standby; leader is %s\n",
					kv.value);
			logged_standby = true;
			seen(ha, kv.value, (uint64_t)kv.create_revision);
			ha->seen_lease = kv.lease;
			ha->seen_mod = kv.mod_revision;
			set_role(ha, KVF_HA_STANDBY);
			ret = kvf_etcd_watch(ha->etcd, ha->key, ha->klen, false,
					     kv.mod_revision + 1, HA_WATCH_MS,
					     &ev, &fired);
			kvf_etcd_kv_clear(&kv);
			if (ret)
				sleep_until(ha, kvf__now_ns() + HA_RETRY_NS);
			continue;
		}
		logged_standby = false;
		if (kvf__now_ns() < atomic_load(&ha->aside_until)) {
			set_role(ha, KVF_HA_STANDBY); /* stepped aside */
			sleep_until(ha, kvf__now_ns() + HA_RETRY_NS);
			continue;
		}
		if (ha->may_campaign && !ha->may_campaign(ha->campaign_ctx)) {
			set_role(ha, KVF_HA_STANDBY); /* not fit to lead */
			sleep_until(ha, kvf__now_ns() + HA_RETRY_NS);
			continue;
		}
		set_role(ha, KVF_HA_CANDIDATE);
		t0 = kvf__now_ns();
		ret = kvf_etcd_lease_grant(ha->etcd, ha->ttl_s, &ha->lease);
		if (ret) {
			ha->lease = 0;
			sleep_until(ha, kvf__now_ns() + HA_RETRY_NS);
			continue;
		}
		ret = kvf_etcd_create_all(ha->etcd, ha->keys, ha->nkeys,
					  ha->advertise, strlen(ha->advertise),
					  ha->lease, &created, &rev);
		if (ret || !created || rev <= 0) {
			kvf_etcd_lease_revoke(ha->etcd, ha->lease);
			ha->lease = 0;
			if (ret || (!created && legacy_held(ha)))
				sleep_until(ha, kvf__now_ns() + HA_RETRY_NS);
			continue;
		}
		atomic_store_explicit(&ha->held_lease, ha->lease,
				      memory_order_release);
		atomic_store_explicit(&ha->view, (uint64_t)rev,
				      memory_order_release);
		atomic_store_explicit(&ha->deadline_ns,
				      t0 + ha->ttl_ns - ha->margin_ns,
				      memory_order_release);
		seen(ha, ha->advertise, (uint64_t)rev);
		atomic_fetch_add(&ha->elected, 1);
		set_role(ha, KVF_HA_WARMUP);
		lead(ha, t0, rev);
	}
	return NULL;
}

/* ---- lifetime ------------------------------------------------------------ */

int kvf_ha_start(const struct kvf_ha_options *opts, struct kvf_ha **out)
{
	pthread_condattr_t ca;
	struct kvf_ha *ha;
	unsigned timeout_ms;
	int ret;

	if (!opts->ttl_s || !opts->advertise || !*opts->advertise ||
	    !opts->endpoints)
		return KVF_ERR_INVALID_ARGUMENT;
	ha = calloc(1, sizeof(*ha));
	if (!ha)
		return KVF_ERR_NO_MEMORY;
	ha->klen = kvf_ha_key(opts->cluster_id, ha->key, sizeof(ha->key));
	if (!ha->klen) {
		free(ha);
		return KVF_ERR_INVALID_ARGUMENT;
	}
	ha->keys[0] = (struct kvf_etcd_key){.key = ha->key, .len = ha->klen};
	ha->nkeys = 1;
	if (opts->legacy_key)
		ha->keys[ha->nkeys++] =
			(struct kvf_etcd_key){.key = KVF_HA_LEGACY_KEY,
					      .len = strlen(KVF_HA_LEGACY_KEY)};
	ha->ttl_s = opts->ttl_s;
	ha->may_campaign = opts->may_campaign;
	ha->campaign_ctx = opts->campaign_ctx;
	ha->ttl_ns = opts->ttl_s * KVF__NS_PER_SEC;
	ha->renew_ns = ha->ttl_ns / 4;
	ha->margin_ns = ha->ttl_ns / 4;
	/* One request may take a renewal period (at least 0.5 s, so a busy
	 * machine does not fail them all); the deadline does not wait. */
	timeout_ms = (unsigned)(ha->renew_ns / KVF__NS_PER_MS);
	if (timeout_ms < 500)
		timeout_ms = 500;
	if (timeout_ms > 2000)
		timeout_ms = 2000;
	ret = kvf_etcd_new(opts->endpoints, timeout_ms, &ha->etcd);
	if (ret)
		goto err_free;
	ha->advertise = strdup(opts->advertise);
	if (!ha->advertise) {
		ret = KVF_ERR_NO_MEMORY;
		goto err_etcd;
	}
	atomic_init(&ha->role, KVF_HA_CANDIDATE);
	pthread_mutex_init(&ha->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&ha->cv, &ca);
	pthread_condattr_destroy(&ca);
	if (pthread_create(&ha->thread, NULL, campaign, ha)) {
		ret = KVF_ERR_NO_MEMORY;
		goto err_sync;
	}
	*out = ha;
	return KVF_OK;
err_sync:
	pthread_cond_destroy(&ha->cv);
	pthread_mutex_destroy(&ha->mu);
	free(ha->advertise);
err_etcd:
	kvf_etcd_free(ha->etcd);
err_free:
	free(ha);
	return ret;
}

void kvf_ha_stop(struct kvf_ha *ha)
{
	if (!ha)
		return;
	pthread_mutex_lock(&ha->mu);
	ha->stop = true;
	atomic_store_explicit(&ha->role, KVF_HA_STOPPED, memory_order_release);
	pthread_cond_broadcast(&ha->cv);
	pthread_mutex_unlock(&ha->mu);
	pthread_join(ha->thread, NULL);
	atomic_store_explicit(&ha->deadline_ns, 0, memory_order_release);
	if (ha->lease && !kvf_etcd_lease_revoke(ha->etcd, ha->lease))
		fprintf(stderr, "ha: lease revoked, key released\n");
	pthread_cond_destroy(&ha->cv);
	pthread_mutex_destroy(&ha->mu);
	free(ha->advertise);
	kvf_etcd_free(ha->etcd);
	free(ha);
}

void kvf_ha_step_aside(struct kvf_ha *ha, uint64_t hold_ns)
{
	if (!ha)
		return;
	pthread_mutex_lock(&ha->mu);
	ha->aside = true;
	atomic_store(&ha->aside_until, kvf__now_ns() + hold_ns);
	pthread_cond_broadcast(&ha->cv);
	pthread_mutex_unlock(&ha->mu);
}

int64_t kvf_ha_lease(const struct kvf_ha *ha)
{
	return kvf_ha_view_version(ha)
		       ? atomic_load_explicit(&ha->held_lease,
					      memory_order_acquire)
		       : 0;
}
