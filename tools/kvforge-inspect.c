/* SPDX-License-Identifier: MIT */
/*
 * tools/kvforge-inspect.c - summarise or verify a KVForge journal.
 *
 *   kvforge-inspect [--verify] [--json] DIR
 *
 * Opens the environment read-only (MDB_RDONLY, one read transaction), so it
 * can run beside a live engine and sees one consistent snapshot. Never
 * takes DIR/kvforge.lock and never writes the data file.
 *
 * A BOUNDED journal's side log (journal/wal.c) may hold acknowledged
 * records that are not in LMDB yet (after a crash; the next open moves
 * them): the summary counts them ("side log pending"), and --verify
 * replays them after the log.
 *
 * --verify replays image + log into a private model, with the journal's
 * own record rules (journal/journal.h), and checks the final state: every
 * replica references a mounted segment, lies inside it and does not
 * overlap another replica in that segment; an object's replicas are in
 * distinct segments; sequences are contiguous (checked by the scan).
 * Exit status: 0 consistent, 1 inconsistent (message names the problem),
 * 2 usage or open error.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "journal/jint.h"
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

static void print_summary(const char *dir, const struct kvf__jstate *st,
			  uint64_t map_size, int json)
{
	unsigned long long log = st->last_seq - st->ckpt_seq;
	uint64_t pending = 0;
	int wrc = kvf__wal_scan(dir, st->id, st->last_seq, count_record, NULL,
				&pending);

	if (json) {
		printf("{\"format_version\": %u, \"objects\": %llu, "
		       "\"segments\": %llu, \"clients\": %llu, "
		       "\"log_records\": %llu, \"log_frames\": %llu, "
		       "\"last_seq\": %llu, \"checkpoint_seq\": %llu, "
		       "\"checkpoints\": %llu, \"file_size\": %llu, "
		       "\"map_size\": %llu, \"side_log_pending\": %llu",
		       st->version, (unsigned long long)st->objects,
		       (unsigned long long)st->segments,
		       (unsigned long long)st->clients, log,
		       (unsigned long long)st->log_frames,
		       (unsigned long long)st->last_seq,
		       (unsigned long long)st->ckpt_seq,
		       (unsigned long long)st->ckpt_count,
		       (unsigned long long)data_size(dir),
		       (unsigned long long)map_size,
		       (unsigned long long)pending);
		return;
	}
	printf("journal:          %s\n", dir);
	printf("format version:   %u\n", st->version);
	printf("objects (image):  %llu\n", (unsigned long long)st->objects);
	printf("segments (image): %llu\n", (unsigned long long)st->segments);
	printf("clients (image):  %llu\n", (unsigned long long)st->clients);
	printf("log records:      %llu in %llu frames\n", log,
	       (unsigned long long)st->log_frames);
	printf("last sequence:    %llu\n", (unsigned long long)st->last_seq);
	printf("checkpoint:       seq %llu, %llu completed\n",
	       (unsigned long long)st->ckpt_seq,
	       (unsigned long long)st->ckpt_count);
	printf("file size:        %llu\n",
	       (unsigned long long)data_size(dir));
	printf("map size:         %llu\n", (unsigned long long)map_size);
	printf("side log pending: %llu records%s\n",
	       (unsigned long long)pending,
	       wrc ? " (then a damaged frame)" : "");
}

static int verify(const char *dir, MDB_txn *txn,
		  const struct kvf__jdbs *dbs, const struct kvf__jstate *st,
		  int json)
{
	uint64_t pending;
	struct kvf__journal_replay_ops ops = { .record = model_record };
	struct model m = { 0 };
	uint64_t last = 0;
	int rc;

	if (model_init(&m, st->objects + (st->last_seq - st->ckpt_seq))) {
		fprintf(stderr, "kvforge-inspect: out of memory\n");
		model_free(&m);
		return 2;
	}
	rc = kvf__jscan(txn, dbs, st->ckpt_seq, &ops, &m, &last);
	if (!rc && last == st->last_seq)
		rc = kvf__wal_scan(dir, st->id, last, model_record, &m,
				   &pending);
	if (rc) {
		snprintf(m.msg, sizeof(m.msg), "scan failed: %s (%s)",
			 kvf_status_name(rc), kvf_strerror(rc));
		m.problem = m.msg;
	} else if (last != st->last_seq) {
		m.problem = "log ends before its last frame";
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
	model_free(&m);
	return rc;
}

static void usage(void)
{
	fprintf(stderr, "usage: kvforge-inspect [--verify] [--json] DIR\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "verify", no_argument, NULL, 'v' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int do_verify = 0, json = 0, c, rc;
	struct kvf__jstate st;
	struct kvf__jdbs dbs;
	MDB_envinfo info;
	MDB_env *env;
	MDB_txn *txn;

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
	rc = kvf__jenv_open(argv[optind], MDB_RDONLY, 0, &env);
	if (rc) {
		fprintf(stderr, "kvforge-inspect: %s: %s\n", argv[optind],
			mdb_strerror(rc));
		return 2;
	}
	rc = mdb_txn_begin(env, NULL, MDB_RDONLY, &txn);
	if (!rc)
		rc = kvf__jdbs_open(txn, &dbs, 0);
	if (!rc)
		rc = kvf__jstate_read(txn, &dbs, &st);
	if (!rc && st.version != KVF__JOURNAL_FORMAT_VERSION) {
		fprintf(stderr, "kvforge-inspect: format version %u, this "
			"tool reads %u\n", st.version,
			KVF__JOURNAL_FORMAT_VERSION);
		rc = -1;
	} else if (rc) {
		fprintf(stderr, "kvforge-inspect: %s: not a readable journal: "
			"%s\n", argv[optind], mdb_strerror(rc));
	}
	if (rc) {
		mdb_env_close(env);
		return do_verify && rc != ENOENT ? 1 : 2;
	}
	mdb_env_info(env, &info);
	print_summary(argv[optind], &st, info.me_mapsize, json);
	if (do_verify)
		rc = verify(argv[optind], txn, &dbs, &st, json);
	else if (json)
		printf("}\n");
	mdb_txn_abort(txn);
	mdb_env_close(env);
	return rc;
}
