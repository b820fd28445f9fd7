#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""adversary.py - a bounded adversarial run against kvforge-master.

  python3 adversary.py KVFORGE_MASTER [SECONDS] [SEED]

Starts the master on loopback ephemeral ports (one RPC thread, so every
attack shares the bystander's thread; --client_ttl=2; RDMA asked for, so
the first-byte demux and its refusal path are on; the HTTP metadata
store on), a bystander that mounted a segment, put an object and pings
every 100 ms, then for about SECONDS (default 45) runs, in turn:

  mutate   fixture requests (tests/master/fixtures/*/index.jsonl) with
           bytes flipped, inserted, deleted, truncated, header lengths and
           ids changed, sent on a few connections, pipelined;
  flood    hundreds of connections opened, half a header sent, dropped;
  slow     RPC and HTTP requests trickled a byte at a time (slow heads);
  hostile  the requests that once stalled the master or made it hold
           memory: a ReMountSegment of 25,000 segments, a PutStart with
           100,000 preferred segments, a BatchQueryIp with 65,536 copies of
           one id, a 0x3e handshake that keeps streaming, metadata PUTs
           past the store's limit.

It fails if the master dies, if the bystander is ever told to remount, a
Ping goes unanswered for 5 s, or its object is gone, or if /health stops
answering. Counts are bounded (every phase has a budget and a deadline);
only 127.0.0.1 is ever contacted. Standard library only.
"""

import os
import random
import select
import socket
import struct
import subprocess
import sys
import threading
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import mc_wire_pyclient as mc  # noqa: E402

FIXTURES = os.path.join(HERE, "fixtures")
mc._here = FIXTURES  # the client reads rpc_table.tsv from there

CFG = [1, 0, 0, 0, None, False, [], "", [], False, 0, "", None]
OK_STATUS = 1
MIB = 1 << 20


class Fail(Exception):
    pass


def log(*a):
    print("adversary:", *a, flush=True)


# Requests whose legitimate effect is the bystander's loss (RemoveAll
# removes every object): not replayed.
DESTRUCTIVE = ("RemoveAll",)


def load_requests():
    import json
    reqs = []
    for d in sorted(os.listdir(FIXTURES)):
        p = os.path.join(FIXTURES, d, "index.jsonl")
        if not os.path.exists(p):
            continue
        for line in open(p):
            e = json.loads(line)
            if e["rpc"] not in DESTRUCTIVE:
                reqs.append(bytes.fromhex(e["request"]["hex"]))
    return reqs


class Master:
    def __init__(self, binary):
        cmd = [binary, "--rpc_port=0", "--rpc_address=127.0.0.1",
               "--rpc_thread_num=1", "--client_ttl=2",
               "--enable_rdma=true", "--enable_metric_reporting=false",
               "--enable_http_metadata_server=true",
               "--http_metadata_server_host=127.0.0.1",
               "--http_metadata_server_port=0",
               "--http_metadata_server_max_bytes=16777216",
               "--expected_objects=4096"]
        # The master's stderr (a sanitizer's report, a log line) is kept
        # to be shown if it dies.
        self.err = tempfile.TemporaryFile(mode="w+")
        self.p = subprocess.Popen(cmd, stdout=subprocess.PIPE,
                                  stderr=self.err, text=True)
        self.port = self.http = None
        deadline = time.time() + 30
        while time.time() < deadline and not (self.port and self.http):
            line = self.p.stdout.readline()
            if not line:
                break
            if "RPC listening on" in line:
                self.port = int(line.split()[4].rsplit(":", 1)[1])
            if "HTTP metadata listening on" in line:
                self.http = int(line.split()[-1].rsplit(":", 1)[1])
        if not (self.port and self.http):
            self.p.kill()
            raise Fail("master did not start")

    def alive(self):
        return self.p.poll() is None

    def stderr_tail(self, lines=80):
        self.err.seek(0)
        return "".join(self.err.readlines()[-lines:])

    def stop(self):
        self.p.terminate()
        try:
            return self.p.wait(20)
        except subprocess.TimeoutExpired:
            self.p.kill()
            raise Fail("master did not stop on SIGTERM")


def connect(port, timeout=5.0):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


class Bystander(threading.Thread):
    def __init__(self, port):
        super().__init__(daemon=True)
        self.port = port
        self.me = [0xB0, 0xB0]
        self.stop = threading.Event()
        self.errors = []
        self.pings = 0
        c = mc.Client("127.0.0.1:%d" % port)
        seg = [[0xB1, 0xB2], "bystander", 0x7B0000000000, 64 * MIB,
               "127.0.0.1:23456", "tcp", ""]
        for r in (c.call("MountSegment", seg, self.me),
                  c.call("ReMountSegment", [seg], self.me),
                  c.call("PutStart", self.me, "bystander-key", 4096, CFG,
                         "default"),
                  c.call("PutEnd", self.me, ["bystander-key", None], 4,
                         "default")):
            if "ok" not in r.get("decoded", {}):
                raise Fail("bystander setup: %r" % r)
        c.s.close()

    def run(self):
        try:
            c = mc.Client("127.0.0.1:%d" % self.port)
            c.s.settimeout(5.0)
            while not self.stop.is_set():
                r = c.call("Ping", self.me)
                if r.get("decoded", {}).get("ok", [0, 0])[1] != OK_STATUS:
                    self.errors.append("Ping answered %r" % r)
                    return
                self.pings += 1
                time.sleep(0.1)
        except Exception as e:  # a timeout or a closed connection
            self.errors.append("Ping failed: %s: %s" % (type(e).__name__, e))

    def check(self):
        if self.errors:
            raise Fail("bystander: " + "; ".join(self.errors))
        c = mc.Client("127.0.0.1:%d" % self.port)
        c.s.settimeout(5.0)
        r = c.call("ExistKey", "bystander-key", "default")
        c.s.close()
        if r.get("decoded", {}).get("ok") is not True:
            raise Fail("bystander's object is gone: %r" % r)


def http_status(port, req, timeout=5.0):
    s = connect(port, timeout)
    try:
        s.sendall(req)
        buf = b""
        while b"\r\n\r\n" not in buf:
            b = s.recv(4096)
            if not b:
                break
            buf += b
        return int(buf.split()[1]) if buf.startswith(b"HTTP/1.1 ") else -1
    finally:
        s.close()


def health(m):
    st = http_status(m.http, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
    if st != 200:
        raise Fail("/health answered %d" % st)


# ---- attacks ---------------------------------------------------------------

def mutate(rng, b):
    b = bytearray(b)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(7)
        if op == 0 and b:
            b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
        elif op == 1 and b:
            b[rng.randrange(len(b))] = rng.choice((0, 0xff, 0x7f, 0x80))
        elif op == 2:
            p = rng.randrange(len(b) + 1)
            b[p:p] = bytes(rng.randrange(256)
                           for _ in range(rng.randint(1, 16)))
        elif op == 3 and len(b) > 1:
            p = rng.randrange(len(b))
            del b[p:p + rng.randint(1, 16)]
        elif op == 4 and len(b) >= 20:
            # the header's body length: keep it small (the reader waits
            # for what it announces, until the request timeout)
            n = rng.choice((0, 1, len(b) - 20, len(b) - 19, 4096))
            b[12:16] = struct.pack("<I", n)
        elif op == 5 and len(b) >= 20:
            b[8:12] = struct.pack("<I", rng.getrandbits(32))
        elif op == 6 and len(b) > 20:
            b = b[:rng.randrange(20, len(b))]
    # A header whose length does not match what follows would leave the
    # connection waiting: make it match after the edit.
    if len(b) >= 20 and b[0] == 21:
        b[12:16] = struct.pack("<I", len(b) - 20)
        b[16:20] = b"\0\0\0\0"
    return bytes(b)


def phase_mutate(m, rng, reqs, budget, deadline):
    sent = 0
    conns = []
    while sent < budget and time.time() < deadline:
        if len(conns) < 4:
            try:
                conns.append(connect(m.port, 2.0))
            except OSError:
                pass
        s = rng.choice(conns) if conns else None
        if s is None:
            continue
        burst = b"".join(mutate(rng, rng.choice(reqs))
                         for _ in range(rng.randint(1, 8)))
        try:
            s.sendall(burst)
            # take what has been answered so far, without waiting long
            while select.select([s], [], [], 0.002)[0]:
                if not s.recv(65536):
                    raise OSError("closed")
        except OSError:
            conns.remove(s)
            s.close()
        sent += 1
    for s in conns:
        s.close()
    return sent


def phase_flood(m, rng, n):
    socks = []
    for i in range(n):
        try:
            s = connect(m.port if i % 4 else m.http, 2.0)
        except OSError:
            continue
        if i % 2:
            s.send(bytes([21, 0, 0, 0]) if i % 4 else b"GET /metadata?k")
        socks.append(s)
    for s in socks:
        s.close()
    return len(socks)


def phase_slow(m, rng, reqs, seconds):
    """Trickle heads on 32 RPC and 96 HTTP connections; /health answers."""
    rpc = rng.choice([r for r in reqs if len(r) > 20])
    slow = []
    for i in range(128):
        try:
            slow.append(connect(m.port if i < 32 else m.http, 2.0))
        except OSError:
            pass
    body = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
    end = time.time() + seconds
    i = 0
    while time.time() < end:
        for k, s in enumerate(slow):
            b = rpc if k < 32 else body
            try:
                s.send(b[i % len(b):i % len(b) + 1])
            except OSError:
                pass
        health(m)
        i += 1
        time.sleep(0.25)
    for s in slow:
        s.close()


def phase_hostile(m):
    me = [0xA0, 0xA0]
    c = mc.Client("127.0.0.1:%d" % m.port)
    c.s.settimeout(30.0)
    segs = [[[0xA0, i + 1], "m%d" % i, 0x100000000000 + i * MIB, MIB,
             "127.0.0.2:1", "tcp", ""] for i in range(25000)]
    r = c.call("ReMountSegment", segs, me)
    log("ReMountSegment x25000:", r.get("decoded"))
    cfg = list(CFG)
    cfg[6] = ["p%d" % i for i in range(100000)]
    r = c.call("PutStart", me, "attacker-key", 4096, cfg, "default")
    log("PutStart, 100000 preferred:", r.get("decoded"))
    r = c.call("BatchQueryIp", [[0xB0, 0xB0]] * 65536)
    d = r.get("decoded", {})
    log("BatchQueryIp x65536 of one id:",
        {k: (len(v) if isinstance(v, (list, dict)) else v)
         for k, v in d.items()} if isinstance(d, dict) else d)
    c.s.close()
    # a handshake that never ends
    s = connect(m.port, 2.0)
    s.settimeout(0.5)
    end = time.time() + 3
    sent = 0
    try:
        while time.time() < end:
            sent += s.send(b"\x3e" * 4096)
    except OSError:
        pass
    s.close()
    log("0x3e stream: %d bytes before the master closed it" % sent)
    # metadata past the store's limit (16 MiB here)
    val = b"v" * (4 * MIB)
    codes = []
    for i in range(6):
        codes.append(http_status(
            m.http, b"PUT /metadata?key=adv%d HTTP/1.1\r\nHost: x\r\n"
            b"Content-Length: %d\r\n\r\n" % (i, len(val)) + val, 10.0))
    log("metadata PUTs of 4 MiB:", codes)
    if codes[:3] != [200] * 3 or 507 not in codes:
        raise Fail("metadata store limit: %r" % codes)


def main():
    binary = sys.argv[1]
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 45.0
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else int(time.time())
    rng = random.Random(seed)
    reqs = load_requests()
    log("seed %d, %d fixture requests, %.0f s" % (seed, len(reqs), seconds))
    t0 = time.time()
    m = Master(binary)
    by = None
    try:
        by = Bystander(m.port)
        by.start()
        phase_hostile(m)
        n = phase_flood(m, rng, 400)
        log("flood: %d connections" % n)
        phase_slow(m, rng, reqs, 3.0)
        log("slow heads: /health answered throughout")
        left = seconds - (time.time() - t0)
        n = phase_mutate(m, rng, reqs, 200000, time.time() + max(left, 5))
        log("mutate: %d bursts" % n)
        if not m.alive():
            raise Fail("master died (exit %s); its stderr ends:\n%s"
                       % (m.p.returncode, m.stderr_tail()))
        health(m)
        by.stop.set()
        by.join(10)
        by.check()
        log("bystander: %d pings, never told to remount, object kept"
            % by.pings)
        rc = m.stop()
        if rc != 0:
            raise Fail("master exited with %d" % rc)
    except Exception:
        if m.alive():
            m.p.kill()
        raise
    log("passed in %.1f s" % (time.time() - t0))


if __name__ == "__main__":
    try:
        main()
    except Fail as e:
        log("FAIL:", e)
        sys.exit(1)
