"""The asyncio flavour: :class:`AsyncClient`, :class:`AsyncLease` and
:class:`AsyncPermitPool`, on ``zmq.asyncio`` so an asyncio program never
blocks its loop.

The rules are the blocking client's: the same Lazy Pirate plan (``pirate``),
the same requests and replies (``wire``), the same lease polling and
heartbeats (``lease``), the same batch bookkeeping (``pool.Permits``). Only
the waiting differs: ``await`` on the socket, ``asyncio.sleep`` for
reservations and polls, and an asyncio task instead of a thread for
heartbeats.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Callable, Dict, Generator, List, Optional, Sequence, Union

import zmq
import zmq.asyncio

from . import pirate, wire
from .client import DEFAULT_TIMEOUT
from .errors import ClientError, LockerError, NoAnswer, NotAcquired
from .lease import FIRST_POLL, LeaseState, log, next_poll, poll_request
from .pool import Permits
from .wire import GoReply, LeaseReply


class AsyncClient:
    """A connection to one or more lockers for asyncio programs.

    Same arguments and failover as :class:`~locker_client.Client`. Tasks may
    share a client: an ``asyncio.Lock`` around each request keeps the REQ
    socket to one request at a time. A client belongs to the event loop it
    is first used on. A request cancelled mid-way closes its socket, so the
    next one starts clean.
    """

    def __init__(
        self,
        endpoints: Union[str, Sequence[str]],
        timeout: float = DEFAULT_TIMEOUT,
        *,
        context: Optional[zmq.asyncio.Context] = None,
    ) -> None:
        self._endpoints: List[str] = pirate.endpoints_list(endpoints)
        self._timeout = pirate.check_timeout(timeout)
        self._ctx = context if context is not None else zmq.asyncio.Context.instance()
        # Made on first use, inside the loop (Python 3.9 binds a Lock to the
        # loop current when it is created).
        self._lock: Optional[asyncio.Lock] = None
        self._preferred = 0
        self._socket: Optional[zmq.asyncio.Socket] = None
        self._index = 0
        self._closed = False

    @property
    def endpoints(self) -> List[str]:
        """The lockers this client talks to."""
        return list(self._endpoints)

    @property
    def current_endpoint(self) -> Optional[str]:
        """The endpoint that answered last, if its socket is still open."""
        return self._endpoints[self._index] if self._socket is not None else None

    async def ask(
        self,
        limit: Optional[str] = None,
        key: Optional[str] = None,
        *,
        cost: int = 1,
        up_to: bool = False,
        max_wait_ms: Optional[int] = None,
    ) -> GoReply:
        """Asks for permits; see :meth:`locker_client.Client.ask`."""
        body = wire.encode(wire.go_request(limit, key, cost, up_to, max_wait_ms))
        return wire.decode_go(await self.round_trip(body))

    async def acquire(
        self,
        limit: Optional[str] = None,
        key: Optional[str] = None,
        *,
        cost: int = 1,
        up_to: bool = False,
        max_wait_ms: Optional[int] = None,
    ) -> GoReply:
        """Asks and, on a reservation, ``asyncio.sleep``s ``wait_ms`` before
        returning; see :meth:`locker_client.Client.acquire`."""
        reply = await self.ask(limit, key, cost=cost, up_to=up_to, max_wait_ms=max_wait_ms)
        if reply.ok and reply.wait_ms:
            await asyncio.sleep(reply.wait_ms / 1000)
        return reply

    async def go(self, limit: Optional[str] = None) -> bool:
        """Asks in the seed's plain form; see :meth:`locker_client.Client.go`."""
        return wire.decode_plain(await self.round_trip(wire.plain_body(limit)))

    async def stats(self) -> Dict[str, Any]:
        """The locker's counters, as the map it sends."""
        return wire.decode_map(await self.round_trip(wire.encode(wire.STATS_REQUEST)))

    async def acquire_lease(
        self, limit: Optional[str], count: int = 1, *, ttl: Optional[float] = None, wait: Optional[float] = None
    ) -> LeaseReply:
        """One acquire, the reply as is; see :meth:`locker_client.Client.acquire_lease`."""
        request = wire.acquire_request(limit, count, wire.ttl_ms(ttl), wire.wait_ms(wait))
        return wire.decode_lease(await self.round_trip(wire.encode(request)))

    async def heartbeat(
        self, limit: Optional[str], lease: str, *, ttl: Optional[float] = None, count: Optional[int] = None
    ) -> LeaseReply:
        """Keeps (or with ``count`` restores) a lease."""
        request = wire.heartbeat_request(limit, lease, wire.ttl_ms(ttl), count)
        return wire.decode_lease(await self.round_trip(wire.encode(request)))

    async def release(self, limit: Optional[str], lease: str) -> LeaseReply:
        """Frees a lease; ``ok`` is False when the locker no longer held it."""
        return wire.decode_lease(await self.round_trip(wire.encode(wire.release_request(limit, lease))))

    def lease(
        self,
        limit: Optional[str],
        count: int = 1,
        *,
        ttl: Optional[float] = None,
        wait: Optional[float] = None,
        on_lost: Optional[Callable[["AsyncLease"], None]] = None,
    ) -> "LeaseRequest":
        """Takes a lease and keeps it with a heartbeat task; use as
        ``async with client.lease("db", ttl=10, wait=2) as lease:`` or
        ``lease = await client.lease(...)`` and later ``await
        lease.release()``. Raises :class:`~locker_client.NotAcquired` when
        the count is not had within ``wait`` seconds. Arguments are checked
        here, at once."""
        ttl_ms = wire.ttl_ms(ttl)
        acquire = wire.acquire_request(limit, count, ttl_ms, wire.wait_ms(wait))
        return LeaseRequest(self, acquire, on_lost)

    def sibling(self) -> "AsyncClient":
        """A new client for the same lockers, sharing the ZeroMQ context."""
        twin = AsyncClient(self._endpoints, self._timeout, context=self._ctx)
        twin._preferred = self._preferred
        return twin

    async def round_trip(self, body: bytes) -> bytes:
        """Sends ``body`` and returns the one reply, failing over between
        endpoints; raises :class:`~locker_client.NoAnswer` at the deadline."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._closed:
                raise ClientError("the client is closed")
            deadline = time.monotonic() + self._timeout
            n = len(self._endpoints)
            for index, budget in pirate.attempts(n, self._preferred, deadline, time.monotonic):
                reply = await self._attempt(index, body, budget)
                if reply is not None:
                    self._preferred = index
                    return reply
            raise NoAnswer(self._timeout, self._endpoints)

    async def _attempt(self, index: int, body: bytes, budget: float) -> Optional[bytes]:
        socket = self._open(index)
        try:
            await socket.send(body)
            # POLLIN is the default event of an asyncio socket's poll.
            if await socket.poll(pirate.poll_ms(budget)):
                return await socket.recv()
        except BaseException:
            # Cancelled or failed between send and receive: the REQ socket
            # cannot be reused.
            self._drop()
            raise
        self._drop()
        return None

    def _open(self, index: int) -> zmq.asyncio.Socket:
        if self._socket is not None and self._index != index:
            self._drop()
        if self._socket is None:
            socket = self._ctx.socket(zmq.REQ)
            socket.setsockopt(zmq.LINGER, 0)
            socket.connect(self._endpoints[index])
            self._socket, self._index = socket, index
        return self._socket

    def _drop(self) -> None:
        if self._socket is not None:
            self._socket.close(linger=0)
            self._socket = None

    def close(self) -> None:
        """Closes the socket; later requests raise ``ClientError``."""
        self._closed = True
        self._drop()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"AsyncClient({self._endpoints!r}, timeout={self._timeout!r})"


async def wait_for_lease(client: AsyncClient, acquire: wire.Request) -> LeaseReply:
    """The asyncio twin of :func:`locker_client.lease.wait_for_lease`."""
    reply = wire.decode_lease(await client.round_trip(wire.encode(acquire)))
    deadline = time.monotonic() + reply.expires_in_ms / 1000
    pause = FIRST_POLL
    try:
        while reply.pending:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            await asyncio.sleep(min(pause, left))
            pause = next_poll(pause)
            reply = wire.decode_lease(await client.round_trip(wire.encode(poll_request(acquire, reply))))
    except LockerError:
        pass
    if reply.ok and not reply.pending and reply.lease:
        return reply
    if reply.pending and reply.lease:
        try:
            await client.round_trip(wire.encode(wire.release_request(acquire.get("limit"), reply.lease)))
        except ClientError as e:
            log.debug("ignored: %s", e)
    raise NotAcquired(acquire.get("limit"), acquire["count"], reply.remaining)


class LeaseRequest:
    """What :meth:`AsyncClient.lease` returns: await it for an
    :class:`AsyncLease`, or use it with ``async with``, which releases the
    lease on exit."""

    def __init__(self, client: AsyncClient, acquire: wire.Request, on_lost: Optional[Callable[..., None]]) -> None:
        self._client = client
        self._acquire = acquire
        self._on_lost = on_lost
        self._lease: Optional[AsyncLease] = None

    async def _take(self) -> "AsyncLease":
        reply = await wait_for_lease(self._client, self._acquire)
        ttl_ms = self._acquire.get("ttl_ms") or reply.expires_in_ms
        limit, count = self._acquire.get("limit"), self._acquire["count"]
        return AsyncLease(self._client.sibling(), limit, reply.lease or "", count, ttl_ms, self._on_lost)

    def __await__(self) -> Generator[Any, None, "AsyncLease"]:
        return self._take().__await__()

    async def __aenter__(self) -> "AsyncLease":
        self._lease = await self._take()
        return self._lease

    async def __aexit__(self, *exc: object) -> None:
        if self._lease is not None:
            await self._lease.release()


class AsyncLease(LeaseState):
    """A held lease kept by an asyncio task that heartbeats every ttl/3
    with the count; ``held`` and ``on_lost`` as for
    :class:`~locker_client.Lease` (``on_lost`` is called from the task)."""

    def __init__(
        self,
        client: AsyncClient,
        limit: Optional[str],
        lease_id: str,
        count: int,
        ttl_ms: int,
        on_lost: Optional[Callable[["AsyncLease"], None]] = None,
    ) -> None:
        super().__init__(limit, lease_id, count, ttl_ms, on_lost)
        self._client = client
        self._task = asyncio.ensure_future(self._keep())

    async def _keep(self) -> None:
        while True:
            await asyncio.sleep(self._beat_interval())
            try:
                reply = wire.decode_lease(await self._client.round_trip(wire.encode(self._heartbeat())))
                alive = self._took(reply, None)
            except ClientError as e:
                alive = self._took(None, e)
            if not alive:
                return

    async def release(self) -> bool:
        """Stops the heartbeats and frees the lease; True when the locker
        freed it."""
        if self._released:
            return False
        self._released = True
        self._task.cancel()
        try:
            await self._task
        except asyncio.CancelledError:
            pass
        freed = False
        if self._held:
            try:
                freed = (await self._client.release(self._limit, self._id)).ok
            except ClientError as e:
                log.debug("release of lease %s failed; it will expire: %s", self._id, e)
        self._client.close()
        return freed

    async def __aenter__(self) -> "AsyncLease":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.release()


class AsyncPermitPool:
    """The asyncio twin of :class:`~locker_client.PermitPool`: the same
    batches and guarantees, ``await pool.take()``."""

    def __init__(
        self, client: AsyncClient, limit: Optional[str] = None, key: Optional[str] = None, batch: int = 100
    ) -> None:
        self._client = client
        self._limit = wire.check_name("limit", limit)
        self._key = wire.check_name("key", key)
        self._batch = max(1, wire.check_count("batch", batch))
        self._permits = Permits()
        self.round_trips = 0

    @property
    def left(self) -> int:
        """Permits in hand (some may have lapsed)."""
        return self._permits.left

    async def take(self) -> bool:
        """One permit: True to go, False for sorry."""
        now = time.monotonic_ns()
        if self._permits.take(now):
            return True
        if not self._permits.may_ask(now):
            return False
        self.round_trips += 1
        reply = await self._client.ask(self._limit, self._key, cost=self._batch, up_to=True)
        self._permits.refill(now, reply)
        return self._permits.take(time.monotonic_ns())


__all__ = ["AsyncClient", "AsyncLease", "AsyncPermitPool", "LeaseRequest"]
