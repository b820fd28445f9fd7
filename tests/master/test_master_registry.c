// SPDX-License-Identifier: MIT
/*
 * tests/master/test_master_registry.c - the client/segment registry: UUID
 * ids and their collision check, idempotent and foreign mounts, liveness,
 * and the persisted segment table (round trip, damaged file refused).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <kvforge.h>

#include "master/registry.h"

#define MIB (1ULL << 20)

static struct kvf_engine *open_engine(const char *dir)
{
	struct kvf_engine *e = NULL;
	struct kvf_config cfg;

	kvf_config_init(&cfg);
	cfg.background = false;
	cfg.expected_objects = 1024;
	cfg.data_dir = dir;
	cfg.durability = dir ? KVF_DURABILITY_BOUNDED : KVF_DURABILITY_NONE;
	assert_int_equal(kvf_engine_open(&cfg, &e), KVF_OK);
	return e;
}

static struct kvf_seg_view seg(struct kvf_uuid id, const char *name,
			       uint64_t base, const char *proto)
{
	return (struct kvf_seg_view){.id = id,
				     .name = name,
				     .name_len = strlen(name),
				     .base = base,
				     .size = 16 * MIB,
				     .te_endpoint = "127.0.0.1:1",
				     .te_endpoint_len = 11,
				     .protocol = proto,
				     .protocol_len = strlen(proto)};
}

/* Undo x ^= x >> s. */
static uint64_t unxorshift(uint64_t y, unsigned s)
{
	uint64_t x = y;

	for (int i = 0; i < 64; i++)
		x = y ^ (x >> s);
	return x;
}

static uint64_t inverse(uint64_t m)
{
	uint64_t inv = m;

	for (int i = 0; i < 6; i++)
		inv *= 2 - m * inv;
	return inv;
}

/* A UUID with second half @second mapping to the same id as @u: the id
 * is a bijection of the first half for a fixed second half. */
static struct kvf_uuid collide(struct kvf_uuid u, uint64_t second)
{
	uint64_t t = kvf_registry_id(u) ^ second;

	t = unxorshift(t, 31);
	t *= inverse(0x94d049bb133111ebULL);
	t = unxorshift(t, 27);
	t *= inverse(0xbf58476d1ce4e5b9ULL);
	t = unxorshift(t, 30);
	return (struct kvf_uuid){t ^ (second * 0x9e3779b97f4a7c15ULL), second};
}

static void test_ids_and_collisions(void **state)
{
	struct kvf_engine *e = open_engine(NULL);
	struct kvf_registry *r = NULL;
	struct kvf_uuid me = {10, 20}, other = {11, 21};
	struct kvf_uuid a = {1, 2};
	struct kvf_uuid b = collide(a, 99), c2 = collide(me, 77);
	struct kvf_seg_view v;

	(void)state;
	assert_int_equal(kvf_registry_id(b), kvf_registry_id(a));
	assert_int_equal(kvf_registry_id(c2), kvf_registry_id(me));
	assert_int_equal(kvf_registry_open(e, NULL, 10000, &r), KVF_OK);
	v = seg(a, "seg-a", 1ULL << 40, "tcp");
	assert_int_equal(kvf_registry_mount(r, me, &v), KVF_OK);
	assert_int_equal(kvf_registry_mount(r, me, &v), KVF_OK); /* again */
	assert_int_equal(kvf_registry_mount(r, other, &v),
			 KVF_ERR_SEGMENT_EXISTS);
	v = seg(b, "seg-b", 2ULL << 40, "tcp");
	assert_int_equal(kvf_registry_mount(r, me, &v),
			 KVF_ERR_INVALID_PARAMS); /* segment id collision */
	v = seg((struct kvf_uuid){5, 6}, "seg-c", 3ULL << 40, "tcp");
	assert_int_equal(kvf_registry_mount(r, c2, &v),
			 KVF_ERR_INVALID_PARAMS); /* client id collision */
	v = seg((struct kvf_uuid){5, 6}, "seg-c", 3ULL << 40, "t c p");
	assert_int_equal(kvf_registry_mount(r, me, &v),
			 KVF_ERR_INVALID_PARAMS); /* not a protocol word */

	kvf_registry_read_lock(r);
	assert_non_null(kvf_registry_segment_by_uuid(r, a));
	assert_null(kvf_registry_segment_by_uuid(r, b));
	assert_non_null(kvf_registry_segment_by_name(r, "seg-a", 5));
	assert_null(kvf_registry_segment_by_name(r, "seg-b", 5));
	kvf_registry_read_unlock(r);

	/* Live only after a remount, as upstream's ok-client set. */
	assert_false(kvf_registry_ping(r, me));
	kvf_registry_set_live(r, me);
	assert_true(kvf_registry_ping(r, me));
	assert_false(kvf_registry_ping(r, c2));
	assert_int_equal(kvf_registry_live_clients(r), 1);

	assert_int_equal(kvf_registry_unmount(r, other, a),
			 KVF_ERR_ILLEGAL_CLIENT);
	assert_int_equal(kvf_registry_unmount(r, me, a), KVF_OK);
	assert_int_equal(kvf_registry_unmount(r, me, a),
			 KVF_ERR_SEGMENT_NOT_FOUND);
	kvf_registry_close(r);
	kvf_engine_close(e);
}

/*
 * One batch (one engine call) with refusals of every kind: each segment is
 * decided as if mounted on its own, in order. A UUID colliding with one an
 * earlier segment of the same batch mounted is refused, not taken for a
 * remount of it; a segment the registry refused leaves its UUID free for
 * a later one; the answer is the first refusal.
 */
static void test_batch_in_order(void **state)
{
	struct kvf_engine *e = open_engine(NULL);
	struct kvf_registry *r = NULL;
	struct kvf_uuid me = {10, 20}, a = {1, 2}, x = {7, 8}, y = {9, 9};
	struct kvf_uuid b = collide(a, 99);
	struct kvf_seg_view v[] = {
		seg(a, "a", 1ULL << 40, "tcp"),
		seg(b, "b", 2ULL << 40, "tcp"),		/* collides with a */
		seg(x, "x", 3ULL << 40, "t c p"),	/* bad protocol */
		seg(x, "x", 3ULL << 40, "rdma"),	/* fine */
		seg(y, "y", (1ULL << 40) + MIB, "tcp"), /* overlaps a */
	};
	const struct kvf_seg_entry *ent;
	struct kvf_engine_stats st;

	(void)state;
	assert_int_equal(kvf_registry_open(e, NULL, 10000, &r), KVF_OK);
	assert_int_equal(kvf_registry_mount_batch(r, me, v, 5),
			 KVF_ERR_INVALID_PARAMS);
	kvf_registry_read_lock(r);
	ent = kvf_registry_segment_by_uuid(r, a);
	assert_non_null(ent);
	assert_string_equal(ent->name, "a");
	assert_null(kvf_registry_segment_by_uuid(r, b));
	ent = kvf_registry_segment_by_uuid(r, x);
	assert_non_null(ent);
	assert_int_equal(ent->protocol_len, 4);
	assert_memory_equal(ent->protocol, "rdma", 4);
	assert_null(kvf_registry_segment_by_uuid(r, y));
	kvf_registry_read_unlock(r);
	assert_int_equal(kvf_engine_get_stats(e, &st), KVF_OK);
	assert_int_equal(st.segments, 2);
	/* The same batch again: the same answer, nothing changes. */
	assert_int_equal(kvf_registry_mount_batch(r, me, v, 5),
			 KVF_ERR_INVALID_PARAMS);
	assert_int_equal(kvf_engine_get_stats(e, &st), KVF_OK);
	assert_int_equal(st.segments, 2);
	/* a remounted on its own is a remount. */
	assert_int_equal(kvf_registry_mount_batch(r, me, v, 1), KVF_OK);
	kvf_registry_close(r);
	kvf_engine_close(e);
}

static char *tmpdir(void)
{
	const char *base = getenv("KVF_TEST_TMPDIR");
	char *p = malloc(512);

	snprintf(p, 512, "%s/registry-XXXXXX", base ? base : "/tmp");
	assert_non_null(mkdtemp(p));
	return p;
}

static void test_persisted_table(void **state)
{
	char *dir = tmpdir(), path[600];
	struct kvf_uuid me = {30, 40}, id = {3, 4};
	struct kvf_seg_view v = seg(id, "seg-p", 1ULL << 41, "rdma");
	struct kvf_registry *r = NULL;
	struct kvf_engine *e = open_engine(dir);
	const struct kvf_seg_entry *s;
	FILE *fp;

	(void)state;
	assert_int_equal(kvf_registry_open(e, dir, 10000, &r), KVF_OK);
	assert_int_equal(kvf_registry_mount(r, me, &v), KVF_OK);
	kvf_registry_close(r);
	kvf_engine_close(e);

	/* Reopened: protocol and UUIDs back, nobody live. */
	e = open_engine(dir);
	assert_int_equal(kvf_registry_open(e, dir, 10000, &r), KVF_OK);
	kvf_registry_read_lock(r);
	s = kvf_registry_segment_by_uuid(r, id);
	assert_non_null(s);
	assert_string_equal(s->protocol, "rdma");
	assert_string_equal(s->name, "seg-p");
	assert_int_equal(s->base, 1ULL << 41);
	kvf_registry_read_unlock(r);
	assert_false(kvf_registry_ping(r, me));
	kvf_registry_close(r);

	/* A damaged table is refused, not half-read. */
	snprintf(path, sizeof(path), "%s/kvforge-master.segments", dir);
	fp = fopen(path, "a");
	assert_non_null(fp);
	fputs("not a segment line\n", fp);
	fclose(fp);
	assert_int_equal(kvf_registry_open(e, dir, 10000, &r),
			 KVF_ERR_JOURNAL_CORRUPT);
	fp = fopen(path, "w");
	fputs("something else\n", fp);
	fclose(fp);
	assert_int_equal(kvf_registry_open(e, dir, 10000, &r),
			 KVF_ERR_JOURNAL_CORRUPT);
	kvf_engine_close(e);
	free(dir);
}

/* ---- the table replicated to a standby ---------------------------------- */

struct hooked {
	char text[4096];
	size_t len;
	int calls, ret;
};

static int hook(void *ctx, const char *text, size_t len)
{
	struct hooked *h = ctx;

	assert_true(len < sizeof(h->text));
	memcpy(h->text, text, len);
	h->len = len;
	h->calls++;
	return h->ret;
}

static char *slurp(const char *dir, size_t *len)
{
	char path[600], *buf = malloc(8192);
	FILE *fp;

	snprintf(path, sizeof(path), "%s/kvforge-master.segments", dir);
	fp = fopen(path, "r");
	if (!fp) {
		free(buf);
		return NULL;
	}
	*len = fread(buf, 1, 8192, fp);
	fclose(fp);
	return buf;
}

static void test_table_replicated(void **state)
{
	char *dir = tmpdir(), *other = tmpdir(), *text, *file;
	struct kvf_uuid me = {31, 41}, id = {5, 6}, id2 = {7, 8};
	struct kvf_seg_view v = seg(id, "seg-r", 1ULL << 42, "rdma");
	struct kvf_seg_view v2 = seg(id2, "seg-s", 1ULL << 43, "tcp");
	struct kvf_registry *r = NULL, *r2 = NULL;
	struct kvf_engine *e = open_engine(dir), *e2;
	struct hooked h = {.calls = 0};
	const struct kvf_seg_entry *s;
	size_t len, flen;

	(void)state;
	assert_int_equal(kvf_registry_open(e, dir, 10000, &r), KVF_OK);
	kvf_registry_set_persist_hook(r, hook, &h);
	assert_int_equal(kvf_registry_mount(r, me, &v), KVF_OK);
	assert_int_equal(h.calls, 1);
	/* what the hook saw is the file, and the export */
	file = slurp(dir, &flen);
	assert_non_null(file);
	assert_int_equal(flen, h.len);
	assert_memory_equal(file, h.text, flen);
	free(file);
	assert_int_equal(kvf_registry_export(r, &text, &len), KVF_OK);
	assert_int_equal(len, h.len);
	assert_memory_equal(text, h.text, len);
	free(text);
	/* a hook's error is the mount's (the table is written) */
	h.ret = KVF_ERR_JOURNAL;
	assert_int_equal(kvf_registry_mount(r, me, &v2), KVF_ERR_JOURNAL);
	assert_int_equal(h.calls, 2);
	h.ret = KVF_OK;

	/* malformed tables change nothing on the standby's side */
	assert_int_equal(kvf_registry_store_table(other, "junk\n", 5),
			 KVF_ERR_JOURNAL_CORRUPT);
	assert_int_equal(kvf_registry_store_table(other, h.text, h.len - 1),
			 KVF_ERR_JOURNAL_CORRUPT); /* no final newline */
	memcpy(h.text + h.len, "1 2 3\n", 6);
	assert_int_equal(kvf_registry_store_table(other, h.text, h.len + 6),
			 KVF_ERR_JOURNAL_CORRUPT);
	assert_null(slurp(other, &flen));
	assert_int_equal(kvf_registry_store_table(other, h.text, h.len),
			 KVF_OK);
	file = slurp(other, &flen);
	assert_non_null(file);
	assert_int_equal(flen, h.len);
	assert_memory_equal(file, h.text, flen);
	free(file);

	/* a registry opened there, on an engine holding the segments (as a
	 * promoted standby's journal does), knows them as the leader did */
	kvf_registry_close(r);
	kvf_engine_close(e);
	e2 = open_engine(dir);
	assert_int_equal(kvf_registry_store_table(dir, h.text, h.len), KVF_OK);
	assert_int_equal(kvf_registry_open(e2, dir, 10000, &r2), KVF_OK);
	kvf_registry_read_lock(r2);
	s = kvf_registry_segment_by_uuid(r2, id);
	assert_non_null(s);
	assert_string_equal(s->protocol, "rdma");
	assert_int_equal(s->client_uuid.second, me.second);
	assert_non_null(kvf_registry_segment_by_uuid(r2, id2));
	kvf_registry_read_unlock(r2);
	kvf_registry_close(r2);
	kvf_engine_close(e2);
	free(dir);
	free(other);
}

/* ---- indexes against a model -------------------------------------------- */

#define MODEL_SEGS 600
#define MODEL_CLIENTS 7

struct model_seg {
	bool mounted;
	unsigned client;
	char name[16];
};

static void count_seg(const struct kvf_seg_entry *e, void *ctx)
{
	(void)e;
	(*(size_t *)ctx)++;
}

/* Every lookup agrees with the model. */
static void check_model(struct kvf_registry *r, const struct model_seg *m)
{
	size_t per_client[MODEL_CLIENTS] = {0};

	kvf_registry_read_lock(r);
	for (unsigned i = 0; i < MODEL_SEGS; i++) {
		struct kvf_uuid id = {0x5e5e, i + 1};
		const struct kvf_seg_entry *e =
			kvf_registry_segment_by_uuid(r, id);
		const struct kvf_seg_entry *n = kvf_registry_segment_by_name(
			r, m[i].name, strlen(m[i].name));
		bool any = false;

		assert_int_equal(e != NULL, m[i].mounted);
		if (e) {
			assert_int_equal(e->client_uuid.second, m[i].client);
			assert_string_equal(e->name, m[i].name);
			per_client[m[i].client]++;
		}
		for (unsigned j = 0; j < MODEL_SEGS; j++)
			any |= m[j].mounted && !strcmp(m[j].name, m[i].name);
		/* Names repeat: the lookup answers one of the mounted ones. */
		assert_int_equal(n != NULL, any);
		if (n)
			assert_string_equal(n->name, m[i].name);
	}
	for (unsigned c = 0; c < MODEL_CLIENTS; c++) {
		size_t seen = 0;

		assert_int_equal(kvf_registry_client_segments(
					 r, (struct kvf_uuid){0xc0c0, c},
					 count_seg, &seen),
				 per_client[c]);
		assert_int_equal(seen, per_client[c]);
	}
	kvf_registry_read_unlock(r);
}

/* Random mounts, remounts and unmounts; the indexes (by id, by name, each
 * client's list) follow every move of the arrays. */
static void test_indexes_model(void **state)
{
	struct kvf_engine *e = open_engine(NULL);
	struct kvf_registry *r = NULL;
	struct model_seg *m = calloc(MODEL_SEGS, sizeof(*m));
	uint64_t x = 0x243f6a8885a308d3ULL;

	(void)state;
	assert_non_null(m);
	assert_int_equal(kvf_registry_open(e, NULL, 10000, &r), KVF_OK);
	for (unsigned i = 0; i < MODEL_SEGS; i++) {
		m[i].client = i % MODEL_CLIENTS;
		snprintf(m[i].name, sizeof(m[i].name), "n%u", i % 97);
	}
	for (int step = 0; step < 6000; step++) {
		unsigned i;
		struct kvf_uuid id, cli;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		i = (unsigned)(x % MODEL_SEGS);
		id = (struct kvf_uuid){0x5e5e, i + 1};
		cli = (struct kvf_uuid){0xc0c0, m[i].client};
		if (!m[i].mounted || (x >> 40) % 4 == 0) {
			struct kvf_seg_view v = seg(
				id, m[i].name, 0x100000000ULL * (i + 1), "tcp");

			assert_int_equal(kvf_registry_mount(r, cli, &v),
					 KVF_OK);
			m[i].mounted = true;
		} else {
			assert_int_equal(kvf_registry_unmount(r, cli, id),
					 KVF_OK);
			m[i].mounted = false;
		}
		if (step % 500 == 0)
			check_model(r, m);
	}
	check_model(r, m);
	kvf_registry_close(r);
	kvf_engine_close(e);
	free(m);
}

static uint64_t manual_ns;

static uint64_t manual_clock(void *ctx)
{
	(void)ctx;
	return manual_ns;
}

/*
 * A client's segments leave the engine when it expires; before the
 * registry's sweep notices, another client mounts one of them (same
 * segment UUID). Its entry must move to the new owner's list, not keep
 * the expired owner's links under the new owner's id.
 */
static void test_segment_taken_after_expiry(void **state)
{
	struct kvf_uuid a = {0xaaaa, 1}, b = {0xbbbb, 2};
	struct kvf_uuid s1 = {0x5151, 1}, s2 = {0x5252, 2};
	struct kvf_seg_view v1 = seg(s1, "one", 0x100000000ULL, "tcp");
	struct kvf_seg_view v2 = seg(s2, "two", 0x200000000ULL, "tcp");
	struct kvf_engine *e = NULL;
	struct kvf_registry *r = NULL;
	struct kvf_config cfg;
	size_t n;

	(void)state;
	manual_ns = 1000000000ULL;
	kvf_config_init(&cfg);
	cfg.background = false;
	cfg.client_ttl_ms = 1000;
	cfg.clock = manual_clock;
	assert_int_equal(kvf_engine_open(&cfg, &e), KVF_OK);
	assert_int_equal(kvf_registry_open(e, NULL, 10000, &r), KVF_OK);
	assert_int_equal(kvf_registry_mount(r, a, &v2), KVF_OK);
	assert_int_equal(kvf_registry_mount(r, a, &v1), KVF_OK);
	manual_ns += 5000000000ULL;
	assert_int_equal(kvf_engine_tick(e), KVF_OK); /* a expires */
	assert_int_equal(kvf_registry_mount(r, b, &v1), KVF_OK);
	kvf_registry_read_lock(r);
	assert_int_equal(kvf_registry_segment(r, kvf_registry_id(s1))->client,
			 kvf_registry_id(b));
	/* Each list holds its own client's segments only. */
	n = 0;
	assert_int_equal(kvf_registry_client_segments(r, b, count_seg, &n), 1);
	assert_int_equal(n, 1);
	n = 0;
	assert_int_equal(kvf_registry_client_segments(r, a, count_seg, &n), 1);
	assert_int_equal(n, 1);
	kvf_registry_read_unlock(r);
	/* The sweep drops a's last segment, then a, and keeps b's. */
	assert_int_equal(kvf_registry_sweep(r), KVF_OK);
	assert_int_equal(kvf_registry_unmount(r, b, s1), KVF_OK);
	assert_int_equal(kvf_registry_mount(r, b, &v2), KVF_OK);
	assert_int_equal(kvf_registry_mount(r, b, &v1), KVF_OK);
	assert_int_equal(kvf_registry_unmount(r, b, s2), KVF_OK);
	assert_int_equal(kvf_registry_unmount(r, b, s1), KVF_OK);
	kvf_registry_read_lock(r);
	assert_null(kvf_registry_segment(r, kvf_registry_id(s1)));
	assert_null(kvf_registry_segment(r, kvf_registry_id(s2)));
	kvf_registry_read_unlock(r);
	kvf_registry_close(r);
	kvf_engine_close(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ids_and_collisions),
		cmocka_unit_test(test_batch_in_order),
		cmocka_unit_test(test_persisted_table),
		cmocka_unit_test(test_table_replicated),
		cmocka_unit_test(test_indexes_model),
		cmocka_unit_test(test_segment_taken_after_expiry),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
