// SPDX-License-Identifier: MIT
/*
 * journal/snapshot.c - the journal's state as records while appends go
 * on, a fresh journal that starts at a given sequence, and installing a
 * complete journal over a directory's in one step that survives a crash.
 *
 * Snapshot (kvf__journal_snapshot()): the side log is drained into LMDB
 * first (everything acknowledged before the call is then in the LMDB
 * log), then one read transaction (MVCC: the writer thread keeps
 * committing) yields the image and the log after it, i.e. the state after
 * every record up to the log's last sequence in that transaction. LMDB
 * may not remap (grow the map) while a transaction of this process is
 * open, so the read holds the store's remap_rw for reading, which
 * kvf__store_grow() takes for writing: a writer that must grow meanwhile
 * waits for the read to end (prefaulting, under map_mu, does not). The
 * read therefore only encodes into the caller's memory and never waits
 * for anything else. Records decoded in a read-only transaction point
 * into its pages, which stay valid until it ends, so a run of them can be
 * encoded together into log frames.
 *
 * Base (kvf__journal_set_base()): a journal opened on an empty directory
 * takes its checkpoint sequence from the caller before anything is
 * appended, so its appends are numbered from there on: a copy of another
 * journal's state at sequence S made of K records starts at S - K.
 *
 * Install (kvf__jdir_install()): DIR/snapshot.new/ is a complete journal
 * directory, made elsewhere and renamed there whole (that rename is the
 * commit point). Open moves each of its files over DIR's (each rename is
 * atomic) and removes it last, so a crash in between leaves the directory
 * there and the next open finishes the moves: a journal is never opened
 * as a mix of the old and the new files. Runs with DIR/kvforge.lock held.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "journal/error.h"
#include "journal/pipeline.h"

/* Records encoded into one chunk for the caller. */
#define SNAP_CHUNK_RECS 1024u

struct snap {
	struct kvf__jrec recs[SNAP_CHUNK_RECS];
	size_t n;
	uint64_t total;
	struct kvf__jbatch b;
	kvf__snapshot_fn fn;
	void *arg;
};

static int snap_flush(struct snap *s)
{
	int rc;

	if (!s->n)
		return KVF_OK;
	rc = kvf__batch_encode(s->recs, s->n, &s->b);
	if (!rc)
		rc = s->fn(s->arg, s->b.buf, s->b.len, s->b.nr_frames,
			   s->b.nr_recs);
	s->total += s->n;
	s->n = 0;
	return rc;
}

static int snap_record(void *arg, const struct kvf__jrec *rec, uint64_t seq)
{
	struct snap *s = arg;

	(void)seq;
	s->recs[s->n++] = *rec; /* points into the transaction's pages */
	return s->n == SNAP_CHUNK_RECS ? snap_flush(s) : KVF_OK;
}

int kvf__journal_snapshot(struct kvf__journal *j, kvf__snapshot_fn fn,
			  void *arg, uint64_t *seq, uint64_t *nr_recs)
{
	const struct kvf__journal_replay_ops ops = {.record = snap_record};
	struct kvf__store_state st;
	struct snap *s = calloc(1, sizeof(*s));
	uint64_t last = 0;
	MDB_txn *txn;
	int rc;

	if (!s)
		return KVF_ERR_NO_MEMORY;
	s->fn = fn;
	s->arg = arg;
	pthread_mutex_lock(&j->mu);
	rc = j->stop ? KVF_ERR_CLOSED : kvf__writer_start(j);
	if (!rc && j->flow.on)
		rc = kvf__flow_drain(j);
	pthread_mutex_unlock(&j->mu);
	if (rc)
		goto out;
	pthread_rwlock_rdlock(&j->store.remap_rw); /* no remap meanwhile */
	rc = mdb_txn_begin(j->store.env, NULL, MDB_RDONLY, &txn);
	if (!rc) {
		rc = kvf__store_state_read(txn, &j->store.dbs, &st);
		if (rc) {
			rc = kvf__journal_status(rc);
		} else {
			rc = kvf__image_scan(txn, &j->store.dbs, st.ckpt_seq,
					     &ops, s, &last);
			if (!rc)
				rc = snap_flush(s);
		}
		mdb_txn_abort(txn);
	} else {
		rc = kvf__journal_status(rc);
	}
	pthread_rwlock_unlock(&j->store.remap_rw);
	if (!rc) {
		*seq = last;
		*nr_recs = s->total;
	}
out:
	free(s->b.buf);
	free(s);
	return rc;
}

int kvf__journal_set_base(struct kvf__journal *j, uint64_t seq)
{
	MDB_txn *txn;
	int rc;

	pthread_mutex_lock(&j->mu);
	rc = j->started || j->replayed || j->st.last_seq || j->st.ckpt_seq ||
			     j->flow.acked_seq
		     ? KVF_ERR_BUSY
		     : KVF_OK;
	pthread_mutex_unlock(&j->mu);
	if (rc || !seq)
		return rc;
	/* no thread runs yet: this thread may write */
	rc = kvf__store_begin(&j->store, &txn);
	if (!rc)
		rc = kvf__store_end(&j->store, txn,
				    kvf__store_meta_put(txn, j->store.dbs.meta,
							KVF__META_CKPT_SEQ,
							&seq, sizeof(seq)));
	if (!rc)
		rc = kvf__store_sync(&j->store);
	if (rc)
		return kvf__journal_status(rc);
	pthread_mutex_lock(&j->mu);
	j->st.ckpt_seq = j->st.last_seq = seq;
	j->flow.acked_seq = j->flow.durable_seq = j->flow.synced_seq = seq;
	pthread_mutex_unlock(&j->mu);
	return KVF_OK;
}

int kvf__jdir_install(const char *dir)
{
	char src[4200], from[4500], to[4500];
	struct dirent *de;
	DIR *d;
	int rc = 0;

	snprintf(src, sizeof(src), "%s/" KVF__JDIR_INSTALL, dir);
	d = opendir(src);
	if (!d)
		return errno == ENOENT ? 0 : errno;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") ||
		    !strcmp(de->d_name, "kvforge.lock"))
			continue;
		snprintf(from, sizeof(from), "%s/%s", src, de->d_name);
		snprintf(to, sizeof(to), "%s/%s", dir, de->d_name);
		if (rename(from, to)) {
			rc = errno;
			kvf__jerr("cannot install %s: %s", from, strerror(rc));
			break;
		}
	}
	closedir(d);
	if (!rc)
		rc = kvf__sidelog_sync_dir(
			dir); /* every file in place before ... */
	if (!rc) {
		snprintf(from, sizeof(from), "%s/kvforge.lock", src);
		unlink(from);
		if (rmdir(src)) /* ... the marker goes */
			rc = errno;
	}
	if (!rc)
		rc = kvf__sidelog_sync_dir(dir);
	return rc;
}

int kvf__jdir_stage(const char *dir, const char *staged)
{
	char dst[4200];
	int rc = kvf__sidelog_sync_dir(staged);

	snprintf(dst, sizeof(dst), "%s/" KVF__JDIR_INSTALL, dir);
	if (!rc && rename(staged, dst))
		rc = errno;
	if (!rc)
		rc = kvf__sidelog_sync_dir(dir);
	return rc;
}
