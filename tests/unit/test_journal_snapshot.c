/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_journal_snapshot.c - a journal's state read as records
 * while another thread appends (kvf__journal_snapshot()), copied into a
 * new journal numbered to end at the same sequence
 * (kvf__journal_set_base()), and staged over a directory
 * (kvf__jdir_stage()) whose next open installs it, also when a crash
 * interrupted the install half way (runs under ThreadSanitizer too).
 */
#include "config.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "journal/journal.h"
#include "journal/record.h"

/* enough live keys that the image alone fills more than one chunk */
#define KEYS 1600
#define SLOT 4096u

/* The state a replay builds: each key's size (0: absent), segments. */
struct state {
	uint64_t size[KEYS * 4];
	unsigned segments;
	uint64_t upto; /* apply log records up to this sequence */
	uint64_t last;
};

static int key_index(const struct kvf__jrec *r)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%.*s", (int)r->obj.key_len, r->obj.key);
	return atoi(buf + 1);
}

static int state_cb(void *arg, const struct kvf__jrec *r, uint64_t seq)
{
	struct state *s = arg;

	if (seq > s->upto)
		return 0;
	s->last = seq;
	switch (r->type) {
	case KVF__JREC_SEGMENT_MOUNT:
		s->segments++;
		break;
	case KVF__JREC_OBJECT_PUT:
		s->size[key_index(r)] = r->obj.size;
		break;
	case KVF__JREC_OBJECT_REMOVE:
		s->size[key_index(r)] = 0;
		break;
	default:
		break;
	}
	return 0;
}

static void state_of(const char *dir, uint64_t upto, struct state *s)
{
	struct kvf__journal_config cfg = {.dir = dir,
					  .durability = KVF_DURABILITY_BOUNDED};
	struct kvf__journal_replay_ops ops = {.record = state_cb};
	struct kvf__journal *j;

	memset(s, 0, sizeof(*s));
	s->upto = upto;
	assert_int_equal(kvf__journal_open(&cfg, &j), KVF_OK);
	assert_int_equal(kvf__journal_replay(j, &ops, s), KVF_OK);
	kvf__journal_close(j);
}

static char keys[KEYS * 4][16];

static struct kvf__jrec put_rec(int i, uint64_t size)
{
	struct kvf__jrec r = {.type = KVF__JREC_OBJECT_PUT};

	snprintf(keys[i], sizeof(keys[i]), "k%d", i);
	r.obj.key = keys[i];
	r.obj.key_len = (uint32_t)strlen(keys[i]);
	r.obj.size = size;
	r.obj.nr_replicas = 1;
	r.obj.replicas[0].segment_id = 1;
	r.obj.replicas[0].offset = (uint64_t)i * SLOT;
	return r;
}

static struct kvf__jrec remove_rec(int i)
{
	struct kvf__jrec r = {.type = KVF__JREC_OBJECT_REMOVE};

	snprintf(keys[i], sizeof(keys[i]), "k%d", i);
	r.obj.key = keys[i];
	r.obj.key_len = (uint32_t)strlen(keys[i]);
	return r;
}

static struct kvf__journal *open_at(const char *dir)
{
	struct kvf__journal_config cfg = {.dir = dir,
					  .durability = KVF_DURABILITY_BOUNDED,
					  .sync_interval_ms = 5,
					  .wal_bytes = 64u << 10};
	struct kvf__journal *j;

	assert_int_equal(kvf__journal_open(&cfg, &j), KVF_OK);
	return j;
}

static void fill(struct kvf__journal *j)
{
	struct kvf__jrec mount = {.type = KVF__JREC_SEGMENT_MOUNT};

	mount.mount.segment_id = 1;
	mount.mount.client_id = 7;
	mount.mount.size = (uint64_t)KEYS * 4 * SLOT;
	mount.mount.name = "seg";
	mount.mount.name_len = 3;
	mount.mount.endpoint = "e";
	mount.mount.endpoint_len = 1;
	assert_int_equal(kvf__journal_append(j, &mount, 1), KVF_OK);
	for (int i = 0; i < KEYS; i++) {
		struct kvf__jrec r = put_rec(i, 100 + (uint64_t)i);

		assert_int_equal(kvf__journal_append(j, &r, 1), KVF_OK);
	}
	/* part of it in the image, the rest in the log */
	assert_int_equal(kvf__journal_checkpoint(j), KVF_OK);
	for (int i = 0; i < KEYS; i += 3) {
		struct kvf__jrec r = remove_rec(i);

		assert_int_equal(kvf__journal_append(j, &r, 1), KVF_OK);
	}
	assert_int_equal(kvf__journal_checkpoint(j), KVF_OK); /* folded */
	for (int i = 1; i < KEYS; i += 3) {
		struct kvf__jrec r = put_rec(i, 7);

		assert_int_equal(kvf__journal_append(j, &r, 1), KVF_OK);
	}
}

/* Appends keys KEYS.. while the snapshot is read. */
struct bg {
	struct kvf__journal *j;
	atomic_bool go;
	atomic_int n;
	int failed;
};

static void *appender(void *arg)
{
	struct bg *b = arg;

	for (int n = 0; atomic_load(&b->go) && n < 3 * KEYS; n++) {
		struct kvf__jrec r = put_rec(KEYS + n, 5);

		if (kvf__journal_append(b->j, &r, 1)) {
			b->failed = 1;
			break;
		}
		atomic_store(&b->n, n + 1);
	}
	return NULL;
}

/* The snapshot's chunks, kept as they came. */
struct chunks {
	uint8_t *buf;
	size_t len, cap;
	uint64_t recs;
	int calls;
};

static int keep_chunk(void *arg, const uint8_t *frames, size_t len,
		      uint32_t nr_frames, uint64_t nr_recs)
{
	struct chunks *c = arg;

	if (c->len + len + 16 > c->cap) {
		c->cap = 2 * (c->len + len + 16);
		c->buf = realloc(c->buf, c->cap);
		assert_non_null(c->buf);
	}
	kvf__put_be64(c->buf + c->len, nr_recs);
	kvf__put_be64(c->buf + c->len + 8, ((uint64_t)nr_frames << 32) | len);
	memcpy(c->buf + c->len + 16, frames, len);
	c->len += 16 + len;
	c->recs += nr_recs;
	c->calls++;
	return 0;
}

struct collect {
	struct kvf__jrec *recs;
	size_t n;
};

static int collect_rec(void *arg, const struct kvf__jrec *rec, uint32_t idx)
{
	struct collect *c = arg;

	(void)idx;
	c->recs[c->n++] = *rec;
	return 0;
}

/* Append the chunks to @j (numbered by set_base()); its last sequence. */
static uint64_t replay_chunks(struct kvf__journal *j, const struct chunks *c)
{
	uint64_t last = 0;

	for (size_t off = 0; off < c->len;) {
		uint64_t nr = kvf__get_be64(c->buf + off);
		uint64_t fl = kvf__get_be64(c->buf + off + 8);
		size_t len = (size_t)(fl & 0xffffffffu);
		struct collect col = {.recs = calloc(nr, sizeof(*col.recs))};

		assert_non_null(col.recs);
		assert_int_equal(kvf__frames_decode(c->buf + off + 16, len, nr,
						    (uint32_t)(fl >> 32),
						    collect_rec, &col),
				 KVF_OK);
		assert_int_equal(
			kvf__journal_append_seq(j, col.recs, col.n, &last),
			KVF_OK);
		free(col.recs);
		off += 16 + len;
	}
	return last;
}

static void mkdir_tmp(char *dir, size_t len, const char *what)
{
	const char *base = getenv("KVF_TEST_TMPDIR");

	snprintf(dir, len, "%s/jsnap-%s-XXXXXX", base ? base : "/tmp", what);
	assert_non_null(mkdtemp(dir));
}

static void rm_rf(const char *dir)
{
	char cmd[700];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
}

static void test_snapshot_copy(void **state)
{
	char a[512], b[512];
	struct kvf__journal *ja, *jb;
	struct chunks c = {0};
	struct bg bg = {0};
	struct state *sa = calloc(1, sizeof(*sa)), *sb = calloc(1, sizeof(*sb));
	pthread_t th;
	uint64_t seq = 0, n = 0;

	(void)state;
	assert_non_null(sa);
	assert_non_null(sb);
	mkdir_tmp(a, sizeof(a), "a");
	mkdir_tmp(b, sizeof(b), "b");
	ja = open_at(a);
	fill(ja);
	bg.j = ja;
	atomic_store(&bg.go, true);
	assert_int_equal(pthread_create(&th, NULL, appender, &bg), 0);
	for (int i = 0; i < 20000 && atomic_load(&bg.n) < 20; i++)
		usleep(1000); /* some appends before the snapshot, if it can */
	assert_int_equal(kvf__journal_snapshot(ja, keep_chunk, &c, &seq, &n),
			 KVF_OK);
	atomic_store(&bg.go, false);
	pthread_join(th, NULL);
	assert_false(bg.failed);
	assert_true(n == c.recs);
	assert_true(n < seq);	  /* removals folded away */
	assert_true(c.calls > 1); /* several chunks */
	kvf__journal_close(ja);

	jb = open_at(b);
	assert_int_equal(kvf__journal_set_base(jb, seq - n), KVF_OK);
	/* twice: the journal is not new any more */
	assert_int_equal(kvf__journal_set_base(jb, 1), KVF_ERR_BUSY);
	assert_true(replay_chunks(jb, &c) == seq);
	assert_int_equal(kvf__journal_set_base(jb, 1), KVF_ERR_BUSY);
	kvf__journal_close(jb);

	/* the copy holds exactly the original's state at @seq */
	state_of(a, seq, sa);
	state_of(b, UINT64_MAX, sb);
	assert_true(sa->last == seq && sb->last == seq);
	assert_int_equal(sa->segments, 1);
	assert_int_equal(sb->segments, 1);
	assert_memory_equal(sa->size, sb->size, sizeof(sa->size));
	assert_true(sa->size[1] == 7 && sa->size[0] == 0 && sa->size[2] == 102);
	free(c.buf);
	free(sa);
	free(sb);
	rm_rf(a);
	rm_rf(b);
}

static uint64_t last_seq(const char *dir)
{
	struct kvf__journal *j = open_at(dir);
	struct kvf__journal_stats st;

	kvf__journal_get_stats(j, &st);
	kvf__journal_close(j);
	return st.last_seq;
}

/*
 * @crash: the install is interrupted after the first file moved (as a
 * crash would leave it): the next open still yields the new journal.
 */
static void install(bool crash)
{
	char a[512], b[512], from[700], to[700], mark[600];
	struct kvf__journal *j;
	struct state *s = calloc(1, sizeof(*s));
	struct kvf__jrec r;
	FILE *f;

	assert_non_null(s);
	mkdir_tmp(a, sizeof(a), "old");
	mkdir_tmp(b, sizeof(b), "new");
	j = open_at(a);
	fill(j);
	kvf__journal_close(j);
	assert_true(last_seq(a) > 500);

	j = open_at(b);
	assert_int_equal(kvf__journal_set_base(j, 1000), KVF_OK);
	r = put_rec(3, 33);
	assert_int_equal(kvf__journal_append(j, &r, 1), KVF_OK);
	kvf__journal_close(j);
	snprintf(from, sizeof(from), "%s/lineage-like", b);
	f = fopen(from, "w");
	assert_non_null(f);
	fputs("new\n", f);
	fclose(f);

	assert_int_equal(kvf__jdir_stage(a, b), 0);
	assert_int_equal(access(b, F_OK), -1); /* renamed */
	snprintf(mark, sizeof(mark), "%s/" KVF__JDIR_INSTALL, a);
	if (crash) {
		snprintf(from, sizeof(from), "%s/data.mdb", mark);
		snprintf(to, sizeof(to), "%s/data.mdb", a);
		assert_int_equal(rename(from, to), 0);
	}
	state_of(a, UINT64_MAX, s);
	assert_true(s->last == 1001);
	assert_true(s->size[3] == 33 && s->size[2] == 0 && !s->segments);
	assert_int_equal(access(mark, F_OK), -1); /* installed, removed */
	snprintf(from, sizeof(from), "%s/lineage-like", a);
	assert_int_equal(access(from, F_OK), 0); /* came along */
	assert_true(last_seq(a) == 1001);
	free(s);
	rm_rf(a);
}

static void test_install(void **state)
{
	(void)state;
	install(false);
}

static void test_install_interrupted(void **state)
{
	(void)state;
	install(true);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_snapshot_copy),
		cmocka_unit_test(test_install),
		cmocka_unit_test(test_install_interrupted),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
