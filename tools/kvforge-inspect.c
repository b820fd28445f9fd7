/* SPDX-License-Identifier: MIT */
/*
 * tools/kvforge-inspect.c - summarise or verify a KVForge journal.
 *
 *   kvforge-inspect [--verify] [--json] DIR
 *
 * The summary checks data.mdb as open does, opens the environment
 * read-only (MDB_RDONLY, one read transaction), so it can run beside a
 * live engine and sees one consistent snapshot, and counts the side log
 * records after LMDB's end with open's own side log reader and verdict
 * (kvf__sidelog_scan()). Never takes DIR/kvforge.lock, never writes DIR.
 *
 * --verify runs open's real recovery (kvf__journal_open()) and replay on
 * a scratch copy of the directory, so it fails exactly where open would,
 * then checks the replayed state in a private model with the journal's
 * record rules (journal/journal.h): every replica references a mounted
 * segment, lies inside it and does not overlap another replica in that
 * segment; an object's replicas are in distinct segments.
 *
 * Everything runs in a child process: LMDB has no page checksums, and a
 * damaged page may end in an assertion (abort) inside it; the tool then
 * reports damage instead of dying.
 *
 * Exit status: 0 consistent, 1 inconsistent (message names the problem),
 * 2 usage or open error.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "journal/journal.h"
#include "journal/sidelog.h"
#include "journal/store.h"
#include "metadata/hash.h"

struct vseg {
	uint64_t id, client, size;
	int used;
};

struct vobj {
	char *key; /* NULL: empty; TOMB: deleted */
	uint32_t key_len;
	uint8_t nr;
	uint64_t size;
	struct kvf__jreplica rep[KVF_MAX_REPLICAS];
};

static char tomb;
#define TOMB (&tomb)

/* Open addressing (linear probing) with tombstones, for both tables. */
struct model {
	struct vobj *objs;
	size_t ocap, olive, oused;
	struct vseg *segs;
	size_t scap, slive, sused;
	uint64_t records;
	const char *problem;
	char msg[256];
};

static int model_init(struct model *m, uint64_t estimate)
{
	m->ocap = 1024;
	while (m->ocap < estimate * 2)
		m->ocap <<= 1;
	m->scap = 1024;
	m->objs = calloc(m->ocap, sizeof(*m->objs));
	m->segs = calloc(m->scap, sizeof(*m->segs));
	return m->objs && m->segs ? 0 : -1;
}

static struct vobj *obj_slot(struct model *m, const char *key, uint32_t len,
			     int insert)
{
	size_t mask = m->ocap - 1;
	size_t i = kvf__key_hash(key, len) & mask;
	struct vobj *free_slot = NULL;

	for (;; i = (i + 1) & mask) {
		struct vobj *o = &m->objs[i];

		if (!o->key) {
			if (!insert)
				return NULL;
			return free_slot ? free_slot : o;
		}
		if (o->key == TOMB) {
			if (!free_slot)
				free_slot = o;
			continue;
		}
		if (o->key_len == len && !memcmp(o->key, key, len))
			return o;
	}
}

static int obj_rehash(struct model *m)
{
	struct vobj *old = m->objs;
	size_t cap = m->ocap;

	m->ocap = m->olive * 4 > cap ? cap * 2 : cap;
	m->objs = calloc(m->ocap, sizeof(*m->objs));
	if (!m->objs)
		return -1;
	m->oused = m->olive;
	for (size_t i = 0; i < cap; i++)
		if (old[i].key && old[i].key != TOMB)
			*obj_slot(m, old[i].key, old[i].key_len, 1) = old[i];
	free(old);
	return 0;
}

static struct vseg *seg_slot(struct model *m, uint64_t id, int insert)
{
	size_t mask = m->scap - 1;
	size_t i = (size_t)(id * 0x9e3779b97f4a7c15ull) & mask;
	struct vseg *free_slot = NULL;

	for (;; i = (i + 1) & mask) {
		struct vseg *s = &m->segs[i];

		if (!s->used) {
			if (!insert)
				return NULL;
			return free_slot ? free_slot : s;
		}
		if (s->used < 0) {
			if (!free_slot)
				free_slot = s;
			continue;
		}
		if (s->id == id)
			return s;
	}
}

static int seg_rehash(struct model *m)
{
	struct vseg *old = m->segs;
	size_t cap = m->scap;

	m->scap = cap * 2;
	m->segs = calloc(m->scap, sizeof(*m->segs));
	if (!m->segs)
		return -1;
	m->sused = m->slive;
	for (size_t i = 0; i < cap; i++)
		if (old[i].used > 0)
			*seg_slot(m, old[i].id, 1) = old[i];
	free(old);
	return 0;
}

static int apply_obj(struct model *m, const struct kvf__jrec *r)
{
	struct vobj *o = obj_slot(m, r->obj.key, r->obj.key_len,
				  r->type == KVF__JREC_OBJECT_PUT);

	if (r->type != KVF__JREC_OBJECT_PUT) {
		if (!o)
			return 0;
		if (r->type == KVF__JREC_OBJECT_REMOVE) {
			free(o->key);
			o->key = TOMB;
			m->olive--;
			return 0;
		}
		o->nr = r->obj.nr_replicas;
		memcpy(o->rep, r->obj.replicas, sizeof(o->rep));
		return 0;
	}
	if (!o->key || o->key == TOMB) {
		if (!o->key)
			m->oused++;
		o->key = malloc(r->obj.key_len);
		if (!o->key)
			return -1;
		memcpy(o->key, r->obj.key, r->obj.key_len);
		o->key_len = r->obj.key_len;
		m->olive++;
	}
	o->size = r->obj.size;
	o->nr = r->obj.nr_replicas;
	memcpy(o->rep, r->obj.replicas, sizeof(o->rep));
	if (m->oused * 4 > m->ocap * 3)
		return obj_rehash(m);
	return 0;
}

static int apply_seg(struct model *m, const struct kvf__jrec *r)
{
	struct vseg *s;

	if (r->type == KVF__JREC_SEGMENT_UNMOUNT) {
		s = seg_slot(m, r->unmount.segment_id, 0);
		if (s) {
			s->used = -1;
			m->slive--;
		}
		return 0;
	}
	s = seg_slot(m, r->mount.segment_id, 1);
	if (s->used <= 0) {
		if (!s->used)
			m->sused++;
		m->slive++;
	}
	s->used = 1;
	s->id = r->mount.segment_id;
	s->client = r->mount.client_id;
	s->size = r->mount.size;
	if (m->sused * 4 > m->scap * 3)
		return seg_rehash(m);
	return 0;
}

static int model_record(void *arg, const struct kvf__jrec *r, uint64_t seq)
{
	struct model *m = arg;

	m->records++;
	switch (r->type) {
	case KVF__JREC_SEGMENT_MOUNT:
	case KVF__JREC_SEGMENT_UNMOUNT:
		return apply_seg(m, r) ? KVF_ERR_NO_MEMORY : 0;
	case KVF__JREC_CLIENT_REMOVE:
		return 0;
	default:
		return apply_obj(m, r) ? KVF_ERR_NO_MEMORY : 0;
	}
}

struct extent {
	uint64_t seg, off, end;
	const struct vobj *obj;
};

static int extent_cmp(const void *a, const void *b)
{
	const struct extent *x = a, *y = b;

	if (x->seg != y->seg)
		return x->seg < y->seg ? -1 : 1;
	if (x->off != y->off)
		return x->off < y->off ? -1 : 1;
	return 0;
}

static int fail(struct model *m, const struct vobj *o, const char *detail)
{
	snprintf(m->msg, sizeof(m->msg), "object '%.*s': %s",
		 (int)(o->key_len > 80 ? 80 : o->key_len), o->key, detail);
	m->problem = m->msg;
	return 1;
}

static int check_object(struct model *m, const struct vobj *o,
			struct extent *ext, size_t *next)
{
	char d[128];

	for (unsigned i = 0; i < o->nr; i++) {
		const struct kvf__jreplica *r = &o->rep[i];
		unsigned long long id = r->segment_id;
		struct vseg *s = seg_slot(m, id, 0);

		for (unsigned k = 0; k < i; k++) {
			if (o->rep[k].segment_id != id)
				continue;
			snprintf(d, sizeof(d), "two replicas in segment %llu",
				 id);
			return fail(m, o, d);
		}
		if (!s) {
			snprintf(d, sizeof(d),
				 "replica in unmounted segment %llu", id);
			return fail(m, o, d);
		}
		if (r->offset > s->size || o->size > s->size - r->offset) {
			snprintf(d, sizeof(d),
				 "replica at offset %llu outside segment %llu",
				 (unsigned long long)r->offset, id);
			return fail(m, o, d);
		}
		ext[*next] = (struct extent){ r->segment_id, r->offset,
					      r->offset + o->size, o };
		(*next)++;
	}
	return 0;
}

static int model_check(struct model *m)
{
	struct extent *ext = malloc((m->olive + 1) * KVF_MAX_REPLICAS *
				    sizeof(*ext));
	size_t n = 0;
	int rc = 0;

	if (!ext) {
		m->problem = "out of memory";
		return 1;
	}
	for (size_t i = 0; i < m->ocap && !rc; i++) {
		const struct vobj *o = &m->objs[i];

		if (o->key && o->key != TOMB)
			rc = check_object(m, o, ext, &n);
	}
	if (!rc)
		qsort(ext, n, sizeof(*ext), extent_cmp);
	for (size_t i = 1; i < n && !rc; i++) {
		char d[128];

		if (ext[i].seg != ext[i - 1].seg ||
		    ext[i].off >= ext[i - 1].end)
			continue;
		snprintf(d, sizeof(d),
			 "replica at offset %llu overlaps another in segment "
			 "%llu",
			 (unsigned long long)ext[i].off,
			 (unsigned long long)ext[i].seg);
		rc = fail(m, ext[i].obj, d);
	}
	free(ext);
	return rc;
}

static void model_free(struct model *m)
{
	for (size_t i = 0; m->objs && i < m->ocap; i++)
		if (m->objs[i].key != TOMB)
			free(m->objs[i].key);
	free(m->objs);
	free(m->segs);
}

static uint64_t data_size(const char *dir)
{
	char path[4096];
	struct stat sb;

	snprintf(path, sizeof(path), "%s/data.mdb", dir);
	return stat(path, &sb) ? 0 : (uint64_t)sb.st_size;
}

static int count_record(void *arg, const struct kvf__jrec *r, uint64_t seq)
{
	(void)arg;
	(void)r;
	(void)seq;
	return 0;
}

/*
 * The object database holding the image (a checkpoint that rewrites the
 * image switches between the two); the other should be empty, but for
 * what a rewrite interrupted by a crash left, which the next one clears.
 */
static const char *image_db_name(uint32_t which)
{
	return which ? "objs.1" : "objs";
}

static void print_summary(const char *dir, const struct kvf__store_state *st,
			  uint64_t map_size, int json)
{
	unsigned long long log = st->last_seq - st->ckpt_seq;
	uint64_t pending = 0;
	int wrc = kvf__sidelog_scan(dir, st->id,
				    st->version < KVF__JOURNAL_FORMAT_SIDELOG_HEADER,
				    st->sidelog_created, st->last_seq,
				    count_record, NULL, &pending);

	if (json) {
		printf("{\"format_version\": %u, \"objects\": %llu, "
		       "\"segments\": %llu, \"clients\": %llu, "
		       "\"log_records\": %llu, \"log_frames\": %llu, "
		       "\"last_seq\": %llu, \"checkpoint_seq\": %llu, "
		       "\"checkpoints\": %llu, \"file_size\": %llu, "
		       "\"map_size\": %llu, \"side_log_pending\": %llu, "
		       "\"side_log_ok\": %s, \"image_db\": \"%s\", "
		       "\"spare_entries\": %llu",
		       st->version, (unsigned long long)st->objects,
		       (unsigned long long)st->segments,
		       (unsigned long long)st->clients, log,
		       (unsigned long long)st->log_frames,
		       (unsigned long long)st->last_seq,
		       (unsigned long long)st->ckpt_seq,
		       (unsigned long long)st->ckpt_count,
		       (unsigned long long)data_size(dir),
		       (unsigned long long)map_size,
		       (unsigned long long)pending, wrc ? "false" : "true",
		       image_db_name(st->image_db),
		       (unsigned long long)st->spare_entries);
		return;
	}
	printf("journal:          %s\n", dir);
	printf("format version:   %u\n", st->version);
	printf("objects (image):  %llu\n", (unsigned long long)st->objects);
	printf("segments (image): %llu\n", (unsigned long long)st->segments);
	printf("clients (image):  %llu\n", (unsigned long long)st->clients);
	printf("image database:   %s (%s: %llu entries)\n",
	       image_db_name(st->image_db), image_db_name(!st->image_db),
	       (unsigned long long)st->spare_entries);
	printf("log records:      %llu in %llu frames\n", log,
	       (unsigned long long)st->log_frames);
	printf("last sequence:    %llu\n", (unsigned long long)st->last_seq);
	printf("checkpoint:       seq %llu, %llu completed\n",
	       (unsigned long long)st->ckpt_seq,
	       (unsigned long long)st->ckpt_count);
	printf("file size:        %llu\n",
	       (unsigned long long)data_size(dir));
	printf("map size:         %llu\n", (unsigned long long)map_size);
	printf("side log pending: %llu records%s%s\n",
	       (unsigned long long)pending, wrc ? ", then refused: " : "",
	       wrc ? kvf__journal_error() : "");
}

/* The files of a journal directory, as a scratch copy needs them. */
static const char *const journal_files[] = {
	"data.mdb", "wal-0.log", "wal-1.log",
};

static int copy_file(const char *from_dir, const char *to_dir,
		     const char *name)
{
	char from[4096], to[4096], buf[1 << 16];
	int in, out, rc = 0;
	ssize_t n;

	snprintf(from, sizeof(from), "%s/%s", from_dir, name);
	snprintf(to, sizeof(to), "%s/%s", to_dir, name);
	in = open(from, O_RDONLY | O_CLOEXEC);
	if (in < 0)
		return errno == ENOENT ? 0 : errno; /* absent: absent */
	out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (out < 0) {
		rc = errno;
		close(in);
		return rc;
	}
	while (!rc && (n = read(in, buf, sizeof(buf))) != 0) {
		if (n < 0 || write(out, buf, (size_t)n) != n)
			rc = errno ? errno : EIO;
	}
	close(in);
	close(out);
	return rc;
}

static int remove_entry(const char *path, const struct stat *sb, int flag,
			struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

/* Side log geometry for the scratch open: the file's, when it is one. */
static uint64_t sidelog_bytes_of(const char *dir)
{
	char path[4096];
	struct stat sb;

	snprintf(path, sizeof(path), "%s/wal-0.log", dir);
	if (stat(path, &sb) || sb.st_size < (64 << 10) || sb.st_size % 4096)
		return 0;
	return (uint64_t)sb.st_size;
}

/*
 * --verify: run the real recovery (kvf__journal_open(), which moves the
 * side log into LMDB and refuses what open refuses) and replay on a
 * scratch copy of DIR, so it fails exactly where open would, then check
 * the replayed state.
 */
static int verify(const char *dir, int json)
{
	const char *tmp = getenv("TMPDIR");
	struct kvf__journal_replay_ops ops = { .record = model_record };
	struct kvf__journal_config cfg = {
		.durability = KVF_DURABILITY_BOUNDED,
		.checkpoint_records = UINT64_MAX,
		.wal_bytes = sidelog_bytes_of(dir),
	};
	struct model m = { 0 };
	struct kvf__journal *j = NULL;
	char scratch[4096];
	int rc = 0;

	snprintf(scratch, sizeof(scratch), "%s/kvforge-inspect-XXXXXX",
		 tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(scratch)) {
		fprintf(stderr, "kvforge-inspect: scratch directory: %s\n",
			strerror(errno));
		return 2;
	}
	for (size_t i = 0; i < sizeof(journal_files) / sizeof(*journal_files) &&
			   !rc; i++)
		rc = copy_file(dir, scratch, journal_files[i]);
	if (rc) {
		fprintf(stderr, "kvforge-inspect: copying %s to %s: %s\n", dir,
			scratch, strerror(rc));
		rc = 2;
		goto out;
	}
	cfg.dir = scratch;
	rc = kvf__journal_open(&cfg, &j);
	if (rc) {
		snprintf(m.msg, sizeof(m.msg), "open refuses it: %s (%s)%s%s",
			 kvf_status_name(rc), kvf_strerror(rc),
			 *kvf__journal_error() ? ": " : "",
			 kvf__journal_error());
		m.problem = m.msg;
	} else if (model_init(&m, kvf__journal_object_estimate(j))) {
		fprintf(stderr, "kvforge-inspect: out of memory\n");
		rc = 2;
		goto out;
	} else if ((rc = kvf__journal_replay(j, &ops, &m))) {
		snprintf(m.msg, sizeof(m.msg), "replay fails: %s (%s)",
			 kvf_status_name(rc), kvf_strerror(rc));
		m.problem = m.msg;
	} else {
		model_check(&m);
	}
	if (json)
		printf(", \"verify\": {\"records\": %llu, \"objects\": %zu, "
		       "\"segments\": %zu, \"ok\": %s}}\n",
		       (unsigned long long)m.records, m.olive, m.slive,
		       m.problem ? "false" : "true");
	else
		printf("verify:           %llu records replayed, %zu objects, "
		       "%zu segments: %s\n",
		       (unsigned long long)m.records, m.olive, m.slive,
		       m.problem ? "INCONSISTENT" : "consistent");
	if (m.problem)
		fprintf(stderr, "kvforge-inspect: %s\n", m.problem);
	rc = m.problem ? 1 : 0;
out:
	kvf__journal_close(j);
	model_free(&m);
	nftw(scratch, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
	return rc;
}

static void usage(void)
{
	fprintf(stderr, "usage: kvforge-inspect [--verify] [--json] DIR\n");
}

/* Summary (read-only snapshot) and, with @do_verify, verify(). */
static int inspect(const char *dir, int do_verify, int json)
{
	struct kvf__store_state st;
	struct kvf__store_dbs dbs;
	MDB_envinfo info;
	MDB_env *env;
	MDB_txn *txn;
	int rc;

	rc = kvf__jdir_check(dir);
	if (rc) {
		fprintf(stderr, "kvforge-inspect: %s: %s\n", dir,
			rc > 0 ? strerror(rc) : kvf__journal_error());
		return do_verify ? 1 : 2;
	}
	rc = kvf__store_env_open(dir, MDB_RDONLY, 0, &env);
	if (rc) {
		fprintf(stderr, "kvforge-inspect: %s: %s\n", dir,
			mdb_strerror(rc));
		return do_verify && rc != ENOENT ? 1 : 2;
	}
	rc = mdb_txn_begin(env, NULL, MDB_RDONLY, &txn);
	if (!rc)
		rc = kvf__store_dbs_open(txn, &dbs, 0);
	if (!rc)
		rc = kvf__store_state_read(txn, &dbs, &st);
	if (!rc && !kvf__journal_format_readable(st.version)) {
		fprintf(stderr, "kvforge-inspect: format version %u, this "
			"tool reads %u to %u\n", st.version,
			KVF__JOURNAL_FORMAT_OLDEST,
			KVF__JOURNAL_FORMAT_VERSION);
		rc = -1;
	} else if (rc) {
		fprintf(stderr, "kvforge-inspect: %s: not a readable journal: "
			"%s\n", dir, mdb_strerror(rc));
	}
	if (rc) {
		mdb_env_close(env);
		return do_verify && rc != ENOENT ? 1 : 2;
	}
	mdb_env_info(env, &info);
	print_summary(dir, &st, info.me_mapsize, json);
	mdb_txn_abort(txn);
	mdb_env_close(env);
	fflush(stdout);
	if (do_verify)
		return verify(dir, json);
	if (json)
		printf("}\n");
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "verify", no_argument, NULL, 'v' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int do_verify = 0, json = 0, c, status;
	pid_t pid;

	while ((c = getopt_long(argc, argv, "vjh", opts, NULL)) != -1) {
		if (c == 'v')
			do_verify = 1;
		else if (c == 'j')
			json = 1;
		else {
			usage();
			return c == 'h' ? 0 : 2;
		}
	}
	if (optind != argc - 1) {
		usage();
		return 2;
	}
	/*
	 * The reading runs in a child: damage LMDB cannot detect (it has no
	 * page checksums) may end in an assertion (abort) inside LMDB; the
	 * tool then reports the journal as damaged instead of dying.
	 */
	fflush(stdout);
	pid = fork();
	if (pid < 0)
		return inspect(argv[optind], do_verify, json);
	if (pid == 0) {
		int rc = inspect(argv[optind], do_verify, json);

		fflush(stdout);
		_exit(rc);
	}
	if (waitpid(pid, &status, 0) != pid)
		return 2;
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	fprintf(stderr, "kvforge-inspect: %s: reading the journal killed the "
		"reader (signal %d, %s): data.mdb is damaged in a way LMDB "
		"does not detect\n", argv[optind], WTERMSIG(status),
		strsignal(WTERMSIG(status)));
	return do_verify ? 1 : 2;
}
