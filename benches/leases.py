#!/usr/bin/env python3
"""The same semaphore-lease load on a locker and on Throttle (issue 41),
one server at a time; benches/leases.sh starts each server and runs this.

Three figures for one server:

- ``cycles``: acquire + release cycles per second, and the server's CPU per
  cycle (from /proc/PID/stat), with 1, 8 and 64 client processes on a
  semaphore too large to contend;
- ``contention``: a semaphore of 3 under 20 client threads (one process)
  that each take a lease, work WORK seconds, and release it, for a fixed
  time: leases
  granted, the busy fraction (time held over 3 x the run, measured by the
  clients from grant to release), and the most ever held at once;
- ``expiry``: a lease left to expire (ttl 200 ms) while one waiter waits for
  it: from the expiry (the holder's send + ttl) to the waiter's grant.

The locker is asked through the shipped Python client (``acquire_lease`` /
``release`` for cycles, the ``lease()`` guard for contention and expiry);
Throttle through a library-free keep-alive HTTP client with one peer per
client process (acquire: PUT /peers/ID/SEM with block_for; release: DELETE
/peers/ID/SEM). Loopback only; every loop is bounded in time.
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing as mp
import os
import queue
import statistics
import threading
import time
from typing import Any, Callable, Dict, List, Tuple

WORK = 0.010
TTL_S = 5.0


def cpu_seconds(pid: int) -> float:
    """User + system CPU of process ``pid`` so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# ---- the two sides ----------------------------------------------------


class LockerSide:
    """A locker, through the shipped Python client."""

    def __init__(self, where: str) -> None:
        from locker_client import Client

        self.c = Client(where, timeout=10.0)

    def cycle(self, sem: str) -> None:
        r = self.c.acquire_lease(sem, ttl=TTL_S)
        assert r.ok, r
        self.c.release(sem, r.lease or "")

    def hold(self, sem: str, work: float, wait: float) -> Tuple[float, float]:
        with self.c.lease(sem, ttl=TTL_S, wait=wait):
            start = time.monotonic()
            time.sleep(work)
            return start, time.monotonic()

    def expiry(self, sem: str, ttl: float) -> float:
        sent = time.monotonic()
        assert self.c.acquire_lease(sem, ttl=ttl).ok
        with self.c.lease(sem, ttl=TTL_S, wait=2 * ttl + 1):
            return time.monotonic() - (sent + ttl)


class ThrottleSide:
    """Throttle, through a keep-alive HTTP/1.1 connection and one peer."""

    def __init__(self, where: str) -> None:
        host, port = where.rsplit(":", 1)
        self.h = http.client.HTTPConnection(host, int(port), timeout=10)
        self.peer = self.new_peer()

    def call(self, method: str, path: str, body: Any = None) -> Tuple[int, bytes]:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"} if data is not None else {}
        self.h.request(method, path, body=data, headers=headers)
        r = self.h.getresponse()
        return r.status, r.read()

    def new_peer(self, expires_in: str = "60s") -> int:
        status, body = self.call("POST", "/new_peer", {"expires_in": expires_in})
        assert status == 200, body
        return int(json.loads(body))

    def acquire(self, peer: int, sem: str, query: str) -> int:
        status, body = self.call("PUT", f"/peers/{peer}/{sem}?{query}", 1)
        assert status in (200, 202), (status, body)
        return status

    def cycle(self, sem: str) -> None:
        assert self.acquire(self.peer, sem, f"expires_in={TTL_S:g}s") == 200
        self.call("DELETE", f"/peers/{self.peer}/{sem}")

    def hold(self, sem: str, work: float, wait: float) -> Tuple[float, float]:
        while self.acquire(self.peer, sem, f"expires_in={TTL_S:g}s&block_for={wait:g}s") != 200:
            pass
        start = time.monotonic()
        time.sleep(work)
        end = time.monotonic()
        self.call("DELETE", f"/peers/{self.peer}/{sem}")
        return start, end

    def expiry(self, sem: str, ttl: float) -> float:
        holder = self.new_peer()
        sent = time.monotonic()
        assert self.acquire(holder, sem, f"expires_in={int(ttl * 1000)}ms") == 200
        while self.acquire(self.peer, sem, f"expires_in={TTL_S:g}s&block_for={2 * ttl + 1:g}s") != 200:
            pass
        got = time.monotonic() - (sent + ttl)
        self.call("DELETE", f"/peers/{self.peer}/{sem}")
        return got


SIDES: Dict[str, Callable[[str], Any]] = {"locker": LockerSide, "throttle": ThrottleSide}


# ---- the loads ----------------------------------------------------------


def cycles_worker(kind: str, where: str, seconds: float, ready: Any, out: Any) -> None:
    side = SIDES[kind](where)
    side.cycle("big")  # connected and warm
    ready.wait()
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        side.cycle("big")
        n += 1
    out.put(n)


def contend(side: Any, seconds: float, out: Any) -> None:
    end = time.monotonic() + seconds
    held: List[Tuple[float, float]] = []
    while time.monotonic() < end:
        try:
            held.append(side.hold("sem3", WORK, max(0.05, end - time.monotonic())))
        except Exception as e:  # a wait that ends with the run: not held
            if type(e).__name__ != "NotAcquired":
                raise
    out.put([h for h in held if h[1] <= end])


def run_threads(kind: str, where: str, n: int, seconds: float) -> List[Any]:
    """Runs ``n`` contending client threads together; their results."""
    sides = [SIDES[kind](where) for _ in range(n)]
    out: "queue.Queue[Any]" = queue.Queue()
    threads = [threading.Thread(target=contend, args=(side, seconds, out)) for side in sides]
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + 60)
    return [out.get_nowait() for _ in threads]


def run_workers(target: Callable[..., None], kind: str, where: str, n: int, seconds: float, pid: int) -> Tuple[List[Any], float]:
    """Runs ``n`` worker processes together; their results and the
    server's CPU seconds over the run."""
    ctx = mp.get_context("fork")
    ready = ctx.Barrier(n + 1)
    out = ctx.Queue()
    procs = [ctx.Process(target=target, args=(kind, where, seconds, ready, out)) for _ in range(n)]
    for p in procs:
        p.start()
    ready.wait()
    cpu = cpu_seconds(pid)
    results = [out.get(timeout=seconds + 60) for _ in procs]
    cpu = cpu_seconds(pid) - cpu
    for p in procs:
        p.join()
    return results, cpu


def most_at_once(intervals: List[Tuple[float, float]]) -> int:
    events = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    now = most = 0
    for _, d in events:
        now += d
        most = max(most, now)
    return most


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("kind", choices=sorted(SIDES))
    ap.add_argument("where", help="a locker's endpoint, or Throttle's host:port")
    ap.add_argument("pid", type=int, help="the server's process id, for its CPU")
    ap.add_argument("--seconds", type=float, default=5.0, help="each cycles run")
    ap.add_argument("--contention-seconds", type=float, default=10.0)
    ap.add_argument("--expiries", type=int, default=20)
    args = ap.parse_args()
    kind, where = args.kind, args.where
    for n in (1, 8, 64):
        counts, cpu = run_workers(cycles_worker, kind, where, n, args.seconds, args.pid)
        cycles = sum(counts)
        print(
            f"{kind} cycles clients={n}: {cycles / args.seconds:,.0f} cycles/s, "
            f"server CPU {cpu / max(cycles, 1) * 1e6:.1f} us/cycle",
            flush=True,
        )
    held = run_threads(kind, where, 20, args.contention_seconds)
    intervals = [h for per in held for h in per]
    busy = sum(e - s for s, e in intervals) / (3 * args.contention_seconds)
    print(
        f"{kind} contention (capacity 3, 20 clients, {WORK * 1000:g} ms work, {args.contention_seconds:g} s): "
        f"{len(intervals):,} leases granted, busy {busy:.1%}, at most {most_at_once(intervals)} held at once",
        flush=True,
    )
    side = SIDES[kind](where)
    lat = sorted(side.expiry("one", 0.2) * 1000 for _ in range(args.expiries))
    print(
        f"{kind} expiry to grant ({args.expiries} expiries of a 200 ms lease): median {statistics.median(lat):.2f} ms, "
        f"max {lat[-1]:.2f} ms",
        flush=True,
    )


if __name__ == "__main__":
    main()
