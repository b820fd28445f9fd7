# SPDX-License-Identifier: MIT
libkvforge_core_la_SOURCES += \
	engine/die.h \
	engine/die.c \
	engine/rcu.h \
	engine/rcu.c \
	engine/status.c
