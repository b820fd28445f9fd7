# SPDX-License-Identifier: MIT
libkvforge_core_la_SOURCES += \
	batch/batch.h \
	batch/validate.c \
	batch/commit.c \
	batch/put.c \
	batch/get.c \
	batch/remove.c
