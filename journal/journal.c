/* SPDX-License-Identifier: MIT */
/*
 * journal/journal.c - opening, validating, replaying and closing a journal.
 *
 * Layout of the data directory: data.mdb and lock.mdb (LMDB), plus
 * kvforge.lock, on which the opener holds an exclusive flock() so two
 * engines never write one journal (kvforge-inspect reads without it).
 * LMDB databases: "meta" (magic, format version, checkpoint sequence and
 * count), "log" (frames of records, see jint.h), and the image: "segs",
 * "objs", "clients" (see image.c).
 *
 * Invariant, kept by every write transaction: the log holds exactly the
 * records with sequences (checkpoint_seq, last_seq], contiguous, in frames
 * keyed by their first sequence; the image is the state after applying
 * every record up to checkpoint_seq. Recovery is therefore image + log.
 *
 * Open validates without modifying anything an earlier run wrote: a
 * directory is either empty (a fresh LMDB file whose main database has no
 * entry, which is also what a crash during creation leaves) and gets
 * initialised, or it must carry our magic and version. Damage is reported
 * (KVF_ERR_JOURNAL_CORRUPT), never repaired.
 *
 * BOUNDED with cfg->writemap (opt-in: kvf_config.journal_writemap) opens
 * the environment with MDB_WRITEMAP: commits store into the shared mapping
 * instead of copying dirty pages with pwritev (docs/journal.md says why
 * it is not the default: checkpoint folds). LMDB then
 * extends the file sparsely to the map size, and a store into a page the
 * file system cannot back (disk full) would raise SIGBUS. So the map is
 * never larger than what posix_fallocate() has allocated (kvf__jback(),
 * before the first write transaction and before every grow); a full disk
 * surfaces as ENOSPC from the grow, i.e. a failed batch. The file is thus
 * as large as the map, which grows by a quarter at a time.
 *
 * Concurrency: open, replay and close run on the owner's thread; every
 * write transaction afterwards belongs to the writer thread (writer.c).
 * The environment uses MDB_NOTLS, and the only read transactions of the
 * engine process are the replay's, which ends before the writer starts, so
 * the writer may resize the map at any time.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "journal/jint.h"

#define DEFAULT_MAP_SIZE (64ull << 20)
#define DEFAULT_SYNC_MS 50u
#define DEFAULT_CKPT_RECORDS 1000000ull
#define DEFAULT_FOLD_CHUNK 32768u
#define DEFAULT_WAL_BYTES (32ull << 20)
#define MIN_WAL_BYTES (64ull << 10)
/* Compact at open when the file is at least this big and 3/4 free. */
#define COMPACT_MIN_FILE (64ull << 20)
/* Map growth steps (kvf__jmap_step()). */
#define MAP_STEP_ALIGN (64ull << 10)
#define MAP_STEP_MAX (1ull << 30)

/* Why the last refusal on this thread happened (kvf__journal_error()). */
static __thread char jerr_buf[256];

void kvf__jerr(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(jerr_buf, sizeof(jerr_buf), fmt, ap);
	va_end(ap);
}

const char *kvf__journal_error(void)
{
	return jerr_buf;
}

int kvf__journal_status(int rc)
{
	/* Already a kvf_status (-1..-99; LMDB's codes are below -30000). */
	if (rc < 0 && rc > -1000)
		return rc;
	switch (rc) {
	case 0:
		return KVF_OK;
	case ENOSPC:
	case EDQUOT:
	case EFBIG:
		return KVF_ERR_JOURNAL_NO_SPACE;
	case EIO:
	case EROFS:
		return KVF_ERR_IO;
	case ENOMEM:
		return KVF_ERR_NO_MEMORY;
	case MDB_CORRUPTED:
	case MDB_INVALID:
	case MDB_VERSION_MISMATCH:
	case MDB_PAGE_NOTFOUND:
	case MDB_BAD_DBI:
	case MDB_INCOMPATIBLE:
		return KVF_ERR_JOURNAL_CORRUPT;
	default:
		return KVF_ERR_JOURNAL;
	}
}

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

static char *path_join(const char *dir, const char *name)
{
	size_t n = strlen(dir) + strlen(name) + 2;
	char *p = malloc(n);

	if (p)
		snprintf(p, n, "%s/%s", dir, name);
	return p;
}

int kvf__jenv_open(const char *dir, unsigned flags, uint64_t map_size,
		   MDB_env **out)
{
	MDB_env *env;
	int rc;

	rc = mdb_env_create(&env);
	if (rc)
		return rc;
	rc = mdb_env_set_maxdbs(env, 8);
	if (!rc && map_size)
		rc = mdb_env_set_mapsize(env, map_size);
	if (!rc)
		rc = mdb_env_open(env, dir, flags | MDB_NOTLS, 0644);
	if (rc) {
		mdb_env_close(env);
		return rc;
	}
	*out = env;
	return 0;
}

int kvf__jdbs_open(MDB_txn *txn, struct kvf__jdbs *dbs, int create)
{
	unsigned f = create ? MDB_CREATE : 0;
	int rc;

	rc = mdb_dbi_open(txn, "meta", f, &dbs->meta);
	if (!rc)
		rc = mdb_dbi_open(txn, "log", f, &dbs->log);
	if (!rc)
		rc = mdb_dbi_open(txn, "segs", f, &dbs->segs);
	if (!rc)
		rc = mdb_dbi_open(txn, "objs", f, &dbs->objs);
	if (!rc)
		rc = mdb_dbi_open(txn, "clients", f, &dbs->clients);
	return rc;
}

static int meta_get(MDB_txn *txn, MDB_dbi dbi, const char *name, void *out,
		    size_t len)
{
	MDB_val key = { strlen(name), (void *)name }, val;
	int rc = mdb_get(txn, dbi, &key, &val);

	if (rc)
		return rc == MDB_NOTFOUND ? MDB_CORRUPTED : rc;
	if (val.mv_size != len)
		return MDB_CORRUPTED;
	memcpy(out, val.mv_data, len);
	return 0;
}

/* Whether the meta database holds @name (an optional key). */
static bool meta_has(MDB_txn *txn, MDB_dbi dbi, const char *name)
{
	MDB_val key = { strlen(name), (void *)name }, val;

	return mdb_get(txn, dbi, &key, &val) != MDB_NOTFOUND;
}

static int meta_put(MDB_txn *txn, MDB_dbi dbi, const char *name,
		    const void *data, size_t len)
{
	MDB_val key = { strlen(name), (void *)name };
	MDB_val val = { len, (void *)data };

	return mdb_put(txn, dbi, &key, &val, 0);
}

static int count_frame(void *arg, const struct kvf__jrec *rec, uint32_t idx)
{
	return 0;
}

static uint32_t frame_count(const MDB_val *val)
{
	const uint8_t *p = val->mv_data;

	if (val->mv_size < KVF__FRAME_HDR)
		return 0;
	return (uint32_t)p[0] | (uint32_t)p[1] << 8;
}

/*
 * Walk the log's keys and frame headers (cheap: no record is decoded) to
 * check that sequences are contiguous from the checkpoint, fully decode
 * the last frame, and find the last sequence.
 */
static int log_ends(MDB_txn *txn, const struct kvf__jdbs *dbs,
		    struct kvf__jstate *st)
{
	uint64_t expect = st->ckpt_seq + 1;
	MDB_val key, val, last = { 0, NULL };
	MDB_cursor *cur;
	uint32_t count;
	int rc;

	rc = mdb_cursor_open(txn, dbs->log, &cur);
	if (rc)
		return rc;
	while (!(rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT))) {
		count = frame_count(&val);
		if (key.mv_size != 8 || !count ||
		    kvf__get_be64(key.mv_data) != expect) {
			rc = MDB_CORRUPTED; /* gap, or a damaged frame */
			break;
		}
		expect += count;
		last = val;
	}
	mdb_cursor_close(cur);
	if (rc != MDB_NOTFOUND)
		return rc;
	if (last.mv_data && kvf__frame_decode(&last, &count, count_frame, NULL))
		return MDB_CORRUPTED;
	st->last_seq = expect - 1;
	return 0;
}

static int db_entries(MDB_txn *txn, MDB_dbi dbi, uint64_t *n)
{
	MDB_stat s;
	int rc = mdb_stat(txn, dbi, &s);

	if (!rc)
		*n = s.ms_entries;
	return rc;
}

int kvf__jstate_read(MDB_txn *txn, const struct kvf__jdbs *dbs,
		     struct kvf__jstate *st)
{
	char magic[sizeof(KVF__MAGIC_VALUE)];
	int rc;

	memset(st, 0, sizeof(*st));
	rc = meta_get(txn, dbs->meta, KVF__META_MAGIC, magic, sizeof(magic));
	if (rc)
		return rc;
	if (memcmp(magic, KVF__MAGIC_VALUE, sizeof(magic)))
		return MDB_CORRUPTED;
	rc = meta_get(txn, dbs->meta, KVF__META_VERSION, &st->version,
		      sizeof(st->version));
	if (rc)
		return rc;
	if (st->version != KVF__JOURNAL_FORMAT_VERSION &&
	    st->version != KVF__JOURNAL_FORMAT_UPGRADABLE)
		return 0; /* the caller reports the version */
	rc = meta_get(txn, dbs->meta, KVF__META_CKPT_SEQ, &st->ckpt_seq,
		      sizeof(st->ckpt_seq));
	if (!rc)
		rc = meta_get(txn, dbs->meta, KVF__META_CKPT_COUNT,
			      &st->ckpt_count, sizeof(st->ckpt_count));
	if (!rc)
		rc = meta_get(txn, dbs->meta, KVF__META_JOURNAL_ID, &st->id,
			      sizeof(st->id));
	if (!rc && meta_has(txn, dbs->meta, KVF__META_SIDE_LOG))
		rc = meta_get(txn, dbs->meta, KVF__META_SIDE_LOG,
			      &st->wal_created, sizeof(st->wal_created));
	if (!rc)
		rc = log_ends(txn, dbs, st);
	if (!rc)
		rc = db_entries(txn, dbs->log, &st->log_frames);
	if (!rc)
		rc = db_entries(txn, dbs->objs, &st->objects);
	if (!rc)
		rc = db_entries(txn, dbs->segs, &st->segments);
	if (!rc)
		rc = db_entries(txn, dbs->clients, &st->clients);
	return rc;
}

/*
 * A random identity for a new journal: side log frames carry it in their
 * check (wal.c), so side log files left beside another LMDB file (one
 * that was deleted and created again) can never be replayed into it.
 */
static uint64_t new_journal_id(void)
{
	uint64_t id = 0;

	if (getrandom(&id, sizeof(id), 0) != sizeof(id) || !id) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		id = ((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec) ^
		     ((uint64_t)getpid() << 32) ^ 0x9e3779b97f4a7c15ull;
	}
	return id;
}

static int init_fresh(MDB_txn *txn, struct kvf__jdbs *dbs)
{
	uint32_t version = KVF__JOURNAL_FORMAT_VERSION;
	uint64_t zero = 0, id = new_journal_id();
	int rc;

	rc = kvf__jdbs_open(txn, dbs, 1);
	if (!rc)
		rc = meta_put(txn, dbs->meta, KVF__META_MAGIC, KVF__MAGIC_VALUE,
			      sizeof(KVF__MAGIC_VALUE));
	if (!rc)
		rc = meta_put(txn, dbs->meta, KVF__META_VERSION, &version,
			      sizeof(version));
	if (!rc)
		rc = meta_put(txn, dbs->meta, KVF__META_CKPT_SEQ, &zero,
			      sizeof(zero));
	if (!rc)
		rc = meta_put(txn, dbs->meta, KVF__META_CKPT_COUNT, &zero,
			      sizeof(zero));
	if (!rc)
		rc = meta_put(txn, dbs->meta, KVF__META_JOURNAL_ID, &id,
			      sizeof(id));
	return rc;
}

/*
 * Open the databases (initialising a fresh environment) and read the state.
 * Returns an LMDB/errno code, or KVF_ERR_JOURNAL_VERSION directly.
 */
static int load(struct kvf__journal *j)
{
	MDB_txn *txn;
	MDB_dbi main_dbi;
	uint64_t n = 0;
	int rc;

	rc = mdb_txn_begin(j->env, NULL, 0, &txn);
	if (rc)
		return rc;
	rc = mdb_dbi_open(txn, NULL, 0, &main_dbi);
	if (!rc)
		rc = db_entries(txn, main_dbi, &n);
	if (rc)
		goto abort;
	if (n == 0)
		rc = init_fresh(txn, &j->dbs);
	else
		rc = kvf__jdbs_open(txn, &j->dbs, 0);
	if (rc == MDB_NOTFOUND)
		rc = MDB_CORRUPTED; /* not a KVForge journal, or damaged */
	if (!rc)
		rc = kvf__jstate_read(txn, &j->dbs, &j->st);
	if (rc)
		goto abort;
	if (j->st.version != KVF__JOURNAL_FORMAT_VERSION &&
	    j->st.version != KVF__JOURNAL_FORMAT_UPGRADABLE) {
		kvf__jerr("data.mdb: format version %u, this build reads %u "
			  "(and upgrades %u)", j->st.version,
			  KVF__JOURNAL_FORMAT_VERSION,
			  KVF__JOURNAL_FORMAT_UPGRADABLE);
		rc = KVF_ERR_JOURNAL_VERSION;
		goto abort;
	}
	/* Commit even when nothing changed: it keeps the dbi handles. */
	return mdb_txn_commit(txn);
abort:
	mdb_txn_abort(txn);
	return rc;
}

static uint64_t file_size(const char *dir)
{
	char *p = path_join(dir, "data.mdb");
	struct stat sb;
	uint64_t sz = 0;

	if (p && !stat(p, &sb))
		sz = (uint64_t)sb.st_size;
	free(p);
	return sz;
}

/* Pages the databases actually use (an under-estimate of the live set). */
static uint64_t used_bytes(struct kvf__journal *j)
{
	MDB_dbi dbis[] = { j->dbs.meta, j->dbs.log, j->dbs.segs, j->dbs.objs,
			   j->dbs.clients };
	uint64_t pages = 4;
	MDB_txn *txn;
	MDB_stat s;

	if (mdb_txn_begin(j->env, NULL, MDB_RDONLY, &txn))
		return UINT64_MAX;
	for (size_t i = 0; i < sizeof(dbis) / sizeof(dbis[0]); i++) {
		if (mdb_stat(txn, dbis[i], &s)) {
			mdb_txn_abort(txn);
			return UINT64_MAX;
		}
		pages += s.ms_branch_pages + s.ms_leaf_pages +
			 s.ms_overflow_pages;
	}
	mdb_txn_abort(txn);
	return pages * s.ms_psize;
}

/*
 * Bytes up to the last page in use: the file size without MDB_WRITEMAP;
 * with it the file is as large as the map (all of it allocated).
 */
static uint64_t data_end(struct kvf__journal *j)
{
	MDB_envinfo info;
	MDB_stat est;

	if (mdb_env_info(j->env, &info) || mdb_env_stat(j->env, &est))
		return 0;
	return (info.me_last_pgno + 1) * est.ms_psize;
}

static unsigned env_flags(const struct kvf__journal *j)
{
	if (j->cfg.durability != KVF_DURABILITY_BOUNDED)
		return 0;
	/* writer.c: why not MDB_NOSYNC. */
	return MDB_NOMETASYNC | (j->writemap ? MDB_WRITEMAP : 0);
}

int kvf__jback(struct kvf__journal *j, uint64_t size)
{
	mdb_filehandle_t fd;
	int rc;

	if (!j->writemap)
		return 0;
	rc = mdb_env_get_fd(j->env, &fd);
	if (!rc)
		rc = posix_fallocate(fd, 0, (off_t)size);
	return rc;
}

/*
 * With MDB_WRITEMAP, mdb_env_sync() msync()s the map, which the slot holder
 * may be remapping (a map grow) at that moment on another thread.
 * fdatasync() of the file is equivalent on Linux (pages dirtied through a
 * shared mapping are dirty in the page cache) and does not touch the map.
 */
int kvf__jsync(struct kvf__journal *j)
{
	mdb_filehandle_t fd;
	int rc;

	if (!j->writemap)
		return mdb_env_sync(j->env, 1);
	rc = mdb_env_get_fd(j->env, &fd);
	if (!rc && fdatasync(fd))
		rc = errno;
	return rc;
}

uint64_t kvf__jmap_step(uint64_t size)
{
	uint64_t step = size / 4 & ~(MAP_STEP_ALIGN - 1);

	if (step < MAP_STEP_ALIGN)
		step = MAP_STEP_ALIGN;
	return step < MAP_STEP_MAX ? step : MAP_STEP_MAX;
}

/*
 * With MDB_WRITEMAP, choose and back the map before the first write
 * transaction (load() may initialise a fresh file): LMDB has just extended
 * the file sparsely to the configured map size. The map is the configured
 * size (or what the data needs plus a step); if the disk cannot hold that
 * much, the data plus one step: open still succeeds on a nearly full disk,
 * and appends report KVF_ERR_JOURNAL_NO_SPACE once that is used up.
 */
static int writemap_fit(struct kvf__journal *j)
{
	uint64_t used = data_end(j), want;
	MDB_envinfo info;
	int rc;

	rc = mdb_env_info(j->env, &info);
	if (rc)
		return rc;
	want = used + kvf__jmap_step(used);
	if (want < j->cfg.map_size)
		want = j->cfg.map_size;
	rc = kvf__jback(j, want);
	if (rc == ENOSPC) {
		want = used + kvf__jmap_step(used);
		rc = kvf__jback(j, want);
	}
	if (!rc && want != info.me_mapsize)
		rc = mdb_env_set_mapsize(j->env, want);
	if (!rc)
		j->map_size = want;
	return rc;
}

/* Open the environment for writing; see writemap_fit(). */
static int jenv_open_rw(struct kvf__journal *j)
{
	MDB_envinfo info;
	int rc;

	MDB_stat est;

	rc = kvf__jenv_open(j->dir, env_flags(j), j->cfg.map_size, &j->env);
	if (!rc)
		rc = mdb_env_stat(j->env, &est);
	if (rc)
		return rc;
	j->psize = est.ms_psize;
	if (j->writemap)
		return writemap_fit(j);
	rc = mdb_env_info(j->env, &info);
	if (!rc)
		j->map_size = info.me_mapsize;
	return rc;
}

/*
 * Compaction, at open only (quiescent: no writer thread, no read txn in
 * this process). mdb_env_copy2(MDB_CP_COMPACT) writes a dense copy into
 * DIR/compact.tmp, which atomically replaces data.mdb by rename(); a crash
 * before the rename leaves the old file intact and the stale copy is
 * removed at the next open.
 */
static int maybe_compact(struct kvf__journal *j)
{
	char *tmp = path_join(j->dir, "compact.tmp");
	char *src = path_join(j->dir, "compact.tmp/data.mdb");
	char *dst = path_join(j->dir, "data.mdb");
	uint64_t fsz = data_end(j);
	int rc = 0, dfd;

	if (!tmp || !src || !dst) {
		rc = ENOMEM;
		goto out;
	}
	unlink(src);
	rmdir(tmp);
	if (!j->cfg.compact_at_open || fsz < COMPACT_MIN_FILE ||
	    used_bytes(j) > fsz / 4)
		goto out;
	if (mkdir(tmp, 0755)) {
		rc = errno;
		goto out;
	}
	rc = mdb_env_copy2(j->env, tmp, MDB_CP_COMPACT);
	if (rc)
		goto out_clean;
	mdb_env_close(j->env);
	j->env = NULL;
	if (rename(src, dst)) {
		rc = errno;
		goto out_clean;
	}
	dfd = open(j->dir, O_RDONLY | O_DIRECTORY);
	if (dfd >= 0) {
		fsync(dfd);
		close(dfd);
	}
	rmdir(tmp);
	rc = jenv_open_rw(j);
	if (!rc)
		rc = load(j);
	goto out;
out_clean:
	unlink(src);
	rmdir(tmp);
	if (!j->env && !rc)
		rc = EIO;
out:
	free(tmp);
	free(src);
	free(dst);
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
	    (cfg->wal_bytes < MIN_WAL_BYTES || cfg->wal_bytes % 4096))
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
	if (!c->wal_bytes)
		c->wal_bytes = DEFAULT_WAL_BYTES;
}

static int take_lock(struct kvf__journal *j)
{
	char *p = path_join(j->dir, "kvforge.lock");
	int rc = KVF_OK;

	if (!p)
		return KVF_ERR_NO_MEMORY;
	j->lock_fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	free(p);
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
	     pthread_mutex_init(&j->map_mu, NULL) ||
	     pthread_cond_init(&j->work_cv, &ca) ||
	     pthread_cond_init(&j->ckpt_cv, &ca) ||
	     pthread_cond_init(&j->sync_cv, &ca) ||
	     pthread_cond_init(&j->lead_cv, &ca);
	pthread_condattr_destroy(&ca);
	return rc ? KVF_ERR_NO_MEMORY : KVF_OK;
}

static void journal_free(struct kvf__journal *j)
{
	while (j->nr_bufs)
		free(j->bufs[--j->nr_bufs]);
	kvf__wal_close(j);
	if (j->env)
		mdb_env_close(j->env);
	if (j->lock_fd >= 0)
		close(j->lock_fd); /* releases the flock */
	pthread_cond_destroy(&j->lead_cv);
	pthread_cond_destroy(&j->sync_cv);
	pthread_cond_destroy(&j->ckpt_cv);
	pthread_cond_destroy(&j->work_cv);
	pthread_mutex_destroy(&j->map_mu);
	pthread_mutex_destroy(&j->mu);
	free(j->dir);
	free(j);
}

/*
 * Checking data.mdb before LMDB maps it. LMDB maps the whole file and
 * trusts its meta pages: a page beyond the end of a truncated file is a
 * SIGBUS on first touch, and LMDB has no page checksums, so damage inside
 * a B-tree page is caught only by its structural checks (MDB_CORRUPTED,
 * MDB_PAGE_NOTFOUND) or an assertion (abort). What can be checked from
 * outside is the meta pages (docs/journal.md lists what cannot): the two
 * copies at the start of the file, LMDB 0.9's MDB_meta after a 16-byte
 * page header (offsets below); LMDB uses the one with the higher
 * transaction id, which must describe a file at least as long as its
 * last page and roots inside it.
 */
#define LMDB_MAGIC 0xBEEFC0DEu
#define LMDB_DATA_VERSION 1u
#define LMDB_PAGE_HDR 16u
#define LMDB_META_BYTES 136u
#define LMDB_NO_PAGE UINT64_MAX

struct lmdb_meta {
	uint32_t magic, version, psize;
	uint64_t free_root, main_root, last_pg, txnid;
};

static uint32_t get_le32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return v;
}

static uint64_t get_le64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return v;
}

/* Read the meta page at @off; false if it cannot be read. */
static bool read_meta(int fd, uint64_t off, struct lmdb_meta *m)
{
	uint8_t b[LMDB_PAGE_HDR + LMDB_META_BYTES];
	const uint8_t *p = b + LMDB_PAGE_HDR;

	if (pread(fd, b, sizeof(b), (off_t)off) != (ssize_t)sizeof(b))
		return false;
	m->magic = get_le32(p);
	m->version = get_le32(p + 4);
	m->psize = get_le32(p + 24);      /* mm_dbs[FREE_DBI].md_pad */
	m->free_root = get_le64(p + 64);  /* mm_dbs[FREE_DBI].md_root */
	m->main_root = get_le64(p + 112); /* mm_dbs[MAIN_DBI].md_root */
	m->last_pg = get_le64(p + 120);
	m->txnid = get_le64(p + 128);
	return true;
}

static bool meta_sane(const struct lmdb_meta *m)
{
	return m->magic == LMDB_MAGIC && m->version == LMDB_DATA_VERSION &&
	       m->psize >= 512 && m->psize <= 65536 &&
	       !(m->psize & (m->psize - 1));
}

static int check_data_file(const char *dir)
{
	char *path = path_join(dir, "data.mdb");
	struct lmdb_meta m[2], *cur;
	uint64_t size, pages;
	struct stat sb;
	int fd, rc = 0;

	if (!path)
		return ENOMEM;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	free(path);
	if (fd < 0)
		return errno == ENOENT ? 0 : errno;
	if (fstat(fd, &sb)) {
		rc = errno;
		goto out;
	}
	size = (uint64_t)sb.st_size;
	if (!size)
		goto out; /* a new file: LMDB initialises it */
	if (!read_meta(fd, 0, &m[0]) || !meta_sane(&m[0]) ||
	    size < 2ull * m[0].psize || !read_meta(fd, m[0].psize, &m[1]) ||
	    !meta_sane(&m[1]) || m[1].psize != m[0].psize) {
		kvf__jerr("data.mdb: %llu bytes, no valid pair of LMDB meta "
			  "pages", (unsigned long long)size);
		rc = KVF_ERR_JOURNAL_CORRUPT;
		goto out;
	}
	cur = &m[m[0].txnid < m[1].txnid];
	pages = size / cur->psize;
	if (cur->last_pg >= pages ||
	    (cur->main_root != LMDB_NO_PAGE && cur->main_root > cur->last_pg) ||
	    (cur->free_root != LMDB_NO_PAGE && cur->free_root > cur->last_pg)) {
		kvf__jerr("data.mdb: %llu bytes (%llu pages), but its meta "
			  "page (transaction %llu) uses pages up to %llu "
			  "(truncated or damaged)", (unsigned long long)size,
			  (unsigned long long)pages,
			  (unsigned long long)cur->txnid,
			  (unsigned long long)cur->last_pg);
		rc = KVF_ERR_JOURNAL_CORRUPT;
	}
out:
	close(fd);
	return rc;
}

/*
 * After the side log files were created or upgraded (wal.c): record it,
 * with the current format version, so that from now on missing side log
 * files are refused, and so that an older build refuses the directory.
 */
static int mark_side_log(struct kvf__journal *j)
{
	uint32_t one = 1, version = KVF__JOURNAL_FORMAT_VERSION;
	MDB_txn *txn;
	int rc;

	if (j->st.wal_created && j->st.version == version)
		return 0;
	rc = mdb_txn_begin(j->env, NULL, 0, &txn);
	if (rc)
		return rc;
	rc = meta_put(txn, j->dbs.meta, KVF__META_SIDE_LOG, &one, sizeof(one));
	if (!rc)
		rc = meta_put(txn, j->dbs.meta, KVF__META_VERSION, &version,
			      sizeof(version));
	if (rc) {
		mdb_txn_abort(txn);
		return rc;
	}
	rc = mdb_txn_commit(txn);
	if (!rc)
		rc = mdb_env_sync(j->env, 1);
	if (!rc) {
		j->st.wal_created = 1;
		j->st.version = version;
	}
	return rc;
}

static uint64_t path_size(const char *dir, const char *name, bool *exists)
{
	char *p = path_join(dir, name);
	struct stat sb;
	uint64_t sz = 0;

	*exists = false;
	if (p && !stat(p, &sb)) {
		*exists = true;
		sz = (uint64_t)sb.st_size;
	}
	free(p);
	return sz;
}

int kvf__jdir_check(const char *dir)
{
	bool data, wal0, wal1;
	uint64_t size = path_size(dir, "data.mdb", &data);

	path_size(dir, "wal-0.log", &wal0);
	path_size(dir, "wal-1.log", &wal1);
	if (!size && (wal0 || wal1)) {
		kvf__jerr("data.mdb is %s but side log files exist: not "
			  "initialising a new journal over them",
			  data ? "empty" : "missing");
		return KVF_ERR_JOURNAL_CORRUPT;
	}
	return size ? check_data_file(dir) : 0;
}

static int open_env(struct kvf__journal *j)
{
	int dead, rc;

	rc = kvf__jdir_check(j->dir);
	if (!rc)
		rc = jenv_open_rw(j);
	if (rc)
		return rc;
	mdb_reader_check(j->env, &dead); /* slots of crashed processes */
	rc = load(j);
	if (!rc) {
		j->wal.size = j->cfg.wal_bytes;
		rc = kvf__wal_open(j); /* moves acknowledged frames into LMDB */
	}
	if (!rc)
		rc = mark_side_log(j);
	if (!rc)
		rc = maybe_compact(j);
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
	j->wal.f[0].fd = j->wal.f[1].fd = -1;
	j->cfg = *cfg;
	apply_defaults(&j->cfg);
	j->dir = strdup(cfg->dir);
	j->cfg.dir = j->dir;
	j->tail = &j->head;
	j->writemap = cfg->durability == KVF_DURABILITY_BOUNDED && cfg->writemap;
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
	rc = open_env(j);
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

int kvf__frame_decode(const MDB_val *val, uint32_t *count,
		      int (*fn)(void *arg, const struct kvf__jrec *rec,
				uint32_t idx),
		      void *arg)
{
	const uint8_t *p = val->mv_data;
	size_t len = val->mv_size, off = KVF__FRAME_HDR;
	struct kvf__jrec rec;
	uint32_t n, i;
	int rc;

	if (len < KVF__FRAME_HDR)
		return KVF_ERR_JOURNAL_CORRUPT;
	n = (uint32_t)p[0] | (uint32_t)p[1] << 8;
	if (n == 0)
		return KVF_ERR_JOURNAL_CORRUPT;
	for (i = 0; i < n; i++) {
		size_t used;

		if (kvf__jrec_decode(p + off, len - off, &rec, &used))
			return KVF_ERR_JOURNAL_CORRUPT;
		off += used;
		rc = fn(arg, &rec, i);
		if (rc)
			return rc;
	}
	if (off != len)
		return KVF_ERR_JOURNAL_CORRUPT;
	*count = n;
	return KVF_OK;
}

/* Image pass: every entry of @dbi must decode to one record of @type. */
static int scan_image(MDB_txn *txn, MDB_dbi dbi, enum kvf__jrec_type type,
		      uint64_t seq, const struct kvf__journal_replay_ops *ops,
		      void *arg)
{
	MDB_cursor *cur;
	MDB_val key, val;
	struct kvf__jrec rec;
	int mrc, rc = KVF_OK;

	mrc = mdb_cursor_open(txn, dbi, &cur);
	if (mrc)
		return kvf__journal_status(mrc);
	while (!rc && !(mrc = mdb_cursor_get(cur, &key, &val, MDB_NEXT))) {
		size_t used;

		if (kvf__jrec_decode(val.mv_data, val.mv_size, &rec, &used) ||
		    used != val.mv_size || rec.type != type)
			rc = KVF_ERR_JOURNAL_CORRUPT;
		else
			rc = ops->record(arg, &rec, seq);
	}
	mdb_cursor_close(cur);
	if (!rc && mrc != MDB_NOTFOUND)
		rc = kvf__journal_status(mrc);
	return rc;
}

struct log_walk {
	const struct kvf__journal_replay_ops *ops;
	void *arg;
	uint64_t seq; /* of the frame's first record */
};

static int log_record(void *arg, const struct kvf__jrec *rec, uint32_t idx)
{
	struct log_walk *w = arg;

	return w->ops->record(w->arg, rec, w->seq + idx);
}

static int scan_log(MDB_txn *txn, MDB_dbi dbi, uint64_t ckpt_seq,
		    const struct kvf__journal_replay_ops *ops, void *arg,
		    uint64_t *last_seq)
{
	struct log_walk w = { ops, arg, 0 };
	uint64_t expect = ckpt_seq + 1;
	MDB_cursor *cur;
	MDB_val key, val;
	uint32_t count;
	int mrc, rc = KVF_OK;

	mrc = mdb_cursor_open(txn, dbi, &cur);
	if (mrc)
		return kvf__journal_status(mrc);
	while (!rc && !(mrc = mdb_cursor_get(cur, &key, &val, MDB_NEXT))) {
		if (key.mv_size != 8 || kvf__get_be64(key.mv_data) != expect) {
			rc = KVF_ERR_JOURNAL_CORRUPT; /* sequence gap */
			break;
		}
		w.seq = expect;
		rc = kvf__frame_decode(&val, &count, log_record, &w);
		if (!rc)
			expect += count;
	}
	mdb_cursor_close(cur);
	*last_seq = expect - 1;
	if (!rc && mrc != MDB_NOTFOUND)
		rc = kvf__journal_status(mrc);
	return rc;
}

int kvf__jscan(MDB_txn *txn, const struct kvf__jdbs *dbs, uint64_t ckpt_seq,
	       const struct kvf__journal_replay_ops *ops, void *arg,
	       uint64_t *last_seq)
{
	int rc;

	rc = scan_image(txn, dbs->segs, KVF__JREC_SEGMENT_MOUNT, ckpt_seq, ops,
			arg);
	if (!rc)
		rc = scan_image(txn, dbs->objs, KVF__JREC_OBJECT_PUT, ckpt_seq,
				ops, arg);
	if (!rc && ops->image_done)
		rc = ops->image_done(arg);
	if (!rc)
		rc = scan_log(txn, dbs->log, ckpt_seq, ops, arg, last_seq);
	return rc;
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
	rc = mdb_txn_begin(j->env, NULL, MDB_RDONLY, &txn);
	if (rc)
		return kvf__journal_status(rc);
	rc = kvf__jscan(txn, &j->dbs, j->st.ckpt_seq, ops, arg, &last);
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
	st->last_seq = j->wal.on ? j->wal.acked_seq : j->st.last_seq;
	st->log_records = st->last_seq - j->st.ckpt_seq;
	st->wal_pending = st->last_seq - j->st.last_seq;
	st->map_size = j->map_size;
	st->commits = j->commits;
	st->map_grows = j->map_grows;
	st->sync_errors = j->sync_errors;
	st->format_version = j->st.version;
	pthread_mutex_unlock(&j->mu);
	st->file_size = file_size(j->dir);
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
#endif

int kvf__journal_sync(struct kvf__journal *j)
{
	int rc = 0;

	for (int i = 0; j->wal.on && i < 2 && !rc; i++)
		rc = kvf__wal_sync_file(j, i);
	if (!rc)
		rc = kvf__jsync(j);
	return kvf__journal_status(rc);
}

void kvf__journal_close(struct kvf__journal *j)
{
	if (!j)
		return;
	kvf__writer_stop(j);
	kvf__jsync(j);
	journal_free(j);
}
