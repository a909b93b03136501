"""Every request a client makes, as the bytes to send and the way to read
the reply: built once here for :class:`~locker_client.Client` and
:class:`~locker_client.AsyncClient`, which only add the round trip.

Arguments are checked when a call is built, before anything is sent. This
module holds no state and never touches a socket.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, Dict, Generic, Iterable, List, Optional, TypeVar

from . import wire
from .errors import RateLimited
from .wire import Ask, BatchReply, GoReply, LeaseReply

T = TypeVar("T")


@dataclass(frozen=True)
class Call(Generic[T]):
    """A request's bytes and the decoder of its reply."""

    body: bytes
    decode: Callable[[bytes], T]


def ask(
    limit: Optional[str],
    key: Optional[str],
    cost: int,
    up_to: bool,
    max_wait_ms: Optional[int],
    hold_ms: Optional[int] = None,
) -> Call[GoReply]:
    """An ask for ``cost`` permits of ``limit`` for ``key``."""
    return Call(wire.encode(wire.go_request(limit, key, cost, up_to, max_wait_ms, hold_ms)), wire.decode_go)


def ask_many(asks: Iterable[Ask]) -> Call[List[BatchReply]]:
    """Many asks in one message, their replies in the same order."""
    request = wire.batch_request(asks)
    return Call(wire.encode(request), partial(wire.decode_batch, count=len(request["asks"])))


def reservation(reply: GoReply) -> float:
    """Seconds to wait before going on a go with a reservation; 0 for none."""
    return reply.wait_ms / 1000 if reply.ok and reply.wait_ms else 0.0


def go(limit: Optional[str]) -> Call[bool]:
    """An ask in the seed's plain form."""
    return Call(wire.plain_body(limit), wire.decode_plain)


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


def permit_pause(reply: GoReply, limit: Optional[str], key: Optional[str], left: float) -> float:
    """After a sorry to a caller that may wait ``left`` more seconds: how
    long to sleep before asking again, or :class:`RateLimited` when the ask
    cannot fit within that."""
    if reply.retry_after > left:
        raise RateLimited(limit, key, reply.retry_after)
    return max(reply.retry_after, 0.001)
