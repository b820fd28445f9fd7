# SPDX-License-Identifier: MIT
#
# kvforge-master: a drop-in Mooncake Store master on the KVForge engine.
# The server's pieces live in one convenience library (tests link it);
# server/wire.mk adds the protocol codec, server/http.mk the HTTP servers.
noinst_LTLIBRARIES += libkvforge-master.la
libkvforge_master_la_SOURCES = server/rpc_list.h \
	server/flags.h server/flags.c \
	server/registry.h server/registry.c \
	server/service.h server/service.c \
	server/conn.h server/conn.c \
	server/loop.h server/loop.c \
	server/stallclock.h server/stallclock.c \
	server/ha_config.h server/ha_config.c
libkvforge_master_la_LIBADD = libkvforge-core.la

bin_PROGRAMS += kvforge-master
kvforge_master_SOURCES = server/main.c
kvforge_master_LDADD = libkvforge-master.la

# End-to-end tests: the master driven by the reference Python client
# (tests/master/mc_wire_pyclient.py, a copy of the independent client).
EXTRA_DIST += tests/master/test_master_e2e.py tests/master/adversary.py \
	tests/master/mc_wire_pyclient.py tests/master/mc_wire_proxy.py
dist_noinst_SCRIPTS += tests/master/test_master_e2e.sh \
	tests/master/test_master_concurrent.sh
UNIT_TESTS += tests/master/test_master_e2e.sh
CONCURRENCY_TESTS += tests/master/test_master_concurrent.sh

if HAVE_CMOCKA
check_PROGRAMS += tests/master/test_master_flags tests/master/test_master_client \
	tests/master/test_master_registry tests/master/test_master_adversary \
	tests/master/test_master_stall
UNIT_TESTS += tests/master/test_master_flags tests/master/test_master_client \
	tests/master/test_master_registry tests/master/test_master_adversary
# The serving clock's watchdog thread: TSan too.
CONCURRENCY_TESTS += tests/master/test_master_stall
tests_master_test_master_stall_CFLAGS = $(KVF_TEST_CFLAGS)
tests_master_test_master_stall_LDADD = libkvforge-master.la $(KVF_TEST_LIBS) -lpthread
EXTRA_DIST += tests/master/test_master_call.h
tests_master_test_master_adversary_CFLAGS = $(KVF_TEST_CFLAGS)
tests_master_test_master_adversary_LDADD = libkvforge-master.la $(KVF_TEST_LIBS) -lpthread
tests_master_test_master_registry_CFLAGS = $(KVF_TEST_CFLAGS)
tests_master_test_master_registry_LDADD = libkvforge-master.la $(KVF_TEST_LIBS)
tests_master_test_master_client_CFLAGS = $(KVF_TEST_CFLAGS)
tests_master_test_master_client_LDADD = libkvforge-master.la $(KVF_TEST_LIBS)
tests_master_test_master_flags_CFLAGS = $(KVF_TEST_CFLAGS)
tests_master_test_master_flags_LDADD = libkvforge-master.la $(KVF_TEST_LIBS)
endif
