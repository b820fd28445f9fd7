#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# scripts/setup.sh - shared steps of the README commands. Sourced, not run.
# Every step is idempotent: it does only what is missing.

set -euo pipefail

KVF_TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
KVF_JOBS=${KVF_JOBS:-$(nproc)}

# Debian 12 packages the build, the tests and the tools need.
KVF_PACKAGES=(
	build-essential autoconf automake libtool pkg-config
	liburcu-dev liblmdb-dev lmdb-utils libcmocka-dev libxxhash-dev
	libpfm4-dev libibverbs-dev
	libcurl4-openssl-dev libjansson-dev etcd-server etcd-client
	gnuplot-nox linux-perf python3
	clang g++
)

kvf_log() { printf '== %s\n' "$*" >&2; }

kvf_install_deps() {
	local missing=() p
	for p in "${KVF_PACKAGES[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null |
			grep -q 'install ok installed' || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	kvf_log "installing: ${missing[*]}"
	local sudo=
	[ "$(id -u)" -eq 0 ] || sudo=sudo
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq \
		--no-install-recommends "${missing[@]}" >/dev/null
}

kvf_bootstrap() {
	cd "$KVF_TOP"
	if [ ! -x configure ] || [ configure.ac -nt configure ] ||
	   [ -n "$(find . -name local.mk -newer configure -print -quit)" ] ||
	   [ Makefile.am -nt configure ]; then
		kvf_log "bootstrapping (autoreconf)"
		mkdir -p m4 build-aux
		autoreconf -fi >/dev/null
	fi
}

# kvf_build DIR [configure args...]: configure once per argument set, make.
kvf_build() {
	local dir=$KVF_TOP/$1
	shift
	local args="$*"
	mkdir -p "$dir"
	if [ ! -f "$dir/Makefile" ] || [ "$(cat "$dir/.kvf-args" 2>/dev/null)" != "$args" ] ||
	   [ "$KVF_TOP/configure" -nt "$dir/Makefile" ]; then
		kvf_log "configuring $dir ($args)"
		(cd "$dir" && "$KVF_TOP/configure" --enable-werror "$@" >config.out 2>&1) || {
			tail -30 "$dir/config.out" >&2
			return 1
		}
		echo "$args" >"$dir/.kvf-args"
	fi
	kvf_log "building $dir"
	make -C "$dir" -j"$KVF_JOBS" -s >/dev/null
}

# kvf_free_port: a loopback TCP port free right now.
kvf_free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# kvf_ha_binaries: the HA scripts' programs. Sets build (KVF_PREBUILT=DIR,
# else build/ after kvf_setup_build), bin, bench and etcd_bin; exits when
# no etcd binary is installed.
kvf_ha_binaries() {
	if [ -n "${KVF_PREBUILT:-}" ]; then
		build=$(cd "$KVF_PREBUILT" && pwd)
	else
		kvf_setup_build
		build=$KVF_TOP/build
	fi
	bin=$build/kvforge-master
	bench=$build/tools/kvforge-bench
	etcd_bin=$(command -v etcd || true)
	[ -n "$etcd_bin" ] || {
		kvf_log "no etcd binary (Debian: etcd-server)"
		exit 1
	}
}

# kvf_start_etcd DIR ETCD_BINARY: a one-member etcd on loopback with its
# data in DIR/etcd (log DIR/etcd.log), in the background; sets ecp (its
# client port) and etcd_pid.
kvf_start_etcd() {
	local epp
	ecp=$(kvf_free_port)
	epp=$(kvf_free_port)
	"$2" --name e0 --data-dir "$1/etcd" \
		--listen-client-urls "http://127.0.0.1:$ecp" \
		--advertise-client-urls "http://127.0.0.1:$ecp" \
		--listen-peer-urls "http://127.0.0.1:$epp" \
		--initial-advertise-peer-urls "http://127.0.0.1:$epp" \
		--initial-cluster "e0=http://127.0.0.1:$epp" \
		--log-level error >"$1/etcd.log" 2>&1 &
	etcd_pid=$!
}

# kvf_setup_build: packages, autotools and the plain build in build/, as
# the README's commands start.
kvf_setup_build() {
	kvf_install_deps
	kvf_bootstrap
	kvf_build build
}
