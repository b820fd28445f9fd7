// SPDX-License-Identifier: MIT
/*
 * ha/follower.c - the standby's side of replication: follow the leader's
 * stream into this master's own journal.
 *
 * One thread: read the leader's replication address from etcd
 * (kvforge/<cluster>/replication/leader, "host:port view", bound to the
 * leader's lease), connect, say hello (cluster id, token, the journal's
 * last sequence and lineage view), take the welcome, store the leader's
 * lineage (before any record of its view is appended, so the file always
 * describes the journal), then append RECORDS batches whole, in order,
 * and acknowledge the last sequence once the append returned (durable at
 * this journal's durability); the batches that arrived together go into
 * one journal append and one ack (follow()). Anything unexpected - a frame of another
 * view, a sequence that does not follow, a malformed or oversized frame,
 * a record the journal refuses - is logged, never applied, and the
 * connection is dropped; the thread tries again a little later.
 * STATE frames (the master's segment table, its metadata store: opaque
 * here) go to kvf_repl_options.state_fn and are acknowledged once it
 * returned; one it refuses is logged and the connection dropped.
 *
 * A REFUSE for divergence means the journal holds records the current
 * history does not (never acknowledged: see set_aside()); they are moved
 * aside and the follower starts again from an empty journal. Until then,
 * and for good if that fails, it does not campaign.
 *
 * Concurrency: the thread owns the journal and the socket; stop() sets
 * the flag, shuts the socket down and joins. Stats are under mu.
 */
#include "config.h"

#include <dirent.h>
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
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <kvforge/status.h>

#include "base/clock.h"
#include "ha/etcd.h"
#include "ha/repl_wire.h"
#include "ha/replication.h"
#include "journal/record.h"

#define RETRY_MS 200u
#define READ_TIMEOUT_S 3 /* heartbeats come every 500 ms */
/* Between a snapshot's frames: the leader reads it first (about a second
 * per million objects, more on a loaded machine). */
#define SNAP_TIMEOUT_S 120
/* Where a snapshot is built, inside the data directory. */
#define SNAP_TMP "snapshot.tmp"

struct kvf_repl_follower {
	struct kvf_repl_options o;
	char cluster[256], token[KVF_REPL_STR_MAX + 1], member[256];
	char dir[4096];
	struct kvf__journal *j;
	struct kvf_etcd *etcd;
	struct kvf_repl_lineage lin;
	/* lin's last view, for the election thread (may_campaign()) */
	_Atomic uint64_t lin_view;
	pthread_t thread;
	_Atomic bool stop;
	_Atomic bool diverged;
	_Atomic bool installing; /* a snapshot is coming in: no campaign */
	bool logged_unfit; /* the election thread's */

	/* the batches applied last, oldest first (the thread's) */
	struct kvf_repl_batch *kept, *kept_tail;
	uint64_t kept_bytes;

	pthread_mutex_t mu;
	int fd; /* under mu; -1 when not connected */
	uint64_t last_seq, leader_seq, view, refused;
	uint64_t snapshots; /* installed */
	bool connected;
};

/* A snapshot being received into DATA/snapshot.tmp (the thread's). */
struct snapin {
	struct kvf__journal *j; /* NULL: none begun */
	uint64_t seq, want, got;
	uint64_t t0;
};

static void pause_ms(struct kvf_repl_follower *f, unsigned ms)
{
	for (unsigned i = 0; i < ms && !atomic_load(&f->stop); i += 20) {
		struct timespec ts = {.tv_nsec = 20000000};

		nanosleep(&ts, NULL);
	}
}

/* "host:port view" from etcd. */
static int find_leader(struct kvf_repl_follower *f, char *host, size_t hlen,
		       char *port, size_t plen, uint64_t *view)
{
	char key[512], *sp, *colon;
	size_t klen = kvf__repl_leader_key(f->cluster, key, sizeof(key));
	struct kvf_etcd_kv kv;
	bool found;
	int ret = kvf_etcd_get(f->etcd, key, klen, &kv, &found);

	if (ret || !found)
		return -1;
	ret = -1;
	sp = strchr(kv.value, ' ');
	if (!sp)
		goto out;
	*sp = '\0';
	*view = strtoull(sp + 1, NULL, 10);
	colon = strrchr(kv.value, ':');
	if (!colon || !*view)
		goto out;
	*colon = '\0';
	if (kv.value[0] == '[') {
		size_t n = strlen(kv.value);

		if (n < 2 || kv.value[n - 1] != ']')
			goto out;
		kv.value[n - 1] = '\0';
		snprintf(host, hlen, "%s", kv.value + 1);
	} else {
		snprintf(host, hlen, "%s", kv.value);
	}
	snprintf(port, plen, "%s", colon + 1);
	ret = 0;
out:
	kvf_etcd_kv_clear(&kv);
	return ret;
}

static int dial(const char *host, const char *port)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_NUMERICSERV};
	struct addrinfo *res;
	struct timeval tv = {.tv_sec = 2};
	int fd, one = 1;

	if (getaddrinfo(host, port, &hints, &res))
		return -1;
	fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0) {
		/* connect() honours the send timeout */
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		if (connect(fd, res->ai_addr, res->ai_addrlen)) {
			close(fd);
			fd = -1;
		}
	}
	freeaddrinfo(res);
	if (fd < 0)
		return -1;
	tv.tv_sec = 10;
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	/* acks are small and the leader waits for them */
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	tv.tv_sec = READ_TIMEOUT_S;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

static void put_str(uint8_t **p, const char *s)
{
	size_t n = strlen(s);

	(*p)[0] = (uint8_t)(n >> 8);
	(*p)[1] = (uint8_t)n;
	memcpy(*p + 2, s, n);
	*p += 2 + n;
}

static int hello(struct kvf_repl_follower *f, int fd)
{
	uint8_t buf[3 * (KVF_REPL_STR_MAX + 2)], *p = buf;

	put_str(&p, f->cluster);
	put_str(&p, f->token);
	put_str(&p, f->member);
	return kvf__repl_send(fd, KVF_REPL_HELLO,
			      kvf__repl_lineage_view(&f->lin), f->last_seq, 0,
			      buf, (uint32_t)(p - buf));
}

static void note_refusal(struct kvf_repl_follower *f, const char *what)
{
	pthread_mutex_lock(&f->mu);
	f->refused++;
	pthread_mutex_unlock(&f->mu);
	fprintf(stderr, "replication: standby: %s\n", what);
}

/* The welcome: the leader's view and lineage. 0, or -1 (logged). */
static int welcome(struct kvf_repl_follower *f, int fd, uint64_t *view)
{
	struct kvf_repl_lineage *lin = malloc(sizeof(*lin));
	struct kvf_repl_hdr h;
	uint8_t *pl;
	int rc = kvf__repl_read_frame(fd, &h, &pl, KVF_REPL_SMALL_MAX);

	if (!lin) {
		free(pl);
		return -1;
	}
	if (rc || (h.type != KVF_REPL_WELCOME && h.type != KVF_REPL_REFUSE)) {
		note_refusal(f, rc == -1 ? "no welcome from the leader"
					 : "malformed welcome");
		rc = -1;
		goto out;
	}
	if (h.type == KVF_REPL_REFUSE) {
		char why[512];

		snprintf(why, sizeof(why), "%.*s", (int)h.len,
			 pl ? (char *)pl : "");
		fprintf(stderr,
			"replication: standby: the leader refused us: "
			"%s\n",
			why);
		if (strstr(why, "diverged") || strstr(why, "ahead"))
			atomic_store(&f->diverged, true);
		rc = -1;
		goto out;
	}
	rc = -1;
	if (h.count > KVF_REPL_LINEAGE_MAX || h.len != h.count * 16u) {
		note_refusal(f, "malformed welcome");
		goto out;
	}
	if (h.view < kvf__repl_lineage_view(&f->lin)) {
		note_refusal(f, "refused a leader of an older view");
		goto out;
	}
	lin->n = 0;
	for (uint32_t i = 0; i < h.count; i++) {
		uint64_t v = kvf__get_be64(pl + 16 * i);
		uint64_t s = kvf__get_be64(pl + 16 * i + 8);

		if (i && v <= lin->e[i - 1].view) {
			note_refusal(f, "malformed lineage");
			goto out;
		}
		kvf__repl_lineage_add(lin, v, s);
	}
	if (kvf__repl_lineage_view(lin) != h.view) {
		note_refusal(f,
			     "the leader's lineage does not end at its view");
		goto out;
	}
	if (kvf__repl_lineage_save(f->dir, lin)) {
		fprintf(stderr,
			"replication: standby: cannot write "
			"%s/ha-lineage\n",
			f->dir);
		goto out;
	}
	f->lin = *lin;
	atomic_store(&f->lin_view, h.view);
	*view = h.view;
	rc = 0;
out:
	free(lin);
	free(pl);
	return rc;
}

struct collect {
	struct kvf__jrec *recs;
	uint64_t n, cap;
};

static int collect_rec(void *arg, const struct kvf__jrec *rec, uint32_t idx)
{
	struct collect *c = arg;

	(void)idx;
	if (c->n == c->cap)
		return KVF_ERR_JOURNAL_CORRUPT;
	c->recs[c->n++] = *rec;
	return 0;
}

/*
 * Decode a RECORDS-shaped payload's @nr records and append them to @j;
 * *@last receives the batch's last sequence. 0, or -1 (logged).
 */
static int append_frames(struct kvf_repl_follower *f, struct kvf__journal *j,
			 const struct kvf_repl_hdr *h, const uint8_t *pl,
			 uint64_t nr, uint64_t *last)
{
	struct collect c = {.recs = malloc(nr * sizeof(*c.recs)), .cap = nr};
	int rc;

	if (!c.recs)
		return -1;
	rc = kvf__frames_decode(pl + 8, h->len - 8, nr, h->count, collect_rec,
				&c);
	if (rc || c.n != nr) {
		free(c.recs);
		note_refusal(f, "records that do not decode");
		return -1;
	}
	rc = kvf__journal_append_seq(j, c.recs, nr, last);
	free(c.recs);
	if (rc) {
		fprintf(stderr, "replication: standby: journal append: %s\n",
			kvf_strerror(rc));
		return -1;
	}
	return 0;
}

/* Keep a copy of an applied batch for a promotion (best effort). */
static void keep(struct kvf_repl_follower *f, const struct kvf_repl_hdr *h,
		 const uint8_t *frames, uint64_t nr)
{
	size_t len = h->len - 8;
	struct kvf_repl_batch *b = malloc(sizeof(*b) + len);

	if (!b) { /* a hole: drop what was kept */
		kvf_repl_backlog_free((struct kvf_repl_backlog *)f->kept);
		f->kept = f->kept_tail = NULL;
		f->kept_bytes = 0;
		return;
	}
	memset(b, 0, sizeof(*b));
	b->first = h->seq;
	b->nr_recs = nr;
	b->nr_frames = h->count;
	b->len = len;
	memcpy(b->data, frames, len);
	if (f->kept_tail)
		f->kept_tail->next = b;
	else
		f->kept = b;
	f->kept_tail = b;
	f->kept_bytes += len;
	while (f->kept_bytes > f->o.backlog_bytes && f->kept != b) {
		struct kvf_repl_batch *old = f->kept;

		f->kept = old->next;
		f->kept_bytes -= old->len;
		free(old);
	}
}

/* Frames and bytes one journal append and one ack may cover. */
#define GROUP_FRAMES 64u
#define GROUP_BYTES (4u << 20)

/* RECORDS frames read but not appended yet (payloads owned). */
struct group {
	struct kvf_repl_hdr h[GROUP_FRAMES];
	uint8_t *pl[GROUP_FRAMES];
	uint64_t nr[GROUP_FRAMES];
	unsigned n;
	uint64_t bytes, recs;
};

static void group_clear(struct group *g)
{
	for (unsigned i = 0; i < g->n; i++)
		free(g->pl[i]);
	g->n = 0;
	g->bytes = g->recs = 0;
}

/* Check a RECORDS frame and add it (taking @pl). 0, or -1 (logged). */
static int group_add(struct kvf_repl_follower *f, struct group *g,
		     const struct kvf_repl_hdr *h, uint8_t *pl)
{
	uint64_t nr, next = f->last_seq + g->recs + 1;

	if (h->len < 8) {
		free(pl);
		note_refusal(f, "malformed records frame");
		return -1;
	}
	nr = kvf__get_be64(pl);
	if (!nr || nr > h->len) { /* every record takes bytes */
		free(pl);
		note_refusal(f, "malformed records frame");
		return -1;
	}
	if (h->seq != next) {
		free(pl);
		note_refusal(f, "records out of sequence");
		return -1;
	}
	g->h[g->n] = *h;
	g->pl[g->n] = pl;
	g->nr[g->n] = nr;
	g->n++;
	g->bytes += h->len;
	g->recs += nr;
	return 0;
}

/*
 * Append every frame of @g as one batch (one journal append, so one
 * sync at this journal's durability) and empty @g. 0, or -1 (logged;
 * nothing of the group is appended).
 */
static int group_apply(struct kvf_repl_follower *f, struct group *g)
{
	struct collect c = {0};
	uint64_t last = 0;
	int rc = 0;

	if (!g->n)
		return 0;
	c.recs = malloc(g->recs * sizeof(*c.recs));
	c.cap = g->recs;
	if (!c.recs) {
		group_clear(g);
		return -1;
	}
	for (unsigned i = 0; i < g->n && !rc; i++) {
		uint64_t before = c.n;

		rc = kvf__frames_decode(g->pl[i] + 8, g->h[i].len - 8, g->nr[i],
					g->h[i].count, collect_rec, &c);
		if (!rc && c.n - before != g->nr[i])
			rc = -1;
	}
	if (rc) {
		free(c.recs);
		group_clear(g);
		note_refusal(f, "records that do not decode");
		return -1;
	}
	rc = kvf__journal_append_seq(f->j, c.recs, c.n, &last);
	free(c.recs);
	if (rc || last != f->last_seq + g->recs) {
		fprintf(stderr, "replication: standby: journal append: %s\n",
			rc ? kvf_strerror(rc) : "sequence mismatch");
		group_clear(g);
		return -1;
	}
	pthread_mutex_lock(&f->mu);
	f->last_seq = last;
	if (f->leader_seq < last)
		f->leader_seq = last;
	pthread_mutex_unlock(&f->mu);
	for (unsigned i = 0; i < g->n; i++)
		keep(f, &g->h[i], g->pl[i] + 8, g->nr[i]);
	group_clear(g);
	return 0;
}

/* Has the leader sent more that can be read without waiting? */
static bool more_ready(int fd)
{
	struct pollfd pfd = {.fd = fd, .events = POLLIN};

	return poll(&pfd, 1, 0) > 0 && (pfd.revents & POLLIN);
}

static void set_timeout(int fd, int s)
{
	struct timeval tv = {.tv_sec = s};

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

/* Remove DIR/snapshot.tmp and its files (flat: a journal directory). */
static void snap_remove(struct kvf_repl_follower *f)
{
	char tmp[4200], path[4500];
	struct dirent *de;
	DIR *d;

	snprintf(tmp, sizeof(tmp), "%s/" SNAP_TMP, f->dir);
	d = opendir(tmp);
	if (!d)
		return;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		snprintf(path, sizeof(path), "%s/%s", tmp, de->d_name);
		unlink(path);
	}
	closedir(d);
	rmdir(tmp);
}

static void snap_discard(struct kvf_repl_follower *f, struct snapin *sn)
{
	if (sn->j) {
		kvf__journal_close(sn->j);
		sn->j = NULL;
		snap_remove(f);
	}
	atomic_store(&f->installing, false);
}

/* SNAP_BEGIN: a new journal in DIR/snapshot.tmp numbered to end at S. */
static int snap_begin(struct kvf_repl_follower *f, struct snapin *sn,
		      const struct kvf_repl_hdr *h, const uint8_t *pl)
{
	struct kvf__journal_config cfg = f->o.jcfg;
	char tmp[4200];
	int rc;

	if (sn->j || h->len != 8 || kvf__get_be64(pl) > h->seq) {
		note_refusal(f, "malformed snapshot");
		return -1;
	}
	snap_remove(f); /* a crash's leftover */
	snprintf(tmp, sizeof(tmp), "%s/" SNAP_TMP, f->dir);
	cfg.dir = tmp;
	cfg.compact_at_open = 0;
	rc = kvf__journal_open(&cfg, &sn->j);
	if (!rc) {
		sn->seq = h->seq;
		sn->want = kvf__get_be64(pl);
		sn->got = 0;
		sn->t0 = kvf__now_ns();
		rc = kvf__journal_set_base(sn->j, sn->seq - sn->want);
	}
	if (rc) {
		fprintf(stderr,
			"replication: standby: cannot start a "
			"snapshot in %s: %s\n",
			tmp, kvf_strerror(rc));
		snap_discard(f, sn);
		return -1;
	}
	return 0;
}

/* SNAP_RECORDS: append them to the new journal. */
static int snap_records(struct kvf_repl_follower *f, struct snapin *sn,
			const struct kvf_repl_hdr *h, const uint8_t *pl)
{
	uint64_t nr, last = 0;

	if (!sn->j || h->seq != sn->seq || h->len < 8) {
		note_refusal(f, "malformed snapshot");
		return -1;
	}
	nr = kvf__get_be64(pl);
	if (!nr || nr > h->len || nr > sn->want - sn->got) {
		note_refusal(f, "malformed snapshot");
		return -1;
	}
	if (append_frames(f, sn->j, h, pl, nr, &last))
		return -1;
	sn->got += nr;
	return 0;
}

/*
 * SNAP_END: the new journal, with the leader's lineage beside it, is
 * staged as DATA/snapshot.new (the commit point) and installed by
 * reopening the journal (kvf__jdir_install()): a crash at any point
 * leaves the old journal or the new one. 0; -1 (nothing changed, or the
 * journal could not be opened again: f->j is NULL then).
 */
static int snap_end(struct kvf_repl_follower *f, struct snapin *sn,
		    const struct kvf_repl_hdr *h)
{
	struct kvf__journal_stats st;
	char tmp[4200];
	int rc;

	if (!sn->j || h->seq != sn->seq || sn->got != sn->want) {
		note_refusal(f, "incomplete snapshot");
		return -1;
	}
	kvf__journal_get_stats(sn->j, &st);
	kvf__journal_close(sn->j); /* synced */
	sn->j = NULL;
	snprintf(tmp, sizeof(tmp), "%s/" SNAP_TMP, f->dir);
	if (st.last_seq != sn->seq || kvf__repl_lineage_save(tmp, &f->lin) ||
	    kvf__jdir_stage(f->dir, tmp)) {
		fprintf(stderr,
			"replication: standby: cannot stage the "
			"snapshot in %s\n",
			f->dir);
		snap_remove(f);
		return -1;
	}
	kvf__journal_close(f->j);
	rc = kvf__journal_open(&f->o.jcfg, &f->j);
	if (rc) {
		fprintf(stderr,
			"replication: standby: cannot open the installed "
			"snapshot in %s: %s %s\n",
			f->dir, kvf_strerror(rc), kvf__journal_error());
		f->j = NULL;
		return -1;
	}
	kvf__journal_get_stats(f->j, &st);
	kvf_repl_backlog_free((struct kvf_repl_backlog *)f->kept);
	f->kept = f->kept_tail = NULL;
	f->kept_bytes = 0;
	pthread_mutex_lock(&f->mu);
	f->last_seq = st.last_seq;
	if (f->leader_seq < f->last_seq)
		f->leader_seq = f->last_seq;
	f->snapshots++;
	pthread_mutex_unlock(&f->mu);
	fprintf(stderr,
		"replication: standby: installed a snapshot of %llu "
		"records up to sequence %llu in %llu ms\n",
		(unsigned long long)sn->want, (unsigned long long)sn->seq,
		(unsigned long long)((kvf__now_ns() - sn->t0) / 1000000));
	if (st.last_seq != sn->seq)
		return -1;
	atomic_store(&f->installing, false);
	return 0;
}

/* One snapshot frame; 0, or -1 (the connection is dropped). */
static int snap_frame(struct kvf_repl_follower *f, struct snapin *sn, int fd,
		      const struct kvf_repl_hdr *h, const uint8_t *pl)
{
	switch (h->type) {
	case KVF_REPL_SNAP_WAIT:
		atomic_store(&f->installing, true);
		set_timeout(fd, SNAP_TIMEOUT_S);
		return 0;
	case KVF_REPL_SNAP_BEGIN:
		atomic_store(&f->installing, true);
		return snap_begin(f, sn, h, pl);
	case KVF_REPL_SNAP_RECORDS:
		return snap_records(f, sn, h, pl);
	default:
		if (snap_end(f, sn, h))
			return -1;
		set_timeout(fd, READ_TIMEOUT_S);
		return 0;
	}
}

/*
 * Read frames; RECORDS frames that arrived together (up to GROUP_FRAMES
 * or GROUP_BYTES) are appended as one batch and acknowledged with one
 * ACK of the last sequence: the leader's appends wait for acks, and
 * under load many of them are in flight, so one append and one ack per
 * burst instead of per batch keeps the standby off their path.
 */
static void follow(struct kvf_repl_follower *f, int fd, uint64_t view)
{
	struct snapin sn = {0};
	struct group *g = calloc(1, sizeof(*g));

	if (!g)
		return;
	for (;;) {
		struct kvf_repl_hdr h;
		uint8_t *pl;
		int rc;

		if (g->n && (g->n == GROUP_FRAMES || g->bytes >= GROUP_BYTES ||
			     !more_ready(fd))) {
			if (group_apply(f, g) ||
			    kvf__repl_send(fd, KVF_REPL_ACK, view, f->last_seq,
					   0, NULL, 0))
				break;
		}
		rc = kvf__repl_read_frame(fd, &h, &pl, KVF_REPL_RECORDS_MAX);
		if (rc) {
			if (rc == -2)
				note_refusal(f, "malformed or oversized frame");
			else if (!atomic_load(&f->stop))
				fprintf(stderr, "replication: standby: the "
						"leader's stream ended\n");
			break;
		}
		if (h.view != view) {
			free(pl);
			note_refusal(
				f, h.view < view
					   ? "refused a frame of an older view"
					   : "a frame of another view");
			break;
		}
		if (h.type >= KVF_REPL_SNAP_WAIT &&
		    h.type <= KVF_REPL_SNAP_END) {
			/* a snapshot replaces the journal: nothing pending */
			if (group_apply(f, g)) {
				free(pl);
				break;
			}
			rc = snap_frame(f, &sn, fd, &h, pl);
			free(pl);
			if (rc || !f->j)
				break;
			if (h.type == KVF_REPL_SNAP_END &&
			    kvf__repl_send(fd, KVF_REPL_ACK, view, f->last_seq,
					   0, NULL, 0))
				break;
			continue;
		}
		if (h.type == KVF_REPL_HEARTBEAT) {
			pthread_mutex_lock(&f->mu);
			f->leader_seq = h.seq;
			pthread_mutex_unlock(&f->mu);
			free(pl);
			continue;
		}
		if (h.type == KVF_REPL_STATE) {
			rc = f->o.state_fn ? f->o.state_fn(f->o.state_ctx,
							   h.count, pl, h.len)
					   : KVF_OK;
			free(pl);
			if (rc) {
				note_refusal(f, "a state item it could not "
						"apply");
				break;
			}
			if (kvf__repl_send(fd, KVF_REPL_STATE_ACK, view, h.seq,
					   h.count, NULL, 0))
				break;
			continue;
		}
		if (h.type != KVF_REPL_RECORDS || sn.j) {
			free(pl);
			note_refusal(f, "unexpected frame");
			break;
		}
		if (group_add(f, g, &h, pl))
			break;
	}
	/* the frames checked before the stream ended are appended, as if
	 * each had been on its own (the leader may be handing over) */
	if (f->j)
		group_apply(f, g);
	group_clear(g);
	free(g);
	snap_discard(f, &sn);
}

/*
 * The leader refused our journal as diverged: its last records are not
 * in the leader's history, so nobody acknowledged them (the new leader
 * held every acknowledged record). Move the directory's files aside into
 * DATA/diverged-<time>/ (kept for inspection, never deleted) and start
 * again from an empty journal. 0, or -1 (logged; no journal any more).
 */
static int set_aside(struct kvf_repl_follower *f)
{
	char dst[4200], from[4400], to[4600];
	struct dirent *de;
	DIR *d;
	int ret, n = 0;

	do {
		snprintf(dst, sizeof(dst), "%s/diverged-%llu-%d", f->dir,
			 (unsigned long long)time(NULL), n++);
	} while (mkdir(dst, 0755) && errno == EEXIST && n < 100);
	kvf__journal_close(f->j);
	f->j = NULL;
	d = opendir(f->dir);
	while (d && (de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") ||
		    !strcmp(de->d_name, "kvforge.lock") ||
		    !strncmp(de->d_name, "diverged-", 9))
			continue;
		snprintf(from, sizeof(from), "%s/%s", f->dir, de->d_name);
		snprintf(to, sizeof(to), "%s/%s", dst, de->d_name);
		if (rename(from, to))
			fprintf(stderr,
				"replication: standby: cannot move %s: "
				"%s\n",
				from, strerror(errno));
	}
	if (d)
		closedir(d);
	kvf_repl_backlog_free((struct kvf_repl_backlog *)f->kept);
	f->kept = f->kept_tail = NULL;
	f->kept_bytes = 0;
	f->lin.n = 0;
	atomic_store(&f->lin_view, 0);
	ret = kvf__journal_open(&f->o.jcfg, &f->j);
	if (ret) {
		fprintf(stderr,
			"replication: standby: cannot open a new "
			"journal in %s: %s\n",
			f->dir, kvf_strerror(ret));
		f->j = NULL;
		return -1;
	}
	pthread_mutex_lock(&f->mu);
	f->last_seq = f->leader_seq = 0;
	pthread_mutex_unlock(&f->mu);
	atomic_store(&f->diverged, false);
	fprintf(stderr,
		"replication: standby: journal moved aside to %s "
		"(records no leader acknowledged); following again "
		"from an empty journal\n",
		dst);
	return 0;
}

static void *run(void *arg)
{
	struct kvf_repl_follower *f = arg;

	while (!atomic_load(&f->stop)) {
		char host[256], port[16];
		uint64_t view = 0, welcomed = 0;
		int fd;

		if (find_leader(f, host, sizeof(host), port, sizeof(port),
				&view)) {
			pause_ms(f, RETRY_MS);
			continue;
		}
		fd = dial(host, port);
		if (fd < 0) {
			pause_ms(f, RETRY_MS);
			continue;
		}
		pthread_mutex_lock(&f->mu);
		f->fd = fd;
		pthread_mutex_unlock(&f->mu);
		if (!atomic_load(&f->stop) && !hello(f, fd) &&
		    !welcome(f, fd, &welcomed)) {
			fprintf(stderr,
				"replication: standby: following the "
				"leader of view %llu at %s:%s from "
				"sequence %llu\n",
				(unsigned long long)welcomed, host, port,
				(unsigned long long)f->last_seq + 1);
			pthread_mutex_lock(&f->mu);
			f->connected = true;
			f->view = welcomed;
			pthread_mutex_unlock(&f->mu);
			follow(f, fd, welcomed);
		}
		pthread_mutex_lock(&f->mu);
		f->connected = false;
		f->fd = -1;
		pthread_mutex_unlock(&f->mu);
		close(fd);
		if (!f->j) { /* an installed snapshot did not open */
			atomic_store(&f->diverged, true); /* never campaigns */
			break;
		}
		if (atomic_load(&f->diverged) && set_aside(f)) {
			atomic_store(&f->diverged, true); /* never campaigns */
			break;
		}
		pause_ms(f, RETRY_MS);
	}
	return NULL;
}

int kvf_repl_follow_start(const struct kvf_repl_options *o,
			  struct kvf_repl_follower **out)
{
	struct kvf_repl_follower *f = calloc(1, sizeof(*f));
	struct kvf__journal_stats st;
	int ret;

	if (!f)
		return KVF_ERR_NO_MEMORY;
	f->o = *o;
	f->fd = -1;
	kvf__repl_cluster(o->cluster_id, f->cluster, sizeof(f->cluster));
	snprintf(f->token, sizeof(f->token), "%s", o->token ? o->token : "");
	snprintf(f->member, sizeof(f->member), "%s",
		 o->member ? o->member : "");
	snprintf(f->dir, sizeof(f->dir), "%s", o->data_dir);
	f->o.jcfg.dir = f->dir;
	pthread_mutex_init(&f->mu, NULL);
	ret = kvf_etcd_new(o->endpoints, 0, &f->etcd);
	if (ret)
		goto fail;
	/* first: the open finishes a snapshot's install, lineage included */
	ret = kvf__journal_open(&f->o.jcfg, &f->j);
	if (ret) {
		fprintf(stderr,
			"replication: standby: cannot open the journal "
			"in %s: %s %s\n",
			f->dir, kvf_strerror(ret), kvf__journal_error());
		goto fail;
	}
	if (kvf__repl_lineage_load(f->dir, &f->lin)) {
		fprintf(stderr, "replication: %s/ha-lineage is damaged\n",
			f->dir);
		ret = KVF_ERR_JOURNAL_CORRUPT;
		goto fail;
	}
	atomic_store(&f->lin_view, kvf__repl_lineage_view(&f->lin));
	kvf__journal_get_stats(f->j, &st);
	f->last_seq = f->leader_seq = st.last_seq;
	ret = pthread_create(&f->thread, NULL, run, f) ? KVF_ERR_NO_MEMORY : 0;
	if (ret)
		goto fail;
	/* st's copy: the thread may already be appending (under f->mu) */
	fprintf(stderr, "replication: standby, journal at sequence %llu\n",
		(unsigned long long)st.last_seq);
	*out = f;
	return KVF_OK;
fail:
	kvf__journal_close(f->j);
	kvf_etcd_free(f->etcd);
	pthread_mutex_destroy(&f->mu);
	free(f);
	return ret;
}

void kvf_repl_follow_stop(struct kvf_repl_follower *f,
			  struct kvf_repl_backlog **keep_out)
{
	if (keep_out)
		*keep_out = NULL;
	if (!f)
		return;
	atomic_store(&f->stop, true);
	pthread_mutex_lock(&f->mu);
	if (f->fd >= 0)
		shutdown(f->fd, SHUT_RDWR);
	pthread_mutex_unlock(&f->mu);
	pthread_join(f->thread, NULL);
	if (keep_out)
		*keep_out = (struct kvf_repl_backlog *)f->kept;
	else
		kvf_repl_backlog_free((struct kvf_repl_backlog *)f->kept);
	kvf__journal_close(f->j);
	kvf_etcd_free(f->etcd);
	pthread_mutex_destroy(&f->mu);
	free(f);
}

/* Is @member in the comma-separated @list? */
static bool listed(const char *list, const char *member)
{
	size_t n = strlen(member);

	for (const char *p = list; *p;) {
		const char *c = strchr(p, ',');
		size_t len = c ? (size_t)(c - p) : strlen(p);

		if (len == n && !strncmp(p, member, n))
			return true;
		if (!c)
			break;
		p = c + 1;
	}
	return false;
}

/*
 * The last leader's sync set ("view leader m1,m2", or "*" for an
 * asynchronous leader) names who holds every record it acknowledged:
 * itself and the listed standbys. No set yet: a new cluster. A name is
 * an address, and an address outlives a journal: a machine replaced
 * under the same address with an empty data directory, or a standby
 * whose journal was moved aside, is still named. So the journal must be
 * the one the set was made with: its lineage ends at the set's view (a
 * leader publishes its view's set, empty, before any standby can follow
 * it, so a member's lineage never ends past the set's view; every
 * standby the set lists took that view's welcome, and only an emptied
 * journal's lineage ends before it).
 */
static bool in_sync_set(struct kvf_repl_follower *f, char *value)
{
	char *sp, *leader, *list;
	unsigned long long view;
	uint64_t mine;
	bool named;

	leader = strchr(value, ' ');
	if (!leader)
		return false;
	*leader++ = '\0';
	sp = strchr(leader, ' ');
	if (sp)
		*sp = '\0';
	list = sp ? sp + 1 : "";
	if (!strcmp(list, "*"))
		return true;
	named = !strcmp(leader, f->member) || listed(list, f->member);
	view = strtoull(value, NULL, 10);
	mine = atomic_load(&f->lin_view);
	if (named && mine == view)
		return true;
	if (f->logged_unfit)
		return false;
	if (named)
		fprintf(stderr,
			"replication: standby: named in the last leader's "
			"sync set, but this journal does not follow view %llu "
			"(its lineage ends at view %llu: an emptied or new "
			"journal): it may lack acknowledged records, so it "
			"does not campaign\n",
			view, (unsigned long long)mine);
	else
		fprintf(stderr,
			"replication: standby: not in the last leader's sync "
			"set [%s]: it may lack acknowledged records, so it "
			"does not campaign\n",
			list);
	return false;
}

bool kvf_repl_may_campaign(void *ctx)
{
	struct kvf_repl_follower *f = ctx;
	char key[512];
	size_t klen;
	struct kvf_etcd_kv kv;
	bool found, may;

	if (!f)
		return true;
	if (atomic_load(&f->diverged) || atomic_load(&f->installing))
		return false;
	klen = (size_t)snprintf(key, sizeof(key), "kvforge/%s/replication/sync",
				f->cluster);
	if (kvf_etcd_get(f->etcd, key, klen, &kv, &found))
		return false;
	if (!found)
		return true;
	may = in_sync_set(f, kv.value);
	f->logged_unfit = !may;
	kvf_etcd_kv_clear(&kv);
	return may;
}

void kvf_repl_follow_stats(struct kvf_repl_follower *f,
			   struct kvf_repl_stats *st)
{
	memset(st, 0, sizeof(*st));
	if (!f)
		return;
	pthread_mutex_lock(&f->mu);
	st->connected = f->connected;
	st->last_seq = f->last_seq;
	st->view = f->view;
	st->refused = f->refused;
	st->lag_records =
		f->leader_seq > f->last_seq ? f->leader_seq - f->last_seq : 0;
	pthread_mutex_unlock(&f->mu);
}
