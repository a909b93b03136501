"""The API in seconds, exceptions on sorry, permits, the decorator, the
default endpoint and a clear error for one without a scheme, no silent
fallback for a misspelt limit, and a WSGI middleware answering 429."""

from __future__ import annotations

import asyncio
import time
from typing import Any, List, Tuple

import pytest

from conftest import Daemon
from locker_client import DEFAULT_ENDPOINT, AsyncClient, Client, LockerError, RateLimited
from locker_client.wsgi import RateLimit


@pytest.fixture
def client(locker: Daemon):
    with Client(locker.endpoint, timeout=5.0) as c:
        yield c


def test_replies_say_their_times_in_seconds(client: Client, key: str) -> None:
    for _ in range(5):
        assert client.ask("api", key).ok
    sorry = client.ask("api", key)
    assert not sorry.ok and sorry.retry_after == sorry.retry_after_ms / 1000 and sorry.retry_after > 0
    assert sorry.reset_after == sorry.reset_after_ms / 1000 and sorry.wait is None
    assert client.ask("smooth", key).ok, "the bucket's one token"
    reserved = client.ask("smooth", key, max_wait=1.0)
    assert reserved.ok and reserved.wait is not None and 0 < reserved.wait <= 0.2


def test_a_time_is_given_once_in_seconds_or_in_ms(client: Client) -> None:
    with pytest.raises(ValueError):
        client.ask("api", max_wait=1.0, max_wait_ms=1000)
    with pytest.raises(ValueError):
        client.ask("api", hold=-1.0)
    with pytest.raises(TypeError):
        client.ask("api", hold="1s")  # type: ignore[arg-type]


def test_a_permit_raises_rate_limited_with_retry_after_in_seconds(client: Client, key: str) -> None:
    for _ in range(5):
        with client.permit("api", key=key):
            pass
    with pytest.raises(RateLimited) as raised:
        with client.permit("api", key=key, wait=1.0):
            pytest.fail("the block runs only on go")
    assert isinstance(raised.value, LockerError), "a RateLimited is a LockerError"
    assert 1.0 < raised.value.retry_after <= 3600, "the hour-long slot ends beyond the wait"
    assert (raised.value.limit, raised.value.key) == ("api", key)


def test_a_permit_waits_for_the_limit_within_its_wait(client: Client, key: str) -> None:
    assert client.ask("smooth", key).ok, "the bucket's one token"
    start = time.monotonic()
    with client.permit("smooth", key=key, wait=1.0) as reply:
        waited = time.monotonic() - start
    assert reply.ok and 0.1 < waited < 1.0, waited


def test_the_decorator_limits_plain_and_coroutine_functions(client: Client, locker: Daemon, key: str) -> None:
    @client.limited("api", key=key)
    def call(x: int) -> int:
        return x * 2

    @client.limited("api", key=key)
    async def call_async(x: int) -> int:
        return x * 3

    assert [call(1), call(2), call(3)] == [2, 4, 6]
    assert asyncio.run(call_async(1)) == 3
    assert call.__name__ == "call", "functools.wraps keeps the name"
    assert asyncio.run(call_async(2)) == 6, "the fifth permit"
    with pytest.raises(RateLimited):
        call(4)

    async def with_the_async_client() -> Tuple[int, Any]:
        async with AsyncClient(locker.endpoint, timeout=5.0) as ac:
            other = key + "-async"

            @ac.limited("api", key=other)
            async def one() -> int:
                return 1

            got = sum([await one() for _ in range(5)])
            try:
                await one()
            except RateLimited as e:
                return got, e
            return got, None

    got, refused = asyncio.run(with_the_async_client())
    assert got == 5 and isinstance(refused, RateLimited)


def test_the_async_decorator_refuses_a_plain_function(locker: Daemon) -> None:
    ac = AsyncClient(locker.endpoint)
    with pytest.raises(TypeError):
        ac.limited("api")(lambda: None)
    ac.close()


def test_an_async_permit_waits_and_raises_as_the_blocking_one(locker: Daemon, key: str) -> None:
    async def run() -> Tuple[float, Any]:
        async with AsyncClient(locker.endpoint, timeout=5.0) as ac:
            assert (await ac.ask("smooth", key)).ok, "the bucket's one token"
            start = time.monotonic()
            async with ac.permit("smooth", key=key, wait=1.0):
                waited = time.monotonic() - start
            for _ in range(5):
                assert (await ac.ask("api", key)).ok
            try:
                async with ac.permit("api", key=key, wait=0.5):
                    pass
            except RateLimited as e:
                return waited, e
            return waited, None

    waited, refused = asyncio.run(run())
    assert 0.1 < waited < 1.0, waited
    assert isinstance(refused, RateLimited) and refused.retry_after > 0.5


def test_the_default_endpoint_and_one_without_a_scheme() -> None:
    assert DEFAULT_ENDPOINT == "tcp://127.0.0.1:7777"
    with Client() as c:
        assert c.endpoints == [DEFAULT_ENDPOINT]
    with pytest.raises(ValueError, match="tcp://localhost:7777"):
        Client("localhost:7777")


def test_a_misspelt_limit_is_an_error_not_the_default_limit(client: Client) -> None:
    assert client.go("api")
    with pytest.raises(LockerError, match="nope"):
        client.go("nope")


def test_the_wsgi_middleware_answers_429_with_retry_after(client: Client, key: str) -> None:
    def app(environ: dict, start_response: Any) -> List[bytes]:
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"hello\n"]

    limited = RateLimit(app, client, "hour", key_of=lambda environ: environ["REMOTE_ADDR"])
    answers = []
    for _ in range(4):
        seen: dict = {}

        def start_response(status: str, headers: List[Tuple[str, str]], seen: dict = seen) -> None:
            seen.update(status=status, headers=dict(headers))

        body = b"".join(limited({"REMOTE_ADDR": key}, start_response))
        answers.append((seen["status"], seen["headers"].get("Retry-After"), body))
    assert [a[0] for a in answers] == ["200 OK"] * 3 + ["429 Too Many Requests"]
    retry_after = int(answers[3][1])
    assert 1 <= retry_after <= 3600, "whole seconds until the hour-long slot ends"
    assert answers[0][2] == b"hello\n"


def test_a_batch_ask_and_a_lease_reply_speak_seconds_too(client: Client, key: str) -> None:
    from locker_client import Ask

    assert Ask("smooth", key, max_wait=0.25).max_wait_ms == 250
    assert Ask("smooth", key, max_wait_ms=250) == Ask("smooth", key, max_wait_ms=250)
    with pytest.raises(ValueError):
        Ask("smooth", key, max_wait=1.0, max_wait_ms=1000)
    replies = client.ask_many([Ask("smooth", key), Ask("smooth", key, max_wait=1.0)])
    assert replies[1].ok and replies[1].wait is not None and 0 < replies[1].wait <= 0.2
    held = client.acquire_lease("db", ttl=30.0)
    assert held.ok and 29.0 < held.expires_in <= 30.0 and held.expires_in == held.expires_in_ms / 1000
    assert client.release("db", held.lease).ok
