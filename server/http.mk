# SPDX-License-Identifier: MIT
#
# kvforge-master's HTTP side: the metrics registry, the HTTP/1.1 servers
# (metrics and health, the transfer engine's metadata service) and their
# tests.
libkvforge_master_la_SOURCES += server/metrics.h server/http.h
libkvforge_master_la_SOURCES += server/metrics.c server/http.c \
	server/metastore.h server/metastore.c
