# SPDX-License-Identifier: MIT
kvforgeinclude_HEADERS += \
	include/kvforge/status.h \
	include/kvforge/log.h \
	include/kvforge/engine.h \
	include/kvforge/segment.h \
	include/kvforge/batch.h \
	include/kvforge/profile.h \
	include/kvforge/rdma.h

# The public headers as a C++11 program uses them, warnings as errors,
# linked against the shared library (its exported symbols only).
EXTRA_DIST += tests/unit/test_api_cxx_skip.sh
if HAVE_CXX
check_PROGRAMS += tests/unit/test_api_cxx
UNIT_TESTS += tests/unit/test_api_cxx
tests_unit_test_api_cxx_SOURCES = tests/unit/test_api_cxx.cc
tests_unit_test_api_cxx_CXXFLAGS = -std=c++11 -Wall -Wextra -Wpedantic \
	-Werror $(SAN_CFLAGS)
tests_unit_test_api_cxx_LDADD = libkvforge.la
else
UNIT_TESTS += tests/unit/test_api_cxx_skip.sh
endif

# The growable structs (config, stats) across older and newer layouts.
if HAVE_CMOCKA
check_PROGRAMS += tests/unit/test_abi
UNIT_TESTS += tests/unit/test_abi
tests_unit_test_abi_CFLAGS = $(KVF_TEST_CFLAGS)
tests_unit_test_abi_LDADD = $(KVF_TEST_LIBS)
endif

# Every per-item error the batch headers document that a memory-only
# engine can provoke, one mixed batch per call.
if HAVE_CMOCKA
check_PROGRAMS += tests/unit/test_item_errors
UNIT_TESTS += tests/unit/test_item_errors
tests_unit_test_item_errors_CFLAGS = $(KVF_TEST_CFLAGS)
tests_unit_test_item_errors_LDADD = $(KVF_TEST_LIBS)
endif
