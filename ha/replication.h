/* SPDX-License-Identifier: MIT */
/*
 * ha/replication.h - hot standbys for kvforge-master: the leader streams
 * its journal's records to every standby over TCP; a standby appends
 * them, in order, to its own journal, so a promoted standby opens its
 * engine from a journal that holds everything the leader acknowledged.
 *
 * Leader: kvf_repl_lead_start() installs a tap on the engine's journal
 * (journal/journal.h): each batch is copied into an in-memory backlog
 * when it takes its sequence numbers and streamed from there; with
 * sync_standbys = N an append returns only once N standbys acknowledged
 * its last sequence number as durable in their journals.
 *
 * Standby: kvf_repl_follow_start() opens the journal of the data
 * directory itself (no engine), finds the leader's replication address
 * in etcd (kvforge/<cluster_id>/replication/leader, bound to the
 * leader's lease) and follows it until kvf_repl_follow_stop().
 *
 * The sync set: the standbys an append waits for. A standby joins it
 * once it is close to the end of the stream, and is listed in etcd
 * (kvforge/<cluster_id>/replication/sync, guarded by the election key's
 * create revision so only the current leader writes it) once it holds
 * everything acknowledged; a standby that stops acknowledging for
 * sync_timeout_ms is removed from the etcd list before appends go on
 * without it. Only the last leader and the listed standbys campaign.
 *
 * Both sides keep DATA/ha-lineage: the views this journal's history went
 * through and the sequence each began after, so a standby whose journal
 * holds records the leader's history does not (a deposed leader's
 * unacknowledged tail) is refused instead of extended.
 */
#ifndef KVF_HA_REPLICATION_H
#define KVF_HA_REPLICATION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "journal/journal.h"

struct kvf_repl_leader;
struct kvf_repl_follower;
/* Batches a standby applied, handed to its leader side on promotion. */
struct kvf_repl_backlog;

/** kvf_repl_backlog_free() - free @bl (NULL is ignored). */
void kvf_repl_backlog_free(struct kvf_repl_backlog *bl);

/* Longest cluster id, token and member name a hello may carry. */
#define KVF_REPL_STR_MAX 1024u

/**
 * struct kvf_repl_options - replication settings (both roles).
 * @endpoints: etcd endpoints, as kvf_etcd_new().
 * @cluster_id: the cluster (as kvf_ha_options; empty: the environment's).
 * @token: the shared secret peers must present; may be empty.
 * @member: this master's name in logs and hellos (its RPC address).
 * @bind_host: address the leader's replication listener binds.
 * @port: its port; 0 = any (it is published in etcd either way).
 * @advertise_host: the host published for standbys to dial.
 * @data_dir: the journal's directory (the lineage file lives there).
 * @jcfg: how a standby opens that journal (as the engine would).
 * @sync_standbys: standbys that must acknowledge an append (0: none).
 * @sync_timeout_ms: how long an append waits for them.
 * @sync_degrade: past that timeout, acknowledge without them (and admit
 *	further appends) until enough standbys are back; else refuse
 *	appends while fewer than @sync_standbys standbys are connected.
 * @backlog_bytes: records kept in memory for standbys that reconnect.
 * @state_fn: standby: applies a state item the leader replicates (see
 *	kvf_repl_lead_set_state()): @item, its whole content @data of @len
 *	bytes (valid during the call). Called on the follower's thread, in
 *	the order the leader set them; a non-zero kvf_status refuses the
 *	frame (logged, the connection is dropped, nothing is acknowledged).
 *	NULL: items are acknowledged and dropped. @state_ctx: its context.
 */
struct kvf_repl_options {
	const char *endpoints;
	const char *cluster_id;
	const char *token;
	const char *member;
	const char *bind_host;
	uint16_t port;
	const char *advertise_host;
	const char *data_dir;
	struct kvf__journal_config jcfg;
	unsigned sync_standbys;
	unsigned sync_timeout_ms;
	bool sync_degrade;
	uint64_t backlog_bytes;
	int (*state_fn)(void *ctx, unsigned item, const uint8_t *data,
			size_t len);
	void *state_ctx;
};

/**
 * struct kvf_repl_stats - what /metrics and /health show.
 * @leading: the leader side runs (else the standby side, if any).
 * @standbys: standbys connected and past the handshake (leader).
 * @synced: members of the sync set (leader): standbys that hold every
 *	record acknowledged, listed in etcd, so they may campaign.
 * @sync_standbys: the configured N. @degraded: acknowledging without N.
 * @last_seq: last sequence in this master's journal.
 * @lag_records, @lag_bytes: leader: records and bytes the slowest
 *	connected standby has not acknowledged; standby: records the leader
 *	announced that this standby has not appended yet.
 * @connected: standby: following a leader now. @view: the view followed
 *	or led. @refused: hellos or frames refused, ever.
 */
struct kvf_repl_stats {
	bool leading;
	unsigned standbys, synced, sync_standbys;
	bool degraded, connected;
	uint64_t last_seq, lag_records, lag_bytes, view, refused;
};

/**
 * kvf_repl_lead_start() - serve standbys from @j as the leader of @view.
 * @o: copied. @j: the engine's journal (must outlive the leader).
 * @view: the view version; @lease: the election's lease (the published
 *	address is bound to it).
 * @bl: the batches this master applied as a standby (taken, may be
 *	NULL): the start of the backlog, so standbys a little behind it can
 *	follow. @out: the leader.
 *
 * Records (view, last sequence) in the lineage file, binds the listener,
 * publishes its address in etcd and installs the journal tap. Call before
 * the RPC port opens.
 * Return: %KVF_OK, %KVF_ERR_IO (lineage, socket, etcd), %KVF_ERR_NO_MEMORY.
 * Context: blocks (file sync, an etcd put).
 */
int kvf_repl_lead_start(const struct kvf_repl_options *o,
			struct kvf__journal *j, uint64_t view, int64_t lease,
			struct kvf_repl_backlog *bl,
			struct kvf_repl_leader **out);

/**
 * kvf_repl_lead_set_state() - replicate a new content of a state item.
 * @l: the leader. @item: which (below %KVF_REPL_STATE_MAX; the caller
 *	gives each a meaning). @data, @len: its whole content, copied (at
 *	most 64 MiB).
 * @wait: wait, as an append does, until the sync set holds it.
 *
 * Besides its journal a master has state that is small and rewritten
 * whole (the segment table, the metadata store): each standby receives
 * an item's latest content after its handshake and whenever it changes,
 * in the order of the calls, and acknowledges it once applied
 * (kvf_repl_options.state_fn). Serialise calls for one item.
 * Return: %KVF_OK; with @wait as kvf__journal_append()'s wait: the sync
 * set did not take it in time (%KVF_ERR_JOURNAL) or the leadership is
 * lost (%KVF_ERR_CLOSED); %KVF_ERR_INVALID_ARGUMENT, %KVF_ERR_NO_MEMORY.
 * Context: any thread; with @wait it blocks (up to the sync timeout).
 */
int kvf_repl_lead_set_state(struct kvf_repl_leader *l, unsigned item,
			    const void *data, size_t len, bool wait);

/**
 * kvf_repl_lead_abort() - make every append waiting for standbys return
 * %KVF_ERR_CLOSED now, and every later one at once (the leadership is
 * lost; appends must not hold the RPC threads). Never blocks.
 */
void kvf_repl_lead_abort(struct kvf_repl_leader *l);

/**
 * kvf_repl_lead_drain() - the graceful hand-over's last step before the
 * lease is revoked: wait until every standby connected now (past the
 * handshake) acknowledged every record journaled so far, so the one
 * that takes over has them all, whatever --ha_sync_standbys is. Call
 * once the RPC server stopped (nothing new is acknowledged); logs what
 * it waits for and how it ended.
 * Return: %KVF_OK; %KVF_ERR_BUSY: not within sync_timeout_ms (the
 *	hand-over goes on: a standby that lacks records then does not
 *	campaign while it is outside the sync set, ha/replication.h).
 * Context: blocks.
 */
int kvf_repl_lead_drain(struct kvf_repl_leader *l);

/**
 * kvf_repl_lead_await_set() - a promotion that failed after its view's
 * sync set was published: wait until that set names @sync_standbys
 * standbys (those the options asked for, at least one), so that they
 * may campaign once this master steps aside. Until then the set names
 * this master alone, and no other master campaigns. Call only while
 * nothing of this view was acknowledged (the RPC server never started):
 * a standby joins the set once it holds everything journaled.
 * Return: %KVF_OK, at once when the set is "*" (sync_standbys 0: anyone
 *	campaigns); %KVF_ERR_BUSY: not within sync_timeout_ms (the set
 *	stays as it is: this master campaigns again after its hold).
 * Context: blocks.
 */
int kvf_repl_lead_await_set(struct kvf_repl_leader *l);

/**
 * kvf_repl_lead_stop() - remove the tap, close the listener and every
 * standby connection, free @l (NULL is ignored). Call once the RPC
 * threads are stopped. Context: blocks (joins threads).
 */
void kvf_repl_lead_stop(struct kvf_repl_leader *l);

/**
 * kvf_repl_follow_start() - open the journal in @o->data_dir and follow
 * the leader. Return: %KVF_OK or the journal's open error (the directory
 * is locked while following); %KVF_ERR_NO_MEMORY.
 */
int kvf_repl_follow_start(const struct kvf_repl_options *o,
			  struct kvf_repl_follower **out);

/**
 * kvf_repl_follow_stop() - stop following, close the journal, free @f
 * (NULL is ignored). With @keep, *@keep receives the batches it applied
 * last (up to the backlog size) for kvf_repl_lead_start().
 * Context: blocks (joins the thread, syncs).
 */
void kvf_repl_follow_stop(struct kvf_repl_follower *f,
			  struct kvf_repl_backlog **keep);

/**
 * kvf_repl_may_campaign() - kvf_ha_options.may_campaign for a follower
 * (@ctx; NULL: true): false while its journal diverged from the leader's
 * history, or while the last leader's sync set (etcd key
 * kvforge/<cluster>/replication/sync) names neither it as that leader
 * nor it as a member, or names it (an address) while its journal's
 * lineage does not end at the set's view (an emptied or new journal
 * under a named address): it may lack records that leader
 * acknowledged. Context: the election thread; blocks (an etcd read).
 */
bool kvf_repl_may_campaign(void *ctx);

/**
 * kvf_repl_hold_begin() - from now on, in this thread, an append that
 * must wait for the sync standbys returns at once and only notes its
 * last sequence; kvf_repl_hold_park() says what the answers wait for
 * (the highest noted). The RPC threads bracket the answers of one
 * wake-up of a connection with the pair, so the burst waits for one
 * acknowledgement instead of one per mutation, and hold every answer of
 * it until that acknowledgement came.
 * Meanwhile the mutations are applied on the leader: another client may
 * see them before they are acknowledged (docs/ha.md).
 * Without a leader (or with --ha_sync_standbys=0) nothing is noted.
 * Context: any thread; never blocks.
 */
void kvf_repl_hold_begin(void);

/**
 * kvf_repl_hold_admit() - in a hold, would the leader take a client's
 * mutation now? A PutStart asks before placing anything: it is refused
 * like a mutation while fewer than --ha_sync_standbys standbys are
 * connected (not in degrade mode), or once the leadership was aborted,
 * rather than placed and then held for an acknowledgement that cannot
 * come in time.
 * Return: %KVF_OK (also outside a hold, without a leader or sync
 * standbys), %KVF_ERR_JOURNAL (refused) or %KVF_ERR_CLOSED (aborted).
 * Context: any thread; takes the leader's mutex briefly.
 */
int kvf_repl_hold_admit(void);

/**
 * kvf_repl_hold_note_latest() - in a hold, make the held answers wait
 * also for every record committed so far: a PutStart that placed
 * something calls it after placing, so its answer never hands out space
 * whose freeing (another connection's remove, an eviction) the sync
 * standbys have not acknowledged (docs/ha.md). Nothing is noted outside
 * a hold, without a leader or sync standbys, or when the standbys
 * already hold every record.
 * Context: any thread; takes the leader's mutex briefly; never blocks
 * on standbys.
 */
void kvf_repl_hold_note_latest(void);

/**
 * kvf_repl_hold_drop() - end the hold without waiting: the held answers
 * will never be sent (their connection closes). Never blocks.
 */
void kvf_repl_hold_drop(void);

/**
 * struct kvf_repl_park - answers held for the sync standbys, parked
 * instead of waited for (kvf_repl_hold_park()).
 * @l: the leader whose standbys must acknowledge (NULL: nothing to wait
 *	for). @seq: the last sequence they must hold. @t0: when the wait
 *	began (the sync timeout runs from it).
 */
struct kvf_repl_park {
	struct kvf_repl_leader *l;
	uint64_t seq;
	uint64_t t0;
};

/* kvf_repl_park_check(): not acknowledged yet; the waiter is armed */
#define KVF_REPL_PARKED 1

/** An RPC thread's handle for parked answers (kvf_repl_waiter_new()). */
struct kvf_repl_waiter;

/**
 * kvf_repl_waiter_new() - a handle through which the leader wakes the
 * calling RPC thread when answers it parked may be looked at again.
 * @efd: an eventfd in the thread's epoll set; the leader writes 1 to it
 *	(never reads it: the thread does), from its ack reader when the
 *	standbys' acknowledgements cover the lowest sequence the thread
 *	waits for, and on any other change of the sync state (a standby
 *	failed, the sync set changed, the leadership aborted).
 * Return: the handle, or NULL when out of memory.
 * Context: any thread; never blocks.
 */
struct kvf_repl_waiter *kvf_repl_waiter_new(int efd);

/**
 * kvf_repl_waiter_free() - forget @w (NULL is ignored); @efd stays
 * open. Call before the leader it parked with stops (the RPC threads
 * stop first). Context: takes that leader's mutex.
 */
void kvf_repl_waiter_free(struct kvf_repl_waiter *w);

/**
 * kvf_repl_hold_park() - end the hold without waiting: the pending
 * records go out to the standbys and @pk says what the held answers
 * wait for; the thread then serves other requests (the same
 * connection's next ones too) and asks kvf_repl_park_check() again when
 * @w's eventfd fires, or every 100 ms for the sync timeout.
 * @w: the calling thread's waiter (NULL, or one registered with another
 *	leader: the call waits here for the acknowledgement, and fills @pk
 *	with nothing to wait for).
 * @pk: filled; @pk->l is NULL when nothing was noted (the answers may
 *	go now).
 * Return: %KVF_OK, or (only when it waited here) the wait's error
 * (%KVF_ERR_CLOSED: leadership aborted; %KVF_ERR_JOURNAL: not
 * acknowledged in time): the held answers must then not be sent.
 * Context: the thread that called kvf_repl_hold_begin(); does not wait
 * for standbys (it may block briefly writing to their sockets).
 */
int kvf_repl_hold_park(struct kvf_repl_waiter *w, struct kvf_repl_park *pk);

/**
 * kvf_repl_park_check() - may the answers parked as @pk be sent?
 * @w: the thread's waiter, armed for @pk->seq when the answer is not
 *	known yet (so its eventfd fires when it may be).
 * Return: %KVF_OK (the sync standbys hold @pk->seq, or the leader went
 * on without them in degrade mode: send them); %KVF_REPL_PARKED (not
 * yet); %KVF_ERR_CLOSED (the leadership was aborted: a fenced leader
 * sends no parked answer, acknowledged or not) or %KVF_ERR_JOURNAL (not
 * acknowledged within the sync timeout): never send them.
 * Context: the parking thread; never blocks on standbys.
 */
int kvf_repl_park_check(struct kvf_repl_waiter *w,
			const struct kvf_repl_park *pk);

/**
 * kvf_repl_park_wait() - wait until kvf_repl_park_check() would not say
 * %KVF_REPL_PARKED, and return what it would say (the RPC server's
 * stop: the answers parked then go out if acknowledged in time).
 * Context: blocks, up to the sync timeout from @pk->t0 (twice that while
 * a lagging member is not yet out of the sync set).
 */
int kvf_repl_park_wait(const struct kvf_repl_park *pk);

/* kvf_repl_lead_stats(), kvf_repl_follow_stats() - fill @st. Any thread. */
void kvf_repl_lead_stats(struct kvf_repl_leader *l, struct kvf_repl_stats *st);
void kvf_repl_follow_stats(struct kvf_repl_follower *f,
			   struct kvf_repl_stats *st);

#endif /* KVF_HA_REPLICATION_H */
