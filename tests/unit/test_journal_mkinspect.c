/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_journal_mkinspect.c - writes journals for
 * tests/unit/test_inspect.sh: "good" (consistent, with an image and a
 * tail) or an inconsistent one: "unmounted" (a replica in a segment that
 * is not mounted), "overlap" (two replicas overlapping in one segment),
 * "outside" (a replica past the end of its segment).
 *
 * usage: test_journal_mkinspect DIR good|unmounted|overlap|outside
 */
#include "config.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "journal/journal.h"
#include "journal/record.h"
#include "journal/sidelog.h"
#include "journal/store.h"
#include "tests/unit/test_journal_model.h"

static struct jgen g;

static struct kvf__jrec put(const char *key, uint64_t seg, uint64_t off)
{
	struct kvf__jrec r = { .type = KVF__JREC_OBJECT_PUT };

	r.obj.key = key;
	r.obj.key_len = (uint32_t)strlen(key);
	r.obj.size = 1 << 20;
	r.obj.nr_replicas = 1;
	r.obj.replicas[0].segment_id = seg;
	r.obj.replicas[0].offset = off;
	return r;
}

/* Flip a payload byte of the frame of DIR/wal-0.log starting at @seq. */
static bool flip_frame(const char *dir, uint64_t seq)
{
	uint8_t h[KVF__SIDELOG_HDR], byte;
	uint64_t off = KVF__SIDELOG_DATA, first;
	uint32_t len;
	bool done = false;
	char path[4096];
	int fd;

	snprintf(path, sizeof(path), "%s/wal-0.log", dir);
	fd = open(path, O_RDWR);
	while (fd >= 0 && !done &&
	       pread(fd, h, sizeof(h), (off_t)off) == (ssize_t)sizeof(h)) {
		memcpy(&len, h + 4, 4);
		memcpy(&first, h + 8, 8);
		if (first == seq &&
		    pread(fd, &byte, 1, (off_t)off + KVF__SIDELOG_HDR + 9) == 1) {
			byte ^= 0x5a;
			done = pwrite(fd, &byte, 1,
				      (off_t)off + KVF__SIDELOG_HDR + 9) == 1;
		}
		if (!len && !first)
			break;
		off += KVF__SIDELOG_HDR + ((len + 7) & ~7u);
	}
	if (fd >= 0)
		close(fd);
	return done;
}

int main(int argc, char **argv)
{
	struct kvf__journal_config cfg = { .durability = KVF_DURABILITY_BOUNDED };
	struct kvf__journal *j;
	struct kvf__jrec bad[2];
	size_t nbad = 1;
	uint64_t sid = 1;
	int rc = 0, b;

	if (argc != 3)
		return 2;
#ifndef KVF_FAULT_INJECTION
	/* Holding batches in the side log needs a failing LMDB move. */
	if (!strcmp(argv[2], "damaged"))
		return 77;
#endif
	cfg.dir = argv[1];
	if (kvf__journal_open(&cfg, &j))
		return 2;
	jgen_init(&g, 42);
	for (b = 0; b < 30 && !rc; b++) {
		size_t n = jgen_batch(&g, 100, 1);

		rc = kvf__journal_append(j, g.recs, n);
		if (b == 20 && !rc)
			rc = kvf__journal_checkpoint(j);
	}
	while (sid < JM_SEGS && !g.m.s[sid].live)
		sid++;
	if (!strcmp(argv[2], "unmounted")) {
		bad[0] = put("bad-unmounted", JM_SEGS + 5, 0);
	} else if (!strcmp(argv[2], "overlap")) {
		/* past every replica the generator placed, overlapping */
		bad[0] = put("bad-overlap", sid, g.m.s[sid].bump);
		bad[1] = put("bad-overlap2", sid, g.m.s[sid].bump + 4096);
		nbad = 2;
	} else if (!strcmp(argv[2], "outside")) {
		bad[0] = put("bad-outside", sid, (1ull << 40) - 4096);
	} else {
		nbad = 0;
	}
	if (!rc && nbad)
		rc = kvf__journal_append(j, bad, nbad);
	if (!rc && !strcmp(argv[2], "damaged")) {
		/* Five batches held in the side log (every move fails),
		 * then a byte of the first of them flipped: damage in the
		 * middle of what recovery must move. */
		struct kvf__journal_stats st;

		kvf__journal_get_stats(j, &st);
		kvf__journal_inject_fault(j, MDB_BAD_TXN, UINT32_MAX);
		for (b = 0; b < 5 && !rc; b++) {
			size_t n = jgen_batch(&g, 100, 1);

			rc = kvf__journal_append(j, g.recs, n);
		}
		if (!rc && flip_frame(argv[1], st.last_seq + 1))
			_exit(0);
		return 1;
	}
	if (!rc && !strcmp(argv[2], "crashed")) {
		/* Acknowledged batches, likely still only in the side log:
		 * no close, no move. Print how many records exist. */
		for (b = 0; b < 5 && !rc; b++) {
			size_t n = jgen_batch(&g, 100, 1);

			rc = kvf__journal_append(j, g.recs, n);
		}
		if (!rc) {
			struct kvf__journal_stats st;

			kvf__journal_get_stats(j, &st);
			printf("%llu\n", (unsigned long long)st.last_seq);
			fflush(stdout);
			_exit(0);
		}
	}
	kvf__journal_close(j);
	return rc ? 1 : 0;
}
