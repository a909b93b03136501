"""A Python client for the locker, a rate-limit daemon reached over ZeroMQ.

Before each call to a rate-limited resource, ask the locker "may I go?"::

    from locker_client import Client

    with Client(["tcp://10.0.0.1:7777", "tcp://10.0.0.2:7777"], timeout=1.0) as client:
        reply = client.ask("api", key="user-7")
        if reply.ok:
            ...  # go
        else:
            ...  # sorry: retry after reply.retry_after seconds

        with client.permit("api", key="user-7", wait=2.0):  # or RateLimited
            ...  # go

It speaks the locker's wire contract (the structured MessagePack form and
the seed's plain form) with the same failover as the Rust ``locker::Client``:
:class:`Client` (blocking), :class:`AsyncClient` (asyncio), many asks in one
message (``ask_many`` with :class:`Ask`; :class:`Refused` for an ask refused
alone), semaphore leases kept alive in the background (:class:`Lease`,
:class:`AsyncLease`), permit pools that take permits in batches
(:class:`PermitPool`, :class:`AsyncPermitPool`), several limits checked
together (``all``, :class:`AllReply`), permits given back (``refund``),
permits charged after the fact (``charge``, :class:`ChargeReply`; a
permit's ``settle``), a
key's count cleared (``reset``), limits sent with the ask (:class:`Terms`)
and the standard rate-limit header fields of a reply (``headers()``; the
ASGI and WSGI middlewares, ``locker_client.asgi`` and ``locker_client.wsgi``,
send them).
"""

from .aio import AsyncClient, AsyncLease, AsyncPermitPool
from .client import DEFAULT_TIMEOUT, Client
from .base import DEFAULT_ENDPOINT
from .errors import BadReply, ClientError, LockerError, NoAnswer, NotAcquired, RateLimited
from .lease import Lease
from .pool import PermitPool, Permits
from .wire import AllAsks, AllReply, Ask, ChargeReply, GoReply, LeaseReply, Refused, Terms

__version__ = "0.1.0"

__all__ = [
    "AllAsks",
    "AllReply",
    "Ask",
    "AsyncClient",
    "AsyncLease",
    "AsyncPermitPool",
    "BadReply",
    "ChargeReply",
    "Client",
    "ClientError",
    "DEFAULT_ENDPOINT",
    "DEFAULT_TIMEOUT",
    "GoReply",
    "Lease",
    "LeaseReply",
    "LockerError",
    "NoAnswer",
    "NotAcquired",
    "PermitPool",
    "Permits",
    "RateLimited",
    "Refused",
    "Terms",
]
