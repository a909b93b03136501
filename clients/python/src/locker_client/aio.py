"""The asyncio flavour: :class:`AsyncClient`, :class:`AsyncLease` and
:class:`AsyncPermitPool`, on ``zmq.asyncio`` so an asyncio program never
blocks its loop.

The rules are the blocking client's, and live once for both: the Lazy
Pirate plan (``pirate``) and the client state (``base``), the requests and
their replies (``calls``), the lease wait and heartbeats (``lease``), the
batch bookkeeping (``pool``). Only the waiting differs: ``await`` on the
socket, ``asyncio.sleep`` for reservations and polls, and an asyncio task
instead of a thread for heartbeats.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import time
from typing import (
    Any,
    AsyncIterator,
    Callable,
    Dict,
    Generator,
    Iterable,
    List,
    Optional,
    Sequence,
    TypeVar,
    Union,
    cast,
)

import zmq
import zmq.asyncio

from . import calls, curve, pirate, wire
from .base import DEFAULT_ENDPOINT, DEFAULT_TIMEOUT, ClientBase
from .errors import ClientError
from .lease import LeaseState, LeaseWait, Terms, log
from .pool import PoolState
from .wire import Ask, BatchReply, GoReply, LeaseReply

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


class AsyncClient(ClientBase[zmq.asyncio.Socket]):
    """A connection to one or more lockers for asyncio programs.

    Same arguments (CURVE keys included) and failover as
    :class:`~locker_client.Client`. Tasks may share a client: an
    ``asyncio.Lock`` around each request keeps the REQ socket to one
    request at a time. A client belongs to the event loop it
    is first used on. A request cancelled mid-way closes its socket, so the
    next one starts clean.
    """

    def __init__(
        self,
        endpoints: Union[str, Sequence[str]] = DEFAULT_ENDPOINT,
        timeout: float = DEFAULT_TIMEOUT,
        *,
        context: Optional[zmq.asyncio.Context] = None,
        server_key: Optional[curve.KeySource] = None,
        client_key: Optional[curve.KeySource] = None,
    ) -> None:
        ctx = context if context is not None else zmq.asyncio.Context.instance()
        keys = curve.load(server_key, client_key)
        super().__init__(pirate.endpoints_list(endpoints), pirate.check_timeout(timeout), ctx, keys)
        # Made on first use, inside the loop (Python 3.9 binds a Lock to the
        # loop current when it is created).
        self._lock: Optional[asyncio.Lock] = None

    async def ask(
        self,
        limit: Optional[str] = None,
        key: Optional[str] = None,
        *,
        cost: int = 1,
        up_to: bool = False,
        max_wait: Optional[float] = None,
        hold: Optional[float] = None,
        max_wait_ms: Optional[int] = None,
        hold_ms: Optional[int] = None,
    ) -> GoReply:
        """Asks for permits; see :meth:`locker_client.Client.ask`."""
        return await self._call(calls.ask(
                limit,
                key,
                cost,
                up_to,
                wire.seconds_or_ms("max_wait", max_wait, max_wait_ms),
                wire.seconds_or_ms("hold", hold, hold_ms),
            )
        )

    async def ask_many(self, asks: Iterable[Ask]) -> List[BatchReply]:
        """Many asks in one message, their replies in order; see
        :meth:`locker_client.Client.ask_many`."""
        return await self._call(calls.ask_many(asks))

    async def acquire(
        self,
        limit: Optional[str] = None,
        key: Optional[str] = None,
        *,
        cost: int = 1,
        up_to: bool = False,
        max_wait: Optional[float] = None,
        max_wait_ms: Optional[int] = None,
    ) -> GoReply:
        """Asks and, on a reservation, ``asyncio.sleep``s ``wait_ms`` before
        returning; see :meth:`locker_client.Client.acquire`."""
        reply = await self.ask(
            limit, key, cost=cost, up_to=up_to, max_wait_ms=wire.seconds_or_ms("max_wait", max_wait, max_wait_ms)
        )
        pause = calls.reservation(reply)
        if pause:
            await asyncio.sleep(pause)
        return reply

    async def go(self, limit: Optional[str] = None) -> bool:
        """Asks once: True for go; see :meth:`locker_client.Client.go`."""
        if limit is None:
            return await self._call(calls.go(None))
        return (await self.ask(limit)).ok

    @contextlib.asynccontextmanager
    async def permit(
        self, limit: Optional[str] = None, key: Optional[str] = None, *, cost: int = 1, wait: float = 0.0
    ) -> AsyncIterator[GoReply]:
        """A rate permit for the block it guards, waiting with
        ``asyncio.sleep``; see :meth:`locker_client.Client.permit`::

            async with client.permit("api", wait=2.0):
                await call_the_api()
        """
        yield await self._permit(limit, key, cost, wait)

    def limited(
        self, limit: Optional[str] = None, key: Optional[str] = None, *, cost: int = 1, wait: float = 0.0
    ) -> Callable[[F], F]:
        """A decorator for a coroutine function that takes a :meth:`permit`
        before each call; see :meth:`locker_client.Client.limited`."""

        def decorate(f: F) -> F:
            if not inspect.iscoroutinefunction(f):
                raise TypeError("AsyncClient.limited wraps coroutine functions; use Client.limited for others")

            @functools.wraps(f)
            async def run(*args: Any, **kwargs: Any) -> Any:
                await self._permit(limit, key, cost, wait)
                return await f(*args, **kwargs)

            return cast(F, run)

        return decorate

    async def _permit(self, limit: Optional[str], key: Optional[str], cost: int, wait: float) -> GoReply:
        deadline = time.monotonic() + pirate.check_wait(wait)
        while True:
            reply = await self.ask(limit, key, cost=cost)
            if reply.ok:
                return reply
            await asyncio.sleep(calls.permit_pause(reply, limit, key, deadline - time.monotonic()))

    async def stats(self) -> Dict[str, Any]:
        """The locker's counters, as the map it sends."""
        return await self._call(calls.stats())

    async def acquire_lease(
        self, limit: Optional[str], count: int = 1, *, ttl: Optional[float] = None, wait: Optional[float] = None
    ) -> LeaseReply:
        """One acquire, the reply as is; see :meth:`locker_client.Client.acquire_lease`."""
        return await self._call(calls.acquire_lease(limit, count, ttl, wait))

    async def heartbeat(
        self, limit: Optional[str], lease: str, *, ttl: Optional[float] = None, count: Optional[int] = None
    ) -> LeaseReply:
        """Keeps (or with ``count`` restores) a lease."""
        return await self._call(calls.heartbeat(limit, lease, ttl, count))

    async def release(self, limit: Optional[str], lease: str) -> LeaseReply:
        """Frees a lease; ``ok`` is False when the locker no longer held it."""
        return await self._call(calls.release(limit, lease))

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
        acquire = wire.acquire_request(limit, count, wire.ttl_ms(ttl), wire.wait_ms(wait))
        return LeaseRequest(self, acquire, on_lost)

    def sibling(self) -> "AsyncClient":
        """A new client for the same lockers, sharing the ZeroMQ context."""
        ctx = cast(zmq.asyncio.Context, self._ctx)
        return self._like_me(AsyncClient(self._endpoints, self._timeout, context=ctx))

    async def round_trip(self, body: bytes) -> bytes:
        """Sends ``body`` and returns the one reply, failing over between
        endpoints; raises :class:`~locker_client.NoAnswer` at the deadline."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            plan = self._plan()
            for tried in plan:
                got = await self._attempt(tried, body)
                if isinstance(got, bytes):
                    return self._answered(tried.index, got)
                plan.missed(tried, got)
            raise self._no_answer()

    async def _call(self, call: calls.Call[T]) -> T:
        return call.decode(await self.round_trip(call.body))

    async def _attempt(self, tried: pirate.Try, body: bytes) -> Union[bytes, pirate.Missed]:
        """One try, as :meth:`locker_client.Client._attempt` makes it."""
        started = time.monotonic()
        with self._socket_for(tried.index) as socket:
            # pyzmq's stub of the asyncio poll leaves out its flags argument.
            if not (await socket.poll(tried.connect_ms(), zmq.POLLOUT) and await _sent(socket, body)):  # type: ignore[call-arg]
                return self._missed(pirate.Missed.NOT_CONNECTED)
            if not await socket.poll(tried.answer_ms(time.monotonic() - started), zmq.POLLIN):  # type: ignore[call-arg]
                return self._missed(pirate.Missed.SILENT)
            return await socket.recv()

    def close(self) -> None:
        """Closes the socket; later requests raise ``ClientError``."""
        self._close()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()


async def _sent(socket: zmq.asyncio.Socket, body: bytes) -> bool:
    """Sends without waiting; False when the connection went in between."""
    try:
        await socket.send(body, zmq.DONTWAIT)
    except zmq.Again:
        return False
    return True


async def wait_for_lease(client: AsyncClient, acquire: wire.Request) -> Terms:
    """The asyncio twin of :func:`locker_client.lease.wait_for_lease`."""
    wait = LeaseWait(acquire)
    while (pause := wait.pause(time.monotonic())) is not None:
        await asyncio.sleep(pause)
        wait.took(await client.round_trip(wait.request()), time.monotonic())
    release = wait.give_back()
    if release is not None:
        try:
            await client.round_trip(release)
        except ClientError as e:
            log.debug("ignored: %s", e)
    return wait.held()


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
        terms = await wait_for_lease(self._client, self._acquire)
        return AsyncLease(self._client.sibling(), *terms, self._on_lost)

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
                alive = self._beat_answered(await self._client.round_trip(self._heartbeat()))
            except ClientError as e:
                alive = self._took(None, e)
            if not alive:
                return

    async def release(self) -> bool:
        """Stops the heartbeats and frees the lease; True when the locker
        freed it."""
        if not self._releasing():
            return False
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
                self._release_failed(e)
        self._client.close()
        return freed

    async def __aenter__(self) -> "AsyncLease":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.release()


class AsyncPermitPool(PoolState):
    """The asyncio twin of :class:`~locker_client.PermitPool`: the same
    batches and guarantees, ``await pool.take()``."""

    def __init__(
        self, client: AsyncClient, limit: Optional[str] = None, key: Optional[str] = None, batch: int = 100
    ) -> None:
        super().__init__(limit, key, batch)
        self._client = client

    async def take(self) -> bool:
        """One permit: True to go, False for sorry."""
        now = time.monotonic_ns()
        decided = self._from_hand(now)
        if decided is not None:
            return decided
        return self._refilled(now, await self._client.ask(self._limit, self._key, cost=self._batch, up_to=True))


__all__ = ["AsyncClient", "AsyncLease", "AsyncPermitPool", "LeaseRequest"]
