# SPDX-License-Identifier: MIT
libkvforge_core_la_SOURCES += \
	engine/internal.h \
	engine/mutation.h \
	engine/replication.h \
	engine/engine.c \
	engine/segment.c \
	engine/replica_drop.h \
	engine/replica_drop.c \
	engine/buffers.c \
	engine/journal_glue.c \
	engine/recovery.c \
	engine/replay_sort.h \
	engine/replay_sort.c \
	engine/evict.c \
	engine/remove.h \
	engine/remove.c
