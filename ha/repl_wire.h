/* SPDX-License-Identifier: MIT */
/*
 * ha/repl_wire.h - the replication stream's frames and the lineage file,
 * shared by the leader (ha/replication.c) and the standby (ha/follower.c).
 *
 * Every frame is a 32-byte header (big endian) and a payload:
 *   magic "KVFR" | version 1 | type | 0 (2 bytes) | payload bytes (4)
 *   | count (4) | view (8) | seq (8)
 * HELLO (standby): seq = its journal's last sequence, view = its
 *   lineage's last view; payload = cluster id, token, member, each a
 *   2-byte length and its bytes.
 * WELCOME (leader): view = the leader's, seq = its last sequence;
 *   payload = its lineage, count entries of (view, seq).
 * REFUSE (leader): payload = why, as text; the connection is closed.
 * RECORDS (leader): view, seq = the batch's first sequence, count = its
 *   log frames; payload = the record count (8 bytes), then the frames as
 *   the journal encodes them (journal/record.h).
 * ACK (standby): seq = the last sequence durable in its journal.
 * HEARTBEAT (leader): seq = the leader's last sequence.
 * STATE (leader): count = a state item (0..KVF_REPL_STATE_MAX-1), seq =
 *   its generation on this leader; payload = the item's whole content,
 *   opaque to replication (the master's segment table, its metadata
 *   store), sent after the handshake and again whenever it changes.
 * STATE_ACK (standby): count = the item, seq = the generation applied.
 * A standby whose next record the leader's backlog no longer holds gets
 * a snapshot instead, right after the WELCOME, then RECORDS from the
 * snapshot's sequence on:
 * SNAP_WAIT (leader): no payload; the snapshot is being read (the
 *   standby waits longer than a heartbeat's interval for the next frame).
 * SNAP_BEGIN (leader): seq = S, the last sequence the snapshot covers;
 *   payload = K, its record count (8 bytes, K <= S).
 * SNAP_RECORDS (leader): seq = S; payload as RECORDS.
 * SNAP_END (leader): seq = S; the standby installs the snapshot as its
 *   journal (ending at S) and acknowledges S.
 */
#ifndef KVF_HA_REPL_WIRE_H
#define KVF_HA_REPL_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KVF_REPL_MAGIC 0x4b564652u /* "KVFR" */
#define KVF_REPL_VERSION 1u
#define KVF_REPL_HDR 32u
/* Largest payload of a RECORDS frame, and of any other frame. */
#define KVF_REPL_RECORDS_MAX (64u << 20)
#define KVF_REPL_SMALL_MAX (64u << 10)
/* Lineage entries kept (the oldest are dropped). */
#define KVF_REPL_LINEAGE_MAX 1024u

enum kvf_repl_type {
	KVF_REPL_HELLO = 1,
	KVF_REPL_WELCOME = 2,
	KVF_REPL_REFUSE = 3,
	KVF_REPL_RECORDS = 4,
	KVF_REPL_ACK = 5,
	KVF_REPL_HEARTBEAT = 6,
	KVF_REPL_STATE = 7,
	KVF_REPL_STATE_ACK = 8,
	KVF_REPL_SNAP_WAIT = 9,
	KVF_REPL_SNAP_BEGIN = 10,
	KVF_REPL_SNAP_RECORDS = 11,
	KVF_REPL_SNAP_END = 12,
};

/* State items a leader replicates besides its journal. */
#define KVF_REPL_STATE_MAX 4u

struct kvf_repl_hdr {
	uint8_t type;
	uint32_t len, count;
	uint64_t view, seq;
};

void kvf__repl_hdr_put(uint8_t *buf, const struct kvf_repl_hdr *h);
/* Decode and check magic, version, type and size: false if malformed. */
bool kvf__repl_hdr_get(const uint8_t *buf, struct kvf_repl_hdr *h);

/* Whole-buffer socket I/O: 0, or -1 (error, timeout, EOF). */
struct iovec;
/* All of @v[0..@cnt) (modified on the way), in one writev() if it fits. */
int kvf__repl_writev(int fd, struct iovec *v, int cnt);
int kvf__repl_write(int fd, const void *a, size_t alen, const void *b,
		    size_t blen);
int kvf__repl_read(int fd, void *buf, size_t len);
/* Read one frame; *@payload is malloc'ed (NULL when empty), at most
 * @max bytes. 0, -1 (I/O) or -2 (malformed or oversized). */
int kvf__repl_read_frame(int fd, struct kvf_repl_hdr *h, uint8_t **payload,
			 uint32_t max);
/* Send a frame with a small payload. */
int kvf__repl_send(int fd, uint8_t type, uint64_t view, uint64_t seq,
		   uint32_t count, const void *payload, uint32_t len);

/* The cluster id as the election resolves it, into @buf. */
void kvf__repl_cluster(const char *cluster_id, char *buf, size_t len);
/* "kvforge/<cluster>/replication/leader" into @buf; its length. */
size_t kvf__repl_leader_key(const char *cluster, char *buf, size_t len);

/*
 * One batch of records as the journal encoded it: the leader's backlog
 * (ha/replication.c) holds them, a standby keeps the ones it applied in
 * a list (@next) that becomes its backlog if it is promoted.
 */
struct kvf_repl_batch {
	struct kvf_repl_batch *next;
	uint64_t first, nr_recs;
	uint32_t nr_frames;
	uint32_t refs; /* the leader's senders writing it; under its mu */
	bool in_ring;  /* in the leader's ring; under its mu */
	size_t len;
	uint8_t data[];
};

struct kvf_repl_lineage_entry {
	uint64_t view; /* a view this history went through */
	uint64_t seq;  /* the last sequence written before it began */
};

struct kvf_repl_lineage {
	uint32_t n;
	struct kvf_repl_lineage_entry e[KVF_REPL_LINEAGE_MAX];
};

/* Load DIR/ha-lineage (absent: empty). 0 or -1 (unreadable, damaged). */
int kvf__repl_lineage_load(const char *dir, struct kvf_repl_lineage *lin);
/* Replace it atomically and durably. 0 or -1. */
int kvf__repl_lineage_save(const char *dir, const struct kvf_repl_lineage *lin);
/* Append (view, seq), dropping the oldest entry when full. */
void kvf__repl_lineage_add(struct kvf_repl_lineage *lin, uint64_t view,
			   uint64_t seq);
/* The last view of @lin (0 when empty). */
uint64_t kvf__repl_lineage_view(const struct kvf_repl_lineage *lin);
/*
 * May a journal ending at @seq whose history last followed @view be
 * extended with this history (@lin, ending at @last)? True when its
 * records are a prefix of ours: @view is in @lin and @seq is not past
 * where @view's part of our history ended.
 */
bool kvf__repl_lineage_accepts(const struct kvf_repl_lineage *lin,
			       uint64_t last, uint64_t view, uint64_t seq);

#endif /* KVF_HA_REPL_WIRE_H */
