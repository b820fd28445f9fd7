#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""flamegraph.py - fold `perf script` output and draw a flame graph SVG.

    perf script | flamegraph.py --fold > stacks.folded
    flamegraph.py [--title T] [--width PX] < stacks.folded > flame.svg
    perf script | flamegraph.py --from-perf > flame.svg   (both at once)

Folded format: one line per distinct stack, frames root first separated
by ';', then a space and the sample count ("kvforge-bench;main;probe 42").

The SVG is self-contained (no fonts, scripts or styles from the network):
hover a frame for its name, samples and share; click a frame to zoom to
it, click the bottom bar ("all") to zoom out. Python 3 standard library
only; written for this project.
"""

import argparse
import html
import re
import sys
import zlib

FRAME_H = 17
FONT_PX = 11
CHAR_PX = 6.4  # average glyph width of the monospace font at FONT_PX


def fold_perf_script(lines):
    """perf script text -> {folded stack: samples}."""
    stacks = {}
    comm = None
    frames = []
    header = re.compile(r"^(\S.*?)\s+\d+(/\d+)?\s")

    def flush():
        if comm is not None:
            key = ";".join([comm] + list(reversed(frames)))
            stacks[key] = stacks.get(key, 0) + 1

    for raw in lines:
        line = raw.rstrip("\n")
        if not line.strip():
            flush()
            comm, frames = None, []
            continue
        if not line[0].isspace():
            flush()
            m = header.match(line)
            comm = (m.group(1) if m else line.split()[0]).replace(";", ":")
            frames = []
            continue
        parts = line.strip().split(None, 1)
        if len(parts) < 2:
            continue
        sym = parts[1]
        dso = ""
        m = re.match(r"^(.*?)\s+\((.*)\)$", sym)
        if m:
            sym, dso = m.group(1), m.group(2)
        sym = re.sub(r"\+0x[0-9a-f]+$", "", sym)
        if sym in ("[unknown]", ""):
            base = dso.rsplit("/", 1)[-1] or "unknown"
            sym = base if base.startswith("[") else "[%s]" % base
        frames.append(sym.replace(";", ":"))
    flush()
    return stacks


def read_folded(lines):
    stacks = {}
    for line in lines:
        line = line.strip()
        if not line:
            continue
        stack, _, count = line.rpartition(" ")
        try:
            stacks[stack] = stacks.get(stack, 0) + int(count)
        except ValueError:
            continue
    return stacks


class Node:
    __slots__ = ("name", "value", "children")

    def __init__(self, name):
        self.name = name
        self.value = 0
        self.children = {}


def build_tree(stacks):
    root = Node("all")
    for stack, count in stacks.items():
        root.value += count
        node = root
        for frame in stack.split(";"):
            node = node.children.setdefault(frame, Node(frame))
            node.value += count
    return root


def color(name):
    """Warm colour fixed by the name, so reruns look alike."""
    h = zlib.crc32(name.encode())
    if name.startswith("["):  # kernel or unknown dso: muted
        return "rgb(%d,%d,%d)" % (180 + h % 40, 180 + (h >> 8) % 40, 170)
    return "rgb(%d,%d,%d)" % (205 + h % 50, 80 + (h >> 8) % 130,
                              (h >> 16) % 55)


def layout(root):
    """Yield (depth, x, width, node) in samples, parents before children."""
    out = []

    def walk(node, depth, x):
        out.append((depth, x, node.value, node))
        cx = x
        for child in sorted(node.children.values(), key=lambda n: n.name):
            walk(child, depth + 1, cx)
            cx += child.value

    walk(root, 0, 0)
    return out


SCRIPT = """
var W=%(width)d, PAD=10, total=%(total)d;
function zoom(x0, w0) {
  var fr = document.querySelectorAll('g.f');
  for (var i = 0; i < fr.length; i++) {
    var g = fr[i], x = +g.getAttribute('data-x'), w = +g.getAttribute('data-w');
    var r = g.querySelector('rect'), t = g.querySelector('text');
    if (x + w <= x0 || x >= x0 + w0) { g.style.display = 'none'; continue; }
    var a = Math.max(x, x0), b = Math.min(x + w, x0 + w0);
    var px = PAD + (a - x0) / w0 * (W - 2 * PAD), pw = (b - a) / w0 * (W - 2 * PAD);
    g.style.display = pw < 0.1 ? 'none' : '';
    r.setAttribute('x', px); r.setAttribute('width', Math.max(pw - 0.5, 0.1));
    var name = g.getAttribute('data-n'), n = Math.floor((pw - 4) / %(charpx)s);
    t.setAttribute('x', px + 3);
    t.textContent = n >= name.length ? name : (n > 2 ? name.substr(0, n - 2) + '..' : '');
  }
}
document.addEventListener('click', function (e) {
  var g = e.target.closest ? e.target.closest('g.f') : null;
  if (!g) return;
  zoom(+g.getAttribute('data-x'), +g.getAttribute('data-w'));
});
"""


def render_svg(stacks, title, width):
    root = build_tree(stacks)
    total = max(root.value, 1)
    frames = layout(root)
    depth = max(d for d, _, _, _ in frames) + 1
    height = (depth + 3) * FRAME_H + 10
    scale = (width - 20) / total
    o = []
    o.append('<?xml version="1.0" standalone="no"?>')
    o.append('<svg version="1.1" xmlns="http://www.w3.org/2000/svg" '
             'width="%d" height="%d" viewBox="0 0 %d %d">'
             % (width, height, width, height))
    o.append('<style>text{font-family:monospace;font-size:%dpx;'
             'pointer-events:none}g.f:hover rect{stroke:#000;'
             'stroke-width:0.5}g.f{cursor:pointer}</style>' % FONT_PX)
    o.append('<rect width="100%" height="100%" fill="#fdfaf2"/>')
    o.append('<text x="%d" y="%d" text-anchor="middle" '
             'style="font-size:14px">%s</text>'
             % (width // 2, FRAME_H, html.escape(title)))
    o.append('<text x="10" y="%d">%d samples; hover for details, click to '
             'zoom, click "all" to reset</text>' % (2 * FRAME_H - 2, total))
    for d, x, w, node in frames:
        pw = w * scale
        if pw < 0.1:
            continue
        px = 10 + x * scale
        py = height - (d + 1) * FRAME_H - 5
        n = int((pw - 4) / CHAR_PX)
        label = node.name if n >= len(node.name) else (
            node.name[:n - 2] + ".." if n > 2 else "")
        tip = "%s (%d samples, %.2f%%)" % (node.name, w, 100.0 * w / total)
        o.append('<g class="f" data-x="%d" data-w="%d" data-n="%s">'
                 '<title>%s</title><rect x="%.2f" y="%d" width="%.2f" '
                 'height="%d" fill="%s" rx="1"/><text x="%.2f" y="%d">%s'
                 '</text></g>'
                 % (x, w, html.escape(node.name, quote=True),
                    html.escape(tip), px, py, max(pw - 0.5, 0.1),
                    FRAME_H - 1, color(node.name) if d else "#d8d0c0",
                    px + 3, py + FRAME_H - 5, html.escape(label)))
    o.append('<script type="text/ecmascript"><![CDATA[%s]]></script>'
             % (SCRIPT % {"width": width, "total": total,
                          "charpx": CHAR_PX}))
    o.append("</svg>")
    return "\n".join(o) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fold", action="store_true",
                    help="read perf script output, write folded stacks")
    ap.add_argument("--from-perf", action="store_true",
                    help="read perf script output, write the SVG")
    ap.add_argument("--title", default="Flame graph")
    ap.add_argument("--width", type=int, default=1200)
    args = ap.parse_args()
    if args.fold or args.from_perf:
        stacks = fold_perf_script(sys.stdin)
    else:
        stacks = read_folded(sys.stdin)
    if args.fold:
        for stack, count in sorted(stacks.items()):
            sys.stdout.write("%s %d\n" % (stack, count))
        return 0
    if not stacks:
        sys.stderr.write("flamegraph.py: no samples\n")
        return 1
    sys.stdout.write(render_svg(stacks, args.title, args.width))
    return 0


if __name__ == "__main__":
    sys.exit(main())
