"""Dry runs (shadow) against a real locker, through the blocking and the
asyncio clients: ``shadow=`` on an ask, on ``acquire``, on an :class:`Ask`
of a batch and of ``all``, a limit whose config says ``shadow = true``,
and the replies' ``shadow_sorry``; and, without a locker, the bytes
``shadow`` writes and the arguments refused before sending."""

from __future__ import annotations

import asyncio

import msgpack
import pytest

from conftest import Daemon, served
from locker_client import Ask, AsyncClient, Client, wire

#: api (2 an hour) and new-api (2 an hour, in shadow). Hour-long slots, so
#: no slot ends in the middle of a test.
CONFIG = """
[[limits]]
name = "api"
max_requests = 2
in_seconds = 3600

[[limits]]
name = "new-api"
max_requests = 2
in_seconds = 3600
shadow = true
"""


locker, client = served(CONFIG)


def test_an_ask_in_shadow_goes_where_it_would_be_sorry_and_takes_nothing(client: Client, key: str) -> None:
    assert client.ask("api", key, cost=2).ok
    reply = client.ask("api", key, shadow=True)
    assert (reply.ok, reply.shadow_sorry, reply.remaining) == (True, True, 0)
    assert 0 < reply.retry_after <= 3600, "the sorry's figures"
    assert not client.ask("api", key).ok, "a usual ask is refused: the dry run took nothing"
    assert not client.ask("api", key).shadow_sorry
    held = client.acquire("api", key, max_wait=60, shadow=True)
    assert (held.ok, held.shadow_sorry, held.wait_ms) == (True, True, 0), "never reserved"


def test_a_limit_in_shadow_never_refuses_and_stats_count_it(client: Client, key: str) -> None:
    replies = [client.ask("new-api", key) for _ in range(3)]
    assert [(r.ok, r.shadow_sorry) for r in replies] == [(True, False), (True, False), (True, True)]
    assert client.ask("new-api", key, cost=0).remaining == 0
    stats = next(l for l in client.stats()["limits"] if l["name"] == "new-api")
    assert stats["shadow_sorry"] >= 1 and stats["sorry"] >= stats["shadow_sorry"]


def test_batches_and_all_carry_shadow_in_each_ask(client: Client, key: str) -> None:
    replies = client.ask_many([Ask("api", key, cost=2), Ask("api", key, shadow=True), Ask("api", key)])
    assert [(r.ok, r.shadow_sorry) for r in replies] == [(True, False), (True, True), (False, False)]
    other = f"{key}-2"
    whole = client.all([Ask("api", other), Ask("api", key, shadow=True)])
    assert (whole.ok, whole.shadow_sorry) == (True, True), "the part in shadow does not refuse the whole"
    assert [(r.ok, r.shadow_sorry) for r in whole.replies] == [(True, False), (True, True)]
    assert client.ask("api", other, cost=0).remaining == 1, "the other part was charged"
    refused = client.all([Ask("api", key), Ask("api", other, shadow=True)])
    assert (refused.ok, refused.shadow_sorry) == (False, False), "a part not in shadow still refuses"


def test_the_asyncio_client_asks_in_shadow(locker: Daemon, key: str) -> None:
    async def run() -> None:
        async with AsyncClient(locker.endpoint, timeout=5.0) as client:
            assert (await client.ask("api", key, cost=2)).ok
            reply = await client.ask("api", key, shadow=True)
            assert reply.ok and reply.shadow_sorry
            held = await client.acquire("api", key, max_wait=60, shadow=True)
            assert held.ok and held.shadow_sorry and held.wait_ms == 0
            assert not (await client.ask("api", key)).ok

    asyncio.run(run())


def test_shadow_is_written_last_and_only_when_true() -> None:
    body = wire.ask_body("api", "u7", shadow=True)
    assert body == wire.encode(wire.go_request("api", "u7", 1, False, None, shadow=True))
    assert list(msgpack.unpackb(body)) == ["op", "limit", "key", "cost", "shadow"]
    assert msgpack.unpackb(body)["shadow"] is True
    assert wire.ask_body("api", "u7", shadow=False) == wire.ask_body("api", "u7"), "the common ask's bytes"
    batch, _ = wire.batch_body([Ask("api", "u7", parents={"team": "t"}, shadow=True)])
    assert list(msgpack.unpackb(batch)["asks"][0]) == ["limit", "key", "cost", "parents", "shadow"]


def test_a_shadow_that_is_not_a_bool_is_refused_before_sending() -> None:
    with pytest.raises(TypeError, match="shadow"):
        wire.ask_body("api", "u7", shadow=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="shadow"):
        wire.batch_body([Ask("api", "u7", shadow="yes")])  # type: ignore[arg-type]
