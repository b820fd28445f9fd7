# SPDX-License-Identifier: MIT
#
# kvforge-master: a drop-in Mooncake Store master on the KVForge engine.
# The server's pieces live in one convenience library (tests link it);
# server/wire.mk adds the protocol codec, server/http.mk the HTTP servers.
noinst_LTLIBRARIES += libkvforge-master.la
libkvforge_master_la_SOURCES = server/rpc_list.h \
	server/flags.h server/flags.c \
	server/registry.h server/registry.c \
	server/service.h server/service.c \
	server/conn.h server/conn.c \
	server/loop.h server/loop.c
libkvforge_master_la_LIBADD = libkvforge-core.la

bin_PROGRAMS += kvforge-master
kvforge_master_SOURCES = server/main.c
kvforge_master_LDADD = libkvforge-master.la
