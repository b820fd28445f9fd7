# SPDX-License-Identifier: MIT
#
# kvforge-master: a drop-in Mooncake Store master on the KVForge engine.
# The server's pieces live in one convenience library (tests link it);
# server/wire.mk adds the protocol codec, server/http.mk the HTTP servers.
noinst_LTLIBRARIES += libkvforge-master.la
libkvforge_master_la_SOURCES = server/rpc_list.h
libkvforge_master_la_LIBADD = libkvforge-core.la
