# SPDX-License-Identifier: MIT
#
# kvforge-master: a drop-in Mooncake Store master on the KVForge engine.
# The master's pieces live in one convenience library (tests link it),
# with the HTTP side (http/), the client (client/) and through it the codec
# (wire/) and HA (ha/).
noinst_LTLIBRARIES += libkvforge-master.la
libkvforge_master_la_SOURCES = \
	master/flags.h master/flags.c \
	master/registry.h master/registry.c \
	master/service.h master/service.c \
	master/conn.h master/conn.c \
	master/loop.h master/loop.c \
	master/port_claim.h master/port_claim.c \
	master/stallclock.h master/stallclock.c \
	master/ha_config.h master/ha_config.c
libkvforge_master_la_LIBADD = libkvforge-http.la libkvforge-client.la \
	libkvforge-core.la

bin_PROGRAMS += kvforge-master
kvforge_master_SOURCES = master/main.c
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
