# SPDX-License-Identifier: MIT
libkvforge_core_la_SOURCES += \
	batch/batch.h \
	batch/validate.c \
	batch/commit.c \
	batch/put.c \
	batch/put_hint.h \
	batch/put_hint.c \
	batch/get.c \
	batch/remove.c

if HAVE_CMOCKA
check_PROGRAMS += tests/unit/test_put_hint
UNIT_TESTS += tests/unit/test_put_hint
tests_unit_test_put_hint_CFLAGS = $(KVF_TEST_CFLAGS)
tests_unit_test_put_hint_LDADD = $(KVF_TEST_LIBS)
endif
