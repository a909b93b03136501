"""What the blocking and the asyncio clients share: their endpoints,
timeout and CURVE keys, the one REQ socket open at a time and how it is
opened and dropped, and the bookkeeping of a request's tries (``pirate``).

The clients add only the waiting: :class:`~locker_client.Client` blocks on
the socket, :class:`~locker_client.AsyncClient` awaits it. Nothing here
sends or receives.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Any, Callable, Generic, Iterator, List, Optional, TypeVar, cast

import zmq
import zmq.backend

from . import curve, pirate
from .errors import NoAnswer

#: The default deadline of one request, in seconds.
DEFAULT_TIMEOUT = 1.0

#: Where a client connects when given no endpoint: the locker's own default bind.
DEFAULT_ENDPOINT = "tcp://127.0.0.1:7777"

S = TypeVar("S", bound="zmq.Socket[Any]")
C = TypeVar("C", bound="ClientBase[Any]")


class ClientBase(Generic[S]):
    """A client's state, for sockets of type ``S`` (blocking or asyncio)."""

    def __init__(self, endpoints: List[str], timeout: float, ctx: "zmq.Context[Any]", keys: Optional[curve.Curve]) -> None:
        self._endpoints = endpoints
        self._timeout = timeout
        self._curve = keys
        self._ctx = ctx
        self._preferred = 0
        self._socket: Optional[S] = None
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

    def _like_me(self, twin: C) -> C:
        """``twin``, a new client for the same lockers, made to speak CURVE
        as this one does and to prefer the endpoint that answered last."""
        twin._curve = self._curve
        twin._preferred = self._preferred
        return twin

    def _plan(self, started: float) -> pirate.Plan:
        """The tries of a request that started at ``started``."""
        return pirate.Plan(len(self._endpoints), self._preferred, started + self._timeout, time.monotonic)

    def _answered(self, index: int, reply: bytes) -> bytes:
        """The endpoint that answered is asked first next time."""
        self._preferred = index
        return reply

    def _no_answer(self) -> NoAnswer:
        return NoAnswer(self._timeout, self._endpoints)

    def _open(self, index: int) -> S:
        """The REQ socket to endpoint ``index``, opened when needed."""
        if self._socket is not None and self._index != index:
            self._drop()
        if self._socket is None:
            socket = self._new_socket()
            # Unsent requests die with the socket instead of holding up exit.
            socket.setsockopt(zmq.LINGER, 0)
            # Queue nothing for an endpoint without a connection: the socket
            # is writable only once connected, so a try sees a dead locker
            # within the connect check and passes it over.
            socket.setsockopt(zmq.IMMEDIATE, 1)
            # The blocking client's first look for an answer (the asyncio
            # client never blocks in a receive): see ``Client._reply``.
            socket.setsockopt(zmq.RCVTIMEO, pirate.FIRST_LOOK_MS)
            curve.secure(socket, self._curve)
            socket.connect(self._endpoints[index])
            self._socket, self._index = socket, index
        return self._socket

    def connect_ahead(self) -> None:
        """Opens the socket to the endpoint that answered last now, so that
        its connection is made while the caller works and the first request
        (a lease's release) does not wait for it."""
        self._open(self._preferred)

    def _new_socket(self) -> S:
        """A new REQ socket, not yet connected."""
        return cast(S, self._ctx.socket(zmq.REQ))

    @contextmanager
    def _socket_for(self, index: int) -> Iterator[S]:
        """The socket for one try on endpoint ``index``. Interrupted
        mid-request (Ctrl-C, a cancelled task, a zmq error), the REQ socket
        is stuck between send and receive and cannot be reused: it is closed."""
        socket = self._open(index)
        try:
            yield socket
        except BaseException:
            self._drop()
            raise

    def _missed(self, why: pirate.Missed) -> pirate.Missed:
        """Ends a try that brought no answer: its socket is closed."""
        self._drop()
        return why

    def _drop(self) -> None:
        """Closes the socket: after a try without an answer a REQ socket
        can never send again, and a late reply must not be taken for the
        answer to a later request."""
        if self._socket is not None:
            self._socket.close(linger=0)
            self._socket = None

    def _close(self) -> None:
        self._closed = True
        self._drop()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._endpoints!r}, timeout={self._timeout!r})"


def sent(socket: "zmq.Socket[Any]", body: bytes) -> bool:
    """Sends without waiting; False when there is no connection (ZeroMQ
    queues nothing for an endpoint without one, ``ZMQ_IMMEDIATE``)."""
    try:
        if socket.__class__ is _PLAIN:
            _backend_send(socket, body, _DONTWAIT)
        else:
            socket.send(body, _DONTWAIT)
    except zmq.Again:
        return False
    return True


# pyzmq's flags are enums whose operators run in Python: plain ints on
# paths of a few microseconds.
_DONTWAIT = int(zmq.DONTWAIT)

# pyzmq's Socket.send is a Python wrapper (routing ids, groups) around its
# backend's, which a plain socket's send can call directly; any other
# socket class (gevent's, say) keeps its own send.
_PLAIN = zmq.Socket
_backend = getattr(zmq.backend, "Socket", None)
_backend_send: Callable[..., Any] = (
    _backend.send if isinstance(_backend, type) and issubclass(_PLAIN, _backend) else _PLAIN.send  # type: ignore[attr-defined]
)
