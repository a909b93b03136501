"""The Python client in lockstep, against the transport and against Redis.

The caller this project exists for is a Python web worker that asks before
each call and waits for the answer: one process, one request in flight.
This bench measures that caller, asks per second and the latency of each
ask, for:

- ``zmq REQ, plain``: a bare pyzmq REQ socket sending the plain form
  (``b"big"``) to the same locker and reading ``go``: the floor any client
  of this locker stands on; and ``zmq REQ, structured``: the same socket
  sending the structured ask with the key (``msgpack.packb`` of its map)
  and unpacking the reply map, what any client of the structured form does
  at the least; and ``zmq REQ, plain, on asyncio``: the plain form again,
  its answer awaited on the event loop in the fewest steps asyncio allows
  (the socket's descriptor watched with ``add_reader``, one future per
  ask), the floor of any asyncio client;
- ``Client.ask`` on a fixed window and on a rolling window, ``Client.go``
  (the plain form), ``Client.permit`` and ``AsyncClient.ask``, each with a
  key out of 10,000 users; ``ask_many`` in batches of 100, per decision;
- ``limits`` (the library behind slowapi and Flask-Limiter) on a local
  Redis: ``FixedWindowRateLimiter`` and ``MovingWindowRateLimiter`` with
  the same keys, and redis-py's ``PING``, Redis's own floor.

Every contender runs in every round, in slices of 200 asks taken in turn
(the order turning from slice to slice), and a ratio is taken within each
round, so that a machine shared with other work (the figures' load average
is printed) moves both sides of a ratio alike. The limits never refuse (a billion per second): what is measured is
the asking, not the limiting.

It starts its own locker (``$LOCKER_BIN``, else ``target/release/locker`` at
the repository's root) and its own ``redis-server`` on loopback ports, and
installs ``limits`` and ``redis`` with pip when they are missing (neither is
a dependency of the client). Run from the repository's root::

    python3 clients/python/benches/lockstep.py            # 9 rounds of 3,000 asks each
    python3 clients/python/benches/lockstep.py --quick    # a smoke run: 1 round of 200

``--no-install`` skips the Redis contenders when ``limits``, ``redis`` or
``redis-server`` is missing instead of installing them; ``--json`` prints
the figures as JSON; ``--client-src DIR`` measures the client in ``DIR``
(another checkout's ``clients/python/src``) instead of this tree's.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import importlib.util
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

import zmq

ROOT = Path(__file__).resolve().parents[3]


def client_source() -> Path:
    """The client measured: this tree's, or the one ``--client-src DIR``
    names (an older checkout's ``clients/python/src``, to compare)."""
    if "--client-src" in sys.argv:
        return Path(sys.argv[sys.argv.index("--client-src") + 1]).resolve()
    return ROOT / "clients" / "python" / "src"


sys.path.insert(0, str(client_source()))

from locker_client import Ask, AsyncClient, Client  # noqa: E402

#: Limits that never refuse, so every ask is a go: the default (for the
#: plain form's ``let me go``), a fixed window and a rolling window.
CONFIG = """
[[limits]]
name = "default"
max_requests = 1000000000
in_seconds = 1.0

[[limits]]
name = "big"
max_requests = 1000000000
in_seconds = 1.0

[[limits]]
name = "rolling"
algorithm = "rolling-window"
max_requests = 1000000000
in_seconds = 1.0
"""

#: The batch size of the ``ask_many`` row.
BATCH = 100

#: Asks in one slice: contenders take turns slice by slice within a round.
SLICE = 200

#: A slice: (seconds taken, every ask's latency in ns).
Round = Tuple[float, List[int]]


def users(count: int) -> List[str]:
    return [f"user-{i}" for i in range(count)]


# ---- the daemons ----------------------------------------------------------


class Locker:
    """``locker serve`` on a loopback port with :data:`CONFIG`."""

    def __init__(self, binary: str) -> None:
        self._config = tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False)
        self._config.write(CONFIG)
        self._config.close()
        self.proc = subprocess.Popen(
            [binary, "serve", "--bind", "tcp://127.0.0.1:*", "--config", self._config.name],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            env={**os.environ, "LOCKER_LOG": "warn"},
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().decode()
        if not line.startswith("listening on "):
            self.stop()
            raise SystemExit(f"the locker did not start: {line!r}")
        self.endpoint = line[len("listening on ") :].strip()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)
        os.unlink(self._config.name)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Redis:
    """``redis-server`` on a loopback port, without persistence."""

    def __init__(self, binary: str) -> None:
        self.port = free_port()
        self.proc = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise SystemExit("redis-server did not start")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)


def locker_binary() -> str:
    env = os.environ.get("LOCKER_BIN")
    binary = env or str(ROOT / "target" / "release" / "locker")
    if not Path(binary).exists():
        raise SystemExit(f"no locker at {binary}: run cargo build --release, or set LOCKER_BIN")
    return binary


def redis_libraries(install: bool) -> Optional[str]:
    """Why the Redis contenders cannot run, or None when they can; installs
    ``limits`` and ``redis`` into this Python when allowed."""
    missing = [m for m in ("limits", "redis") if importlib.util.find_spec(m) is None]
    if missing and install:
        print(f"installing {' '.join(missing)} for the Redis contenders", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", *missing], check=True)
        importlib.invalidate_caches()
        missing = [m for m in ("limits", "redis") if importlib.util.find_spec(m) is None]
    if missing:
        return f"{', '.join(missing)} not installed"
    if shutil.which("redis-server") is None:
        return "no redis-server on PATH (apt-get install redis-server)"
    return None


# ---- the contenders ---------------------------------------------------------


def timed(asks: int, one: Callable[[int], Any]) -> Round:
    """``asks`` calls of ``one(i)`` in lockstep, each timed."""
    clock = time.perf_counter_ns
    took = [0] * asks
    started = clock()
    for i in range(asks):
        t = clock()
        one(i)
        took[i] = clock() - t
    return (clock() - started) / 1e9, took


def bare_req(endpoint: str, asks: int, keys: List[str]) -> Round:
    send, recv = bare_socket(endpoint)
    return timed(asks, lambda i: (send(b"big"), recv()))


_bare: Dict[str, "zmq.Socket[bytes]"] = {}


def bare_socket(endpoint: str) -> Tuple[Callable[..., Any], Callable[..., Any]]:
    """One REQ socket for the whole run, as a client keeps one."""
    s = _bare.get(endpoint)
    if s is None:
        s = _bare[endpoint] = zmq.Context.instance().socket(zmq.REQ)
        s.setsockopt(zmq.LINGER, 0)
        s.connect(endpoint)
    return s.send, s.recv


def bare_structured(endpoint: str, asks: int, keys: List[str]) -> Round:
    import msgpack

    send, recv = bare_socket(endpoint)
    packb, unpackb, n = msgpack.packb, msgpack.unpackb, len(keys)
    return timed(asks, lambda i: (send(packb({"op": "go", "limit": "big", "key": keys[i % n], "cost": 1})), unpackb(recv())))


def bare_asyncio(endpoint: str, loop: asyncio.AbstractEventLoop) -> Callable[[int, List[str]], Round]:
    """The plain form awaited on the loop with nothing but a watch of the
    socket's descriptor and a future per ask (no deadline, no failover)."""
    s = zmq.Context.instance().socket(zmq.REQ)
    s.setsockopt(zmq.LINGER, 0)
    s.connect(endpoint)
    events, pollin, dontwait = int(zmq.EVENTS), int(zmq.POLLIN), int(zmq.DONTWAIT)
    waiting: List[Optional["asyncio.Future[None]"]] = [None]

    def wake() -> None:
        future = waiting[0]
        if s.getsockopt(events) & pollin and future is not None and not future.done():
            future.set_result(None)

    loop.add_reader(s.getsockopt(zmq.FD), wake)

    def run(asks: int, keys: List[str]) -> Round:
        clock = time.perf_counter_ns

        async def main() -> Round:
            took = [0] * asks
            started = clock()
            for i in range(asks):
                t = clock()
                s.send(b"big", dontwait)
                if not s.getsockopt(events) & pollin:
                    waiting[0] = loop.create_future()
                    await waiting[0]
                    waiting[0] = None
                s.recv(dontwait)
                took[i] = clock() - t
            return (clock() - started) / 1e9, took

        return loop.run_until_complete(main())

    return run


def client_row(client: Client, call: str) -> Callable[[int, List[str]], Round]:
    batches: List[List[Ask]] = []

    def run(asks: int, keys: List[str]) -> Round:
        n = len(keys)
        ask, go, permit = client.ask, client.go, client.permit
        if call == "ask":
            return timed(asks, lambda i: ask("big", key=keys[i % n]))
        if call == "rolling":
            return timed(asks, lambda i: ask("rolling", key=keys[i % n]))
        if call == "go":
            return timed(asks, lambda i: go())
        if call == "permit":

            def one(i: int) -> None:
                with permit("big", key=keys[i % n]):
                    pass

            return timed(asks, one)
        if call == "batch":
            if not batches:  # built once, outside the timing and the CPU count
                batches.extend([Ask("big", keys[(j + k) % n]) for k in range(BATCH)] for j in range(0, n, BATCH))
            seconds, took = timed(max(1, asks // BATCH), lambda i: client.ask_many(batches[i % len(batches)]))
            return seconds * asks / (max(1, asks // BATCH) * BATCH), [t // BATCH for t in took]
        raise ValueError(call)

    return run


def async_row(client: AsyncClient, loop: asyncio.AbstractEventLoop) -> Callable[[int, List[str]], Round]:
    def run(asks: int, keys: List[str]) -> Round:
        n = len(keys)
        clock = time.perf_counter_ns
        ask = client.ask

        async def main() -> Round:
            took = [0] * asks
            started = clock()
            for i in range(asks):
                t = clock()
                await ask("big", key=keys[i % n])
                took[i] = clock() - t
            return (clock() - started) / 1e9, took

        return loop.run_until_complete(main())

    return run


def limits_row(port: int, strategy: str) -> Callable[[int, List[str]], Round]:
    from limits import RateLimitItemPerSecond, storage, strategies

    store = storage.RedisStorage(f"redis://127.0.0.1:{port}")
    limiter = {"fixed": strategies.FixedWindowRateLimiter, "moving": strategies.MovingWindowRateLimiter}[strategy](store)
    item = RateLimitItemPerSecond(1_000_000_000)

    def run(asks: int, keys: List[str]) -> Round:
        n = len(keys)
        hit = limiter.hit
        # Each strategy keeps its own keys: they are of different types in Redis.
        return timed(asks, lambda i: hit(item, strategy, keys[i % n]))

    return run


def redis_ping(port: int) -> Callable[[int, List[str]], Round]:
    import redis

    r = redis.Redis(port=port)

    def run(asks: int, keys: List[str]) -> Round:
        return timed(asks, lambda i: r.ping())

    return run


# ---- rounds and figures -------------------------------------------------------


def pct(sorted_ns: List[int], q: float) -> float:
    """The ``q`` quantile of sorted latencies, in µs."""
    return sorted_ns[min(len(sorted_ns) - 1, int(q * len(sorted_ns)))] / 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--asks", type=int, default=3000, help="asks per contender per round")
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--quick", action="store_true", help="a smoke run: 1 round of 200 asks")
    parser.add_argument("--no-install", action="store_true", help="skip the Redis contenders when anything is missing")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--client-src", metavar="DIR", help="measure the client in DIR instead of this tree's")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.asks = 1, 200
    keys = users(args.keys)

    locker = Locker(locker_binary())
    redis_server: Optional[Redis] = None
    skipped = redis_libraries(install=not args.no_install)
    loop = asyncio.new_event_loop()
    client = Client(locker.endpoint, timeout=1.0)
    aclient = AsyncClient(locker.endpoint, timeout=1.0)
    try:
        rows: Dict[str, Callable[[int, List[str]], Round]] = {
            "zmq REQ, plain (b\"big\")": lambda asks, keys: bare_req(locker.endpoint, asks, keys),
            "zmq REQ, structured (msgpack)": lambda asks, keys: bare_structured(locker.endpoint, asks, keys),
            "Client.ask, fixed window": client_row(client, "ask"),
            "Client.ask, rolling window": client_row(client, "rolling"),
            "Client.go, plain": client_row(client, "go"),
            "Client.permit, fixed window": client_row(client, "permit"),
            "AsyncClient.ask, fixed window": async_row(aclient, loop),
            "zmq REQ, plain, on asyncio": bare_asyncio(locker.endpoint, loop),
            f"Client.ask_many, {BATCH} a batch (per decision)": client_row(client, "batch"),
        }
        if skipped is None:
            redis_server = Redis(shutil.which("redis-server") or "redis-server")
            rows["limits fixed window, Redis"] = limits_row(redis_server.port, "fixed")
            rows["limits moving window, Redis"] = limits_row(redis_server.port, "moving")
            rows["redis-py PING"] = redis_ping(redis_server.port)
        names = list(rows)
        for run in rows.values():  # warm up: connect, fill the key tables
            run(min(args.asks, 500), keys)
        load_before = os.getloadavg()
        results: Dict[str, List[Tuple[float, List[int]]]] = {name: [] for name in names}
        # This process's CPU time per contender: steadier than the rates on
        # a busy machine, since time spent waiting for the CPU is not in it.
        cpu_ns = {name: 0 for name in names}
        slices = max(1, args.asks // SLICE)
        for r in range(args.rounds):
            spent = {name: 0.0 for name in names}
            took: Dict[str, List[int]] = {name: [] for name in names}
            for k in range(slices):
                turn = (r * slices + k) % len(names)
                for name in names[turn:] + names[:turn]:
                    cpu = time.thread_time_ns()
                    seconds, ns = rows[name](args.asks // slices, keys)
                    cpu_ns[name] += time.thread_time_ns() - cpu
                    spent[name] += seconds
                    took[name] += ns
            for name in names:
                results[name].append((slices * (args.asks // slices) / spent[name], took[name]))
        load_after = os.getloadavg()
    finally:
        client.close()
        aclient.close()
        loop.close()
        locker.stop()
        if redis_server is not None:
            redis_server.stop()

    asked = args.rounds * slices * (args.asks // slices)
    report = figures(results, args, load_before, load_after, skipped)
    for name, row in report["rows"].items():
        row["cpu_us_per_ask"] = cpu_ns[name] / asked / 1000
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_report(report)


def figures(
    results: Dict[str, List[Tuple[float, List[int]]]], args: argparse.Namespace, before: Tuple[float, ...], after: Tuple[float, ...], skipped: Optional[str]
) -> Dict[str, Any]:
    rows = {}
    for name, rounds in results.items():
        took = sorted(t for _, ts in rounds for t in ts)
        rates = [rate for rate, _ in rounds]
        rows[name] = {
            "asks_per_s": statistics.median(rates),
            "asks_per_s_min": min(rates),
            "asks_per_s_max": max(rates),
            "p50_us": pct(took, 0.5),
            "p99_us": pct(took, 0.99),
        }

    def ratio(a: str, b: str) -> Optional[Dict[str, float]]:
        """a's asks/s over b's within each round (median, min, max), and
        b's median latency over a's: the same ratio, robust to the slow
        asks a busy machine strews over both."""
        if a not in results or b not in results:
            return None
        per_round = [ra / rb for (ra, _), (rb, _) in zip(results[a], results[b])]
        return {
            "median": statistics.median(per_round),
            "min": min(per_round),
            "max": max(per_round),
            "p50": rows[b]["p50_us"] / rows[a]["p50_us"],
        }

    bare, ask = "zmq REQ, plain (b\"big\")", "Client.ask, fixed window"
    ratios = {
        "Client.ask / zmq REQ (asks/s)": ratio(ask, bare),
        "Client.ask / zmq REQ structured (asks/s)": ratio(ask, "zmq REQ, structured (msgpack)"),
        "Client.ask / limits fixed (asks/s)": ratio(ask, "limits fixed window, Redis"),
        "Client.ask rolling / limits moving (asks/s)": ratio("Client.ask, rolling window", "limits moving window, Redis"),
        "AsyncClient.ask / Client.ask (time per ask)": ratio(ask, "AsyncClient.ask, fixed window"),
        "zmq REQ on asyncio / zmq REQ (time per ask)": ratio(bare, "zmq REQ, plain, on asyncio"),
        "Client.permit / Client.ask (asks/s)": ratio("Client.permit, fixed window", ask),
        "Client.go / zmq REQ (asks/s)": ratio("Client.go, plain", bare),
    }
    return {
        "rounds": args.rounds,
        "asks_per_round": args.asks,
        "keys": args.keys,
        "load_average_before": before[0],
        "load_average_after": after[0],
        "python": sys.version.split()[0],
        "client": str(client_source()),
        "pyzmq": zmq.__version__,
        "libzmq": zmq.zmq_version(),
        "skipped": skipped,
        "rows": rows,
        "ratios": {k: v for k, v in ratios.items() if v is not None},
    }


def print_report(report: Dict[str, Any]) -> None:
    print(
        f"{report['rounds']} rounds x {report['asks_per_round']} asks, keys over {report['keys']:,} users, "
        f"one process in lockstep; load average {report['load_average_before']:.2f} -> {report['load_average_after']:.2f}; "
        f"Python {report['python']}, pyzmq {report['pyzmq']}, libzmq {report['libzmq']}; the client in {report['client']}"
    )
    if report["skipped"]:
        print(f"Redis contenders skipped: {report['skipped']}")
    print()
    print("| contender | asks/s (median of rounds) | min - max | p50 µs | p99 µs | CPU µs/ask |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, row in report["rows"].items():
        print(
            f"| {name} | {row['asks_per_s']:,.0f} | {row['asks_per_s_min']:,.0f} - {row['asks_per_s_max']:,.0f} "
            f"| {row['p50_us']:.0f} | {row['p99_us']:.0f} | {row['cpu_us_per_ask']:.1f} |"
        )
    print()
    print("| ratio | median of rounds | min - max | from the p50s |")
    print("| --- | ---: | ---: | ---: |")
    for name, r in report["ratios"].items():
        print(f"| {name} | {r['median']:.2f} | {r['min']:.2f} - {r['max']:.2f} | {r['p50']:.2f} |")


if __name__ == "__main__":
    main()
