# SPDX-License-Identifier: MIT
libkvforge_core_la_SOURCES += \
	metadata/hash.h \
	metadata/object.h \
	metadata/object.c \
	metadata/index.h \
	metadata/index_lfht.c
