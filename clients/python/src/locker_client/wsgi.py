"""A WSGI middleware that asks the locker before each request and answers
``429 Too Many Requests`` with a ``Retry-After`` header (whole seconds,
rounded up) when the limit says sorry.

    from wsgiref.simple_server import make_server
    from locker_client import Client
    from locker_client.wsgi import RateLimit

    app = RateLimit(my_app, Client(), "api", key_of=lambda environ: environ.get("REMOTE_ADDR"))
    make_server("127.0.0.1", 8000, app).serve_forever()

Any WSGI server runs it; nothing beyond the package is needed.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Iterable, Optional

from .client import Client
from .errors import RateLimited

Environ = dict
StartResponse = Callable[..., Any]
App = Callable[[Environ, StartResponse], Iterable[bytes]]


class RateLimit:
    """Wraps ``app``: each request takes a permit of ``limit`` for the key
    ``key_of(environ)`` (the limit's unkeyed count when it returns None),
    waiting up to ``wait`` seconds for it, else answers 429."""

    def __init__(
        self,
        app: App,
        client: Client,
        limit: Optional[str] = None,
        *,
        key_of: Callable[[Environ], Optional[str]] = lambda environ: None,
        wait: float = 0.0,
    ) -> None:
        self.app = app
        self.client = client
        self.limit = limit
        self.key_of = key_of
        self.wait = wait

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        try:
            with self.client.permit(self.limit, self.key_of(environ), wait=self.wait):
                return self.app(environ, start_response)
        except RateLimited as sorry:
            retry_after = str(max(1, math.ceil(sorry.retry_after)))
            headers = [("Content-Type", "text/plain; charset=utf-8"), ("Retry-After", retry_after)]
            start_response("429 Too Many Requests", headers)
            return [f"rate limited: retry after {retry_after} s\n".encode()]
