/* SPDX-License-Identifier: MIT */
/*
 * journal/sidelog.c - the side log file format: two mapped, preallocated
 * files that hold acknowledged batches until the pipeline moves them into
 * the LMDB log (sidelog_flow.c says when and why).
 *
 * Files: DIR/wal-0.log and DIR/wal-1.log, @size bytes each, allocated on
 * disk when created (posix_fallocate: a store into the mapping can never
 * hit a block the file system cannot provide, so no SIGBUS; a full disk
 * is an error at open) and mapped whole. Each starts with a header page
 * (struct file_hdr: the file's own size, the journal id, an epoch
 * new at every open, the boot); recovery takes the geometry from it,
 * never from the configuration. Appends fill one file from
 * KVF__SIDELOG_DATA; the pipeline switches to the other file, and reuses
 * it from its start (kvf__sidelog_reuse()), only once everything in it
 * is in synced LMDB.
 *
 * Frame (host byte order, 8-byte aligned): a 32-byte header, u32 magic
 * "KVFW", u32 payload length, u64 first sequence, u32 records, u32 LMDB
 * frames, u64 check = XXH3-64(header[0..24), seed XXH3-64(payload) ^ the
 * file's key, from the journal id and the epoch, so frames of another
 * journal or of an earlier open never check out); then the payload: the
 * batch's LMDB log frames exactly as record.c encodes them (struct
 * kvf__jbatch), so moving a batch into LMDB copies nothing. A skip frame
 * (no payload, no LMDB frames) stands for sequences committed to LMDB
 * directly. The pipeline writes frames one after another under its
 * mutex, so every frame before an acknowledged one is complete.
 *
 * Reading (recovery before the replay, kvforge-inspect): each file's
 * valid prefix is the frames of its epoch whose check holds and whose
 * sequences are contiguous; a valid frame that does not continue the
 * sequence is left from the file's previous use in the same epoch (older
 * than everything before it, in synced LMDB before the file was reused).
 * The frames after LMDB's last sequence are chained across the two
 * prefixes (kvf__sidelog_chain()) and read, every record decoded, before
 * anything is written (kvf__sidelog_read_chain()), and the end of the
 * chain is judged (check_tail(): a torn tail, or damage in the middle,
 * refused); a skip frame LMDB lacks ends the chain (only an OS crash
 * leaves one). docs/journal.md has the verdicts and their reasons.
 *
 * Writing frames: both modes write a frame with pwritev(); the file's
 * mapping is only read (moves, recovery), so the appending thread never
 * stores through page tables. Stores through the shared mapping cost
 * more than the system call here: a sync (or the kernel's own writeback)
 * of a page mapped writable write-protects it, one TLB flush per page,
 * and the next store into it faults; keeping the pages mapped
 * (populating ahead, unmapping behind) moved that work to other threads
 * and the page-table lock; and even with every page populated, the
 * stores took about five times the pwritev()'s time on the appending
 * thread (perf, docs/journal.md). For STRICT, an fdatasync() after
 * stores through the mapping also took 200-250 us against 90-100 us after
 * pwrite() of the same 12 KB on ext4 here (a second device flush).
 *
 * No threads and no locks here: the caller serialises every call that
 * changes a struct kvf__sidelog; the mappings are fixed between open and
 * close, and reading functions work on their own read-only mappings.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "base/clock.h"
#include "journal/error.h"
#include "journal/sidelog.h"
#include "metadata/hash.h"

#define FRAME_MAGIC 0x5746564bu /* "KVFW" */

/* A skip frame beyond LMDB's end: the chain stops there (not an error). */

struct frame_hdr {
	uint32_t magic;
	uint32_t len;
	uint64_t first_seq;
	uint32_t nr_recs;
	uint32_t nr_frames;
	uint64_t check;
};

_Static_assert(sizeof(struct frame_hdr) == KVF__SIDELOG_HDR, "side log header");

void kvf__sidelog_frame_read(const uint8_t *map, uint64_t off,
			     struct kvf__sidelog_frame *fr)
{
	struct frame_hdr h;

	memcpy(&h, map + off, sizeof(h));
	fr->first_seq = h.first_seq;
	fr->len = h.len;
	fr->nr_recs = h.nr_recs;
	fr->nr_frames = h.nr_frames;
}

static uint64_t hdr_check(const struct frame_hdr *h, uint64_t payload_hash,
			  uint64_t id)
{
	return XXH3_64bits_withSeed(h, offsetof(struct frame_hdr, check),
				    payload_hash ^ id);
}

uint64_t kvf__sidelog_frame_bytes(size_t payload)
{
	return KVF__SIDELOG_HDR + ((payload + 7) & ~(size_t)7);
}

#ifdef HAVE_XXH3_64BITS_DISPATCH
/*
 * libxxhash's XXH3-64 picking AVX2 or AVX-512 at run time (declared here:
 * its header xxh_x86dispatch.h does not mix with XXH_INLINE_ALL). The
 * inlined XXH3 is built for SSE2 only, and a payload of ~11 KB per
 * 128-record batch made it a fifth of the appending thread's time in the
 * journal. The same function, so the same hash: the format is unchanged.
 */
uint64_t XXH3_64bits_dispatch(const void *input, size_t len);
#define payload_hash XXH3_64bits_dispatch
#else
#define payload_hash XXH3_64bits
#endif

uint64_t kvf__sidelog_hash(const struct kvf__jbatch *b)
{
	return payload_hash(b->buf, b->len);
}

/*
 * Write a frame with pwritev(): see "Writing frames" above. Whatever the
 * call did not write (an error, a short write) is stored through the
 * mapping instead, so the frame is in the page cache either way and a
 * failing device is reported by the sync that must cover it.
 */
static void write_frame(struct kvf__sidelog_file *f, const struct frame_hdr *h,
			const struct kvf__jbatch *req)
{
	struct iovec iov[2] = {
		{ .iov_base = (void *)h, .iov_len = sizeof(*h) },
		{ .iov_base = req->buf, .iov_len = req->len },
	};
	size_t total = sizeof(*h) + req->len;
	ssize_t n = pwritev(f->fd, iov, 2, (off_t)f->end);
	size_t done = n > 0 ? (size_t)n : 0;
	uint8_t *p = f->map + f->end;

	if (done >= total)
		return;
	if (done < sizeof(*h)) {
		memcpy(p + done, (const uint8_t *)h + done, sizeof(*h) - done);
		done = sizeof(*h);
	}
	memcpy(p + done, req->buf + (done - sizeof(*h)), total - done);
}

void kvf__sidelog_put(struct kvf__sidelog *sl, int file,
		      const struct kvf__jbatch *req, uint64_t hash,
		      uint64_t first_seq)
{
	struct kvf__sidelog_file *f = &sl->f[file];
	struct frame_hdr h = {
		.magic = FRAME_MAGIC,
		.len = (uint32_t)req->len,
		.first_seq = first_seq,
		.nr_recs = (uint32_t)req->nr_recs,
		.nr_frames = req->nr_frames,
	};

	h.check = hdr_check(&h, hash, f->key);
	write_frame(f, &h, req); /* see "Writing frames" above */
	f->end += kvf__sidelog_frame_bytes(req->len);
	f->hi_seq = first_seq + req->nr_recs - 1;
	f->dirty = 1;
}

void kvf__sidelog_put_skip(struct kvf__sidelog *sl, int file,
			   uint64_t first_seq, uint64_t n)
{
	struct kvf__jbatch empty = { .nr_recs = n };
	static const uint8_t none;

	empty.buf = (uint8_t *)&none;
	kvf__sidelog_put(sl, file, &empty, XXH3_64bits(&none, 0), first_seq);
}

void kvf__sidelog_reuse(struct kvf__sidelog *sl, int file)
{
	sl->f[file].end = KVF__SIDELOG_DATA;
	sl->f[file].hi_seq = 0;
}

/*
 * The frame at @off of a file of @size bytes, if it is complete and its
 * check holds; its header goes to @h. Returns false otherwise.
 */
static bool frame_at(const uint8_t *map, uint64_t size, uint64_t id,
		     uint64_t off, struct frame_hdr *h)
{
	if (size - off < KVF__SIDELOG_HDR)
		return false;
	memcpy(h, map + off, sizeof(*h));
	if (h->magic != FRAME_MAGIC || !h->nr_recs ||
	    !h->nr_frames != !h->len || h->len > size - off - KVF__SIDELOG_HDR)
		return false;
	return hdr_check(h, payload_hash(map + off + KVF__SIDELOG_HDR, h->len),
			 id) == h->check;
}

/*
 * Call @fn for each frame in [@from, @to) of a mapped file (frames known
 * valid); a non-zero return stops the walk and is returned.
 */
int kvf__sidelog_walk(const uint8_t *map, uint64_t from, uint64_t to,
		      kvf__sidelog_frame_fn fn, void *arg)
{
	uint64_t off = from;

	while (off < to) {
		struct kvf__sidelog_frame fr;
		int rc;

		kvf__sidelog_frame_read(map, off, &fr);
		rc = fn(arg, &fr, map + off + KVF__SIDELOG_HDR);
		if (rc)
			return rc;
		off += kvf__sidelog_frame_bytes(fr.len);
	}
	return 0;
}

static uint64_t prefix(const uint8_t *map, uint64_t base, uint64_t size,
			 uint64_t key, uint64_t *first, uint64_t *last)
{
	uint64_t off = base, next = 0;
	struct frame_hdr h;

	*first = *last = 0;
	while (frame_at(map, size, key, off, &h) &&
	       (!next || h.first_seq == next)) {
		if (!next)
			*first = h.first_seq;
		next = h.first_seq + h.nr_recs;
		*last = next - 1;
		off += kvf__sidelog_frame_bytes(h.len);
	}
	return off;
}

/* --- Side log files: the header, the geometry. --- */

/*
 * File header. The first KVF__SIDELOG_DATA bytes of a file hold two header
 * slots; the valid one with the higher @gen is the header (a header
 * rewritten at open goes to the other slot, so a torn write leaves the
 * previous one). The geometry comes from here, never from the caller's
 * configuration: @size is fixed when the file is created (a file of
 * another size is refused: it was extended or truncated); a new size is
 * a new file (prepare_file()). @epoch is new at every open and keys the
 * check of every frame written until the next open, so frames of an
 * earlier open can never chain to, or be mistaken for, current ones.
 * @boot identifies the kernel boot of that open: recovery in the same
 * boot knows the page cache kept every store (see check_tail()).
 */
#define FILE_MAGIC 0x4b56465753494431ull /* "KVFWSID1" */
#define FILE_VERSION 1u
#define SLOT_STRIDE 512u

struct file_hdr {
	uint64_t magic;
	uint32_t version;
	uint32_t index;      /* 0: wal-0.log, 1: wal-1.log */
	uint64_t size;       /* bytes of the file */
	uint64_t journal_id; /* the LMDB file's (struct kvf__store_state) */
	uint64_t epoch;
	uint64_t boot;
	uint64_t gen;
	uint64_t check;      /* XXH3-64 of the fields above */
};

_Static_assert(sizeof(struct file_hdr) == 64, "side log file header");
_Static_assert(2 * SLOT_STRIDE <= KVF__SIDELOG_DATA, "header slots");

static uint64_t file_hdr_check(const struct file_hdr *h)
{
	return XXH3_64bits(h, offsetof(struct file_hdr, check));
}

/* The check key of the frames of an epoch (0: legacy files, no header). */
static uint64_t frame_key(uint64_t id, uint64_t epoch)
{
	return epoch ? XXH3_64bits_withSeed(&epoch, sizeof(epoch), id) : id;
}

/* A hash of the kernel's boot id; 0 if unknown. */
uint64_t kvf__sidelog_boot(void)
{
	char buf[64];
	ssize_t n = -1;
	int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);

	if (fd >= 0) {
		n = read(fd, buf, sizeof(buf));
		close(fd);
	}
	return n > 0 ? XXH3_64bits(buf, (size_t)n) | 1 : 0;
}

static void file_path(char *buf, size_t len, const char *dir, int i,
		     const char *suffix)
{
	snprintf(buf, len, "%s/wal-%d.log%s", dir, i, suffix);
}


/* Read and check the header of file @i (open at @fd, @st_size bytes). */
static int read_hdr(int fd, int i, uint64_t id, uint64_t st_size,
		    struct kvf__sidelog_src *s)
{
	uint8_t page[2 * SLOT_STRIDE];
	struct file_hdr h, cand, *best = NULL;

	if (st_size < KVF__SIDELOG_DATA) {
		kvf__jerr("wal-%d.log: %llu bytes, too short for a side log "
			  "file", i, (unsigned long long)st_size);
		return KVF_ERR_JOURNAL_CORRUPT;
	}
	if (pread(fd, page, sizeof(page), 0) != (ssize_t)sizeof(page))
		return errno ? errno : EIO;
	for (int k = 0; k < 2; k++) {
		memcpy(&h, page + k * SLOT_STRIDE, sizeof(h));
		if (h.magic != FILE_MAGIC || file_hdr_check(&h) != h.check)
			continue;
		if (!best || h.gen > best->gen) {
			cand = h;
			best = &cand;
		}
	}
	if (!best) {
		kvf__jerr("wal-%d.log: no valid header (damaged, or written "
			  "by a format before side log headers)", i);
		return KVF_ERR_JOURNAL_CORRUPT;
	}
	if (best->version != FILE_VERSION) {
		kvf__jerr("wal-%d.log: header version %u, this build reads %u",
			  i, best->version, FILE_VERSION);
		return KVF_ERR_JOURNAL_VERSION;
	}
	if (best->journal_id != id || best->index != (uint32_t)i) {
		kvf__jerr("wal-%d.log: belongs to another journal or file "
			  "(id %016llx, index %u)", i,
			  (unsigned long long)best->journal_id, best->index);
		return KVF_ERR_JOURNAL_CORRUPT;
	}
	if (best->size != st_size) {
		kvf__jerr("wal-%d.log: %llu bytes, its header says %llu "
			  "(extended or truncated)", i,
			  (unsigned long long)st_size,
			  (unsigned long long)best->size);
		return KVF_ERR_JOURNAL_CORRUPT;
	}
	s->has_hdr = true;
	s->gen = best->gen;
	s->boot = best->boot;
	s->size = st_size;
	s->base = KVF__SIDELOG_DATA;
	s->key = frame_key(id, best->epoch);
	return 0;
}

/*
 * Open DIR/wal-@i.log for reading; a missing file leaves @s->present
 * false. @legacy: a format version 2 journal, whose files have no header
 * (frames from offset 0, keyed by the journal id alone). Returns 0, an
 * errno value or a kvf_status (kvf__jerr() says which file and why).
 */
static int src_open(const char *dir, int i, uint64_t id, bool legacy,
		    struct kvf__sidelog_src *s)
{
	char path[4096];
	struct stat sb;
	int fd, rc = 0;

	memset(s, 0, sizeof(*s));
	file_path(path, sizeof(path), dir, i, "");
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : errno;
	s->present = true;
	if (fstat(fd, &sb))
		rc = errno;
	else if (legacy)
		s->size = (uint64_t)sb.st_size & ~(uint64_t)4095;
	else
		rc = read_hdr(fd, i, id, (uint64_t)sb.st_size, s);
	if (legacy)
		s->key = frame_key(id, 0);
	if (!rc && s->size) {
		s->map = mmap(NULL, s->size, PROT_READ, MAP_SHARED, fd, 0);
		if (s->map == MAP_FAILED) {
			s->map = NULL;
			rc = errno;
		}
	}
	close(fd);
	return rc;
}

void kvf__sidelog_srcs_close(struct kvf__sidelog_src s[2])
{
	for (int i = 0; i < 2; i++) {
		if (s[i].map)
			munmap(s[i].map, s[i].size);
		s[i].map = NULL;
	}
}

/*
 * Open both files for reading. Missing files are refused once the
 * journal has recorded that it created both (@created: the meta key,
 * journal.c); before, the first open was interrupted while creating them,
 * before any append, so whatever exists is read and the rest created. A
 * version 2 directory (@legacy) always had both.
 */
int kvf__sidelog_srcs_open(const char *dir, uint64_t id, bool legacy,
			   bool created, struct kvf__sidelog_src s[2])
{
	int rc = 0;

	memset(s, 0, 2 * sizeof(*s));
	for (int i = 0; i < 2 && !rc; i++)
		rc = src_open(dir, i, id, legacy, &s[i]);
	if (!rc && (created || legacy) && s[0].present != s[1].present) {
		kvf__jerr("wal-%d.log is missing", s[0].present ? 1 : 0);
		rc = KVF_ERR_JOURNAL_CORRUPT;
	} else if (!rc && !s[0].present && created) {
		kvf__jerr("wal-0.log and wal-1.log are missing");
		rc = KVF_ERR_JOURNAL_CORRUPT;
	}
	if (rc)
		kvf__sidelog_srcs_close(s);
	return rc;
}

/*
 * Make @fd's first @size bytes allocated and written on disk. Not just
 * posix_fallocate(): on ext4 that leaves unwritten extents, and the first
 * write into each then has to convert it, a journal commit, with its own
 * cache flush, inside the next fdatasync(): STRICT appends paid two
 * flushes per sync on the first pass through a file. Zeros are written
 * once (they are never a valid frame). The fallocate first makes a full
 * disk fail here, cleanly, not halfway. Only for a new file.
 */
static int fill_file(int fd, uint64_t size)
{
	static const uint8_t zeros[1 << 16];
	int rc = posix_fallocate(fd, 0, (off_t)size);

	for (uint64_t off = 0; !rc && off < size; off += sizeof(zeros)) {
		size_t n = size - off < sizeof(zeros) ? size - off :
							 sizeof(zeros);

		if (pwrite(fd, zeros, n, (off_t)off) != (ssize_t)n)
			rc = errno ? errno : EIO;
	}
	return rc;
}

static int write_hdr(int fd, const struct file_hdr *h)
{
	off_t at = (off_t)(h->gen % 2) * SLOT_STRIDE;

	if (pwrite(fd, h, sizeof(*h), at) != (ssize_t)sizeof(*h))
		return errno ? errno : EIO;
	return fdatasync(fd) ? errno : 0;
}

int kvf__sidelog_sync_dir(const char *dir)
{
	int rc = 0, fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return errno;
	if (fsync(fd))
		rc = errno;
	close(fd);
	return rc;
}

/*
 * Make file @i ready for appends, everything in it being in synced LMDB:
 * a header for a new epoch, in place if the file already has the
 * configured size and a header; otherwise a new file of the configured
 * size (written aside and renamed over the old one, so a crash leaves
 * either file whole). The file stays open in f[@i].
 */
static int prepare_file(struct kvf__sidelog *sl, const char *dir, uint64_t id,
			int i, const struct kvf__sidelog_src *s,
			uint64_t epoch, uint64_t boot)
{
	struct kvf__sidelog_file *f = &sl->f[i];
	struct file_hdr h = {
		.magic = FILE_MAGIC,
		.version = FILE_VERSION,
		.index = (uint32_t)i,
		.size = sl->size,
		.journal_id = id,
		.epoch = epoch,
		.boot = boot,
		.gen = s->has_hdr ? s->gen + 1 : 0,
	};
	char path[4096], tmp[4096];
	int rc;

	h.check = file_hdr_check(&h);
	f->key = frame_key(id, epoch);
	file_path(path, sizeof(path), dir, i, "");
	if (s->has_hdr && s->size == sl->size) {
		f->fd = open(path, O_RDWR | O_CLOEXEC);
		return f->fd < 0 ? errno : write_hdr(f->fd, &h);
	}
	file_path(tmp, sizeof(tmp), dir, i, ".tmp");
	f->fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (f->fd < 0)
		return errno;
	rc = fill_file(f->fd, sl->size);
	if (!rc)
		rc = write_hdr(f->fd, &h);
	if (!rc && rename(tmp, path))
		rc = errno;
	if (!rc)
		rc = kvf__sidelog_sync_dir(dir);
	if (rc)
		unlink(tmp);
	return rc;
}

static int map_file(struct kvf__sidelog *sl, int i)
{
	struct kvf__sidelog_file *f = &sl->f[i];

	f->map = mmap(NULL, sl->size, PROT_READ | PROT_WRITE, MAP_SHARED,
		      f->fd, 0);
	if (f->map == MAP_FAILED) {
		f->map = NULL;
		return errno;
	}
	return 0;
}

/* --- Recovery: reading the chain. --- */

/* Skip the frames of @p at or below @seq; false if one straddles it. */
static bool skip_to(struct kvf__sidelog_part *p, uint64_t seq)
{
	struct frame_hdr h;

	while (p->from < p->to) {
		memcpy(&h, p->map + p->from, sizeof(h));
		if (h.first_seq > seq)
			return h.first_seq == seq + 1;
		if (h.first_seq + h.nr_recs - 1 > seq)
			return false;
		p->from += kvf__sidelog_frame_bytes(h.len);
		p->first = h.first_seq + h.nr_recs;
	}
	return true;
}

static void part_init(struct kvf__sidelog_part *p,
		      const struct kvf__sidelog_src *s, int i)
{
	p->map = s->map;
	p->file = i;
	p->from = p->to = s->base;
	p->first = p->last = 0;
	if (s->map)
		p->to = prefix(s->map, s->base, s->size, s->key,
					&p->first, &p->last);
}

void kvf__sidelog_parts_init(struct kvf__sidelog_part p[2],
			     const struct kvf__sidelog_src s[2])
{
	for (int i = 0; i < 2; i++)
		part_init(&p[i], &s[i], i);
}

/* A gap ends the chain. */
int kvf__sidelog_chain(struct kvf__sidelog_part p[2], uint64_t seq,
		       int (*fn)(void *arg, struct kvf__sidelog_part *part),
		       void *arg)
{
	for (int pass = 0; pass < 2; pass++) {
		for (int i = 0; i < 2; i++) {
			int rc;

			if (p[i].from == p[i].to || p[i].last <= seq ||
			    p[i].first > seq + 1)
				continue;
			if (!skip_to(&p[i], seq)) {
				kvf__jerr("wal-%d.log: a frame straddles "
					  "sequence %llu, the end of the LMDB "
					  "log", p[i].file,
					  (unsigned long long)seq);
				return KVF_ERR_JOURNAL_CORRUPT;
			}
			rc = fn(arg, &p[i]);
			if (rc)
				return rc;
			seq = p[i].last;
		}
	}
	return 0;
}

/* Reading the chain's records (a dry run before recovery; inspect). */
struct scan {
	int (*fn)(void *arg, const struct kvf__jrec *rec, uint64_t seq);
	void *arg;
	uint64_t seq, records;
	const struct kvf__sidelog_part *part;
	uint64_t off; /* of the frame being read */
};

static int scan_rec(void *arg, const struct kvf__jrec *rec, uint32_t idx)
{
	struct scan *sc = arg;

	(void)idx;
	sc->records++;
	return sc->fn ? sc->fn(sc->arg, rec, ++sc->seq) : (++sc->seq, 0);
}

static int scan_frame(void *arg, const struct kvf__sidelog_frame *fr,
		      const uint8_t *payload)
{
	struct scan *sc = arg;
	uint64_t seq = sc->seq, first_seq = fr->first_seq;
	int rc;

	if (!fr->nr_frames)
		return KVF__SIDELOG_GAP; /* LMDB lacks a direct batch: the
					  * chain ends */
	rc = first_seq == seq + 1 ?
		     kvf__frames_decode(payload, fr->len, fr->nr_recs,
					fr->nr_frames, scan_rec, sc) :
		     KVF_ERR_JOURNAL_CORRUPT;
	if (rc == KVF_ERR_JOURNAL_CORRUPT)
		kvf__jerr("wal-%d.log: the frame at offset %llu (sequence "
			  "%llu) checks out but does not decode",
			  sc->part->file,
			  (unsigned long long)(payload - KVF__SIDELOG_HDR -
					       sc->part->map),
			  (unsigned long long)first_seq);
	return rc;
}

static int scan_part(void *arg, struct kvf__sidelog_part *part)
{
	struct scan *sc = arg;

	sc->part = part;
	return kvf__sidelog_walk(part->map, part->from, part->to, scan_frame,
				 sc);
}

/*
 * The first frame of @s's epoch with a sequence beyond @seq, at *@off;
 * false if there is none.
 */
static bool later_frame(const struct kvf__sidelog_src *s, uint64_t seq,
			uint64_t *off, uint64_t *first)
{
	struct frame_hdr h;

	for (uint64_t o = s->base; s->map && o + KVF__SIDELOG_HDR <= s->size;
	     o += 8) {
		uint32_t magic;

		memcpy(&magic, s->map + o, sizeof(magic));
		if (magic != FRAME_MAGIC)
			continue;
		memcpy(&h, s->map + o, sizeof(h));
		/* the range first: only a later frame is worth its hash */
		if (h.first_seq + h.nr_recs - 1 > seq &&
		    frame_at(s->map, s->size, s->key, o, &h)) {
			*off = o;
			*first = h.first_seq;
			return true;
		}
	}
	return false;
}

/*
 * Whether the frame at the end of @p's valid prefix would continue the
 * chain after @seq but fails its check while the header after it
 * continues its sequences (its offset to *@off). Frames are written one
 * after another, so the next header exists only once this frame was
 * complete: it was damaged since, not torn. The next frame may itself be
 * torn (the crash came while it was being copied), so only its header is
 * read; a header left from an earlier use of the file carries an older
 * sequence and cannot continue this one.
 */
static bool damaged_before_next(const struct kvf__sidelog_src *s,
				const struct kvf__sidelog_part *p,
				uint64_t seq, uint64_t *off)
{
	struct frame_hdr h, next;
	uint64_t o = p->to, n;

	if (!s->map || o + KVF__SIDELOG_HDR > s->size)
		return false;
	memcpy(&h, s->map + o, sizeof(h));
	if (h.magic != FRAME_MAGIC || h.first_seq != seq + 1 || !h.nr_recs ||
	    h.len > s->size - o - KVF__SIDELOG_HDR ||
	    frame_at(s->map, s->size, s->key, o, &h))
		return false;
	n = o + kvf__sidelog_frame_bytes(h.len);
	if (n + KVF__SIDELOG_HDR > s->size)
		return false;
	memcpy(&next, s->map + n, sizeof(next));
	if (next.magic != FRAME_MAGIC ||
	    next.first_seq != h.first_seq + h.nr_recs)
		return false;
	*off = o;
	return true;
}

/*
 * Whether @s was written in this boot (@boot: 0 when the end cannot be
 * judged), where the page cache kept every store: only then does what
 * follows the chain's end say anything (check_tail()).
 */
static bool same_boot(const struct kvf__sidelog_src *s, uint64_t boot)
{
	return s->has_hdr && boot && s->boot == boot;
}

/*
 * The verdict on where the chain ended (@seq): a torn tail or damage. A
 * process crash cannot tear an acknowledged frame, and every frame after
 * a torn one was written later, hence not acknowledged either; so after
 * the end of the chain nothing of the epoch may follow, and a frame that
 * fails its check must be the last one written. If a frame with a later
 * sequence checks out anyway, or the failing frame has a successor
 * (damaged_before_next()), a frame was damaged (or its file replaced),
 * and the journal is refused with that frame named:
 * unless the files were written in an earlier boot, when an OS crash may
 * have lost pages written after the last sync in any order (the loss
 * window of docs/journal.md); legacy files carry no boot and are read as
 * before.
 */
static int check_tail(const struct kvf__sidelog_src s[2],
		      const struct kvf__sidelog_part p[2], uint64_t seq,
		      uint64_t boot)
{
	uint64_t off, first;

	for (int i = 0; i < 2; i++) {
		if (!same_boot(&s[i], boot) ||
		    !later_frame(&s[i], seq, &off, &first))
			continue;
		kvf__jerr("wal-%d.log: the frame at offset %llu (sequences "
			  "from %llu) follows a damaged or missing frame after "
			  "sequence %llu (valid frames end at offset %llu of "
			  "wal-0.log, %llu of wal-1.log)", i,
			  (unsigned long long)off, (unsigned long long)first,
			  (unsigned long long)seq, (unsigned long long)p[0].to,
			  (unsigned long long)p[1].to);
		return KVF_ERR_JOURNAL_CORRUPT;
	}
	for (int i = 0; i < 2; i++) {
		if (!same_boot(&s[i], boot) ||
		    !damaged_before_next(&s[i], &p[i], seq, &off))
			continue;
		kvf__jerr("wal-%d.log: the frame at offset %llu (sequences "
			  "from %llu) is damaged: it does not check out, yet "
			  "the frame after it was written (valid frames end "
			  "at offset %llu of wal-0.log, %llu of wal-1.log)",
			  i, (unsigned long long)off,
			  (unsigned long long)seq + 1,
			  (unsigned long long)p[0].to,
			  (unsigned long long)p[1].to);
		return KVF_ERR_JOURNAL_CORRUPT;
	}
	return 0;
}

int kvf__sidelog_read_chain(const struct kvf__sidelog_src s[2],
			    const struct kvf__sidelog_part parts[2],
			    uint64_t last_seq, uint64_t boot,
			    int (*fn)(void *arg, const struct kvf__jrec *rec,
				      uint64_t seq),
			    void *arg, uint64_t *records, uint64_t *end)
{
	struct scan sc = { .fn = fn, .arg = arg, .seq = last_seq };
	struct kvf__sidelog_part p[2] = { parts[0], parts[1] };
	int rc;

	rc = kvf__sidelog_chain(p, last_seq, scan_part, &sc);
	if (rc == KVF__SIDELOG_GAP)
		rc = 0;
	if (!rc)
		rc = check_tail(s, p, sc.seq, boot);
	*records = sc.records;
	*end = sc.seq;
	return rc;
}

/* --- Reading without opening (kvforge-inspect). --- */

/*
 * Whether an engine has DIR open (holds kvforge.lock): its appends may
 * land after the chain was read, so check_tail() cannot judge the end
 * (kvf__sidelog_read_chain() is given no boot). The probe takes a shared lock
 * for an instant.
 */
static bool live(const char *dir)
{
	char path[4096];
	bool held = false;
	int fd;

	snprintf(path, sizeof(path), "%s/kvforge.lock", dir);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	if (flock(fd, LOCK_SH | LOCK_NB))
		held = errno == EWOULDBLOCK;
	close(fd);
	return held;
}

int kvf__sidelog_scan(const char *dir, uint64_t id, bool legacy, bool created,
		      uint64_t last_seq,
		      int (*fn)(void *arg, const struct kvf__jrec *rec,
				uint64_t seq),
		      void *arg, uint64_t *records)
{
	struct kvf__sidelog_part p[2];
	struct kvf__sidelog_src s[2];
	uint64_t end;
	int rc;

	*records = 0;
	rc = kvf__sidelog_srcs_open(dir, id, legacy, created, s);
	if (rc)
		return kvf__journal_status(rc);
	kvf__sidelog_parts_init(p, s);
	rc = kvf__sidelog_read_chain(s, p, last_seq,
				     live(dir) ? 0 : kvf__sidelog_boot(), fn,
				     arg, records, &end);
	kvf__sidelog_srcs_close(s);
	return rc;
}

bool kvf__sidelog_exists(const char *dir)
{
	char path[4096];
	struct stat sb;

	for (int i = 0; i < 2; i++) {
		file_path(path, sizeof(path), dir, i, "");
		if (!stat(path, &sb))
			return true;
	}
	return false;
}

/* --- The files for appends. --- */

/* A new epoch: random, never 0 (0 marks legacy files). */
static uint64_t new_epoch(void)
{
	uint64_t epoch = 0;

	while (!epoch)
		if (getrandom(&epoch, sizeof(epoch), 0) != sizeof(epoch))
			epoch = kvf__now_ns() ^ (uint64_t)getpid() << 40;
	return epoch;
}

int kvf__sidelog_open(struct kvf__sidelog *sl, const char *dir, uint64_t id,
		      const struct kvf__sidelog_src s[2], uint64_t boot)
{
	uint64_t epoch = new_epoch();
	int rc = 0;

	for (int i = 0; i < 2 && !rc; i++)
		rc = prepare_file(sl, dir, id, i, &s[i], epoch, boot);
	for (int i = 0; i < 2 && !rc; i++)
		rc = map_file(sl, i);
	for (int i = 0; i < 2; i++) {
		sl->f[i].end = KVF__SIDELOG_DATA;
		sl->f[i].hi_seq = 0;
		sl->f[i].dirty = 0;
	}
	return rc;
}

void kvf__sidelog_close(struct kvf__sidelog *sl)
{
	for (int i = 0; i < 2; i++) {
		if (sl->f[i].map)
			munmap(sl->f[i].map, sl->size);
		if (sl->f[i].fd >= 0)
			close(sl->f[i].fd);
		sl->f[i].map = NULL;
		sl->f[i].fd = -1;
	}
}

int kvf__sidelog_sync_file(struct kvf__sidelog *sl, int file)
{
	return fdatasync(sl->f[file].fd) ? errno : 0;
}

