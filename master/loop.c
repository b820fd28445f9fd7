// SPDX-License-Identifier: MIT
/*
 * master/loop.c - N epoll threads, each owning the connections it accepts.
 *
 * Design notes.
 *
 * Threads: a small fixed set (--rpc_thread_num, default min(CPUs,
 * --max_threads)). Every thread has its own epoll instance holding the
 * shared listening socket (EPOLLEXCLUSIVE: one thread wakes per incoming
 * connection) and the connections it accepted; a connection never moves,
 * so its buffers, its requests' engine calls and its answers stay on one
 * thread and need no locks. Requests are answered inline on the thread
 * (engine calls are short and lock-free for readers); the only shared
 * state is the engine, the registry and the metrics, all thread-safe.
 *
 * Interest is level-triggered: EPOLLIN while the connection may read
 * (kvf_conn_wants_read()), EPOLLOUT while answers wait for socket space.
 *
 * Transports: with RDMA enabled, a new connection's first byte (peeked)
 * chooses it, as upstream: 0x3e is an RDMA handshake, run here within
 * RDMA_HANDSHAKE_MS, after which the connection reads and writes the
 * RDMA stream and waits on its fd (EPOLLIN only: room to write comes
 * back as a completion, so every wake-up also flushes); anything else
 * takes the TCP path, whose parser answers 0x15 and closes the rest.
 *
 * Placement: the thread that accepts a connection gives it to the thread
 * serving the fewest (itself on a tie). EPOLLEXCLUSIVE wakes one waiter
 * per incoming connection, but the same one while all are idle, so
 * without this every client of a quiet master lands on one thread and
 * the other threads sit idle. A
 * connection given away is pushed on the target's inbox, then added to
 * its epoll set, under the inbox's mutex; the target links its inbox
 * into its list at every wake-up before handling events, so a
 * connection is in its owner's list before its first event is handled,
 * and from then on it never moves.
 *
 * Parked answers (an HA leader's, held for the sync standbys: see
 * master/conn.c): each thread has an eventfd in its epoll set through
 * which the leader's ack reader wakes it (ha/replication.h waiter) and a
 * list of its connections with parked answers; on that wake-up, and
 * every PARK_CHECK_NS while the list is not empty (the sync timeout),
 * it releases what the acknowledgements cover. A thread that stops
 * first waits for its parked answers' acknowledgement (bounded by the
 * sync timeout) and sends them if it came, as a thread blocked in the
 * wait did before it saw the stop.
 *
 * Limits: the connection count is one atomic counter across threads;
 * over --max_connections an accepted socket is closed at once. Once a
 * second each thread closes its connections that were silent (or not
 * reading their answers) for the idle timeout, or stuck in the middle of
 * a request for the request timeout.
 *
 * Stalls: a thread marks when it starts handling a wake-up and when it
 * is back in epoll_wait() (master/stallclock.h); a wake-up that lasts
 * longer than the stall threshold stops the serving clock that client
 * liveness is measured on, so the Pings waiting behind it do not count
 * as their clients' silence.
 *
 * Shutdown: an eventfd in every epoll set, written once and never read,
 * so every thread sees it; each closes its connections and exits.
 */
#include "config.h"

#include "master/loop.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <kvforge/status.h>

#include "ha/replication.h"
#include "rdma/listener.h"
#include "master/conn.h"
#include "master/port_claim.h"
#include "http/metrics.h"
#include "master/service.h"
#include "master/stallclock.h"

#define MAX_EVENTS 64
#define SWEEP_NS 1000000000ULL
#define RDMA_HANDSHAKE_MS 1000
/* Parked answers are looked at this often without a wake-up. */
#define PARK_CHECK_NS 100000000ULL

struct loop_thread {
	struct kvf_loop *loop;
	pthread_t tid;
	bool started;
	int epfd;
	struct kvf_conn *conns;
	struct kvf_conn_env env;
	uint64_t *beacon; /* busy since (master/stallclock.h) */
	unsigned load;	  /* connections it owns or will (atomic) */
	/* connections given to it, not in @conns yet (see Placement) */
	pthread_mutex_t inbox_mu;
	bool inbox_mu_init;
	struct kvf_conn *inbox; /* under inbox_mu */
	bool inbox_full;	/* atomic: @inbox is not empty */
	/* parked answers (see Parked answers) */
	int park_fd;
	struct kvf_conn *parked;
	uint64_t park_checked;
};

struct kvf_loop {
	struct kvf_loop_options o;
	int listen_fd;
	int stop_fd;
	uint16_t port;
	uint64_t nconns;  /* atomic */
	bool full_logged; /* atomic */
	unsigned nthreads;
	unsigned running; /* atomic: threads [0, running) are started */
	struct loop_thread *threads;
};

/* epoll data for the three non-connection descriptors. */
static char listen_tag, stop_tag, park_tag;

/* Keep @c on @t's list of connections with parked answers iff it has. */
static void track_parked(struct loop_thread *t, struct kvf_conn *c)
{
	if (c->nparked && !c->in_park_list) {
		c->pprev = NULL;
		c->pnext = t->parked;
		if (t->parked)
			t->parked->pprev = c;
		t->parked = c;
		c->in_park_list = true;
	} else if (!c->nparked && c->in_park_list) {
		if (c->pprev)
			c->pprev->pnext = c->pnext;
		else
			t->parked = c->pnext;
		if (c->pnext)
			c->pnext->pprev = c->pprev;
		c->in_park_list = false;
	}
}

static int set_interest(struct loop_thread *t, struct kvf_conn *c)
{
	uint32_t ev = (kvf_conn_wants_read(c) ? EPOLLIN : 0) |
		      (kvf_conn_wants_write(c) ? EPOLLOUT : 0);
	struct epoll_event e = {.events = ev, .data.ptr = c};

	if (c->rdma) {
		kvf__rdma_want_read(c->rdma, kvf_conn_wants_read(c));
		e.events = ev = EPOLLIN;
	}

	if (ev == c->events)
		return 0;
	c->events = ev;
	return epoll_ctl(t->epfd, EPOLL_CTL_MOD, c->fd, &e);
}

static void close_conn(struct loop_thread *t, struct kvf_conn *c)
{
	if (c->prev)
		c->prev->next = c->next;
	else
		t->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	epoll_ctl(t->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	c->nparked = 0; /* never sent */
	track_parked(t, c);
	kvf_conn_free(c);
	__atomic_fetch_sub(&t->load, 1, __ATOMIC_RELAXED);
	__atomic_fetch_sub(&t->loop->nconns, 1, __ATOMIC_RELAXED);
	if (t->loop->o.metrics)
		kvf_metrics_connections(t->loop->o.metrics, -1);
}

static void setup_socket(const struct kvf_loop *l, int fd)
{
	int one = 1;

	if (l->o.tcp_nodelay)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static void refuse_full(struct kvf_loop *l, int fd)
{
	close(fd);
	if (!__atomic_exchange_n(&l->full_logged, true, __ATOMIC_RELAXED))
		fprintf(stderr,
			"kvforge-master: connection limit (%llu) reached; "
			"closing new connections (logged once)\n",
			(unsigned long long)l->o.max_connections);
}

/* The thread serving the fewest connections; @t itself on a tie. */
static struct loop_thread *least_loaded(struct loop_thread *t)
{
	struct kvf_loop *l = t->loop;
	struct loop_thread *best = t;
	unsigned min = __atomic_load_n(&t->load, __ATOMIC_RELAXED);
	unsigned running = __atomic_load_n(&l->running, __ATOMIC_ACQUIRE);

	for (unsigned i = 0; i < running && min; i++) {
		struct loop_thread *o = &l->threads[i];
		unsigned n = __atomic_load_n(&o->load, __ATOMIC_RELAXED);

		if (n < min) {
			min = n;
			best = o;
		}
	}
	return best;
}

static void link_conn(struct loop_thread *t, struct kvf_conn *c)
{
	c->prev = NULL;
	c->next = t->conns;
	if (t->conns)
		t->conns->prev = c;
	t->conns = c;
}

/* Take the connections other threads gave this one (see Placement). */
static void take_inbox(struct loop_thread *t)
{
	struct kvf_conn *c, *next;

	if (!__atomic_load_n(&t->inbox_full, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&t->inbox_mu);
	c = t->inbox;
	t->inbox = NULL;
	__atomic_store_n(&t->inbox_full, false, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&t->inbox_mu);
	for (; c; c = next) {
		next = c->next;
		link_conn(t, c);
	}
}

/* Put @c in @t's epoll set (and inbox, when @t is another thread). */
static int give_conn(struct loop_thread *self, struct loop_thread *t,
		     struct kvf_conn *c)
{
	struct epoll_event e = {.events = EPOLLIN, .data.ptr = c};
	int ret;

	c->events = EPOLLIN;
	if (t == self) {
		if (epoll_ctl(t->epfd, EPOLL_CTL_ADD, c->fd, &e))
			return -1;
		link_conn(t, c);
		return 0;
	}
	/* in the inbox before its first event can reach @t */
	pthread_mutex_lock(&t->inbox_mu);
	c->prev = NULL;
	c->next = t->inbox;
	t->inbox = c;
	__atomic_store_n(&t->inbox_full, true, __ATOMIC_RELEASE);
	ret = epoll_ctl(t->epfd, EPOLL_CTL_ADD, c->fd, &e);
	if (ret) { /* still the head: @t takes its inbox under the mutex */
		t->inbox = c->next;
		__atomic_store_n(&t->inbox_full, t->inbox != NULL,
				 __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&t->inbox_mu);
	return ret;
}

static void add_conn(struct loop_thread *self, int fd)
{
	struct kvf_loop *l = self->loop;
	struct loop_thread *t;
	struct kvf_conn *c;

	if (__atomic_fetch_add(&l->nconns, 1, __ATOMIC_RELAXED) >=
	    l->o.max_connections) {
		__atomic_fetch_sub(&l->nconns, 1, __ATOMIC_RELAXED);
		refuse_full(l, fd);
		return;
	}
	c = kvf_conn_new(fd, kvf_service_now_ns());
	if (!c) {
		close(fd);
		__atomic_fetch_sub(&l->nconns, 1, __ATOMIC_RELAXED);
		return;
	}
	setup_socket(l, fd);
	t = least_loaded(self);
	__atomic_fetch_add(&t->load, 1, __ATOMIC_RELAXED);
	if (give_conn(self, t, c)) {
		__atomic_fetch_sub(&t->load, 1, __ATOMIC_RELAXED);
		kvf_conn_free(c);
		__atomic_fetch_sub(&l->nconns, 1, __ATOMIC_RELAXED);
		return;
	}
	if (l->o.metrics)
		kvf_metrics_connections(l->o.metrics, 1);
}

static void accept_all(struct loop_thread *t)
{
	for (int i = 0; i < 64; i++) {
		int fd = accept4(t->loop->listen_fd, NULL, NULL,
				 SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0) {
			/* EAGAIN: another thread took it, or none left;
			 * EMFILE and friends: retried on the next wake-up. */
			return;
		}
		add_conn(t, fd);
	}
}

/* Move @c onto the RDMA stream @s: wait on its fd, close the socket. */
static enum kvf_conn_rc switch_to_rdma(struct loop_thread *t,
				       struct kvf_conn *c,
				       struct kvf__rdma_stream *s)
{
	struct epoll_event e = {.events = EPOLLIN, .data.ptr = c};
	int fd = kvf__rdma_fd(s);

	if (epoll_ctl(t->epfd, EPOLL_CTL_ADD, fd, &e)) {
		kvf__rdma_drop(s);
		return KVF_CONN_CLOSE;
	}
	epoll_ctl(t->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	c->fd = fd;
	c->rdma = s;
	c->events = EPOLLIN;
	return KVF_CONN_KEEP;
}

/* The first byte chooses the transport (see the design notes). */
static enum kvf_conn_rc demux(struct loop_thread *t, struct kvf_conn *c)
{
	struct kvf__rdma_listener *l = t->loop->o.rdma;
	struct kvf__rdma_stream *s;

	switch (kvf__rdma_classify(l, c->fd)) {
	case KVF_RDMA_FIRST_WAIT:
		return KVF_CONN_KEEP;
	case KVF_RDMA_FIRST_RDMA:
		if (kvf__rdma_listener_accept(l, c->fd, RDMA_HANDSHAKE_MS, &s))
			return KVF_CONN_CLOSE;
		c->demuxed = true;
		return switch_to_rdma(t, c, s);
	default:
		/* TCP; anything else is refused by the request parser, as
		 * without RDMA. */
		c->demuxed = true;
		return KVF_CONN_KEEP;
	}
}

static void on_conn_event(struct loop_thread *t, struct kvf_conn *c,
			  uint32_t ev)
{
	enum kvf_conn_rc rc = KVF_CONN_KEEP;

	if (!c->demuxed && t->loop->o.rdma) {
		if (demux(t, c)) {
			close_conn(t, c);
			return;
		}
		if (!c->demuxed)
			return; /* nothing received yet */
	}
	if (c->rdma)
		ev |= EPOLLOUT;

	if (ev & (EPOLLIN | EPOLLHUP | EPOLLERR))
		rc = kvf_conn_readable(c, &t->env);
	if (!rc && (ev & EPOLLOUT))
		rc = kvf_conn_writable(c, &t->env);
	if (rc || set_interest(t, c))
		close_conn(t, c);
	else
		track_parked(t, c);
}

/* Release what the standbys' acknowledgements cover (Parked answers). */
static void unpark_all(struct loop_thread *t, uint64_t now)
{
	struct kvf_conn *c = t->parked, *next;

	t->park_checked = now;
	for (; c; c = next) {
		next = c->pnext;
		if (kvf_conn_unpark(c, &t->env) || set_interest(t, c))
			close_conn(t, c);
		else
			track_parked(t, c);
	}
}

static void sweep_idle(struct loop_thread *t, uint64_t now)
{
	uint64_t idle = t->loop->o.idle_timeout_sec * 1000000000ULL;
	uint64_t partial = t->loop->o.request_timeout_sec * 1000000000ULL;
	struct kvf_conn *c = t->conns, *next;

	for (; c; c = next) {
		next = c->next;
		if (kvf_conn_expired(c, now, idle, partial))
			close_conn(t, c);
	}
}

static void *thread_main(void *arg)
{
	struct loop_thread *t = arg;
	struct epoll_event evs[MAX_EVENTS];
	uint64_t last_sweep = kvf_service_now_ns();

	for (;;) {
		int n = epoll_wait(t->epfd, evs, MAX_EVENTS,
				   t->parked ? (int)(PARK_CHECK_NS / 1000000)
					     : 1000);
		bool acked = false;
		uint64_t now;

		if (n < 0 && errno != EINTR)
			break;
		if (n > 0)
			kvf_stallclock_busy(t->beacon, kvf_service_now_ns());
		take_inbox(t);
		for (int i = 0; i < n; i++) {
			void *p = evs[i].data.ptr;
			uint64_t cnt;

			if (p == &stop_tag)
				goto out;
			if (p == &listen_tag) {
				accept_all(t);
			} else if (p == &park_tag) {
				acked = true;
				if (read(t->park_fd, &cnt, sizeof(cnt)) < 0) {
					/* EAGAIN: another read took it */
				}
			} else {
				on_conn_event(t, p, evs[i].events);
			}
		}
		now = kvf_service_now_ns();
		if (t->parked &&
		    (acked || now - t->park_checked >= PARK_CHECK_NS)) {
			unpark_all(t, now);
			/* it stamps what it sends with a later time than
			 * @now; against @now such a stamp would be years of
			 * silence (unsigned) and the sweep would close it */
			now = kvf_service_now_ns();
		}
		if (now - last_sweep >= SWEEP_NS) {
			sweep_idle(t, now);
			last_sweep = now;
		}
		kvf_stallclock_idle(t->beacon);
	}
out:
	/* An exiting thread must not hold the serving clock. */
	kvf_stallclock_release(t->loop->o.stall, t->beacon);
	t->beacon = NULL;
	for (struct kvf_conn *c = t->parked; c; c = c->pnext)
		kvf_conn_finish_parked(c);
	take_inbox(t);
	while (t->conns)
		close_conn(t, t->conns);
	return NULL;
}

/* ---- setup -------------------------------------------------------------- */

static int bind_listener(struct kvf_loop *l)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	int fd, err = 0, ret;

	if (l->o.claimed) {
		fd = l->o.claimed_fd;
		l->o.claimed = false;
	} else {
		ret = kvf_port_claim(l->o.address, l->o.port, &fd);
		if (ret)
			return ret;
	}
	/* Inherited by the accepted connections: their TIME_WAIT leftovers
	 * must not keep the port from being bound again (a leader that
	 * stepped down holds it as a standby, master/port_claim.h). */
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &(int){1}, sizeof(int));
	if (listen(fd, 1024))
		err = errno;
	if (!err && getsockname(fd, (struct sockaddr *)&ss, &sl))
		err = errno;
	if (err) {
		close(fd);
		return err == EADDRINUSE ? KVF_ERR_BUSY : KVF_ERR_IO;
	}
	l->listen_fd = fd;
	l->port = ntohs(ss.ss_family == AF_INET6
				? ((struct sockaddr_in6 *)&ss)->sin6_port
				: ((struct sockaddr_in *)&ss)->sin_port);
	return KVF_OK;
}

static int thread_init(struct kvf_loop *l, struct loop_thread *t)
{
	struct epoll_event le = {.events = EPOLLIN | EPOLLEXCLUSIVE,
				 .data.ptr = &listen_tag};
	struct epoll_event se = {.events = EPOLLIN, .data.ptr = &stop_tag};
	struct epoll_event pe = {.events = EPOLLIN, .data.ptr = &park_tag};

	t->loop = l;
	if (pthread_mutex_init(&t->inbox_mu, NULL))
		return KVF_ERR_NO_MEMORY;
	t->inbox_mu_init = true;
	t->env.service = l->o.service;
	t->env.max_request_bytes = l->o.max_request_bytes;
	t->env.scratch = kvf_service_scratch_new(l->o.service);
	if (l->o.stall)
		t->beacon = kvf_stallclock_beacon(l->o.stall);
	t->epfd = epoll_create1(EPOLL_CLOEXEC);
	t->park_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (t->park_fd >= 0)
		t->env.waiter = kvf_repl_waiter_new(t->park_fd);
	if (!t->env.scratch || t->epfd < 0 || !t->env.waiter)
		return KVF_ERR_NO_MEMORY;
	if (epoll_ctl(t->epfd, EPOLL_CTL_ADD, l->listen_fd, &le) ||
	    epoll_ctl(t->epfd, EPOLL_CTL_ADD, l->stop_fd, &se) ||
	    epoll_ctl(t->epfd, EPOLL_CTL_ADD, t->park_fd, &pe))
		return KVF_ERR_IO;
	if (pthread_create(&t->tid, NULL, thread_main, t))
		return KVF_ERR_NO_MEMORY;
	t->started = true;
	return KVF_OK;
}

int kvf_loop_start(const struct kvf_loop_options *opts, struct kvf_loop **out)
{
	struct kvf_loop *l;
	int ret;

	if (!opts || !opts->service || !opts->threads || !out ||
	    !opts->max_connections || !opts->idle_timeout_sec ||
	    !opts->request_timeout_sec) {
		ret = KVF_ERR_INVALID_ARGUMENT;
		goto err_claimed;
	}
	l = calloc(1, sizeof(*l));
	if (!l) {
		ret = KVF_ERR_NO_MEMORY;
		goto err_claimed;
	}
	l->o = *opts;
	l->listen_fd = -1;
	l->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	l->threads = calloc(opts->threads, sizeof(*l->threads));
	if (l->stop_fd < 0 || !l->threads) {
		ret = KVF_ERR_NO_MEMORY;
		goto err;
	}
	for (unsigned i = 0; i < opts->threads; i++)
		l->threads[i].epfd = l->threads[i].park_fd = -1;
	l->nthreads = opts->threads;
	ret = bind_listener(l);
	if (ret)
		goto err;
	for (unsigned i = 0; i < opts->threads; i++) {
		ret = thread_init(l, &l->threads[i]);
		if (ret)
			goto err;
		__atomic_store_n(&l->running, i + 1, __ATOMIC_RELEASE);
	}
	*out = l;
	return KVF_OK;
err:
	if (l->o.claimed) /* not taken by bind_listener() yet */
		close(l->o.claimed_fd);
	kvf_loop_stop(l);
	return ret;
err_claimed:
	if (opts && opts->claimed)
		close(opts->claimed_fd);
	return ret;
}

uint16_t kvf_loop_port(const struct kvf_loop *l)
{
	return l->port;
}

void kvf_loop_stop(struct kvf_loop *l)
{
	uint64_t one = 1;

	if (!l)
		return;
	if (l->stop_fd >= 0 && write(l->stop_fd, &one, sizeof(one)) < 0)
		perror("kvforge-master: eventfd");
	for (unsigned i = 0; l->threads && i < l->nthreads; i++) {
		struct loop_thread *t = &l->threads[i];

		if (t->started)
			pthread_join(t->tid, NULL);
	}
	for (unsigned i = 0; l->threads && i < l->nthreads; i++) {
		struct loop_thread *t = &l->threads[i];

		/* given to it after it had exited */
		take_inbox(t);
		while (t->conns)
			close_conn(t, t->conns);
		if (t->inbox_mu_init)
			pthread_mutex_destroy(&t->inbox_mu);
		if (t->epfd >= 0)
			close(t->epfd);
		/* before the HA leader stops (ha/replication.h) */
		kvf_repl_waiter_free(t->env.waiter);
		if (t->park_fd >= 0)
			close(t->park_fd);
		kvf_service_scratch_free(t->env.scratch);
	}
	if (l->listen_fd >= 0)
		close(l->listen_fd);
	if (l->stop_fd >= 0)
		close(l->stop_fd);
	free(l->threads);
	free(l);
}
