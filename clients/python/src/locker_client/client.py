"""``Client``: the blocking client, with failover between lockers.

One REQ round trip per request, following the ZeroMQ Guide's Lazy Pirate
pattern exactly as the Rust ``locker::Client`` does (see ``pirate``): every
request has a deadline, a locker that does not answer in its share has its
socket closed (linger 0) and reopened, since a REQ socket that timed out can
never send again and a late reply must not be taken for the answer to a
later request. Each endpoint is tried at most once per request. The lease
guard is in ``lease``, the permit pool in ``pool``.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

import zmq

from . import pirate, wire
from .errors import ClientError, NoAnswer
from .lease import Lease, wait_for_lease
from .wire import GoReply, LeaseReply

#: The default deadline of one request, in seconds.
DEFAULT_TIMEOUT = 1.0


class Client:
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

    Use it as a context manager, or call :meth:`close`, to close its socket.
    """

    def __init__(
        self,
        endpoints: Union[str, Sequence[str]],
        timeout: float = DEFAULT_TIMEOUT,
        *,
        context: Optional[zmq.Context[Any]] = None,
    ) -> None:
        self._endpoints: List[str] = pirate.endpoints_list(endpoints)
        self._timeout = pirate.check_timeout(timeout)
        # The process-wide context is never terminated: sockets of siblings
        # on other threads may outlive this client.
        self._ctx: zmq.Context[Any] = context if context is not None else zmq.Context.instance()
        self._lock = threading.Lock()
        self._preferred = 0
        self._socket: Optional[zmq.Socket[bytes]] = None
        self._index = 0
        self._closed = False

    @property
    def endpoints(self) -> List[str]:
        """The lockers this client talks to."""
        return list(self._endpoints)

    @property
    def timeout(self) -> float:
        """The deadline of each request, in seconds."""
        return self._timeout

    @property
    def current_endpoint(self) -> Optional[str]:
        """The endpoint that answered last, if its socket is still open."""
        return self._endpoints[self._index] if self._socket is not None else None

    # ---- asks ---------------------------------------------------------

    def ask(
        self,
        limit: Optional[str] = None,
        key: Optional[str] = None,
        *,
        cost: int = 1,
        up_to: bool = False,
        max_wait_ms: Optional[int] = None,
    ) -> GoReply:
        """Asks for ``cost`` permits of ``limit`` (the default limit when
        None) for ``key`` and returns the locker's whole reply.

        ``cost=0`` peeks without taking; ``up_to=True`` takes as many of
        ``cost`` as are free (at least one; the reply's ``granted``);
        ``max_wait_ms`` accepts a reservation instead of sorry (the reply's
        ``wait_ms``: go after that long; :meth:`acquire` sleeps it for you).
        Raises :class:`~locker_client.LockerError` when the locker refuses,
        ``TypeError``/``ValueError`` for a bad argument, before sending.
        """
        body = wire.encode(wire.go_request(limit, key, cost, up_to, max_wait_ms))
        return wire.decode_go(self.round_trip(body))

    def acquire(
        self,
        limit: Optional[str] = None,
        key: Optional[str] = None,
        *,
        cost: int = 1,
        up_to: bool = False,
        max_wait_ms: Optional[int] = None,
    ) -> GoReply:
        """Asks like :meth:`ask` and, when the locker answers with a
        reservation (``wait_ms``), sleeps until the caller may go. On return
        ``ok`` means go now; not ``ok`` means sorry even within
        ``max_wait_ms``."""
        reply = self.ask(limit, key, cost=cost, up_to=up_to, max_wait_ms=max_wait_ms)
        if reply.ok and reply.wait_ms:
            time.sleep(reply.wait_ms / 1000)
        return reply

    def go(self, limit: Optional[str] = None) -> bool:
        """Asks in the seed's plain form: sends the limit's name (or
        ``b"let me go"`` for the default limit) and returns True for go,
        False for sorry."""
        return wire.decode_plain(self.round_trip(wire.plain_body(limit)))

    def stats(self) -> Dict[str, Any]:
        """The locker's counters, as the map it sends: ``limits`` (one map
        per limit), ``errors``, ``live_keys`` and, when peered, ``node``,
        ``joining`` and ``peers``."""
        return wire.decode_map(self.round_trip(wire.encode(wire.STATS_REQUEST)))

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
        request = wire.acquire_request(limit, count, wire.ttl_ms(ttl), wire.wait_ms(wait))
        return wire.decode_lease(self.round_trip(wire.encode(request)))

    def heartbeat(
        self, limit: Optional[str], lease: str, *, ttl: Optional[float] = None, count: Optional[int] = None
    ) -> LeaseReply:
        """Keeps a lease alive for ``ttl`` more seconds (the ttl it was
        acquired with when None); with ``count``, a locker that does not
        know the lease (it restarted) restores it if that count is free."""
        request = wire.heartbeat_request(limit, lease, wire.ttl_ms(ttl), count)
        return wire.decode_lease(self.round_trip(wire.encode(request)))

    def release(self, limit: Optional[str], lease: str) -> LeaseReply:
        """Frees a lease; ``ok`` is False when the locker no longer held it."""
        return wire.decode_lease(self.round_trip(wire.encode(wire.release_request(limit, lease))))

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
        ttl_ms = wire.ttl_ms(ttl)
        reply = wait_for_lease(self, wire.acquire_request(limit, count, ttl_ms, wire.wait_ms(wait)))
        return Lease(self.sibling(), limit, reply.lease or "", count, ttl_ms or reply.expires_in_ms, on_lost)

    # ---- the connection ----------------------------------------------

    def sibling(self) -> "Client":
        """A new client for the same lockers and timeout, sharing this one's
        ZeroMQ context and preferring the endpoint that answered last, for
        use on another thread."""
        twin = Client(self._endpoints, self._timeout, context=self._ctx)
        twin._preferred = self._preferred
        return twin

    def round_trip(self, body: bytes) -> bytes:
        """Sends ``body`` and returns the one reply, failing over between
        endpoints; raises :class:`~locker_client.NoAnswer` at the deadline."""
        with self._lock:
            if self._closed:
                raise ClientError("the client is closed")
            deadline = time.monotonic() + self._timeout
            n = len(self._endpoints)
            for index, budget in pirate.attempts(n, self._preferred, deadline, time.monotonic):
                reply = self._attempt(index, body, budget)
                if reply is not None:
                    self._preferred = index
                    return reply
            raise NoAnswer(self._timeout, self._endpoints)

    def _attempt(self, index: int, body: bytes, budget: float) -> Optional[bytes]:
        """One try on one endpoint; None when it did not answer in time (its
        socket is then closed)."""
        socket = self._open(index)
        try:
            socket.send(body)
            if socket.poll(pirate.poll_ms(budget), zmq.POLLIN):
                return socket.recv()
        except BaseException:
            # Interrupted mid-request (Ctrl-C, a zmq error): the REQ socket
            # is stuck between send and receive, so it cannot be reused.
            self._drop()
            raise
        self._drop()
        return None

    def _open(self, index: int) -> zmq.Socket[bytes]:
        if self._socket is not None and self._index != index:
            self._drop()
        if self._socket is None:
            socket = self._ctx.socket(zmq.REQ)
            # Unsent requests die with the socket instead of holding up exit.
            socket.setsockopt(zmq.LINGER, 0)
            socket.connect(self._endpoints[index])
            self._socket, self._index = socket, index
        return self._socket

    def _drop(self) -> None:
        if self._socket is not None:
            self._socket.close(linger=0)
            self._socket = None

    def close(self) -> None:
        """Closes the socket; later requests raise ``ClientError``. Leases
        taken through this client keep their own sockets until released."""
        with self._lock:
            self._closed = True
            self._drop()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Client({self._endpoints!r}, timeout={self._timeout!r})"

