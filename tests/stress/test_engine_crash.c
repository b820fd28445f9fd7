/* SPDX-License-Identifier: MIT */
/*
 * tests/stress/test_engine_crash.c - SIGKILL an engine, recover, check.
 *
 * The binary has three roles, so that no process ever forks while it holds
 * engine, LMDB or RCU state:
 *
 *   driver (no arguments): per iteration, makes a directory, starts a
 *     child (fork + exec of itself), SIGKILLs it after a random 30-250 ms,
 *     runs `kvforge-inspect --verify` on the journal (when the tool is
 *     built) and then a checker (fork + exec again). It never opens an
 *     engine itself.
 *   child (--child DIR MODE INDEX SEED): opens an engine on DIR/data and
 *     runs random batches of put_start, put_end, revoke and forced remove
 *     over a fixed key space, mounting and unmounting spare segments now
 *     and then (some puts prefer them, so unmounts drop replicas). Around
 *     every durable call it appends to DIR/acks an intent line before the
 *     call and an acknowledgement line after it returns (with the items
 *     that succeeded); put_start's descriptors are logged too. One write()
 *     per line; a line cut by the kill has no newline and is ignored.
 *   checker (--check DIR MODE INDEX): replays DIR/acks into a model,
 *     opens the engine on DIR/data and checks, then checkpoints the journal
 *     (the image path) and checks again:
 *       - every acknowledged put_end is present, with exactly the replicas
 *         put_start returned minus those in acknowledged unmounts, unless
 *         acknowledged removed (or all its replicas' segments unmounted);
 *       - every acknowledged removal is absent;
 *       - items of the one unacknowledged call may go either way (for an
 *         interrupted unmount, the segment's replica may or may not be
 *         there), but a present object only has replicas it was given;
 *       - nothing is processing; the object count matches;
 *       - acknowledged mounts/unmounts are in effect; every replica lies
 *         inside a mounted segment; no two replicas overlap anywhere;
 *       - used bytes equal the sum of the replicas, and removing every
 *         object brings them to zero (the allocators were rebuilt exactly).
 *
 * Iterations alternate BOUNDED and STRICT, and the index kind every two.
 * KVF_STRESS_ITERATIONS (default 4) sets the number of iterations.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <kvforge.h>

#include "journal/journal.h"
#include "tests/stress/check.h"


#define NKEYS 1024
#define KEY_CAP 96
#define MAX_BATCH 32
#define CLIENT_BASE 1
#define CLIENT_SPARE 2
#define NR_BASE 3     /* segments 1..3, client 1, never unmounted */
#define SPARE_FIRST 10 /* segments 10..13, client 2, come and go */
#define NR_SPARE 4
#define NR_SEGIDS (SPARE_FIRST + NR_SPARE)
#define SEG_SIZE (64ULL << 20)

static uint64_t rnd(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545F4914F6CDD1DULL;
}

static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

static struct kvf_key key_of(unsigned k, char *buf)
{
	int n = snprintf(buf, KEY_CAP, "%016llx%016llx%016llx%016llx_%u_k",
			 (unsigned long long)mix(k * 4),
			 (unsigned long long)mix(k * 4 + 1),
			 (unsigned long long)mix(k * 4 + 2),
			 (unsigned long long)mix(k * 4 + 3), k % 8);

	return (struct kvf_key){ buf, (size_t)n };
}

static void engine_config(struct kvf_config *cfg, const char *data,
			  int strict, int bucket)
{
	kvf_config_init(cfg);
	cfg->data_dir = data;
	cfg->durability = strict ? KVF_DURABILITY_STRICT :
				   KVF_DURABILITY_BOUNDED;
	cfg->index = bucket ? KVF_INDEX_BUCKET : KVF_INDEX_LFHT;
	cfg->sync_interval_ms = 5;
	cfg->journal_wal_bytes = 256 << 10; /* crashes around rotations */
	cfg->background = false;
	cfg->client_ttl_ms = 3600 * 1000;
}

static uint64_t seg_base(uint64_t id)
{
	return id << 36;
}

static int mount_seg(struct kvf_engine *e, uint64_t client, uint64_t id)
{
	char name[32];
	struct kvf_segment_desc d = { .id = id, .name = name,
				      .base = seg_base(id), .size = SEG_SIZE,
				      .endpoint = "10.0.0.2:4000" };

	snprintf(name, sizeof(name), "crash-%llu", (unsigned long long)id);
	return kvf_segment_mount(e, client, &d);
}

/* ---- child ------------------------------------------------------------ */

enum ckey { K_FREE, K_PROCESSING, K_COMPLETE };

struct child {
	struct kvf_engine *e;
	int fd;
	uint64_t rng;
	enum ckey key[NKEYS];
	struct kvf_replicas rep[NKEYS];
	bool spare[NR_SPARE];
	char line[MAX_BATCH * 160 + 64];
	size_t len;
};

static void out(struct child *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void out(struct child *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	c->len += (size_t)vsnprintf(c->line + c->len, sizeof(c->line) - c->len,
				    fmt, ap);
	va_end(ap);
	CHECK(c->len < sizeof(c->line));
}

/* Write the buffered line(s) in one write(). */
static void flush(struct child *c)
{
	CHECK(write(c->fd, c->line, c->len) == (ssize_t)c->len);
	c->len = 0;
}

/* Up to @max random keys in state @want; returns how many. */
static size_t pick(struct child *c, enum ckey want, size_t max,
		   unsigned *ids)
{
	size_t n = 0;
	unsigned start = (unsigned)(rnd(&c->rng) % NKEYS);

	for (unsigned i = 0; i < NKEYS && n < max; i++) {
		unsigned k = (start + i * 7) % NKEYS; /* 7 is coprime */

		if (c->key[k] == want)
			ids[n++] = k;
	}
	return n;
}

static void keys_of(const unsigned *ids, size_t n, struct kvf_key *keys,
		    char (*buf)[KEY_CAP])
{
	for (size_t i = 0; i < n; i++)
		keys[i] = key_of(ids[i], buf[i]);
}

static void op_put_start(struct child *c)
{
	static char buf[MAX_BATCH][KEY_CAP];
	unsigned ids[MAX_BATCH];
	struct kvf_key keys[MAX_BATCH];
	uint64_t sizes[MAX_BATCH], pref;
	struct kvf_replicas outr[MAX_BATCH];
	enum kvf_status st[MAX_BATCH];
	struct kvf_put_config pc = { .replica_num = rnd(&c->rng) % 3 ? 1 : 2 };
	size_t n = pick(c, K_FREE, 1 + rnd(&c->rng) % MAX_BATCH, ids);
	unsigned s = (unsigned)(rnd(&c->rng) % NR_SPARE);

	if (!n)
		return;
	if (c->spare[s] && rnd(&c->rng) % 2) {
		pref = SPARE_FIRST + s;
		pc.preferred_segments = &pref;
		pc.nr_preferred = 1;
	}
	keys_of(ids, n, keys, buf);
	for (size_t i = 0; i < n; i++)
		sizes[i] = (1 + rnd(&c->rng) % 64) * 4096;
	kvf_batch_put_start(c->e, CLIENT_BASE, keys, sizes, n, &pc, outr, st);
	for (size_t i = 0; i < n; i++) {
		if (st[i] != KVF_OK)
			continue;
		c->key[ids[i]] = K_PROCESSING;
		c->rep[ids[i]] = outr[i];
		out(c, "S %u %u", ids[i], outr[i].count);
		for (unsigned r = 0; r < outr[i].count; r++)
			out(c, " %llu %llu %llu",
			    (unsigned long long)outr[i].replica[r].segment_id,
			    (unsigned long long)outr[i].replica[r].addr,
			    (unsigned long long)outr[i].replica[r].size);
		out(c, "\n");
	}
	flush(c);
}

/* put_end ('e'/'E'), revoke ('v'/'V') or remove ('r'/'R'). */
static void op_keys(struct child *c, char op)
{
	static char buf[MAX_BATCH][KEY_CAP];
	unsigned ids[MAX_BATCH];
	struct kvf_key keys[MAX_BATCH];
	enum kvf_status st[MAX_BATCH];
	enum ckey from = op == 'r' ? K_COMPLETE : K_PROCESSING;
	size_t n = pick(c, from, 1 + rnd(&c->rng) % MAX_BATCH, ids);

	if (!n)
		return;
	keys_of(ids, n, keys, buf);
	out(c, "%c", op);
	for (size_t i = 0; i < n; i++)
		out(c, " %u", ids[i]);
	out(c, "\n");
	flush(c);
	if (op == 'e')
		kvf_batch_put_end(c->e, CLIENT_BASE, keys, n, st);
	else if (op == 'v')
		kvf_batch_put_revoke(c->e, CLIENT_BASE, keys, n, st);
	else
		kvf_batch_remove(c->e, keys, n, true, st);
	out(c, "%c", op - 'a' + 'A');
	for (size_t i = 0; i < n; i++) {
		if (st[i] == KVF_OK) {
			out(c, " %u", ids[i]);
			c->key[ids[i]] = op == 'e' ? K_COMPLETE : K_FREE;
		} else if (st[i] == KVF_ERR_OBJECT_NOT_FOUND) {
			c->key[ids[i]] = K_FREE; /* dropped by an unmount */
		} else {
			CHECK(!"unexpected item status");
		}
	}
	out(c, "\n");
	flush(c);
}

/* Forget @seg in the child's view (an unmount dropped its replicas). */
static void child_drop_segment(struct child *c, uint64_t seg)
{
	for (unsigned k = 0; k < NKEYS; k++) {
		struct kvf_replicas *r = &c->rep[k];
		unsigned j = 0;

		if (c->key[k] == K_FREE)
			continue;
		for (unsigned i = 0; i < r->count; i++)
			if (r->replica[i].segment_id != seg)
				r->replica[j++] = r->replica[i];
		r->count = j;
		if (!j)
			c->key[k] = K_FREE;
	}
}

static void op_spare(struct child *c)
{
	unsigned s = (unsigned)(rnd(&c->rng) % NR_SPARE);
	uint64_t id = SPARE_FIRST + s;

	out(c, "%c %llu\n", c->spare[s] ? 'u' : 'm', (unsigned long long)id);
	flush(c);
	if (c->spare[s]) {
		CHECK(kvf_segment_unmount(c->e, CLIENT_SPARE, id) == KVF_OK);
		child_drop_segment(c, id);
	} else {
		CHECK(mount_seg(c->e, CLIENT_SPARE, id) == KVF_OK);
	}
	c->spare[s] = !c->spare[s];
	out(c, "%c %llu\n", c->spare[s] ? 'M' : 'U', (unsigned long long)id);
	flush(c);
}

static int child_main(const char *dir, int strict, int bucket, uint64_t seed)
{
	static struct child c;
	struct kvf_config cfg;
	char data[PATH_MAX], acks[PATH_MAX];

	snprintf(data, sizeof(data), "%s/data", dir);
	snprintf(acks, sizeof(acks), "%s/acks", dir);
	c.fd = open(acks, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	CHECK(c.fd >= 0);
	c.rng = seed | 1;
	engine_config(&cfg, data, strict, bucket);
	CHECK(kvf_engine_open(&cfg, &c.e) == KVF_OK);
	for (uint64_t id = 1; id <= NR_BASE; id++) {
		out(&c, "m %llu\n", (unsigned long long)id);
		flush(&c);
		CHECK(mount_seg(c.e, CLIENT_BASE, id) == KVF_OK);
		out(&c, "M %llu\n", (unsigned long long)id);
		flush(&c);
	}
	for (;;) {
		unsigned x = (unsigned)(rnd(&c.rng) % 100);

		if (x < 35)
			op_put_start(&c);
		else if (x < 65)
			op_keys(&c, 'e');
		else if (x < 70)
			op_keys(&c, 'v');
		else if (x < 90)
			op_keys(&c, 'r');
		else if (x < 94)
			op_spare(&c);
	}
}

/* ---- checker ---------------------------------------------------------- */

enum mstate { M_ABSENT, M_PRESENT, M_MAYBE };

struct mrep {
	unsigned count;
	uint64_t seg[KVF_MAX_REPLICAS];
	uint64_t addr[KVF_MAX_REPLICAS];
	uint64_t size;
};

struct model {
	struct mrep desc[NKEYS]; /* put_start's answer, minus unmounts */
	struct mrep rep[NKEYS];  /* replicas a present object may have */
	enum mstate st[NKEYS];
	uint64_t optional[NKEYS]; /* PRESENT: this replica may be gone */
	enum mstate seg[NR_SEGIDS];
	unsigned acked_ends, acked_removes;
};

static void rep_drop(struct mrep *r, uint64_t seg)
{
	unsigned j = 0;

	for (unsigned i = 0; i < r->count; i++) {
		if (r->seg[i] == seg)
			continue;
		r->seg[j] = r->seg[i];
		r->addr[j++] = r->addr[i];
	}
	r->count = j;
}

static bool rep_has(const struct mrep *r, uint64_t seg)
{
	for (unsigned i = 0; i < r->count; i++)
		if (r->seg[i] == seg)
			return true;
	return false;
}

/* Parse "X id id ..." into @ids; returns the count. */
static size_t parse_ids(const char *p, unsigned *ids)
{
	size_t n = 0;
	char *end;

	for (;;) {
		unsigned long v = strtoul(p, &end, 10);

		if (end == p)
			return n;
		CHECK(v < NKEYS && n < MAX_BATCH);
		ids[n++] = (unsigned)v;
		p = end;
	}
}

static void model_unmount(struct model *m, uint64_t seg, bool acked)
{
	for (unsigned k = 0; k < NKEYS; k++) {
		rep_drop(&m->desc[k], seg);
		if (m->st[k] == M_ABSENT || !rep_has(&m->rep[k], seg))
			continue;
		if (acked) {
			rep_drop(&m->rep[k], seg);
			if (!m->rep[k].count)
				m->st[k] = M_ABSENT;
		} else if (m->st[k] == M_PRESENT && m->rep[k].count > 1 &&
			   !m->optional[k]) {
			m->optional[k] = seg;
		} else {
			m->st[k] = M_MAYBE;
		}
	}
	m->seg[seg] = acked ? M_ABSENT : M_MAYBE;
}

static void model_load(struct model *m, const char *path)
{
	FILE *f = fopen(path, "r");
	char line[MAX_BATCH * 160 + 64], pending[sizeof(line)] = "";
	unsigned ids[MAX_BATCH];
	size_t n;

	memset(m, 0, sizeof(*m));
	if (!f)
		return; /* killed before it opened the file */
	while (fgets(line, sizeof(line), f)) {
		char *p = line + 1;

		if (!strchr(line, '\n'))
			break; /* cut by the kill: not acknowledged */
		switch (line[0]) {
		case 'S': {
			unsigned k, cnt;
			int used;
			struct mrep *d;

			CHECK(sscanf(p, "%u %u%n", &k, &cnt, &used) == 2);
			CHECK(k < NKEYS && cnt && cnt <= KVF_MAX_REPLICAS);
			d = &m->desc[k];
			d->count = cnt;
			p += used;
			for (unsigned r = 0; r < cnt; r++) {
				unsigned long long s, a, z;

				CHECK(sscanf(p, "%llu %llu %llu%n", &s, &a, &z,
					     &used) == 3);
				p += used;
				d->seg[r] = s;
				d->addr[r] = a;
				d->size = z;
			}
			continue;
		}
		case 'e': case 'r': case 'v': case 'm': case 'u':
			strcpy(pending, line);
			continue;
		case 'E':
			n = parse_ids(p, ids);
			for (size_t i = 0; i < n; i++) {
				m->st[ids[i]] = M_PRESENT;
				m->rep[ids[i]] = m->desc[ids[i]];
				m->optional[ids[i]] = 0;
			}
			m->acked_ends += (unsigned)n;
			break;
		case 'R':
			n = parse_ids(p, ids);
			for (size_t i = 0; i < n; i++)
				m->st[ids[i]] = M_ABSENT;
			m->acked_removes += (unsigned)n;
			break;
		case 'V':
			break;
		case 'M':
			m->seg[strtoul(p, NULL, 10)] = M_PRESENT;
			break;
		case 'U':
			model_unmount(m, strtoul(p, NULL, 10), true);
			break;
		default:
			CHECK(!"bad ack line");
		}
		pending[0] = 0;
	}
	fclose(f);
	/* The call in flight: its effects may or may not be durable. */
	switch (pending[0]) {
	case 'e':
		n = parse_ids(pending + 1, ids);
		for (size_t i = 0; i < n; i++) {
			if (!m->desc[ids[i]].count)
				continue; /* dropped before it could end */
			m->st[ids[i]] = M_MAYBE;
			m->rep[ids[i]] = m->desc[ids[i]];
		}
		break;
	case 'r':
		n = parse_ids(pending + 1, ids);
		for (size_t i = 0; i < n; i++)
			if (m->st[ids[i]] != M_ABSENT)
				m->st[ids[i]] = M_MAYBE;
		break;
	case 'm':
		m->seg[strtoul(pending + 1, NULL, 10)] = M_MAYBE;
		break;
	case 'u':
		model_unmount(m, strtoul(pending + 1, NULL, 10), false);
		break;
	}
}

struct span {
	uint64_t seg, addr, size;
};

static int cmp_span(const void *a, const void *b)
{
	const struct span *x = a, *y = b;

	if (x->seg != y->seg)
		return x->seg < y->seg ? -1 : 1;
	return (x->addr > y->addr) - (x->addr < y->addr);
}

/* Is replica (@seg, @addr) one @r allows? */
static bool allowed(const struct mrep *r, uint64_t seg, uint64_t addr)
{
	for (unsigned i = 0; i < r->count; i++)
		if (r->seg[i] == seg && r->addr[i] == addr)
			return true;
	return false;
}

static int fail(const char *what, unsigned k)
{
	fprintf(stderr, "key %u: %s\n", k, what);
	return 1;
}

/* Compare the engine with the model; returns the number of problems. */
static int check_engine(struct kvf_engine *e, const struct model *m,
			const char *path)
{
	static struct span spans[NKEYS * KVF_MAX_REPLICAS];
	struct kvf_engine_stats st;
	struct kvf_segment_info info;
	uint64_t used = 0, found = 0;
	size_t ns = 0;
	int bad = 0;

	CHECK(kvf_engine_get_stats(e, &st) == KVF_OK);
	if (st.processing) {
		fprintf(stderr, "%s: %llu processing after recovery\n", path,
			(unsigned long long)st.processing);
		bad++;
	}
	for (uint64_t s = 1; s < NR_SEGIDS; s++) {
		int q = kvf_segment_query(e, s, &info);

		if ((m->seg[s] == M_PRESENT && q != KVF_OK) ||
		    (m->seg[s] == M_ABSENT && q == KVF_OK)) {
			fprintf(stderr, "%s: segment %llu: %s\n", path,
				(unsigned long long)s, kvf_status_name(q));
			bad++;
		}
	}
	for (unsigned k = 0; k < NKEYS; k++) {
		char buf[KEY_CAP];
		struct kvf_key key = key_of(k, buf);
		struct kvf_replicas r;
		enum kvf_status ist;
		const struct mrep *want = &m->rep[k];
		unsigned extra = 0;

		kvf_batch_get(e, &key, 1, &r, &ist, NULL);
		if (ist != KVF_OK) {
			CHECK(ist == KVF_ERR_OBJECT_NOT_FOUND);
			if (m->st[k] == M_PRESENT)
				bad += fail("acknowledged put lost", k);
			continue;
		}
		found++;
		if (m->st[k] == M_ABSENT) {
			bad += fail(m->desc[k].count ? "removed or unended "
						       "object present" :
						       "unknown object present",
				    k);
			continue;
		}
		for (unsigned i = 0; i < r.count; i++) {
			const struct kvf_replica_desc *d = &r.replica[i];

			if (!allowed(want, d->segment_id, d->addr) ||
			    d->size != want->size)
				bad += fail("replica it was never given", k);
			if (kvf_segment_query(e, d->segment_id, &info) ||
			    d->addr < info.base ||
			    d->addr + d->size > info.base + info.size)
				bad += fail("replica outside a mounted segment",
					    k);
			spans[ns++] = (struct span){ d->segment_id, d->addr,
						     d->size };
			used += d->size;
		}
		for (unsigned i = 0; i < want->count; i++)
			extra += want->seg[i] != m->optional[k];
		if (m->st[k] == M_PRESENT &&
		    !(r.count == want->count || r.count == extra))
			bad += fail("replica lost", k);
	}
	qsort(spans, ns, sizeof(*spans), cmp_span);
	for (size_t i = 1; i < ns; i++) {
		if (spans[i].seg == spans[i - 1].seg &&
		    spans[i - 1].addr + spans[i - 1].size > spans[i].addr) {
			fprintf(stderr, "%s: replicas overlap in segment %llu "
					"at %#llx\n",
				path, (unsigned long long)spans[i].seg,
				(unsigned long long)spans[i].addr);
			bad++;
		}
	}
	if (st.objects != found || st.used_bytes != used) {
		fprintf(stderr, "%s: %llu objects, %llu used bytes; expected "
				"%llu, %llu\n",
			path, (unsigned long long)st.objects,
			(unsigned long long)st.used_bytes,
			(unsigned long long)found, (unsigned long long)used);
		bad++;
	}
	return bad;
}

/* Fold the whole log into the image, with no engine open. */
static void checkpoint(const char *data, int strict)
{
	struct kvf__journal_config jc = {
		.dir = data,
		.durability = strict ? KVF_DURABILITY_STRICT :
				       KVF_DURABILITY_BOUNDED,
	};
	struct kvf__journal *j;

	CHECK(kvf__journal_open(&jc, &j) == KVF_OK);
	CHECK(kvf__journal_checkpoint(j) == KVF_OK);
	kvf__journal_close(j);
}

static int check_main(const char *dir, int strict, int bucket)
{
	static struct model m;
	struct kvf_engine_stats st;
	struct kvf_config cfg;
	struct kvf_engine *e;
	char data[PATH_MAX], acks[PATH_MAX];
	uint64_t removed;
	int bad;

	snprintf(data, sizeof(data), "%s/data", dir);
	snprintf(acks, sizeof(acks), "%s/acks", dir);
	model_load(&m, acks);
	engine_config(&cfg, data, strict, bucket);
	CHECK(kvf_engine_open(&cfg, &e) == KVF_OK);
	bad = check_engine(e, &m, "log");
	kvf_engine_close(e);
	checkpoint(data, strict);
	CHECK(kvf_engine_open(&cfg, &e) == KVF_OK);
	bad += check_engine(e, &m, "image");
	CHECK(kvf_remove_all(e, true, &removed) == KVF_OK);
	CHECK(kvf_engine_get_stats(e, &st) == KVF_OK);
	if (st.objects || st.used_bytes) {
		fprintf(stderr, "after remove_all: %llu objects, %llu bytes\n",
			(unsigned long long)st.objects,
			(unsigned long long)st.used_bytes);
		bad++;
	}
	kvf_engine_close(e);
	printf("  %u puts and %u removals acknowledged, %llu objects "
	       "recovered: %s\n",
	       m.acked_ends, m.acked_removes, (unsigned long long)removed,
	       bad ? "MISMATCH" : "ok");
	return bad ? 1 : 0;
}

/* ---- driver ----------------------------------------------------------- */

/* fork + exec @argv; returns the pid. */
static pid_t spawn(char *const argv[])
{
	pid_t pid;

	fflush(stdout);
	fflush(stderr);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		execv(argv[0], argv);
		_exit(127);
	}
	return pid;
}

static int wait_exit(pid_t pid)
{
	int status;

	CHECK(waitpid(pid, &status, 0) == pid);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

/* tools/kvforge-inspect next to tests/, or NULL if it is not built. */
static const char *find_inspect(const char *self, char *buf, size_t cap)
{
	char exe[PATH_MAX];
	ssize_t n = readlink(self, exe, sizeof(exe) - 1);

	if (n <= 0)
		return NULL;
	exe[n] = 0;
	/* .../tests/stress/test_engine_crash -> .../tools/kvforge-inspect */
	snprintf(buf, cap, "%s/../../tools/kvforge-inspect", dirname(exe));
	return access(buf, X_OK) ? NULL : buf;
}

static int iteration(const char *self, const char *inspect, const char *base,
		     int it, uint64_t seed)
{
	char dir[PATH_MAX], data[PATH_MAX + 8], seedarg[32], modearg[4],
		idxarg[4], cmd[PATH_MAX + 16];
	int strict = it & 1, bucket = (it >> 1) & 1, rc = 0, status;
	unsigned ms = 30 + (unsigned)(mix(seed) % 220);
	struct stat sb;
	pid_t pid;

	snprintf(dir, sizeof(dir), "%s/ecrash-XXXXXX", base);
	CHECK(mkdtemp(dir));
	snprintf(data, sizeof(data), "%s/data", dir);
	snprintf(seedarg, sizeof(seedarg), "%llu", (unsigned long long)seed);
	snprintf(modearg, sizeof(modearg), "%d", strict);
	snprintf(idxarg, sizeof(idxarg), "%d", bucket);
	printf("iteration %d (%s, %s index), kill after %u ms\n", it,
	       strict ? "strict" : "bounded", bucket ? "bucket" : "lfht", ms);
	pid = spawn((char *const[]){ (char *)self, "--child", dir, modearg,
				     idxarg, seedarg, NULL });
	usleep(ms * 1000);
	kill(pid, SIGKILL);
	CHECK(waitpid(pid, &status, 0) == pid);
	if (!WIFSIGNALED(status)) {
		fprintf(stderr, "child failed before the kill\n");
		return 1;
	}
	/* The first ack line follows a successful open: a journal exists. */
	snprintf(cmd, sizeof(cmd), "%s/acks", dir);
	if (inspect && stat(cmd, &sb) == 0 && sb.st_size > 0 &&
	    wait_exit(spawn((char *const[]){ (char *)inspect, "--verify",
					     data, NULL })) != 0) {
		fprintf(stderr, "kvforge-inspect --verify failed on %s\n",
			data);
		rc = 1;
	}
	if (wait_exit(spawn((char *const[]){ (char *)self, "--check", dir,
					     modearg, idxarg, NULL })) != 0)
		rc = 1;
	if (!rc) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		CHECK(system(cmd) == 0);
	} else {
		fprintf(stderr, "left %s for inspection\n", dir);
	}
	return rc;
}

int main(int argc, char **argv)
{
	const char *base = getenv("KVF_TEST_TMPDIR");
	const char *iters = getenv("KVF_STRESS_ITERATIONS");
	const char *self = "/proc/self/exe", *inspect;
	char ibuf[PATH_MAX + 32], exe[PATH_MAX];
	int n = iters ? atoi(iters) : 4, failed = 0;
	ssize_t len;
	uint64_t seed;

	if (argc == 6 && !strcmp(argv[1], "--child"))
		return child_main(argv[2], atoi(argv[3]), atoi(argv[4]),
				  strtoull(argv[5], NULL, 10));
	if (argc == 5 && !strcmp(argv[1], "--check"))
		return check_main(argv[2], atoi(argv[3]), atoi(argv[4]));
	len = readlink(self, exe, sizeof(exe) - 1);
	CHECK(len > 0);
	exe[len] = 0;
	inspect = find_inspect(self, ibuf, sizeof(ibuf));
	seed = (uint64_t)time(NULL) ^ (uint64_t)getpid() << 16;
	if (getenv("KVF_STRESS_SEED"))
		seed = strtoull(getenv("KVF_STRESS_SEED"), NULL, 10);
	printf("seed %llu (KVF_STRESS_SEED), inspect: %s\n",
	       (unsigned long long)seed, inspect ? inspect : "not built");
	for (int it = 0; it < n; it++)
		failed |= iteration(exe, inspect, base ? base : "/tmp", it,
				    seed + (uint64_t)it * 7919);
	return failed;
}
