#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Offline references for kvforge-bench --workload trace.

Reads a Mooncake request trace (tools/bench/traces/README.md) and replays
its prefix blocks through exact policies over blocks, at a capacity given
as a fraction of the trace's unique blocks:

  lru     exact least-recently-used;
  belady  Belady's MIN: on a miss with the cache full, evict the cached
          block whose next use is furthest (never used again: first);
  opt     MIN that may also decline the incoming block when its own next
          use is further than every cached block's (the optimum of a
          cache that need not admit what it is given);
  s3fifo  S3-FIFO: new blocks enter a small FIFO (--small, a fraction of
          the room), move to the main FIFO if used again there, else leave
          a ghost key that sends them straight to main when they return;
  headlast exact LRU touching a request's blocks leaves first, so that a
          prefix's head is its most recent block;
  seen    exact LRU with admission on second sight: with the cache full,
          a block no earlier request used is not stored, nor is the rest
          of its request (a lookup stops at the refused block anyway);
  wtinylfu W-TinyLFU: a window LRU (--window, a fraction of the room)
          takes every new block; the window's oldest enters the main LRU
          only if more requests used it than the main LRU's oldest, else
          it goes (requests using each block, exact, halved every
          10 x room blocks asked for);
  tail    exact LRU that, with the cache full, does not store a request's
          last block (in these traces a partial page, used again by 1% of
          conversation requests and 5% of synthetic ones);
  oracle  exact LRU that, with the cache full, stores only blocks a later
          request uses (knowing the future: the most admission can add
          to LRU).

A request asks for its blocks in order and is served the leading ones
found (prefix semantics, as SGLang HiCache looks them up: a block after
the first miss is computed again even if cached). Every block of a request
is used: found blocks are touched, missing ones inserted, as the replay's
exist-then-put does. The hit ratio is blocks served / blocks asked for.
With --copies N the trace is replayed N times with disjoint hash spaces,
interleaved by time (request i of copies 0..N-1, then request i + 1).

Capacity 1 (or more) holds every block: the hit ratio is then the trace's
own reuse ratio, which kvforge-bench's replay must match exactly.

    tools/bench/trace-sim.py tools/bench/traces/conversation_trace.jsonl
    tools/bench/trace-sim.py --capacity 0.1,0.25 --json FILE...
"""
import argparse
import heapq
import json
import sys
from collections import OrderedDict


def load(path, head=0):
    """The trace's requests as lists of block ids; exits on a bad line."""
    reqs = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if head and len(reqs) >= head:
                break
            try:
                r = json.loads(line)
                ids = r["hash_ids"]
                r["timestamp"] + 0
                if not all(isinstance(x, int) and x >= 0 for x in ids):
                    raise ValueError("hash_ids must be non-negative integers")
            except (ValueError, KeyError, TypeError) as e:
                sys.exit(f"{path}:{n}: malformed trace line: {e}")
            reqs.append(ids)
    return reqs


def expand(reqs, copies):
    """The accesses, one list of (copy, id) blocks per request."""
    return [[(c, b) for b in ids] for ids in reqs for c in range(copies)]


def lru(reqs, cap, admit=None):
    """Exact LRU; with @admit, a block missed while the cache is full is
    stored only if admit(r, ids, i, used) says so (block @i of request
    @r, @used: the blocks of earlier requests), and once one is
    refused, no later block of its request is (a lookup stops at the
    refused block anyway)."""
    cache = OrderedDict()
    used = set()
    hits = 0
    for r, ids in enumerate(reqs):
        prefix = True
        refused = False
        for i, b in enumerate(ids):
            if b in cache:
                cache.move_to_end(b)
                hits += prefix
                continue
            prefix = False
            if cap <= 0:
                continue
            if len(cache) >= cap:
                if admit and (refused or not admit(r, ids, i, used)):
                    refused = True
                    continue
                cache.popitem(last=False)
            cache[b] = True
        if admit:
            used.update(ids)
    return hits


def s3fifo(reqs, cap, small_frac=0.1):
    small_cap = max(1, int(cap * small_frac))
    main_cap = max(1, cap - small_cap)
    small, main, ghost, freq = OrderedDict(), OrderedDict(), OrderedDict(), {}
    hits = 0

    def evict_main():
        while True:
            b, _ = main.popitem(last=False)
            if freq[b] > 0:
                freq[b] -= 1
                main[b] = True
            else:
                del freq[b]
                return

    def to_main(b):
        if len(main) >= main_cap:
            evict_main()
        main[b] = True
        freq[b] = 0

    def evict_small():
        b, _ = small.popitem(last=False)
        if freq[b] > 0:
            to_main(b)
            return
        del freq[b]
        ghost[b] = True
        if len(ghost) > cap:
            ghost.popitem(last=False)

    for ids in reqs:
        prefix = True
        for b in ids:
            if b in small or b in main:
                freq[b] = min(freq[b] + 1, 3)
                hits += prefix
                continue
            prefix = False
            if cap <= 0:
                continue
            if b in ghost:
                del ghost[b]
                to_main(b)
                continue
            while len(small) >= small_cap:
                evict_small()
            small[b] = True
            freq[b] = 0
    return hits


def headlast(reqs, cap):
    cache = OrderedDict()
    hits = 0
    for ids in reqs:
        prefix = True
        for b in ids:
            prefix = prefix and b in cache
            hits += prefix
        for b in reversed(ids):
            if b in cache:
                cache.move_to_end(b)
            elif cap > 0:
                if len(cache) >= cap:
                    cache.popitem(last=False)
                cache[b] = True
    return hits


def seen(reqs, cap):
    return lru(reqs, cap, lambda r, ids, i, used: ids[i] in used)


def wtinylfu(reqs, cap, window=0.01):
    wcap = max(1, int(cap * window))
    mcap = cap - wcap
    win, main, cnt = OrderedDict(), OrderedDict(), {}
    hits = asked = 0
    for ids in reqs:
        prefix = True
        for b in ids:
            cnt[b] = cnt.get(b, 0) + 1
            asked += 1
            if asked % (10 * max(cap, 1)) == 0:
                for k in list(cnt):
                    cnt[k] >>= 1
                    if not cnt[k]:
                        del cnt[k]
            for seg in (win, main):
                if b in seg:
                    seg.move_to_end(b)
                    hits += prefix
                    break
            else:
                prefix = False
                if cap <= 0:
                    continue
                win[b] = True
                if len(win) <= wcap:
                    continue
                x, _ = win.popitem(last=False)
                if len(main) < mcap:
                    main[x] = True
                elif mcap > 0 and cnt.get(x, 0) > cnt.get(next(iter(main)), 0):
                    main.popitem(last=False)
                    main[x] = True
    return hits


def tail(reqs, cap):
    return lru(reqs, cap, lambda r, ids, i, used: i < len(ids) - 1)


def oracle(reqs, cap):
    last = {b: r for r, ids in enumerate(reqs) for b in ids}
    return lru(reqs, cap, lambda r, ids, i, used: last[ids[i]] > r)


def next_uses(reqs):
    """For every access (in order), the position of its block's next use."""
    flat = [b for ids in reqs for b in ids]
    nxt = [0] * len(flat)
    last = {}
    never = len(flat) + 1
    for i in range(len(flat) - 1, -1, -1):
        nxt[i] = last.get(flat[i], never)
        last[flat[i]] = i
    return flat, nxt


def belady(reqs, cap, bypass=False):
    """MIN over blocks; with bypass, the incoming block may be declined."""
    flat, nxt = next_uses(reqs)
    starts = set()
    pos = 0
    for ids in reqs:
        starts.add(pos)
        pos += len(ids)
    cache = {}  # block -> its next use
    heap = []  # (-next use, block), stale entries skipped
    hits = 0
    prefix = True
    for i, b in enumerate(flat):
        if i in starts:
            prefix = True
        if b in cache:
            hits += prefix
            cache[b] = nxt[i]
            heapq.heappush(heap, (-nxt[i], b))
            continue
        prefix = False
        if cap <= 0:
            continue
        if len(cache) >= cap:
            while -heap[0][0] != cache.get(heap[0][1]):
                heapq.heappop(heap)
            if bypass and nxt[i] >= -heap[0][0]:
                continue
            _, victim = heapq.heappop(heap)
            del cache[victim]
        cache[b] = nxt[i]
        heapq.heappush(heap, (-nxt[i], b))
    return hits


POLICIES = {
    "lru": lru,
    "belady": belady,
    "opt": lambda reqs, cap: belady(reqs, cap, bypass=True),
    "s3fifo": lambda reqs, cap: s3fifo(reqs, cap, SMALL),
    "headlast": headlast,
    "seen": seen,
    "wtinylfu": lambda reqs, cap: wtinylfu(reqs, cap, WINDOW),
    "tail": tail,
    "oracle": oracle,
}
SMALL = 0.1
WINDOW = 0.01


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", nargs="+", metavar="TRACE")
    ap.add_argument("--capacity", default="0.1,0.25,0.5,1",
                    help="fractions of the unique blocks (default "
                    "0.1,0.25,0.5,1)")
    ap.add_argument("--policy", default="lru,belady",
                    help="comma-separated: " + ", ".join(POLICIES))
    ap.add_argument("--copies", type=int, default=1)
    ap.add_argument("--head", type=int, default=0,
                    help="only the first N requests")
    ap.add_argument("--small", type=float, default=0.1,
                    help="s3fifo's small queue, a fraction of the room")
    ap.add_argument("--window", type=float, default=0.01,
                    help="wtinylfu's window, a fraction of the room")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    global SMALL, WINDOW
    SMALL = a.small
    WINDOW = a.window
    caps = [float(x) for x in a.capacity.split(",")]
    pols = a.policy.split(",")
    for p in pols:
        if p not in POLICIES:
            ap.error(f"unknown policy {p}")
    if a.copies < 1:
        ap.error("--copies must be positive")
    out = []
    for path in a.traces:
        reqs = expand(load(path, a.head), a.copies)
        blocks = sum(len(r) for r in reqs)
        unique = len({b for r in reqs for b in r})
        rec = {"trace": path, "requests": len(reqs), "blocks": blocks,
               "unique_blocks": unique,
               "reuse_ratio": lru(reqs, unique) / blocks if blocks else 0.0,
               "hit_ratio": {}}
        for p in pols:
            rec["hit_ratio"][p] = {}
            for c in caps:
                n = int(c * unique)
                rec["hit_ratio"][p][str(c)] = (
                    POLICIES[p](reqs, n) / blocks if blocks else 0.0)
        out.append(rec)
    if a.json:
        json.dump(out if len(out) > 1 else out[0], sys.stdout, indent=1)
        print()
        return
    for rec in out:
        print(f"{rec['trace']}: {rec['requests']} requests, "
              f"{rec['blocks']} blocks, {rec['unique_blocks']} unique, "
              f"reuse ratio {rec['reuse_ratio']:.4f}")
        print("  capacity " + "".join(f"{p:>10}" for p in pols))
        for c in caps:
            print(f"  {c:8.2f} " + "".join(
                f"{rec['hit_ratio'][p][str(c)]:10.4f}" for p in pols))


if __name__ == "__main__":
    main()
