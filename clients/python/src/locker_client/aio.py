"""The asyncio flavour: :class:`AsyncClient`, :class:`AsyncLease` and
:class:`AsyncPermitPool`, which never block the event loop.

The rules are the blocking client's, and live once for both: the Lazy
Pirate plan (``pirate``) and the client state (``base``), the requests and
their bytes (``wire``, ``calls``), the lease wait and heartbeats
(``lease``), the batch bookkeeping (``pool``). Only the waiting differs:
the socket is never read until the loop says it is ready (the loop
watches the socket's descriptor itself, :class:`_Waits`, rather than
through ``zmq.asyncio``, whose machinery costs more per request than the
locker takes to answer), ``asyncio.sleep`` for reservations and polls,
and an asyncio task instead of a thread for heartbeats.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import inspect
import time
from typing import (
    Any,
    AsyncContextManager,
    Callable,
    Deque,
    Dict,
    Generator,
    Iterable,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    TypeVar,
    Union,
    cast,
    overload,
)

import zmq
import zmq.asyncio

from . import calls, curve, pirate, wire
from .base import DEFAULT_ENDPOINT, DEFAULT_TIMEOUT, ClientBase, sent as _sent
from .errors import ClientError
from .lease import LeaseState, LeaseWait, Terms, lease_hold_ms, log
from .pool import PoolState
from .wire import AllAsks, AllReply, Ask, BatchReply, ChargeReply, GoReply, LeaseReply

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


class AsyncClient(ClientBase["zmq.Socket[bytes]"]):
    """A connection to one or more lockers for asyncio programs.

    Same arguments (CURVE keys included) and failover as
    :class:`~locker_client.Client`. Tasks may share a client: its
    requests take turns on the REQ socket, first come, first served, as
    under an ``asyncio.Lock``. A client belongs to the event loop it is
    first used on. A request cancelled mid-way closes its socket, so the
    next one starts clean; closing the client ends a request still waiting
    with :class:`~locker_client.ClientError`.
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
        self._turns = _Turns()
        # The first try's share of the deadline, as the plan gives it.
        self._share = self._timeout / len(self._endpoints)
        # The open socket's waits on the loop, made on its first request.
        self._waits: Optional[_Waits] = None

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
        terms: Optional[wire.Terms] = None,
        parents: Optional[Mapping[str, str]] = None,
        shadow: bool = False,
    ) -> GoReply:
        """Asks for permits; see :meth:`locker_client.Client.ask`."""
        if max_wait is not None:
            max_wait_ms = wire.seconds_or_ms("max_wait", max_wait, max_wait_ms)
        if hold is not None:
            hold_ms = wire.seconds_or_ms("hold", hold, hold_ms)
        body = wire.ask_body(limit, key, cost, up_to, max_wait_ms, hold_ms, terms, parents, shadow)
        return _decode_go(await self.round_trip(body))

    async def all(
        self,
        asks: Iterable[Ask],
        *,
        max_wait: Optional[float] = None,
        hold: Optional[float] = None,
        max_wait_ms: Optional[int] = None,
        hold_ms: Optional[int] = None,
    ) -> AllReply:
        """Several limits asked together: all go or none is charged; see
        :meth:`locker_client.Client.all`."""
        return await self._call(calls.all_of(asks, *calls.whole_waits(max_wait, hold, max_wait_ms, hold_ms)))

    async def refund(
        self,
        limit: Optional[str],
        key: Optional[str] = None,
        cost: int = 1,
        *,
        parents: Optional[Mapping[str, str]] = None,
    ) -> GoReply:
        """Gives back permits a key took; see :meth:`locker_client.Client.refund`."""
        return await self._call(calls.refund(limit, key, cost, parents))

    async def charge(
        self,
        limit: Optional[str],
        key: Optional[str] = None,
        cost: int = 1,
        *,
        parents: Optional[Mapping[str, str]] = None,
    ) -> ChargeReply:
        """Charges permits a key used, past the limit if need be; see
        :meth:`locker_client.Client.charge`."""
        return await self._call(calls.charge(limit, key, cost, parents))

    async def reset(self, limit: Optional[str], key: Optional[str] = None) -> GoReply:
        """Clears one key's count; see :meth:`locker_client.Client.reset`."""
        return await self._call(calls.reset(limit, key))

    async def ask_many(self, asks: Iterable[Union[Ask, AllAsks]]) -> List[BatchReply]:
        """Many asks in one message, their replies in order; see
        :meth:`locker_client.Client.ask_many`."""
        body, count = wire.batch_body(asks)
        return wire.decode_batch(await self.round_trip(body), count)

    async def acquire(
        self,
        limit: Optional[str] = None,
        key: Optional[str] = None,
        *,
        cost: int = 1,
        up_to: bool = False,
        max_wait: Optional[float] = None,
        max_wait_ms: Optional[int] = None,
        parents: Optional[Mapping[str, str]] = None,
        shadow: bool = False,
    ) -> GoReply:
        """Asks and, on a reservation, ``asyncio.sleep``s ``wait_ms`` before
        returning; see :meth:`locker_client.Client.acquire`."""
        max_wait_ms = wire.seconds_or_ms("max_wait", max_wait, max_wait_ms)
        reply = await self.ask(limit, key, cost=cost, up_to=up_to, max_wait_ms=max_wait_ms, parents=parents, shadow=shadow)
        pause = calls.reservation(reply)
        if pause:
            await asyncio.sleep(pause)
        return reply

    async def go(self, limit: Optional[str] = None) -> bool:
        """Asks once: True for go; see :meth:`locker_client.Client.go`."""
        if limit is None:
            return wire.decode_plain(await self.round_trip(wire.PLAIN_BODY))
        return (await self.ask(limit)).ok

    @overload
    def permit(
        self, limit: Optional[str] = None, key: Optional[str] = None, *, cost: int = 1, wait: float = 0.0
    ) -> AsyncContextManager[GoReply]: ...

    @overload
    def permit(
        self, limit: calls.Limits, key: Optional[str] = None, *, cost: int = 1, wait: float = 0.0
    ) -> AsyncContextManager[AllReply]: ...

    def permit(
        self,
        limit: Union[None, str, calls.Limits] = None,
        key: Optional[str] = None,
        *,
        cost: int = 1,
        wait: float = 0.0,
    ) -> AsyncContextManager[Any]:
        """A rate permit for the block it guards, waiting with
        ``asyncio.sleep``, over one limit or several at once; see
        :meth:`locker_client.Client.permit`::

            async with client.permit("api", wait=2.0):
                await call_the_api()

        Settled with the cost known afterwards (``await permit.settle(used)``)
        as the blocking permit is.
        """
        if calls.several(limit):
            return _PermitAll(self, calls.permit_all(cast(calls.Limits, limit), key, cost), wait)
        return _Permit(self, cast(Optional[str], limit), key, cost, wait)

    def limited(
        self,
        limit: Union[None, str, calls.Limits] = None,
        key: Optional[str] = None,
        *,
        cost: int = 1,
        wait: float = 0.0,
    ) -> Callable[[F], F]:
        """A decorator for a coroutine function that takes a :meth:`permit`
        before each call; see :meth:`locker_client.Client.limited`."""

        def decorate(f: F) -> F:
            if not inspect.iscoroutinefunction(f):
                raise TypeError("AsyncClient.limited wraps coroutine functions; use Client.limited for others")
            whole = calls.permit_all(cast(calls.Limits, limit), key, cost) if calls.several(limit) else None

            @functools.wraps(f)
            async def run(*args: Any, **kwargs: Any) -> Any:
                if whole is None:
                    await self._permit(cast(Optional[str], limit), key, cost, wait)
                else:
                    await self._permit_all(whole, wait)
                return await f(*args, **kwargs)

            return cast(F, run)

        return decorate

    async def _permit(self, limit: Optional[str], key: Optional[str], cost: int, wait: float) -> GoReply:
        deadline = _monotonic() + pirate.check_wait(wait)
        # Built and checked once, however many times it is asked.
        body = wire.ask_body(limit, key, cost)
        while True:
            reply = _decode_go(await self.round_trip(body))
            if reply.ok:
                return reply
            await asyncio.sleep(calls.permit_pause(reply, limit, key, deadline - _monotonic()))

    async def _permit_all(self, whole: calls.PermitAll, wait: float) -> AllReply:
        deadline = _monotonic() + pirate.check_wait(wait)
        while True:
            reply = await self._call(whole.call)
            if reply.ok:
                return reply
            await asyncio.sleep(whole.pause(reply, deadline - _monotonic()))

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
        turns = self._turns
        if not turns.take_now():
            await turns.take()
        try:
            if self._closed:
                raise ClientError("the client is closed")
            started = _monotonic()
            socket, waits = self._socket, self._waits
            if socket is not None and self._index == self._preferred and waits is not None and waits.loop is _running_loop():
                # The common case, as the blocking client takes it: send at
                # once on the socket to the locker that answered last and
                # wait for the answer for this first try's share.
                try:
                    sent = _sent(socket, body)
                    reply: Optional[bytes] = await waits.expect(_POLLIN, started + self._share) if sent else None
                except BaseException:
                    # Cancelled or interrupted between send and receive:
                    # the REQ socket cannot be used again.
                    self._drop()
                    raise
                if reply is not None:
                    return reply
                if sent:
                    self._missed(pirate.Missed.SILENT)
                    return await self._failover(body, started, sent_first=True)
            return await self._failover(body, started, sent_first=False)
        finally:
            turns.give()

    async def _failover(self, body: bytes, started: float, sent_first: bool) -> bytes:
        """The Lazy Pirate plan, as :meth:`locker_client.Client._failover`
        follows it."""
        plan = self._plan(started)
        tries = iter(plan)
        if sent_first:
            first = next(tries, None)
            if first is None:
                raise self._no_answer()
            plan.missed(first, pirate.Missed.SILENT)
        for tried in tries:
            got = await self._attempt(tried, body)
            if isinstance(got, bytes):
                return self._answered(tried.index, got)
            plan.missed(tried, got)
        raise self._no_answer()

    async def _call(self, call: calls.Call[T]) -> T:
        return call.decode(await self.round_trip(call.body))

    async def _attempt(self, tried: pirate.Try, body: bytes) -> Union[bytes, pirate.Missed]:
        """One try, as :meth:`locker_client.Client._attempt` makes it."""
        started = _monotonic()
        with self._socket_for(tried.index) as socket:
            waits = self._waits_for(socket)
            if not (
                _sent(socket, body)
                or (await waits.expect(_POLLOUT, started + tried.connect) and _sent(socket, body))
            ):
                return self._missed(pirate.Missed.NOT_CONNECTED)
            reply: Optional[bytes] = await waits.expect(_POLLIN, started + tried.budget)
            return self._missed(pirate.Missed.SILENT) if reply is None else reply

    # ---- waiting on the event loop ---------------------------------------

    def _new_socket(self) -> "zmq.Socket[bytes]":
        """A plain (blocking-flavoured) REQ socket on this client's context,
        used only without blocking: the client waits for it on the event
        loop itself (:class:`_Waits`) instead of through ``zmq.asyncio``,
        whose futures, callbacks and poller cost more per request than the
        locker takes to answer."""
        return zmq.Socket(self._ctx, zmq.REQ)

    def _waits_for(self, socket: "zmq.Socket[bytes]") -> "_Waits":
        """The waits of the open ``socket`` on the running loop, set up on
        its first request."""
        waits = self._waits
        if waits is None or waits.loop is not asyncio.get_running_loop():
            if waits is not None:
                waits.stop()
            waits = self._waits = _Waits(socket)
        return waits

    def _drop(self) -> None:
        # The loop stops watching the socket before it is closed: a closed
        # descriptor left registered would confuse the loop's selector.
        if self._waits is not None:
            self._waits.stop()
            self._waits = None
        super()._drop()

    def close(self) -> None:
        """Closes the socket; later requests raise ``ClientError``."""
        self._close()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()


class _Waits:
    """How an :class:`AsyncClient` waits for its socket on the event loop.

    A ZeroMQ socket's ``ZMQ_FD`` becomes readable when something may have
    changed, and ``ZMQ_EVENTS`` says what. The loop watches that
    descriptor for as long as the socket is open (not once per request:
    registering costs two system calls), and a request's wait is one
    :class:`_Ready`, resolved by the watch when the event it waits for is
    there or by one timer at its deadline. Reading ``ZMQ_EVENTS`` after
    the wait is set up catches what came before (ZeroMQ signals the
    descriptor only for what comes after a look); every wake-up reads it
    again, which also re-arms the descriptor.

    A loop without ``add_reader`` (Windows' proactor loop) is waited on
    through a ``zmq.asyncio.Poller`` instead, which works there.
    """

    __slots__ = ("loop", "_socket", "_fd", "_watched", "_future", "_event", "_until", "_alarm", "_alarm_at")

    def __init__(self, socket: "zmq.Socket[bytes]") -> None:
        self.loop = asyncio.get_running_loop()
        self._socket = socket
        self._fd = cast(int, socket.getsockopt(zmq.FD))
        self._future: Optional[_Ready] = None
        self._event = 0
        self._until = 0.0
        # One timer for the deadlines of every wait, not one per wait: each
        # request's deadline is later than the one before, so a timer set for
        # an earlier deadline only moves on to the current one when it rings.
        self._alarm: Optional[asyncio.TimerHandle] = None
        self._alarm_at = 0.0
        try:
            self.loop.add_reader(self._fd, self._wake)
            self._watched = True
        except NotImplementedError:
            self._watched = False

    def expect(self, event: int, until: float) -> "_Ready":
        """The wait for ``event`` on the socket, to await: the answer itself
        for ``POLLIN`` (read by the callback that saw it come), True for
        ``POLLOUT``; None when it has not come by ``until`` (monotonic
        seconds). A method that returns an awaitable rather than a
        coroutine: one frame fewer on every request."""
        future = _Ready(self.loop)
        self._until = until
        if not self._watched:
            self.loop.create_task(self._polled(future, event, until))
        elif self._socket.getsockopt(_EVENTS) & event:  # type: ignore[operator]
            # Already there, but the request still gives the loop one turn
            # (other tasks run, and a cancel lands, as on any await) and
            # takes it then.
            self._future, self._event = future, event
            self.loop.call_soon(self._settle)
        else:
            self._future, self._event = future, event
            if self._alarm is None or self._alarm_at > until:
                self._set_alarm(until)
        return future

    def _settle(self) -> None:
        """Hands over what was already there when the wait began."""
        future = self._future
        if future is None or future.done():
            return
        got = self._look()
        if got is not None:
            self._future = None
            future.resolve(got)
        elif self._alarm is None or self._alarm_at > self._until:
            self._set_alarm(self._until)

    def _set_alarm(self, at: float) -> None:
        if self._alarm is not None:
            self._alarm.cancel()
        self._alarm = self.loop.call_later(at - _monotonic(), self._ring)
        self._alarm_at = at

    def _ring(self) -> None:
        """The timer rang: the wait in progress, if any, ends when its
        deadline has come (with a last look at the socket), else the timer
        moves on to that deadline."""
        self._alarm = None
        future = self._future
        if future is None or future.done():
            return
        if _monotonic() < self._until:
            self._set_alarm(self._until)
        else:
            self._future = None
            future.resolve(self._look())

    def _look(self) -> Any:
        """What the wait in progress waits for, if it is there: the answer,
        or True when the socket is writable; None if not."""
        if self._event == _POLLIN:
            try:
                return self._socket.recv(_DONTWAIT)
            except zmq.Again:
                return None
        return True if self._socket.getsockopt(_EVENTS) & self._event else None  # type: ignore[operator]

    def _wake(self) -> None:
        """The loop's callback when the socket's descriptor is readable: the
        answer is read here, for the task waiting for it (a receive that
        finds nothing re-arms the descriptor as ``ZMQ_EVENTS`` would)."""
        future = self._future
        if future is None or future.done():
            self._socket.getsockopt(_EVENTS)  # nobody waits: only re-arm
            return
        got = self._look()
        if got is not None:
            # Cleared first: the waiting task runs inside resolve() and may
            # start its next wait before it returns.
            self._future = None
            future.resolve(got)

    async def _polled(self, future: "_Ready", event: int, until: float) -> None:
        """The wait on a loop without ``add_reader``, in a task of its own
        that hands the outcome over from a loop callback."""
        poller = zmq.asyncio.Poller()
        poller.register(self._socket, event)
        try:
            came = await poller.poll(pirate.poll_ms(until - _monotonic()))
            got = (self._socket.recv(_DONTWAIT) if event == _POLLIN else True) if came else None
        except Exception as e:  # the socket closed under it, say
            future.fail(e)
            return
        self.loop.call_soon(future.resolve, got)

    def stop(self) -> None:
        """The loop stops watching the socket (before it is closed). A wait
        still in progress (the client closed by another task) ends with
        ClientError rather than never."""
        future = self._future
        if future is not None and not future.done():
            future.fail(ClientError("the client is closed"))
        if self._alarm is not None:
            self._alarm.cancel()
            self._alarm = None
        if self._watched:
            self._watched = False
            try:
                self.loop.remove_reader(self._fd)
            except RuntimeError:  # the loop's thread is gone or it is closed
                pass


class _Ready:
    """The one wait of a request on its socket: an awaitable that asyncio's
    tasks take for a future (``_asyncio_future_blocking``, done callbacks,
    ``result``, ``cancel``), as their duck typing allows.

    The difference from an ``asyncio.Future``: resolved by the loop's own
    callback that saw the answer come (:meth:`resolve`), it wakes the
    waiting task there and then, where a Future would schedule the wake-up
    for the loop's next turn, another pass through the selector, a few
    microseconds per request. Anything that may run inside a task (a
    cancel, :meth:`fail` when the client is closed) schedules the wake-up
    as a Future does.
    """

    __slots__ = ("_loop", "_state", "_result", "_error", "_callbacks", "_asyncio_future_blocking")

    _PENDING, _DONE, _CANCELLED = 0, 1, 2

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._state = _Ready._PENDING
        self._result: Any = None
        self._error: Optional[BaseException] = None
        self._callbacks: List[Tuple[Callable[["_Ready"], object], Any]] = []
        self._asyncio_future_blocking = False

    def get_loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    def done(self) -> bool:
        return self._state != _Ready._PENDING

    def cancelled(self) -> bool:
        return self._state == _Ready._CANCELLED

    def result(self) -> Any:
        if self._state == _Ready._CANCELLED:
            raise asyncio.CancelledError()
        if self._state == _Ready._PENDING:
            raise asyncio.InvalidStateError("the wait is not over")
        if self._error is not None:
            raise self._error
        return self._result

    def exception(self) -> Optional[BaseException]:
        if self._state != _Ready._DONE:
            self.result()  # raises CancelledError or InvalidStateError
        return self._error

    def add_done_callback(self, fn: Callable[["_Ready"], object], *, context: Any = None) -> None:
        if self._state == _Ready._PENDING:
            self._callbacks.append((fn, context))
        else:
            self._loop.call_soon(fn, self, context=context)

    def remove_done_callback(self, fn: Callable[["_Ready"], object]) -> int:
        kept = [(f, c) for f, c in self._callbacks if f != fn]
        removed = len(self._callbacks) - len(kept)
        self._callbacks = kept
        return removed

    def cancel(self, msg: Any = None) -> bool:
        if self._state != _Ready._PENDING:
            return False
        self._state = _Ready._CANCELLED
        self._schedule()
        return True

    def resolve(self, result: Any) -> None:
        """Ends the wait with ``result`` and wakes the waiting task at once:
        only from a callback of the loop, never inside a task."""
        if self._state != _Ready._PENDING:
            return
        self._state, self._result = _Ready._DONE, result
        callbacks, self._callbacks = self._callbacks, []
        for fn, context in callbacks:
            if context is None:
                fn(self)
            else:
                context.run(fn, self)

    def fail(self, error: BaseException) -> None:
        """Ends the wait with ``error``, waking the task on the next turn."""
        if self._state != _Ready._PENDING:
            return
        self._state, self._error = _Ready._DONE, error
        self._schedule()

    def _schedule(self) -> None:
        callbacks, self._callbacks = self._callbacks, []
        for fn, context in callbacks:
            self._loop.call_soon(fn, self, context=context)

    def __await__(self) -> Generator[Any, None, Any]:
        if self._state == _Ready._PENDING:
            self._asyncio_future_blocking = True
            yield self
        return self.result()

    __iter__ = __await__


class _Turns:
    """The requests of one :class:`AsyncClient` take turns on its socket,
    first come, first served, as with an ``asyncio.Lock``, but without its
    two coroutine calls when nobody is waiting, which is nearly always: the
    turn is then a flag."""

    __slots__ = ("_busy", "_waiting")

    def __init__(self) -> None:
        self._busy = False
        self._waiting: "Deque[asyncio.Future[None]]" = collections.deque()

    def take_now(self) -> bool:
        """Takes the turn if it is free and nobody waits for it."""
        if self._busy or self._waiting:
            return False
        self._busy = True
        return True

    async def take(self) -> None:
        """Waits for the turn, behind those already waiting."""
        if self.take_now():
            return
        future: "asyncio.Future[None]" = asyncio.get_running_loop().create_future()
        self._waiting.append(future)
        try:
            await future
        except BaseException:
            if future.done() and not future.cancelled():
                self.give()  # handed the turn as it was cancelled: pass it on
            else:
                self._waiting.remove(future)
            raise

    def give(self) -> None:
        """Ends a turn: the next waiter has it, or it is free."""
        while self._waiting:
            future = self._waiting.popleft()
            if not future.done():
                future.set_result(None)
                return
        self._busy = False


class _Permit:
    """What :meth:`AsyncClient.permit` returns: takes the permit on
    entering (``async with``) and spends it on exit; a class rather than an
    async generator, which costs more to enter and leave."""

    __slots__ = ("_client", "_limit", "_key", "_cost", "_wait", "_taken")

    def __init__(self, client: AsyncClient, limit: Optional[str], key: Optional[str], cost: int, wait: float) -> None:
        self._client = client
        self._limit = limit
        self._key = key
        self._cost = cost
        self._wait = wait
        self._taken = False

    async def __aenter__(self) -> GoReply:
        reply = await self._client._permit(self._limit, self._key, self._cost, self._wait)
        self._taken = True
        return reply

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def settle(self, actual: int) -> Optional[GoReply]:
        """Settles the permit with the ``actual`` permits used: charges or
        refunds the difference; see ``locker_client.client._Permit.settle``."""
        if not self._taken:
            raise RuntimeError("settle a permit once, after it was taken")
        op, n = calls.settlement(self._cost, actual)
        self._taken = False
        if op == "charge":
            return await self._client.charge(self._limit, self._key, n)
        if op == "refund":
            return await self._client.refund(self._limit, self._key, n)
        return None


class _PermitAll:
    """What :meth:`AsyncClient.permit` returns over several limits: the
    permit of them all, taken on entering, spent on exit."""

    __slots__ = ("_client", "_whole", "_wait")

    def __init__(self, client: AsyncClient, whole: calls.PermitAll, wait: float) -> None:
        self._client = client
        self._whole = whole
        self._wait = wait

    async def __aenter__(self) -> AllReply:
        return await self._client._permit_all(self._whole, self._wait)

    async def __aexit__(self, *exc: object) -> None:
        return None


# Looked up once, as in the blocking client: the common path is short.
_monotonic = time.monotonic
_running_loop = asyncio.get_running_loop
_decode_go = wire.decode_go
_EVENTS = int(zmq.EVENTS)
_POLLIN = int(zmq.POLLIN)
_POLLOUT = int(zmq.POLLOUT)
_DONTWAIT = int(zmq.DONTWAIT)


async def wait_for_lease(client: AsyncClient, acquire: wire.Request) -> Terms:
    """The asyncio twin of :func:`locker_client.lease.wait_for_lease`."""
    wait = LeaseWait(acquire, lease_hold_ms(client.timeout, len(client.endpoints)))
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
        # Connected while the lease is used, as the thread-kept Lease is.
        client.connect_ahead()
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
