# SPDX-License-Identifier: MIT
libkvforge_core_la_SOURCES += \
	profiling/stage.h \
	profiling/profile.c
