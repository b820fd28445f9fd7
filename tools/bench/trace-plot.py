#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Plot --workload trace results with gnuplot.

    tools/bench/trace-plot.py RESULTS_DIR OUTDIR

RESULTS_DIR holds what docs/benchmarks.md's "Real traces" commands write:
embedded-<trace>-<capacity>.json and master-x60-<trace>-<capacity>.json
(kvforge-bench --workload trace --json, embedded and against a master at
60 times the trace's pace), trace-sim.json
(tools/bench/trace-sim.py --json) and, optionally, a latency dump
master-conversation-x60.lat (--latency-dump). Writes
OUTDIR/trace_hit_ratio.png (hit ratio against capacity, per trace:
KVForge embedded and kvforge-master, exact LRU, Belady's MIN) and
OUTDIR/trace_latency_cdf.png (per-RPC latency CDF) when the dump exists.
"""
import glob
import json
import os
import subprocess
import sys
import tempfile


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    src, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    sim = json.load(open(os.path.join(src, "trace-sim.json")))
    if isinstance(sim, dict):
        sim = [sim]
    tmp = tempfile.mkdtemp()
    plots = []
    for rec in sim:
        name = os.path.basename(rec["trace"]).split("_")[0]
        rows = {}
        for cap in rec["hit_ratio"]["lru"]:
            rows[float(cap)] = [rec["hit_ratio"]["lru"][cap],
                                rec["hit_ratio"]["belady"][cap], "NaN", "NaN"]
        for col, kind in ((2, "embedded"), (3, "master-x60")):
            for f in glob.glob(os.path.join(src, f"{kind}-{name}-*.json")):
                cap = float(f.rsplit("-", 1)[1][:-5])
                r = json.load(open(f))["results"]["trace"]
                rows.setdefault(cap, ["NaN"] * 4)[col] = r["hit_ratio"]
        dat = os.path.join(tmp, name + ".dat")
        with open(dat, "w") as d:
            for cap in sorted(rows):
                d.write(f"{cap * 100:g} " +
                        " ".join(str(v) for v in rows[cap]) + "\n")
        plots.append((name, dat))
    gp = [
        "set terminal pngcairo size 1100,420 noenhanced",
        f"set output '{os.path.join(out, 'trace_hit_ratio.png')}'",
        f"set multiplot layout 1,{len(plots)}",
        "set xlabel 'capacity (% of the unique blocks)'",
        "set ylabel 'prefix hit ratio'",
        "set key bottom right",
        "set grid",
        "set yrange [0:*]",
    ]
    for name, dat in plots:
        gp += [
            f"set title '{name} trace'",
            f"plot '{dat}' u 1:3 w lp t \"Belady's MIN\", "
            f"'' u 1:2 w lp t 'exact LRU', "
            f"'' u 1:4 w lp t 'KVForge (embedded)', "
            f"'' u 1:5 w lp t 'kvforge-master (x60)'",
        ]
    gp.append("unset multiplot")
    lat = os.path.join(src, "master-conversation-x60.lat")
    if os.path.exists(lat):
        ops = []
        for line in open(lat):
            if line.startswith("#"):
                continue
            op = line.split("\t")[0]
            if op not in ops:
                ops.append(op)
        gp += [
            "set terminal pngcairo size 700,450 noenhanced",
            f"set output '{os.path.join(out, 'trace_latency_cdf.png')}'",
            "set title 'conversation trace x60 against kvforge-master'",
            "set xlabel 'latency per RPC (us)'",
            "set ylabel 'fraction of calls'",
            "set logscale x",
            "set yrange [0:1]",
            "set key bottom right",
            "plot " + ", ".join(
                f"'< grep ^{op} {lat}' u 2:3 w l t '{op}'" for op in ops),
        ]
    script = os.path.join(tmp, "plot.gp")
    with open(script, "w") as g:
        g.write("\n".join(gp) + "\n")
    subprocess.run(["gnuplot", script], check=True)


if __name__ == "__main__":
    main()
