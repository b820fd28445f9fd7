# SPDX-License-Identifier: MIT
# base/: what every module below the public API stands on - logging and
# the fatal exit, short locks, the RCU flavour, the clock, status strings.
libkvforge_core_la_SOURCES += \
	base/abi.h \
	base/clock.h \
	base/die.h \
	base/die.c \
	base/fault.h \
	base/grow.h \
	base/lock.h \
	base/lock.c \
	base/prefetch.h \
	base/prefetch.c \
	base/rcu.h \
	base/xorshift.h \
	base/rcu.c \
	base/status.c

if HAVE_CMOCKA
check_PROGRAMS += tests/unit/test_lock
CONCURRENCY_TESTS += tests/unit/test_lock
tests_unit_test_lock_CFLAGS = $(KVF_TEST_CFLAGS)
tests_unit_test_lock_LDADD = $(KVF_TEST_LIBS)
endif
