# SPDX-License-Identifier: MIT
kvforgeinclude_HEADERS += \
	include/kvforge/status.h \
	include/kvforge/engine.h \
	include/kvforge/segment.h \
	include/kvforge/batch.h \
	include/kvforge/profile.h \
	include/kvforge/rdma.h
