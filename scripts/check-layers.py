#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
#
# scripts/check-layers.py - the include graph between modules, checked
# against the layer order docs/architecture.md documents.
#
#   check-layers.py [SRCDIR]          check: exit 1 on an arrow that runs
#                                     upward or sideways, or a module the
#                                     table does not know
#   check-layers.py --graph [SRCDIR]  print the module graph (dot format)
#
# A module is a directory (tools/lib apart from tools/). A file may include
# its own module and modules of a lower layer; tests/ may include anything.
# The arrows that break this today are listed in KNOWN_UPWARD, one
# (file, included file) pair each, so any new one fails the check.
import os
import re
import sys

# Bottom to top. Modules on one layer do not include each other.
LAYERS = [
    ["include/kvforge"],  # the public API: declarations only
    ["base"],  # die/log, locks, the RCU flavour, the clock, status strings
    ["metadata", "alloc", "profiling", "rdma"],
    ["journal"],
    ["engine"],
    ["batch"],
    ["wire"],  # the Mooncake wire codec: framing, struct_pack, ABI tables
    ["ha"],  # etcd client, election and fencing for kvforge-master
    ["tools/lib"],  # code only the tools use, never in the library
    ["client", "http"],  # the C client; metrics, HTTP servers, metastore
    ["master"],  # kvforge-master: flags, RPC loop, handlers, registry
    ["tools"],  # kvforge-bench (its --master client), kvforge-inspect
]

# Upward arrows that exist today. Shrink this list; never grow it.
KNOWN_UPWARD = {
}

SKIP_DIRS = {"tests", "docs", "scripts", "m4", "autom4te.cache"}
# Files configure writes at the root, there when building in the source
# tree (./configure && make): generated, in no module.
GENERATED = {"config.h"}
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*([<"])([^">]+)[">]', re.M)

RANK = {m: i for i, layer in enumerate(LAYERS) for m in layer}


def module_of(path):
    """The module of a path relative to the source root, or None."""
    d = os.path.dirname(path)
    while d and d not in RANK:
        d = os.path.dirname(d)
    return d or None


def sources(top):
    for root, dirs, files in os.walk(top):
        rel = os.path.relpath(root, top)
        if rel == ".":
            dirs[:] = [d for d in dirs if d not in SKIP_DIRS and
                       not d.startswith((".", "build", "_"))]
        for f in files:
            if rel == "." and f in GENERATED:
                continue
            if f.endswith((".c", ".h")):
                yield os.path.normpath(os.path.join(rel, f))


def includes(top, path):
    """(included file relative to the root, module) for each include."""
    with open(os.path.join(top, path), encoding="utf-8") as fh:
        text = fh.read()
    for kind, name in INCLUDE_RE.findall(text):
        if kind == "<":
            if name.startswith("kvforge/") or name == "kvforge.h":
                yield "include/" + name, "include/kvforge"
            continue
        if name == "config.h":
            continue
        if "/" not in name:  # relative to the including file
            name = os.path.join(os.path.dirname(path), name)
        yield name, module_of(name)


def edges(top):
    for path in sorted(sources(top)):
        if path.startswith("include/"):
            src = "include/kvforge"
        else:
            src = module_of(path)
        if src is None:
            yield path, None, None, None
            continue
        for inc, dst in includes(top, path):
            yield path, src, inc, dst


def check(top):
    bad = []
    unused = set(KNOWN_UPWARD)
    for path, src, inc, dst in edges(top):
        if src is None:
            bad.append(f"{path}: module not in the layer table "
                       "(scripts/check-layers.py LAYERS)")
            continue
        if dst is None:
            bad.append(f"{path}: includes {inc}, whose module is not in "
                       "the layer table")
            continue
        if src == dst or RANK[dst] < RANK[src]:
            continue
        if (path, inc) in KNOWN_UPWARD:
            unused.discard((path, inc))
            continue
        way = "upward" if RANK[dst] > RANK[src] else "sideways"
        bad.append(f"{path}: includes {inc}: {src} -> {dst} runs {way} "
                   "(docs/architecture.md, Layers)")
    for path, inc in sorted(unused):
        bad.append(f"{path} no longer includes {inc}: remove it from "
                   "KNOWN_UPWARD")
    for b in bad:
        print(b, file=sys.stderr)
    return 1 if bad else 0


def graph(top):
    arrows = {}
    for path, src, inc, dst in edges(top):
        if src and dst and src != dst:
            up = RANK[dst] >= RANK[src]
            arrows[(src, dst)] = arrows.get((src, dst), False) or up
    print("digraph kvforge {\n\trankdir=BT;")
    for i, layer in enumerate(LAYERS):
        names = " ".join(f'"{m}"' for m in layer)
        print(f"\t{{ rank=same; {names} }} // layer {i}")
    for (src, dst), up in sorted(arrows.items()):
        style = " [style=dashed, label=\"known upward\"]" if up else ""
        print(f'\t"{src}" -> "{dst}"{style};')
    print("}")
    return 0


def main(argv):
    args = argv[1:]
    show = bool(args) and args[0] == "--graph"
    if show:
        args = args[1:]
    top = args[0] if args else os.path.join(os.path.dirname(__file__), "..")
    return graph(top) if show else check(top)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
