# SPDX-License-Identifier: MIT
# RDMA: discovery, and the coro_rpc ibverbs transport (libibverbs loaded at
# run time, or the in-process fake fabric) when verbs.h is available.
libkvforge_core_la_SOURCES += rdma/rdma.h rdma/report.c rdma/handshake.c \
	rdma/listener.h
if HAVE_VERBS
libkvforge_core_la_SOURCES += rdma/ops.h rdma/verbs.c rdma/device.c \
	rdma/stream.h rdma/stream.c rdma/listener.c
# The in-process fake fabric (with its fault injection) is a test double:
# only the tests link it, never libkvforge.
noinst_LTLIBRARIES += libkvforge-rdmafake.la
libkvforge_rdmafake_la_SOURCES = rdma/fake.h rdma/fake.c
else
libkvforge_core_la_SOURCES += rdma/none.c
endif

check_PROGRAMS += tests/unit/test_rdma
UNIT_TESTS += tests/unit/test_rdma
tests_unit_test_rdma_LDADD = libkvforge-core.la

EXTRA_DIST += tests/rdma/fixtures scripts/rdma-check.sh
dist_noinst_SCRIPTS += scripts/rdma-check.sh

if HAVE_VERBS
if HAVE_CMOCKA
KVF_RDMA_TEST_CFLAGS = $(KVF_TEST_CFLAGS) \
	-DKVF_RDMA_FIXTURES='"$(abs_top_srcdir)/tests/rdma/fixtures"'
KVF_RDMA_TEST_LIBS = libkvforge-rdmafake.la $(KVF_TEST_LIBS)

check_PROGRAMS += tests/unit/test_rdma_wire tests/unit/test_rdma_fake \
	tests/unit/test_rdma_stream tests/unit/test_rdma_ibv \
	tests/unit/test_rdma_hw tests/unit/test_rdma_listener \
	tests/unit/test_rdma_peer tests/unit/test_rdma_threads
UNIT_TESTS += tests/unit/test_rdma_wire tests/unit/test_rdma_fake \
	tests/unit/test_rdma_stream tests/unit/test_rdma_ibv \
	tests/unit/test_rdma_hw tests/unit/test_rdma_listener \
	tests/unit/test_rdma_peer
CONCURRENCY_TESTS += tests/unit/test_rdma_threads

tests_unit_test_rdma_wire_CFLAGS = $(KVF_RDMA_TEST_CFLAGS)
tests_unit_test_rdma_wire_LDADD = $(KVF_RDMA_TEST_LIBS)
tests_unit_test_rdma_fake_CFLAGS = $(KVF_RDMA_TEST_CFLAGS)
tests_unit_test_rdma_fake_LDADD = $(KVF_RDMA_TEST_LIBS)
tests_unit_test_rdma_stream_SOURCES = tests/unit/test_rdma_stream.c \
	tests/rdma/pair.c tests/rdma/pair.h
tests_unit_test_rdma_stream_CFLAGS = $(KVF_RDMA_TEST_CFLAGS)
tests_unit_test_rdma_stream_LDADD = $(KVF_RDMA_TEST_LIBS)
tests_unit_test_rdma_listener_CFLAGS = $(KVF_RDMA_TEST_CFLAGS)
tests_unit_test_rdma_listener_LDADD = $(KVF_RDMA_TEST_LIBS)
tests_unit_test_rdma_ibv_CFLAGS = $(KVF_RDMA_TEST_CFLAGS)
tests_unit_test_rdma_ibv_LDADD = $(KVF_RDMA_TEST_LIBS)
tests_unit_test_rdma_hw_SOURCES = tests/unit/test_rdma_hw.c \
	tests/rdma/pair.c tests/rdma/pair.h
tests_unit_test_rdma_hw_CFLAGS = $(KVF_RDMA_TEST_CFLAGS)
tests_unit_test_rdma_hw_LDADD = $(KVF_RDMA_TEST_LIBS)
tests_unit_test_rdma_peer_SOURCES = tests/unit/test_rdma_peer.c \
	tests/rdma/pair.c tests/rdma/pair.h
tests_unit_test_rdma_peer_CFLAGS = $(KVF_RDMA_TEST_CFLAGS)
tests_unit_test_rdma_peer_LDADD = $(KVF_RDMA_TEST_LIBS)
# The master's RPC loop serving RDMA on the fake fabric (in-process).
check_PROGRAMS += tests/unit/test_rdma_master
UNIT_TESTS += tests/unit/test_rdma_master
CONCURRENCY_TESTS += tests/unit/test_rdma_master
tests_unit_test_rdma_master_SOURCES = tests/unit/test_rdma_master.c \
	tests/rdma/pair.c tests/rdma/pair.h
tests_unit_test_rdma_master_CFLAGS = $(KVF_RDMA_TEST_CFLAGS)
tests_unit_test_rdma_master_LDADD = libkvforge-master.la $(KVF_RDMA_TEST_LIBS)
tests_unit_test_rdma_threads_SOURCES = tests/unit/test_rdma_threads.c \
	tests/rdma/pair.c tests/rdma/pair.h
tests_unit_test_rdma_threads_CFLAGS = $(KVF_RDMA_TEST_CFLAGS)
tests_unit_test_rdma_threads_LDADD = $(KVF_RDMA_TEST_LIBS)
endif
endif
