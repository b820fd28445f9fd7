# SPDX-License-Identifier: MIT
# RDMA discovery: the verbs backend when configured with libibverbs.
libkvforge_core_la_SOURCES += rdma/rdma.h rdma/report.c
if HAVE_VERBS
libkvforge_core_la_SOURCES += rdma/verbs.c
else
libkvforge_core_la_SOURCES += rdma/none.c
endif

check_PROGRAMS += tests/unit/test_rdma
UNIT_TESTS += tests/unit/test_rdma
tests_unit_test_rdma_LDADD = libkvforge-core.la
