# SPDX-License-Identifier: MIT
libkvforge_core_la_SOURCES += \
	journal/journal.h \
	journal/jint.h \
	journal/record.c \
	journal/image.c \
	journal/journal.c \
	journal/writer.c

bin_PROGRAMS += tools/kvforge-inspect
tools_kvforge_inspect_SOURCES = tools/kvforge-inspect.c
tools_kvforge_inspect_LDADD = libkvforge-core.la
