/* SPDX-License-Identifier: MIT */
/*
 * journal/journal.c - the journal's entry points: open, replay, stats,
 * close. The pipeline's state (struct kvf__journal, pipeline.h) holds the
 * parts': the LMDB store and image (store.c, image.c), the side log files
 * (sidelog.c) and the side log's flow (sidelog_flow.c); appends,
 * checkpoints and the threads are in writer.c.
 *
 * Open, in order: the directory lock (kvforge.lock, an exclusive flock()
 * so two engines never write one journal; kvforge-inspect reads without
 * it), the installation of a staged journal (snapshot.c), the directory check
 * (kvf__jdir_check()), the LMDB store, side log recovery into it, the side log
 * mark in the meta database, compaction. Nothing an earlier run wrote is
 * changed before every check passed.
 *
 * Concurrency: open, replay and close run on the owner's thread; the
 * threads start after the replay (or at the first append), and every
 * write transaction afterwards belongs to the holder of the transaction
 * slot (writer.c).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "journal/pipeline.h"
#include "journal/rewrite.h"

#define DEFAULT_MAP_SIZE (64ull << 20)
#define DEFAULT_SYNC_MS 50u
#define DEFAULT_CKPT_RECORDS 1000000ull
#define DEFAULT_FOLD_CHUNK 32768u
#define DEFAULT_REWRITE_BUDGET (128ull << 20)
#define DEFAULT_SIDELOG_BYTES (32ull << 20)
#define MIN_SIDELOG_BYTES (64ull << 10)

/* mkdir -p */
static int make_dirs(const char *dir)
{
	char *p, *path = strdup(dir);
	int rc = 0;

	if (!path)
		return ENOMEM;
	for (p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(path, 0755) && errno != EEXIST)
			rc = errno;
		*p = '/';
		if (rc)
			break;
	}
	if (!rc && mkdir(path, 0755) && errno != EEXIST)
		rc = errno;
	free(path);
	return rc;
}

static int check_config(const struct kvf__journal_config *cfg)
{
	if (!cfg || !cfg->dir || !*cfg->dir)
		return KVF_ERR_INVALID_ARGUMENT;
	if (cfg->durability != KVF_DURABILITY_STRICT &&
	    cfg->durability != KVF_DURABILITY_BOUNDED)
		return KVF_ERR_INVALID_ARGUMENT;
	if (cfg->wal_bytes &&
	    (cfg->wal_bytes < MIN_SIDELOG_BYTES || cfg->wal_bytes % 4096))
		return KVF_ERR_INVALID_ARGUMENT;
	return KVF_OK;
}

static void apply_defaults(struct kvf__journal_config *c)
{
	if (!c->sync_interval_ms)
		c->sync_interval_ms = DEFAULT_SYNC_MS;
	if (!c->map_size)
		c->map_size = DEFAULT_MAP_SIZE;
	if (!c->checkpoint_records)
		c->checkpoint_records = DEFAULT_CKPT_RECORDS;
	if (!c->fold_chunk)
		c->fold_chunk = DEFAULT_FOLD_CHUNK;
	if (!c->rewrite_budget)
		c->rewrite_budget = DEFAULT_REWRITE_BUDGET;
	if (!c->wal_bytes)
		c->wal_bytes = DEFAULT_SIDELOG_BYTES;
}

static int take_lock(struct kvf__journal *j)
{
	char path[4096];
	int rc = KVF_OK;

	snprintf(path, sizeof(path), "%s/kvforge.lock", j->dir);
	j->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (j->lock_fd < 0)
		return kvf__journal_status(errno);
	if (flock(j->lock_fd, LOCK_EX | LOCK_NB))
		rc = errno == EWOULDBLOCK ? KVF_ERR_BUSY :
					    kvf__journal_status(errno);
	return rc;
}

static int init_sync(struct kvf__journal *j)
{
	pthread_condattr_t ca;
	int rc;

	if (pthread_condattr_init(&ca))
		return KVF_ERR_NO_MEMORY;
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	rc = pthread_mutex_init(&j->mu, NULL) ||
	     pthread_cond_init(&j->work_cv, &ca) ||
	     pthread_cond_init(&j->ckpt_cv, &ca) ||
	     pthread_cond_init(&j->sync_cv, &ca) ||
	     pthread_cond_init(&j->lead_cv, &ca);
	pthread_condattr_destroy(&ca);
	return rc ? KVF_ERR_NO_MEMORY : KVF_OK;
}

static void journal_free(struct kvf__journal *j)
{
	while (j->grp.nr_bufs)
		free(j->grp.bufs[--j->grp.nr_bufs]);
	kvf__flow_close(j);
	kvf__rewrite_free(j->rewrite);
	kvf__store_close(&j->store);
	if (j->lock_fd >= 0)
		close(j->lock_fd); /* releases the flock */
	pthread_cond_destroy(&j->lead_cv);
	pthread_cond_destroy(&j->sync_cv);
	pthread_cond_destroy(&j->ckpt_cv);
	pthread_cond_destroy(&j->work_cv);
	pthread_mutex_destroy(&j->mu);
	free(j->dir);
	free(j);
}

int kvf__jdir_check(const char *dir)
{
	char path[4096];
	struct stat sb;
	bool data;

	snprintf(path, sizeof(path), "%s/data.mdb", dir);
	data = !stat(path, &sb);
	if ((!data || !sb.st_size) && kvf__sidelog_exists(dir)) {
		kvf__jerr("data.mdb is %s but side log files exist: not "
			  "initialising a new journal over them",
			  data ? "empty" : "missing");
		return KVF_ERR_JOURNAL_CORRUPT;
	}
	return data && sb.st_size ? kvf__store_check_file(dir) : 0;
}

static int open_parts(struct kvf__journal *j)
{
	int rc;

	rc = kvf__jdir_check(j->dir);
	if (!rc)
		rc = kvf__store_open(&j->store, &j->cfg, &j->st);
	if (!rc)
		j->map_size = j->store.map_size;
	if (!rc)
		rc = kvf__flow_open(
			j); /* moves acknowledged frames into LMDB */
	if (!rc)
		rc = kvf__store_mark_side_log(&j->store, &j->st);
	if (!rc)
		rc = kvf__store_compact(&j->store, &j->st);
	if (!rc)
		j->map_size = j->store.map_size;
	if (!rc)
		kvf__flow_warm(j);
	return rc;
}

int kvf__journal_open(const struct kvf__journal_config *cfg,
		      struct kvf__journal **out)
{
	struct kvf__journal *j;
	int rc;

	kvf__jerr("%s", "");
	rc = check_config(cfg);
	if (rc)
		return rc;
	j = calloc(1, sizeof(*j));
	if (!j)
		return KVF_ERR_NO_MEMORY;
	j->lock_fd = -1;
	j->sl.f[0].fd = j->sl.f[1].fd = -1;
	j->cfg = *cfg;
	apply_defaults(&j->cfg);
	j->dir = strdup(cfg->dir);
	j->cfg.dir = j->dir;
	j->grp.tail = &j->grp.head;
	if (!j->dir || init_sync(j)) {
		free(j->dir);
		free(j);
		return KVF_ERR_NO_MEMORY;
	}
	rc = make_dirs(j->dir);
	if (rc) {
		rc = kvf__journal_status(rc);
		goto err;
	}
	rc = take_lock(j);
	if (rc)
		goto err;
	rc = kvf__jdir_install(j->dir); /* a staged journal replaces ours */
	if (rc) {
		rc = kvf__journal_status(rc);
		goto err;
	}
	rc = open_parts(j);
	if (rc) {
		rc = kvf__journal_status(rc);
		goto err;
	}
	j->estimate = j->st.objects + (j->st.last_seq - j->st.ckpt_seq);
	*out = j;
	return KVF_OK;
err:
	journal_free(j);
	return rc;
}

uint64_t kvf__journal_object_estimate(const struct kvf__journal *j)
{
	return j->estimate;
}

int kvf__journal_replay(struct kvf__journal *j,
			const struct kvf__journal_replay_ops *ops, void *arg)
{
	uint64_t last = 0;
	MDB_txn *txn;
	int rc;

	if (!ops || !ops->record)
		return KVF_ERR_INVALID_ARGUMENT;
	pthread_mutex_lock(&j->mu);
	rc = j->replayed ? KVF_ERR_BUSY : KVF_OK;
	j->replayed = 1;
	pthread_mutex_unlock(&j->mu);
	if (rc)
		return rc;
	rc = mdb_txn_begin(j->store.env, NULL, MDB_RDONLY, &txn);
	if (rc)
		return kvf__journal_status(rc);
	rc = kvf__image_scan(txn, &j->store.dbs, j->st.ckpt_seq, ops, arg,
			    &last);
	mdb_txn_abort(txn);
	if (!rc && last != j->st.last_seq)
		rc = KVF_ERR_JOURNAL_CORRUPT;
	if (rc)
		return rc;
	pthread_mutex_lock(&j->mu);
	rc = kvf__writer_start(j);
	pthread_mutex_unlock(&j->mu);
	return rc;
}

void kvf__journal_get_stats(struct kvf__journal *j,
			    struct kvf__journal_stats *st)
{
	memset(st, 0, sizeof(*st));
	pthread_mutex_lock(&j->mu);
	st->log_records = j->st.last_seq - j->st.ckpt_seq;
	st->log_frames = j->st.log_frames;
	st->objects = j->st.objects;
	st->segments = j->st.segments;
	st->clients = j->st.clients;
	st->checkpoints = j->st.ckpt_count;
	st->checkpoint_seq = j->st.ckpt_seq;
	st->last_seq = j->flow.on ? j->flow.acked_seq : j->st.last_seq;
	st->log_records = st->last_seq - j->st.ckpt_seq;
	st->sidelog_pending = st->last_seq - j->st.last_seq;
	st->map_size = j->map_size;
	st->commits = j->commits;
	st->map_grows = j->map_grows;
	st->sync_errors = j->sync_errors;
	st->format_version = j->st.version;
	pthread_mutex_unlock(&j->mu);
	st->file_size = kvf__store_file_size(j->dir);
}

#ifdef KVF_FAULT_INJECTION
void kvf__journal_inject_fault(struct kvf__journal *j, int code,
			       unsigned count)
{
	pthread_mutex_lock(&j->mu);
	j->fault_code = code;
	j->fault_count = count;
	pthread_mutex_unlock(&j->mu);
}

void kvf__journal_slow_moves(struct kvf__journal *j, unsigned us)
{
	pthread_mutex_lock(&j->mu);
	j->move_delay_us = us;
	pthread_mutex_unlock(&j->mu);
}
#endif

void kvf__journal_close(struct kvf__journal *j)
{
	if (!j)
		return;
	kvf__writer_stop(j);
	kvf__store_sync(&j->store);
	journal_free(j);
}
