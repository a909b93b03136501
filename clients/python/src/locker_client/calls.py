"""The requests a client makes besides asks (stats, lease requests, limits
checked together, refunds, charges and resets), as
the bytes to send and the way to read the reply, built once here for
:class:`~locker_client.Client` and :class:`~locker_client.AsyncClient`,
which only add the round trip; and the arithmetic of acquire and permit.
Asks, the hot path, go straight from ``wire.ask_body`` (``wire.batch_body``)
to the round trip and ``wire.decode_go`` (``wire.decode_batch``), without a
call object between.

Arguments are checked when a call is built, before anything is sent. This
module holds no state and never touches a socket.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable, Dict, Generic, Iterable, List, Mapping, Optional, Tuple, TypeVar, Union

from . import wire
from .errors import RateLimited
from .wire import AllReply, Ask, ChargeReply, GoReply, LeaseReply

T = TypeVar("T")


@dataclass(frozen=True)
class Call(Generic[T]):
    """A request's bytes and the decoder of its reply."""

    body: bytes
    decode: Callable[[bytes], T]


def reservation(reply: GoReply) -> float:
    """Seconds to wait before going on a go with a reservation; 0 for none."""
    return reply.wait_ms / 1000 if reply.ok and reply.wait_ms else 0.0


def stats() -> Call[Dict[str, Any]]:
    """The locker's counters."""
    return Call(wire.encode(wire.STATS_REQUEST), wire.decode_map)


def lease_call(request: wire.Request) -> Call[LeaseReply]:
    """Any lease request: acquire, heartbeat or release."""
    return Call(wire.encode(request), wire.decode_lease)


def acquire_lease(limit: Optional[str], count: int, ttl: Optional[float], wait: Optional[float]) -> Call[LeaseReply]:
    """One acquire of ``count`` of semaphore ``limit``."""
    return lease_call(wire.acquire_request(limit, count, wire.ttl_ms(ttl), wire.wait_ms(wait)))


def heartbeat(limit: Optional[str], lease: str, ttl: Optional[float], count: Optional[int]) -> Call[LeaseReply]:
    """A heartbeat that keeps (or with ``count`` restores) a lease."""
    return lease_call(wire.heartbeat_request(limit, lease, wire.ttl_ms(ttl), count))


def release(limit: Optional[str], lease: str) -> Call[LeaseReply]:
    """The release of a lease."""
    return lease_call(wire.release_request(limit, lease))


def permit_pause(reply: Union[GoReply, AllReply], limit: Optional[str], key: Optional[str], left: float) -> float:
    """After a sorry to a caller that may wait ``left`` more seconds: how
    long to sleep before asking again, or :class:`RateLimited` when the ask
    cannot fit within that."""
    if reply.retry_after > left:
        raise RateLimited(limit, key, reply.retry_after, reply)
    return max(reply.retry_after, 0.001)


def all_of(asks: Iterable[Ask], max_wait_ms: Optional[int], hold_ms: Optional[int]) -> Call[AllReply]:
    """Limits checked together; the reply keeps the names of the limits asked."""
    listed = list(asks)
    body = wire.encode(wire.all_request(listed, max_wait_ms, hold_ms))
    names = tuple(ask.limit for ask in listed)
    return Call(body, functools.partial(wire.decode_all, names=names))


def whole_waits(
    max_wait: Optional[float], hold: Optional[float], max_wait_ms: Optional[int], hold_ms: Optional[int]
) -> Tuple[Optional[int], Optional[int]]:
    """The wait and hold of limits checked together, given in seconds or
    milliseconds, as the wire's milliseconds."""
    return wire.seconds_or_ms("max_wait", max_wait, max_wait_ms), wire.seconds_or_ms("hold", hold, hold_ms)


def refund(
    limit: Optional[str], key: Optional[str], cost: int, parents: Optional[Mapping[str, str]] = None
) -> Call[GoReply]:
    """Permits given back (to the limits above too, with ``parents``); the
    reply is a go reply whose ``granted`` is what went back."""
    return Call(wire.encode(wire.refund_request(limit, key, cost, parents)), wire.decode_go)


def charge(
    limit: Optional[str], key: Optional[str], cost: int, parents: Optional[Mapping[str, str]] = None
) -> Call[ChargeReply]:
    """Permits used, charged whatever is left (to the limits above too,
    with ``parents``); the reply is a go reply with the ``debt`` left."""
    return Call(wire.encode(wire.charge_request(limit, key, cost, parents)), wire.decode_charge)


def settlement(estimate: int, actual: int) -> Tuple[str, int]:
    """What settles a permit of ``estimate`` permits that used ``actual``:
    ``("charge", n)`` for the ``n`` more it used, ``("refund", n)`` for the
    ``n`` fewer, ``("", 0)`` when the estimate was right."""
    used = wire.check_count("actual", actual, 0)
    if used > estimate:
        return "charge", used - estimate
    if used < estimate:
        return "refund", estimate - used
    return "", 0


def reset(limit: Optional[str], key: Optional[str]) -> Call[GoReply]:
    """One key's count cleared; the reply is a go reply with the key's
    figures after it."""
    return Call(wire.encode(wire.reset_request(limit, key)), wire.decode_go)


#: What :meth:`~locker_client.Client.permit` takes over several limits at
#: once, a list or a tuple: each a limit's name (asked for the permit's key
#: and cost; None for the default limit) or an Ask.
Limits = Union[List[Union[None, str, Ask]], Tuple[Union[None, str, Ask], ...]]


def several(limit: object) -> bool:
    """Whether a permit's ``limit`` names several limits (a list or a tuple)."""
    return isinstance(limit, (list, tuple))


@dataclass(frozen=True)
class PermitAll:
    """A permit over several limits at once: the call that asks them all,
    and the asks, to name the one that refused."""

    call: Call[AllReply]
    asks: Tuple[Ask, ...]

    def pause(self, reply: AllReply, left: float) -> float:
        """:func:`permit_pause` for the whole, naming the part that binds hardest."""
        part = self.asks[reply.tightest]
        return permit_pause(reply, part.limit, part.key, left)


def permit_all(limits: Limits, key: Optional[str], cost: int) -> PermitAll:
    """The permit of ``cost`` of each of ``limits`` for ``key`` (an Ask
    among them is asked as it is)."""
    asks = tuple(part if isinstance(part, Ask) else Ask(wire.check_name("limit", part), key, cost) for part in limits)
    return PermitAll(all_of(asks, None, None), asks)
