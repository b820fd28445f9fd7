#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""test_ha_master.py - kvforge-master --enable_ha against a real etcd.

Each scenario starts its own etcd (one member, or three for the frozen
member case) on loopback ports with a temporary data directory, and
kvforge-masters with --ha_lease_ttl 1 (2 if sanitized); clients are the
reference Python client (tests/master/mc_wire_pyclient.py) and etcd's
JSON gateway.

  test_ha_master.py MASTER_BINARY ETCD_BINARY [--part K/N] SCENARIO...

With no SCENARIO, those named in $KVF_HA_SCENARIOS (space-separated),
else all of them. --part K/N runs the K-th of N shares of those (split
by their usual length: shares()), with ports of its own: make check runs
the shares side by side (ha/local.mk), as the scenarios spend most of
their time waiting for leases and elections.

Scenarios:
  flags         bad HA flags are refused with a message (exit 2)
  election      one leader, key and value as upstream, view version in
                Ping, a standby that does not listen, SIGTERM revokes the
                lease and the standby leads under a higher view
  expiry        SIGKILL of the leader: its lease expires, the standby leads
  frozen_etcd   three etcd members; the one the leader talks to is frozen
                (SIGSTOP): the leader stops answering before the standby,
                on the other members, answers - never both
  frozen_master the leader itself frozen past its lease: the standby
                leads; thawed, the old leader answers nothing more
  bench_follows kvforge-bench --master etcd://...: its connections follow
                the leader across a SIGKILL (the run completes, one
                failover reported under the new view)
  replication   a leader and a standby; objects put through the leader,
                which SIGKILL ends: the standby leads with every
                acknowledged object; alone, it refuses mutations
  repl_peers    the replication port refuses strangers (cluster id,
                token), malformed and oversized frames, a journal ahead;
                a standby refuses frames of an older view, out of
                sequence, undecodable or oversized, and applies nothing
  lagging       a standby held behind (refused by the leader) is not in
                the sync set: with the leader killed and the synced
                standby frozen it does not campaign; thawed, the synced
                standby leads with every acknowledged object
  replaced_member  a synced standby's machine replaced under its address
                with an empty --data-dir, the leader killed and the
                other standby frozen: named in the sync set but holding
                nothing, the newcomer does not campaign; thawed, the
                synced standby leads with every acknowledged object
  namesake      a synced standby frozen (its connection looks alive) and
                a master started under its address with an empty
                --data-dir: the leader drops the old connection and
                publishes a sync set without the address before it
                welcomes the new one, listed again once caught up
  port_held     a standby holds its RPC port from start-up (no other
                socket binds it, a client dialling it is refused); a
                master whose port another process holds exits at once;
                the standby, elected, serves on the port it held
  step_aside    a synced standby elected whose promotion fails (a fault
                hook: --enable-fault-injection, else skipped) steps
                aside: the other synced standby leads with every object
  late_step_aside  one whose promotion fails after its view's sync set
                is published (a later fault hook) waits for the other
                standby, thawed only then, to follow it and join that
                set before it steps aside; the standby leads with every
                object
  repl_port     a synced standby elected that cannot listen on its
                --ha_replication_port (another process holds it) fails
                before its view is in the lineage or the sync set: the
                other standby, thawed, leads with every object; the
                port freed, the failed one follows and leads next
  chain         three masters, two SIGKILLed leaders in turn: the last
                one standing has every object the two acknowledged
  legacy_key    --ha_publish_legacy_key: mooncake-store/master_view (the
                <= v0.3.7 spelling) names the leader too, same lease and
                create revision; both keys go with its SIGTERM
  repl_state    the segment table and the HTTP metadata store reach the
                standby: after the leader's SIGKILL the new leader knows
                the client's segment (status, protocol in descriptors)
                and serves the metadata keys, with no remount or re-put
  failover_loop three masters, $KVF_HA_FAILOVERS (default 10; CI runs 50
                plain, 4 sanitized: scripts/run-tests.sh) leader
                SIGKILLs, each killed master back as a standby (an empty
                --data-dir: a replaced machine); kvforge-bench writes
                through etcd:// the whole time; after each failover every
                acknowledged object is on the new leader with the
                descriptors it was acknowledged with, a batch in flight at
                the kill is whole or absent; then the captured upstream
                client run is replayed against the last leader
  snapshot      a standby joining after the leader's backlog dropped the
                start of the history catches up from a snapshot and leads
                with every acknowledged object after a SIGKILL
  standby_restart  a standby SIGKILLed during puts and restarted on its
                directory catches up from a snapshot, rejoins the sync
                set, leads with every acknowledged object
  stream_cut    the replication stream cut twice by a proxy during puts:
                the standby resumes from the backlog, loses nothing
  handover      SIGTERM on an asynchronous leader (--ha_sync_standbys 0)
                whose standby is frozen ~10 MB of acknowledged records
                behind: the leader waits for the standby to hold them
                all before it revokes its lease; the standby, thawed,
                leads with every acknowledged object
  lone_expiry   a leader in refuse mode (--ha_sync_standbys 1) whose
                standby died: client mutations are refused, but the
                engine's own expiry goes on and is journaled (a silent
                client's segment and objects go); a standby started then
                gets the expiry's records

Exit 0 when every scenario passed; the first failed assertion exits 1.
"""

import base64
import contextlib
import json
import os
import random
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
MASTER_TESTS = os.path.join(HERE, "..", "master")
sys.path.insert(0, MASTER_TESTS)
import mc_wire_pyclient as mc  # noqa: E402

mc._here = os.path.join(MASTER_TESTS, "fixtures")

TMP = os.environ.get("KVF_TEST_TMPDIR", "/tmp")
MASTER = ETCD = None
CLUSTER = "ha_e2e"
KEY = "mooncake-store/%s/master_view" % CLUSTER
TTL = 1  # main() sets it: lease_ttl()
PORTS = random.Random(os.getpid() ^ int(time.time()))
PICKED = set()  # free_port()'s answers so far
PART, PARTS = 1, 1  # main() sets them: --part K/N


class Fail(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Fail(what)


def bindable(port, reuse):
    """Whether a socket binds 127.0.0.1:@port now (with SO_REUSEADDR
    if @reuse)."""
    s = socket.socket()
    try:
        if reuse:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def free_port():
    """A random port below the kernel's ephemeral range, free when picked
    and never picked before in this run. The master or etcd binds it
    later (a restarted master the same one again): a port from bind(0)
    could be handed meanwhile to any socket the tests running beside this
    one bind or connect, one below that range only to another such pick.
    A port is not picked twice: the master it went to may not have bound
    it yet, or may be restarted on it. With --part K/N the range is cut
    in N and this run picks in the K-th cut only, so shares running side
    by side never pick one port."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        lo = 32768
    base = lo - 16384 if lo > 16384 + 1024 else 1024
    cut = (lo - base) // PARTS
    base, lo = base + (PART - 1) * cut, base + PART * cut
    for _ in range(10000):
        port = PORTS.randrange(base, lo)
        if port not in PICKED and bindable(port, False):
            PICKED.add(port)
            return port
    raise Fail("no free port below %d" % lo)


def wait_for(cond, what, timeout=30.0, step=0.05):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = cond()
        if v:
            return v
        time.sleep(step)
    raise Fail("timed out waiting for " + what)


class Etcd:
    """One or three members on loopback, each with its own data dir."""

    def __init__(self, members=1):
        self.dir = tempfile.mkdtemp(prefix="kvf-ha-etcd-", dir=TMP)
        self.ports = [(free_port(), free_port()) for _ in range(members)]
        cluster = ",".join("e%d=http://127.0.0.1:%d" % (i, p[1])
                           for i, p in enumerate(self.ports))
        self.procs = []
        for i, (cp, pp) in enumerate(self.ports):
            log = open(os.path.join(self.dir, "e%d.log" % i), "w")
            self.procs.append(subprocess.Popen(
                [ETCD, "--name", "e%d" % i,
                 "--data-dir", os.path.join(self.dir, "e%d" % i),
                 "--listen-client-urls", "http://127.0.0.1:%d" % cp,
                 "--advertise-client-urls", "http://127.0.0.1:%d" % cp,
                 "--listen-peer-urls", "http://127.0.0.1:%d" % pp,
                 "--initial-advertise-peer-urls", "http://127.0.0.1:%d" % pp,
                 "--initial-cluster", cluster,
                 "--initial-cluster-token", os.path.basename(self.dir),
                 "--heartbeat-interval", "50", "--election-timeout", "500",
                 "--log-level", "error"],
                stdout=log, stderr=subprocess.STDOUT))
            log.close()
        for i in range(members):
            wait_for(lambda i=i: self.call("/v3/kv/range",
                                           {"key": b64("x")}, member=i),
                     "etcd member %d" % i)

    def endpoint(self, i):
        return "127.0.0.1:%d" % self.ports[i][0]

    def endpoints(self, members):
        return ";".join(self.endpoint(i) for i in members)

    def call(self, path, body, member=None):
        """POST to one member (or the first that answers); None on error."""
        order = [member] if member is not None else range(len(self.ports))
        for i in order:
            req = urllib.request.Request(
                "http://%s%s" % (self.endpoint(i), path),
                data=json.dumps(body).encode(),
                headers={"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(req, timeout=10) as r:
                    return json.loads(r.read())
            except Exception:
                continue
        return None

    def key(self, member=None, key=None):
        """(value, create_revision, lease) of the master_view key (or
        @key), or None."""
        r = self.call("/v3/kv/range", {"key": b64(key or KEY)}, member)
        check(r is not None, "etcd answers a range")
        kvs = r.get("kvs") or []
        if not kvs:
            return None
        kv = kvs[0]
        return (base64.b64decode(kv.get("value", "")).decode(),
                int(kv.get("create_revision", 0)), int(kv.get("lease", 0)))

    def lease_ttl(self, lease, member=None):
        r = self.call("/v3/lease/timetolive", {"ID": str(lease)}, member)
        check(r is not None, "etcd answers timetolive")
        return int(r.get("TTL", 0))

    def signal(self, i, sig):
        self.procs[i].send_signal(sig)

    def close(self):
        for p in self.procs:
            p.send_signal(signal.SIGCONT)
            p.kill()
            p.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def b64(s):
    return base64.b64encode(s.encode()).decode()


class Master:
    def __init__(self, endpoints, *extra, data_dir=None, port=None,
                 env=None):
        self.port = port or free_port()
        self.addr = "127.0.0.1:%d" % self.port
        self.lines = []
        self.own_dir = data_dir is None
        self.dir = data_dir or tempfile.mkdtemp(prefix="kvf-ha-m-", dir=TMP)
        self.p = subprocess.Popen(
            [MASTER, "--enable_ha", "--etcd_endpoints", endpoints,
             "--cluster_id", CLUSTER, "--ha_lease_ttl", str(TTL),
             "--rpc_port", str(self.port), "--metrics_port", "0",
             "--rpc_thread_num", "1", "--data-dir", self.dir,
             # the test clients do not ping: keep them live
             "--client_ttl", "600"] + list(extra),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env=dict(os.environ, **(env or {})))
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()

    def _read(self):
        for line in self.p.stdout:
            self.lines.append(line.rstrip("\n"))

    def said(self, text):
        return any(text in line for line in self.lines)

    def wait_said(self, text, timeout=30):
        wait_for(lambda: self.said(text), "%s: %r" % (self.addr, text),
                 timeout)

    def ping(self, timeout=10):
        """(view_version, client_status) or None when not answered
        (refused at once by a master that does not listen; the timeout
        is for one that is slow to answer)."""
        try:
            c = mc.Client.__new__(mc.Client)
            c.s = socket.create_connection(("127.0.0.1", self.port),
                                           timeout=timeout)
            c.s.settimeout(timeout)
            c.seq = 0
            c.table = TABLE
            r = c.call("Ping", [1, 2])
            c.s.close()
            return tuple(r["decoded"]["ok"])
        except (OSError, ConnectionError, KeyError, TypeError):
            return None

    def port_of(self, server):
        """The port of the server its "@server listening on" line names
        (waited for: a standby starts its metrics server after the
        election, and may say it follows the leader first)."""
        self.wait_said(server + " listening on ")
        port = None
        for line in list(self.lines):
            if server + " listening on " in line:
                port = int(line.rsplit(":", 1)[1].split()[0])
        check(port, "%s: a %s port" % (self.addr, server))
        return port

    def http(self, path):
        """GET @path on the metrics port: (json or text)."""
        port = self.port_of("metrics")
        with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path),
                                    timeout=30) as r:
            body = r.read().decode()
        return json.loads(body) if path == "/health" else body

    def meta_url(self, key):
        """The HTTP metadata server's URL for @key."""
        port = self.port_of("HTTP metadata")
        return "http://127.0.0.1:%d/metadata?key=%s" % (
            port, urllib.parse.quote(key, safe=""))

    def meta(self, key, value=None, delete=False):
        """GET (None when absent), PUT @value, or DELETE @key."""
        method = "DELETE" if delete else "PUT" if value is not None \
            else "GET"
        req = urllib.request.Request(self.meta_url(key), data=value,
                                     method=method)
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.read()
        except urllib.error.HTTPError as e:
            if e.code == 404:
                return None
            raise

    def metric(self, name):
        for line in self.http("/metrics").splitlines():
            if line.startswith(name + " "):
                return int(line.split()[1])
        return None

    def listening(self):
        try:
            socket.create_connection(("127.0.0.1", self.port),
                                     timeout=0.5).close()
            return True
        except OSError:
            return False

    def stop(self, sig=signal.SIGTERM):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGCONT)
            self.p.send_signal(sig)
        rc = self.p.wait(timeout=30)
        self.t.join(timeout=5)
        return rc

    def remove_dir(self):
        if self.own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    def dump(self):
        time.sleep(0.2)  # the reader thread takes the last lines in
        sys.stderr.write("--- master %s:\n%s\n" % (self.addr,
                                                  "\n".join(self.lines)))


TABLE = None


def leader_of(etcd, masters, member=None):
    k = etcd.key(member)
    if not k:
        return None
    for m in masters:
        if m.addr == k[0]:
            return m
    return None


def sc_flags(_):
    def refused(args, what):
        r = subprocess.run([MASTER, "--enable_ha"] + args,
                           capture_output=True, text=True, timeout=30)
        check(r.returncode == 2, "%s: exit %d" % (what, r.returncode))
        return r.stderr

    err = refused(["--etcd_endpoints", "127.0.0.1:1", "--rpc_address",
                   "0.0.0.0"], "wildcard address")
    check("wildcard" in err and "--ha_advertise_address" in err, err)
    err = refused(["--etcd_endpoints", "127.0.0.1:1",
                   "--ha_advertise_address", "[::]:5"], "wildcard v6")
    check("wildcard" in err, err)
    err = refused(["--etcd_endpoints", "127.0.0.1:1", "--rpc_port", "0"],
                  "port 0")
    check("port" in err, err)
    err = refused([], "no endpoints")
    check("--etcd_endpoints" in err, err)
    err = refused(["--etcd_endpoints", "127.0.0.1:1",
                   "--ha_backend_type", "redis"], "redis")
    check("only etcd" in err, err)
    err = refused(["--etcd_endpoints", "https://127.0.0.1:1"], "https")
    check("plain http" in err, err)
    err = refused(["--etcd_endpoints", "127.0.0.1:1"], "no data dir")
    check("needs --data-dir" in err, err)
    err = refused(["--etcd_endpoints", "127.0.0.1:1", "--data-dir", TMP,
                   "--ha_token_file", "/nonexistent/token"], "no token")
    check("--ha_token_file" in err, err)


@contextlib.contextmanager
def masters(members=1):
    """An etcd of @members and a list for the masters the caller starts:
    dumped on failure, all stopped (and their directories removed)
    after."""
    etcd = Etcd(members)
    ms = []
    try:
        yield etcd, ms
    except Exception:
        for m in ms:
            m.dump()
        raise
    finally:
        for m in ms:
            m.stop(signal.SIGKILL)
            m.remove_dir()
        etcd.close()


@contextlib.contextmanager
def cluster(members=1, standby_members=(0,), extra=()):
    """An etcd of @members, a leader m1 on member 0 and a standby m2 on
    @standby_members; masters are dumped on failure, all stopped after."""
    with masters(members) as (etcd, ms):
        ms.append(Master(etcd.endpoint(0), *extra))
        ms[0].wait_said("RPC listening")
        ms.append(Master(etcd.endpoints(standby_members), *extra))
        ms[1].wait_said("ha: standby")
        if "--ha_sync_standbys" in extra:
            ms[1].wait_said("following the leader")
        else:  # a standby campaigns only once in the leader's sync set
            ms[0].wait_said("sync set now [%s]" % ms[1].addr)
        yield etcd, ms[0], ms[1]


@contextlib.contextmanager
def extra_master(*args, **kw):
    """One more master (Master's arguments), dumped on failure, stopped
    and its directory removed after."""
    m = Master(*args, **kw)
    try:
        yield m
    except Exception:
        m.dump()
        raise
    finally:
        m.stop(signal.SIGKILL)
        m.remove_dir()


def sc_election(_):
    with cluster() as (etcd, m1, m2):
        value, rev, lease = etcd.key()
        check(value == m1.addr, "key value is the plain host:port: %r"
              % value)
        check(m1.ping() == (rev, 2),
              "Ping: view version = create revision %d, NEED_REMOUNT: %r"
              % (rev, m1.ping()))
        # /health and /metrics on both: role, view, the leader's address
        h = m1.http("/health")
        check(h["role"] == "leader" and h["service_ready"] is True and
              h["view_version"] == rev and h["leader_address"] == m1.addr,
              "the leader's /health: %r" % h)
        h = m2.http("/health")
        check(h["role"] == "standby" and h["service_ready"] is False and
              h["view_version"] == rev and h["leader_address"] == m1.addr,
              "the standby's /health: %r" % h)
        check(m1.metric("kvforge_ha_is_leader") == 1 and
              m2.metric("kvforge_ha_is_leader") == 0 and
              m1.metric("kvforge_ha_elections_won_total") == 1 and
              m2.metric("kvforge_ha_elections_won_total") == 0 and
              m2.metric("kvforge_ha_view_version") == rev,
              "kvforge_ha_* on /metrics")
        # the standby does not listen, however long it waits
        time.sleep(2 * TTL)
        check(not m2.listening(), "a standby does not listen")
        check(etcd.key()[0] == m1.addr, "the leader keeps the key")
        # SIGTERM: the port closes, then the lease is revoked (not left to
        # expire), and the standby leads under a higher view
        check(m1.stop() == 0, "leader exit status")
        check(etcd.lease_ttl(lease) == -1, "the leader's lease is revoked")
        m2.wait_said("RPC listening")
        check(m2.said("the previous lease is over"),
              "the standby does not wait after a revoke")
        value2, rev2, _ = etcd.key()
        check(value2 == m2.addr and rev2 > rev, "new view %r" % (value2,))
        check(m2.ping() == (rev2, 2), "Ping on the new leader")
        h = m2.http("/health")
        check(h["role"] == "leader" and h["view_version"] == rev2 and
              h["leader_address"] == m2.addr, "the new leader's /health")
        check(m2.stop() == 0, "second leader exit status")
        check(etcd.key() is None, "no key once nobody leads")


def sc_expiry(_):
    # a 3 s lease: the check that it outlives the SIGKILL has at least
    # 2.25 s (the time since the last renewal, at most a quarter TTL, is
    # gone) where TTL 1 s left 0.75 s to a loaded machine
    with cluster(extra=("--ha_lease_ttl", "3")) as (etcd, m1, m2):
        _, rev, lease = etcd.key()
        m1.stop(signal.SIGKILL)
        check(etcd.lease_ttl(lease) >= 0, "a killed leader's lease lives on")
        m2.wait_said("RPC listening")
        value2, rev2, _ = etcd.key()
        check(value2 == m2.addr and rev2 > rev, "the standby leads")
        check(etcd.lease_ttl(lease) == -1, "the old lease expired")
        check(m2.ping() == (rev2, 2), "Ping on the new leader")


class Poller:
    """Pings masters in a loop; records (sent, received, master, view)."""

    def __init__(self, masters):
        self.masters = masters
        self.answers = []
        self.go = True
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        while self.go:
            for i, m in enumerate(self.masters):
                sent = time.monotonic()
                r = m.ping(timeout=0.2)
                if r:
                    self.answers.append((sent, time.monotonic(), i, r[0]))
            time.sleep(0.01)

    def stop(self):
        self.go = False
        self.t.join()

    def check_one_at_a_time(self, old, new):
        """Every answer of @old came back before @new's first was sent."""
        firsts = [a[0] for a in self.answers if a[2] == new]
        lasts = [a[1] for a in self.answers if a[2] == old]
        check(firsts, "the new leader answered")
        check(lasts, "the old leader answered before")
        check(max(lasts) < min(firsts),
              "the old leader answered %.3f s after the new one began"
              % (max(lasts) - min(firsts)))
        views = {a[2]: a[3] for a in self.answers}
        check(views[new] > views[old], "the new view is higher")


def sc_frozen_etcd(_):
    with cluster(3, [1, 2]) as (etcd, m1, m2):
        poll = Poller([m1, m2])
        wait_for(lambda: any(a[2] == 0 for a in poll.answers),
                 "the leader answers")
        etcd.signal(0, signal.SIGSTOP)
        m2.wait_said("RPC listening")
        wait_for(lambda: any(a[2] == 1 for a in poll.answers),
                 "the new leader answers")
        poll.stop()
        poll.check_one_at_a_time(0, 1)
        # its line comes once it has stopped (the Poller's check is the
        # one about answers): waited for, not assumed printed already
        m1.wait_said("RPC port closed")
        check(not m1.listening(), "the old leader does not listen")
        # thawed, its member tells it the key is m2's: it stays a standby
        etcd.signal(0, signal.SIGCONT)
        m1.wait_said("ha: standby; leader is " + m2.addr)
        check(m1.metric("kvforge_ha_fencing_events_total") == 1 and
              m1.metric("kvforge_ha_leadership_lost_total") == 1,
              "the fencing deadline deposed the leader, counted")
        check(not m1.listening() and m1.ping() is None,
              "the old leader stays a standby")
        check(leader_of(etcd, [m1, m2]) is m2, "m2 keeps the key")
        # and it can lead again, on the same port, in the same process,
        # once it follows m2 and is in its sync set
        m2.wait_said("sync set now [%s]" % m1.addr)
        _, rev2, _ = etcd.key()
        check(m2.stop() == 0, "m2 exit status")
        wait_for(lambda: m1.ping(), "the old leader leads again")
        check(m1.ping()[0] > rev2, "under a new view")


def sc_frozen_master(_):
    with cluster() as (etcd, m1, m2):
        c = mc.Client(m1.addr)
        c.s.settimeout(3)
        check(c.call("Ping", [1, 2])["decoded"]["ok"][1] == 2,
              "Ping the leader")
        m1.p.send_signal(signal.SIGSTOP)
        m2.wait_said("RPC listening")
        check(m2.ping() is not None, "the new leader answers")
        # a request sent while it is frozen waits in its socket; thawed,
        # its loop thread sees it at once, racing its own main thread that
        # closes the port: the request must go unanswered either way
        ping = c.table["Ping"]
        body = mc.encode(ping["req"], [1, 2])
        c.s.sendall(struct.pack("<BBBBIIII", 21, 0, 0, 0, 9, ping["id"],
                                len(body), 0) + body)
        m1.p.send_signal(signal.SIGCONT)
        try:
            r = c.s.recv(16)
        except OSError:
            r = None
        check(not r, "a thawed deposed leader answered: %r" % (r,))
        m1.wait_said("RPC port closed")
        check(m1.ping() is None and m2.ping() is not None,
              "only the new leader answers")


def bench_binary():
    return os.environ.get("KVF_BENCH_BIN") or os.path.join(
        os.path.dirname(MASTER), "tools", "kvforge-bench")


def sc_bench_follows(_):
    bench = bench_binary()
    # asynchronous: the new leader has no standby left to acknowledge
    with cluster(extra=("--ha_sync_standbys", "0")) as (etcd, m1, m2):
        _, rev, _ = etcd.key()
        env = dict(os.environ, MC_STORE_CLUSTER_ID=CLUSTER)
        env.pop("KVF_BENCH_QUIET", None)
        # four paced phases of 1 s each; the leader dies in the first
        p = subprocess.Popen(
            [bench, "--master", "etcd://" + etcd.endpoint(0),
             "--objects", "1000", "--batch", "10", "--rate", "1000",
             "--connections", "2", "--depth", "2", "--rounds", "1"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            env=env)
        lines = []
        t = threading.Thread(
            target=lambda: lines.extend(p.stderr), daemon=True)
        t.start()
        try:
            wait_for(lambda: any("view %d" % rev in x for x in lines),
                     "the bench on the first leader")
            # past its set-up (the mount, then put batches: journaled),
            # which is not retried
            wait_for(lambda: m1.http("/health")["replication"]
                     ["last_seq"] >= 3, "the bench's puts")
            m1.stop(signal.SIGKILL)
            m2.wait_said("RPC listening")
            rc = p.wait(timeout=60)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            t.join(timeout=5)
        out = "".join(lines)
        _, rev2, _ = etcd.key()
        check(rc == 0, "the bench completes across the failover: %d\n%s"
              % (rc, out))
        check(out.count("failover: view") == 1 and
              ("failover: view %d " % rev2) in out,
              "one failover reported, to view %d:\n%s" % (rev2, out))


CFG = [1, 0, 0, 0, None, False, [], "", [], False, 0, "", None]
ME = [0x1111, 0x2222]


def client(m):
    c = mc.Client.__new__(mc.Client)
    c.s = socket.create_connection(("127.0.0.1", m.port), timeout=30)
    c.s.settimeout(30)
    c.seq = 0
    c.table = TABLE
    return c


def mount(c, size=256 << 20):
    seg = [[0xAAAA, 0xBBBB], "ha-seg", 0x7f0000000000, size,
           "127.0.0.1:19999", "tcp", ""]
    r = c.call("MountSegment", seg, ME)
    check("ok" in r["decoded"], "MountSegment: %r" % (r,))


def put(c, key, size=1000):
    """True when PutStart and PutEnd were both acknowledged."""
    r = c.call("PutStart", ME, key, size, CFG, "default")
    if "ok" not in r["decoded"]:
        return False
    r = c.call("PutEnd", ME, [key, None], 0, "default")
    return "ok" in r["decoded"]


def exist(c, keys):
    r = c.call("BatchExistKey", keys, "default")
    return [x.get("ok") for x in r["decoded"]]


def sc_replication(_):
    with cluster() as (etcd, m1, m2):
        m2.wait_said("following the leader")
        c = client(m1)
        mount(c)
        acked = ["rk%d" % i for i in range(300) if put(c, "rk%d" % i)]
        check(len(acked) == 300, "every put acknowledged: %d" % len(acked))
        h = m1.http("/health")["replication"]
        check(h["side"] == "leader" and h["standbys"] == 1 and
              h["sync_standbys"] == 1, "the leader's standby: %r" % h)
        check(m1.metric("kvforge_ha_replication_lag_records") == 0,
              "no lag once every put was answered")
        m1.stop(signal.SIGKILL)
        m2.wait_said("RPC listening")
        check(m2.said("promoted: engine opened from the replicated"),
              "promoted from its journal")
        c2 = client(m2)
        found = exist(c2, acked)
        lost = [k for k, f in zip(acked, found) if f is not True]
        check(not lost, "%d of %d acknowledged objects lost: %r"
              % (len(lost), len(acked), lost[:5]))
        # alone now: with --ha_sync_standbys 1 it refuses mutations,
        # and PutStart, whose answer would wait for a standby
        check(not put(c2, "alone"), "a lone leader refuses")
        check(m2.http("/health")["replication"]["standbys"] == 0,
              "no standby")
        check(exist(c2, ["alone"]) == [False], "nothing half-applied")


HDR = struct.Struct(">IBBHIIQQ")  # ha/repl_wire.h
MAGIC = 0x4b564652


def frame(ftype, payload=b"", view=0, seq=0, count=0):
    return HDR.pack(MAGIC, 1, ftype, 0, len(payload), count, view,
                    seq) + payload


def hello(cluster, token, member="peer", seq=0, view=0):
    p = b"".join(struct.pack(">H", len(x)) + x
                 for x in (cluster.encode(), token.encode(), member.encode()))
    return frame(1, p, view, seq)


def read_frame(sock):
    """(type, view, seq, count, payload), or None when closed."""
    def exactly(n):
        b = b""
        while len(b) < n:
            c = sock.recv(n - len(b))
            if not c:
                return None
            b += c
        return b
    h = exactly(HDR.size)
    if h is None:
        return None
    _, _, t, _, n, count, view, seq = HDR.unpack(h)
    p = exactly(n) if n else b""
    return t, view, seq, count, p


def repl_addr(etcd):
    r = etcd.call("/v3/kv/range",
                  {"key": b64("kvforge/%s/replication/leader" % CLUSTER)})
    v = base64.b64decode(r["kvs"][0]["value"]).decode()
    host, rest = v.rsplit(":", 1)
    port, view = rest.split()
    return host, int(port), int(view)


def sc_repl_peers(_):
    tok = tempfile.NamedTemporaryFile("w", dir=TMP, delete=False)
    tok.write("s3cret\n")
    tok.close()
    try:
        with cluster(extra=("--ha_token_file", tok.name)) as (etcd, m1, m2):
            m2.wait_said("following the leader")
            host, port, view = repl_addr(etcd)

            def refused(data, log):
                s = socket.create_connection((host, port), timeout=10)
                s.sendall(data)
                got = []
                while True:
                    f = read_frame(s)
                    if f is None:
                        break
                    got.append(f)
                s.close()
                check(all(f[0] == 3 for f in got),
                      "only a refusal for %r: %r" % (log, got))
                m1.wait_said(log)

            refused(hello("other", "s3cret"), "another cluster id")
            refused(hello(CLUSTER, "wrong"), "wrong token")
            refused(hello(CLUSTER, ""), "wrong token")
            refused(b"GET / HTTP/1.1\r\n\r\n" + b"x" * 40,
                    "malformed or oversized hello")
            refused(HDR.pack(MAGIC, 1, 1, 0, 0x7fffffff, 0, 0, 0),
                    "malformed or oversized hello")
            refused(frame(5, b"", 0, 7), "malformed hello")
            # a journal ahead of the leader's
            refused(hello(CLUSTER, "s3cret", seq=1 << 40), "ahead")
            check(m1.http("/health")["replication"]["standbys"] == 1,
                  "the real standby still follows")
            # a real hello, then an acknowledgement of records never sent
            s = socket.create_connection((host, port), timeout=10)
            s.sendall(hello(CLUSTER, "s3cret", "fake"))
            f = read_frame(s)
            check(f and f[0] == 2 and f[1] == view, "welcome: %r" % (f,))
            s.sendall(frame(5, b"", view, 1 << 30))
            m1.wait_said("acknowledged a sequence never sent")
            s.close()

            # standby side: a fake leader sends bad frames
            lsock = socket.socket()
            lsock.bind(("127.0.0.1", 0))
            lsock.listen(4)
            fport = lsock.getsockname()[1]
            etcd.call("/v3/kv/put", {
                "key": b64("kvforge/%s/replication/leader" % CLUSTER),
                "value": b64("127.0.0.1:%d %d" % (fport, view))})
            m3 = Master(etcd.endpoint(0), "--ha_token_file", tok.name)
            try:
                lsock.settimeout(30)
                bad = [
                    frame(4, struct.pack(">Q", 1) + b"z" * 30, view - 1, 1,
                          1),   # an older view
                    frame(4, struct.pack(">Q", 1) + b"z" * 30, view, 5, 1),
                    frame(4, struct.pack(">Q", 1) + b"z" * 30, view, 1, 1),
                    HDR.pack(MAGIC, 1, 4, 0, 0x7fffffff, 1, view, 1),
                ]
                logs = ["refused a frame of an older view",
                        "records out of sequence",
                        "records that do not decode",
                        "malformed or oversized frame"]
                lineage = struct.pack(">QQ", view, 0)
                for data, log in zip(bad, logs):
                    c, _ = lsock.accept()
                    c.settimeout(30)
                    f = read_frame(c)
                    check(f and f[0] == 1, "a hello: %r" % (f,))
                    c.sendall(frame(2, lineage, view, 0, 1) + data)
                    m3.wait_said(log)
                    c.close()
                h = m3.http("/health")["replication"]
                check(h["side"] == "standby" and h["last_seq"] == 0,
                      "nothing applied: %r" % h)
                check(m3.metric("kvforge_ha_replication_refused_total") >= 4,
                      "refusals counted")
            finally:
                m3.stop(signal.SIGKILL)
                m3.remove_dir()
                lsock.close()
    finally:
        os.unlink(tok.name)


def sc_lagging(_):
    toks = []
    for t in ("s3cret", "other"):
        f = tempfile.NamedTemporaryFile("w", dir=TMP, delete=False)
        f.write(t)
        f.close()
        toks.append(f.name)
    try:
        with cluster(extra=("--ha_token_file", toks[0])) as (etcd, m1, m2):
            # m3 is held behind: the leader refuses it (another token)
            m3 = Master(etcd.endpoint(0), "--ha_token_file", toks[1])
            try:
                m1.wait_said("wrong token")
                c = client(m1)
                mount(c)
                acked = ["lk%d" % i for i in range(100) if put(c, "lk%d" % i)]
                check(len(acked) == 100, "acknowledged: %d" % len(acked))
                m2.p.send_signal(signal.SIGSTOP)
                m1.stop(signal.SIGKILL)
                # the only candidate left lacks the records: it must not
                # campaign (else it would lead with none of them)
                m3.wait_said("not in the last leader's sync set")
                check(not m3.said("RPC listening") and not m3.listening(),
                      "the standby held behind does not lead")
                m2.p.send_signal(signal.SIGCONT)
                m2.wait_said("RPC listening")
                found = exist(client(m2), acked)
                lost = [k for k, f in zip(acked, found) if f is not True]
                check(not lost, "%d acknowledged objects lost" % len(lost))
                check(not m3.said("RPC listening"), "m3 never led")
            finally:
                m3.stop(signal.SIGKILL)
                m3.remove_dir()
    finally:
        for t in toks:
            os.unlink(t)


def synced_with_objects(m1, prefix, n):
    """Once leader @m1 has two synced standbys: @n objects put through
    it, all acknowledged (their keys)."""
    wait_for(lambda: synced(m1) == 2, "two synced standbys")
    c = client(m1)
    mount(c)
    acked = ["%s%d" % (prefix, i) for i in range(n)
             if put(c, "%s%d" % (prefix, i))]
    check(len(acked) == n, "acknowledged: %d" % len(acked))
    return acked


def same_address(etcd, m):
    """Another machine under @m's address (an extra_master): here another
    port, as @m's is held, advertised as @m's."""
    return extra_master(etcd.endpoint(0), "--ha_advertise_address", m.addr)


def sc_replaced_member(_):
    """A synced standby's machine replaced under the same address with an
    empty data directory while the leader dies: the sync set names its
    address, but the newcomer's journal holds none of the records, so it
    must not campaign (leading, it would have none of the objects, and
    the standby that has them would set its journal aside); the standby
    that holds them leads."""
    with cluster() as (etcd, m1, m2), extra_master(etcd.endpoint(0)) as m3:
        acked = synced_with_objects(m1, "rm", 100)
        # m3 frozen first, killed after the leader: a leader that saw its
        # connection close would drop it from the set
        freeze(m2)
        freeze(m3)
        m1.stop(signal.SIGKILL)
        m3.p.kill()  # stopped, never continued: it runs no more
        m3.p.wait(timeout=30)
        with same_address(etcd, m3) as m4:
            m4.wait_said("this journal does not follow view")
            check(not m4.said("RPC listening") and not m4.listening(),
                  "the newcomer does not lead")
            m2.p.send_signal(signal.SIGCONT)
            m2.wait_said("RPC listening")
            check_all_there(m2, acked, "after the replacement")
            m4.wait_said("following the leader of view")
            check(not m4.said("RPC listening"), "the newcomer never led")


def sc_namesake(_):
    """A synced standby frozen, so its connection looks alive, and a new
    master started under its address with an empty data directory: the
    leader must not go on naming the address in the sync set while the
    journal behind it is the new, empty one (welcomed, it follows the
    leader's view and may campaign): the old connection is dropped and a
    set without the address published before the welcome; the new one
    is listed once it has caught up."""
    with cluster() as (etcd, m1, m2), extra_master(etcd.endpoint(0)) as m3:
        acked = synced_with_objects(m1, "ns", 50)
        freeze(m3)
        mark = len(m1.lines)
        follows = "standby %s follows from sequence 1" % m3.addr
        with same_address(etcd, m3) as m4:
            m4.wait_said("following the leader of view")
            wait_for(lambda: any(follows in x for x in m1.lines[mark:]),
                     "the new standby follows")
            after = list(m1.lines[mark:])
            i = next(k for k, x in enumerate(after) if follows in x)
            check(any("sync set now [" in x and m3.addr not in x
                      for x in after[:i]),
                  "a set without %s before its welcome: %r"
                  % (m3.addr, after[:i + 1]))
            check(any("dropped: a new connection under its name" in x
                      for x in after[:i]), "the old connection dropped")
            wait_for(lambda: any("sync set now [" in x and m3.addr in x
                                 for x in m1.lines[mark + i:]),
                     "the new standby in the sync set")
            check_all_there(m1, acked, "on the leader")


def sc_port_held(_):
    """A standby holds the RPC port it will serve on once elected: no
    other socket binds it meanwhile (with SO_REUSEADDR or without) and a
    client dialling it is refused, as at a closed port; a master started
    on a port another process holds exits at once, instead of standing by
    to be elected unable to serve; the standby, elected, serves on it."""
    with cluster() as (etcd, m1, m2):
        check(not bindable(m2.port, False) and not bindable(m2.port, True),
              "the standby's port %d is held" % m2.port)
        check(not m2.listening(), "a client dialling the standby is refused")
        with socket.socket() as holder:
            holder.bind(("127.0.0.1", free_port()))
            with extra_master(etcd.endpoint(0),
                              port=holder.getsockname()[1]) as m3:
                rc = m3.p.wait(timeout=30)
                m3.t.join(timeout=5)
                check(rc != 0 and m3.said("cannot hold the RPC port"),
                      "a master on a held port exits: rc %r, %r"
                      % (rc, m3.lines[-3:]))
        m1.stop(signal.SIGKILL)
        m2.wait_said("RPC listening")
        check(m2.listening(), "the new leader serves on the port it held")


def past_failed_promotion(name, hook, armed, failed_said):
    """A leader with two synced standbys and @name's objects; the third
    master has the fault hook $@hook armed (its start-up says @armed).
    The other standby is frozen while the leader is killed, so the
    hooked one is elected and its promotion fails; thawed only then, the
    other must lead with every acknowledged object, and the failed one
    have said @failed_said and never served."""
    with cluster() as (etcd, m1, m2), \
            extra_master(etcd.endpoint(0), env={hook: "1000"}) as m3:
        acked = synced_with_objects(m1, name, 50)
        if not m3.said(armed):
            print("%s: skipped (no fault hooks: --enable-fault-injection)"
                  % name)
            return
        freeze(m2)
        m1.stop(signal.SIGKILL)
        m3.wait_said("promotion failed")
        m2.p.send_signal(signal.SIGCONT)
        m2.wait_said("RPC listening")
        check_all_there(m2, acked, "on the standby that took over")
        check(m3.said(failed_said) and not m3.said("RPC listening"),
              "the failing standby said %r, never led" % failed_said)


def sc_step_aside(name):
    """A standby elected whose promotion fails (the engine does not open:
    a fault hook) must not keep the leadership without serving: it steps
    aside, and the other synced standby, thawed only then, leads with
    every acknowledged object."""
    past_failed_promotion(name, "KVF_FAULT_PROMOTE",
                          "fault injection: the next", "stepped aside")


def sc_late_step_aside(name):
    """A standby elected whose promotion fails after its view's sync set
    was published (a fault hook: as if the RPC service did not start)
    leaves that set naming more than itself before it steps aside: it
    waits for the other standby, thawed only then, to follow it and join
    the set. That standby then campaigns and leads with every
    acknowledged object; with the set naming the failed master alone it
    never would, and every promotion of the failed one fails."""
    past_failed_promotion(name, "KVF_FAULT_PROMOTE_LATE",
                          "after publishing their view", "standbys after")


def sc_repl_port(_):
    """A standby elected that cannot lead for a reason found at its
    promotion (its --ha_replication_port held by another process) must
    fail before it publishes anything of its view: the sync set still
    names the other standby, which leads with every object, and the
    failed one, its journal's lineage unchanged, follows and can lead
    again once its port is free."""
    with cluster() as (etcd, m1, m2), socket.socket() as holder:
        holder.bind(("127.0.0.1", free_port()))
        holder.listen(1)
        with extra_master(etcd.endpoint(0), "--ha_replication_port",
                          str(holder.getsockname()[1])) as m3:
            acked = synced_with_objects(m1, "rp", 50)
            freeze(m2)
            m1.stop(signal.SIGKILL)
            m3.wait_said("promotion failed")
            check(m3.said("cannot listen on"), "why: %r" % m3.lines[-5:])
            m2.p.send_signal(signal.SIGCONT)
            m2.wait_said("RPC listening")
            check_all_there(m2, acked, "on the standby that took over")
            holder.close()
            m2.wait_said("sync set now [%s]" % m3.addr)
            m2.stop(signal.SIGKILL)
            m3.wait_said("RPC listening")
            check_all_there(m3, acked, "on the master that failed once")


def sc_chain(_):
    with cluster() as (etcd, m1, m2), \
            extra_master(etcd.endpoint(0)) as m3:
        ms = [m2, m3]
        m1.wait_said("sync set now [")
        wait_for(lambda: any(m2.addr in x and m3.addr in x
                             for x in m1.lines if "sync set now" in x),
                 "both standbys in the sync set")
        c = client(m1)
        mount(c)
        acked = ["ck%d" % i for i in range(100) if put(c, "ck%d" % i)]
        m1.stop(signal.SIGKILL)
        wait_for(lambda: leader_of(etcd, ms) and
                 leader_of(etcd, ms).said("RPC listening"),
                 "a standby leads")
        new = leader_of(etcd, ms)
        other = m3 if new is m2 else m2
        # the other standby follows the new leader and joins its set
        new.wait_said("sync set now [%s]" % other.addr)
        c = client(new)
        mount(c)
        more = ["ck%d" % i for i in range(100, 200) if put(c, "ck%d" % i)]
        check(len(acked) == 100 and len(more) == 100,
              "acknowledged %d + %d" % (len(acked), len(more)))
        new.stop(signal.SIGKILL)
        other.wait_said("RPC listening")
        found = exist(client(other), acked + more)
        lost = [k for k, f in zip(acked + more, found) if f is not True]
        check(not lost, "%d acknowledged objects lost across two "
              "failovers" % len(lost))


def sc_legacy_key(_):
    etcd = Etcd(1)
    m = None
    try:
        m = Master(etcd.endpoint(0), "--ha_publish_legacy_key")
        m.wait_said("RPC listening")
        new = etcd.key()
        old = etcd.key(key="mooncake-store/master_view")
        check(new is not None and new[0] == m.addr, "the key: %r" % (new,))
        check(old == new, "the <= v0.3.7 key: %r, the key: %r" % (old, new))
        check(m.ping() == (new[1], 2), "Ping: the view version")
        check(m.stop() == 0, "exit status")
        check(etcd.key() is None and
              etcd.key(key="mooncake-store/master_view") is None,
              "both keys gone with the revoked lease")
    except Exception:
        if m:
            m.dump()
        raise
    finally:
        if m:
            m.stop(signal.SIGKILL)
        etcd.close()


RDMA_SEG = [[0xCCCC, 0xDDDD], "ha-rdma-seg", 0x7e0000000000, 64 << 20,
            "127.0.0.1:19998", "rdma", ""]
META = "--enable_http_metadata_server", "--http_metadata_server_port", "0"


def replicas(c, keys):
    """Each key's replica descriptors (None when the key is unknown)."""
    r = c.call("BatchGetReplicaList", keys, "default")["decoded"]
    return [x["ok"][0] if "ok" in x else None for x in r]


def sc_repl_state(_):
    with cluster(extra=META) as (etcd, m1, m2):
        m2.wait_said("following the leader")
        c = client(m1)
        r = c.call("MountSegment", RDMA_SEG, ME)
        check("ok" in r["decoded"], "MountSegment: %r" % (r,))
        check(put(c, "sk0"), "a put acknowledged")
        before = replicas(c, ["sk0"])[0]
        check(before and before[0][1]["value"][0][2] == "rdma",
              "an rdma descriptor: %r" % (before,))
        meta = {"mooncake/ram/host-a": b'{"buffers": [1, 2]}',
                "mooncake/rpc_meta/host-a": b'{"ip": "10.0.0.1"}',
                "mooncake/ram/host-b": b"gone"}
        for k, v in meta.items():
            m1.meta(k, v)
        m1.meta("mooncake/ram/host-b", delete=True)
        del meta["mooncake/ram/host-b"]
        # the metadata store follows asynchronously: the standby's own
        # metadata server shows it
        wait_for(lambda: all(m2.meta(k) == v for k, v in meta.items()) and
                 m2.meta("mooncake/ram/host-b") is None,
                 "the standby's metadata store")
        m1.stop(signal.SIGKILL)
        m2.wait_said("RPC listening")
        # no remount: the new leader knows the segment as the old one did
        c2 = client(m2)
        r = c2.call("QuerySegmentStatusById", RDMA_SEG[0])["decoded"]
        check(r.get("ok") == 1, "the segment on the new leader: %r" % (r,))
        r = c2.call("QuerySegmentStatus", RDMA_SEG[1])["decoded"]
        check(r.get("ok") == 1, "the segment by name: %r" % (r,))
        after = replicas(c2, ["sk0"])[0]
        check(after == before, "descriptors: %r, acknowledged %r"
              % (after, before))
        for k, v in meta.items():
            got = m2.meta(k)
            check(got == v, "metadata %s on the new leader: %r" % (k, got))
        check(m2.meta("mooncake/ram/host-b") is None, "a deleted key")
        # the new leader replicates both to a standby that joins it
        with extra_master(etcd.endpoint(0), *META) as m3:
            m3.wait_said("following the leader")
            m2.meta("mooncake/ram/host-c", b"c")
            meta["mooncake/ram/host-c"] = b"c"
            wait_for(lambda: all(m3.meta(k) == v for k, v in meta.items()),
                     "the new standby's metadata store")
            check(os.path.exists(os.path.join(m3.dir,
                                              "kvforge-master.segments")),
                  "the segment table in the new standby's data dir")


LOOP_ARGS = ("--default_kv_lease_ttl=500ms",)  # as the fixtures' capture
LOOP_SEG = [[0x1005, 0x1006], "ha-loop-seg", 0x7d0000000000, 1 << 30,
            "127.0.0.1:19997", "tcp", ""]
LOOP_ME = [0x1007, 0x1008]  # not the captured client's UUID (ME)


class Writer:
    """Batches of four puts on one connection to one leader, until it
    dies or stop(): the acknowledged keys with the descriptors the leader
    gave them, and the batch whose answer never came (in flight)."""

    def __init__(self, m, tag):
        self.c = client(m)
        self.tag = tag
        self.acked = {}
        self.inflight = None
        self.go = True
        self.error = None
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        i = 0
        try:
            while self.go:
                keys = ["%s-%d-%d" % (self.tag, i, j) for j in range(4)]
                i += 1
                self.inflight = keys
                r = self.c.call("BatchPutStart", LOOP_ME, keys, [1000] * 4, CFG,
                                "default")["decoded"]
                if not all("ok" in x for x in r):
                    self.error = "BatchPutStart: %r" % (r,)
                    return
                r = self.c.call("BatchPutEnd", LOOP_ME,
                                [[k, None] for k in keys],
                                4, "default")["decoded"]
                if not all("ok" in x for x in r):
                    self.error = "BatchPutEnd: %r" % (r,)
                    return
                for k, d in zip(keys, replicas(self.c, keys)):
                    self.acked[k] = d
                self.inflight = None
                time.sleep(0.02)  # a steady trickle, not a flood
        except (OSError, ConnectionError, KeyError, TypeError):
            pass  # the leader died under it

    def stop(self):
        self.go = False
        self.t.join(timeout=60)
        check(not self.t.is_alive(), "the writer stops")


def remount(c):
    """What a client does when Ping says NEED_REMOUNT."""
    if c.call("Ping", LOOP_ME)["decoded"]["ok"][1] == 2:
        r = c.call("ReMountSegment", [LOOP_SEG], LOOP_ME)
        check("ok" in r["decoded"], "ReMountSegment: %r" % (r,))


def check_objects(c, acked, unknown):
    """Every acknowledged key has its descriptors; each batch in flight at
    a kill is whole or absent."""
    keys = sorted(acked)
    for i in range(0, len(keys), 256):
        part = keys[i:i + 256]
        for k, d in zip(part, replicas(c, part)):
            check(d is not None, "acknowledged %s lost" % k)
            check(d == acked[k], "%s: descriptors %r, acknowledged %r"
                  % (k, d, acked[k]))
    for batch in unknown:
        found = exist(c, batch)
        check(all(f is True for f in found) or
              not any(f is True for f in found),
              "a batch half applied: %r %r" % (batch, found))


def synced(m):
    """The standbys in @m's sync set; None while it has no replication
    side (between its election and its promotion, after a step-down)."""
    return m.http("/health").get("replication", {}).get("sync_standbys")


def failover_rounds():
    """failover_loop's leader kills: $KVF_HA_FAILOVERS, default 10."""
    return int(os.environ.get("KVF_HA_FAILOVERS", "10"))


def sc_failover_loop(_):
    rounds = failover_rounds()
    etcd = Etcd(1)
    ms, dead, bench, lines = [], [], None, []
    acked, unknown = {}, []
    try:
        ms.append(Master(etcd.endpoint(0), *LOOP_ARGS))
        ms[0].wait_said("RPC listening")
        ms += [Master(etcd.endpoint(0), *LOOP_ARGS) for _ in range(2)]
        wait_for(lambda: synced(ms[0]) == 2, "two synced standbys")
        env = dict(os.environ, MC_STORE_CLUSTER_ID=CLUSTER)
        env.pop("KVF_BENCH_QUIET", None)
        # the load generator writes through etcd:// the whole time (its
        # put phase outlasts the loop; killed at the end)
        bench = subprocess.Popen(
            [bench_binary(), "--master", "etcd://" + etcd.endpoint(0),
             "--objects", "10000000", "--batch", "8", "--rate", "25",
             "--connections", "1", "--depth", "1", "--rounds", "1"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            env=env)
        threading.Thread(target=lambda: lines.extend(bench.stderr),
                         daemon=True).start()
        view = etcd.key()[1]
        wait_for(lambda: any(x.rstrip().endswith("view %d" % view)
                             for x in lines),
                 "the bench on the first leader")
        for k in range(rounds):
            lead = leader_of(etcd, ms)
            check(lead and lead.said("RPC listening"), "round %d: a leader"
                  % k)
            # both standbys hold everything: either may take over
            wait_for(lambda: synced(lead) == 2, "round %d: two synced "
                     "standbys" % k)
            c = client(lead)
            if k == 0:
                r = c.call("MountSegment", LOOP_SEG, LOOP_ME)
                check("ok" in r["decoded"], "MountSegment: %r" % (r,))
            else:
                # the new leader answers for everything acknowledged
                # before the owner remounts, and after
                check_objects(c, acked, unknown)
                remount(c)
                check_objects(c, acked, unknown)
            w = Writer(lead, "lp%d" % k)
            wait_for(lambda: len(w.acked) >= 12 or w.error,
                     "round %d: batches acknowledged" % k)
            lead.stop(signal.SIGKILL)
            w.stop()
            check(w.error is None, "round %d: %s" % (k, w.error))
            acked.update(w.acked)
            if w.inflight:
                unknown.append(w.inflight)
            # back as a standby: a replaced machine, an empty data dir
            ms.remove(lead)
            dead.append(lead)
            ms.append(Master(etcd.endpoint(0), *LOOP_ARGS))
            wait_for(lambda: leader_of(etcd, ms) and
                     leader_of(etcd, ms).said("RPC listening"),
                     "round %d: a new leader" % k)
            view = etcd.key()[1]
            # the bench follows through etcd:// and writes on
            wait_for(lambda: any("failover: view %d " % view in x
                                 for x in lines),
                     "round %d: the bench on view %d" % (k, view))
            check(bench.poll() is None, "the bench runs: %s"
                  % "".join(lines[-5:]))
        lead = leader_of(etcd, ms)
        c = client(lead)
        check_objects(c, acked, unknown)
        remount(c)
        check_objects(c, acked, unknown)
        check(len(acked) >= 12 * rounds, "%d objects acknowledged"
              % len(acked))
        bench.kill()
        bench.wait()
        # an unmodified client's captured run against the last leader,
        # emptied first as the capture's master was (it ends in RemoveAll)
        r = c.call("RemoveAll", True, "default")["decoded"]
        check(isinstance(r, int) and r >= len(acked), "RemoveAll: %r" % r)
        import test_master_e2e as e2e
        for folder in ("py-reference", "cpp-client"):
            try:
                e2e.replay_folder(folder, port=lead.port, view=view)
            except e2e.Fail as e:
                raise Fail("replay of %s: %s" % (folder, e))
        print("failover_loop: %d failovers, %d acknowledged objects "
              "checked after each, %d batches in flight at a kill"
              % (rounds, len(acked), len(unknown)))
    except Exception:
        for m in ms + dead[-2:]:
            m.dump()
        if lines:
            sys.stderr.write("--- bench:\n%s" % "".join(lines[-20:]))
        raise
    finally:
        if bench and bench.poll() is None:
            bench.kill()
            bench.wait()
        for m in ms + dead:
            m.stop(signal.SIGKILL)
            m.remove_dir()
        etcd.close()


# A leader that acknowledges alone (after a short wait) until a standby
# is back, and keeps as little backlog as it can (one batch).
DEGRADE = ("--ha_sync_degrade", "--ha_sync_timeout_ms", "300")
TINY_BACKLOG = ("--ha_replication_backlog_bytes", "1")


def lead_alone(etcd, *extra):
    m = Master(etcd.endpoint(0), *extra)
    m.wait_said("RPC listening")
    return m


def said_count(m, text):
    return sum(text in line for line in list(m.lines))


def wait_said_again(m, text, before):
    """Wait until @m said @text more than @before times."""
    wait_for(lambda: said_count(m, text) > before,
             "%s: %r again" % (m.addr, text))


def check_all_there(m, keys, what):
    found = exist(client(m), keys)
    lost = [k for k, f in zip(keys, found) if f is not True]
    check(not lost, "%s: %d of %d acknowledged objects lost: %r"
          % (what, len(lost), len(keys), lost[:5]))


def sc_snapshot(_):
    """A standby joining after the backlog dropped the start of the
    history catches up from a snapshot, joins the sync set and leads
    with every object after the leader's SIGKILL."""
    with masters() as (etcd, ms):
        ms.append(lead_alone(etcd, *(DEGRADE + TINY_BACKLOG)))
        m1 = ms[0]
        c = client(m1)
        mount(c)
        acked = ["sk%d" % i for i in range(300) if put(c, "sk%d" % i)]
        check(len(acked) == 300, "acknowledged alone: %d" % len(acked))
        ms.append(Master(etcd.endpoint(0), *(DEGRADE + TINY_BACKLOG)))
        m2 = ms[1]
        m1.wait_said("catches up from a snapshot")
        m2.wait_said("installed a snapshot")
        m1.wait_said("sync set now [%s]" % m2.addr)
        more = ["sk%d" % i for i in range(300, 400) if put(c, "sk%d" % i)]
        check(len(more) == 100, "acknowledged with the standby: %d"
              % len(more))
        h = m2.http("/health")["replication"]
        check(h["side"] == "standby" and h["last_seq"] ==
              m1.http("/health")["replication"]["last_seq"],
              "the standby holds the leader's last sequence: %r" % h)
        m1.stop(signal.SIGKILL)
        m2.wait_said("RPC listening")
        check_all_there(m2, acked + more, "after the snapshot")


class Putter:
    """Puts keys through @m in a thread; @acked lists the acknowledged."""

    def __init__(self, m, prefix):
        self.c = client(m)
        mount(self.c)
        self.prefix = prefix
        self.acked = []
        self.go = True
        self.running = threading.Event()
        self.running.set()
        self.idle = threading.Event()
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        i = 0
        while self.go:
            if not self.running.is_set():
                self.idle.set()
                self.running.wait()
                self.idle.clear()
                continue
            k = "%s%d" % (self.prefix, i)
            i += 1
            if put(self.c, k):
                self.acked.append(k)

    def pause(self):
        """Return once no put is in flight."""
        self.running.clear()
        wait_for(self.idle.is_set, "the putter paused")

    def resume(self):
        self.running.set()

    def wait(self, n):
        wait_for(lambda: len(self.acked) >= n, "%d puts" % n)

    def stop(self):
        self.go = False
        self.running.set()
        self.t.join(timeout=60)
        check(not self.t.is_alive(), "the putter stopped")
        return list(self.acked)


def sc_standby_restart(_):
    """A standby SIGKILLed while puts go on, restarted on its directory:
    it catches up (from a snapshot: the backlog holds one batch), joins
    the sync set again and leads with every object."""
    with masters() as (etcd, ms):
        ms.append(lead_alone(etcd, *(DEGRADE + TINY_BACKLOG)))
        m1 = ms[0]
        ms.append(Master(etcd.endpoint(0), *(DEGRADE + TINY_BACKLOG)))
        m2 = ms[1]
        in_set = "sync set now [%s]" % m2.addr
        m1.wait_said(in_set)
        pt = Putter(m1, "rs")
        pt.wait(100)
        m2.stop(signal.SIGKILL)
        m1.wait_said("sync set now []")
        n = len(pt.acked)
        pt.wait(n + 100)  # acknowledged without it, past the backlog
        # writes pause while it catches up: with a backlog of one batch
        # it could never keep up with them before it is in the sync set
        # (then the leader waits for it)
        pt.pause()
        before = said_count(m1, in_set)
        ms.append(Master(etcd.endpoint(0), *(DEGRADE + TINY_BACKLOG),
                         data_dir=m2.dir, port=m2.port))
        m3 = ms[2]
        m3.wait_said("replication: standby, journal at sequence")
        check(not m3.said("journal at sequence 0"),
              "restarted on its own journal")
        m3.wait_said("installed a snapshot")
        wait_said_again(m1, in_set, before)
        pt.resume()
        n = len(pt.acked)
        pt.wait(n + 50)  # synchronous again
        acked = pt.stop()
        m1.stop(signal.SIGKILL)
        m3.wait_said("RPC listening")
        check_all_there(m3, acked, "after the restart")


class Proxy:
    """A TCP proxy to @target; cut() closes every connection through it
    (new ones are still accepted)."""

    def __init__(self, target):
        self.target = target
        self.ls = socket.socket()
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(8)
        self.port = self.ls.getsockname()[1]
        self.socks = []
        self.mu = threading.Lock()
        self.conns = 0
        self.cuts = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                a, _ = self.ls.accept()
            except OSError:
                return  # closed
            with self.mu:
                cuts = self.cuts
            try:
                b = socket.create_connection(self.target, timeout=10)
                b.settimeout(None)
            except OSError:
                a.close()
                continue
            with self.mu:
                if cuts != self.cuts:  # accepted before a cut: cut too
                    a.close()
                    b.close()
                    continue
                self.socks += [a, b]
                self.conns += 1
            for x, y in ((a, b), (b, a)):
                threading.Thread(target=self._pump, args=(x, y),
                                 daemon=True).start()

    @staticmethod
    def _pump(x, y):
        try:
            while True:
                d = x.recv(65536)
                if not d:
                    break
                y.sendall(d)
        except OSError:
            pass
        for s in (x, y):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self):
        with self.mu:
            socks, self.socks = self.socks, []
            self.cuts += 1
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def stop(self, sig=None):
        self.ls.close()
        self.cut()

    def remove_dir(self):
        pass

    def dump(self):
        pass


def sc_stream_cut(_):
    """The replication stream cut (a proxy between the standby and the
    leader closes it) while puts go on: the standby follows again from
    where it was, rejoins the sync set and leads with every object."""
    with masters() as (etcd, ms):
        ms.append(lead_alone(etcd, *DEGRADE))
        m1 = ms[0]
        host, port, view = repl_addr(etcd)
        proxy = Proxy((host, port))
        ms.append(proxy)  # closed with the masters
        _, _, lease = etcd.key(key="kvforge/%s/replication/leader" % CLUSTER)
        etcd.call("/v3/kv/put", {
            "key": b64("kvforge/%s/replication/leader" % CLUSTER),
            "value": b64("127.0.0.1:%d %d" % (proxy.port, view)),
            "lease": str(lease)})
        ms.append(Master(etcd.endpoint(0), *DEGRADE))
        m2 = ms[2]
        in_set = "sync set now [%s]" % m2.addr
        m1.wait_said(in_set)
        pt = Putter(m1, "sc")
        pt.wait(100)
        for _ in range(2):
            follows = said_count(m2, "following the leader")
            joined = said_count(m1, in_set)
            proxy.cut()
            n = len(pt.acked)
            pt.wait(n + 50)
            wait_said_again(m2, "following the leader", follows)
            wait_said_again(m1, in_set, joined)
        n = len(pt.acked)
        pt.wait(n + 50)
        acked = pt.stop()
        check(proxy.conns >= 3, "three connections through the proxy")
        check(not m2.said("installed a snapshot"),
              "resumed from the backlog, not from a snapshot")
        check(not m2.said("records out of sequence"), "no gap")
        m1.stop(signal.SIGKILL)
        m2.wait_said("RPC listening")
        check_all_there(m2, acked, "after the cuts")


def sc_handover(_):
    with cluster(extra=("--ha_sync_standbys", "0")) as (etcd, m1, m2):
        c = client(m1)
        mount(c)
        m2.p.send_signal(signal.SIGSTOP)
        # asynchronous: acknowledged at once; ~10 MB of records, more
        # than the frozen standby's socket takes, so most are still on
        # the leader when it is told to go (in batches of 50, quickly:
        # the leader's sender must not give up on the frozen standby,
        # SEND_TIMEOUT_S, before it is thawed)
        pad = "x" * 4000
        acked = []
        for b in range(50):
            keys = ["hk%d-%s" % (b * 50 + i, pad) for i in range(50)]
            r = c.call("BatchPutStart", ME, keys, [1000] * 50, CFG,
                       "default")
            if not all("ok" in x for x in r["decoded"]):
                continue
            r = c.call("BatchPutEnd", ME, [[k, None] for k in keys], 4,
                       "default")
            acked += [k for k, x in zip(keys, r["decoded"]) if "ok" in x]
        check(len(acked) == 2500, "acknowledged: %d" % len(acked))
        c.s.close()
        m1.p.send_signal(signal.SIGTERM)
        # it drains: waits for the standby (or, without the wait, exits)
        wait_for(lambda: m1.said("hand-over: waiting for") or
                 m1.p.poll() is not None, "the leader drains or exits")
        m2.p.send_signal(signal.SIGCONT)
        check(m1.p.wait(timeout=30) == 0, "the old leader's exit status")
        m2.wait_said("RPC listening")
        c2 = client(m2)
        found = sum((exist(c2, acked[i:i + 100])
                     for i in range(0, len(acked), 100)), [])
        lost = [k[:8] for k, f in zip(acked, found) if f is not True]
        check(not lost, "%d of %d acknowledged objects lost in the "
              "hand-over: %r" % (len(lost), len(acked), lost[:5]))


def sc_lone_expiry(_):
    with cluster(extra=("--client_ttl", "5")) as (etcd, m1, m2):
        c = client(m1)
        mount(c)
        acked = ["ek%d" % i for i in range(20) if put(c, "ek%d" % i)]
        check(len(acked) == 20, "acknowledged: %d" % len(acked))
        m2.stop(signal.SIGKILL)

        def alone():
            c.call("Ping", ME)  # the client stays live meanwhile
            return m1.http("/health")["replication"]["standbys"] == 0

        wait_for(alone, "the leader alone", step=0.2)
        check(not put(c, "refused"), "a lone leader refuses mutations")
        before = m1.http("/health")["replication"]["last_seq"]
        # the client goes silent: the engine expires it, and its journal
        # records the expiry (segment, objects, client) although no
        # standby can have them yet
        wait_for(lambda: exist(client(m1), acked) == [False] * 20,
                 "the silent client's objects expire on the lone leader")
        wait_for(lambda: m1.http("/health")["replication"]["last_seq"] >
                 before, "the expiry in the lone leader's journal")
        # a standby that comes back gets them from the backlog
        with extra_master(etcd.endpoint(0), "--client_ttl", "5") as m3:
            m3.wait_said("following the leader")
            last = m1.http("/health")["replication"]["last_seq"]
            wait_for(lambda: m3.http("/health")["replication"]["last_seq"]
                     == last, "the new standby has the expiry's records")


def sc_held_apart(_):
    """An answer held for a stopped standby holds only its own client:
    another client's connection lands on another RPC thread and is
    served meanwhile."""
    with cluster(extra=("--rpc_thread_num", "2",
                        "--ha_sync_timeout_ms", "60000")) as (etcd, m1, m2):
        m2.wait_said("following the leader")
        c1, c2 = client(m1), client(m1)
        c2.s.settimeout(20)
        mount(c1)
        check(put(c1, "ha0"), "a put with the standby running")
        check(exist(c2, ["ha0"]) == [True], "the other client sees it")
        freeze(m2)
        held = []
        t = threading.Thread(target=lambda: held.append(put(c1, "ha1")),
                             daemon=True)
        try:
            t.start()
            # ha1's PutStart is journaled on the leader, then held
            wait_for(lambda: (m1.metric(
                "kvforge_ha_replication_lag_records") or 0) > 0,
                "ha1's PutStart journaled", 30)
            try:
                seen = exist(c2, ["ha0"])
            except OSError:
                seen = None  # its thread is the one holding ha1
            check(seen == [True], "another client answered while ha1 "
                  "is held")
            check(not held, "ha1 answered without the standby")
        finally:
            m2.p.send_signal(signal.SIGCONT)
        t.join(60)
        check(held == [True], "ha1 acknowledged once the standby is back")
        check(exist(c2, ["ha1"]) == [True], "ha1 complete")


def send(c, method, *args):
    """Send one request without reading its answer; its seq_num."""
    info = c.table[method]
    body = mc.encode(info["req"], list(args) if len(args) > 1 else args[0])
    seq = c.seq
    c.s.sendall(struct.pack("<BBBBIIII", 21, 0, 0, 0, seq, info["id"],
                            len(body), 0) + body)
    c.seq += 1
    return seq


def answer(c, method):
    """The next answer on @c, read as @method's: (seq_num, decoded)."""
    _, _, err, _, seq, length, alen = struct.unpack("<BBBBIII", c._recv(16))
    body = c._recv(length + alen)
    check(not err, "transport error %d on %s" % (err, method))
    return seq, mc.mcwp.decode_body(body[:length],
                                    c.table[method]["resp"])["decoded"]


def leader_seq(m):
    return m.http("/health")["replication"]["last_seq"]


def freeze(m):
    """SIGSTOP @m and wait until every thread of it is stopped (a
    thread of a loaded machine may otherwise still run a little)."""
    m.p.send_signal(signal.SIGSTOP)

    def stopped():
        d = "/proc/%d/task" % m.p.pid
        for t in os.listdir(d):
            try:
                with open(os.path.join(d, t, "stat")) as f:
                    state = f.read().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue  # the thread ended
            if state not in "tT":
                return False
        return True

    wait_for(stopped, "the standby stopped")


def pipeline_held(m, c, keys):
    """PutEnd of @keys (started already) on @c one after the other, each
    sent once the one before is journaled (so each comes in its own
    read, while the answers before it wait for the stopped standby);
    their seq_nums."""
    seqs = []
    for k in keys:
        before = leader_seq(m)
        seqs.append(send(c, "PutEnd", ME, [k, None], 0, "default"))
        wait_for(lambda: leader_seq(m) > before,
                 "%s's PutEnd journaled while the answers before it "
                 "wait" % k)
    return seqs


def check_unanswered(c, secs, what):
    """Nothing arrives on @c within @secs seconds (the socket's timeout
    stays @secs: the caller sets its next one)."""
    c.s.settimeout(secs)
    try:
        early = c.s.recv(16)
    except socket.timeout:
        early = None
    check(not early, "%s: %r" % (what, early))


def start_puts(c, keys):
    for k in keys:
        r = c.call("PutStart", ME, k, 1000, CFG, "default")
        check("ok" in r["decoded"], "PutStart %s: %r" % (k, r))


# one RPC thread (so another client shares the parking one) and a sync
# timeout no frozen standby reaches
PARKED = (1, (0,), ("--rpc_thread_num", "1", "--ha_sync_timeout_ms", "60000"))


def held_pipeline(m1, m2, prefix):
    """A client of the leader @m1 that put PREFIX0 and started PREFIX1-3,
    @m2 (the standby) frozen, then PutEnd of PREFIX1-3 pipelined on it
    (pipeline_held()): the client and their seq_nums."""
    m2.wait_said("following the leader")
    c = client(m1)
    mount(c)
    check(put(c, prefix + "0"), "a put with the standby running")
    keys = [prefix + str(i) for i in (1, 2, 3)]
    start_puts(c, keys)
    freeze(m2)
    return c, pipeline_held(m1, c, keys)


def sc_parked_order(_):
    """Answers held for a stopped standby are parked, not waited for:
    the same connection's next requests are read and journaled and
    another client of the one RPC thread is served meanwhile; nothing of
    the first connection is answered (not even a read that waited for
    nothing) until the standby is back; then all are, in order."""
    with cluster(*PARKED) as (etcd, m1, m2):
        try:
            c, seqs = held_pipeline(m1, m2, "po")
            seqs.append(send(c, "BatchExistKey", ["po0"], "default"))
            c2 = client(m1)
            check(exist(c2, ["po0"]) == [True],
                  "another client of the RPC thread answered meanwhile")
            check_unanswered(c, 1, "answered before the standby "
                             "acknowledged")
        finally:
            m2.p.send_signal(signal.SIGCONT)
        c.s.settimeout(60)
        got = [answer(c, "PutEnd") for _ in range(3)]
        got.append(answer(c, "BatchExistKey"))
        check([g[0] for g in got] == seqs,
              "answers in request order: %r, sent %r"
              % ([g[0] for g in got], seqs))
        check(all("ok" in g[1] for g in got[:3]), "PutEnds acknowledged:"
              " %r" % ([g[1] for g in got[:3]],))
        check([x.get("ok") for x in got[3][1]] == [True],
              "the read behind them: %r" % (got[3][1],))
        check(put(c, "po4"), "the connection goes on")
        check(exist(c2, ["po1", "po2", "po3", "po4"]) == [True] * 4,
              "all complete")


def sc_parked_fenced(_):
    """A leader fenced while answers are parked for a stopped standby
    never sends them: the connection closes unanswered."""
    with cluster(*PARKED) as (etcd, m1, m2):
        try:
            c, _ = held_pipeline(m1, m2, "pf")
            etcd.signal(0, signal.SIGSTOP)  # no renewal: it fences itself
            try:
                m1.wait_said("RPC port closed")
                got = b""
                c.s.settimeout(30)
                try:
                    while True:
                        b = c.s.recv(4096)
                        if not b:
                            break
                        got += b
                except OSError:
                    pass
                check(not got, "a fenced leader sent parked answers: %r"
                      % (got[:64],))
            finally:
                etcd.signal(0, signal.SIGCONT)
        finally:
            m2.p.send_signal(signal.SIGCONT)


def sc_freed_space(_):
    """A PutStart never hands out space whose freeing the standbys have
    not acknowledged: with one segment that fits one object, client A's
    Remove of it is held for the stopped standby, and client B's PutStart
    of an object of the same size (which only that space fits) is held
    too, not answered with the space the standby still lists; once the
    standby is back both are answered."""
    size = 1 << 20
    with cluster(*PARKED) as (etcd, m1, m2):
        m2.wait_said("following the leader")
        a, b = client(m1), client(m1)
        # one and a half objects: X alone is below the eviction
        # watermark (the master does not evict it meanwhile)
        mount(a, size * 3 // 2)
        check(put(a, "fx", size), "X put with the standby running")
        before = leader_seq(m1)
        try:
            freeze(m2)
            send(a, "Remove", "fx", False, "default")
            wait_for(lambda: leader_seq(m1) > before,
                     "X's removal journaled while the standby is stopped")
            send(b, "PutStart", ME, "fy", size, CFG, "default")
            check_unanswered(b, 2, "PutStart answered with space whose "
                             "freeing the standby has not acknowledged")
        finally:
            m2.p.send_signal(signal.SIGCONT)
        a.s.settimeout(60)
        b.s.settimeout(60)
        _, r = answer(a, "Remove")
        check("ok" in r, "X's removal acknowledged: %r" % (r,))
        _, r = answer(b, "PutStart")
        check("ok" in r, "Y's PutStart answered: %r" % (r,))
        r = b.call("PutEnd", ME, ["fy", None], 0, "default")
        check("ok" in r["decoded"], "Y's PutEnd: %r" % (r,))
        check(exist(b, ["fx", "fy"]) == [False, True], "X gone, Y there")


SCENARIOS = {
    "flags": sc_flags,
    "election": sc_election,
    "expiry": sc_expiry,
    "frozen_etcd": sc_frozen_etcd,
    "frozen_master": sc_frozen_master,
    "bench_follows": sc_bench_follows,
    "replication": sc_replication,
    "repl_peers": sc_repl_peers,
    "lagging": sc_lagging,
    "replaced_member": sc_replaced_member,
    "namesake": sc_namesake,
    "port_held": sc_port_held,
    "step_aside": sc_step_aside,
    "late_step_aside": sc_late_step_aside,
    "repl_port": sc_repl_port,
    "chain": sc_chain,
    "legacy_key": sc_legacy_key,
    "repl_state": sc_repl_state,
    "failover_loop": sc_failover_loop,
    "snapshot": sc_snapshot,
    "standby_restart": sc_standby_restart,
    "stream_cut": sc_stream_cut,
    "handover": sc_handover,
    "lone_expiry": sc_lone_expiry,
    "held_apart": sc_held_apart,
    "parked_order": sc_parked_order,
    "parked_fenced": sc_parked_fenced,
    "freed_space": sc_freed_space,
}


def lease_ttl(binary):
    """The masters' --ha_lease_ttl: 1 s, 2 s for a sanitized build. A
    leader must confirm a renewal within 3/4 of it or it fences itself;
    a sanitized master starved of CPU (ASan, load 15: 'no renewal
    confirmed before the fencing deadline' right after it began to
    serve) then lost its leadership in the middle of a scenario, and
    another failover than the scenario's own breaks every one of them."""
    with open(binary, "rb") as f:
        elf = f.read()
    return 2 if b"__asan_init" in elf or b"__tsan_init" in elf else 1


def shares(names, n):
    """@names cut in @n shares: each in turn, longest first, goes to the
    share with the least time so far (a scenario takes about 4.5 s,
    failover_loop about 1.9 s a round), ties to the lowest; a share keeps
    the list's order. The same list and $KVF_HA_FAILOVERS give every
    run the same split."""
    rounds = failover_rounds()

    def cost(name):
        return 1.9 * rounds if name == "failover_loop" else 4.5

    load, owner = [0.0] * n, [0] * len(names)
    for at in sorted(range(len(names)), key=lambda at: -cost(names[at])):
        owner[at] = load.index(min(load))
        load[owner[at]] += cost(names[at])
    return [[name for at, name in enumerate(names) if owner[at] == i]
            for i in range(n)]


def parse_part(spec):
    """(K, N) from 'K/N', 1 <= K <= N; None if malformed."""
    try:
        k, n = (int(x) for x in spec.split("/"))
    except ValueError:
        return None
    return (k, n) if 1 <= k <= n else None


def main():
    global MASTER, ETCD, TABLE, TTL, PART, PARTS
    MASTER, ETCD = sys.argv[1], sys.argv[2]
    args = sys.argv[3:]
    if args[:1] == ["--part"]:
        part = parse_part(args[1]) if len(args) > 1 else None
        if not part:
            print("FAIL --part wants K/N with 1 <= K <= N")
            return 1
        PART, PARTS = part
        args = args[2:]
    TTL = lease_ttl(MASTER)
    TABLE = mc.load_table()
    names = (args or os.environ.get("KVF_HA_SCENARIOS", "").split()
             or list(SCENARIOS))
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        print("FAIL unknown scenario(s): %s" % " ".join(unknown))
        return 1
    names = shares(names, PARTS)[PART - 1]
    if not names:
        print("SKIP: share %d/%d of the scenarios is empty" % (PART, PARTS))
        return 77
    for name in names:
        t = time.monotonic()
        try:
            SCENARIOS[name](name)
        except Fail as e:
            print("FAIL %s: %s" % (name, e))
            return 1
        print("ok %s (%.1f s)" % (name, time.monotonic() - t))
    return 0


if __name__ == "__main__":
    sys.exit(main())
