/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_rdma_hw.c - the transport on a real device: two QPs on
 * port 1 of the first usable device, connected through the same
 * handshake code, replay every captured coro_rpc pair, carry a message
 * larger than a buffer and close with a zero-length SEND. This is what
 * the fake fabric cannot prove: that the driver accepts our attributes
 * (masks, caps, MTU, GRH with the chosen GID) and memory registration
 * within the memlock limit. Without a device: exit 77 (SKIP).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <kvforge/status.h>

#include "tests/rdma/pair.h"

#define CHECK(cond)                                                            \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__,          \
				__LINE__, #cond);                              \
			return 1;                                              \
		}                                                              \
	} while (0)

static int replay_all(struct kvf__rdma_dev *dev)
{
	static const char *const dirs[] = {
		"cpp-client", "cpp-client-release-form", "py-reference"};

	for (int i = 0; i < 3; i++) {
		struct fixture_set set;
		struct kvf__rdma_stream *c, *s;
		struct replay r;
		long bad;

		CHECK(!fixtures_load(dirs[i], &set));
		CHECK(pair_connect(dev, NULL, NULL, &c, &s) == KVF_OK);
		replay_init(&r, c, s, &set, 4096);
		bad = replay_run(&r);
		replay_free(&r);
		kvf__rdma_stream_close(c);
		kvf__rdma_stream_close(s);
		fixtures_free(&set);
		CHECK(bad == 0);
		printf("ok %s: %zu pairs byte-identical\n", dirs[i], set.n);
	}
	return 0;
}

static int large_message(struct kvf__rdma_dev *dev)
{
	size_t len = 600 * 1024, have = 0;
	uint8_t *msg = malloc(len), *got = malloc(len);
	struct kvf__rdma_stream *c, *s;
	struct iovec v;
	int ret = 1;

	CHECK(msg && got);
	for (size_t i = 0; i < len; i++)
		msg[i] = (uint8_t)(i * 131 + 7);
	CHECK(pair_connect(dev, NULL, NULL, &c, &s) == KVF_OK);
	v.iov_base = msg;
	v.iov_len = len;
	for (long spins = 0; have < len && spins < 100000000; spins++) {
		ssize_t r;

		if (v.iov_len) {
			ssize_t w = kvf__rdma_stream_writev(c, &v, 1);

			if (w > 0) {
				v.iov_base = (uint8_t *)v.iov_base + w;
				v.iov_len -= (size_t)w;
			} else if (w != KVF_ERR_BUSY) {
				break;
			}
		}
		if (kvf__rdma_stream_progress(s) ||
		    kvf__rdma_stream_progress(c))
			break;
		r = kvf__rdma_stream_read(s, got + have, len - have);
		if (r > 0)
			have += (size_t)r;
		else if (r != KVF_ERR_BUSY)
			break;
	}
	if (have == len && !memcmp(msg, got, len))
		ret = 0;
	kvf__rdma_stream_close(c);
	kvf__rdma_stream_close(s);
	free(msg);
	free(got);
	CHECK(ret == 0);
	printf("ok 600 KiB message\n");
	return 0;
}

int main(void)
{
	const struct kvf__verbs_ops *ibv;
	struct kvf__rdma_dev *dev;
	char why[160] = "";

	ibv = kvf__verbs_ibv(why, sizeof(why));
	if (!ibv || kvf__rdma_dev_open(ibv, &dev, why, sizeof(why))) {
		printf("1..0 # SKIP no RDMA device: %s\n", why);
		return 77;
	}
	printf("device %s, GID index %u, LID %u, MTU enum %d\n", dev->name,
	       dev->gid_index, dev->lid, (int)dev->mtu);
	if (replay_all(dev) || large_message(dev)) {
		kvf__rdma_dev_close(dev);
		return 1;
	}
	kvf__rdma_dev_close(dev);
	return 0;
}
