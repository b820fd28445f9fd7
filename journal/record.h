/* SPDX-License-Identifier: MIT */
/*
 * journal/record.h - the record codec (record.c): records, log frames and
 * encoded batches. No I/O, no locks; every part of the journal uses it.
 */
#ifndef KVF_JOURNAL_RECORD_H
#define KVF_JOURNAL_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "journal/journal.h"

/*
 * Log frames. One LMDB log entry holds a run of consecutive records of one
 * batch: key = big-endian u64 sequence of its first record (so MDB_APPEND
 * applies), value = u16 LE record count, then the encoded records. Frames
 * are cut at ~FRAME_TARGET bytes so they stay inline in a 4 KiB leaf page
 * (no overflow pages to allocate and free) while a 128-record batch costs
 * ~6 puts instead of 128.
 */
#define KVF__FRAME_TARGET 1900u
#define KVF__FRAME_HDR 2u
#define KVF__FRAME_MAX_RECS 65535u

/*
 * struct kvf__jbatch - a caller's batch, encoded: log frames back to back,
 * each a u32 (host order) value length, then the value. The side log
 * stores exactly these bytes as a frame's payload, and the LMDB log the
 * values, so moving a batch copies nothing.
 */
struct kvf__jbatch {
	uint8_t *buf;       /* owned by whoever filled it */
	size_t cap;         /* bytes allocated at @buf */
	size_t len;         /* bytes used */
	uint32_t nr_frames; /* log frames */
	uint64_t nr_recs;   /* records */
};

/* Does a record of @type name an object (put, replicas, remove), as
 * opposed to a segment or a client? */
static inline bool kvf__jrec_type_is_object(uint32_t type)
{
	return type == KVF__JREC_OBJECT_PUT ||
	       type == KVF__JREC_OBJECT_REPLICAS ||
	       type == KVF__JREC_OBJECT_REMOVE;
}

static inline bool kvf__jrec_is_object(const struct kvf__jrec *rec)
{
	return kvf__jrec_type_is_object(rec->type);
}

/* Bytes kvf__jrec_encode() may write for @rec at most. */
size_t kvf__jrec_encoded_max(const struct kvf__jrec *rec);

/*
 * kvf__jrec_validate() - KVF_OK if @rec can be journaled, else
 * KVF_ERR_INVALID_ARGUMENT.
 */
int kvf__jrec_validate(const struct kvf__jrec *rec);

/* Encode a validated record at @buf (kvf__jrec_encoded_max() bytes free);
 * returns the bytes written. */
size_t kvf__jrec_encode(const struct kvf__jrec *rec, uint8_t *buf);

/*
 * kvf__jrec_decode() - decode one record from @buf[0..@len).
 * @used: receives the bytes consumed.
 *
 * Return: KVF_OK or KVF_ERR_JOURNAL_CORRUPT. Pointers in @rec point into
 * @buf.
 */
int kvf__jrec_decode(const uint8_t *buf, size_t len, struct kvf__jrec *rec,
		     size_t *used);

/*
 * kvf__batch_encode() - encode @recs into @b as log frames, reusing the
 * buffer @b holds (it grows at least twofold when it must; the caller
 * frees @b->buf). A frame is closed when the next record would push it
 * past KVF__FRAME_TARGET. Returns KVF_OK, KVF_ERR_INVALID_ARGUMENT (a
 * record cannot be journaled) or KVF_ERR_NO_MEMORY.
 */
int kvf__batch_encode(const struct kvf__jrec *recs, size_t n,
		      struct kvf__jbatch *b);

/* Records of the log frame value @val[0..@len) (its header); 0 if none. */
uint32_t kvf__frame_count(const uint8_t *val, size_t len);

typedef int (*kvf__jrec_fn)(void *arg, const struct kvf__jrec *rec,
			    uint32_t idx);

/*
 * kvf__frame_decode() - walk the records of the log frame value
 * @val[0..@len), calling @fn for each with its index in the frame.
 * KVF_ERR_JOURNAL_CORRUPT if the frame is malformed (checked before @fn
 * sees anything past a bad record), else @fn's first non-zero result;
 * *@count receives the frame's records on success.
 */
int kvf__frame_decode(const uint8_t *val, size_t len, uint32_t *count,
		      kvf__jrec_fn fn, void *arg);

typedef int (*kvf__jrec_raw_fn)(void *arg, const struct kvf__jrec *rec,
				uint32_t idx, const uint8_t *raw,
				size_t raw_len);

/*
 * kvf__frame_walk() - kvf__frame_decode(), also handing @fn each record's
 * encoding (@raw[0..@raw_len), inside @val): what kvf__jrec_encode()
 * wrote, so a copy of it decodes to the same record.
 */
int kvf__frame_walk(const uint8_t *val, size_t len, uint32_t *count,
		    kvf__jrec_raw_fn fn, void *arg);

/*
 * kvf__frames_decode() - walk @nr_frames encoded log frames (a batch's
 * bytes, struct kvf__jbatch's layout) at @buf[0..@len), calling @fn per
 * record. KVF_ERR_JOURNAL_CORRUPT unless they fill @len exactly and hold
 * @nr_recs records, else @fn's first non-zero result.
 */
int kvf__frames_decode(const uint8_t *buf, size_t len, uint64_t nr_recs,
		       uint32_t nr_frames, kvf__jrec_fn fn, void *arg);

static inline void kvf__put_be64(uint8_t *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--) {
		p[i] = (uint8_t)v;
		v >>= 8;
	}
}

static inline uint64_t kvf__get_be64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = (v << 8) | p[i];
	return v;
}

#endif /* KVF_JOURNAL_RECORD_H */
