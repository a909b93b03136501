#!/usr/bin/env python3
"""The memory of held asks: starts `locker serve` with a 30 s slot of one
permit, sends 10,000 plain asks from one DEALER socket, and prints how much
the locker's anonymous memory grew while they wait, with a hold (every ask
parked) and without one (every ask answered sorry at once: the transport's
own share), in one run.

    cargo build --release && python3 benches/parked_memory.py

Needs pyzmq and msgpack (pip install pyzmq msgpack). Loopback only.
"""

import subprocess
import sys
import time
from pathlib import Path

import msgpack
import zmq

LOCKER = Path(__file__).resolve().parents[1] / "target" / "release" / "locker"
ASKS = 10_000


def grown_kib(hold_ms: str) -> tuple:
    proc = subprocess.Popen(
        [str(LOCKER), "serve", "--bind", "tcp://127.0.0.1:*", "--max-requests", "1", "--in-seconds", "30",
         "--hold-ms", hold_ms],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )
    try:
        endpoint = proc.stdout.readline().strip().removeprefix("listening on ")

        def rss_anon() -> int:
            with open(f"/proc/{proc.pid}/status") as status:
                return next(int(line.split()[1]) for line in status if line.startswith("RssAnon"))

        ctx = zmq.Context()
        dealer = ctx.socket(zmq.DEALER)
        dealer.connect(endpoint)
        dealer.send_multipart([b"", b"let me go"])
        dealer.recv_multipart()
        time.sleep(0.3)
        before = rss_anon()
        for _ in range(ASKS):
            dealer.send_multipart([b"", b"let me go"])
        time.sleep(1.5)
        stats = ctx.socket(zmq.REQ)
        stats.connect(endpoint)
        stats.send(msgpack.packb({"op": "stats"}))
        parked = msgpack.unpackb(stats.recv()).get("parked", 0)
        return parked, rss_anon() - before
    finally:
        proc.kill()


def main() -> None:
    if not LOCKER.exists():
        sys.exit(f"build it first: cargo build --release ({LOCKER} is missing)")
    for hold in ("40000", "0"):
        parked, kib = grown_kib(hold)
        print(f"--hold-ms {hold:>5}: {parked:>5} of {ASKS} asks held, memory +{kib} KiB ({kib * 1024 / ASKS:.0f} bytes an ask)")


if __name__ == "__main__":
    main()
