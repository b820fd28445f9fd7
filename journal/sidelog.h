/* SPDX-License-Identifier: MIT */
/*
 * journal/sidelog.h - the side log file format (sidelog.c): the two mapped
 * files DIR/wal-0.log and DIR/wal-1.log, their two-slot header, the frame
 * layout, and reading them back (recovery, kvforge-inspect). No threads
 * and no locks: the pipeline (pipeline.h) decides when frames are written,
 * synced, moved into LMDB and when a file is reused, and serialises every
 * call that changes a struct kvf__sidelog.
 */
#ifndef KVF_JOURNAL_SIDELOG_H
#define KVF_JOURNAL_SIDELOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "journal/record.h"

/* Bytes of a frame header. */
#define KVF__SIDELOG_HDR 32u
/* Offset of the first frame of a file (the file header's page). */
#define KVF__SIDELOG_DATA 4096u
/* A skip frame beyond LMDB's end ended the chain (not an error). */
#define KVF__SIDELOG_GAP 1

/* One of the two files, open for appends. */
struct kvf__sidelog_file {
	int fd;
	uint8_t *map;    /* the whole file, MAP_SHARED; fixed while open */
	uint64_t end;    /* end of the last frame written since (re)use */
	uint64_t hi_seq; /* last sequence written since (re)use, 0: none */
	uint64_t key;    /* check key of this open's frames */
	int dirty;       /* written since the last kvf__sidelog_sync_file() */
};

/* The side log, open for appends. */
struct kvf__sidelog {
	uint64_t size; /* bytes per file */
	bool strict;   /* STRICT: the pipeline syncs each frame */
	struct kvf__sidelog_file f[2];
};

/* A frame's header fields. */
struct kvf__sidelog_frame {
	uint64_t first_seq;
	uint32_t len;       /* payload bytes */
	uint32_t nr_recs;
	uint32_t nr_frames; /* LMDB log frames in the payload; 0: skip */
};

/* Called per frame by kvf__sidelog_walk(); non-zero stops the walk. */
typedef int (*kvf__sidelog_frame_fn)(void *arg,
				     const struct kvf__sidelog_frame *fr,
				     const uint8_t *payload);

/* --- Frames. --- */

/* Bytes a frame with @payload bytes takes in a file. */
uint64_t kvf__sidelog_frame_bytes(size_t payload);
/* The payload hash of @b's frame (may run before taking any lock). */
uint64_t kvf__sidelog_hash(const struct kvf__jbatch *b);
/* The header of the frame at @off of @map (known to be valid). */
void kvf__sidelog_frame_read(const uint8_t *map, uint64_t off,
			     struct kvf__sidelog_frame *fr);
/* Call @fn for each frame in [@from, @to) of @map (frames known valid). */
int kvf__sidelog_walk(const uint8_t *map, uint64_t from, uint64_t to,
		      kvf__sidelog_frame_fn fn, void *arg);

/*
 * Write @b as the frame at f[@file].end with sequences from @first_seq
 * (the caller checked the room), and account it in f[@file].
 */
void kvf__sidelog_put(struct kvf__sidelog *sl, int file,
		      const struct kvf__jbatch *b, uint64_t hash,
		      uint64_t first_seq);
/*
 * A skip frame (header only, no LMDB frames): sequences @first_seq.. (@n
 * records) went to LMDB directly, so the frames after it still continue
 * the sequence.
 */
void kvf__sidelog_put_skip(struct kvf__sidelog *sl, int file,
			   uint64_t first_seq, uint64_t n);
/* File @file is reused from its start (everything in it is in LMDB). */
void kvf__sidelog_reuse(struct kvf__sidelog *sl, int file);

/* --- Reading the files (recovery, kvforge-inspect). --- */

/* One file as recovery reads it. */
struct kvf__sidelog_src {
	uint8_t *map;   /* read-only mapping of the whole file, or NULL */
	uint64_t size;  /* bytes of the file (legacy: whole 4 KiB pages) */
	uint64_t base;  /* offset of the first frame */
	uint64_t key;   /* check key of its frames */
	uint64_t gen, boot; /* from the header, when @has_hdr */
	bool present, has_hdr;
};

/* One file's chainable frames: [@from, @to) holds sequences @first.. */
struct kvf__sidelog_part {
	const uint8_t *map;
	uint64_t from, to;
	uint64_t first, last;
	int file;
};

/*
 * kvf__sidelog_srcs_open() - open both files of @dir for reading. @id: the
 * journal id; @legacy: a format 2 directory (files without a header);
 * @created: the LMDB meta says the files were created (missing ones are
 * then refused). Returns 0, an errno value or a kvf_status
 * (kvf__journal_error() names the file).
 */
int kvf__sidelog_srcs_open(const char *dir, uint64_t id, bool legacy,
			   bool created, struct kvf__sidelog_src s[2]);
void kvf__sidelog_srcs_close(struct kvf__sidelog_src s[2]);
/* Each file's valid prefix, as parts for the chain. */
void kvf__sidelog_parts_init(struct kvf__sidelog_part p[2],
			     const struct kvf__sidelog_src s[2]);

/*
 * kvf__sidelog_read_chain() - read what follows LMDB's @last_seq in
 * @parts (not changed): every record decoded and passed to @fn (may be
 * NULL) with its sequence; then judge the chain's end (@boot: this boot's
 * kvf__sidelog_boot(), or 0 when the end cannot be judged). *@records and
 * *@end receive the records read and the chain's last sequence. A
 * kvf_status, or @fn's first non-zero result.
 */
int kvf__sidelog_read_chain(const struct kvf__sidelog_src s[2],
			    const struct kvf__sidelog_part parts[2],
			    uint64_t last_seq, uint64_t boot,
			    int (*fn)(void *arg, const struct kvf__jrec *rec,
				      uint64_t seq),
			    void *arg, uint64_t *records, uint64_t *end);

/*
 * kvf__sidelog_chain() - call @fn on the parts of @p that chain after
 * @seq, in sequence order (each first trimmed to start after @seq): the
 * part that continues @seq, then the other if it follows on. Returns
 * @fn's first non-zero result, or KVF_ERR_JOURNAL_CORRUPT if a frame
 * straddles @seq.
 */
int kvf__sidelog_chain(struct kvf__sidelog_part p[2], uint64_t seq,
		       int (*fn)(void *arg, struct kvf__sidelog_part *part),
		       void *arg);

/*
 * kvf__sidelog_scan() - read-only: call @fn for each record of DIR's side
 * log that follows LMDB's @last_seq, as the next open would move them,
 * with its sequence; *@records counts them. The same reader and verdict
 * as open's recovery (headers, missing files, damage before the end; the
 * end is not judged while an engine holds DIR's lock, as its appends race
 * with the read). @id, @legacy, @created: as kvf__sidelog_srcs_open().
 * Returns 0, @fn's non-zero result or a kvf_status (kvf__journal_error()
 * names the file and frame).
 */
int kvf__sidelog_scan(const char *dir, uint64_t id, bool legacy, bool created,
		      uint64_t last_seq,
		      int (*fn)(void *arg, const struct kvf__jrec *rec,
				uint64_t seq),
		      void *arg, uint64_t *records);

/* A hash of the kernel's boot id; 0 if unknown. */
uint64_t kvf__sidelog_boot(void);
/* Whether DIR holds a side log file. */
bool kvf__sidelog_exists(const char *dir);

/* --- The files for appends. --- */

/*
 * kvf__sidelog_open() - make both files ready for appends, everything in
 * them being in synced LMDB: a header for a new epoch, in place if a file
 * already has @sl->size bytes and a header (@s: as read), otherwise a new
 * file of that size written aside and renamed; then map them. @id: the
 * journal id. Returns 0 or an errno value.
 */
int kvf__sidelog_open(struct kvf__sidelog *sl, const char *dir, uint64_t id,
		      const struct kvf__sidelog_src s[2], uint64_t boot);
void kvf__sidelog_close(struct kvf__sidelog *sl);

/* fdatasync() file @file: 0 or an errno value. */
int kvf__sidelog_sync_file(struct kvf__sidelog *sl, int file);

/* fsync() the directory @dir (its entries: created, renamed files); 0 or
 * an errno value. */
int kvf__sidelog_sync_dir(const char *dir);

#endif /* KVF_JOURNAL_SIDELOG_H */
