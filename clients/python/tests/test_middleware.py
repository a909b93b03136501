"""The ASGI middleware served by a real uvicorn (pure ASGI and mounted in
Starlette) and the WSGI middleware served by wsgiref, each asked over
HTTP by httpx, against a real locker: three requests of the ``hour``
limit (3 per hour) pass with the rate-limit fields, the fourth is
answered 429 with ``Retry-After``, ``RateLimit-Policy`` and ``RateLimit``."""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
from typing import Any, AsyncIterator, List

import httpx
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from conftest import Daemon
from locker_client import AsyncClient, Client
from locker_client.asgi import RateLimit as AsgiRateLimit
from locker_client.wsgi import RateLimit as WsgiRateLimit
from servers import Ready, header_key, hello, hello_wsgi, uvicorn_serving, wsgiref_serving

STATE = re.compile(r'^"hour";r=(\d+);t=(\d+)$')


def four_requests(url: str, key: str) -> List[httpx.Response]:
    with httpx.Client(base_url=url, timeout=10.0) as http:
        return [http.get("/", headers={"x-user": key}) for _ in range(4)]


def check_three_pass_and_the_fourth_is_refused(responses: List[httpx.Response], policy: str) -> None:
    assert [r.status_code for r in responses] == [200, 200, 200, 429]
    for left, passed in zip([2, 1, 0], responses):
        assert passed.text == "hello\n" and passed.headers["x-app"] == "hello", "the app's own response, kept"
        assert passed.headers["ratelimit-policy"] == policy
        state = STATE.match(passed.headers["ratelimit"])
        assert state is not None, passed.headers["ratelimit"]
        assert int(state.group(1)) == left and 1 <= int(state.group(2)) <= 3600
        assert passed.headers["x-ratelimit-limit"] == "3"
        assert passed.headers["x-ratelimit-remaining"] == str(left)
        assert "retry-after" not in passed.headers
    refused = responses[3]
    retry_after = int(refused.headers["retry-after"])
    assert 1 <= retry_after <= 3600, "whole seconds until the hour-long slot ends"
    assert refused.headers["ratelimit-policy"] == policy
    state = STATE.match(refused.headers["ratelimit"])
    assert state is not None and state.group(1) == "0" and int(state.group(2)) == retry_after
    assert refused.headers["x-ratelimit-remaining"] == "0"
    assert refused.text == f"rate limited: retry after {retry_after} s\n"


def check_the_locker_counted_them(locker: Daemon, key: str) -> None:
    with Client(locker.endpoint, timeout=5.0) as client:
        assert client.ask("hour", key, cost=0).remaining == 0
        assert client.ask("hour", key + "-other").ok, "another key has its own count"


def test_the_asgi_middleware_served_by_uvicorn_answers_429_with_the_rate_limit_fields(locker: Daemon, key: str) -> None:
    client = AsyncClient(locker.endpoint, timeout=5.0)
    inner = Ready(hello)  # inside the middleware: lifespan must pass through it for the server to start
    app = AsgiRateLimit(inner, client, "hour", key_of=header_key(b"x-user"), windows={"hour": 3600})
    try:
        with uvicorn_serving(app, inner.started) as url:
            responses = four_requests(url, key)
    finally:
        client.close()
    check_three_pass_and_the_fourth_is_refused(responses, '"hour";q=3;w=3600')
    check_the_locker_counted_them(locker, key)


def test_the_asgi_middleware_mounts_in_starlette_with_a_key_from_a_coroutine(locker: Daemon, key: str) -> None:
    client = AsyncClient(locker.endpoint, timeout=5.0)
    ready = Ready(hello)

    async def key_of(scope: Any) -> str:
        return str(dict(scope["headers"])[b"x-user"].decode())

    async def index(request: Request) -> PlainTextResponse:
        return PlainTextResponse("hello\n", headers={"x-app": "hello"})

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        ready.started.set()
        yield

    app = Starlette(
        routes=[Route("/", index)],
        middleware=[Middleware(AsgiRateLimit, client=client, limit="hour", key_of=key_of)],
        lifespan=lifespan,
    )
    try:
        with uvicorn_serving(app, ready.started) as url:
            responses = four_requests(url, key)
    finally:
        client.close()
    # No window given: the policy leaves w out, as the draft allows.
    check_three_pass_and_the_fourth_is_refused(responses, '"hour";q=3')
    check_the_locker_counted_them(locker, key)


def test_the_wsgi_middleware_served_over_http_answers_with_the_same_fields(locker: Daemon, key: str) -> None:
    with Client(locker.endpoint, timeout=5.0) as client:
        app = WsgiRateLimit(
            hello_wsgi, client, "hour", key_of=lambda environ: environ["HTTP_X_USER"], windows={"hour": 3600}
        )
        with wsgiref_serving(app) as url:
            responses = four_requests(url, key)
    check_three_pass_and_the_fourth_is_refused(responses, '"hour";q=3;w=3600')
    check_the_locker_counted_them(locker, key)


def test_the_asgi_middleware_imports_without_starlette() -> None:
    """Pure ASGI: importing it (and the package) loads no web framework,
    so Starlette and FastAPI stay optional."""
    code = (
        "import sys\n"
        "for name in ('starlette', 'fastapi', 'uvicorn', 'httpx'): sys.modules[name] = None\n"
        "import locker_client.asgi, locker_client.wsgi\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('starlette', 'fastapi') and sys.modules[m]))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
