// SPDX-License-Identifier: MIT
/*
 * ha/replication.c - the leader's side of replication: the journal tap,
 * the backlog of batches, one connection per standby, the sync wait.
 *
 * Backlog: the tap's committed() hook copies each batch, with the
 * journal's mutex held and so in sequence order, into a ring of batches
 * indexed by a counter that only grows (slot = index % RING). Batches
 * are dropped from the old end when the ring holds more than
 * backlog_bytes or RING batches; a batch a sender is writing stays
 * allocated until that sender lets go (refs). A standby whose next batch
 * was dropped is disconnected: it lost its place in the stream.
 *
 * Standbys: the acceptor thread takes connections and starts a sender
 * thread per connection, which checks the hello (cluster id, token,
 * lineage: ha/repl_wire.h), answers WELCOME or REFUSE, starts the
 * connection's ack reader and then writes batches in order (all those
 * pending, up to SEND_BATCHES, in one writev), or a heartbeat when there
 * has been nothing to send for HEARTBEAT_MS. A connection that fails
 * either way is shut down; both its threads end and the acceptor reaps
 * it.
 *
 * Sync: an RPC thread answers a burst of requests inside a hold
 * (kvf_repl_hold_begin()): wait() only notes the last sequence; at the
 * end of the burst the thread writes the pending batches to the
 * standbys itself (kick(): the peer's txmu orders it with the sender
 * thread, which is then not woken) and parks the burst's answers
 * (kvf_repl_hold_park(): master/conn.c keeps them) until sync_standbys
 * standbys of the sync set acknowledged that sequence (their journal has
 * it at their durability), the leadership is aborted, or
 * sync_timeout_ms passes (then the parked answers are dropped, or with
 * sync_degrade the leader goes on without them until enough are back).
 * sync_step() is that decision, taken by kvf_repl_park_check() without
 * waiting and by sync_wait() in a loop (state items, a thread without a
 * waiter, the RPC server's stop).
 * admit() refuses a client's appends up front while fewer than
 * sync_standbys standbys are connected (not in degrade mode), so a
 * refused mutation leaves nothing behind. Appends outside a hold (the
 * master's own: expiry, eviction, the registry's sweep) are neither
 * refused nor waited for.
 *
 * Parked answers' wake-ups: an ack, a change of the sync set, a failed
 * standby or the abort writes the eventfd of each RPC thread (waiter)
 * whose lowest parked sequence it may release (wake_waiters(); one
 * write until the thread looked again, so a thread is woken once per
 * ack that concerns it and never for one that does not).
 *
 * State items (kvf_repl_lead_set_state()): besides the journal, whole
 * contents the master rewrites on change (its segment table, its
 * metadata store). The leader keeps the latest of each with a generation
 * that grows with every set; a sender writes an item whose generation is
 * newer than the one it last sent before its next batch (so a standby
 * gets every item after its handshake, and only the latest when several
 * sets came quickly). A standby acknowledges the generation it applied;
 * a waiting set() uses the sync wait of appends, on that generation.
 * Items are reference-counted like batches: a set may replace the one a
 * sender is writing.
 *
 * Locking: one mutex (mu) for the ring, the standby list, the waiters
 * and the counters; data_cv wakes senders, ack_cv wakes waiters. No
 * socket I/O under mu (eventfd writes aside). A peer's txmu (taken
 * before mu) serialises its writes once it streams; a peer a kicking
 * thread uses is pinned (users) so the acceptor does not reap it
 * meanwhile. committed() runs under the journal's mutex and takes mu
 * (the journal's mutex is never taken under mu).
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <kvforge/status.h>

#include "base/clock.h"
#include "ha/election.h"
#include "ha/etcd.h"
#include "ha/repl_wire.h"
#include "ha/replication.h"
#include "journal/record.h"

#define RING 65536u
#define HEARTBEAT_MS 500u
#define HELLO_TIMEOUT_S 5
#define SEND_TIMEOUT_S 10
/* Batches (and bytes, about) one writev() to a standby carries. */
#define SEND_BATCHES 32u
#define SEND_BYTES (1u << 20)

#define batch kvf_repl_batch

struct peer {
	struct kvf_repl_leader *l;
	struct peer *next;
	int fd;
	pthread_t tx, rx;
	bool rx_started;
	/* writes to @fd once streaming, and @next; taken before l->mu */
	pthread_mutex_t txmu;
	uint64_t ri; /* ring index of the next batch to send (txmu + mu) */
	/* under l->mu */
	bool streaming; /* past the handshake */
	bool ready;	/* welcomed: anyone holding txmu may send to it */
	unsigned users; /* holding threads using it without mu (no reap) */
	bool dead;
	bool tx_done, rx_done;
	uint64_t sent, acked; /* last sequence sent / acknowledged */
	uint64_t acked_at;    /* when @acked last moved (or it connected) */
	/* the sync set: appends wait for @required standbys; @published
	 * ones are listed in etcd (they may campaign) */
	bool required, published, leaving;
	uint64_t join_seq; /* published once it acknowledged this */
	bool snapshot;	   /* behind the backlog: catches up from a snapshot */
	uint64_t snap_seq; /* ... ending here (0: not read yet) */
	/* state items: generations sent / acknowledged */
	uint64_t state_sent[KVF_REPL_STATE_MAX];
	uint64_t state_acked[KVF_REPL_STATE_MAX];
	char member[128];
};

/* A state item's content (see the design notes). */
struct state_blob {
	uint32_t refs; /* senders writing it; under mu */
	bool current;  /* the leader's latest; under mu */
	uint64_t gen;
	size_t len;
	uint8_t data[];
};

struct kvf_repl_leader {
	struct kvf_repl_options o;
	char cluster[256], token[KVF_REPL_STR_MAX + 1];
	char dir[4096];
	struct kvf__journal *j;
	uint64_t view;
	struct kvf_repl_lineage lin; /* under mu after start */
	int lfd;
	pthread_t acceptor, syncer;
	bool syncer_started;
	struct kvf_etcd *etcd;
	char member[256];
	char guard[512], synckey[512]; /* the election key, the sync key */
	size_t glen, sklen;

	pthread_mutex_t mu;
	pthread_cond_t data_cv, ack_cv, sync_cv;
	struct batch *ring[RING];
	uint64_t lo, hi; /* batches [lo, hi) are in the ring */
	uint64_t ring_bytes;
	uint64_t last_seq; /* last sequence committed */
	struct peer *peers;
	bool stop;
	_Atomic bool aborted;
	bool degraded;
	uint64_t refused, last_refusal_log;
	struct state_blob *state[KVF_REPL_STATE_MAX];
	uint64_t state_gen; /* last generation given to an item */
	struct kvf_repl_waiter *waiters; /* RPC threads that parked answers */
};

/*
 * An RPC thread's parked answers (kvf_repl_hold_park()): the thread is
 * woken through @efd when the sync point reaches @want, the lowest
 * sequence it waits for (0: it waits for none, or was woken and has not
 * looked again). Registered with one leader (@l, for the thread's life:
 * the RPC threads end before the leader stops); @want and @next under
 * that leader's mu.
 */
struct kvf_repl_waiter {
	int efd;
	struct kvf_repl_leader *l;
	struct kvf_repl_waiter *next;
	uint64_t want;
};

/* ---- the ring ----------------------------------------------------------- */

static void batch_put(struct batch *b)
{
	if (!b->refs && !b->in_ring)
		free(b);
}

/* With mu held. */
static void drop_oldest(struct kvf_repl_leader *l)
{
	struct batch *b = l->ring[l->lo % RING];

	l->ring[l->lo % RING] = NULL;
	l->lo++;
	l->ring_bytes -= b->len;
	b->in_ring = false;
	batch_put(b);
}

/*
 * The hold (kvf_repl_hold_begin()): this thread's appends note the
 * highest sequence they need acknowledged and the leader they belong to
 * instead of waiting; hold_park() parks the answers for it. The leader outlives
 * the note: the RPC threads end before kvf_repl_lead_stop().
 *
 * Appends outside a hold are the master's own (the engine's expiry and
 * eviction, the registry's sweep), answered to no client: they are
 * neither refused nor waited for, so a leader short of sync standbys
 * still expires and evicts; they reach the standbys in sequence order
 * with everything else (the backlog, when one comes back), before any
 * later client mutation can be acknowledged.
 */
static _Thread_local struct {
	bool on;
	uint64_t seq;
	struct kvf_repl_leader *l;
} hold;

static void tap_committed(void *ctx, const uint8_t *frames, size_t len,
			  uint32_t nr_frames, uint64_t nr_recs,
			  uint64_t first_seq)
{
	struct kvf_repl_leader *l = ctx;
	struct batch *b = malloc(sizeof(*b) + len);

	pthread_mutex_lock(&l->mu);
	if (first_seq != l->last_seq + 1 && l->lo < l->hi) {
		/* appended without the tap (before it was installed):
		 * standbys cannot stream across the hole */
		fprintf(stderr,
			"replication: sequences %llu..%llu never "
			"reached the backlog\n",
			(unsigned long long)l->last_seq + 1,
			(unsigned long long)first_seq - 1);
		while (l->lo < l->hi)
			drop_oldest(l);
	}
	l->last_seq = first_seq + nr_recs - 1;
	if (!b) {
		/* The stream has a hole now: every standby must reconnect
		 * (and is refused until it is past it). */
		while (l->lo < l->hi)
			drop_oldest(l);
		l->lo = l->hi;
		pthread_mutex_unlock(&l->mu);
		return;
	}
	b->first = first_seq;
	b->nr_recs = nr_recs;
	b->nr_frames = nr_frames;
	b->refs = 0;
	b->in_ring = true;
	b->len = len;
	memcpy(b->data, frames, len);
	if (l->hi - l->lo == RING)
		drop_oldest(l);
	l->ring[l->hi % RING] = b;
	l->hi++;
	l->ring_bytes += len;
	while (l->ring_bytes > l->o.backlog_bytes && l->hi - l->lo > 1)
		drop_oldest(l);
	/* a thread in a hold sends it itself (kick()) before it waits */
	if (!hold.on || !l->o.sync_standbys)
		pthread_cond_broadcast(&l->data_cv);
	pthread_mutex_unlock(&l->mu);
}

/* ---- sync --------------------------------------------------------------- */

/* With mu held: standbys past the handshake, and those that have @seq. */
static unsigned count_standbys(struct kvf_repl_leader *l, uint64_t seq,
			       unsigned *have)
{
	unsigned n = 0, h = 0;

	for (struct peer *p = l->peers; p; p = p->next) {
		if (p->dead || !p->streaming)
			continue;
		n++;
		h += p->acked >= seq;
	}
	if (have)
		*have = h;
	return n;
}

/* What @p acknowledged: the journal's sequence (@item < 0) or the
 * generation of state item @item. */
static uint64_t peer_acked(const struct peer *p, int item)
{
	return item < 0 ? p->acked : p->state_acked[item];
}

/*
 * With mu held: the sync set's members (dead ones included until the
 * syncer removed them), and whether all of them have @seq (of @item).
 */
static unsigned count_required(struct kvf_repl_leader *l, int item,
			       uint64_t seq, bool *all_have)
{
	unsigned n = 0;

	*all_have = true;
	for (struct peer *p = l->peers; p; p = p->next) {
		if (!p->required)
			continue;
		n++;
		if (p->dead || peer_acked(p, item) < seq)
			*all_have = false;
	}
	return n;
}

static int tap_admit(void *ctx)
{
	struct kvf_repl_leader *l = ctx;
	unsigned n;

	if (atomic_load(&l->aborted))
		return KVF_ERR_CLOSED;
	/* outside a hold: not a client's mutation (below) */
	if (!l->o.sync_standbys || l->o.sync_degrade || !hold.on)
		return KVF_OK;
	pthread_mutex_lock(&l->mu);
	n = count_standbys(l, 0, NULL);
	if (n < l->o.sync_standbys) {
		uint64_t now = kvf__now_ns();

		if (now - l->last_refusal_log > KVF__NS_PER_SEC) {
			l->last_refusal_log = now;
			fprintf(stderr,
				"replication: refusing mutations: %u of %u "
				"sync standbys connected "
				"(--ha_sync_standbys)\n",
				n, l->o.sync_standbys);
		}
		pthread_mutex_unlock(&l->mu);
		return KVF_ERR_JOURNAL;
	}
	pthread_mutex_unlock(&l->mu);
	return KVF_OK;
}

static void abs_deadline(struct timespec *ts, uint64_t ns)
{
	ts->tv_sec = (time_t)(ns / KVF__NS_PER_SEC);
	ts->tv_nsec = (long)(ns % KVF__NS_PER_SEC);
}

/*
 * Acknowledged = every member of the sync set has it, and the set has at
 * least sync_standbys members (or, degraded, fewer). A member that stops
 * acknowledging is taken out of the set by the syncer (in etcd first)
 * after sync_timeout_ms; only then may an append go on without it.
 */
static void kick(struct kvf_repl_leader *l);

/* sync_step(): not decided yet; the caller waits and looks again */
#define SYNC_PENDING 1

/*
 * With mu held: one look at whether @seq (of @item), waited for since
 * @t0, is acknowledged (KVF_OK), failed (the leadership was aborted, or
 * the timeout passed) or still pending (SYNC_PENDING).
 */
static int sync_step(struct kvf_repl_leader *l, int item, uint64_t seq,
		     uint64_t t0, uint64_t now)
{
	uint64_t until = t0 + (uint64_t)l->o.sync_timeout_ms * 1000000ull;
	bool all;
	unsigned n = count_required(l, item, seq, &all);

	if (all && n >= l->o.sync_standbys) {
		if (l->degraded) {
			l->degraded = false;
			fprintf(stderr,
				"replication: %u sync standbys "
				"again: synchronous\n",
				n);
		}
		return KVF_OK;
	}
	if (atomic_load(&l->aborted))
		return KVF_ERR_CLOSED;
	if (all && l->o.sync_degrade && (l->degraded || now >= until)) {
		if (!l->degraded)
			fprintf(stderr,
				"replication: only %u of %u sync "
				"standbys within %u ms: acknowledging "
				"without them until they are back\n",
				n, l->o.sync_standbys, l->o.sync_timeout_ms);
		l->degraded = true;
		return KVF_OK;
	}
	/* a member that lags is removed after the timeout; give the
	 * syncer that long again before giving up */
	if (now >= until + (all ? 0 : until - t0)) {
		fprintf(stderr,
			"replication: %s %llu not acknowledged "
			"by %u sync standbys within %u ms: the "
			"mutation fails\n",
			item < 0 ? "sequence" : "state generation",
			(unsigned long long)seq, l->o.sync_standbys,
			l->o.sync_timeout_ms);
		return KVF_ERR_JOURNAL;
	}
	return SYNC_PENDING;
}

static int sync_wait_since(struct kvf_repl_leader *l, int item,
			   uint64_t last_seq, uint64_t t0)
{
	int rc;

	pthread_mutex_lock(&l->mu);
	while ((rc = sync_step(l, item, last_seq, t0, kvf__now_ns())) ==
	       SYNC_PENDING) {
		struct timespec ts;

		abs_deadline(&ts, kvf__now_ns() + 100000000ull);
		pthread_cond_timedwait(&l->ack_cv, &l->mu, &ts);
	}
	pthread_mutex_unlock(&l->mu);
	return rc;
}

/*
 * Acknowledged = every member of the sync set has it, and the set has at
 * least sync_standbys members (or, degraded, fewer). A member that stops
 * acknowledging is taken out of the set by the syncer (in etcd first)
 * after sync_timeout_ms; only then may an append go on without it.
 */
static int sync_wait(struct kvf_repl_leader *l, int item, uint64_t last_seq)
{
	return sync_wait_since(l, item, last_seq, kvf__now_ns());
}

/*
 * With mu held: the highest sequence sync_step() would call acknowledged
 * now (0: none), a hint for waking parked answers; sync_step() decides.
 */
static uint64_t sync_point(const struct kvf_repl_leader *l)
{
	uint64_t min = UINT64_MAX;
	unsigned n = 0;

	for (const struct peer *p = l->peers; p; p = p->next) {
		if (!p->required)
			continue;
		if (p->dead)
			return 0;
		n++;
		if (p->acked < min)
			min = p->acked;
	}
	return n >= l->o.sync_standbys || l->degraded ? min : 0;
}

/*
 * With mu held: wake the RPC threads whose parked answers wait for a
 * sequence up to @upto (UINT64_MAX: every thread that waits, for a
 * change other than an ack: the sync set, a failed standby, the abort).
 * One write per wait: a thread is not woken again until it looked.
 */
static void wake_waiters(struct kvf_repl_leader *l, uint64_t upto)
{
	uint64_t one = 1;

	for (struct kvf_repl_waiter *w = l->waiters; w; w = w->next) {
		if (!w->want || w->want > upto)
			continue;
		w->want = 0;
		if (write(w->efd, &one, sizeof(one)) < 0) {
			/* the counter is full: the thread is woken anyway */
		}
	}
}

void kvf_repl_hold_begin(void)
{
	hold.on = true;
}

void kvf_repl_hold_drop(void)
{
	hold.on = false;
	hold.seq = 0;
	hold.l = NULL;
}

struct kvf_repl_waiter *kvf_repl_waiter_new(int efd)
{
	struct kvf_repl_waiter *w = calloc(1, sizeof(*w));

	if (w)
		w->efd = efd;
	return w;
}

void kvf_repl_waiter_free(struct kvf_repl_waiter *w)
{
	struct kvf_repl_leader *l;

	if (!w)
		return;
	l = w->l;
	if (l) {
		pthread_mutex_lock(&l->mu);
		for (struct kvf_repl_waiter **pp = &l->waiters; *pp;
		     pp = &(*pp)->next) {
			if (*pp == w) {
				*pp = w->next;
				break;
			}
		}
		pthread_mutex_unlock(&l->mu);
	}
	free(w);
}

int kvf_repl_hold_park(struct kvf_repl_waiter *w, struct kvf_repl_park *pk)
{
	struct kvf_repl_leader *l = hold.l;
	uint64_t seq = hold.seq;
	bool other;

	kvf_repl_hold_drop();
	*pk = (struct kvf_repl_park){0};
	if (!l)
		return KVF_OK;
	kick(l);
	pthread_mutex_lock(&l->mu);
	other = !w || (w->l && w->l != l);
	if (!other && !w->l) {
		w->l = l;
		w->next = l->waiters;
		l->waiters = w;
	}
	pthread_mutex_unlock(&l->mu);
	if (other) /* no thread to wake for this leader: wait here */
		return sync_wait(l, -1, seq);
	pk->l = l;
	pk->seq = seq;
	pk->t0 = kvf__now_ns();
	return KVF_OK;
}

int kvf_repl_park_check(struct kvf_repl_waiter *w,
			const struct kvf_repl_park *pk)
{
	struct kvf_repl_leader *l = pk->l;
	int rc;

	if (!l)
		return KVF_OK;
	/* fenced: not even an acknowledged answer goes out any more */
	if (atomic_load(&l->aborted))
		return KVF_ERR_CLOSED;
	pthread_mutex_lock(&l->mu);
	rc = sync_step(l, -1, pk->seq, pk->t0, kvf__now_ns());
	if (rc == SYNC_PENDING && w && (!w->want || pk->seq < w->want))
		w->want = pk->seq;
	pthread_mutex_unlock(&l->mu);
	return rc == SYNC_PENDING ? KVF_REPL_PARKED : rc;
}

int kvf_repl_park_wait(const struct kvf_repl_park *pk)
{
	if (!pk->l)
		return KVF_OK;
	if (atomic_load(&pk->l->aborted))
		return KVF_ERR_CLOSED;
	return sync_wait_since(pk->l, -1, pk->seq, pk->t0);
}

static int tap_wait(void *ctx, uint64_t last_seq)
{
	struct kvf_repl_leader *l = ctx;

	if (!l->o.sync_standbys || !hold.on)
		return KVF_OK; /* not a client's mutation (below) */
	if (!hold.l || hold.l == l) {
		hold.l = l;
		if (last_seq > hold.seq)
			hold.seq = last_seq;
		return KVF_OK;
	}
	return sync_wait(l, -1, last_seq);
}

/*
 * The leader whose tap is installed (NULL: none), for
 * kvf_repl_hold_note_latest(), whose callers (a PutStart) append nothing
 * and so never meet the tap. Set once the tap is in, cleared before it
 * is taken out; the RPC threads, its only readers, end before
 * kvf_repl_lead_stop(), so the leader outlives every use.
 */
static _Atomic(struct kvf_repl_leader *) leading;

int kvf_repl_hold_admit(void)
{
	struct kvf_repl_leader *l = atomic_load(&leading);

	return l && hold.on ? tap_admit(l) : KVF_OK;
}

/*
 * Why a PutStart waits (docs/ha.md): the space it places may have been
 * freed a moment ago by another connection's remove (or by an eviction)
 * whose record the sync standbys do not hold yet. Should this leader
 * die then, the new one still lists that object, while the PutStart's
 * client has written over its space. So the answer waits for every
 * record committed so far.
 * That covers the free: a remover appends its record (committed(),
 * which raises last_seq under mu, runs inside the append), and only
 * after the append returns unlinks and frees the replicas
 * (engine/remove.c, shared by removes, evictions and sweeps); the
 * allocation that reuses the space comes after that free (the
 * allocator's lock orders them), and this read of last_seq under mu
 * after the allocation. A whole segment goes only after its unmount is
 * journaled, and is not there to allocate from any more.
 */
void kvf_repl_hold_note_latest(void)
{
	struct kvf_repl_leader *l = atomic_load(&leading);
	uint64_t seq;

	if (!l || !l->o.sync_standbys || !hold.on)
		return;
	pthread_mutex_lock(&l->mu);
	seq = l->last_seq;
	/* the standbys hold it all: nothing to wait for (a fenced leader
	 * parks it anyway: kvf_repl_park_check() then never sends it) */
	if (sync_point(l) >= seq && !atomic_load(&l->aborted))
		seq = 0;
	pthread_mutex_unlock(&l->mu);
	if (seq)
		(void)tap_wait(l, seq);
}

/* ---- the sync set ------------------------------------------------------ */

/* Publish @members (comma-separated) as the sync set, if still leading. */
static int publish_set(struct kvf_repl_leader *l, const char *members)
{
	size_t cap = strlen(members) + 600;
	char *val = malloc(cap);
	bool done = false;
	int n, ret;

	if (!val)
		return KVF_ERR_NO_MEMORY;
	n = snprintf(val, cap, "%llu %s %s", (unsigned long long)l->view,
		     l->member, members);
	ret = kvf_etcd_put_guarded(l->etcd, l->guard, l->glen, (int64_t)l->view,
				   l->synckey, l->sklen, val, (size_t)n, &done);
	free(val);
	if (!ret && !done)
		ret = KVF_ERR_BUSY; /* the election key is not ours any more */
	return ret;
}

/* With mu held: a standby receiving or installing a snapshot. */
static bool installing(const struct peer *p)
{
	return p->snapshot && (!p->snap_seq || p->acked < p->snap_seq);
}

/* Within this many records of the end, a standby joins the sync set. */
#define JOIN_WINDOW 4096u

static void *syncer(void *arg)
{
	struct kvf_repl_leader *l = arg;
	uint64_t timeout_ns = (uint64_t)l->o.sync_timeout_ms * 1000000ull;
	uint64_t logged = 0;

	pthread_mutex_lock(&l->mu);
	while (!l->stop) {
		uint64_t now = kvf__now_ns();
		bool change = false;
		struct timespec ts;
		size_t cap = 1, off = 0;
		char *list;

		for (struct peer *p = l->peers; p; p = p->next) {
			if (p->acked >= l->last_seq)
				p->acked_at = now; /* not behind */
			if (!p->required && !p->dead && p->streaming &&
			    !installing(p) &&
			    p->acked + JOIN_WINDOW >= l->last_seq) {
				p->required = true; /* appends wait for it */
				p->join_seq = l->last_seq;
			}
			p->leaving =
				p->required &&
				(p->dead || (p->acked < l->last_seq &&
					     now - p->acked_at > timeout_ns));
			if (p->leaving || (p->required && !p->published &&
					   p->acked >= p->join_seq))
				change = true;
			cap += strlen(p->member) + 1;
		}
		list = change ? malloc(cap) : NULL;
		if (list) {
			list[0] = '\0';
			for (struct peer *p = l->peers; p; p = p->next)
				if (p->required && !p->leaving &&
				    (p->published || p->acked >= p->join_seq))
					off += (size_t)snprintf(
						list + off, cap - off, "%s%s",
						off ? "," : "", p->member);
			pthread_mutex_unlock(&l->mu);
			int ret = publish_set(l, list);
			pthread_mutex_lock(&l->mu);
			if (!ret) {
				fprintf(stderr,
					"replication: sync set now "
					"[%s]\n",
					list);
				for (struct peer *p = l->peers; p;
				     p = p->next) {
					if (p->leaving) {
						p->required = false;
						p->published = false;
						p->leaving = false;
					} else if (p->required &&
						   p->acked >= p->join_seq) {
						p->published = true;
					}
				}
				pthread_cond_broadcast(&l->ack_cv);
				wake_waiters(l, UINT64_MAX);
			} else if (now - logged > KVF__NS_PER_SEC) {
				logged = now;
				fprintf(stderr,
					"replication: cannot publish "
					"the sync set: %s\n",
					kvf_strerror(ret));
			}
			free(list);
		}
		abs_deadline(&ts, kvf__now_ns() + 50000000ull);
		pthread_cond_timedwait(&l->sync_cv, &l->mu, &ts);
	}
	pthread_mutex_unlock(&l->mu);
	return NULL;
}

/* ---- one standby -------------------------------------------------------- */

static void peer_fail(struct peer *p, const char *why)
{
	struct kvf_repl_leader *l = p->l;

	pthread_mutex_lock(&l->mu);
	if (!p->dead && why)
		fprintf(stderr, "replication: standby %s dropped: %s\n",
			p->member[0] ? p->member : "(unnamed)", why);
	p->dead = true;
	pthread_cond_broadcast(&l->ack_cv);
	wake_waiters(l, UINT64_MAX);
	pthread_cond_broadcast(&l->data_cv);
	pthread_cond_signal(&l->sync_cv);
	pthread_mutex_unlock(&l->mu);
	shutdown(p->fd, SHUT_RDWR);
}

static void *ack_reader(void *arg)
{
	struct peer *p = arg;
	struct kvf_repl_leader *l = p->l;
	const char *why = NULL;

	for (;;) {
		struct kvf_repl_hdr h;
		uint8_t *pl;
		int rc = kvf__repl_read_frame(p->fd, &h, &pl, 0);

		if (rc) {
			why = rc == -2 ? "malformed frame" : NULL;
			break;
		}
		if (h.type == KVF_REPL_STATE_ACK) {
			pthread_mutex_lock(&l->mu);
			if (h.seq > p->state_sent[h.count] ||
			    h.seq < p->state_acked[h.count]) {
				pthread_mutex_unlock(&l->mu);
				why = "acknowledged a state never sent";
				break;
			}
			p->state_acked[h.count] = h.seq;
			pthread_cond_broadcast(&l->ack_cv);
			pthread_mutex_unlock(&l->mu);
			continue;
		}
		if (h.type != KVF_REPL_ACK) {
			why = "unexpected frame";
			break;
		}
		pthread_mutex_lock(&l->mu);
		if (h.seq < p->acked || h.seq > p->sent) {
			pthread_mutex_unlock(&l->mu);
			why = "acknowledged a sequence never sent";
			break;
		}
		if (h.seq > p->acked)
			p->acked_at = kvf__now_ns();
		p->acked = h.seq;
		pthread_cond_broadcast(&l->ack_cv);
		wake_waiters(l, sync_point(l));
		if (!p->published)
			pthread_cond_signal(&l->sync_cv);
		pthread_mutex_unlock(&l->mu);
	}
	peer_fail(p, why ? why : "connection closed");
	pthread_mutex_lock(&l->mu);
	p->rx_done = true;
	pthread_mutex_unlock(&l->mu);
	return NULL;
}

static void refuse(struct peer *p, const char *why)
{
	struct kvf_repl_leader *l = p->l;

	pthread_mutex_lock(&l->mu);
	l->refused++;
	pthread_mutex_unlock(&l->mu);
	fprintf(stderr, "replication: refused %s: %s\n",
		p->member[0] ? p->member : "a peer", why);
	kvf__repl_send(p->fd, KVF_REPL_REFUSE, l->view, 0, 0, why,
		       (uint32_t)strlen(why));
}

/* A 2-byte length and the string; false if it does not fit. */
static bool take_str(const uint8_t **p, const uint8_t *end, char *out,
		     size_t cap)
{
	size_t n;

	if (end - *p < 2)
		return false;
	n = (size_t)(*p)[0] << 8 | (*p)[1];
	*p += 2;
	if (n >= cap || (size_t)(end - *p) < n)
		return false;
	memcpy(out, *p, n);
	out[n] = '\0';
	*p += n;
	return true;
}

/* Constant time in the token's length: a mismatch position leaks nothing. */
static bool same_token(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	unsigned char d = la != lb;

	for (size_t i = 0; i < la; i++)
		d |= (unsigned char)(a[i] ^ b[i % (lb ? lb : 1)]);
	return !d;
}

/* How long a hello waits for its namesake to leave the sync set: less
 * than a standby waits for its welcome (READ_TIMEOUT_S there). */
#define NAMESAKE_WAIT_NS (2 * KVF__NS_PER_SEC)

/* With mu held: a streaming standby other than @p named @member. */
static struct peer *namesake_of(struct kvf_repl_leader *l, const struct peer *p,
				const char *member)
{
	for (struct peer *o = l->peers; o; o = o->next)
		if (o != p && !o->dead && o->streaming &&
		    !strcmp(o->member, member))
			return o;
	return NULL;
}

/* With mu held: a standby named @member still listed in the sync set. */
static bool name_listed(struct kvf_repl_leader *l, const char *member)
{
	for (struct peer *o = l->peers; o; o = o->next)
		if (o->required && !strcmp(o->member, member))
			return true;
	return false;
}

/*
 * A standby says hello under the name of one that is streaming (its
 * restart, or a machine replaced under its address, while the old
 * connection looks alive): the old one is dropped, and the new one is
 * welcomed only once the sync set no longer lists the name. Otherwise
 * the set would name the address while the journal behind it is the
 * new one, which takes the welcome (and the leader's lineage, so it may
 * campaign) before it holds the records the set stands for. Unnamed
 * standbys are not one another's namesakes. NULL, or why the hello is
 * refused (the set could not be published in time).
 */
static const char *supersede_namesake(struct kvf_repl_leader *l, struct peer *p,
				      const char *member)
{
	uint64_t until = kvf__now_ns() + NAMESAKE_WAIT_NS;
	const char *why = NULL;
	struct peer *o;

	if (!member[0])
		return NULL;
	pthread_mutex_lock(&l->mu);
	o = namesake_of(l, p, member);
	if (o)
		o->users++; /* not reaped under peer_fail() */
	pthread_mutex_unlock(&l->mu);
	if (o) {
		peer_fail(o, "a new connection under its name replaces it");
		pthread_mutex_lock(&l->mu);
		o->users--;
		pthread_mutex_unlock(&l->mu);
	}
	pthread_mutex_lock(&l->mu);
	while (name_listed(l, member) && !l->stop && !why) {
		struct timespec ts;

		if (kvf__now_ns() >= until) {
			why = "its name is still in the sync set (retry)";
			break;
		}
		pthread_cond_signal(&l->sync_cv);
		abs_deadline(&ts, kvf__now_ns() + 50000000ull);
		pthread_cond_timedwait(&l->ack_cv, &l->mu, &ts);
	}
	pthread_mutex_unlock(&l->mu);
	return why;
}

/*
 * Check the hello; on success, *@next is the ring index of the first
 * batch to send. Returns NULL or why the peer is refused.
 */
static const char *handshake(struct peer *p, uint64_t *next)
{
	struct kvf_repl_leader *l = p->l;
	char cluster[KVF_REPL_STR_MAX], token[KVF_REPL_STR_MAX];
	char member[sizeof(p->member)];
	struct kvf_repl_hdr h;
	const uint8_t *q, *end;
	uint8_t *pl = NULL;
	const char *why = NULL;
	int rc = kvf__repl_read_frame(p->fd, &h, &pl, 3 * KVF_REPL_STR_MAX);

	if (rc)
		return rc == -2 ? "malformed or oversized hello" : "no hello";
	q = pl;
	end = pl + h.len;
	if (h.type != KVF_REPL_HELLO ||
	    !take_str(&q, end, cluster, sizeof(cluster)) ||
	    !take_str(&q, end, token, sizeof(token)) ||
	    !take_str(&q, end, member, sizeof(member)) || q != end) {
		why = "malformed hello";
		goto out;
	}
	pthread_mutex_lock(&l->mu); /* the syncer reads it */
	memcpy(p->member, member, sizeof(member));
	pthread_mutex_unlock(&l->mu);
	if (strcmp(cluster, l->cluster)) {
		why = "another cluster id";
		goto out;
	}
	if (!same_token(token, l->token)) {
		why = "wrong token (--ha_token_file)";
		goto out;
	}
	why = supersede_namesake(l, p, member);
	if (why)
		goto out;
	pthread_mutex_lock(&l->mu);
	if (!kvf__repl_lineage_accepts(&l->lin, l->last_seq, h.view, h.seq)) {
		why = h.seq > l->last_seq
			      ? "its journal is ahead of the leader's: it "
				"holds records this history does not (start "
				"it with an empty --data-dir)"
			      : "its journal diverged from the leader's "
				"history (start it with an empty --data-dir)";
	} else if (h.seq == l->last_seq) {
		*next = l->hi;
	} else {
		uint64_t i;

		for (i = l->lo; i < l->hi; i++)
			if (l->ring[i % RING]->first == h.seq + 1)
				break;
		p->snapshot = i == l->hi; /* its next batch is gone */
		*next = i;
	}
	if (!why) {
		p->sent = p->acked = h.seq;
		p->acked_at = kvf__now_ns();
		p->streaming = true;
		pthread_cond_signal(&l->sync_cv);
	}
	pthread_mutex_unlock(&l->mu);
out:
	free(pl);
	return why;
}

static int send_welcome(struct peer *p)
{
	struct kvf_repl_leader *l = p->l;
	uint8_t *buf = malloc(KVF_REPL_LINEAGE_MAX * 16);
	uint32_t n;
	uint64_t last;
	int rc;

	if (!buf)
		return -1;
	pthread_mutex_lock(&l->mu);
	n = l->lin.n;
	for (uint32_t i = 0; i < n; i++) {
		struct kvf_repl_hdr e = {.view = l->lin.e[i].view,
					 .seq = l->lin.e[i].seq};
		uint8_t tmp[KVF_REPL_HDR];

		kvf__repl_hdr_put(tmp, &e); /* view and seq at 16 and 24 */
		memcpy(buf + 16 * i, tmp + 16, 16);
	}
	last = l->last_seq;
	pthread_mutex_unlock(&l->mu);
	rc = kvf__repl_send(p->fd, KVF_REPL_WELCOME, l->view, last, n, buf,
			    n * 16);
	free(buf);
	return rc;
}

/*
 * With p->txmu held (not mu): write every batch from p->ri on that is
 * in the ring, SEND_BATCHES at a time, each group in one writev(). The
 * sender thread and a thread ending a hold (kick()) both call it; txmu
 * keeps their frames whole and in order. 0, or -1 (the peer failed).
 */
static int send_pending(struct peer *p)
{
	struct kvf_repl_leader *l = p->l;

	pthread_mutex_lock(&l->mu);
	while (!p->dead && !l->stop && p->ri < l->hi) {
		struct batch *b, *bs[SEND_BATCHES];
		uint8_t hdrs[SEND_BATCHES][KVF_REPL_HDR + 8];
		struct iovec iov[2 * SEND_BATCHES];
		struct kvf_repl_hdr h = {.view = l->view};
		unsigned n = 0;
		size_t bytes = 0;
		int rc = 0;

		if (p->ri < l->lo) {
			pthread_mutex_unlock(&l->mu);
			peer_fail(p, "fell behind the backlog");
			return -1;
		}
		while (n < SEND_BATCHES && p->ri + n < l->hi &&
		       bytes < SEND_BYTES) {
			b = l->ring[(p->ri + n) % RING];
			b->refs++;
			bs[n++] = b;
			bytes += b->len;
		}
		p->sent = bs[n - 1]->first + bs[n - 1]->nr_recs - 1;
		pthread_mutex_unlock(&l->mu);
		for (unsigned i = 0; i < n; i++) {
			h.type = KVF_REPL_RECORDS;
			h.len = (uint32_t)(bs[i]->len + 8);
			h.count = bs[i]->nr_frames;
			h.seq = bs[i]->first;
			kvf__repl_hdr_put(hdrs[i], &h);
			for (int k = 0; k < 8; k++)
				hdrs[i][KVF_REPL_HDR + k] =
					(uint8_t)(bs[i]->nr_recs >>
						  (56 - 8 * k));
			if (bs[i]->len + 8 > KVF_REPL_RECORDS_MAX)
				rc = -2;
			iov[2 * i] = (struct iovec){hdrs[i], sizeof(hdrs[i])};
			iov[2 * i + 1] =
				(struct iovec){bs[i]->data, bs[i]->len};
		}
		if (!rc)
			rc = kvf__repl_writev(p->fd, iov, (int)(2 * n));
		pthread_mutex_lock(&l->mu);
		for (unsigned i = 0; i < n; i++) {
			bs[i]->refs--;
			batch_put(bs[i]);
		}
		if (rc) {
			pthread_mutex_unlock(&l->mu);
			peer_fail(p, rc == -2 ? "a batch too large to stream"
					      : "send failed");
			return -1;
		}
		p->ri += n;
	}
	pthread_mutex_unlock(&l->mu);
	return 0;
}

/*
 * A thread about to wait for acknowledgements sends what is pending
 * itself instead of waking each standby's sender thread (one thread
 * hand-off less on the path of every held answer). Peers it uses are
 * pinned (users) so reap() keeps them.
 */
static void kick(struct kvf_repl_leader *l)
{
	struct peer *todo[16];
	unsigned n = 0;

	pthread_mutex_lock(&l->mu);
	for (struct peer *p = l->peers; p && n < 16; p = p->next) {
		if (p->ready && !p->dead && p->ri < l->hi) {
			p->users++;
			todo[n++] = p;
		}
	}
	pthread_mutex_unlock(&l->mu);
	for (unsigned i = 0; i < n; i++) {
		pthread_mutex_lock(&todo[i]->txmu);
		send_pending(todo[i]);
		pthread_mutex_unlock(&todo[i]->txmu);
	}
	pthread_mutex_lock(&l->mu);
	for (unsigned i = 0; i < n; i++)
		todo[i]->users--;
	pthread_mutex_unlock(&l->mu);
}

/* ---- snapshot catch-up ------------------------------------------------ */

/* Tries at a snapshot whose end the backlog still continues. */
#define SNAP_TRIES 5

struct snap_chunks {
	struct batch *head, *tail;
};

static int snap_chunk(void *arg, const uint8_t *frames, size_t len,
		      uint32_t nr_frames, uint64_t nr_recs)
{
	struct snap_chunks *c = arg;
	struct batch *b = malloc(sizeof(*b) + len);

	if (!b)
		return KVF_ERR_NO_MEMORY;
	memset(b, 0, sizeof(*b));
	b->nr_recs = nr_recs;
	b->nr_frames = nr_frames;
	b->len = len;
	memcpy(b->data, frames, len);
	if (c->tail)
		c->tail->next = b;
	else
		c->head = b;
	c->tail = b;
	return KVF_OK;
}

/* Write one frame of records (RECORDS or SNAP_RECORDS). 0, -1 or -2. */
static int send_batch(struct peer *p, uint8_t type, uint64_t seq,
		      const struct batch *b)
{
	uint8_t hdr[KVF_REPL_HDR + 8];
	struct kvf_repl_hdr h = {.type = type,
				 .view = p->l->view,
				 .len = (uint32_t)(b->len + 8),
				 .count = b->nr_frames,
				 .seq = seq};

	if (b->len + 8 > KVF_REPL_RECORDS_MAX)
		return -2;
	kvf__repl_hdr_put(hdr, &h);
	kvf__put_be64(hdr + KVF_REPL_HDR, b->nr_recs);
	return kvf__repl_write(p->fd, hdr, sizeof(hdr), b->data, b->len);
}

/*
 * The peer's next batch left the backlog: read the journal's state at
 * some sequence S (kvf__journal_snapshot(): appends go on meanwhile),
 * check that the backlog still continues it (else read again: the
 * backlog moved past S while it was read), send it, and stream from S.
 * On success *@next is the ring index of the batch after S. Returns NULL
 * or why the peer is dropped.
 */
static const char *send_snapshot(struct peer *p, uint64_t *next)
{
	struct kvf_repl_leader *l = p->l;
	struct snap_chunks c = {0};
	uint64_t seq = 0, n = 0, t0 = kvf__now_ns();
	const char *why = NULL;
	uint8_t k[8];
	int tries;

	if (kvf__repl_send(p->fd, KVF_REPL_SNAP_WAIT, l->view, 0, 0, NULL, 0))
		return "send failed";
	for (tries = 0; tries < SNAP_TRIES; tries++) {
		bool found = false;
		int rc = kvf__journal_snapshot(l->j, snap_chunk, &c, &seq, &n);

		if (rc) {
			fprintf(stderr,
				"replication: snapshot for standby %s: %s\n",
				p->member, kvf_strerror(rc));
			why = "no snapshot of the journal";
			break;
		}
		pthread_mutex_lock(&l->mu);
		if (seq == l->last_seq) {
			*next = l->hi;
			found = true;
		}
		for (uint64_t i = l->lo; !found && i < l->hi; i++) {
			if (l->ring[i % RING]->first == seq + 1) {
				*next = i;
				found = true;
			}
		}
		if (found) {
			/* its acks may now reach the snapshot's end; until
			 * it installed it, it holds what it held */
			p->sent = p->snap_seq = seq;
			if (p->acked > seq)
				p->acked = seq;
		}
		pthread_mutex_unlock(&l->mu);
		if (found)
			break;
		kvf_repl_backlog_free((struct kvf_repl_backlog *)c.head);
		c.head = c.tail = NULL;
	}
	if (!why && tries == SNAP_TRIES)
		why = "the backlog moved past every snapshot read "
		      "(--ha_replication_backlog_bytes too small for the "
		      "write rate)";
	if (why)
		goto out;
	fprintf(stderr,
		"replication: standby %s catches up from a snapshot: %llu "
		"records up to sequence %llu, read in %llu ms\n",
		p->member, (unsigned long long)n, (unsigned long long)seq,
		(unsigned long long)((kvf__now_ns() - t0) / 1000000));
	kvf__put_be64(k, n);
	if (kvf__repl_send(p->fd, KVF_REPL_SNAP_BEGIN, l->view, seq, 0, k,
			   sizeof(k))) {
		why = "send failed";
		goto out;
	}
	for (struct batch *b = c.head; b && !why; b = b->next) {
		int rc = send_batch(p, KVF_REPL_SNAP_RECORDS, seq, b);

		if (rc)
			why = rc == -2 ? "a snapshot chunk too large to stream"
				       : "send failed";
	}
	if (!why &&
	    kvf__repl_send(p->fd, KVF_REPL_SNAP_END, l->view, seq, 0, NULL, 0))
		why = "send failed";
out:
	kvf_repl_backlog_free((struct kvf_repl_backlog *)c.head);
	return why;
}

static void blob_put(struct state_blob *b)
{
	if (b && !b->refs && !b->current)
		free(b);
}

/*
 * With mu held (dropped while writing): send the first state item newer
 * than what @p was sent. 1 when one was sent, 0 when none is pending,
 * -1 when the send failed.
 */
/* With mu held: is a state item newer than what @p was sent? */
static bool state_pending(const struct peer *p)
{
	for (unsigned i = 0; i < KVF_REPL_STATE_MAX; i++)
		if (p->l->state[i] &&
		    p->l->state[i]->gen > p->state_sent[i])
			return true;
	return false;
}

static int send_state(struct peer *p)
{
	struct kvf_repl_leader *l = p->l;
	struct state_blob *b = NULL;
	unsigned i;
	int rc;

	for (i = 0; i < KVF_REPL_STATE_MAX; i++) {
		b = l->state[i];
		if (b && b->gen > p->state_sent[i])
			break;
	}
	if (i == KVF_REPL_STATE_MAX)
		return 0;
	b->refs++;
	p->state_sent[i] = b->gen;
	pthread_mutex_unlock(&l->mu);
	rc = kvf__repl_send(p->fd, KVF_REPL_STATE, l->view, b->gen, i, b->data,
			    (uint32_t)b->len);
	pthread_mutex_lock(&l->mu);
	b->refs--;
	blob_put(b);
	return rc ? -1 : 1;
}

int kvf_repl_lead_set_state(struct kvf_repl_leader *l, unsigned item,
			    const void *data, size_t len, bool wait)
{
	struct state_blob *b;
	uint64_t gen;

	if (item >= KVF_REPL_STATE_MAX || len > KVF_REPL_RECORDS_MAX)
		return KVF_ERR_INVALID_ARGUMENT;
	if (atomic_load(&l->aborted))
		return KVF_ERR_CLOSED;
	b = malloc(sizeof(*b) + len);
	if (!b)
		return KVF_ERR_NO_MEMORY;
	b->refs = 0;
	b->current = true;
	b->len = len;
	if (len)
		memcpy(b->data, data, len);
	pthread_mutex_lock(&l->mu);
	gen = b->gen = ++l->state_gen;
	if (l->state[item]) {
		l->state[item]->current = false;
		blob_put(l->state[item]);
	}
	l->state[item] = b;
	pthread_cond_broadcast(&l->data_cv);
	pthread_mutex_unlock(&l->mu);
	return wait ? sync_wait(l, (int)item, gen) : KVF_OK;
}

static void *sender(void *arg)
{
	struct peer *p = arg;
	struct kvf_repl_leader *l = p->l;
	struct timeval tv = {.tv_sec = HELLO_TIMEOUT_S};
	const char *why;
	uint64_t next = 0;

	setsockopt(p->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	tv.tv_sec = SEND_TIMEOUT_S;
	setsockopt(p->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	why = handshake(p, &next);
	if (why) {
		refuse(p, why);
		peer_fail(p, NULL);
		goto done;
	}
	if (send_welcome(p)) {
		peer_fail(p, "could not send the welcome");
		goto done;
	}
	tv.tv_sec = 0; /* acks may be far apart */
	setsockopt(p->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	fprintf(stderr, "replication: standby %s follows from sequence %llu\n",
		p->member, (unsigned long long)p->sent + 1);
	pthread_mutex_lock(&l->mu); /* reap() reads it */
	p->rx_started = !pthread_create(&p->rx, NULL, ack_reader, p);
	pthread_mutex_unlock(&l->mu);
	if (!p->rx_started) {
		peer_fail(p, "no thread for its acks");
		goto done;
	}
	if (p->snapshot) {
		why = send_snapshot(p, &next);
		if (why) {
			peer_fail(p, why);
			goto done;
		}
	}
	pthread_mutex_lock(&p->txmu);
	pthread_mutex_lock(&l->mu);
	p->ri = next;
	p->ready = true;
	pthread_mutex_unlock(&l->mu);
	pthread_mutex_unlock(&p->txmu);
	pthread_mutex_lock(&l->mu);
	for (;;) {
		int rc;

		if (p->dead || l->stop)
			break;
		if (state_pending(p)) {
			/* the state frames go out between record batches,
			 * never inside a kick's writev: txmu */
			pthread_mutex_unlock(&l->mu);
			pthread_mutex_lock(&p->txmu);
			pthread_mutex_lock(&l->mu);
			rc = send_state(p);
			pthread_mutex_unlock(&l->mu);
			pthread_mutex_unlock(&p->txmu);
			pthread_mutex_lock(&l->mu);
			if (rc < 0) {
				pthread_mutex_unlock(&l->mu);
				peer_fail(p, "send failed");
				pthread_mutex_lock(&l->mu);
				break;
			}
			continue;
		}
		if (p->ri == l->hi) {
			struct timespec ts;
			uint64_t last = l->last_seq;

			abs_deadline(&ts,
				     kvf__now_ns() + HEARTBEAT_MS * 1000000ull);
			if (!pthread_cond_timedwait(&l->data_cv, &l->mu, &ts))
				continue;
			if (p->ri != l->hi || p->dead || l->stop)
				continue;
			pthread_mutex_unlock(&l->mu);
			pthread_mutex_lock(&p->txmu);
			rc = kvf__repl_send(p->fd, KVF_REPL_HEARTBEAT, l->view,
					    last, 0, NULL, 0);
			pthread_mutex_unlock(&p->txmu);
			pthread_mutex_lock(&l->mu);
			if (rc) {
				pthread_mutex_unlock(&l->mu);
				peer_fail(p, "send failed");
				pthread_mutex_lock(&l->mu);
				break;
			}
			continue;
		}
		pthread_mutex_unlock(&l->mu);
		pthread_mutex_lock(&p->txmu);
		rc = send_pending(p);
		pthread_mutex_unlock(&p->txmu);
		pthread_mutex_lock(&l->mu);
		if (rc)
			break;
	}
	pthread_mutex_unlock(&l->mu);
done:
	pthread_mutex_lock(&l->mu);
	p->tx_done = true;
	pthread_mutex_unlock(&l->mu);
	return NULL;
}

/* With mu held: join and free standbys whose threads both ended. */
static void reap(struct kvf_repl_leader *l, bool all)
{
	struct peer **pp = &l->peers;

	while (*pp) {
		struct peer *p = *pp;

		if (p->users || (!all && (p->required ||
					  !(p->tx_done &&
					    (p->rx_done || !p->rx_started))))) {
			pp = &p->next;
			continue;
		}
		*pp = p->next;
		pthread_mutex_unlock(&l->mu);
		shutdown(p->fd, SHUT_RDWR);
		pthread_join(p->tx, NULL);
		if (p->rx_started)
			pthread_join(p->rx, NULL);
		close(p->fd);
		pthread_mutex_destroy(&p->txmu);
		free(p);
		pthread_mutex_lock(&l->mu);
		pthread_cond_broadcast(&l->ack_cv);
	}
}

static void *acceptor(void *arg)
{
	struct kvf_repl_leader *l = arg;

	pthread_mutex_lock(&l->mu);
	while (!l->stop) {
		struct pollfd pfd = {.fd = l->lfd, .events = POLLIN};
		struct peer *p;
		int fd;

		reap(l, false);
		pthread_mutex_unlock(&l->mu);
		fd = poll(&pfd, 1, 100) > 0 ? accept(l->lfd, NULL, NULL) : -1;
		pthread_mutex_lock(&l->mu);
		if (fd < 0)
			continue;
		p = calloc(1, sizeof(*p));
		if (!p) {
			close(fd);
			continue;
		}
		p->l = l;
		p->fd = fd;
		pthread_mutex_init(&p->txmu, NULL);
		/* a batch must leave at once: appends wait for its ack */
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int){1}, sizeof(int));
		if (pthread_create(&p->tx, NULL, sender, p)) {
			close(fd);
			pthread_mutex_destroy(&p->txmu);
			free(p);
			continue;
		}
		p->next = l->peers;
		l->peers = p;
	}
	pthread_mutex_unlock(&l->mu);
	return NULL;
}

/* ---- start and stop ----------------------------------------------------- */

static int listen_on(struct kvf_repl_leader *l, uint16_t *port)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC,
				 .ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
	struct addrinfo *res;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char svc[8];
	int fd, one = 1;

	snprintf(svc, sizeof(svc), "%u", l->o.port);
	if (getaddrinfo(l->o.bind_host, svc, &hints, &res))
		return -1;
	fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		freeaddrinfo(res);
		return -1;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, res->ai_addr, res->ai_addrlen) || listen(fd, 16) ||
	    getsockname(fd, (struct sockaddr *)&ss, &sl)) {
		freeaddrinfo(res);
		close(fd);
		return -1;
	}
	freeaddrinfo(res);
	*port = ntohs(ss.ss_family == AF_INET6
			      ? ((struct sockaddr_in6 *)&ss)->sin6_port
			      : ((struct sockaddr_in *)&ss)->sin_port);
	l->lfd = fd;
	return 0;
}

static int publish(struct kvf_repl_leader *l, uint16_t port, int64_t lease)
{
	char key[512], val[512];
	size_t klen = kvf__repl_leader_key(l->cluster, key, sizeof(key));
	int n, ret;

	n = snprintf(val, sizeof(val),
		     strchr(l->o.advertise_host, ':') ? "[%s]:%u %llu"
						      : "%s:%u %llu",
		     l->o.advertise_host, port, (unsigned long long)l->view);
	if (!klen || n <= 0 || (size_t)n >= sizeof(val))
		return KVF_ERR_INVALID_ARGUMENT;
	ret = kvf_etcd_put(l->etcd, key, klen, val, (size_t)n, lease);
	if (!ret)
		fprintf(stderr,
			"replication: leader of view %llu, standbys "
			"dial %s:%u\n",
			(unsigned long long)l->view, l->o.advertise_host, port);
	return ret;
}

void kvf_repl_backlog_free(struct kvf_repl_backlog *bl)
{
	struct kvf_repl_batch *b = (struct kvf_repl_batch *)bl;

	while (b) {
		struct kvf_repl_batch *next = b->next;

		free(b);
		b = next;
	}
}

/*
 * Before any append of this view: the batches this master applied as a
 * standby become the start of the ring, if they run up to the journal's
 * end without a hole (standbys that were a little behind this one then
 * catch up from them). Takes @bl.
 */
static void preload(struct kvf_repl_leader *l, struct kvf_repl_backlog *bl)
{
	struct kvf_repl_batch *b = (struct kvf_repl_batch *)bl, *last = NULL;
	bool ok = b != NULL;

	for (struct kvf_repl_batch *x = b; x; x = x->next) {
		if (last && x->first != last->first + last->nr_recs)
			ok = false;
		last = x;
	}
	if (!ok || last->first + last->nr_recs - 1 != l->last_seq) {
		if (b)
			fprintf(stderr, "replication: the records applied as a "
					"standby do not end at the journal's "
					"end: not kept for standbys\n");
		kvf_repl_backlog_free(bl);
		return;
	}
	while (b) {
		struct kvf_repl_batch *next = b->next;

		b->next = NULL;
		b->refs = 0;
		b->in_ring = true;
		if (l->hi - l->lo == RING)
			drop_oldest(l);
		l->ring[l->hi % RING] = b;
		l->hi++;
		l->ring_bytes += b->len;
		while (l->ring_bytes > l->o.backlog_bytes && l->hi - l->lo > 1)
			drop_oldest(l);
		b = next;
	}
}

int kvf_repl_lead_start(const struct kvf_repl_options *o,
			struct kvf__journal *j, uint64_t view, int64_t lease,
			struct kvf_repl_backlog *bl,
			struct kvf_repl_leader **out)
{
	struct kvf__journal_tap tap = {.admit = tap_admit,
				       .committed = tap_committed,
				       .wait = tap_wait};
	struct kvf__journal_stats st;
	struct kvf_repl_leader *l = calloc(1, sizeof(*l));
	uint16_t port;
	int ret = KVF_ERR_IO;

	if (!l) {
		kvf_repl_backlog_free(bl);
		return KVF_ERR_NO_MEMORY;
	}
	l->o = *o;
	l->lfd = -1;
	kvf__repl_cluster(o->cluster_id, l->cluster, sizeof(l->cluster));
	snprintf(l->token, sizeof(l->token), "%s", o->token ? o->token : "");
	snprintf(l->dir, sizeof(l->dir), "%s", o->data_dir);
	l->o.cluster_id = l->o.token = NULL; /* copied above */
	l->o.data_dir = l->dir;
	l->j = j;
	l->view = view;
	pthread_mutex_init(&l->mu, NULL);
	pthread_cond_init(&l->data_cv, NULL);
	{
		pthread_condattr_t ca;

		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_destroy(&l->data_cv);
		pthread_cond_init(&l->data_cv, &ca);
		pthread_cond_init(&l->ack_cv, &ca);
		pthread_cond_init(&l->sync_cv, &ca);
		pthread_condattr_destroy(&ca);
	}
	snprintf(l->member, sizeof(l->member), "%s",
		 o->member ? o->member : "");
	l->o.member = NULL;
	l->glen = kvf_ha_key(o->cluster_id, l->guard, sizeof(l->guard));
	l->sklen = (size_t)snprintf(l->synckey, sizeof(l->synckey),
				    "kvforge/%s/replication/sync", l->cluster);
	ret = kvf_etcd_new(o->endpoints, 0, &l->etcd);
	if (ret)
		goto fail;
	ret = KVF_ERR_IO;
	kvf__journal_get_stats(j, &st);
	l->last_seq = st.last_seq;
	preload(l, bl);
	bl = NULL;
	/* What may fail here fails before this view is in the lineage or
	 * the sync set: a master that cannot lead leaves both as they were,
	 * and the previous set's standbys may still take over. */
	if (listen_on(l, &port)) {
		fprintf(stderr, "replication: cannot listen on %s:%u\n",
			o->bind_host, o->port);
		goto fail;
	}
	if (kvf__repl_lineage_load(o->data_dir, &l->lin)) {
		fprintf(stderr, "replication: %s/ha-lineage is damaged\n",
			o->data_dir);
		goto fail;
	}
	if (kvf__repl_lineage_view(&l->lin) < view)
		kvf__repl_lineage_add(&l->lin, view, st.last_seq);
	if (kvf__repl_lineage_save(o->data_dir, &l->lin)) {
		fprintf(stderr, "replication: cannot write %s/ha-lineage\n",
			o->data_dir);
		goto fail;
	}
	/* Before anything of this view is acknowledged: the standbys of
	 * the previous view may not campaign any more (only this master). */
	ret = publish_set(l, o->sync_standbys ? "" : "*");
	if (ret) {
		fprintf(stderr,
			"replication: cannot publish the sync set: "
			"%s\n",
			kvf_strerror(ret));
		goto fail;
	}
	if (pthread_create(&l->acceptor, NULL, acceptor, l)) {
		ret = KVF_ERR_NO_MEMORY;
		goto fail;
	}
	l->syncer_started = o->sync_standbys &&
			    !pthread_create(&l->syncer, NULL, syncer, l);
	if (o->sync_standbys && !l->syncer_started) {
		kvf_repl_lead_stop(l);
		return KVF_ERR_NO_MEMORY;
	}
	tap.ctx = l;
	kvf__journal_set_tap(j, &tap);
	atomic_store(&leading, l);
	ret = publish(l, port, lease);
	if (ret) {
		fprintf(stderr,
			"replication: cannot publish the address in "
			"etcd: %s\n",
			kvf_strerror(ret));
		kvf_repl_lead_stop(l);
		return ret;
	}
	*out = l;
	return KVF_OK;
fail:
	if (l->lfd >= 0)
		close(l->lfd);
	kvf_etcd_free(l->etcd);
	kvf_repl_backlog_free(bl);
	while (l->lo < l->hi)
		drop_oldest(l);
	free(l);
	return ret;
}

/*
 * With mu held: one wait for an acknowledgement or a change of the sync
 * set (ack_cv), at most 100 ms and not past @until. False, without
 * waiting, once @until has passed.
 */
static bool ack_wait_step(struct kvf_repl_leader *l, uint64_t until)
{
	struct timespec ts;
	uint64_t now = kvf__now_ns();

	if (now >= until)
		return false;
	abs_deadline(&ts,
		     now + 100000000ull < until ? now + 100000000ull : until);
	pthread_cond_timedwait(&l->ack_cv, &l->mu, &ts);
	return true;
}

/* With mu held: the standbys the published sync set names. */
static unsigned count_published(const struct kvf_repl_leader *l)
{
	unsigned n = 0;

	for (const struct peer *p = l->peers; p; p = p->next)
		n += p->published && !p->leaving && !p->dead;
	return n;
}

int kvf_repl_lead_await_set(struct kvf_repl_leader *l)
{
	uint64_t until, t0 = kvf__now_ns();
	unsigned want, have;
	int rc = KVF_OK;

	if (!l || !l->o.sync_standbys)
		return KVF_OK;
	want = l->o.sync_standbys;
	until = t0 + (uint64_t)l->o.sync_timeout_ms * 1000000ull;
	pthread_mutex_lock(&l->mu);
	have = count_published(l);
	if (have < want)
		fprintf(stderr,
			"replication: waiting for %u standbys in the sync set "
			"of view %llu before stepping aside\n",
			want - have, (unsigned long long)l->view);
	while (have < want) {
		if (!ack_wait_step(l, until)) {
			rc = KVF_ERR_BUSY;
			break;
		}
		have = count_published(l);
	}
	pthread_mutex_unlock(&l->mu);
	if (rc)
		fprintf(stderr,
			"replication: the sync set of view %llu names %u of "
			"%u standbys after %u ms; stepping aside anyway\n",
			(unsigned long long)l->view, have, want,
			l->o.sync_timeout_ms);
	else
		fprintf(stderr,
			"replication: the sync set of view %llu names %u "
			"standbys after %.1f ms\n",
			(unsigned long long)l->view, have,
			(double)(kvf__now_ns() - t0) / 1e6);
	return rc;
}

int kvf_repl_lead_drain(struct kvf_repl_leader *l)
{
	uint64_t until, target, t0 = kvf__now_ns();
	unsigned n = 0, have = 0;
	int rc = KVF_OK;

	if (!l)
		return KVF_OK;
	until = t0 + (uint64_t)l->o.sync_timeout_ms * 1000000ull;
	pthread_mutex_lock(&l->mu);
	target = l->last_seq;
	n = count_standbys(l, target, &have);
	if (have < n)
		fprintf(stderr,
			"replication: hand-over: waiting for %u of %u "
			"standbys to hold sequence %llu\n",
			n - have, n, (unsigned long long)target);
	while (have < n) {
		if (!ack_wait_step(l, until)) {
			rc = KVF_ERR_BUSY;
			break;
		}
		n = count_standbys(l, target, &have);
	}
	pthread_mutex_unlock(&l->mu);
	if (rc)
		fprintf(stderr,
			"replication: hand-over: %u of %u standbys hold "
			"sequence %llu after %u ms; handing over anyway\n",
			have, n, (unsigned long long)target,
			l->o.sync_timeout_ms);
	else
		fprintf(stderr,
			"replication: hand-over: %u standbys hold every "
			"record (sequence %llu) after %.1f ms\n",
			n, (unsigned long long)target,
			(double)(kvf__now_ns() - t0) / 1e6);
	return rc;
}

void kvf_repl_lead_abort(struct kvf_repl_leader *l)
{
	if (!l)
		return;
	atomic_store(&l->aborted, true);
	pthread_mutex_lock(&l->mu);
	pthread_cond_broadcast(&l->ack_cv);
	wake_waiters(l, UINT64_MAX);
	pthread_mutex_unlock(&l->mu);
}

void kvf_repl_lead_stop(struct kvf_repl_leader *l)
{
	if (!l)
		return;
	kvf_repl_lead_abort(l);
	atomic_compare_exchange_strong(&leading, &(struct kvf_repl_leader *){l},
				       NULL);
	kvf__journal_set_tap(l->j, NULL);
	pthread_mutex_lock(&l->mu);
	l->stop = true;
	pthread_cond_broadcast(&l->data_cv);
	pthread_cond_broadcast(&l->sync_cv);
	pthread_mutex_unlock(&l->mu);
	pthread_join(l->acceptor, NULL);
	if (l->syncer_started)
		pthread_join(l->syncer, NULL);
	pthread_mutex_lock(&l->mu);
	for (struct peer *p = l->peers; p; p = p->next)
		shutdown(p->fd, SHUT_RDWR);
	reap(l, true);
	while (l->lo < l->hi)
		drop_oldest(l);
	for (unsigned i = 0; i < KVF_REPL_STATE_MAX; i++)
		free(l->state[i]); /* no sender is left */
	pthread_mutex_unlock(&l->mu);
	close(l->lfd);
	pthread_cond_destroy(&l->data_cv);
	pthread_cond_destroy(&l->ack_cv);
	pthread_cond_destroy(&l->sync_cv);
	pthread_mutex_destroy(&l->mu);
	kvf_etcd_free(l->etcd);
	free(l);
}

void kvf_repl_lead_stats(struct kvf_repl_leader *l, struct kvf_repl_stats *st)
{
	uint64_t min = UINT64_MAX;

	memset(st, 0, sizeof(*st));
	if (!l)
		return;
	pthread_mutex_lock(&l->mu);
	st->leading = true;
	st->sync_standbys = l->o.sync_standbys;
	st->degraded = l->degraded;
	st->last_seq = l->last_seq;
	st->view = l->view;
	st->refused = l->refused;
	st->standbys = count_standbys(l, l->last_seq, NULL);
	for (struct peer *p = l->peers; p; p = p->next)
		st->synced += p->published;
	for (struct peer *p = l->peers; p; p = p->next)
		if (!p->dead && p->streaming && p->acked < min)
			min = p->acked;
	if (min != UINT64_MAX && min < l->last_seq) {
		st->lag_records = l->last_seq - min;
		for (uint64_t i = l->lo; i < l->hi; i++) {
			const struct batch *b = l->ring[i % RING];

			if (b->first + b->nr_recs - 1 > min)
				st->lag_bytes += b->len;
		}
	}
	pthread_mutex_unlock(&l->mu);
}
