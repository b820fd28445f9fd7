# SPDX-License-Identifier: MIT
#
# The Mooncake wire codec: coro_rpc framing, struct_pack, MD5, the
# per-revision ABI tables and the typed messages (server and client side).
# Its own convenience library, so the fuzzers and the codec tests link the
# codec alone; the client (client/) and the master link it too.
noinst_LTLIBRARIES += libkvforge-wire.la
libkvforge_wire_la_SOURCES = \
	wire/frame.h wire/frame.c \
	wire/spack.h wire/spack.c \
	wire/md5.h wire/md5.c \
	wire/abi.h wire/abi.c wire/abi_tables.h \
	wire/abi_3b5a5941.c wire/abi_v0_3_12_post1.c \
	wire/msg.h wire/msg.c wire/rpc_list.h

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

# libFuzzer harnesses, built and run by scripts/fuzz.sh (clang).
EXTRA_DIST += tests/fuzz/fuzz_request.c tests/fuzz/fuzz_response.c \
	scripts/fuzz.sh
