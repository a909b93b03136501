"""``PermitPool``: permits fetched in batches and handed out locally, so a
busy caller can go far beyond one round trip per permit.

The pool asks with ``up_to`` for up to ``batch`` permits and hands them out
one by one. It never hands out more than the locker granted, and a batch
lapses a millisecond before the slot it was granted in ends (as the reply's
``reset_after_ms`` tells, measured from before the ask was sent), so permits
of one slot are never used in the next: the limit stays exact. Use it with
fixed-window limits. The bookkeeping, :class:`Permits` and
:class:`PoolState`, takes ``now`` and does no I/O; :class:`PermitPool` adds
the client (``AsyncPermitPool`` the asyncio one). Same rules as the Rust
``locker::PermitPool``.
"""

from __future__ import annotations

import threading
import time
from typing import Optional

from .client import Client
from .wire import GoReply, check_count, check_name

#: How long before its slot's end a batch stops being handed out, in ns.
MARGIN_NS = 1_000_000
_MS = 1_000_000


class Permits:
    """Permits in hand and when they lapse; pure bookkeeping on monotonic
    nanoseconds (``time.monotonic_ns()``), integers so that no rounding can
    move a batch's end."""

    def __init__(self) -> None:
        self.left = 0
        self._lapses_at: Optional[int] = None
        self._slot_end: Optional[int] = None
        self._quiet_until: Optional[int] = None

    def take(self, now: int) -> bool:
        """Hands out one permit if one is in hand and its slot has not ended."""
        if self._lapses_at is not None and now >= self._lapses_at:
            self.left = 0
        if self.left == 0:
            return False
        self.left -= 1
        return True

    def may_ask(self, now: int) -> bool:
        """Whether asking the locker now could help: not before a sorry's
        retry hint, and not in the last millisecond of a batch's slot, where
        a new batch would lapse as soon as it came."""
        hushed = self._quiet_until is not None and now < self._quiet_until
        closing = (
            self._lapses_at is not None
            and now >= self._lapses_at
            and self._slot_end is not None
            and now < self._slot_end
        )
        return not hushed and not closing

    def refill(self, sent: int, reply: GoReply) -> None:
        """Takes in the answer to a batch ask sent at ``sent``."""
        if not reply.ok:
            self.left = 0
            self._quiet_until = sent + reply.retry_after_ms * _MS
            return
        slot_end = sent + reply.reset_after_ms * _MS
        self.left = reply.granted or 0
        self._lapses_at = slot_end - min(MARGIN_NS, slot_end - sent)
        self._slot_end = slot_end
        self._quiet_until = None


class PoolState:
    """A pool's limit, key and batch and the permits in hand: all of a
    pool but the ask, shared by :class:`PermitPool` and
    ``AsyncPermitPool``, which add the round trip."""

    def __init__(self, limit: Optional[str], key: Optional[str], batch: int) -> None:
        self._limit = check_name("limit", limit)
        self._key = check_name("key", key)
        self._batch = max(1, check_count("batch", batch))
        self._permits = Permits()
        self.round_trips = 0
        """Batch asks sent so far."""

    @property
    def left(self) -> int:
        """Permits in hand (some may have lapsed)."""
        return self._permits.left

    def _from_hand(self, now: int) -> Optional[bool]:
        """The answer when the permits in hand decide it (True: one was
        taken; False: asking now could not help); None when a batch must be
        asked for, counted in ``round_trips``."""
        if self._permits.take(now):
            return True
        if not self._permits.may_ask(now):
            return False
        self.round_trips += 1
        return None

    def _refilled(self, sent: int, reply: GoReply) -> bool:
        """Takes in the answer to the batch ask sent at ``sent`` and hands
        out a permit from it, if it brought one."""
        self._permits.refill(sent, reply)
        # The permit is used from now on, after the locker's decision.
        return self._permits.take(time.monotonic_ns())


class PermitPool(PoolState):
    """Permits of one (limit, key) fetched ``batch`` at a time.

    ``take()`` returns True to go, False for sorry; a round trip happens
    only when the batch in hand is spent or has lapsed, and not again
    before a sorry's retry hint. A batch larger than the limit's capacity
    asks for the capacity. Thread safety: a lock makes ``take`` safe to
    call from several threads; the client's own lock covers its socket.
    """

    def __init__(self, client: Client, limit: Optional[str] = None, key: Optional[str] = None, batch: int = 100):
        super().__init__(limit, key, batch)
        self._client = client
        self._lock = threading.Lock()

    def take(self) -> bool:
        """One permit: True to go, False for sorry."""
        with self._lock:
            now = time.monotonic_ns()
            decided = self._from_hand(now)
            if decided is not None:
                return decided
            return self._refilled(now, self._client.ask(self._limit, self._key, cost=self._batch, up_to=True))
