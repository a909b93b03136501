"""Web servers for the middleware tests: a real uvicorn (ASGI) and
wsgiref (WSGI), each in a thread on a socket bound to 127.0.0.1 port 0
before the server starts (so a request made at once waits in the
listen queue, never on a refused connection), and asked over HTTP.

uvicorn is waited for on its lifespan startup, an event the app itself
sets, never by sleeping; both are stopped at the end of the block."""

from __future__ import annotations

import socket
import threading
from contextlib import contextmanager
from typing import Any, Callable, Dict, Iterator, List, Optional
from wsgiref.simple_server import WSGIRequestHandler, make_server

import uvicorn

from locker_client.asgi import App, Receive, Scope, Send

#: How long a server may take to start or stop.
DEADLINE = 10.0


class Ready:
    """An ASGI app that answers the lifespan protocol itself and sets
    ``started`` once the server runs it, passing every other scope to
    ``app``: put it inside a middleware to see that the middleware lets
    lifespan through."""

    def __init__(self, app: App) -> None:
        self.app = app
        self.started = threading.Event()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
                self.started.set()
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return


async def hello(scope: Scope, receive: Receive, send: Send) -> None:
    """The plainest ASGI app: 200 and a greeting, with a header of its own."""
    assert scope["type"] == "http"
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain"), (b"x-app", b"hello")]})
    await send({"type": "http.response.body", "body": b"hello\n"})


def hello_wsgi(environ: Dict[str, Any], start_response: Callable[..., Any]) -> List[bytes]:
    start_response("200 OK", [("Content-Type", "text/plain"), ("X-App", "hello")])
    return [b"hello\n"]


def header_key(name: bytes) -> Callable[[Scope], Optional[str]]:
    """An ASGI ``key_of``: the value of request header ``name``."""

    def key_of(scope: Scope) -> Optional[str]:
        for field, value in scope["headers"]:
            if field == name:
                return str(value.decode())
        return None

    return key_of


def _bound() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    return sock


@contextmanager
def uvicorn_serving(app: Any, started: threading.Event) -> Iterator[str]:
    """``app`` served by uvicorn; yields its base URL once ``started`` is set
    (the app's lifespan startup, run by the server before it serves)."""
    sock = _bound()
    server = uvicorn.Server(uvicorn.Config(app, lifespan="on", log_level="warning", access_log=False))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        if not started.wait(DEADLINE):
            raise RuntimeError(f"uvicorn did not start within {DEADLINE} s")
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(DEADLINE)
        sock.close()


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def wsgiref_serving(app: Any) -> Iterator[str]:
    """``app`` served by wsgiref, whose server is bound and listening once
    made; yields its base URL."""
    server = make_server("127.0.0.1", 0, app, handler_class=_Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(DEADLINE)
        server.server_close()
