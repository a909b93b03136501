"""The Lazy Pirate plan both clients follow, without sockets or clocks.

A request has one deadline. Endpoints are tried in turn from the one that
answered last, each sent the request at most once, so one locker never
counts a request twice. A try first waits up to ``CONNECT_CHECK`` for its
socket to have a connection (a REQ socket with ``ZMQ_IMMEDIATE`` is
writable only then); an endpoint without one is passed over with nothing
sent and tried again once the others have been, with the time left, so one
dead locker does not cost everyone a share of the deadline. A try that was
sent waits for its answer until its share of the time left is spent. This
is the same rule as ``Client::round_trip`` in the Rust client.

The clock is passed in (``time.monotonic`` in the clients, a list of
literal instants in the tests); nothing here reads one or touches a socket.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Callable, Iterator, List, Sequence, Union

#: How long a try waits for a connection before passing its endpoint over
#: for now: far longer than a connect on a LAN, far shorter than a timeout.
CONNECT_CHECK = 0.1

#: The blocking client's first look for an answer, in milliseconds (its
#: sockets' ``ZMQ_RCVTIMEO``): far longer than a locker takes to answer, short
#: enough that only signals coming faster than this, without end, could
#: stretch a deadline (pyzmq restarts an interrupted receive with its whole
#: timeout); a try that needs longer waits the rest of its budget in a
#: poll. Not shorter: a timeout before the kernel's next tick costs a timer
#: of its own on every wait (measured: 2 µs a request at 2 ms on a VM,
#: nothing from 5 ms on), and libzmq reads its clock in whole
#: milliseconds, so a 1 ms timeout often ends at once.
FIRST_LOOK_MS = 10


class Missed(enum.Enum):
    """Why a try brought no answer."""

    #: The request was sent and no answer came in the try's budget.
    SILENT = "silent"
    #: No connection within the connect check: nothing was sent.
    NOT_CONNECTED = "not connected"


@dataclass(frozen=True)
class Try:
    """One try: ask endpoint ``index``, waiting up to ``connect`` seconds
    for a connection and ``budget`` seconds in all (the connect wait
    included) for the answer."""

    index: int
    budget: float
    connect: float

    def connect_ms(self) -> int:
        """The wait for a connection, as a poll timeout."""
        return poll_ms(self.connect)

    def answer_ms(self, elapsed: float) -> int:
        """The wait for the answer, ``elapsed`` seconds into the try."""
        return poll_ms(self.budget - elapsed)


class Plan:
    """The tries of one request, in order; iterate it, and tell it with
    :meth:`missed` how each try without an answer went."""

    def __init__(self, count: int, preferred: int, deadline: float, clock: Callable[[], float]) -> None:
        self._order = [(preferred + k) % count for k in range(count)]
        self._deadline = deadline
        self._clock = clock
        # Endpoints that may still be sent the request: the share of each
        # first-round try reserves time for the ones passed over.
        self._not_sent = count
        self._passed_over: List[int] = []
        self._first_round = True

    def __iter__(self) -> Iterator[Try]:
        for step, index in enumerate(self._order):
            left = self._deadline - self._clock()
            if left <= 0:
                return
            share = left / self._not_sent
            # The last endpoint with none passed over has nobody to make way for.
            last = step + 1 == len(self._order) and not self._passed_over
            yield Try(index, share, share if last else min(CONNECT_CHECK, share))
        self._first_round = False
        retries = list(self._passed_over)
        for k, index in enumerate(retries):
            left = self._deadline - self._clock()
            if left <= 0:
                return
            share = left / (len(retries) - k)
            yield Try(index, share, share)

    def missed(self, tried: Try, why: Missed) -> None:
        """Takes in that ``tried`` brought no answer, and why."""
        if not self._first_round:
            return
        if why is Missed.SILENT:
            self._not_sent -= 1
        else:
            self._passed_over.append(tried.index)


def endpoints_list(endpoints: Union[str, Sequence[str]]) -> List[str]:
    """One endpoint or several, checked: a non-empty list of strings."""
    if isinstance(endpoints, str):
        endpoints = [endpoints]
    if isinstance(endpoints, (bytes, bytearray)):
        raise TypeError("endpoints must be a str or a list of str, not bytes")
    listed = list(endpoints)
    if not listed:
        raise ValueError("at least one endpoint is needed")
    for e in listed:
        if not isinstance(e, str):
            raise TypeError(f"an endpoint must be a str, not {type(e).__name__}")
        if "://" not in e:
            raise ValueError(f"an endpoint is transport://address, e.g. tcp://{e or 'host:7777'}; got {e!r}")
    return listed


def check_timeout(timeout: object) -> float:
    """A positive, finite number of seconds."""
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise TypeError(f"timeout must be a number of seconds, not {type(timeout).__name__}")
    if not 0 < timeout < float("inf"):
        raise ValueError(f"timeout must be positive and finite, not {timeout}")
    return float(timeout)


def poll_ms(budget: float) -> int:
    """Seconds as a poll timeout: whole milliseconds, at least one (a
    budget already spent still gets one look at the socket)."""
    return max(1, int(budget * 1000))


def check_wait(wait: object) -> float:
    """Zero or more finite seconds to wait."""
    if isinstance(wait, bool) or not isinstance(wait, (int, float)):
        raise TypeError(f"wait must be a number of seconds, not {type(wait).__name__}")
    if not 0 <= wait < float("inf"):
        raise ValueError(f"wait must be zero or more seconds, not {wait}")
    return float(wait)
