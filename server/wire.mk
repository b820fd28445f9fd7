# SPDX-License-Identifier: MIT
#
# The Mooncake wire codec: coro_rpc framing, struct_pack, MD5, the
# per-revision ABI tables and the typed messages (server and client side).
# Its own convenience library, so the load generator, the fuzzers and the
# codec tests link the codec without the server; the master links it too.
noinst_LTLIBRARIES += libkvforge-wire.la
libkvforge_master_la_LIBADD += libkvforge-wire.la
libkvforge_wire_la_SOURCES = \
	server/frame.h server/frame.c \
	server/spack.h server/spack.c \
	server/md5.h server/md5.c \
	server/abi.h server/abi.c server/abi_tables.h \
	server/abi_3b5a5941.c server/abi_v0_3_12_post1.c \
	server/msg.h server/msg.c \
	server/client.h server/client.c server/client_master.c
# The client finds an HA master's leader through etcd (server/client_master.c).
libkvforge_wire_la_LIBADD = libkvforge-ha.la

EXTRA_DIST += tests/master/fixtures

if HAVE_CMOCKA
# Fixture replay, ABI tables against MD5 and the TSVs, codecs against
# their type literals, bad input.
check_PROGRAMS += tests/master/test_wire
UNIT_TESTS += tests/master/test_wire
tests_master_test_wire_SOURCES = tests/master/test_wire.c
tests_master_test_wire_CFLAGS = $(KVF_TEST_CFLAGS) \
	-DKVF_FIXTURES_DIR='"$(abs_top_srcdir)/tests/master/fixtures"'
tests_master_test_wire_LDADD = libkvforge-wire.la $(KVF_TEST_LIBS)
endif

if HAVE_CMOCKA
# The C client and kvforge-bench --master against a stand-in master
# (threads: the stand-in's connections, the bench's pinger; so TSan too).
check_PROGRAMS += tests/master/test_wire_client
CONCURRENCY_TESTS += tests/master/test_wire_client
tests_master_test_wire_client_SOURCES = tests/master/test_wire_client.c
tests_master_test_wire_client_CFLAGS = $(KVF_TEST_CFLAGS) \
	-DKVF_BENCH_PATH='"$(abs_top_builddir)/tools/kvforge-bench"'
tests_master_test_wire_client_LDADD = libkvforge-wire.la $(KVF_TEST_LIBS)
endif

# libFuzzer harnesses, built and run by scripts/fuzz.sh (clang).
EXTRA_DIST += tests/fuzz/fuzz_request.c tests/fuzz/fuzz_response.c \
	scripts/fuzz.sh
