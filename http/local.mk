# SPDX-License-Identifier: MIT
#
# kvforge-master's HTTP side: the metrics registry, the HTTP/1.1 servers
# (metrics and health, the transfer engine's metadata service) and their
# tests.
noinst_LTLIBRARIES += libkvforge-http.la
libkvforge_http_la_SOURCES = http/metrics.h http/metrics.c \
	http/http.h http/http.c \
	http/metastore.h http/metastore.c

EXTRA_DIST += tests/master/test_http_util.h

if HAVE_CMOCKA
KVF_HTTP_TEST_LIBS = libkvforge-master.la $(KVF_TEST_LIBS)

check_PROGRAMS += tests/master/test_metrics
UNIT_TESTS += tests/master/test_metrics
tests_master_test_metrics_CFLAGS = $(KVF_TEST_CFLAGS) \
	-DKVF_FIXTURES_DIR='"$(abs_top_srcdir)/tests/master/fixtures"'
tests_master_test_metrics_LDADD = $(KVF_HTTP_TEST_LIBS)

# test_http runs the servers' threads against the test's: TSan too.
check_PROGRAMS += tests/master/test_http
CONCURRENCY_TESTS += tests/master/test_http
tests_master_test_http_CFLAGS = $(KVF_TEST_CFLAGS)
tests_master_test_http_LDADD = $(KVF_HTTP_TEST_LIBS)

check_PROGRAMS += tests/master/test_http_concurrent
CONCURRENCY_TESTS += tests/master/test_http_concurrent
tests_master_test_http_concurrent_CFLAGS = $(KVF_TEST_CFLAGS)
tests_master_test_http_concurrent_LDADD = $(KVF_HTTP_TEST_LIBS)
endif
