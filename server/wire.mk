# SPDX-License-Identifier: MIT
#
# The Mooncake wire codec: coro_rpc framing, struct_pack, MD5, the
# per-revision ABI tables and the typed messages (server and client side).
libkvforge_master_la_SOURCES += \
	server/frame.h server/frame.c \
	server/spack.h server/spack.c \
	server/md5.h server/md5.c \
	server/abi.h server/abi.c server/abi_tables.h \
	server/abi_3b5a5941.c server/abi_v0_3_12_post1.c \
	server/msg.h server/msg.c
