# SPDX-License-Identifier: MIT
EXTRA_DIST += tests/unit/helpers.h tests/unit/index_helpers.h \
	tests/stress/audit.h \
	tests/stress/check.h

# Engine suites run once per index: the programs on the default index
# (bucket), the *_lfht.sh wrappers on lfht (KVF_TEST_INDEX, read by
# tests/unit/helpers.h, which asserts the engine runs the index named).
KVF_LFHT_TESTS = tests/unit/test_batch_lfht.sh \
	tests/unit/test_lifecycle_lfht.sh tests/unit/test_evict_lfht.sh
KVF_LFHT_CONCURRENCY_TESTS = tests/stress/test_engine_concurrent_lfht.sh
# The profiler's counter tiers, each its own run (SKIP where missing).
KVF_PROFILE_TIER_TESTS = tests/unit/test_profile_hardware.sh \
	tests/unit/test_profile_software.sh
dist_check_SCRIPTS += $(KVF_LFHT_TESTS) $(KVF_LFHT_CONCURRENCY_TESTS) \
	$(KVF_PROFILE_TIER_TESTS)

if HAVE_CMOCKA

check_PROGRAMS += tests/unit/test_durability tests/unit/test_evict \
	tests/unit/test_contracts
UNIT_TESTS += tests/unit/test_durability tests/unit/test_evict \
	tests/unit/test_contracts
tests_unit_test_evict_CFLAGS = $(KVF_TEST_CFLAGS)
tests_unit_test_evict_LDADD = $(KVF_TEST_LIBS)
tests_unit_test_durability_CFLAGS = $(KVF_TEST_CFLAGS)
tests_unit_test_durability_LDADD = $(KVF_TEST_LIBS)
tests_unit_test_contracts_CFLAGS = $(KVF_TEST_CFLAGS)
tests_unit_test_contracts_LDADD = $(KVF_TEST_LIBS)

check_PROGRAMS += tests/unit/test_batch tests/unit/test_lifecycle \
	tests/unit/test_get_paths tests/stress/test_engine_concurrent
UNIT_TESTS += tests/unit/test_batch tests/unit/test_lifecycle \
	tests/unit/test_get_paths \
	$(KVF_LFHT_TESTS) $(KVF_PROFILE_TIER_TESTS)
CONCURRENCY_TESTS += tests/stress/test_engine_concurrent \
	$(KVF_LFHT_CONCURRENCY_TESTS)

tests_unit_test_batch_CFLAGS = $(KVF_TEST_CFLAGS)
tests_unit_test_batch_LDADD = $(KVF_TEST_LIBS)
tests_unit_test_get_paths_CFLAGS = $(KVF_TEST_CFLAGS)
tests_unit_test_get_paths_LDADD = $(KVF_TEST_LIBS)
tests_unit_test_lifecycle_CFLAGS = $(KVF_TEST_CFLAGS)
tests_unit_test_lifecycle_LDADD = $(KVF_TEST_LIBS)
tests_stress_test_engine_concurrent_CFLAGS = $(KVF_TEST_CFLAGS)
tests_stress_test_engine_concurrent_LDADD = $(KVF_TEST_LIBS)
endif

# Engine crash harness: SIGKILL an engine mid-batch, recover, compare with
# what was acknowledged. Plain exit-code test; not under TSan (it forks).
check_PROGRAMS += tests/stress/test_engine_crash
UNIT_TESTS += tests/stress/test_engine_crash
tests_stress_test_engine_crash_LDADD = libkvforge-core.la

# Engine defects' regression tests (each loops over both index kinds).
if HAVE_CMOCKA
# Concurrent put_start of one key (both index kinds inside the program).
check_PROGRAMS += tests/stress/test_put_race
CONCURRENCY_TESTS += tests/stress/test_put_race
tests_stress_test_put_race_CFLAGS = $(KVF_TEST_CFLAGS)
tests_stress_test_put_race_LDADD = $(KVF_TEST_LIBS)

# Unmounts racing puts and removes, then close and reopen (both index
# kinds and both journaled durability modes inside the program).
check_PROGRAMS += tests/stress/test_unmount_replay
CONCURRENCY_TESTS += tests/stress/test_unmount_replay
tests_stress_test_unmount_replay_CFLAGS = $(KVF_TEST_CFLAGS)
tests_stress_test_unmount_replay_LDADD = $(KVF_TEST_LIBS)

# Soft pin deadlines and recency across a reopen (both index kinds and
# both journaled modes inside the program).
check_PROGRAMS += tests/unit/test_pin_replay
UNIT_TESTS += tests/unit/test_pin_replay
tests_unit_test_pin_replay_CFLAGS = $(KVF_TEST_CFLAGS)
tests_unit_test_pin_replay_LDADD = $(KVF_TEST_LIBS)

# Journals that decode but cannot be applied are refused, not fatal.
check_PROGRAMS += tests/unit/test_replay_refusal
UNIT_TESTS += tests/unit/test_replay_refusal
tests_unit_test_replay_refusal_CFLAGS = $(KVF_TEST_CFLAGS)
tests_unit_test_replay_refusal_LDADD = $(KVF_TEST_LIBS)

# The image replicas' radix sort against a stable comparison sort.
check_PROGRAMS += tests/unit/test_replay_sort
UNIT_TESTS += tests/unit/test_replay_sort
tests_unit_test_replay_sort_CFLAGS = $(KVF_TEST_CFLAGS)
tests_unit_test_replay_sort_LDADD = $(KVF_TEST_LIBS)
endif

# Embedding: the log callback, and a host that uses urcu-memb itself
# (threads: also under TSan).
if HAVE_CMOCKA
check_PROGRAMS += tests/unit/test_embed
CONCURRENCY_TESTS += tests/unit/test_embed
tests_unit_test_embed_CFLAGS = $(KVF_TEST_CFLAGS)
tests_unit_test_embed_LDADD = $(KVF_TEST_LIBS)
endif

# The include graph against the documented layer order.
dist_check_SCRIPTS += tests/unit/test_layers.sh
UNIT_TESTS += tests/unit/test_layers.sh
EXTRA_DIST += scripts/check-layers.py

if HAVE_CMOCKA
# Removal leaves its read-side section for the journal (syncs held at a
# gate the program defines), and the segment-walking sweep.
check_PROGRAMS += tests/unit/test_remove_rcu
UNIT_TESTS += tests/unit/test_remove_rcu
tests_unit_test_remove_rcu_CFLAGS = $(KVF_TEST_CFLAGS)
tests_unit_test_remove_rcu_LDADD = $(KVF_TEST_LIBS)

# Batch segment mount: per-item answers, against single mounts, across a
# reopen, and readers walking the table while batches are published.
check_PROGRAMS += tests/unit/test_segment_batch
CONCURRENCY_TESTS += tests/unit/test_segment_batch
tests_unit_test_segment_batch_CFLAGS = $(KVF_TEST_CFLAGS)
tests_unit_test_segment_batch_LDADD = $(KVF_TEST_LIBS)
endif
