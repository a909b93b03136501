"""An ASGI middleware (Starlette, FastAPI, any ASGI 3 server) that asks
the locker before each HTTP request: a request refused is answered
``429 Too Many Requests`` with ``Retry-After``, ``RateLimit-Policy`` and
``RateLimit`` (and the older ``X-RateLimit-*``); a request let through
reaches the app, and its response gets the same rate-limit fields::

    from fastapi import FastAPI
    from locker_client import AsyncClient
    from locker_client.asgi import RateLimit

    app = FastAPI()
    app.add_middleware(
        RateLimit,
        client=AsyncClient("tcp://127.0.0.1:7777"),
        limit=["per-second", "per-day"],          # checked together: a 429 charges neither
        key_of=lambda scope: scope["client"][0],  # the caller's address
        windows={"per-second": 1, "per-day": 86400},
    )

Pure ASGI: it imports nothing of Starlette, and passes every other kind
of scope (lifespan, websocket) to the app untouched. It asks through an
:class:`~locker_client.AsyncClient`, which never blocks the event loop.
"""

from __future__ import annotations

import inspect
from typing import Any, Awaitable, Callable, Iterable, List, MutableMapping, Optional, Tuple, Union

from . import web
from .aio import AsyncClient
from .errors import RateLimited

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]
KeyOf = Callable[[Scope], Union[Optional[str], Awaitable[Optional[str]]]]


class RateLimit:
    """Wraps ``app``: each HTTP request takes a permit of ``limit`` (one
    name, None for the default limit, or a list of names and
    :class:`~locker_client.Ask` asked together) for the key
    ``key_of(scope)`` (a function or a coroutine function; the limits'
    unkeyed count when it returns None), ``cost`` permits of each, waiting
    up to ``wait`` seconds for them, else answers 429.

    ``windows`` maps a limit's name to its ``in_seconds``, for the
    ``w`` of ``RateLimit-Policy``: the locker's reply does not carry a
    limit's window, so a limit not in it has its policy without ``w``.
    A locker that does not answer raises :class:`~locker_client.NoAnswer`
    to the server, as any failing app does."""

    def __init__(
        self,
        app: App,
        client: AsyncClient,
        limit: web.Limits = None,
        *,
        key_of: KeyOf = lambda scope: None,
        windows: Optional[web.Windows] = None,
        cost: int = 1,
        wait: float = 0.0,
    ) -> None:
        self.app = app
        self.client = client
        self.limit = limit
        self.key_of = key_of
        self.windows = web.windows_of(windows)
        self.cost = cost
        self.wait = wait

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        key = self.key_of(scope)
        if inspect.isawaitable(key):
            key = await key
        try:
            async with self.client.permit(self.limit, key, cost=self.cost, wait=self.wait) as reply:
                pass
        except RateLimited as sorry:
            fields, body = web.too_many(sorry, self.limit, self.windows)
            await send({"type": "http.response.start", "status": 429, "headers": _raw(fields)})
            await send({"type": "http.response.body", "body": body})
            return
        extra = _raw(web.fields_of(reply, self.limit, self.windows))

        async def send_with_fields(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", ()), *extra]}
            await send(message)

        await self.app(scope, receive, send_with_fields)


def _raw(fields: Iterable[Tuple[str, str]]) -> List[Tuple[bytes, bytes]]:
    """Header fields as ASGI sends them: lower-case names, latin-1 bytes."""
    return [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in fields]
