"""The requests a client makes besides asks (stats and lease requests), as
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

from dataclasses import dataclass
from typing import Any, Callable, Dict, Generic, Optional, TypeVar

from . import wire
from .errors import RateLimited
from .wire import GoReply, LeaseReply

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


def permit_pause(reply: GoReply, limit: Optional[str], key: Optional[str], left: float) -> float:
    """After a sorry to a caller that may wait ``left`` more seconds: how
    long to sleep before asking again, or :class:`RateLimited` when the ask
    cannot fit within that."""
    if reply.retry_after > left:
        raise RateLimited(limit, key, reply.retry_after)
    return max(reply.retry_after, 0.001)
