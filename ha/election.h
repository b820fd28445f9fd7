/* SPDX-License-Identifier: MIT */
/*
 * ha/election.h - leader election for kvforge-master through etcd, with
 * upstream Mooncake's contract (so unmodified clients find the leader):
 * the key "mooncake-store/<cluster_id>/master_view", whose value is the
 * leader's plain "host:port", created only if absent in one transaction
 * bound to a lease; the view version is the key's create revision.
 *
 * Fencing: the leader may answer clients only while
 * kvf_ha_may_serve() is true, i.e. before its fencing deadline: the
 * send time of its last confirmed lease renewal + TTL - margin, on this
 * host's monotonic clock. etcd counts the TTL from when it handled that
 * renewal, which is later, so the deadline passes before the lease can
 * have expired, however long etcd takes to answer (or if it never does:
 * a frozen etcd member cannot extend it). A new leader waits until the
 * previous holder's lease is known to be gone (or a full TTL + margin)
 * before serving.
 */
#ifndef KVF_HA_ELECTION_H
#define KVF_HA_ELECTION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct kvf_ha;

/* The election key of Mooncake <= v0.3.7 (no cluster id in it). */
#define KVF_HA_LEGACY_KEY "mooncake-store/master_view"

/* The roles, as upstream's /health names them. */
enum kvf_ha_role {
	KVF_HA_CANDIDATE, /* reading the key, about to try to take it */
	KVF_HA_STANDBY,	  /* another master holds the key */
	KVF_HA_WARMUP,	  /* holds the key, waits out the previous lease */
	KVF_HA_LEADER,	  /* holds the key and may serve */
	KVF_HA_STOPPED,	  /* kvf_ha_stop() ran */
};

/**
 * struct kvf_ha_options - what to campaign with.
 * @endpoints: etcd endpoints, as kvf_etcd_new().
 * @cluster_id: the key's namespace (one trailing '/' is dropped, as
 *	upstream); empty means $MC_STORE_CLUSTER_ID, else mooncake_cluster.
 * @advertise: the "host:port" published as the leader's address.
 * @ttl_s: the lease's TTL in seconds (at least 1).
 * @may_campaign: optional; called by the election thread each time it
 *	finds the key absent: false keeps this master a standby (it tries
 *	again a little later), e.g. while it lacks records the last leader
 *	acknowledged. May block briefly.
 * @campaign_ctx: passed to @may_campaign.
 * @legacy_key: also publish KVF_HA_LEGACY_KEY, the spelling Mooncake
 *	clients up to v0.3.7 read, with the same value and lease in the
 *	same transaction (both must be absent; the leader steps down when
 *	either is no longer its own). That key has no cluster id: one
 *	cluster per etcd may publish it.
 */
struct kvf_ha_options {
	const char *endpoints;
	const char *cluster_id;
	const char *advertise;
	unsigned ttl_s;
	bool (*may_campaign)(void *ctx);
	void *campaign_ctx;
	bool legacy_key;
};

/**
 * kvf_ha_start() - start campaigning in a thread of its own.
 * @opts: copied. @out: the election.
 *
 * Return: %KVF_OK, %KVF_ERR_INVALID_ARGUMENT (bad endpoints, TTL 0, an
 * empty or over-long address or cluster id), %KVF_ERR_NO_MEMORY.
 * Context: blocks only to start the thread; etcd need not be up.
 */
int kvf_ha_start(const struct kvf_ha_options *opts, struct kvf_ha **out);

/**
 * kvf_ha_stop() - stop campaigning and free @ha. A leader's lease is
 * revoked (its key disappears at once, so a standby takes over without
 * waiting for the TTL); callers stop serving first.
 * Context: any thread but the election's; blocks up to about a second
 * (the etcd request in flight), plus the revoke.
 */
void kvf_ha_stop(struct kvf_ha *ha);

/**
 * kvf_ha_step_aside() - give the leadership up, if held, and do not
 * campaign for @hold_ns: for a leader that cannot serve (its promotion
 * failed), so that another master takes over instead of the cluster
 * having a leader that answers nothing. Not serving any more is
 * immediate (kvf_ha_may_serve() turns false once the election thread
 * acts, within milliseconds); the lease is revoked, so the key goes at
 * once. A standby holds back from campaigning likewise.
 * Context: any thread but the election's; takes the election's mutex
 * briefly, never blocks on etcd.
 */
void kvf_ha_step_aside(struct kvf_ha *ha, uint64_t hold_ns);

/**
 * kvf_ha_may_serve() - is this master the leader, with a live lease?
 * Lock-free (two atomic loads and a clock read); any thread.
 */
bool kvf_ha_may_serve(const struct kvf_ha *ha);

/** kvf_ha_role() - the current role (lock-free, any thread). */
enum kvf_ha_role kvf_ha_role(const struct kvf_ha *ha);

/**
 * kvf_ha_view_version() - the view version while warming up or leading
 * (the key's create revision), else 0. Lock-free, any thread.
 */
uint64_t kvf_ha_view_version(const struct kvf_ha *ha);

/**
 * kvf_ha_lease() - the etcd lease this master holds the key with while
 * warming up or leading (keys bound to it vanish with the leadership),
 * else 0. Lock-free, any thread.
 */
int64_t kvf_ha_lease(const struct kvf_ha *ha);

/**
 * struct kvf_ha_status - what /health and /metrics show of the election.
 * @role: kvf_ha_role().
 * @serving: kvf_ha_may_serve().
 * @leader: the leader's "host:port" as this master last read or wrote
 *	the key ("" before the first read); may be stale while it campaigns.
 * @view: that key's create revision (the view version; 0 before).
 * @elected: times this master created the key (won an election).
 * @lost: times it gave the leadership up other than by kvf_ha_stop().
 * @fenced: of @lost, those because its fencing deadline passed with no
 *	renewal confirmed (etcd unreachable, or this process was frozen).
 */
struct kvf_ha_status {
	enum kvf_ha_role role;
	bool serving;
	char leader[256];
	uint64_t view;
	uint64_t elected, lost, fenced;
};

/**
 * kvf_ha_status() - fill @st. Context: any thread; takes the election's
 * mutex briefly (never held across an etcd request).
 */
void kvf_ha_status(struct kvf_ha *ha, struct kvf_ha_status *st);

/**
 * kvf_ha_wait() - wait until kvf_ha_may_serve() may have changed or
 * @timeout_ms passed: returns at once on a role change, and a leader
 * returns no later than its fencing deadline.
 * Return: kvf_ha_may_serve() on return.
 * Context: any thread; blocks.
 */
bool kvf_ha_wait(struct kvf_ha *ha, unsigned timeout_ms);

/**
 * kvf_ha_key() - the election key for @cluster_id into @buf.
 * Return: its length, or 0 if it does not fit in @len.
 */
size_t kvf_ha_key(const char *cluster_id, char *buf, size_t len);

/** kvf_ha_role_name() - "leader", "standby", ... for logs and /health. */
const char *kvf_ha_role_name(enum kvf_ha_role role);

#endif /* KVF_HA_ELECTION_H */
