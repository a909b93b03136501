"""A free loopback port for the Python suites (tests/rls, deploy/kubernetes/tests)
that start lockers on ports they must know before the lockers bind them.

A port found by binding port 0 lies inside the kernel's ephemeral range,
where an outgoing connection (a member dialling a peer not started yet) may
take it before the locker meant to listen there binds it. These come from
below that range instead, as `free_port` in tests/it/support.rs does."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

_next = (os.getpid() * 7919 + time.time_ns()) % 100_000


def free_port() -> int:
    """A port of 127.0.0.1 nobody listens on, below the ephemeral range."""
    global _next
    ranges = Path("/proc/sys/net/ipv4/ip_local_port_range")
    first = int(ranges.read_text().split()[0]) if ranges.exists() else 32768
    low = max(10_000, first - 12_000)
    span = max(1, first - low)
    for _ in range(span):
        _next += 1
        port = low + _next % span
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {low}..{first}")
