"""What the ASGI and WSGI middlewares share: the limits a request asks,
the header fields a passed response gets and the 429 a refused one is
answered with. Pure: no server, no socket; the middlewares add the
serving.
"""

from __future__ import annotations

from typing import Dict, List, Mapping, Optional, Tuple, Union

from . import calls, headers
from .errors import RateLimited
from .wire import AllReply, GoReply

#: What a middleware asks per request: one limit's name (None: the
#: default limit), or several limits at once (names, asked for the
#: request's key, or :class:`~locker_client.Ask`, asked as they are).
Limits = Union[None, str, calls.Limits]

#: A limit's name and its window (``in_seconds``), for the policy's ``w``.
Windows = Mapping[str, float]

#: A response's header fields, in order.
Fields = List[Tuple[str, str]]


def fields_of(reply: Union[GoReply, AllReply], limit: Limits, windows: Windows) -> Fields:
    """The rate-limit header fields of the locker's answer to ``limit``;
    ``windows`` gives ``w`` to the limits it names (a go reply does not
    carry its window)."""
    if isinstance(reply, AllReply):
        return list(reply.headers(windows).items())
    name = limit if isinstance(limit, str) else None
    return list(reply.headers(name, windows.get(name or headers.DEFAULT_NAME)).items())


def too_many(sorry: RateLimited, limit: Limits, windows: Windows) -> Tuple[Fields, bytes]:
    """The header fields and body of the 429 that answers a refusal:
    ``Retry-After`` (whole seconds, rounded up, at least 1),
    ``RateLimit-Policy``, ``RateLimit`` and the ``X-RateLimit-*`` fields."""
    reply = sorry.reply
    if isinstance(reply, (GoReply, AllReply)):
        fields: Dict[str, str] = dict(fields_of(reply, limit, windows))
    else:
        fields = {"Retry-After": str(max(1, headers.whole_seconds(int(sorry.retry_after * 1000))))}
    body = f"rate limited: retry after {fields['Retry-After']} s\n".encode()
    head = [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body)))]
    return head + list(fields.items()), body


def windows_of(windows: Optional[Windows]) -> Windows:
    """A middleware's windows, checked once: names to positive seconds."""
    known = dict(windows or {})
    for name, seconds in known.items():
        if not isinstance(name, str):
            raise TypeError(f"windows: a limit's name must be a str, not {type(name).__name__}")
        headers.window_seconds(seconds)
    return known
