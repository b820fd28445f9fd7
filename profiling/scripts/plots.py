#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""plots.py - PNG plots of kvforge-bench JSON results, drawn by gnuplot.

    plots.py BENCH.json OUTDIR [--lat FILE]

BENCH.json holds one or more `kvforge-bench --json` objects (one per line
for a sweep). Makes, in OUTDIR:

  throughput.png  keys/s against batch size, one line per op
                  (needs config.batch and results.<op>.keys_per_sec;
                  several objects with different batch sizes)
  latency_cdf.png per-batch latency CDF per op (needs the latency dump:
                  --lat FILE, default BENCH.json.lat, written by
                  `kvforge-bench --latency-dump FILE` or with
                  KVF_BENCH_LATENCY_DUMP=FILE: TSV op, latency_us, fraction)
  stages.png      ns per key of each stage, stacked per op (needs
                  "profile", i.e. a run with --profile; the object with
                  batch 128 if there is one, else the last)

A plot whose data is missing is skipped with a note on stderr.
"""

import json
import os
import subprocess
import sys
import tempfile


def read_objects(path):
    with open(path) as f:
        text = f.read()
    try:
        obj = json.loads(text)
        return obj if isinstance(obj, list) else [obj]
    except json.JSONDecodeError:
        pass
    objs = []
    dec = json.JSONDecoder()
    i = 0
    while i < len(text):
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            break
        obj, i = dec.raw_decode(text, i)
        objs.append(obj)
    return objs


def terminal():
    """pngcairo when this gnuplot has it (nicer fonts), else png."""
    try:
        out = subprocess.run(["gnuplot", "-e", "set terminal"],
                             capture_output=True, text=True).stderr
    except FileNotFoundError:
        sys.exit("plots.py: gnuplot not found (apt-get install gnuplot-nox)")
    if "pngcairo" in out:
        return "pngcairo noenhanced size 800,500 font 'Sans,10'"
    return "png noenhanced size 800,500"


def gnuplot(script):
    subprocess.run(["gnuplot"], input=script, text=True, check=True)


def batch_of(obj):
    try:
        return int(obj.get("config", {}).get("batch"))
    except (TypeError, ValueError):
        return None


def plot_throughput(objs, outdir, term, tmp):
    series = {}
    for obj in objs:
        b = batch_of(obj)
        for op, m in obj.get("results", {}).items():
            if b and isinstance(m, dict) and "keys_per_sec" in m:
                series.setdefault(op, []).append((b, m["keys_per_sec"]))
    if not series:
        return "no results.<op>.keys_per_sec with config.batch"
    plots = []
    for op, pts in series.items():
        data = os.path.join(tmp, "tp_%s.dat" % op)
        with open(data, "w") as f:
            for b, v in sorted(pts):
                f.write("%d %g\n" % (b, v / 1e6))
        plots.append("'%s' using 1:2 with linespoints lw 2 pt 7 title '%s'"
                     % (data, op))
    gnuplot("""set terminal %s
set output '%s'
set title 'Throughput against batch size'
set xlabel 'keys per batch'
set ylabel 'million keys/s'
set logscale x 2
set grid
set key outside right
set yrange [0:*]
plot %s
""" % (term, os.path.join(outdir, "throughput.png"), ", ".join(plots)))
    return None


def plot_cdf(lat_path, outdir, term, tmp):
    if not lat_path or not os.path.exists(lat_path):
        return "no latency dump (run the bench with --latency-dump FILE)"
    per_op = {}
    with open(lat_path) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            op, us, frac = line.split("\t")
            per_op.setdefault(op, []).append((float(us), float(frac)))
    if not per_op:
        return "latency dump is empty"
    plots = []
    for op, pts in per_op.items():
        data = os.path.join(tmp, "cdf_%s.dat" % op)
        with open(data, "w") as f:
            for us, frac in sorted(pts):
                f.write("%g %g\n" % (us, frac))
        plots.append("'%s' using 1:2 with steps lw 2 title '%s'"
                     % (data, op))
    gnuplot("""set terminal %s
set output '%s'
set title 'Per-batch latency CDF'
set xlabel 'batch latency (us, log scale)'
set ylabel 'fraction of batches'
set logscale x 10
set grid
set key bottom right
set yrange [0:1]
plot %s
""" % (term, os.path.join(outdir, "latency_cdf.png"), ", ".join(plots)))
    return None


def plot_stages(objs, outdir, term, tmp):
    prof = [o for o in objs if isinstance(o.get("profile"), dict)]
    if not prof:
        return "no \"profile\" (run the bench with --profile)"
    pick = [o for o in prof if batch_of(o) == 128] or prof
    ops = pick[-1]["profile"].get("ops", {})
    # Stages in hot-path order (profiling/stage.h), then any new ones.
    order = ["validate", "hash", "probe", "allocate", "journal", "publish",
             "reply", "other"]
    seen = {st for op in ops.values() for st in op.get("stages", {})}
    stages = [st for st in order if st in seen]
    stages += sorted(seen - set(order))
    if not ops or not stages:
        return "profile has no ops"
    data = os.path.join(tmp, "stages.dat")
    with open(data, "w") as f:
        f.write("op " + " ".join(stages) + "\n")
        for name, op in ops.items():
            keys = op.get("total", {}).get("keys") or 1
            row = [op.get("stages", {}).get(st, {}).get("ns", 0) / keys
                   for st in stages]
            f.write(name + " " + " ".join("%g" % v for v in row) + "\n")
    cols = ", ".join("'' using %d title columnheader(%d)" % (i + 2, i + 2)
                     if i else "'%s' using 2:xtic(1) title columnheader(2)"
                     % data for i in range(len(stages)))
    gnuplot("""set terminal %s
set output '%s'
set title 'Where a batch spends its time (ns per key, by stage)'
set ylabel 'ns per key'
set style data histograms
set style histogram rowstacked
set style fill solid 0.85 border -1
set boxwidth 0.6
set grid ytics
set key outside right
set yrange [0:*]
plot %s
""" % (term, os.path.join(outdir, "stages.png"), cols))
    return None


def main():
    args = [a for a in sys.argv[1:]]
    lat = None
    if "--lat" in args:
        i = args.index("--lat")
        lat = args[i + 1]
        del args[i:i + 2]
    if len(args) != 2:
        sys.exit(__doc__)
    src, outdir = args
    os.makedirs(outdir, exist_ok=True)
    objs = read_objects(src)
    if lat is None:
        lat = src + ".lat"
    term = terminal()
    made = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name, why in (
                ("throughput.png", plot_throughput(objs, outdir, term, tmp)),
                ("latency_cdf.png", plot_cdf(lat, outdir, term, tmp)),
                ("stages.png", plot_stages(objs, outdir, term, tmp))):
            if why:
                sys.stderr.write("plots.py: skipped %s: %s\n" % (name, why))
            else:
                made += 1
                print(os.path.join(outdir, name))
    return 0 if made else 1


if __name__ == "__main__":
    sys.exit(main())
