/* SPDX-License-Identifier: MIT */
/*
 * journal/wal.c - the side log: acknowledge after a memcpy (BOUNDED) or
 * after a pwritev() and a group fdatasync (STRICT).
 *
 * Why: an LMDB commit writes ~7 pages through 5-8 system calls even with
 * MDB_NOSYNC; for a 128-record batch that was ~14 µs of the caller's CPU,
 * half again the in-memory put path. A process crash only needs the
 * acknowledged bytes in the page cache, and stores into a MAP_SHARED
 * mapping of a file are in the page cache the moment they are made. So in
 * the journal an append copies its encoded batch into a mapped,
 * preallocated side log file and returns; the writer thread later moves
 * the same frames into the LMDB log, many batches per transaction
 * (kvf__wal_move()), off the caller's path. STRICT appends also sync the
 * side log before they return (kvf__wal_strict_sync(): group sync).
 *
 * Files: DIR/wal-0.log and DIR/wal-1.log, @size bytes each, allocated on
 * disk when created (posix_fallocate: a store into the mapping can never
 * hit a block the file system cannot provide, so no SIGBUS; a full disk
 * is an error at open) and mapped whole. Each starts with a header page
 * (struct wal_file_hdr: the file's own size, the journal id, an epoch
 * new at every open, the boot); recovery takes the geometry from it,
 * never from the configuration. Appends fill one file from KVF__WAL_DATA;
 * when the next frame does not fit, they switch to the other file, which
 * is allowed only once every frame in it is in LMDB and LMDB has been
 * synced since (@hi_seq <= @durable_seq): a reused file may then be
 * overwritten freely. A frame larger than half a file bypasses the side
 * log (writer.c: direct appends).
 *
 * Frame (host byte order, 8-byte aligned): a 32-byte header, u32 magic
 * "KVFW", u32 payload length, u64 first sequence, u32 records, u32 LMDB
 * frames, u64 check = XXH3-64(header[0..24), seed XXH3-64(payload) ^ the
 * file's key, from the journal id and the epoch, so frames of another
 * journal or of an earlier open never check out); then
 * the payload: the batch's LMDB log frames exactly as writer.c encodes
 * them (u32 length, value), so moving a batch into LMDB copies nothing.
 * Frames are written under the journal mutex, one after another, so every
 * frame before an acknowledged one is complete.
 *
 * Recovery (kvf__wal_open, before the replay): each file's valid prefix is
 * the frames of its epoch whose check holds and whose sequences are
 * contiguous; a valid frame that does not continue the sequence is left
 * from the file's previous use in the same epoch (older than everything
 * before it, in synced LMDB before the file was reused). The frames after
 * LMDB's last sequence are chained across the two prefixes and read
 * (every record decoded) before anything is written; the end of the
 * chain is judged (check_tail(): a torn tail, or damage in the middle,
 * refused); then they are put into the LMDB log and synced; a skip frame
 * LMDB lacks ends the chain (only an OS crash leaves one). Then each file
 * gets a header for a new epoch (prepare_file()), and appends start again
 * at wal-0.log. A crash anywhere in this is harmless: frames already in
 * LMDB are skipped. docs/journal.md has the verdicts and their reasons.
 *
 * Writing frames: BOUNDED copies a frame into the mapping (no system
 * call on the caller's path). STRICT writes it with pwritev() instead:
 * on ext4 here an fdatasync() after stores through a shared mapping took
 * 200-250 us and after pwrite() of the same 12 KB 90-100 us (pages
 * dirtied through page tables cost the sync a second device flush), and
 * STRICT pays a sync per batch. For BOUNDED, whose syncs are off the
 * caller's path, pwritev() measured the same put throughput as the
 * stores, four interleaved runs each. Both land in the same page cache,
 * so moves and recovery read frames through the mapping either way.
 *
 * Page tables (see docs/journal.md): writing back a dirty page that is
 * mapped writable write-protects it, one TLB flush (an IPI to the
 * appending CPU) per page, and the next store faults. So before each
 * periodic sync the syncer unmaps what appends will not touch again
 * (kvf__wal_zap(): pages stay in the page cache, dirty), and the writer
 * thread keeps a window ahead of the append position populated writable
 * (kvf__wal_prefault()).
 *
 * Locking: the state in struct kvf__jwal is under the journal's @mu; the
 * mappings are fixed between open and close.
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
#include <time.h>
#include <unistd.h>

#include "journal/jint.h"
#include "metadata/hash.h"

#define WAL_MAGIC 0x5746564bu /* "KVFW" */

/* A skip frame beyond LMDB's end: the chain stops there (not an error). */
#define WAL_GAP 1
/* Recovery commits moved frames every this many payload bytes. */
#define WAL_RECOVER_TXN (16u << 20)

struct wal_hdr {
	uint32_t magic;
	uint32_t len;
	uint64_t first_seq;
	uint32_t nr_recs;
	uint32_t nr_frames;
	uint64_t check;
};

_Static_assert(sizeof(struct wal_hdr) == KVF__WAL_HDR, "side log header");

static uint64_t hdr_check(const struct wal_hdr *h, uint64_t payload_hash,
			  uint64_t id)
{
	return XXH3_64bits_withSeed(h, offsetof(struct wal_hdr, check),
				    payload_hash ^ id);
}

uint64_t kvf__wal_frame_bytes(size_t payload)
{
	return KVF__WAL_HDR + ((payload + 7) & ~(size_t)7);
}

uint64_t kvf__wal_payload_hash(const struct kvf__jreq *req)
{
	return XXH3_64bits(req->buf, req->len);
}

/*
 * Copy a frame's payload into the mapping with non-temporal stores where
 * the CPU has them: nobody on this core reads it again (the writer thread
 * moves it, milliseconds later, on another one), and 12 KB of side log
 * per 128-record batch pushed the put path's own data out of the caches
 * (perf: allocator, index and arena functions ~25 ns per key slower with
 * the journal on). @dst is 8-byte aligned (frames are). The stores are
 * fenced before the caller publishes the frame.
 */
static void copy_stream(uint8_t *dst, const uint8_t *src, size_t len)
{
#if defined(__x86_64__) && !defined(KVF_NO_STREAM_COPY)
	size_t n = len / 8;

	for (size_t i = 0; i < n; i++) {
		long long v;

		memcpy(&v, src + 8 * i, 8);
		__builtin_ia32_movnti64((long long *)(void *)(dst + 8 * i), v);
	}
	memcpy(dst + 8 * n, src + 8 * n, len - 8 * n);
	__builtin_ia32_sfence();
#else
	memcpy(dst, src, len);
#endif
}

/*
 * Write a frame with pwritev(): see "Writing frames" above. Whatever the
 * call did not write (an error, a short write) is stored through the
 * mapping instead, so the frame is in the page cache either way and a
 * failing device is reported by the sync that must cover it.
 */
static void write_frame(struct kvf__jwal_file *f, const struct wal_hdr *h,
			const struct kvf__jreq *req)
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

void kvf__wal_put(struct kvf__journal *j, const struct kvf__jreq *req,
		  uint64_t hash, uint64_t first_seq)
{
	struct kvf__jwal *w = &j->wal;
	struct kvf__jwal_file *f = &w->f[w->cur];
	struct wal_hdr h = {
		.magic = WAL_MAGIC,
		.len = (uint32_t)req->len,
		.first_seq = first_seq,
		.nr_recs = (uint32_t)req->nr_recs,
		.nr_frames = req->nr_frames,
	};
	uint8_t *p = f->map + f->end;

	h.check = hdr_check(&h, hash, f->key);
	if (w->strict) { /* see "Writing frames" above */
		write_frame(f, &h, req);
	} else {
		memcpy(p, &h, sizeof(h));
		copy_stream(p + KVF__WAL_HDR, req->buf, req->len);
	}
	f->end += kvf__wal_frame_bytes(req->len);
	f->hi_seq = first_seq + req->nr_recs - 1;
	f->dirty = 1;
}

/*
 * With @mu held: a skip frame (header only, no LMDB frames) saying that
 * sequences @first_seq.. (@n records) went to LMDB directly, so the frames
 * after it still continue the sequence (see "Direct appends" above).
 */
static void put_skip(struct kvf__journal *j, uint64_t first_seq, uint64_t n)
{
	struct kvf__jreq empty = { .nr_recs = n };
	static const uint8_t none;

	empty.buf = (uint8_t *)&none;
	kvf__wal_put(j, &empty, XXH3_64bits(&none, 0), first_seq);
}

/*
 * The frame at @off of a file of @size bytes, if it is complete and its
 * check holds; its header goes to @h. Returns false otherwise.
 */
static bool frame_at(const uint8_t *map, uint64_t size, uint64_t id,
		     uint64_t off, struct wal_hdr *h)
{
	if (size - off < KVF__WAL_HDR)
		return false;
	memcpy(h, map + off, sizeof(*h));
	if (h->magic != WAL_MAGIC || !h->nr_recs ||
	    !h->nr_frames != !h->len || h->len > size - off - KVF__WAL_HDR)
		return false;
	return hdr_check(h, XXH3_64bits(map + off + KVF__WAL_HDR, h->len),
			 id) == h->check;
}

/*
 * Call @fn for each frame in [@from, @to) of a mapped file (frames known
 * valid); a non-zero return stops the walk and is returned.
 */
static int walk(const uint8_t *map, uint64_t from, uint64_t to,
		int (*fn)(void *arg, const uint8_t *payload, uint32_t len,
			  uint64_t first_seq, uint32_t nr_recs,
			  uint32_t nr_frames),
		void *arg)
{
	uint64_t off = from;

	while (off < to) {
		struct wal_hdr h;
		int rc;

		memcpy(&h, map + off, sizeof(h));
		rc = fn(arg, map + off + KVF__WAL_HDR, h.len, h.first_seq,
			h.nr_recs, h.nr_frames);
		if (rc)
			return rc;
		off += kvf__wal_frame_bytes(h.len);
	}
	return 0;
}

uint64_t kvf__wal_prefix(const uint8_t *map, uint64_t base, uint64_t size,
			 uint64_t key, uint64_t *first, uint64_t *last)
{
	uint64_t off = base, next = 0;
	struct wal_hdr h;

	*first = *last = 0;
	while (frame_at(map, size, key, off, &h) &&
	       (!next || h.first_seq == next)) {
		if (!next)
			*first = h.first_seq;
		next = h.first_seq + h.nr_recs;
		*last = next - 1;
		off += kvf__wal_frame_bytes(h.len);
	}
	return off;
}

/* --- Side log files: the header, the geometry. --- */

/*
 * File header. The first KVF__WAL_DATA bytes of a file hold two header
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
#define WAL_FILE_MAGIC 0x4b56465753494431ull /* "KVFWSID1" */
#define WAL_FILE_VERSION 1u
#define WAL_SLOT_STRIDE 512u

struct wal_file_hdr {
	uint64_t magic;
	uint32_t version;
	uint32_t index;      /* 0: wal-0.log, 1: wal-1.log */
	uint64_t size;       /* bytes of the file */
	uint64_t journal_id; /* the LMDB file's (struct kvf__jstate) */
	uint64_t epoch;
	uint64_t boot;
	uint64_t gen;
	uint64_t check;      /* XXH3-64 of the fields above */
};

_Static_assert(sizeof(struct wal_file_hdr) == 64, "side log file header");
_Static_assert(2 * WAL_SLOT_STRIDE <= KVF__WAL_DATA, "header slots");

static uint64_t file_hdr_check(const struct wal_file_hdr *h)
{
	return XXH3_64bits(h, offsetof(struct wal_file_hdr, check));
}

/* The check key of the frames of an epoch (0: legacy files, no header). */
static uint64_t frame_key(uint64_t id, uint64_t epoch)
{
	return epoch ? XXH3_64bits_withSeed(&epoch, sizeof(epoch), id) : id;
}

/* A hash of the kernel's boot id; 0 if unknown. */
static uint64_t boot_hash(void)
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

static void wal_path(char *buf, size_t len, const char *dir, int i,
		     const char *suffix)
{
	snprintf(buf, len, "%s/wal-%d.log%s", dir, i, suffix);
}

/* One side log file as recovery (and kvforge-inspect) reads it. */
struct wal_src {
	uint8_t *map;   /* read-only mapping of the whole file, or NULL */
	uint64_t size;  /* bytes of the file (legacy: whole 4 KiB pages) */
	uint64_t base;  /* offset of the first frame */
	uint64_t key;   /* check key of its frames */
	struct wal_file_hdr hdr; /* when @has_hdr */
	bool present, has_hdr;
};

/* Read and check the header of file @i (open at @fd, @st_size bytes). */
static int read_hdr(int fd, int i, uint64_t id, uint64_t st_size,
		    struct wal_src *s)
{
	uint8_t page[2 * WAL_SLOT_STRIDE];
	struct wal_file_hdr h, *best = NULL;

	if (st_size < KVF__WAL_DATA) {
		kvf__jerr("wal-%d.log: %llu bytes, too short for a side log "
			  "file", i, (unsigned long long)st_size);
		return KVF_ERR_JOURNAL_CORRUPT;
	}
	if (pread(fd, page, sizeof(page), 0) != (ssize_t)sizeof(page))
		return errno ? errno : EIO;
	for (int k = 0; k < 2; k++) {
		memcpy(&h, page + k * WAL_SLOT_STRIDE, sizeof(h));
		if (h.magic != WAL_FILE_MAGIC || file_hdr_check(&h) != h.check)
			continue;
		if (!best || h.gen > best->gen) {
			s->hdr = h;
			best = &s->hdr;
		}
	}
	if (!best) {
		kvf__jerr("wal-%d.log: no valid header (damaged, or written "
			  "by a format before side log headers)", i);
		return KVF_ERR_JOURNAL_CORRUPT;
	}
	if (best->version != WAL_FILE_VERSION) {
		kvf__jerr("wal-%d.log: header version %u, this build reads %u",
			  i, best->version, WAL_FILE_VERSION);
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
	s->size = st_size;
	s->base = KVF__WAL_DATA;
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
		    struct wal_src *s)
{
	char path[4096];
	struct stat sb;
	int fd, rc = 0;

	memset(s, 0, sizeof(*s));
	wal_path(path, sizeof(path), dir, i, "");
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

static void srcs_close(struct wal_src s[2])
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
static int srcs_open(const char *dir, uint64_t id, bool legacy, bool created,
		     struct wal_src s[2])
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
		srcs_close(s);
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

static int write_hdr(int fd, const struct wal_file_hdr *h)
{
	off_t at = (off_t)(h->gen % 2) * WAL_SLOT_STRIDE;

	if (pwrite(fd, h, sizeof(*h), at) != (ssize_t)sizeof(*h))
		return errno ? errno : EIO;
	return fdatasync(fd) ? errno : 0;
}

static int sync_dir(const char *dir)
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
static int prepare_file(struct kvf__journal *j, int i,
			const struct wal_src *s, uint64_t epoch,
			uint64_t boot)
{
	struct kvf__jwal_file *f = &j->wal.f[i];
	struct wal_file_hdr h = {
		.magic = WAL_FILE_MAGIC,
		.version = WAL_FILE_VERSION,
		.index = (uint32_t)i,
		.size = j->wal.size,
		.journal_id = j->st.id,
		.epoch = epoch,
		.boot = boot,
		.gen = s->has_hdr ? s->hdr.gen + 1 : 0,
	};
	char path[4096], tmp[4096];
	int rc;

	h.check = file_hdr_check(&h);
	f->key = frame_key(j->st.id, epoch);
	wal_path(path, sizeof(path), j->dir, i, "");
	if (s->has_hdr && s->size == j->wal.size) {
		f->fd = open(path, O_RDWR | O_CLOEXEC);
		return f->fd < 0 ? errno : write_hdr(f->fd, &h);
	}
	wal_path(tmp, sizeof(tmp), j->dir, i, ".tmp");
	f->fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (f->fd < 0)
		return errno;
	rc = fill_file(f->fd, j->wal.size);
	if (!rc)
		rc = write_hdr(f->fd, &h);
	if (!rc && rename(tmp, path))
		rc = errno;
	if (!rc)
		rc = sync_dir(j->dir);
	if (rc)
		unlink(tmp);
	return rc;
}

static int map_file(struct kvf__journal *j, int i)
{
	struct kvf__jwal_file *f = &j->wal.f[i];

	f->map = mmap(NULL, j->wal.size, PROT_READ | PROT_WRITE, MAP_SHARED,
		      f->fd, 0);
	if (f->map == MAP_FAILED) {
		f->map = NULL;
		return errno;
	}
	return 0;
}

/* --- Recovery: reading the chain. --- */

/* One file's chainable frames: [@from, @to) holds sequences @first.. */
struct chain_part {
	const uint8_t *map;
	uint64_t from, to;
	uint64_t first, last;
	int file;
};

/* Skip the frames of @p at or below @seq; false if one straddles it. */
static bool skip_to(struct chain_part *p, uint64_t seq)
{
	struct wal_hdr h;

	while (p->from < p->to) {
		memcpy(&h, p->map + p->from, sizeof(h));
		if (h.first_seq > seq)
			return h.first_seq == seq + 1;
		if (h.first_seq + h.nr_recs - 1 > seq)
			return false;
		p->from += kvf__wal_frame_bytes(h.len);
		p->first = h.first_seq + h.nr_recs;
	}
	return true;
}

/*
 * Decode the @nr_frames LMDB frames of a side log payload, calling @fn for
 * each record; KVF_ERR_JOURNAL_CORRUPT unless they fill the payload
 * exactly and hold @nr_recs records, else @fn's first non-zero result.
 */
static int decode_payload(const uint8_t *payload, uint32_t len,
			  uint32_t nr_recs, uint32_t nr_frames,
			  int (*fn)(void *arg, const struct kvf__jrec *rec,
				    uint32_t idx),
			  void *arg)
{
	uint64_t recs = 0, off = 0;

	for (uint32_t k = 0; k < nr_frames; k++) {
		uint32_t vlen, count;
		MDB_val v;
		int rc;

		if (len - off < 4)
			return KVF_ERR_JOURNAL_CORRUPT;
		memcpy(&vlen, payload + off, 4);
		if (vlen > len - off - 4)
			return KVF_ERR_JOURNAL_CORRUPT;
		v.mv_size = vlen;
		v.mv_data = (void *)(payload + off + 4);
		rc = kvf__frame_decode(&v, &count, fn, arg);
		if (rc)
			return rc;
		recs += count;
		off += 4 + vlen;
	}
	return off == len && recs == nr_recs ? 0 : KVF_ERR_JOURNAL_CORRUPT;
}

static void part_init(struct chain_part *p, const struct wal_src *s, int i)
{
	p->map = s->map;
	p->file = i;
	p->from = p->to = s->base;
	p->first = p->last = 0;
	if (s->map)
		p->to = kvf__wal_prefix(s->map, s->base, s->size, s->key,
					&p->first, &p->last);
}

/*
 * Call @fn on the parts of @p that chain after @seq, in sequence order:
 * the part that continues @seq, then the other if it follows on. A gap
 * ends the chain. Returns @fn's first non-zero result, or
 * KVF_ERR_JOURNAL_CORRUPT if a frame straddles @seq.
 */
static int chain(struct chain_part p[2], uint64_t seq,
		 int (*fn)(void *arg, struct chain_part *part), void *arg)
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
	const struct chain_part *part;
	uint64_t off; /* of the frame being read */
};

static int scan_rec(void *arg, const struct kvf__jrec *rec, uint32_t idx)
{
	struct scan *sc = arg;

	(void)idx;
	sc->records++;
	return sc->fn ? sc->fn(sc->arg, rec, ++sc->seq) : (++sc->seq, 0);
}

static int scan_frame(void *arg, const uint8_t *payload, uint32_t len,
		      uint64_t first_seq, uint32_t nr_recs, uint32_t nr_frames)
{
	struct scan *sc = arg;
	uint64_t seq = sc->seq;
	int rc;

	if (!nr_frames)
		return WAL_GAP; /* LMDB lacks a direct batch: the chain ends */
	rc = first_seq == seq + 1 ?
		     decode_payload(payload, len, nr_recs, nr_frames, scan_rec,
				    sc) :
		     KVF_ERR_JOURNAL_CORRUPT;
	if (rc == KVF_ERR_JOURNAL_CORRUPT)
		kvf__jerr("wal-%d.log: the frame at offset %llu (sequence "
			  "%llu) checks out but does not decode",
			  sc->part->file,
			  (unsigned long long)(payload - KVF__WAL_HDR -
					       sc->part->map),
			  (unsigned long long)first_seq);
	return rc;
}

static int scan_part(void *arg, struct chain_part *part)
{
	struct scan *sc = arg;

	sc->part = part;
	return walk(part->map, part->from, part->to, scan_frame, sc);
}

/*
 * The first frame of @s's epoch with a sequence beyond @seq, at *@off;
 * false if there is none.
 */
static bool later_frame(const struct wal_src *s, uint64_t seq, uint64_t *off,
			uint64_t *first)
{
	struct wal_hdr h;

	for (uint64_t o = s->base; s->map && o + KVF__WAL_HDR <= s->size;
	     o += 8) {
		uint32_t magic;

		memcpy(&magic, s->map + o, sizeof(magic));
		if (magic != WAL_MAGIC)
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
 * The verdict on where the chain ended (@seq): a torn tail or damage. A
 * process crash cannot tear an acknowledged frame, and every frame after
 * a torn one was written later, hence not acknowledged either; so after
 * the end of the chain nothing of the epoch may follow. If a frame with a
 * later sequence checks out anyway, a frame in between was damaged (or
 * its file replaced), and the journal is refused with that frame named:
 * unless the files were written in an earlier boot, when an OS crash may
 * have lost pages written after the last sync in any order (the loss
 * window of docs/journal.md); legacy files carry no boot and are read as
 * before.
 */
static int check_tail(const struct wal_src s[2], const struct chain_part p[2],
		      uint64_t seq, uint64_t boot)
{
	uint64_t off, first;

	for (int i = 0; i < 2; i++) {
		if (!s[i].has_hdr || !boot || s[i].hdr.boot != boot ||
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
	return 0;
}

/*
 * Read what recovery would move after LMDB's @last_seq from @parts
 * (part_init(); not changed), calling @fn (may be NULL) per record, and judge the end (check_tail()). *@end receives
 * the last sequence of the chain. A kvf_status.
 */
static int read_chain(const struct wal_src s[2],
		      const struct chain_part parts[2], uint64_t last_seq,
		      uint64_t boot,
		      int (*fn)(void *arg, const struct kvf__jrec *rec,
				uint64_t seq),
		      void *arg, uint64_t *records, uint64_t *end)
{
	struct scan sc = { .fn = fn, .arg = arg, .seq = last_seq };
	struct chain_part p[2] = { parts[0], parts[1] };
	int rc;

	rc = chain(p, last_seq, scan_part, &sc);
	if (rc == WAL_GAP)
		rc = 0;
	if (!rc)
		rc = check_tail(s, p, sc.seq, boot);
	*records = sc.records;
	*end = sc.seq;
	return rc;
}

/* --- Putting side log frames into the LMDB log (moves, recovery). --- */

/* Frames [@from, @to) of a mapped file, for kvf__commit_frames(). */
struct frame_range {
	const uint8_t *map;
	uint64_t from, to;
	bool recovering; /* a gap ends the chain */
	bool gap;        /* stopped at a skip frame LMDB does not have */
};

struct frame_put {
	MDB_txn *txn;
	MDB_dbi log;
	uint64_t *seq, *frames;
	const struct frame_range *r;
	bool gap;
	int rc; /* an LMDB code */
};

static int put_frame(void *arg, const uint8_t *payload, uint32_t len,
		     uint64_t first_seq, uint32_t nr_recs, uint32_t nr_frames)
{
	struct frame_put *m = arg;

	(void)len;
	if (!nr_frames) {
		if (first_seq + nr_recs - 1 <= *m->seq)
			return 0; /* a skip frame: LMDB has these (direct) */
		m->gap = true; /* only recovery can meet one LMDB lacks */
		return 1;
	}
	if (first_seq != *m->seq + 1) {
		m->rc = MDB_CORRUPTED;
		return 1;
	}
	m->rc = kvf__put_frames(m->txn, m->log, payload, nr_frames, m->seq,
				m->frames);
	if (!m->rc && *m->seq != first_seq + nr_recs - 1)
		m->rc = MDB_CORRUPTED;
	return m->rc != 0;
}

static int put_range(struct kvf__journal *j, MDB_txn *txn, void *arg,
		     uint64_t *seq, uint64_t *frames)
{
	struct frame_range *r = arg;
	struct frame_put m = { txn, j->dbs.log, seq, frames, r, false, 0 };

	walk(r->map, r->from, r->to, put_frame, &m);
	r->gap = m.gap;
	if (m.gap && !r->recovering)
		return MDB_CORRUPTED; /* a move: a broken invariant */
	return m.rc;
}

/*
 * Put @p's frames into the LMDB log, one transaction per WAL_RECOVER_TXN
 * bytes, through the writer's own commit (kvf__commit_frames(): map
 * growth included, whether a put or the commit itself does not fit).
 * read_chain() has decoded every one of them. Returns a kvf_status, or
 * WAL_GAP if a skip frame LMDB does not have ended the chain.
 */
static int recover_part(struct kvf__journal *j, struct chain_part *p)
{
	struct frame_range r = { .map = p->map, .recovering = true };
	int rc = 0;

	while (!rc && !r.gap && p->from < p->to) {
		uint64_t bytes = 0;
		struct wal_hdr h;

		r.from = r.to = p->from;
		while (r.to < p->to && bytes < WAL_RECOVER_TXN) {
			memcpy(&h, p->map + r.to, sizeof(h));
			bytes += h.len;
			r.to += kvf__wal_frame_bytes(h.len);
		}
		rc = kvf__commit_frames(j, put_range, &r); /* returns with @mu */
		pthread_mutex_unlock(&j->mu);
		p->from = r.to;
	}
	return rc ? rc : r.gap ? WAL_GAP : 0;
}

static int recover_fn(void *arg, struct chain_part *part)
{
	return recover_part(arg, part);
}

/*
 * Recovery: read the chain after LMDB's last sequence (every record
 * decoded, the end judged: read_chain()), then move it into LMDB and
 * sync. Nothing is written when the verdict is damage. Returns a
 * kvf_status or an errno/LMDB code.
 */
static int recover(struct kvf__journal *j, const struct wal_src s[2],
		   uint64_t boot)
{
	struct chain_part p[2];
	uint64_t records, end;
	int rc;

	for (int i = 0; i < 2; i++)
		part_init(&p[i], &s[i], i);
	rc = read_chain(s, p, j->st.last_seq, boot, NULL, NULL, &records,
			&end);
	if (rc || !records)
		return rc;
	rc = chain(p, j->st.last_seq, recover_fn, j);
	if (rc == WAL_GAP)
		rc = 0;
	if (!rc && j->st.last_seq != end) {
		kvf__jerr("side log recovery ended at sequence %llu, not %llu",
			  (unsigned long long)j->st.last_seq,
			  (unsigned long long)end);
		rc = KVF_ERR_JOURNAL_CORRUPT;
	}
	return rc ? rc : mdb_env_sync(j->env, 1);
}

/* --- Reading without opening (kvforge-inspect). --- */

/*
 * Whether an engine has DIR open (holds kvforge.lock): its appends may
 * land after the chain was read, so check_tail() cannot judge the end
 * (read_chain() is given no boot). The probe takes a shared lock for an
 * instant.
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

int kvf__wal_scan(const char *dir, const struct kvf__jstate *st,
		  int (*fn)(void *arg, const struct kvf__jrec *rec,
			    uint64_t seq),
		  void *arg, uint64_t *records)
{
	struct chain_part p[2];
	struct wal_src s[2];
	uint64_t end;
	int rc;

	*records = 0;
	rc = srcs_open(dir, st->id, st->version < KVF__JOURNAL_FORMAT_VERSION,
		       st->wal_created, s);
	if (rc)
		return kvf__journal_status(rc);
	for (int i = 0; i < 2; i++)
		part_init(&p[i], &s[i], i);
	rc = read_chain(s, p, st->last_seq, live(dir) ? 0 : boot_hash(), fn,
			arg, records, &end);
	srcs_close(s);
	return rc;
}

/*
 * Recover the files found (any geometry, from their headers), then make
 * both ready for appends at the configured size with a new epoch.
 */
static int open_files(struct kvf__journal *j)
{
	bool legacy = j->st.version < KVF__JOURNAL_FORMAT_VERSION;
	uint64_t boot = boot_hash(), epoch = 0;
	struct wal_src s[2];
	int rc;

	rc = srcs_open(j->dir, j->st.id, legacy, j->st.wal_created, s);
	if (rc)
		return rc;
	rc = recover(j, s, boot);
	while (!rc && !epoch)
		if (getrandom(&epoch, sizeof(epoch), 0) != sizeof(epoch))
			epoch = kvf__now_ns() ^ (uint64_t)getpid() << 40;
	for (int i = 0; i < 2 && !rc; i++)
		rc = prepare_file(j, i, &s[i], epoch, boot);
	srcs_close(s);
	return rc;
}

int kvf__wal_open(struct kvf__journal *j)
{
	struct kvf__jwal *w = &j->wal;
	pthread_condattr_t ca;
	int rc;

	w->f[0].fd = w->f[1].fd = -1;
	if (pthread_condattr_init(&ca))
		return ENOMEM;
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* kvf__now_ns() */
	rc = pthread_cond_init(&w->cv, NULL);
	if (!rc) {
		rc = pthread_cond_init(&w->strict_cv, &ca);
		if (rc)
			pthread_cond_destroy(&w->cv);
	}
	pthread_condattr_destroy(&ca);
	if (rc)
		return ENOMEM;
	w->cv_ok = 1;
	rc = open_files(j);
	for (int i = 0; i < 2 && !rc; i++)
		rc = map_file(j, i);
	if (rc)
		return rc;
	for (int i = 0; i < 2; i++) {
		w->f[i].end = KVF__WAL_DATA;
		w->f[i].hi_seq = 0;
		w->f[i].dirty = 0;
		w->f[i].zap_to = 0;
	}
	w->cur = 0;
	w->ing = 0;
	w->ing_off = KVF__WAL_DATA;
	w->acked_seq = j->st.last_seq;
	w->durable_seq = j->st.last_seq;
	w->synced_seq = j->st.last_seq;
	w->strict = j->cfg.durability == KVF_DURABILITY_STRICT;
	w->on = 1;
	return 0;
}

void kvf__wal_close(struct kvf__journal *j)
{
	struct kvf__jwal *w = &j->wal;

	for (int i = 0; i < 2; i++) {
		if (w->f[i].map)
			munmap(w->f[i].map, w->size);
		if (w->f[i].fd >= 0)
			close(w->f[i].fd);
		w->f[i].map = NULL;
		w->f[i].fd = -1;
	}
	if (w->cv_ok) {
		pthread_cond_destroy(&w->strict_cv);
		pthread_cond_destroy(&w->cv);
	}
	w->cv_ok = 0;
}

/* --- Page tables: populate ahead, unmap behind. --- */

void kvf__wal_prefault(struct kvf__journal *j, int file, uint64_t from,
		       uint64_t to)
{
	if (to > j->wal.size)
		to = j->wal.size;
	from &= ~(uint64_t)4095;
	if (from < to)
		madvise(j->wal.f[file].map + from, to - from,
			MADV_POPULATE_WRITE);
}

void kvf__wal_zap(struct kvf__journal *j, int file, uint64_t from,
		  uint64_t to)
{
	from &= ~(uint64_t)4095;
	to &= ~(uint64_t)4095;
	if (from < to)
		madvise(j->wal.f[file].map + from, to - from, MADV_DONTNEED);
}

int kvf__wal_sync_file(struct kvf__journal *j, int file)
{
	return fdatasync(j->wal.f[file].fd) ? errno : 0;
}

/* --- Appending (caller threads). --- */

/*
 * Move into LMDB once this many frame bytes are pending, or the oldest is
 * MOVE_NS old. Each move is a commit that syncs its data pages
 * (MDB_NOMETASYNC, writer.c): a few large moves, not many small ones
 * (1 MiB / 5 ms with MDB_NOSYNC measured the same as 4 MiB / 20 ms with
 * MDB_NOMETASYNC, three interleaved runs each).
 */
#define MOVE_BYTES (4u << 20)
/* ... or the oldest pending frame is this old. */
#define MOVE_NS (20ull * 1000000)
/* After a failed move, retry no sooner than this. */
#define MOVE_RETRY_NS (10ull * 1000000)
/* Keep this much of the current file populated ahead of the appends. */
#define WAL_PF_WINDOW (1ull << 20)
/* Before a sync, unmap what lies more than this behind the appends. */
#define WAL_ZAP_MARGIN (256ull << 10)

/*
 * With @mu held: is there room for @bytes at the append position? Switches
 * to the other file when the current one is full and the other is free
 * (everything in it moved into LMDB and synced there).
 */
static bool room(struct kvf__journal *j, uint64_t bytes)
{
	struct kvf__jwal *w = &j->wal;
	struct kvf__jwal_file *o = &w->f[!w->cur];

	if (w->f[w->cur].end + bytes <= w->size)
		return true;
	if (o->hi_seq > w->durable_seq)
		return false;
	/* Everything in @o is moved: the next frame to move is at the
	 * start of the file just filled, if the mover is still in @o. */
	if (w->ing == !w->cur) {
		w->ing = w->cur;
		w->ing_off = KVF__WAL_DATA;
		w->ing_gen++;
	}
	w->cur = !w->cur;
	o->end = KVF__WAL_DATA;
	o->hi_seq = 0;
	o->zap_to = 0;
	w->pf_to = 0;
	return true;
}

/* With @mu held: ask the writer to populate ahead when it is time. */
static void want_wal_prefault(struct kvf__journal *j)
{
	struct kvf__jwal *w = &j->wal;

	if (w->strict || w->pf_to >= w->size || w->pf_want ||
	    w->f[w->cur].end + WAL_PF_WINDOW / 2 <= w->pf_to)
		return;
	w->pf_want = 1;
	pthread_cond_signal(&j->work_cv);
}

/*
 * With @mu held: wait until @bytes fit, or return the error of a move or
 * sync that failed meanwhile (the side log is full and cannot be freed).
 * @appender: the caller is a side log append, which also waits while a
 * direct append owns the order (see "Direct appends" below). It takes
 * its sequences when this returns, with @mu held throughout, so no
 * direct commit can start between the check and the frame: a check made
 * before sleeping here once let a direct commit and a side log frame
 * take the same sequences (acknowledged batches lost, replicas
 * overlapping after recovery).
 */
static int wait_room(struct kvf__journal *j, uint64_t bytes, bool appender)
{
	struct kvf__jwal *w = &j->wal;
	uint64_t mgen = w->move_gen, sgen = w->sync_gen;

	for (;;) {
		if (appender && w->direct) {
			pthread_cond_wait(&w->cv, &j->mu);
			continue;
		}
		if (room(j, bytes))
			return KVF_OK;
		if (j->stop)
			return KVF_ERR_CLOSED;
		if (w->move_gen != mgen && w->move_err)
			return w->move_err;
		if (w->sync_gen != sgen && w->sync_err)
			return w->sync_err;
		w->sync_now++;
		pthread_cond_signal(&j->work_cv);
		pthread_cond_signal(&j->sync_cv);
		pthread_cond_wait(&w->cv, &j->mu);
		w->sync_now--;
	}
}

int kvf__wal_append(struct kvf__journal *j, struct kvf__jreq *req,
		    uint64_t hash)
{
	struct kvf__jwal *w = &j->wal;
	uint64_t bytes = kvf__wal_frame_bytes(req->len);
	int rc = KVF_OK;

	if (w->sync_failed)
		return w->sync_failed;
	rc = KVF__FAULT(kvf__take_errno_fault(j));
	if (!rc)
		rc = wait_room(j, bytes, true);
	if (!rc && w->sync_failed)
		rc = w->sync_failed; /* failed while we waited */
	if (!rc) {
		kvf__wal_put(j, req, hash, w->acked_seq + 1);
		w->acked_seq += req->nr_recs;
		if (w->strict) {
			kvf__note_appender(j, kvf__now_ns());
			w->unsynced++;
		}
		w->pending_bytes += bytes;
		if (!w->pending_since) {
			w->pending_since = kvf__now_ns();
			pthread_cond_signal(&j->work_cv);
		} else if (w->pending_bytes >= MOVE_BYTES &&
			   w->pending_bytes - bytes < MOVE_BYTES) {
			pthread_cond_signal(&j->work_cv);
		}
		want_wal_prefault(j);
		kvf__mark_dirty(j);
	}
	return rc;
}

/*
 * With @mu held: wait until the LMDB log ends at the side log's movable
 * end (@all: at its acknowledged end, which in STRICT mode also counts
 * frames written but not synced yet), or a move or sync fails meanwhile
 * (its status is returned).
 */
static int drain_to(struct kvf__journal *j, bool all)
{
	struct kvf__jwal *w = &j->wal;
	uint64_t gen = w->move_gen;
	int rc = KVF_OK;

	if (!w->on)
		return KVF_OK;
	w->drain++;
	pthread_cond_signal(&j->work_cv);
	while (j->st.last_seq != (all ? w->acked_seq : kvf__wal_movable(w))) {
		if (w->move_gen != gen && w->move_err) {
			rc = w->move_err;
			break;
		}
		if (w->sync_failed) {
			rc = w->sync_failed;
			break;
		}
		if (j->stop && !j->started) {
			rc = KVF_ERR_CLOSED;
			break;
		}
		pthread_cond_wait(&w->cv, &j->mu);
	}
	w->drain--;
	return rc;
}

/*
 * With @mu held: wait until everything acknowledged is in the LMDB log,
 * or a move fails meanwhile (its status is returned).
 */
int kvf__wal_drain(struct kvf__journal *j)
{
	return drain_to(j, false);
}

/*
 * Direct appends. A batch larger than half a file goes to LMDB directly
 * (writer.c), in sequence order. Its sequences are decided by @direct:
 * once it is set, no side log frame is written (wait_room()) until
 * kvf__wal_direct_end(); every frame written before is moved into LMDB
 * first (in STRICT mode including frames still waiting for their sync),
 * so LMDB's log ends exactly at the last sequence handed out and the
 * direct commit takes the next ones. Its sequences are then missing from
 * the side log, so a skip frame records them, or recovery would see a
 * gap and stop before the frames that follow. Its room is taken before
 * the commit, so writing it cannot fail afterwards.
 */
int kvf__wal_direct_begin(struct kvf__journal *j)
{
	struct kvf__jwal *w = &j->wal;
	int rc;

	while (w->direct)
		pthread_cond_wait(&w->cv, &j->mu);
	w->direct = 1;
	rc = w->sync_failed;
	if (!rc)
		rc = drain_to(j, true);
	if (!rc)
		rc = wait_room(j, KVF__WAL_HDR, false);
	if (rc) {
		w->direct = 0;
		pthread_cond_broadcast(&w->cv);
	}
	return rc;
}

void kvf__wal_direct_end(struct kvf__journal *j, int rc)
{
	struct kvf__jwal *w = &j->wal;

	if (!rc) {
		put_skip(j, w->acked_seq + 1, j->st.last_seq - w->acked_seq);
		w->acked_seq = j->st.last_seq;
		/* STRICT: drained (all synced) and the commit was synced. */
		if (w->strict)
			w->synced_seq = j->st.last_seq;
		/*
		 * Nothing is left to move (LMDB has the skip frame's records),
		 * so no move timer starts: the next append starts it, and
		 * wakes the writer (a timer started here never woke it, and
		 * moves then waited for the side log to fill).
		 */
		w->pending_bytes += KVF__WAL_HDR;
		kvf__mark_dirty(j);
	}
	w->direct = 0;
	pthread_cond_broadcast(&w->cv);
}

/*
 * STRICT group sync. An append is acknowledged once an fdatasync() that
 * started after its write has returned. One appender at a time syncs, for
 * every frame written so far (a sync covers all of them, in both files);
 * the others wait for it and are done if it covered them. A group forms
 * before a sync starts: an appender that finds no sync running and fewer
 * unsynced appends than threads that appended recently waits (at most half
 * an average sync, never more than 300 us: kvf__gather_wait_ns()) for the
 * others; the appender that completes the group syncs at once, so nobody
 * sleeps between the last append and the sync (a waiting leader that had
 * to be woken by the last append cost a wake-up per sync: 2 threads 140 us
 * per batch against 131 now, journal bench without moves). Without a group,
 * two appenders fall into lockstep, each sync carrying one batch while the
 * other thread prepares its next, and a second thread adds nothing
 * (measured: 2 threads 0.98-1.2x one). Letting every appender sync on its
 * own, overlapping, did not help either: the device serialises the cache
 * flushes. A failed sync is sticky (appends are refused until the journal
 * is reopened): the batches it covered may or may not be on disk (Linux
 * reports a failed writeback once), so nothing may be acknowledged after
 * them, and they are not moved into LMDB.
 */
/* With @mu held, as the one syncing appender: sync everything copied. */
static void lead_sync(struct kvf__journal *j)
{
	struct kvf__jwal *w = &j->wal;
	uint64_t target, t0, took;
	int files[2], n = 0, rc = 0;

	w->syncing = 1;
	target = w->acked_seq;
	w->unsynced = 0;
	files[n++] = w->cur;
	if (w->f[!w->cur].hi_seq > w->synced_seq)
		files[n++] = !w->cur;
	pthread_mutex_unlock(&j->mu);
	t0 = kvf__now_ns();
	for (int i = 0; i < n && !rc; i++)
		rc = kvf__wal_sync_file(j, files[i]);
	took = kvf__now_ns() - t0;
	pthread_mutex_lock(&j->mu);
	w->sync_ns = w->sync_ns ? (7 * w->sync_ns + took) / 8 : took;
	if (rc && !w->sync_failed)
		w->sync_failed = kvf__journal_status(rc);
	if (!w->sync_failed && target > w->synced_seq) {
		/*
		 * Frames became movable. A writer that found none sleeps
		 * with no timer (kvf__wal_move_due()), and nothing else
		 * would wake it: a drain (checkpoint, flush) then waited
		 * forever (test_journal_concurrent hung once).
		 */
		if (w->synced_seq == j->st.last_seq)
			pthread_cond_signal(&j->work_cv);
		w->synced_seq = target;
	}
	w->syncing = 0;
	pthread_cond_broadcast(&w->strict_cv);
	pthread_cond_broadcast(&w->cv);
}

int kvf__wal_strict_sync(struct kvf__journal *j, uint64_t seq)
{
	struct kvf__jwal *w = &j->wal;
	uint64_t now, deadline = 0;
	struct timespec ts;

	for (;;) {
		if (w->synced_seq >= seq)
			return KVF_OK; /* durable before any failure */
		if (w->sync_failed)
			return w->sync_failed;
		if (w->syncing) {
			pthread_cond_wait(&w->strict_cv, &j->mu);
			continue;
		}
		now = kvf__now_ns();
		if (!deadline)
			deadline = now + kvf__gather_wait_ns(w->sync_ns);
		if (j->stop || now >= deadline ||
		    kvf__group_complete(j, now, w->sync_ns, w->unsynced)) {
			lead_sync(j);
			continue;
		}
		kvf__deadline_ts(deadline, &ts);
		pthread_cond_timedwait(&w->strict_cv, &j->mu, &ts);
	}
}

/* --- Moving frames into LMDB (the writer thread). --- */

/*
 * With @mu held: the frames of the next move, every pending one up to the
 * end of the file they are in. No cap: moves alternate with checkpoint
 * chunks (~65 ms each), and a move capped at a few MB would fall behind
 * the appends (the side log fills up and appends wait).
 */
static void next_range(struct kvf__jwal *w, struct frame_range *r)
{
	struct kvf__jwal_file *f;

	if (w->ing != w->cur && w->ing_off == w->f[w->ing].end) {
		w->ing = w->cur;
		w->ing_off = KVF__WAL_DATA;
	}
	f = &w->f[w->ing];
	r->map = f->map;
	r->from = r->to = w->ing_off;
	if (!w->strict) {
		r->to = f->end;
		return;
	}
	/* STRICT: only frames known durable (kvf__wal_strict_sync()). */
	while (r->to < f->end) {
		struct wal_hdr h;

		memcpy(&h, f->map + r->to, sizeof(h));
		if (h.first_seq + h.nr_recs - 1 > w->synced_seq)
			break;
		r->to += kvf__wal_frame_bytes(h.len);
	}
}

bool kvf__wal_move_due(struct kvf__journal *j, uint64_t now,
		       uint64_t *deadline)
{
	struct kvf__jwal *w = &j->wal;
	uint64_t due;

	if (!w->on || kvf__wal_movable(w) == j->st.last_seq)
		return false;
	if (now < w->retry_ns) {
		*deadline = w->retry_ns;
		return false;
	}
	if (w->drain || w->sync_now || j->stop ||
	    w->pending_bytes >= MOVE_BYTES)
		return true;
	due = w->pending_since + MOVE_NS;
	if (now >= due)
		return true;
	*deadline = due;
	return false;
}

int kvf__wal_move(struct kvf__journal *j)
{
	struct kvf__jwal *w = &j->wal;
	struct frame_range r = { 0 };
	uint64_t gen;
	int rc;

	next_range(w, &r);
	gen = w->ing_gen;
	pthread_mutex_unlock(&j->mu);
	rc = kvf__commit_frames(j, put_range, &r); /* returns with @mu */
	if (!rc) {
		/*
		 * A range of skip frames only (their records came to LMDB
		 * directly) leaves its file free to reuse: an append may
		 * have switched into it meanwhile and moved the mover to
		 * the start of the other file (room()). Then r.to is an
		 * offset in a file the mover has left; the crash harness
		 * found moves reading mid-payload after it was applied.
		 */
		if (w->ing_gen == gen)
			w->ing_off = r.to;
		w->pending_bytes -= r.to - r.from;
		w->pending_since = w->acked_seq == j->st.last_seq ?
					   0 : kvf__now_ns();
		w->retry_ns = 0;
		if (w->strict) /* STRICT commits are synced */
			w->durable_seq = j->st.last_seq;
	} else {
		w->retry_ns = kvf__now_ns() + MOVE_RETRY_NS;
	}
	w->move_err = rc;
	w->move_gen++;
	pthread_cond_broadcast(&w->cv);
	if (w->sync_now)
		pthread_cond_signal(&j->sync_cv);
	return rc;
}

/* With @mu held: populate ahead of the appends (the writer thread). */
void kvf__wal_serve_prefault(struct kvf__journal *j)
{
	struct kvf__jwal *w = &j->wal;
	int file = w->cur;
	uint64_t from = w->f[file].end, to = from + WAL_PF_WINDOW;

	if (to > w->size)
		to = w->size;
	w->pf_want = 0;
	if (w->pf_to > from)
		from = w->pf_to;
	w->pf_to = to;
	pthread_mutex_unlock(&j->mu);
	kvf__wal_prefault(j, file, from, to);
	pthread_mutex_lock(&j->mu);
}

/* --- Syncing (the syncer thread). --- */

/*
 * With @mu held, for the periodic sync: the side log's part. Unmaps what
 * appends are done with and fdatasync()s the files written since the last
 * sync. Returns 0 or an errno value. Drops @mu meanwhile.
 */
int kvf__wal_sync(struct kvf__journal *j)
{
	struct kvf__jwal *w = &j->wal;
	uint64_t zfrom[2], zto[2];
	int dirty[2], rc = 0;

	for (int i = 0; i < 2; i++) {
		struct kvf__jwal_file *f = &w->f[i];
		uint64_t to = f->end;

		if (i == w->cur)
			to = to > WAL_ZAP_MARGIN ? to - WAL_ZAP_MARGIN : 0;
		zfrom[i] = f->zap_to;
		zto[i] = to;
		if (to > f->zap_to)
			f->zap_to = to & ~(uint64_t)4095;
		dirty[i] = f->dirty;
		f->dirty = 0;
	}
	pthread_mutex_unlock(&j->mu);
	for (int i = 0; i < 2; i++) {
		kvf__wal_zap(j, i, zfrom[i], zto[i]);
		if (dirty[i] && !rc)
			rc = kvf__wal_sync_file(j, i);
	}
	pthread_mutex_lock(&j->mu);
	if (rc)
		for (int i = 0; i < 2; i++)
			w->f[i].dirty |= dirty[i];
	return rc;
}

/*
 * With @mu held, after a periodic sync that started when LMDB's log ended
 * at @seq: record the outcome, wake appenders waiting for a free file, and
 * have the window ahead populated again (the sync wrote it back and
 * write-protected it).
 */
void kvf__wal_synced(struct kvf__journal *j, uint64_t seq, int rc)
{
	struct kvf__jwal *w = &j->wal;

	if (!rc && seq > w->durable_seq)
		w->durable_seq = seq;
	w->sync_err = rc ? kvf__journal_status(rc) : 0;
	w->sync_gen++;
	pthread_cond_broadcast(&w->cv);
	if (!rc && w->pf_to && !w->strict) {
		w->pf_to = 0;
		w->pf_want = 1;
		pthread_cond_signal(&j->work_cv);
	}
}
