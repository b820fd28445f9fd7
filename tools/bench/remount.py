#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""remount.py - how long one ReMountSegment holds kvforge-master's loop.

  python3 tools/bench/remount.py MASTER_A MASTER_B [ROUNDS] [MOUNTED] [BATCH]

For each round, and for each of the two binaries in turn (the order
alternates: A B, B A, ...), starts a fresh master on loopback with one RPC
thread and a fresh --data-dir (journal and segment table on disk), mounts
MOUNTED segments (default 4096) through ReMountSegment calls of BATCH
segments (default 1024), one client each, then times one more
ReMountSegment of BATCH new segments from a new client: the request is
encoded beforehand, so the time is from its first byte sent to its answer
read, which is how long the one loop thread was busy with it (the
registry lock, the engine, the segment table's write); the master's CPU
time over the same span (all its threads, from /proc/PID/task/*/schedstat)
is printed beside it, the figure to compare on a loaded machine, where
the wall time mostly measures waiting for a core. Prints each run,
then per binary the median, and the paired ratio A/B per round with its
median and a bootstrap 95% interval. Loopback only; standard library
plus tests/master/mc_wire_pyclient.py (upstream's wire encoding).
"""

import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MASTER_TESTS = os.path.join(HERE, "..", "..", "tests", "master")
sys.path.insert(0, MASTER_TESTS)
import mc_wire_pyclient as mc  # noqa: E402

mc._here = os.path.join(MASTER_TESTS, "fixtures")
MIB = 1 << 20


def start(binary, data_dir):
    cmd = [binary, "--rpc_port=0", "--rpc_address=127.0.0.1",
           "--rpc_thread_num=1", "--enable_metric_reporting=false",
           "--data-dir=" + data_dir]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True)
    deadline = time.time() + 60
    while time.time() < deadline:
        line = p.stdout.readline()
        if not line:
            break
        if "RPC listening on" in line:
            return p, int(line.split()[4].rsplit(":", 1)[1])
    p.kill()
    raise RuntimeError("%s did not start" % binary)


def segments(client, n):
    return [[[0x5E, client * 1000000 + i + 1], "h%d" % client,
             (client << 40) + i * 16 * MIB, 16 * MIB, "127.0.0.2:1", "tcp",
             ""] for i in range(n)]


def remount_body(c, client, n):
    info = c.table["ReMountSegment"]
    body = mc.encode(info["req"], [segments(client, n), [0x5E, client]])
    return info, body


def cpu_ns(pid):
    """CPU time all of @pid's threads have run, ns (/proc schedstat)."""
    total = 0
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                total += int(f.read().split()[0])
        except OSError:
            pass
    return total


def call(c, info, body, pid):
    c0 = cpu_ns(pid)
    t0 = time.perf_counter()
    r = c.raw_call(info["id"], body, info["resp"])
    dt = time.perf_counter() - t0
    cpu = (cpu_ns(pid) - c0) / 1e9
    d = r.get("decoded")
    if not (isinstance(d, dict) and "ok" in d):
        raise RuntimeError("ReMountSegment answered %r" % (r,))
    return dt, cpu


def run(binary, mounted, batch):
    d = tempfile.mkdtemp(prefix="kvf-remount-")
    p = None
    try:
        p, port = start(binary, d)
        c = mc.Client("127.0.0.1:%d" % port)
        c.s.settimeout(120)
        for k in range(mounted // batch):
            info, body = remount_body(c, k + 1, batch)
            call(c, info, body, p.pid)
        info, body = remount_body(c, 999, batch)
        t = call(c, info, body, p.pid)
        c.s.close()
        return t
    finally:
        if p:
            p.terminate()
            p.wait(30)
        shutil.rmtree(d, ignore_errors=True)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    a, b = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 7
    mounted = int(sys.argv[4]) if len(sys.argv) > 4 else 4096
    batch = int(sys.argv[5]) if len(sys.argv) > 5 else 1024
    t = {a: [], b: []}
    for r in range(rounds):
        for binary in ((a, b) if r % 2 == 0 else (b, a)):
            wall, cpu = run(binary, mounted, batch)
            t[binary].append((wall, cpu))
            print("round %d %s: %.4f s wall, %.4f s cpu" % (r, binary, wall,
                                                           cpu), flush=True)
    rng = random.Random(1)
    for k, what in ((0, "wall"), (1, "cpu")):
        ratios = [x[k] / max(y[k], 1e-9) for x, y in zip(t[a], t[b])]
        boot = sorted(statistics.median(rng.choices(ratios, k=len(ratios)))
                      for _ in range(2000))
        for binary in (a, b):
            v = [x[k] for x in t[binary]]
            print("%s %s: median %.4f s (min %.4f, max %.4f)" %
                  (what, binary, statistics.median(v), min(v), max(v)))
        print("%s ratio A/B: median %.1f, 95%% bootstrap [%.1f, %.1f], "
              "rounds %d" % (what, statistics.median(ratios), boot[50],
                             boot[1949], rounds))


if __name__ == "__main__":
    main()
