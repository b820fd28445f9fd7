# SPDX-License-Identifier: MIT
#
# The C client of a Mooncake master: pipelined requests over TCP or RDMA,
# and finding an HA master's leader through etcd (client/client_master.c).
# Its own convenience library: the load generator and the tests link it;
# the master links it for its tests.
noinst_LTLIBRARIES += libkvforge-client.la
libkvforge_client_la_SOURCES = client/client.h client/client.c \
	client/client_master.c
libkvforge_client_la_LIBADD = libkvforge-wire.la libkvforge-ha.la

if HAVE_CMOCKA
# The C client and kvforge-bench --master against a stand-in master
# (threads: the stand-in's connections, the bench's pinger; so TSan too).
check_PROGRAMS += tests/master/test_wire_client
CONCURRENCY_TESTS += tests/master/test_wire_client
tests_master_test_wire_client_SOURCES = tests/master/test_wire_client.c
tests_master_test_wire_client_CFLAGS = $(KVF_TEST_CFLAGS) \
	-DKVF_BENCH_PATH='"$(abs_top_builddir)/tools/kvforge-bench"'
tests_master_test_wire_client_LDADD = libkvforge-client.la $(KVF_TEST_LIBS)
endif
