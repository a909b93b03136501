"""The permit pool against a real locker: batches handed out locally, never
more in a slot than the locker granted for it."""

from __future__ import annotations

import time
from collections import Counter

from conftest import Lockers
from locker_client import Client, GoReply, PermitPool

MAX = 300
SLOT_MS = 100


class Recording(Client):
    """A client that adds up the permits the locker granted."""

    granted = 0

    def ask(self, *args, **kwargs) -> GoReply:  # type: ignore[override]
        reply = super().ask(*args, **kwargs)
        self.granted += reply.granted or 0
        return reply


def test_a_pool_never_hands_out_more_than_a_slot_allows(lockers: Lockers) -> None:
    d = lockers.start("--max-requests", str(MAX), "--in-seconds", str(SLOT_MS / 1000), config=False)
    with Recording(d.endpoint, timeout=5.0) as c:
        pool = PermitPool(c, key="batch", batch=64)
        per_slot: Counter = Counter()
        go = sorry = 0
        end = time.monotonic() + 0.45
        while time.monotonic() < end:
            if pool.take():
                go += 1
                per_slot[time.time_ns() // 1_000_000 // SLOT_MS] += 1
            else:
                sorry += 1
    assert sorry > 0, f"the pool must have run dry: {per_slot}"
    assert all(n <= MAX for n in per_slot.values()), f"permits per slot {per_slot}"
    assert go <= c.granted, f"handed out {go}, granted {c.granted}"
    assert pool.round_trips < go, "permits came in batches, not one round trip each"
    # Every whole slot inside the run was filled from batches of up to 64.
    slots = sorted(per_slot)
    inner = [per_slot[s] for s in slots[1:-1]]
    assert all(n >= MAX - 64 for n in inner), f"slots not filled: {per_slot}"
