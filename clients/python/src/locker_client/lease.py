"""Waiting for a semaphore lease, and :class:`Lease`, the guard that keeps one.

A queued acquire asks the locker to hold its reply (``hold_ms``) until the
count is granted or the wait ends, each request for at most half of its
share of the client's timeout; when a hold runs out first, a heartbeat with
``hold_ms`` waits on. A locker that answers "pending" at once (an older
one, one with no room to hold) is polled with heartbeats, 2 ms apart and
doubling up to 50 ms, until the lease is held or the wait ends, as the Rust
lease guard does. A held lease has its own client (ZeroMQ sockets are not
thread-safe), which one thread of the process uses to heartbeat it every
third of the ttl carrying the lease's count, so a locker that restarted
restores it, and the lease is released when the guard exits.

A lease is *lost* when a locker refuses its heartbeat: the lease expired and
its count could not be restored (someone else holds it now). Losing is
final: ``held`` becomes False, ``on_lost`` is called once, and heartbeats
stop. A heartbeat that gets no answer is not a loss: the lease lives until
its ttl on the locker, and the next heartbeat (failing over, with the count)
may still reach one.
"""

from __future__ import annotations

import heapq
import logging
import math
import os
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, List, Optional, Protocol, Tuple, runtime_checkable

from . import wire
from .errors import ClientError, LockerError, NoAnswer, NotAcquired
from .wire import LeaseReply

if TYPE_CHECKING:
    from .client import Client

log = logging.getLogger("locker_client")


@runtime_checkable
class LeaseChannel(Protocol):
    """What a :class:`Lease` needs of the client that carries it, and all
    it may use: a lease reaches its locker through these four and nothing
    private of the client's."""

    def connect_ahead(self) -> None:
        """Opens the connection now, so the lease's release need not wait
        for it."""

    def round_trip(self, body: bytes) -> bytes:
        """Sends one request and returns its reply's bytes."""

    def release(self, limit: Optional[str], lease: str) -> LeaseReply:
        """Frees the lease."""

    def close(self) -> None:
        """Closes the client's sockets."""

#: The first pause between polls of a pending lease, in seconds; it doubles.
FIRST_POLL = 0.002
#: The longest pause between polls of a pending lease.
MAX_POLL = 0.05


def next_poll(pause: float) -> float:
    """The pause after ``pause`` while a lease is pending."""
    return min(pause * 2, MAX_POLL)


#: What a held lease is: its limit, id, count and ttl in milliseconds.
Terms = Tuple[Optional[str], str, int, int]


class LeaseWait:
    """The wait for one acquire to be held, without I/O: what to send
    next, how long to pause before it, and the outcome. Both clients drive
    it, each with its own way of waiting."""

    def __init__(self, acquire: wire.Request, hold_ms: Optional[int] = None) -> None:
        self._acquire = acquire
        self._hold_ms = hold_ms
        self._reply: Optional[LeaseReply] = None
        self._deadline = 0.0
        self._now = 0.0
        self._pause = FIRST_POLL
        self._over = False

    def pause(self, now: float) -> Optional[float]:
        """Seconds to wait before sending :meth:`request`; None when the
        wait is over (held, refused, or out of time)."""
        self._now = now
        if self._reply is None:
            return 0.0
        left = self._deadline - now
        if self._over or not self._reply.pending or left <= 0:
            return None
        if self._reply.waited_ms is not None:
            return 0.0  # the locker held it until its hold ran out: ask again at once
        pause, self._pause = min(self._pause, left), next_poll(self._pause)
        return pause

    def request(self) -> bytes:
        """The acquire at first, then the polls that ask whether it is held."""
        if self._reply is None:
            return wire.encode(held_acquire(self._acquire, self._hold_ms))
        hold = None
        if self._hold_ms is not None:
            hold = max(1, min(self._hold_ms, math.ceil((self._deadline - self._now) * 1000)))
        return wire.encode(poll_request(self._acquire, self._reply, hold))

    def took(self, body: bytes, now: float) -> None:
        """Takes in the answer to :meth:`request`, received at ``now``. A
        refused acquire raises :class:`~locker_client.LockerError`."""
        try:
            reply = wire.decode_lease(body)
        except LockerError:
            if self._reply is None:
                raise
            # The waiter was dropped between two polls: the wait is over.
            self._over = True
            return
        if self._reply is None or (reply.pending and reply.waited_ms is not None):
            self._deadline = now + reply.expires_in_ms / 1000
        self._reply = reply

    def give_back(self) -> Optional[bytes]:
        """The release to send when the wait ended still pending: give the
        place back rather than leave the count to be granted to nobody in
        the instant before the locker drops the waiter."""
        reply = self._reply
        if reply is not None and reply.pending and reply.lease:
            return wire.encode(wire.release_request(self._acquire.get("limit"), reply.lease))
        return None

    def held(self) -> Terms:
        """The held lease's terms; raises NotAcquired when it is not held."""
        reply, acquire = self._reply, self._acquire
        if reply is not None and reply.ok and not reply.pending and reply.lease:
            return acquire.get("limit"), reply.lease, acquire["count"], acquire.get("ttl_ms") or reply.expires_in_ms
        raise NotAcquired(acquire.get("limit"), acquire["count"], reply.remaining if reply else 0)


def lease_hold_ms(timeout: float, endpoints: int) -> int:
    """The longest a locker may hold one lease request, in milliseconds:
    half of the first endpoint's share of the timeout, so that a held reply
    is never taken for a silent locker."""
    return max(1, int(timeout * 1000 / (2 * max(1, endpoints))))


def held_acquire(acquire: wire.Request, hold_ms: Optional[int]) -> wire.Request:
    """``acquire`` asking the locker to hold its reply while it queues."""
    wait = acquire.get("max_wait_ms")
    if hold_ms is None or not wait or "hold_ms" in acquire:
        return acquire
    return wire.acquire_request(
        acquire.get("limit"), acquire["count"], acquire.get("ttl_ms"), wait, min(wait, hold_ms)
    )


def wait_for_lease(client: "Client", acquire: wire.Request) -> Terms:
    """Sends ``acquire`` and waits until the lease is held, on the locker's
    held replies or polling; raises NotAcquired when it is not held by the
    end of the wait."""
    wait = LeaseWait(acquire, lease_hold_ms(client.timeout, len(client.endpoints)))
    while (pause := wait.pause(time.monotonic())) is not None:
        time.sleep(pause)
        wait.took(client.round_trip(wait.request()), time.monotonic())
    release = wait.give_back()
    if release is not None:
        try:
            client.round_trip(release)
        except ClientError as e:
            log.debug("ignored: %s", e)
    return wait.held()


def poll_request(acquire: wire.Request, pending: LeaseReply, hold_ms: Optional[int] = None) -> wire.Request:
    """The heartbeat that asks whether a pending lease is held (no count:
    a waiter the locker dropped must not be re-created); with ``hold_ms``,
    the locker holds the reply until it is."""
    return wire.heartbeat_request(acquire.get("limit"), pending.lease or "", acquire.get("ttl_ms"), None, hold_ms)


class LeaseState:
    """What a held lease is, and whether it is still held; shared by the
    thread-kept :class:`Lease` and the task-kept ``AsyncLease``."""

    def __init__(
        self, limit: Optional[str], lease_id: str, count: int, ttl_ms: int, on_lost: Optional[Callable[[Any], None]]
    ) -> None:
        self._limit = limit
        self._id = lease_id
        self._count = count
        self._ttl_ms = max(1, ttl_ms)
        self._on_lost = on_lost
        self._held = True
        self._released = False

    @property
    def id(self) -> str:
        """The lease's id, as the locker gave it."""
        return self._id

    @property
    def limit(self) -> Optional[str]:
        """The semaphore."""
        return self._limit

    @property
    def count(self) -> int:
        """How much of the semaphore this lease holds."""
        return self._count

    @property
    def ttl(self) -> float:
        """Seconds the lease lives without a heartbeat."""
        return self._ttl_ms / 1000

    @property
    def held(self) -> bool:
        """True until the lease is released or lost."""
        return self._held and not self._released

    def _beat_interval(self) -> float:
        return max(self._ttl_ms / 3, 1) / 1000

    def _heartbeat(self) -> bytes:
        return wire.encode(wire.heartbeat_request(self._limit, self._id, self._ttl_ms, self._count))

    def _beat_answered(self, body: bytes) -> bool:
        """Takes in a heartbeat's answer; False when the lease is lost. A
        refusal raises LockerError, for the caller to hand to :meth:`_took`."""
        return self._took(wire.decode_lease(body), None)

    def _releasing(self) -> bool:
        """Marks the lease released; False when it already was."""
        if self._released:
            return False
        self._released = True
        return True

    def _release_failed(self, error: ClientError) -> None:
        log.debug("release of lease %s failed; it will expire: %s", self._id, error)

    def _took(self, reply: Optional[LeaseReply], error: Optional[ClientError]) -> bool:
        """Takes in a heartbeat's outcome; False when the lease is lost."""
        if isinstance(error, NoAnswer) or (error is not None and not isinstance(error, LockerError)):
            log.debug("heartbeat for lease %s failed: %s", self._id, error)
            return True
        if reply is not None and reply.ok:
            return True
        log.warning("lease %s on %r was lost: %s", self._id, self._limit, error or "the locker no longer holds it")
        self._held = False
        if self._on_lost is not None:
            try:
                self._on_lost(self)
            except Exception:
                log.exception("on_lost callback for lease %s raised", self._id)
        return False

    def __repr__(self) -> str:
        return f"{type(self).__name__}(limit={self._limit!r}, id={self._id!r}, count={self._count}, held={self.held})"


class _Keeper:
    """The one thread of a process that heartbeats every thread-kept
    :class:`Lease` when its beat is due, so that taking a lease starts no
    thread and releasing one waits for none."""

    def __init__(self) -> None:
        self._due = threading.Condition()
        self._heap: List[Tuple[float, int, "Lease"]] = []
        self._seq = 0
        self._pid = 0

    def add(self, lease: "Lease", at: float) -> None:
        """Beats ``lease`` at ``at`` (monotonic), and every interval after."""
        with self._due:
            if self._pid != os.getpid():  # first use, or a forked child: no thread yet
                self._pid, self._heap = os.getpid(), []
                threading.Thread(target=self._run, name="locker-leases", daemon=True).start()
            self._seq += 1
            heapq.heappush(self._heap, (at, self._seq, lease))
            self._due.notify()

    def _run(self) -> None:
        while True:
            with self._due:
                while not self._heap or self._heap[0][0] > time.monotonic():
                    self._due.wait(self._heap[0][0] - time.monotonic() if self._heap else None)
                _, _, lease = heapq.heappop(self._heap)
            if lease._beat():
                self.add(lease, time.monotonic() + lease._beat_interval())


_KEEPER = _Keeper()


class Lease(LeaseState):
    """A held semaphore lease, heartbeated by a background thread (one for
    all the leases of the process) and released on exit from its ``with``
    block (or by :meth:`release`).

    ``held`` is False once the lease was released or lost; ``on_lost`` is
    then called once, from the heartbeat thread, with the lease.
    """

    def __init__(
        self,
        client: LeaseChannel,
        limit: Optional[str],
        lease_id: str,
        count: int,
        ttl_ms: int,
        on_lost: Optional[Callable[["Lease"], None]] = None,
    ) -> None:
        super().__init__(limit, lease_id, count, ttl_ms, on_lost)
        self._client = client
        # Connected while the lease is used: its release is not kept waiting
        # for a connection, and the count goes to the next waiter sooner.
        client.connect_ahead()
        # The client's socket is used by one thread at a time: the keeper's
        # heartbeat or the release.
        self._use = threading.Lock()
        _KEEPER.add(self, time.monotonic() + self._beat_interval())

    def _beat(self) -> bool:
        """One heartbeat, from the keeper's thread; False when the lease is
        released or lost (no more beats). ``on_lost`` is called without the
        socket held, so that it may release the lease."""
        with self._use:
            if self._released:
                return False
            try:
                body, error = self._client.round_trip(self._heartbeat()), None
            except ClientError as e:
                body, error = b"", e
        if error is None:
            try:
                return self._beat_answered(body)
            except ClientError as e:
                error = e
        return self._took(None, error)

    def release(self) -> bool:
        """Stops the heartbeats and frees the lease. Returns True when the
        locker freed it; False when it was already released or lost, or no
        locker answered (the lease then expires at its ttl)."""
        if not self._releasing():
            return False
        freed = False
        with self._use:
            if self._held:
                try:
                    freed = self._client.release(self._limit, self._id).ok
                except ClientError as e:
                    self._release_failed(e)
            self._client.close()
        return freed

    def __enter__(self) -> "Lease":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
