/* SPDX-License-Identifier: MIT */
/*
 * journal/store.c - the LMDB store: the environment, the meta and log
 * tables, write transactions, the map, compaction.
 *
 * Layout: DIR/data.mdb and DIR/lock.mdb. Databases: "meta" (magic, format
 * version, checkpoint sequence and count, journal id, the side log mark,
 * which object database holds the image), "log" (frames of records,
 * record.h), and the image: "segs", "objs" or "objs.1" (the other is a
 * checkpoint rewrite's output while it is written, else empty:
 * rewrite.c), "clients" (image.c).
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
 * Durability: STRICT opens the environment without MDB_NOSYNC, so each
 * commit is synced before it returns. BOUNDED uses MDB_NOMETASYNC (plus
 * MDB_WRITEMAP when configured): a commit syncs its data pages but not
 * its meta page, which the next commit's sync or the periodic one covers,
 * so an OS crash can cost LMDB its last commit but never leave a meta
 * page pointing at unwritten pages (which MDB_NOSYNC could: a damaged
 * file). The pipeline keeps whatever such a commit held in the side log
 * until a sync covered it.
 *
 * MDB_WRITEMAP (BOUNDED, opt-in: kvf_config.journal_writemap): commits
 * store into the shared mapping instead of copying dirty pages with
 * pwritev (docs/journal.md says why it is not the default: checkpoint
 * folds). LMDB then extends the file sparsely to the map size, and a
 * store into a page the file system cannot back (disk full) would raise
 * SIGBUS. So the map is never larger than what posix_fallocate() has
 * allocated (back_map(), before the first write transaction and
 * before every grow); a full disk surfaces as ENOSPC from the grow, i.e. a
 * failed batch. The file is thus as large as the map, which grows by a
 * quarter at a time. The first store into a fresh page of the map would
 * fault on the committing thread, so the pipeline has pages ahead of
 * LMDB's end populated (kvf__store_prefault()), and before each periodic
 * sync the log far behind the end unmapped (kvf__store_unmap_below()).
 *
 * Concurrency: one thread at a time holds a write transaction (the
 * pipeline's slot); the environment uses MDB_NOTLS, and the only read
 * transactions of an engine process are the replay's, which ends before
 * any write after open, so the slot holder may resize the map at any
 * time. @map_mu keeps a remap away from the prefaulting and unmapping
 * threads.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "journal/error.h"
#include "journal/store.h"

/* Compact at open when the file is at least this big and 3/4 free. */
#define COMPACT_MIN_FILE (64ull << 20)
/* Map growth steps (kvf__store_map_step()). */
#define MAP_STEP_ALIGN (64ull << 10)
#define MAP_STEP_MAX (1ull << 30)
/* Before a sync, unmap the log written more than this behind the end. */
#define ZAP_MARGIN (1ull << 20)
/* Below this much free space, a failed write means "disk full". */
#define KVF__NEARLY_FULL (4ull << 20)

/* mkdir -p */
static char *path_join(const char *dir, const char *name)
{
	size_t n = strlen(dir) + strlen(name) + 2;
	char *p = malloc(n);

	if (p)
		snprintf(p, n, "%s/%s", dir, name);
	return p;
}

int kvf__store_env_open(const char *dir, unsigned flags, uint64_t map_size,
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

int kvf__store_dbs_open(MDB_txn *txn, struct kvf__store_dbs *dbs, int create)
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
	if (rc)
		return rc;
	rc = mdb_dbi_open(txn, "objs.1", f, &dbs->objs_alt);
	dbs->has_alt = !rc;
	return rc == MDB_NOTFOUND ? 0 : rc;
}

/* Read meta @name (@len bytes) into @out; MDB_NOTFOUND if absent. */
static int meta_read(MDB_txn *txn, MDB_dbi dbi, const char *name, void *out,
		     size_t len)
{
	MDB_val key = { strlen(name), (void *)name }, val;
	int rc = mdb_get(txn, dbi, &key, &val);

	if (rc)
		return rc;
	if (val.mv_size != len)
		return MDB_CORRUPTED;
	memcpy(out, val.mv_data, len);
	return 0;
}

/* A key every journal has: absent is damage. */
static int meta_get(MDB_txn *txn, MDB_dbi dbi, const char *name, void *out,
		    size_t len)
{
	int rc = meta_read(txn, dbi, name, out, len);

	return rc == MDB_NOTFOUND ? MDB_CORRUPTED : rc;
}

/* An optional key: absent leaves @out as it is. */
static int meta_get_opt(MDB_txn *txn, MDB_dbi dbi, const char *name,
			void *out, size_t len)
{
	int rc = meta_read(txn, dbi, name, out, len);

	return rc == MDB_NOTFOUND ? 0 : rc;
}

int kvf__store_image(MDB_txn *txn, const struct kvf__store_dbs *dbs,
		     MDB_dbi *image, MDB_dbi *spare)
{
	uint32_t which = 0;
	int rc = meta_get_opt(txn, dbs->meta, KVF__META_IMAGE, &which,
			      sizeof(which));

	if (rc)
		return rc;
	if (which > 1 || (which && !dbs->has_alt))
		return MDB_CORRUPTED;
	*image = which ? dbs->objs_alt : dbs->objs;
	if (spare)
		*spare = which ? dbs->objs : dbs->objs_alt;
	return 0;
}

int kvf__store_meta_put(MDB_txn *txn, MDB_dbi dbi, const char *name,
		    const void *data, size_t len)
{
	MDB_val key = { strlen(name), (void *)name };
	MDB_val val = { len, (void *)data };

	return mdb_put(txn, dbi, &key, &val, 0);
}

static int count_frame(void *arg, const struct kvf__jrec *rec, uint32_t idx)
{
	(void)arg;
	(void)rec;
	(void)idx;
	return 0;
}


/*
 * Walk the log's keys and frame headers (cheap: no record is decoded) to
 * check that sequences are contiguous from the checkpoint, fully decode
 * the last frame, and find the last sequence.
 */
static int log_ends(MDB_txn *txn, const struct kvf__store_dbs *dbs,
		    struct kvf__store_state *st)
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
		count = kvf__frame_count(val.mv_data, val.mv_size);
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
	if (last.mv_data && kvf__frame_decode(last.mv_data, last.mv_size,
					      &count, count_frame, NULL))
		return MDB_CORRUPTED;
	st->last_seq = expect - 1;
	return 0;
}

int kvf__store_entries(MDB_txn *txn, MDB_dbi dbi, uint64_t *n)
{
	MDB_stat s;
	int rc = mdb_stat(txn, dbi, &s);

	if (!rc)
		*n = s.ms_entries;
	return rc;
}

int kvf__store_state_read(MDB_txn *txn, const struct kvf__store_dbs *dbs,
		     struct kvf__store_state *st)
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
	if (!kvf__journal_format_readable(st->version))
		return 0; /* the caller reports the version */
	rc = meta_get(txn, dbs->meta, KVF__META_CKPT_SEQ, &st->ckpt_seq,
		      sizeof(st->ckpt_seq));
	if (!rc)
		rc = meta_get(txn, dbs->meta, KVF__META_CKPT_COUNT,
			      &st->ckpt_count, sizeof(st->ckpt_count));
	if (!rc)
		rc = meta_get(txn, dbs->meta, KVF__META_JOURNAL_ID, &st->id,
			      sizeof(st->id));
	if (!rc)
		rc = meta_get_opt(txn, dbs->meta, KVF__META_SIDE_LOG,
				  &st->sidelog_created,
				  sizeof(st->sidelog_created));
	if (!rc)
		rc = log_ends(txn, dbs, st);
	if (!rc)
		rc = kvf__store_entries(txn, dbs->log, &st->log_frames);
	if (!rc)
		rc = kvf__store_count_image(txn, dbs, st);
	return rc;
}

int kvf__store_count_image(MDB_txn *txn, const struct kvf__store_dbs *dbs,
			   struct kvf__store_state *st)
{
	MDB_dbi objs, spare;
	int rc = kvf__store_image(txn, dbs, &objs, &spare);

	st->image_db = dbs->has_alt && objs == dbs->objs_alt;
	st->spare_entries = 0;
	if (!rc)
		rc = kvf__store_entries(txn, objs, &st->objects);
	if (!rc && dbs->has_alt)
		rc = kvf__store_entries(txn, spare, &st->spare_entries);
	if (!rc)
		rc = kvf__store_entries(txn, dbs->segs, &st->segments);
	if (!rc)
		rc = kvf__store_entries(txn, dbs->clients, &st->clients);
	return rc;
}

/*
 * A random identity for a new journal: side log frames carry it in their
 * check (sidelog.c), so side log files left beside another LMDB file (one
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

static int init_fresh(MDB_txn *txn, struct kvf__store_dbs *dbs)
{
	uint32_t version = KVF__JOURNAL_FORMAT_VERSION;
	uint64_t zero = 0, id = new_journal_id();
	int rc;

	rc = kvf__store_dbs_open(txn, dbs, 1);
	if (!rc)
		rc = kvf__store_meta_put(txn, dbs->meta, KVF__META_MAGIC,
					 KVF__MAGIC_VALUE,
					 sizeof(KVF__MAGIC_VALUE));
	if (!rc)
		rc = kvf__store_meta_put(txn, dbs->meta, KVF__META_VERSION,
					 &version, sizeof(version));
	if (!rc)
		rc = kvf__store_meta_put(txn, dbs->meta, KVF__META_CKPT_SEQ,
					 &zero, sizeof(zero));
	if (!rc)
		rc = kvf__store_meta_put(txn, dbs->meta, KVF__META_CKPT_COUNT,
					 &zero, sizeof(zero));
	if (!rc)
		rc = kvf__store_meta_put(txn, dbs->meta, KVF__META_JOURNAL_ID,
					 &id, sizeof(id));
	return rc;
}

/*
 * Open the databases (initialising a fresh environment) and read the state.
 * Returns an LMDB/errno code, or KVF_ERR_JOURNAL_VERSION directly.
 */
static int load(struct kvf__store *s, struct kvf__store_state *st)
{
	MDB_txn *txn;
	MDB_dbi main_dbi;
	uint64_t n = 0;
	int rc;

	rc = mdb_txn_begin(s->env, NULL, 0, &txn);
	if (rc)
		return rc;
	rc = mdb_dbi_open(txn, NULL, 0, &main_dbi);
	if (!rc)
		rc = kvf__store_entries(txn, main_dbi, &n);
	if (rc)
		goto abort;
	if (n == 0)
		rc = init_fresh(txn, &s->dbs);
	else
		rc = kvf__store_dbs_open(txn, &s->dbs, 0);
	if (!rc && !s->dbs.has_alt) /* a version 3 or older directory */
		rc = mdb_dbi_open(txn, "objs.1", MDB_CREATE, &s->dbs.objs_alt);
	if (!rc)
		s->dbs.has_alt = true;
	if (rc == MDB_NOTFOUND)
		rc = MDB_CORRUPTED; /* not a KVForge journal, or damaged */
	if (!rc)
		rc = kvf__store_state_read(txn, &s->dbs, st);
	if (rc)
		goto abort;
	if (!kvf__journal_format_readable(st->version)) {
		kvf__jerr("data.mdb: format version %u, this build reads %u "
			  "to %u", st->version, KVF__JOURNAL_FORMAT_OLDEST,
			  KVF__JOURNAL_FORMAT_VERSION);
		rc = KVF_ERR_JOURNAL_VERSION;
		goto abort;
	}
	/* Commit even when nothing changed: it keeps the dbi handles. */
	return mdb_txn_commit(txn);
abort:
	mdb_txn_abort(txn);
	return rc;
}

uint64_t kvf__store_file_size(const char *dir)
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
static uint64_t used_bytes(struct kvf__store *s)
{
	MDB_dbi dbis[] = { s->dbs.meta, s->dbs.log, s->dbs.segs, s->dbs.objs,
			   s->dbs.objs_alt, s->dbs.clients };
	uint64_t pages = 4;
	MDB_txn *txn;
	MDB_stat ms;

	if (mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn))
		return UINT64_MAX;
	for (size_t i = 0; i < sizeof(dbis) / sizeof(dbis[0]); i++) {
		if (mdb_stat(txn, dbis[i], &ms)) {
			mdb_txn_abort(txn);
			return UINT64_MAX;
		}
		pages += ms.ms_branch_pages + ms.ms_leaf_pages +
			 ms.ms_overflow_pages;
	}
	mdb_txn_abort(txn);
	return pages * ms.ms_psize;
}

/*
 * Bytes up to the last page in use: the file size without MDB_WRITEMAP;
 * with it the file is as large as the map (all of it allocated).
 */
static uint64_t data_end(struct kvf__store *s)
{
	MDB_envinfo info;
	MDB_stat est;

	if (mdb_env_info(s->env, &info) || mdb_env_stat(s->env, &est))
		return 0;
	return (info.me_last_pgno + 1) * est.ms_psize;
}

static unsigned env_flags(const struct kvf__store *s)
{
	if (!s->bounded)
		return 0;
	/* Why not MDB_NOSYNC: see the top of this file. */
	return MDB_NOMETASYNC | (s->writemap ? MDB_WRITEMAP : 0);
}

static int back_map(struct kvf__store *s, uint64_t size)
{
	mdb_filehandle_t fd;
	int rc;

	if (!s->writemap)
		return 0;
	rc = mdb_env_get_fd(s->env, &fd);
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
int kvf__store_sync(struct kvf__store *s)
{
	mdb_filehandle_t fd;
	int rc;

	if (!s->writemap)
		return mdb_env_sync(s->env, 1);
	rc = mdb_env_get_fd(s->env, &fd);
	if (!rc && fdatasync(fd))
		rc = errno;
	return rc;
}

uint64_t kvf__store_map_step(uint64_t size)
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
static int writemap_fit(struct kvf__store *s)
{
	uint64_t used = data_end(s), want;
	MDB_envinfo info;
	int rc;

	rc = mdb_env_info(s->env, &info);
	if (rc)
		return rc;
	want = used + kvf__store_map_step(used);
	if (want < s->want_map)
		want = s->want_map;
	rc = back_map(s, want);
	if (rc == ENOSPC) {
		want = used + kvf__store_map_step(used);
		rc = back_map(s, want);
	}
	if (!rc && want != info.me_mapsize)
		rc = mdb_env_set_mapsize(s->env, want);
	if (!rc)
		s->map_size = want;
	return rc;
}

/* Open the environment for writing; see writemap_fit(). */
static int jenv_open_rw(struct kvf__store *s)
{
	MDB_envinfo info;
	int rc;

	MDB_stat est;

	rc = kvf__store_env_open(s->dir, env_flags(s), s->want_map, &s->env);
	if (!rc)
		rc = mdb_env_stat(s->env, &est);
	if (rc)
		return rc;
	s->psize = est.ms_psize;
	if (s->writemap)
		return writemap_fit(s);
	rc = mdb_env_info(s->env, &info);
	if (!rc)
		s->map_size = info.me_mapsize;
	return rc;
}

/*
 * Compaction, at open only (quiescent: no writer thread, no read txn in
 * this process). mdb_env_copy2(MDB_CP_COMPACT) writes a dense copy into
 * DIR/compact.tmp, which atomically replaces data.mdb by rename(); a crash
 * before the rename leaves the old file intact and the stale copy is
 * removed at the next open.
 */
int kvf__store_compact(struct kvf__store *s, struct kvf__store_state *st)
{
	char *tmp = path_join(s->dir, "compact.tmp");
	char *src = path_join(s->dir, "compact.tmp/data.mdb");
	char *dst = path_join(s->dir, "data.mdb");
	uint64_t fsz = data_end(s);
	int rc = 0, dfd;

	if (!tmp || !src || !dst) {
		rc = ENOMEM;
		goto out;
	}
	unlink(src);
	rmdir(tmp);
	if (!s->compact || fsz < COMPACT_MIN_FILE ||
	    used_bytes(s) > fsz / 4)
		goto out;
	if (mkdir(tmp, 0755)) {
		rc = errno;
		goto out;
	}
	rc = mdb_env_copy2(s->env, tmp, MDB_CP_COMPACT);
	if (rc)
		goto out_clean;
	mdb_env_close(s->env);
	s->env = NULL;
	if (rename(src, dst)) {
		rc = errno;
		goto out_clean;
	}
	dfd = open(s->dir, O_RDONLY | O_DIRECTORY);
	if (dfd >= 0) {
		fsync(dfd);
		close(dfd);
	}
	rmdir(tmp);
	rc = jenv_open_rw(s);
	if (!rc)
		rc = load(s, st);
	goto out;
out_clean:
	unlink(src);
	rmdir(tmp);
	if (!s->env && !rc)
		rc = EIO;
out:
	free(tmp);
	free(src);
	free(dst);
	return rc;
}

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

int kvf__store_check_file(const char *dir)
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
 * After the side log files were created or upgraded: record it,
 * with the current format version, so that from now on missing side log
 * files are refused, and so that an older build refuses the directory.
 */
int kvf__store_mark_side_log(struct kvf__store *s, struct kvf__store_state *st)
{
	uint32_t one = 1, version = KVF__JOURNAL_FORMAT_VERSION;
	MDB_txn *txn;
	int rc;

	if (st->sidelog_created && st->version == version)
		return 0;
	rc = mdb_txn_begin(s->env, NULL, 0, &txn);
	if (rc)
		return rc;
	rc = kvf__store_meta_put(txn, s->dbs.meta, KVF__META_SIDE_LOG, &one,
				 sizeof(one));
	if (!rc)
		rc = kvf__store_meta_put(txn, s->dbs.meta, KVF__META_VERSION,
					 &version, sizeof(version));
	if (rc) {
		mdb_txn_abort(txn);
		return rc;
	}
	rc = mdb_txn_commit(txn);
	if (!rc)
		rc = mdb_env_sync(s->env, 1);
	if (!rc) {
		st->sidelog_created = 1;
		st->version = version;
	}
	return rc;
}

/*
 * Grow the map: double it, or with MDB_WRITEMAP by a quarter
 * (kvf__store_map_step(): every byte of that map is allocated on disk). With
 * MDB_WRITEMAP the map
 * is exactly the backed (fallocated) part of the file, so LMDB can never
 * store into a block the file system might fail to provide (SIGBUS): the
 * new part is backed first, and a full disk fails the transaction that
 * needed the room (ENOSPC) and leaves the map as it was; a later grow
 * retries.
 */
int kvf__store_grow(struct kvf__store *s)
{
	uint64_t size =
		s->map_size +
		(s->writemap ? kvf__store_map_step(s->map_size) : s->map_size);
	int rc;

	pthread_rwlock_wrlock(&s->remap_rw); /* no snapshot read open */
	pthread_mutex_lock(&s->map_mu); /* no prefault during the remap */
	rc = back_map(s, size);
	if (!rc)
		rc = mdb_env_set_mapsize(s->env, size);
	s->map_addr = NULL; /* it may have moved */
	pthread_mutex_unlock(&s->map_mu);
	pthread_rwlock_unlock(&s->remap_rw);
	if (!rc)
		s->map_size = size;
	return rc;
}

int kvf__store_begin(struct kvf__store *s, MDB_txn **txn)
{
	int rc = mdb_txn_begin(s->env, NULL, 0, txn);

	if (rc == MDB_MAP_RESIZED) { /* another process grew it: adopt */
		MDB_envinfo info;

		rc = mdb_env_set_mapsize(s->env, 0);
		if (!rc)
			rc = mdb_env_info(s->env, &info);
		if (!rc)
			rc = back_map(s, info.me_mapsize);
		if (!rc)
			rc = mdb_txn_begin(s->env, NULL, 0, txn);
	}
	return rc;
}

/*
 * LMDB reports a short write (what a full disk gives a multi-page
 * pwritev) as EIO. Tell the two apart by the free space left: a
 * transaction that could not be written leaves less than it needed.
 */
static int classify_eio(struct kvf__store *s)
{
	struct statvfs sv;

	if (statvfs(s->dir, &sv))
		return EIO;
	if ((uint64_t)sv.f_bavail * sv.f_frsize < KVF__NEARLY_FULL)
		return ENOSPC;
	return EIO;
}

int kvf__store_end(struct kvf__store *s, MDB_txn *txn, int rc)
{
	if (rc) {
		mdb_txn_abort(txn);
		return rc;
	}
	rc = mdb_txn_commit(txn);
	return rc == EIO ? classify_eio(s) : rc;
}

/*
 * LMDB (without MDB_WRITEMAP) builds each dirty page in a malloc()ed
 * buffer and keeps the buffers for later transactions, never giving them
 * back; so the first moves of a process each malloc() fresh memory and
 * fault every page of it in: 26-58% of the writer thread's samples during
 * the first million puts (perf, kvforge-bench --durability bounded), on
 * the vCPU the putting threads share. One transaction that dirties
 * @bytes of log pages and is aborted fills that pool at open instead;
 * nothing of it reaches the file, and the keys it used (beyond any
 * sequence) are gone with it. Best effort: a failure only leaves the
 * pool smaller.
 */
void kvf__store_warm_pages(struct kvf__store *s, uint64_t bytes)
{
	static const uint8_t frame[KVF__FRAME_TARGET];
	uint64_t n = bytes / sizeof(frame);
	MDB_val val = { sizeof(frame), (void *)frame };
	uint8_t k[8];
	MDB_val key = { sizeof(k), k };
	MDB_txn *txn;
	int rc;

	if (s->writemap || mdb_txn_begin(s->env, NULL, 0, &txn))
		return;
	rc = 0;
	for (uint64_t i = 0; i < n && !rc; i++) {
		kvf__put_be64(k, UINT64_MAX - n + i);
		rc = mdb_put(txn, s->dbs.log, &key, &val, MDB_APPEND);
	}
	mdb_txn_abort(txn);
}

int kvf__store_put_frames(MDB_txn *txn, MDB_dbi log, const uint8_t *buf,
		    uint32_t nr_frames, uint64_t *seq, uint64_t *frames)
{
	uint8_t k[8];
	MDB_val key = { 8, k }, val;
	size_t off = 0;
	int rc = 0;

	for (uint32_t f = 0; f < nr_frames && !rc; f++) {
		uint32_t vlen;

		memcpy(&vlen, buf + off, 4);
		val.mv_size = vlen;
		val.mv_data = (void *)(buf + off + 4);
		kvf__put_be64(k, *seq + 1);
		rc = mdb_put(txn, log, &key, &val, MDB_APPEND);
		*seq += (uint32_t)buf[off + 4] | (uint32_t)buf[off + 5] << 8;
		off += 4 + vlen;
		(*frames)++;
	}
	return rc;
}

/*
 * The address of our mapping of data.mdb: LMDB does not expose it, so
 * find the mapping of the file's device and inode, from offset 0, as long
 * as the map, in /proc/self/maps. NULL if there is none.
 */
static uint8_t *find_map(struct kvf__store *s, uint64_t size)
{
	unsigned long lo, hi, off, ino;
	unsigned int maj, mnr;
	mdb_filehandle_t fd;
	uint8_t *addr = NULL;
	char line[4096];
	struct stat sb;
	FILE *f;

	if (mdb_env_get_fd(s->env, &fd) || fstat(fd, &sb))
		return NULL;
	f = fopen("/proc/self/maps", "re");
	if (!f)
		return NULL;
	while (!addr && fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx-%lx %*s %lx %x:%x %lu", &lo, &hi, &off,
			   &maj, &mnr, &ino) == 6 &&
		    off == 0 && hi - lo == size && ino == sb.st_ino &&
		    maj == major(sb.st_dev) && mnr == minor(sb.st_dev))
			addr = (uint8_t *)lo;
	fclose(f);
	return addr;
}

/*
 * Syncer, before a sync, without @mu: drop our page-table entries for the
 * map below @end - ZAP_MARGIN (MADV_DONTNEED; only what was not dropped
 * before). A sync write-protects every dirty page it writes back that is
 * mapped, one TLB flush, hence one IPI to the CPU running the appending
 * caller, per page: with MDB_WRITEMAP that was most of a sync's cost and
 * slowed ~15% of the caller's batches 2-3x while it ran. Pages of a
 * shared file mapping keep their contents and dirty state in the page
 * cache when unmapped, so the sync still writes them, without touching
 * page tables; the log below the end is rarely touched again (checkpoints
 * and LMDB's reuse of freed pages fault them back in, from the page
 * cache). @map_mu keeps a remap out meanwhile.
 */
void kvf__store_unmap_below(struct kvf__store *s, uint64_t end)
{
	uint64_t to;

	if (!s->writemap || end < ZAP_MARGIN)
		return;
	to = (end - ZAP_MARGIN) & ~((uint64_t)s->psize - 1);
	pthread_mutex_lock(&s->map_mu);
	if (s->map_addr && to > s->zap_to &&
	    !madvise(s->map_addr + s->zap_to, to - s->zap_to, MADV_DONTNEED))
		s->zap_to = to;
	pthread_mutex_unlock(&s->map_mu);
}

/*
 * Writer thread, with @mu held: populate the requested part of the map
 * writable (MADV_POPULATE_WRITE), so that LMDB's first stores into those
 * pages, on the caller's thread, find them mapped and allocated instead
 * of faulting (page-cache fill, zeroing, block reservation). The pages
 * lie beyond LMDB's last page: nothing reads them, and populating never
 * changes their contents, so racing with a store of the slot holder is
 * harmless; @map_mu keeps a remap out meanwhile.
 */
bool kvf__store_prefault(struct kvf__store *s, uint64_t from, uint64_t to)
{
	MDB_envinfo info;
	bool off = false;

	pthread_mutex_lock(&s->map_mu);
	if (!mdb_env_info(s->env, &info) && to <= info.me_mapsize) {
		if (!s->map_addr)
			s->map_addr = find_map(s, info.me_mapsize);
		if (s->map_addr && madvise(s->map_addr + from, to - from,
					   MADV_POPULATE_WRITE))
			off = errno ==
			      EINVAL; /* not supported by this kernel */
	}
	pthread_mutex_unlock(&s->map_mu);
	return off;
}

uint64_t kvf__store_data_end(struct kvf__store *s)
{
	MDB_envinfo info;

	if (!s->writemap || mdb_env_info(s->env, &info))
		return 0;
	return (info.me_last_pgno + 1) * s->psize;
}

int kvf__store_open(struct kvf__store *s, const struct kvf__journal_config *cfg,
		    struct kvf__store_state *st)
{
	int dead, rc;

	s->dir = cfg->dir;
	s->bounded = cfg->durability == KVF_DURABILITY_BOUNDED;
	s->writemap = s->bounded && cfg->writemap;
	s->compact = cfg->compact_at_open;
	s->want_map = cfg->map_size;
	if (pthread_mutex_init(&s->map_mu, NULL))
		return ENOMEM;
	if (pthread_rwlock_init(&s->remap_rw, NULL)) {
		pthread_mutex_destroy(&s->map_mu);
		return ENOMEM;
	}
	s->map_mu_ok = true;
	rc = jenv_open_rw(s);
	if (rc)
		return rc;
	mdb_reader_check(s->env, &dead); /* slots of crashed processes */
	return load(s, st);
}

void kvf__store_close(struct kvf__store *s)
{
	if (s->env)
		mdb_env_close(s->env);
	s->env = NULL;
	if (s->map_mu_ok) {
		pthread_mutex_destroy(&s->map_mu);
		pthread_rwlock_destroy(&s->remap_rw);
	}
	s->map_mu_ok = false;
}
