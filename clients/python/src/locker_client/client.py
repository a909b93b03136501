"""``Client``: the blocking client, with failover between lockers.

One REQ round trip per request, following the ZeroMQ Guide's Lazy Pirate
pattern exactly as the Rust ``locker::Client`` does (see ``pirate``): every
request has a deadline; an endpoint without a connection is passed over
with nothing sent and tried again last; a locker that does not answer in
its share has its socket closed (linger 0) and reopened, since a REQ socket
that timed out can never send again and a late reply must not be taken for
the answer to a later request. Each endpoint is sent a request at most
once. The common case, the locker that answered last still connected,
takes the shortest path the plan allows: the request sent at once, the
answer waited for in one blocking receive (``round_trip``); the plan
itself runs only when that does not answer. The requests themselves are
built in ``wire`` and ``calls``, the state shared with the asyncio client
is in ``base``, the lease guard in ``lease``, the permit pool in ``pool``.
This module only adds the blocking waits.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import threading
import time
from typing import (
    Any,
    Callable,
    ContextManager,
    Dict,
    Iterable,
    List,
    Mapping,
    Optional,
    Sequence,
    TypeVar,
    Union,
    cast,
    overload,
)

import zmq

from . import calls, curve, pirate, wire
from .base import DEFAULT_ENDPOINT, DEFAULT_TIMEOUT, ClientBase, sent as _sent
from .errors import ClientError
from .lease import Lease, wait_for_lease
from .wire import AllAsks, AllReply, Ask, BatchReply, ChargeReply, GoReply, LeaseReply, Terms

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

__all__ = ["DEFAULT_TIMEOUT", "Client"]


class Client(ClientBase["zmq.Socket[bytes]"]):
    """A connection to one or more lockers.

    ``endpoints`` is one ZeroMQ endpoint (``"tcp://host:7777"``) or a list of
    them, tried in order and then from the one that answered last;
    ``timeout`` is the deadline of each request in seconds. Nothing is
    connected until the first request. When no locker answers in time, a
    request raises :class:`~locker_client.NoAnswer` instead of hanging.

    Thread safety: a client may be shared between threads. A lock around
    each request keeps its socket to one thread at a time (ZeroMQ sockets
    are not thread-safe), so requests from several threads take turns; for
    requests in parallel, give each thread its own client with
    :meth:`sibling`. The lease guard's heartbeat thread does exactly that.

    CURVE: with ``server_key`` (the locker's public key: Z85 text or its
    ``.pub`` file) and ``client_key`` (this client's secret key: Z85 text,
    its ``.key`` file, or the prefix given to ``locker keygen --out``),
    requests and replies are encrypted and the locker can check this client
    against its allowlist. A locker that refuses the key, or does not speak
    CURVE, gives no answer (:class:`~locker_client.NoAnswer`): ZeroMQ does
    not say why.

    Use it as a context manager, or call :meth:`close`, to close its socket.
    """

    def __init__(
        self,
        endpoints: Union[str, Sequence[str]] = DEFAULT_ENDPOINT,
        timeout: float = DEFAULT_TIMEOUT,
        *,
        context: Optional[zmq.Context[Any]] = None,
        server_key: Optional[curve.KeySource] = None,
        client_key: Optional[curve.KeySource] = None,
    ) -> None:
        # The process-wide context is never terminated: sockets of siblings
        # on other threads may outlive this client.
        ctx: zmq.Context[Any] = context if context is not None else zmq.Context.instance()
        keys = curve.load(server_key, client_key)
        super().__init__(pirate.endpoints_list(endpoints), pirate.check_timeout(timeout), ctx, keys)
        self._lock = threading.Lock()
        # The first try's share of the deadline, as the plan gives it, and
        # whether it leaves room for the first look.
        self._share = self._timeout / len(self._endpoints)
        self._first_look = self._share > _FIRST_LOOK

    # ---- asks ---------------------------------------------------------

    def ask(
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
        terms: Optional[Terms] = None,
        parents: Optional[Mapping[str, str]] = None,
        shadow: bool = False,
    ) -> GoReply:
        """Asks for ``cost`` permits of ``limit`` (the default limit when
        None) for ``key`` and returns the locker's whole reply.

        ``cost=0`` peeks without taking; ``up_to=True`` takes as many of
        ``cost`` as are free (at least one; the reply's ``granted``);
        ``max_wait_ms`` accepts a reservation instead of sorry (the reply's
        ``wait_ms``: go after that long; :meth:`acquire` sleeps it for you);
        ``hold_ms`` asks the locker to hold its reply up to that long and
        answer go as soon as the limit allows instead of sorry (keep it
        under the client's ``timeout``); ``terms`` sends the limit's
        :class:`~locker_client.Terms`, for a limit the locker's config does
        not name (a locker started with ``--runtime-limits``).
        ``parents`` names the key of each limit above ``limit``, when its
        config names a ``parent`` (``{"team": "t3", "org": "acme"}``): the
        ask takes ``cost`` from every level or from none, and the reply is
        the figures of the level nearest to refusing it.
        ``shadow=True`` asks in shadow, a dry run: decided and counted as
        usual, but a would-be sorry is answered go with ``shadow_sorry``
        set, charging nothing, never held or reserved (as an ask of a limit
        whose config says ``shadow = true`` is).
        Raises :class:`~locker_client.LockerError` when the locker refuses,
        ``TypeError``/``ValueError`` for a bad argument, before sending.
        """
        # The common ask (no time given in seconds) skips the conversions;
        # ask_body writes it straight to bytes, and checks anything else.
        if max_wait is not None:
            max_wait_ms = wire.seconds_or_ms("max_wait", max_wait, max_wait_ms)
        if hold is not None:
            hold_ms = wire.seconds_or_ms("hold", hold, hold_ms)
        body = wire.ask_body(limit, key, cost, up_to, max_wait_ms, hold_ms, terms, parents, shadow)
        return _decode_go(self.round_trip(body))

    def all(
        self,
        asks: Iterable[Ask],
        *,
        max_wait: Optional[float] = None,
        hold: Optional[float] = None,
        max_wait_ms: Optional[int] = None,
        hold_ms: Optional[int] = None,
    ) -> AllReply:
        """Asks several limits together (1 to 16 :class:`~locker_client.Ask`,
        each with its own limit, key, cost and terms, but no ``up_to`` or
        wait of its own): every part goes, or none is charged anything::

            reply = client.all([Ask("per-second", "user-7"), Ask("per-day", "user-7"), Ask("global")])
            if not reply.ok:
                print("retry after", reply.retry_after, "s;", reply.replies)  # which refused

        The :class:`~locker_client.AllReply` holds each part's own go reply.
        ``max_wait`` (seconds) accepts a reservation of every part at once
        instead of sorry (the reply's ``wait``; not slept through), ``hold``
        asks the locker to hold its reply until all can go. Raises
        :class:`~locker_client.LockerError` when the locker refuses (a
        semaphore among the parts, an unknown limit), ``TypeError``/
        ``ValueError`` for a bad ask or more than 16, before sending.
        """
        return self._call(calls.all_of(asks, *calls.whole_waits(max_wait, hold, max_wait_ms, hold_ms)))

    def refund(
        self,
        limit: Optional[str],
        key: Optional[str] = None,
        cost: int = 1,
        *,
        parents: Optional[Mapping[str, str]] = None,
    ) -> GoReply:
        """Gives back ``cost`` permits that ``key`` took of ``limit`` and
        that still count (the call they were for never happened). Never
        more than the key took: a refund cannot create capacity. The reply
        is a :class:`~locker_client.GoReply`: ``granted``, the permits that
        went back; ``remaining``, what a new ask could take now. With
        ``parents`` (as the ask named them) the permits go back to every
        limit above ``limit`` too, and the reply is the level's with the
        fewest left."""
        return self._call(calls.refund(limit, key, cost, parents))

    def charge(
        self,
        limit: Optional[str],
        key: Optional[str] = None,
        cost: int = 1,
        *,
        parents: Optional[Mapping[str, str]] = None,
    ) -> ChargeReply:
        """Charges ``cost`` permits that ``key`` used of ``limit`` before it
        could know how many (the tokens of a model's answer): taken
        whatever is left, past the limit if need be. The reply is a
        :class:`~locker_client.ChargeReply`: always ``ok``; ``debt``, the
        permits owed beyond the limit, which later asks of the key wait
        out (their ``retry_after`` says how long); ``remaining`` 0 while in
        debt. With ``parents`` every limit above ``limit`` is charged too.
        Raises :class:`~locker_client.LockerError` for a semaphore or a
        limit kept in a store."""
        return self._call(calls.charge(limit, key, cost, parents))

    def reset(self, limit: Optional[str], key: Optional[str] = None) -> GoReply:
        """Clears ``key``'s count of ``limit`` (a login that succeeded) and
        returns the key's figures after it, as a
        :class:`~locker_client.GoReply`. The locker refuses
        (:class:`~locker_client.LockerError`) unless the limit says
        ``allow_reset = true``."""
        return self._call(calls.reset(limit, key))

    def ask_many(self, asks: Iterable[Union[Ask, AllAsks]]) -> List[BatchReply]:
        """Sends many asks in one message (at most 1000,
        ``wire.MAX_BATCH_ASKS``) and returns their replies in the order of
        ``asks``: for each, the :class:`~locker_client.GoReply` it would get
        on its own at that moment (a later ask sees what an earlier one
        took), or a :class:`~locker_client.Refused` when the locker refused
        that ask alone. An :class:`~locker_client.AllAsks` entry is limits
        checked together, answered with its
        :class:`~locker_client.AllReply` (never held). One round trip
        however many asks::

            replies = client.ask_many([Ask("api", "user-7"), Ask("api", "user-8", cost=3)])

        Raises :class:`~locker_client.LockerError` when the locker refuses
        the whole batch, ``TypeError``/``ValueError`` for a bad ask or more
        than 1000 of them, before sending. A reservation is not slept.
        """
        body, count = wire.batch_body(asks)
        return wire.decode_batch(self.round_trip(body), count)

    def acquire(
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
        """Asks like :meth:`ask` and, when the locker answers with a
        reservation (``wait_ms``), sleeps until the caller may go. On return
        ``ok`` means go now; not ``ok`` means sorry even within
        ``max_wait_ms``."""
        max_wait_ms = wire.seconds_or_ms("max_wait", max_wait, max_wait_ms)
        reply = self.ask(limit, key, cost=cost, up_to=up_to, max_wait_ms=max_wait_ms, parents=parents, shadow=shadow)
        time.sleep(calls.reservation(reply))
        return reply

    def go(self, limit: Optional[str] = None) -> bool:
        """Asks once and returns True for go, False for sorry. With no
        limit, in the seed's plain form (``b"let me go"``); a named limit is
        asked in the structured form, so a misspelt name raises
        :class:`~locker_client.LockerError` instead of asking the default
        limit."""
        if limit is None:
            return wire.decode_plain(self.round_trip(wire.PLAIN_BODY))
        return self.ask(limit).ok

    @overload
    def permit(
        self, limit: Optional[str] = None, key: Optional[str] = None, *, cost: int = 1, wait: float = 0.0
    ) -> ContextManager[GoReply]: ...

    @overload
    def permit(
        self, limit: calls.Limits, key: Optional[str] = None, *, cost: int = 1, wait: float = 0.0
    ) -> ContextManager[AllReply]: ...

    def permit(
        self,
        limit: Union[None, str, calls.Limits] = None,
        key: Optional[str] = None,
        *,
        cost: int = 1,
        wait: float = 0.0,
    ) -> ContextManager[Any]:
        """A rate permit for the block it guards: asks for ``cost`` permits
        and, on sorry, sleeps until they may fit and asks again, for up to
        ``wait`` seconds in all; raises :class:`~locker_client.RateLimited`
        (with ``retry_after`` in seconds, and the last sorry as ``reply``)
        when no go came within that. The permits are spent, not given back,
        when the block ends::

            with client.permit("api", key="user-7", wait=2.0):
                call_the_api()

        When the cost is known only afterwards (an LLM's tokens), ask for
        an estimate and settle the permit with what was used: the
        difference is charged when more (a debt later asks wait out), or
        refunded when less (see :meth:`_Permit.settle`)::

            permit = client.permit("llm", key="user-7", cost=1000, wait=5.0)
            with permit:
                answer = call_the_model()
                permit.settle(answer.usage.total_tokens)

        Over several limits at once, ``limit`` is a list of names (each
        asked for ``key`` and ``cost``) or :class:`~locker_client.Ask`: they
        are asked together (:meth:`all`), so a sorry charges none of them,
        and ``RateLimited`` names the limit that refused::

            with client.permit(["per-second", "per-day", Ask("global")], key="user-7"):
                call_the_api()
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
        """A decorator that takes a :meth:`permit` before each call of the
        function it wraps (a coroutine function too: the blocking wait then
        runs in a thread, so the event loop is never blocked); ``limit``
        may name several limits, as for :meth:`permit`::

            @client.limited("api", wait=1.0)
            def fetch(url): ...
        """

        def decorate(f: F) -> F:
            take: Callable[[], object]
            if calls.several(limit):
                whole = calls.permit_all(cast(calls.Limits, limit), key, cost)
                take = functools.partial(self._permit_all, whole, wait)
            else:
                take = functools.partial(self._permit, cast(Optional[str], limit), key, cost, wait)
            if inspect.iscoroutinefunction(f):

                @functools.wraps(f)
                async def run_async(*args: Any, **kwargs: Any) -> Any:
                    await asyncio.to_thread(take)
                    return await f(*args, **kwargs)

                return cast(F, run_async)

            @functools.wraps(f)
            def run(*args: Any, **kwargs: Any) -> Any:
                take()
                return f(*args, **kwargs)

            return cast(F, run)

        return decorate

    def _permit(self, limit: Optional[str], key: Optional[str], cost: int, wait: float) -> GoReply:
        deadline = _monotonic() + pirate.check_wait(wait)
        # Built and checked once, however many times it is asked.
        body = wire.ask_body(limit, key, cost)
        while True:
            reply = _decode_go(self.round_trip(body))
            if reply.ok:
                return reply
            time.sleep(calls.permit_pause(reply, limit, key, deadline - _monotonic()))

    def _permit_all(self, whole: calls.PermitAll, wait: float) -> AllReply:
        deadline = _monotonic() + pirate.check_wait(wait)
        while True:
            reply = self._call(whole.call)
            if reply.ok:
                return reply
            time.sleep(whole.pause(reply, deadline - _monotonic()))

    def stats(self) -> Dict[str, Any]:
        """The locker's counters, as the map it sends: ``limits`` (one map
        per limit), ``errors``, ``live_keys`` and, when peered, ``node``,
        ``joining`` and ``peers``."""
        return self._call(calls.stats())

    # ---- leases -------------------------------------------------------

    def acquire_lease(
        self,
        limit: Optional[str],
        count: int = 1,
        *,
        ttl: Optional[float] = None,
        wait: Optional[float] = None,
    ) -> LeaseReply:
        """Sends one acquire for ``count`` of semaphore ``limit`` and returns
        the reply as is: held, pending (queued for up to ``wait`` seconds)
        or refused. :meth:`lease` is the guard that waits and keeps it."""
        return self._call(calls.acquire_lease(limit, count, ttl, wait))

    def heartbeat(
        self, limit: Optional[str], lease: str, *, ttl: Optional[float] = None, count: Optional[int] = None
    ) -> LeaseReply:
        """Keeps a lease alive for ``ttl`` more seconds (the ttl it was
        acquired with when None); with ``count``, a locker that does not
        know the lease (it restarted) restores it if that count is free."""
        return self._call(calls.heartbeat(limit, lease, ttl, count))

    def release(self, limit: Optional[str], lease: str) -> LeaseReply:
        """Frees a lease; ``ok`` is False when the locker no longer held it."""
        return self._call(calls.release(limit, lease))

    def lease(
        self,
        limit: Optional[str],
        count: int = 1,
        *,
        ttl: Optional[float] = None,
        wait: Optional[float] = None,
        on_lost: Optional[Callable[[Lease], None]] = None,
    ) -> Lease:
        """Takes ``count`` of semaphore ``limit`` and keeps it until released.

        Waits up to ``wait`` seconds in the locker's queue when the count is
        not free; raises :class:`~locker_client.NotAcquired` when it is
        still not had by then. The returned :class:`~locker_client.Lease` is
        a context manager: a thread heartbeats every ``ttl``/3 seconds
        (``ttl``: the limit's in_seconds when None) and the lease is
        released on exit. ``on_lost(lease)`` is called, from that thread,
        if the lease is lost while held::

            with client.lease("db", count=1, ttl=10, wait=2) as lease:
                run_query()
        """
        acquire = wire.acquire_request(limit, count, wire.ttl_ms(ttl), wire.wait_ms(wait))
        return Lease(self.sibling(), *wait_for_lease(self, acquire), on_lost)

    # ---- the connection ----------------------------------------------

    def sibling(self) -> "Client":
        """A new client for the same lockers and timeout, sharing this one's
        ZeroMQ context and preferring the endpoint that answered last, for
        use on another thread."""
        return self._like_me(Client(self._endpoints, self._timeout, context=self._ctx))

    def round_trip(self, body: bytes) -> bytes:
        """Sends ``body`` and returns the one reply, failing over between
        endpoints; raises :class:`~locker_client.NoAnswer` at the deadline."""
        with self._lock:
            if self._closed:
                raise ClientError("the client is closed")
            started = _monotonic()
            socket = self._socket
            if socket is not None and self._index == self._preferred:
                # The common case, on the shortest path: the socket to the
                # locker that answered last is open, so send at once (a REQ
                # socket with ZMQ_IMMEDIATE refuses a send without a
                # connection, so no poll is needed to find out) and wait
                # for the answer for this first try's share, as the plan
                # would give it: first in a blocking receive (see _reply),
                # the answer nearly always there within it. Anything else
                # goes the plan's way.
                try:
                    if not _sent(socket, body):
                        return self._failover(body, started, sent_first=False)
                    if self._first_look:
                        try:
                            return socket.recv()
                        except zmq.Again:
                            pass
                    reply = self._late_reply(socket, started + self._share)
                except BaseException:
                    # Interrupted between send and receive (Ctrl-C, a zmq
                    # error): the REQ socket cannot be used again.
                    self._drop()
                    raise
                if reply is not None:
                    return reply
                self._missed(pirate.Missed.SILENT)
                return self._failover(body, started, sent_first=True)
            return self._failover(body, started, sent_first=False)

    def _failover(self, body: bytes, started: float, sent_first: bool) -> bytes:
        """The Lazy Pirate plan of a request that started at ``started``;
        with ``sent_first``, its first try (the endpoint that answered
        last) was already sent the request and was silent."""
        plan = self._plan(started)
        tries = iter(plan)
        if sent_first:
            first = next(tries, None)
            if first is None:
                raise self._no_answer()
            plan.missed(first, pirate.Missed.SILENT)
        for tried in tries:
            got = self._attempt(tried, body)
            if isinstance(got, bytes):
                return self._answered(tried.index, got)
            plan.missed(tried, got)
        raise self._no_answer()

    def _attempt(self, tried: pirate.Try, body: bytes) -> Union[bytes, pirate.Missed]:
        """One try on one endpoint: send (after waiting for a connection, if
        there is none yet), then wait for the answer."""
        started = _monotonic()
        with self._socket_for(tried.index) as socket:
            if not (_sent(socket, body) or (socket.poll(tried.connect_ms(), _POLLOUT) and _sent(socket, body))):
                return self._missed(pirate.Missed.NOT_CONNECTED)
            reply = self._reply(socket, started + tried.budget)
            return self._missed(pirate.Missed.SILENT) if reply is None else reply

    def _reply(self, socket: "zmq.Socket[bytes]", until: float) -> Optional[bytes]:
        """The answer to the request just sent on ``socket``, or None when
        none came by ``until`` (monotonic seconds; at least one look).

        A locker answers within microseconds, so the first look is a
        blocking receive bounded by the socket's ``ZMQ_RCVTIMEO``
        (``pirate.FIRST_LOOK_MS``): the cheapest wait there is, which a
        poll before the receive would make several microseconds dearer.
        It is kept short because pyzmq restarts a receive interrupted by a
        signal with its whole timeout, and taken only when the try has at
        least that long. An answer that takes longer (a held ask, a locker
        under load, a silent one) is waited for by :meth:`_late_reply`."""
        if until - _monotonic() > _FIRST_LOOK:
            try:
                return socket.recv()
            except zmq.Again:
                pass
        return self._late_reply(socket, until)

    def _late_reply(self, socket: "zmq.Socket[bytes]", until: float) -> Optional[bytes]:
        """The rest of the wait for an answer, in a poll, which counts the
        time already spent when a signal interrupts it, so the deadline
        holds; at least one look."""
        if socket.poll(pirate.poll_ms(until - _monotonic()), _POLLIN):
            return socket.recv(_DONTWAIT)
        return None

    def _call(self, call: calls.Call[T]) -> T:
        return call.decode(self.round_trip(call.body))

    def close(self) -> None:
        """Closes the socket; later requests raise ``ClientError``. Leases
        taken through this client keep their own sockets until released."""
        with self._lock:
            self._close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Permit:
    """What :meth:`Client.permit` returns: a context manager that takes the
    permit on entering and spends it (nothing to give back) on exit. A
    class rather than a generator: entering and leaving cost a method
    call each."""

    __slots__ = ("_client", "_limit", "_key", "_cost", "_wait", "_taken")

    def __init__(self, client: Client, limit: Optional[str], key: Optional[str], cost: int, wait: float) -> None:
        self._client = client
        self._limit = limit
        self._key = key
        self._cost = cost
        self._wait = wait
        self._taken = False

    def __enter__(self) -> GoReply:
        reply = self._client._permit(self._limit, self._key, self._cost, self._wait)
        self._taken = True
        return reply

    def __exit__(self, *exc: object) -> None:
        return None

    def settle(self, actual: int) -> Optional[GoReply]:
        """Settles the permit taken for its ``cost`` (an estimate) with the
        ``actual`` permits used: charges the difference when more (a
        :class:`~locker_client.ChargeReply`, whose ``debt`` later asks
        wait out), refunds it when fewer (a :class:`~locker_client.GoReply`
        whose ``granted`` went back); None, sending nothing, when the
        estimate was right. Once, after the permit was taken."""
        if not self._taken:
            raise RuntimeError("settle a permit once, after it was taken")
        op, n = calls.settlement(self._cost, actual)
        self._taken = False
        if op == "charge":
            return self._client.charge(self._limit, self._key, n)
        if op == "refund":
            return self._client.refund(self._limit, self._key, n)
        return None


class _PermitAll:
    """What :meth:`Client.permit` returns over several limits: the permit
    of them all, taken on entering, spent on exit."""

    __slots__ = ("_client", "_whole", "_wait")

    def __init__(self, client: Client, whole: calls.PermitAll, wait: float) -> None:
        self._client = client
        self._whole = whole
        self._wait = wait

    def __enter__(self) -> AllReply:
        return self._client._permit_all(self._whole, self._wait)

    def __exit__(self, *exc: object) -> None:
        return None


# The calls of the common path, looked up once: a module attribute (and
# pyzmq's flag enums, whose operators run in Python) each cost more than
# the call itself on a path of a few microseconds.
_monotonic = time.monotonic
_FIRST_LOOK = pirate.FIRST_LOOK_MS / 1000
_decode_go = wire.decode_go
_POLLIN = int(zmq.POLLIN)
_POLLOUT = int(zmq.POLLOUT)
_DONTWAIT = int(zmq.DONTWAIT)
