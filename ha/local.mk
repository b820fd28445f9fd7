# SPDX-License-Identifier: MIT
#
# ha/: kvforge-master's high availability - an etcd v3 client over the
# JSON gateway, the election with its fencing deadline, and replication
# of the journal to hot standbys. Its own
# convenience library (libcurl, jansson), linked into the master.
noinst_LTLIBRARIES += libkvforge-ha.la
libkvforge_ha_la_SOURCES = ha/etcd.h ha/etcd.c ha/election.h ha/election.c \
	ha/repl_wire.h ha/repl_wire.c ha/replication.h ha/replication.c \
	ha/follower.c
libkvforge_ha_la_CFLAGS = $(AM_CFLAGS) $(CURL_CFLAGS) $(JANSSON_CFLAGS)
libkvforge_ha_la_LIBADD = $(CURL_LIBS) $(JANSSON_LIBS)

if HAVE_CMOCKA
# Against a real etcd on loopback, started by the test (exit 77 without
# an etcd binary; scripts/setup.sh installs Debian's etcd-server).
KVF_HA_TEST_CFLAGS = $(KVF_TEST_CFLAGS) -DKVF_ETCD_PATH='"$(ETCD)"'
KVF_HA_TEST_LIBS = libkvforge-ha.la $(KVF_TEST_LIBS)
check_PROGRAMS += tests/ha/test_ha_etcd
UNIT_TESTS += tests/ha/test_ha_etcd
tests_ha_test_ha_etcd_SOURCES = tests/ha/test_ha_etcd.c \
	tests/ha/etcd_fixture.h tests/ha/etcd_fixture.c
tests_ha_test_ha_etcd_CFLAGS = $(KVF_HA_TEST_CFLAGS)
tests_ha_test_ha_etcd_LDADD = $(KVF_HA_TEST_LIBS)
# Two candidates in one process, a sampling thread: TSan too.
check_PROGRAMS += tests/ha/test_ha_election
CONCURRENCY_TESTS += tests/ha/test_ha_election
tests_ha_test_ha_election_SOURCES = tests/ha/test_ha_election.c \
	tests/ha/etcd_fixture.h tests/ha/etcd_fixture.c
tests_ha_test_ha_election_CFLAGS = $(KVF_HA_TEST_CFLAGS)
tests_ha_test_ha_election_LDADD = $(KVF_HA_TEST_LIBS)
endif

# kvforge-master --enable_ha end to end: etcd on loopback, masters, the
# reference Python client (tests/master/mc_wire_pyclient.py). The
# election thread, the main thread and the loop threads share the
# fencing state: TSan too. The scenarios mostly wait (leases, elections),
# so make check runs them in two shares side by side, each with its own
# ports: in the sanitizer tiers the whole suite waited on them.
EXTRA_DIST += tests/ha/test_ha_master.py
dist_noinst_SCRIPTS += tests/ha/test_ha_master.sh \
	tests/ha/test_ha_master_1of2.sh tests/ha/test_ha_master_2of2.sh
CONCURRENCY_TESTS += tests/ha/test_ha_master_1of2.sh \
	tests/ha/test_ha_master_2of2.sh
