"""Limits checked together (``all``), refunds, resets and limits sent with
the ask (``terms``) against a real locker, through the blocking and the
asyncio clients and the web middlewares (issue 38).

These need a locker that speaks the ops: ``all``, ``refund`` and
``reset`` (and ``allow_reset`` in the config), and ``--runtime-limits``
for the limits sent with the ask."""

from __future__ import annotations

import asyncio
from typing import Iterator, List

import httpx
import pytest

from conftest import Daemon, serving, written_config
from locker_client import AllReply, Ask, AsyncClient, Client, LockerError, RateLimited, Terms
from locker_client.asgi import RateLimit as AsgiRateLimit
from locker_client.wsgi import RateLimit as WsgiRateLimit
from servers import Ready, header_key, hello, hello_wsgi, uvicorn_serving, wsgiref_serving

#: Hour- and day-long slots, so no slot ends in the middle of a test.
CONFIG = """
[[limits]]
name = "default"
max_requests = 1000000
in_seconds = 1.0

[[limits]]
name = "api"
max_requests = 5
in_seconds = 3600

[[limits]]
name = "day"
max_requests = 2
in_seconds = 86400

[[limits]]
name = "hour"
max_requests = 3
in_seconds = 3600

[[limits]]
name = "login"
max_requests = 3
in_seconds = 3600
allow_reset = true

[[limits]]
name = "db"
algorithm = "semaphore"
max_requests = 1
in_seconds = 5
"""


@pytest.fixture(scope="module")
def combined_config() -> Iterator[str]:
    with written_config(CONFIG) as path:
        yield path


@pytest.fixture(scope="module")
def locker(locker_bin: str, combined_config: str) -> Iterator[Daemon]:
    with serving(locker_bin, combined_config) as daemon:
        yield daemon


@pytest.fixture(scope="module")
def runtime_locker(locker_bin: str, combined_config: str) -> Iterator[Daemon]:
    """A locker that makes up to 4 limits sent with the ask."""
    daemon = Daemon(locker_bin, ["--config", combined_config, "--runtime-limits", "4"])
    yield daemon
    daemon.kill()


@pytest.fixture
def client(locker: Daemon) -> Iterator[Client]:
    with Client(locker.endpoint, timeout=5.0) as c:
        yield c


def left(client: Client, limit: str, key: str) -> int:
    """What a peek says is left of ``limit`` for ``key``."""
    return client.ask(limit, key, cost=0).remaining


# ---- all ---------------------------------------------------------------


def test_limits_checked_together_go_together(client: Client, key: str) -> None:
    reply = client.all([Ask("api", key), Ask("day", key, cost=2)])
    assert reply.ok and bool(reply) and reply.retry_after_ms == 0
    assert [(r.ok, r.limit, r.remaining) for r in reply.replies] == [(True, 5, 4), (True, 2, 0)]
    assert reply.names == ("api", "day")
    assert (left(client, "api", key), left(client, "day", key)) == (4, 0)


def test_when_the_second_is_full_the_first_keeps_its_permits(client: Client, key: str) -> None:
    assert client.ask("day", key, cost=2).ok
    reply = client.all([Ask("api", key), Ask("day", key)])
    assert not reply.ok
    assert reply.replies[0].ok and not reply.replies[1].ok, "each part says what it has: the second refused"
    assert reply.retry_after_ms == max(r.retry_after_ms for r in reply.replies) > 0
    assert reply.tightest == 1
    assert left(client, "api", key) == 5, "the refused whole charged the first part nothing"
    # Asked alone, the first limit has every permit.
    assert [client.ask("api", key).ok for _ in range(6)] == [True] * 5 + [False]


def test_a_semaphore_among_the_parts_is_refused_by_name(client: Client, key: str) -> None:
    with pytest.raises(LockerError, match="db"):
        client.all([Ask("api", key), Ask("db")])
    assert left(client, "api", key) == 5


def test_a_permit_over_several_limits_raises_rate_limited_naming_the_full_one(client: Client, key: str) -> None:
    for _ in range(2):
        with client.permit(["api", "day"], key=key) as reply:
            assert isinstance(reply, AllReply) and reply.ok
    with pytest.raises(RateLimited) as raised:
        with client.permit(["api", "day"], key=key):
            pytest.fail("the day limit is full")
    assert (raised.value.limit, raised.value.key) == ("day", key)
    assert 0 < raised.value.retry_after <= 86400
    assert isinstance(raised.value.reply, AllReply) and not raised.value.reply.ok
    assert left(client, "api", key) == 3, "only the two permits that went were charged"

    assert client.ask("hour", key).ok

    @client.limited(["api", Ask("hour", key)], key=key)
    def call() -> str:
        return "called"

    assert [call() for _ in range(2)] == ["called"] * 2
    with pytest.raises(RateLimited, match="hour"):
        call()
    assert left(client, "api", key) == 1


def test_limits_checked_together_with_a_hold_go_when_all_can(client: Client, key: str) -> None:
    reply = client.all([Ask("api", key), Ask("hour", key)], hold=0.05)
    assert reply.ok


# ---- refund and reset -------------------------------------------------


def test_a_refund_of_two_after_a_go_of_five_lets_exactly_two_more_go(client: Client, key: str) -> None:
    assert client.ask("api", key, cost=5).ok
    assert not client.ask("api", key).ok
    refunded = client.refund("api", key, cost=2)
    assert (refunded.granted, refunded.remaining, refunded.limit) == (2, 2, 5), "granted: the permits that went back"
    assert [client.ask("api", key).ok for _ in range(3)] == [True, True, False]


def test_a_refund_never_creates_capacity(client: Client, key: str) -> None:
    assert client.ask("api", key).ok
    refunded = client.refund("api", key, cost=10)
    assert refunded.granted == 1 and refunded.remaining == 5, "only the one it took went back"
    assert [client.ask("api", key).ok for _ in range(6)] == [True] * 5 + [False]


def test_a_reset_clears_one_key_only_where_the_limit_allows_it(client: Client, key: str) -> None:
    for _ in range(3):
        assert client.ask("login", key).ok
    assert not client.ask("login", key).ok
    assert client.ask("login", key + "-other").ok
    assert client.reset("login", key).remaining == 3
    assert left(client, "login", key) == 3
    assert left(client, "login", key + "-other") == 2, "another key keeps its count"
    assert client.ask("api", key).ok
    with pytest.raises(LockerError, match="allow_reset"):
        client.reset("api", key)
    assert left(client, "api", key) == 4


# ---- limits sent with the ask -----------------------------------------


def test_a_limit_sent_with_the_ask_counts_exactly_like_a_configured_one(runtime_locker: Daemon, key: str) -> None:
    terms = Terms(3, 3600)
    with Client(runtime_locker.endpoint, timeout=5.0) as client:
        sent = [client.ask("tenant-7", key, terms=terms) for _ in range(4)]
        configured = [client.ask("hour", key) for _ in range(4)]
        assert [(r.ok, r.limit, r.remaining) for r in sent] == [(r.ok, r.limit, r.remaining) for r in configured]
        assert [r.ok for r in sent] == [True, True, True, False]
        assert 0 < sent[3].retry_after <= 3600


def test_a_part_of_limits_checked_together_may_carry_its_limits_terms(runtime_locker: Daemon, key: str) -> None:
    bucket = Terms(1, 60.0, algorithm="token-bucket", burst=2)  # a token a minute: no refill mid-test
    with Client(runtime_locker.endpoint, timeout=5.0) as client:
        replies = [client.all([Ask("tenant-8", key, terms=bucket), Ask("api", key)]) for _ in range(3)]
        assert [r.ok for r in replies] == [True, True, False]
        assert replies[0].replies[0].limit == 2, "the bucket's burst, from the terms"
        assert client.ask("api", key, cost=0).remaining == 3, "the refused whole charged api nothing"


def test_a_limit_sent_with_the_ask_is_refused_without_runtime_limits(client: Client, key: str) -> None:
    with pytest.raises(LockerError, match="(?i)runtime"):
        client.ask("tenant-9", key, terms=Terms(3, 3600))


# ---- the asyncio client ------------------------------------------------


def test_the_asyncio_client_checks_together_refunds_and_resets(locker: Daemon, key: str) -> None:
    async def run() -> None:
        async with AsyncClient(locker.endpoint, timeout=5.0) as client:
            assert (await client.all([Ask("api", key), Ask("day", key, cost=2)])).ok
            whole = await client.all([Ask("api", key), Ask("day", key)])
            assert not whole.ok and whole.replies[0].ok
            assert (await client.ask("api", key, cost=0)).remaining == 4
            assert (await client.refund("api", key, cost=1)).granted == 1
            assert (await client.ask("api", key, cost=0)).remaining == 5
            with pytest.raises(RateLimited) as raised:
                async with client.permit(["api", "day"], key=key):
                    pytest.fail("the day limit is full")
            assert raised.value.limit == "day"
            for _ in range(3):
                assert (await client.ask("login", key)).ok
            assert (await client.reset("login", key)).remaining == 3
            assert (await client.ask("login", key, cost=0)).remaining == 3

    asyncio.run(run())


# ---- the web middlewares over several limits --------------------------


def check_two_limits(responses: List[httpx.Response]) -> None:
    """``hour`` (3) and ``day`` (2) together: two pass, the third is refused
    by ``day`` and charges ``hour`` nothing."""
    assert [r.status_code for r in responses] == [200, 200, 429]
    assert responses[0].headers["ratelimit-policy"] == '"hour";q=3;w=3600, "day";q=2;w=86400'
    assert responses[1].headers["ratelimit"].startswith('"hour";r=1;t=')
    assert ', "day";r=0;t=' in responses[1].headers["ratelimit"]
    refused = responses[2]
    assert 1 <= int(refused.headers["retry-after"]) <= 86400
    assert refused.headers["x-ratelimit-limit"] == "2", "the X- fields of the refusing limit"
    assert refused.headers["ratelimit-policy"] == responses[0].headers["ratelimit-policy"]


def three_requests(url: str, key: str) -> List[httpx.Response]:
    with httpx.Client(base_url=url, timeout=10.0) as http:
        return [http.get("/", headers={"x-user": key}) for _ in range(3)]


def test_the_asgi_middleware_checks_several_limits_together(locker: Daemon, client: Client, key: str) -> None:
    aio = AsyncClient(locker.endpoint, timeout=5.0)
    inner = Ready(hello)
    windows = {"hour": 3600, "day": 86400}
    app = AsgiRateLimit(inner, aio, ["hour", "day"], key_of=header_key(b"x-user"), windows=windows)
    try:
        with uvicorn_serving(app, inner.started) as url:
            responses = three_requests(url, key)
    finally:
        aio.close()
    check_two_limits(responses)
    assert left(client, "hour", key) == 1


def test_the_wsgi_middleware_checks_several_limits_together(client: Client, key: str) -> None:
    windows = {"hour": 3600, "day": 86400}
    app = WsgiRateLimit(hello_wsgi, client, ["hour", "day"], key_of=lambda environ: environ["HTTP_X_USER"], windows=windows)
    with wsgiref_serving(app) as url:
        responses = three_requests(url, key)
    check_two_limits(responses)
    assert left(client, "hour", key) == 1
