// SPDX-License-Identifier: MIT
/*
 * client/client_master.c - where a client finds its master: a fixed
 * "host:port", or "etcd://host:port[;host:port...]", the key that
 * kvforge-master's (and upstream's) election writes.
 *
 * Design: nothing is cached but the last value read; every connect reads
 * the key again, so a client that lost its connection follows a new
 * leader as soon as the key names it. After a refused connect, or when
 * no key exists, the key is watched from the revision after the read,
 * for at most 100 ms: a change (the dead leader's lease expired, a new
 * leader wrote the key) wakes the client at once, and a leader that
 * wrote the key but does not listen yet is retried ten times a second.
 * The etcd client is safe to share between threads, so one struct
 * kvf_client_master serves all of a process's connections; it holds no
 * other state.
 */
#include "config.h"

#include "client/client.h"

#include "ha/election.h"
#include "ha/etcd.h"
#include <kvforge/status.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ETCD_PREFIX "etcd://"
/* A request to one etcd endpoint; a watch after a refused connect. */
#define MASTER_ETCD_TIMEOUT_MS 1000
#define MASTER_RETRY_MS 100

struct kvf_client_master {
	struct kvf_etcd *etcd; /* NULL: a fixed address */
	char host[256];
	uint16_t port;
	char key[320];
	size_t klen;
};

/* "host:port" (the host may be a bracketless IPv6 literal: last colon). */
static int split_addr(const char *s, size_t len, char *host, size_t hlen,
		      uint16_t *port)
{
	const char *colon = NULL;
	unsigned long p = 0;

	for (size_t i = 0; i < len; i++)
		if (s[i] == ':')
			colon = s + i;
	if (!colon || colon == s || (size_t)(colon - s) >= hlen ||
	    colon + 1 == s + len)
		return KVF_ERR_INVALID_ARGUMENT;
	for (const char *c = colon + 1; c < s + len; c++) {
		if (*c < '0' || *c > '9' || p > 65535)
			return KVF_ERR_INVALID_ARGUMENT;
		p = p * 10 + (unsigned long)(*c - '0');
	}
	if (!p || p > 65535)
		return KVF_ERR_INVALID_ARGUMENT;
	memcpy(host, s, (size_t)(colon - s));
	host[colon - s] = 0;
	*port = (uint16_t)p;
	return KVF_OK;
}

int kvf_client_master_new(const char *spec, struct kvf_client_master **out)
{
	struct kvf_client_master *m;
	int rc;

	if (!spec || !*spec)
		return KVF_ERR_INVALID_ARGUMENT;
	m = calloc(1, sizeof(*m));
	if (!m)
		return KVF_ERR_NO_MEMORY;
	if (strncmp(spec, ETCD_PREFIX, strlen(ETCD_PREFIX))) {
		rc = split_addr(spec, strlen(spec), m->host, sizeof(m->host),
				&m->port);
		if (rc)
			goto err;
		*out = m;
		return KVF_OK;
	}
	m->klen = kvf_ha_key(NULL, m->key, sizeof(m->key));
	rc = KVF_ERR_INVALID_ARGUMENT;
	if (!m->klen)
		goto err;
	rc = kvf_etcd_new(spec + strlen(ETCD_PREFIX), MASTER_ETCD_TIMEOUT_MS,
			  &m->etcd);
	if (rc)
		goto err;
	*out = m;
	return KVF_OK;
err:
	free(m);
	return rc;
}

void kvf_client_master_free(struct kvf_client_master *m)
{
	if (!m)
		return;
	kvf_etcd_free(m->etcd);
	free(m);
}

bool kvf_client_master_is_etcd(const struct kvf_client_master *m)
{
	return m->etcd;
}

static unsigned ms_left(uint64_t deadline_ns)
{
	uint64_t now = kvf_client_now_ns();

	if (now >= deadline_ns)
		return 0;
	return (deadline_ns - now) / 1000000u > MASTER_RETRY_MS
		       ? MASTER_RETRY_MS
		       : (unsigned)((deadline_ns - now) / 1000000u);
}

static void nap_ms(unsigned ms)
{
	struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)ms * 1000000};

	nanosleep(&ts, NULL);
}

/*
 * Read the key once. *rev: the revision to watch from afterwards (the
 * read's revision + 1, so an absent key's creation wakes the watch; 0
 * when unreadable).
 */
static int read_leader(struct kvf_client_master *m, struct kvf_client_leader *l,
		       int64_t *rev)
{
	struct kvf_etcd_kv kv = {0};
	bool found = false;
	int64_t at = 0;
	int rc = kvf_etcd_get_at(m->etcd, m->key, m->klen, &kv, &found, &at);

	*rev = 0;
	if (rc)
		return rc;
	*rev = at > 0 ? at + 1 : 0;
	if (!found)
		return KVF_ERR_OBJECT_NOT_FOUND;
	rc = split_addr(kv.value, kv.len, l->host, sizeof(l->host), &l->port);
	l->view = kv.create_revision;
	kvf_etcd_kv_clear(&kv);
	return rc ? KVF_ERR_INVALID_PARAMS : KVF_OK;
}

/* Wait up to 100 ms for the key to change after revision @rev - 1. */
static void wait_change(struct kvf_client_master *m, int64_t rev,
			uint64_t deadline_ns)
{
	unsigned ms = ms_left(deadline_ns);
	struct kvf_etcd_event ev;
	bool fired;

	if (!ms)
		return;
	if (!rev || kvf_etcd_watch(m->etcd, m->key, m->klen, false, rev, ms,
				   &ev, &fired))
		nap_ms(ms); /* etcd unreachable: poll */
}

int kvf_client_master_leader(struct kvf_client_master *m, uint64_t deadline_ns,
			     struct kvf_client_leader *l)
{
	int64_t rev;
	int rc;

	if (!m->etcd) {
		snprintf(l->host, sizeof(l->host), "%s", m->host);
		l->port = m->port;
		l->view = 0;
		return KVF_OK;
	}
	for (;;) {
		rc = read_leader(m, l, &rev);
		if (rc == KVF_OK || rc == KVF_ERR_NO_MEMORY ||
		    !ms_left(deadline_ns))
			return rc;
		wait_change(m, rev, deadline_ns);
	}
}

int kvf_client_master_connect(struct kvf_client_master *m,
			      const struct kvf_abi *abi,
			      unsigned max_outstanding,
			      struct kvf__rdma_dev *dev, uint64_t deadline_ns,
			      struct kvf_client **out,
			      struct kvf_client_leader *l)
{
	int64_t rev;
	int rc;

	if (!m->etcd) {
		kvf_client_master_leader(m, deadline_ns, l);
		return kvf_client_connect_via(l->host, l->port, abi,
					      max_outstanding, dev, out);
	}
	for (;;) {
		rc = read_leader(m, l, &rev);
		if (!rc) {
			rc = kvf_client_connect_via(l->host, l->port, abi,
						    max_outstanding, dev, out);
			if (!rc)
				return 0;
		} else if (rc == KVF_ERR_NO_MEMORY) {
			return -ENOMEM;
		} else {
			/* no leader named, etcd unreachable, or a key that
			 * holds no host:port: all may change */
			rc = -EHOSTUNREACH;
		}
		if (!ms_left(deadline_ns))
			return rc;
		wait_change(m, rev, deadline_ns);
	}
}
