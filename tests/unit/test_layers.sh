#!/bin/sh
# SPDX-License-Identifier: MIT
# The module include graph keeps to the layer order of docs/architecture.md
# (scripts/check-layers.py), and the checker itself still catches a new
# upward include: a scratch tree with one must be refused, naming it. The
# config.h configure writes at the root of an in-tree build (./configure
# && make) is no module's and must not be reported.
set -u
top=${srcdir:-.}
check="$top/scripts/check-layers.py"
command -v python3 >/dev/null 2>&1 || exit 77

python3 "$check" "$top" || exit 1

scratch=$(mktemp -d "${KVF_TEST_TMPDIR:-/tmp}/layers-XXXXXX") || exit 99
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/metadata" "$scratch/engine"
printf '#include "engine/internal.h"\n' >"$scratch/metadata/new.c"
printf '#include "metadata/object.h"\n' >"$scratch/engine/internal.h"
printf '#define KVF_FAULT_INJECTION 1\n' >"$scratch/config.h"
if python3 "$check" "$scratch" 2>"$scratch/out"; then
	echo "check-layers.py accepted metadata/new.c -> engine/internal.h"
	exit 1
fi
grep -q '^metadata/new.c: includes engine/internal.h: metadata -> engine runs upward' \
	"$scratch/out" || { cat "$scratch/out"; exit 1; }
if grep -q '^engine/internal.h' "$scratch/out"; then
	echo "check-layers.py refused a downward include"
	exit 1
fi
if grep -q '^config.h' "$scratch/out"; then
	echo "check-layers.py refused the generated config.h of an in-tree build"
	exit 1
fi
exit 0
