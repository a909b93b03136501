"""A WSGI middleware that asks the locker before each request and answers
``429 Too Many Requests`` when the limit says sorry, with ``Retry-After``
(whole seconds, rounded up), ``RateLimit-Policy`` and ``RateLimit`` (and
the older ``X-RateLimit-*``); a request let through reaches the app, and
its response gets the same rate-limit fields.

    from wsgiref.simple_server import make_server
    from locker_client import Client
    from locker_client.wsgi import RateLimit

    app = RateLimit(my_app, Client(), "api", key_of=lambda environ: environ.get("REMOTE_ADDR"))
    make_server("127.0.0.1", 8000, app).serve_forever()

Any WSGI server runs it; nothing beyond the package is needed. The ASGI
twin is ``locker_client.asgi``; what the two share is in ``web``.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from . import web
from .client import Client
from .errors import RateLimited

Environ = Dict[str, Any]
StartResponse = Callable[..., Any]
App = Callable[[Environ, StartResponse], Iterable[bytes]]


class RateLimit:
    """Wraps ``app``: each request takes a permit of ``limit`` (one name,
    None for the default limit, or a list of names and
    :class:`~locker_client.Ask` asked together) for the key
    ``key_of(environ)`` (the limits' unkeyed count when it returns None),
    ``cost`` permits of each, waiting up to ``wait`` seconds for them, else
    answers 429. ``windows`` maps a limit's name to its ``in_seconds``,
    for the ``w`` of ``RateLimit-Policy`` (left out for a limit not in it:
    the locker's reply does not carry the window)."""

    def __init__(
        self,
        app: App,
        client: Client,
        limit: web.Limits = None,
        *,
        key_of: Callable[[Environ], Optional[str]] = lambda environ: None,
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

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        try:
            with self.client.permit(self.limit, self.key_of(environ), cost=self.cost, wait=self.wait) as reply:
                pass
        except RateLimited as sorry:
            fields, body = web.too_many(sorry, self.limit, self.windows)
            start_response("429 Too Many Requests", fields)
            return [body]
        extra = web.fields_of(reply, self.limit, self.windows)

        def start_with_fields(status: str, headers: List[Tuple[str, str]], *exc_info: Any) -> Any:
            return start_response(status, [*headers, *extra], *exc_info)

        return self.app(environ, start_with_fields)
