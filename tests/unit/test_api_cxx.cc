// SPDX-License-Identifier: MIT
/*
 * tests/unit/test_api_cxx.cc - the public headers as a C++11 caller sees
 * them, built with -Werror: every call that returns a status and every
 * per-item status array element goes into one kvf_status variable with
 * no cast, and the growable structs round-trip their sizes. Runs a small
 * memory-only engine so the calls are linked and executed, not just
 * declared.
 */
#include <kvforge.h>

#include <cstdio>
#include <cstring>

static int failures;

#define CHECK(cond)                                                            \
	do {                                                                   \
		if (!(cond)) {                                                 \
			std::fprintf(stderr, "%s:%d: %s\n", __FILE__,          \
				     __LINE__, #cond);                         \
			failures++;                                            \
		}                                                              \
	} while (0)

int main()
{
	kvf_config cfg;
	kvf_config_init(&cfg);
	CHECK(cfg.struct_size == sizeof(cfg));
	cfg.background = false;

	kvf_engine *e = nullptr;
	kvf_status s = kvf_engine_open(&cfg, &e);
	CHECK(s == KVF_OK);
	if (s != KVF_OK)
		return 1;

	kvf_segment_desc seg = {};
	seg.id = 1;
	seg.name = "seg";
	seg.base = 1ull << 30;
	seg.size = 4ull << 20;
	seg.endpoint = "";
	s = kvf_segment_mount(e, 7, &seg);
	CHECK(s == KVF_OK);
	s = kvf_client_heartbeat(e, 7);
	CHECK(s == KVF_OK);

	kvf_key keys[2] = { { "a", 1 }, { "b", 1 } };
	uint64_t sizes[2] = { 4096, 0 };
	kvf_put_config pc = {};
	pc.replica_num = 1;
	kvf_replicas out[2];
	kvf_status st[2];

	s = kvf_batch_put_start(e, 7, keys, sizes, 2, &pc, out, st);
	CHECK(s == KVF_ERR_PARTIAL);
	s = st[0];
	CHECK(s == KVF_OK);
	s = st[1];
	CHECK(s == KVF_ERR_INVALID_PARAMS);
	CHECK(std::strcmp(kvf_status_name(s), "KVF_ERR_INVALID_PARAMS") == 0);
	CHECK(kvf_strerror(s)[0] != '\0');

	s = kvf_batch_put_end(e, 7, keys, 1, st);
	CHECK(s == KVF_OK && st[0] == KVF_OK);
	s = kvf_batch_get(e, keys, 1, out, st, nullptr);
	CHECK(s == KVF_OK && out[0].count == 1);
	s = kvf_batch_exist(e, keys, 2, st);
	CHECK(s == KVF_OK && st[1] == KVF_ERR_OBJECT_NOT_FOUND);

	kvf_engine_stats stats;
	s = kvf_engine_get_stats(e, &stats);
	CHECK(s == KVF_OK && stats.struct_size == sizeof(stats));
	CHECK(stats.objects == 1 && stats.segments == 1);

	kvf_segment_info info;
	s = kvf_segment_query(e, 1, &info);
	CHECK(s == KVF_OK && info.client_id == 7);
	CHECK(info.struct_size == sizeof(info));

	kvf_rdma_info rdma;
	s = kvf_rdma_probe(&rdma, nullptr, nullptr);
	CHECK(s == KVF_OK && rdma.struct_size == sizeof(rdma));

	s = kvf_batch_remove(e, keys, 1, true, st);
	CHECK(s == KVF_OK);
	uint64_t removed = 0;
	s = kvf_remove_all(e, true, &removed);
	CHECK(s == KVF_OK && removed == 0);
	s = kvf_engine_tick(e);
	CHECK(s == KVF_OK);
	s = kvf_client_unregister(e, 7);
	CHECK(s == KVF_OK);

	// The call shares the struct's name, so C++ needs the tag here.
	struct kvf_profile_snapshot *snap = nullptr;
	s = kvf_profile_snapshot(kvf_engine_profiler(e), &snap);
	CHECK(s == KVF_OK);
	kvf_profile_snapshot_free(snap);

	kvf_engine_close(e);
	s = kvf_thread_register();
	CHECK(s == KVF_OK);
	kvf_thread_unregister();

	CHECK(std::strcmp(kvf_version(), KVF_VERSION_STRING) == 0);
	return failures ? 1 : 0;
}
