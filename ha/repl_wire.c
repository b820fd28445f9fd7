// SPDX-License-Identifier: MIT
/*
 * ha/repl_wire.c - frames of the replication stream and the lineage file
 * (formats in ha/repl_wire.h).
 *
 * Frames are read header first; the payload is allocated only after the
 * header passed its checks, and never beyond the caller's bound, so a
 * stranger cannot make a master allocate more than that bound.
 *
 * The lineage file is text ("kvforge-lineage 1", then one "view seq"
 * line per entry), replaced with write, fsync, rename, fsync of the
 * directory, so a crash leaves the old or the new file, never a mix.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "ha/repl_wire.h"

#define LINEAGE_FILE "ha-lineage"
#define LINEAGE_HEAD "kvforge-lineage 1"

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
}

static void put64(uint8_t *p, uint64_t v)
{
	put32(p, (uint32_t)(v >> 32));
	put32(p + 4, (uint32_t)v);
}

static uint64_t get64(const uint8_t *p)
{
	return (uint64_t)get32(p) << 32 | get32(p + 4);
}

void kvf__repl_hdr_put(uint8_t *buf, const struct kvf_repl_hdr *h)
{
	put32(buf, KVF_REPL_MAGIC);
	buf[4] = KVF_REPL_VERSION;
	buf[5] = h->type;
	buf[6] = buf[7] = 0;
	put32(buf + 8, h->len);
	put32(buf + 12, h->count);
	put64(buf + 16, h->view);
	put64(buf + 24, h->seq);
}

bool kvf__repl_hdr_get(const uint8_t *buf, struct kvf_repl_hdr *h)
{
	if (get32(buf) != KVF_REPL_MAGIC || buf[4] != KVF_REPL_VERSION ||
	    buf[6] || buf[7])
		return false;
	h->type = buf[5];
	h->len = get32(buf + 8);
	h->count = get32(buf + 12);
	h->view = get64(buf + 16);
	h->seq = get64(buf + 24);
	if (h->type < KVF_REPL_HELLO || h->type > KVF_REPL_SNAP_END)
		return false;
	if (h->type == KVF_REPL_STATE || h->type == KVF_REPL_STATE_ACK) {
		if (h->count >= KVF_REPL_STATE_MAX)
			return false;
	}
	return h->len <=
	       (h->type == KVF_REPL_RECORDS || h->type == KVF_REPL_STATE ||
			       h->type == KVF_REPL_SNAP_RECORDS
			? KVF_REPL_RECORDS_MAX
			: KVF_REPL_SMALL_MAX);
}

int kvf__repl_write(int fd, const void *a, size_t alen, const void *b,
		    size_t blen)
{
	struct iovec iov[2] = {{(void *)a, alen}, {(void *)b, blen}};

	return kvf__repl_writev(fd, iov, blen ? 2 : 1);
}

int kvf__repl_writev(int fd, struct iovec *v, int cnt)
{
	while (cnt) {
		ssize_t n = writev(fd, v, cnt);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		while (cnt && (size_t)n >= v->iov_len) {
			n -= (ssize_t)v->iov_len;
			v++;
			cnt--;
		}
		if (cnt) {
			v->iov_base = (uint8_t *)v->iov_base + n;
			v->iov_len -= (size_t)n;
		}
	}
	return 0;
}

int kvf__repl_read(int fd, void *buf, size_t len)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n = recv(fd, p, len, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int kvf__repl_read_frame(int fd, struct kvf_repl_hdr *h, uint8_t **payload,
			 uint32_t max)
{
	uint8_t hdr[KVF_REPL_HDR];

	*payload = NULL;
	if (kvf__repl_read(fd, hdr, sizeof(hdr)))
		return -1;
	if (!kvf__repl_hdr_get(hdr, h) || h->len > max)
		return -2;
	if (!h->len)
		return 0;
	*payload = malloc(h->len);
	if (!*payload)
		return -1;
	if (kvf__repl_read(fd, *payload, h->len)) {
		free(*payload);
		*payload = NULL;
		return -1;
	}
	return 0;
}

int kvf__repl_send(int fd, uint8_t type, uint64_t view, uint64_t seq,
		   uint32_t count, const void *payload, uint32_t len)
{
	struct kvf_repl_hdr h = {.type = type,
				 .len = len,
				 .count = count,
				 .view = view,
				 .seq = seq};
	uint8_t hdr[KVF_REPL_HDR];

	kvf__repl_hdr_put(hdr, &h);
	return kvf__repl_write(fd, hdr, sizeof(hdr), payload, len);
}

void kvf__repl_cluster(const char *cluster_id, char *buf, size_t len)
{
	const char *c = cluster_id && *cluster_id
				? cluster_id
				: getenv("MC_STORE_CLUSTER_ID");
	size_t n;

	if (!c || !*c)
		c = "mooncake_cluster";
	snprintf(buf, len, "%s", c);
	n = strlen(buf);
	if (n > 1 && buf[n - 1] == '/') /* as the election key */
		buf[n - 1] = '\0';
}

size_t kvf__repl_leader_key(const char *cluster, char *buf, size_t len)
{
	int n = snprintf(buf, len, "kvforge/%s/replication/leader", cluster);

	return n > 0 && (size_t)n < len ? (size_t)n : 0;
}

int kvf__repl_lineage_load(const char *dir, struct kvf_repl_lineage *lin)
{
	char path[4096], line[128];
	FILE *f;
	int ret = 0;

	lin->n = 0;
	snprintf(path, sizeof(path), "%s/" LINEAGE_FILE, dir);
	f = fopen(path, "r");
	if (!f)
		return errno == ENOENT ? 0 : -1;
	if (!fgets(line, sizeof(line), f) ||
	    strncmp(line, LINEAGE_HEAD "\n", sizeof(LINEAGE_HEAD)))
		ret = -1;
	while (!ret && fgets(line, sizeof(line), f)) {
		uint64_t v, s;

		if (sscanf(line, "%" SCNu64 " %" SCNu64, &v, &s) != 2 ||
		    (lin->n && v <= lin->e[lin->n - 1].view)) {
			ret = -1;
			break;
		}
		kvf__repl_lineage_add(lin, v, s);
	}
	fclose(f);
	return ret;
}

int kvf__repl_lineage_save(const char *dir, const struct kvf_repl_lineage *lin)
{
	char path[4096], tmp[4096];
	FILE *f;
	int fd, ret = 0;

	snprintf(path, sizeof(path), "%s/" LINEAGE_FILE, dir);
	snprintf(tmp, sizeof(tmp), "%s/" LINEAGE_FILE ".tmp", dir);
	f = fopen(tmp, "w");
	if (!f)
		return -1;
	fprintf(f, LINEAGE_HEAD "\n");
	for (uint32_t i = 0; i < lin->n; i++)
		fprintf(f, "%" PRIu64 " %" PRIu64 "\n", lin->e[i].view,
			lin->e[i].seq);
	if (fflush(f) || fsync(fileno(f)))
		ret = -1;
	if (fclose(f))
		ret = -1;
	if (!ret && rename(tmp, path))
		ret = -1;
	if (ret)
		return -1;
	fd = open(dir, O_RDONLY | O_DIRECTORY);
	if (fd < 0)
		return -1;
	ret = fsync(fd) ? -1 : 0;
	close(fd);
	return ret;
}

void kvf__repl_lineage_add(struct kvf_repl_lineage *lin, uint64_t view,
			   uint64_t seq)
{
	if (lin->n == KVF_REPL_LINEAGE_MAX) {
		memmove(lin->e, lin->e + 1, (lin->n - 1) * sizeof(lin->e[0]));
		lin->n--;
	}
	lin->e[lin->n].view = view;
	lin->e[lin->n].seq = seq;
	lin->n++;
}

uint64_t kvf__repl_lineage_view(const struct kvf_repl_lineage *lin)
{
	return lin->n ? lin->e[lin->n - 1].view : 0;
}

bool kvf__repl_lineage_accepts(const struct kvf_repl_lineage *lin,
			       uint64_t last, uint64_t view, uint64_t seq)
{
	uint64_t end = last;

	if (seq > last)
		return false;
	if (!view) /* never followed: the history before the first view */
		return !lin->n || seq <= lin->e[0].seq;
	for (uint32_t i = 0; i < lin->n; i++) {
		if (lin->e[i].view != view)
			continue;
		if (i + 1 < lin->n)
			end = lin->e[i + 1].seq;
		return seq <= end;
	}
	return false;
}
