#!/usr/bin/env python3
"""The seed's client loop, rewritten with locker_client.

Asks a locker every INTERVAL_S seconds and prints "<unix time> <reply>", as
the seed's client (clients/seed/seed_client.py) does, with what the
package adds: a deadline on every request instead of a hang, failover when
several endpoints are given (comma-separated), and the plain form's bytes
(BODY, default b"let me go") sent unchanged.

    locker serve --max-requests 5 --in-seconds 0.8 &
    python3 examples/seed_loop.py tcp://localhost:7777 20 0.1
"""

from __future__ import annotations

import sys
import time

from locker_client import Client, ClientError


def main() -> None:
    endpoints = (sys.argv[1] if len(sys.argv) > 1 else "tcp://localhost:7777").split(",")
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    interval = float(sys.argv[3]) if len(sys.argv) > 3 else 0.1
    # The seed's body asks the default limit; a limit's name asks that limit.
    limit = sys.argv[4] if len(sys.argv) > 4 else None
    with Client(endpoints, timeout=1.0) as client:
        for _ in range(count):
            try:
                answer = "go" if client.go(limit) else "sorry"
            except ClientError as e:
                answer = f"error: {e}"
            print(time.time(), answer, flush=True)
            time.sleep(interval)


if __name__ == "__main__":
    main()
