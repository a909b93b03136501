"""Limits under parents (org > team > user) against a real locker, through
the blocking and the asyncio clients: ``parents=`` on an ask, on an
:class:`Ask` of a batch and of ``all``, and on a refund; and, without a
locker, the bytes ``parents`` writes and the arguments refused before
sending."""

from __future__ import annotations

import asyncio
from typing import Dict

import msgpack
import pytest

from conftest import Daemon, served
from locker_client import Ask, AsyncClient, Client, LockerError, Refused, wire

#: org (5 an hour) > team (4) > user (6); api (10) has no parent. Hour-long
#: slots, so no slot ends in the middle of a test.
CONFIG = """
[[limits]]
name = "org"
max_requests = 5
in_seconds = 3600

[[limits]]
name = "team"
max_requests = 4
in_seconds = 3600
parent = "org"

[[limits]]
name = "user"
max_requests = 6
in_seconds = 3600
parent = "team"

[[limits]]
name = "api"
max_requests = 10
in_seconds = 3600
"""


locker, client = served(CONFIG)


def above(key: str, team: str = "t") -> Dict[str, str]:
    """The keys of team ``team`` and org ``o``, both of this test's own."""
    return {"team": f"{key}-{team}", "org": f"{key}-o"}


def org_left(client: Client, key: str) -> int:
    """What a peek says is left of this test's org (org has no parent)."""
    return client.ask("org", f"{key}-o", cost=0).remaining


def test_an_ask_with_parents_takes_its_cost_from_every_level(client: Client, key: str) -> None:
    reply = client.ask("user", key, cost=2, parents=above(key))
    # user 4, team 2, org 3: the reply is the level with the fewest left.
    assert (reply.ok, reply.limit, reply.remaining) == (True, 4, 2)
    assert org_left(client, key) == 3
    # user 5, another team 3, org 2: org counts every team under it.
    reply = client.ask("user", f"{key}-2", parents=above(key, "t2"))
    assert (reply.ok, reply.limit, reply.remaining) == (True, 5, 2)


def test_when_a_level_above_is_spent_no_level_is_charged(client: Client, key: str) -> None:
    assert client.ask("user", key, cost=4, parents=above(key)).ok
    sorry = client.ask("user", key, parents=above(key))
    assert (sorry.ok, sorry.limit, sorry.remaining) == (False, 4, 0), "team refused"
    assert 0 < sorry.retry_after <= 3600
    assert org_left(client, key) == 1, "the refused ask took nothing from org"
    assert client.ask("user", key, parents=above(key, "t2")).remaining == 0, "org's last permit: user kept 2"


def test_a_missing_key_is_refused_naming_it(client: Client, key: str) -> None:
    with pytest.raises(LockerError, match='limit "user" has parent "team": the ask names no key for "team"'):
        client.ask("user", key)
    with pytest.raises(LockerError, match='no key for "org"'):
        client.ask("user", key, parents={"team": "t"})
    with pytest.raises(LockerError, match='limit "api" has no parent'):
        client.ask("api", key, parents={"team": "t"})
    assert org_left(client, key) == 5


def test_a_refund_with_parents_gives_back_to_every_level(client: Client, key: str) -> None:
    assert client.ask("user", key, cost=3, parents=above(key)).ok
    back = client.refund("user", key, cost=2, parents=above(key))
    # user 5, team 3, org 4 after it.
    assert (back.granted, back.limit, back.remaining) == (2, 4, 3)
    assert org_left(client, key) == 4
    with pytest.raises(LockerError, match="no key for"):
        client.refund("user", key, cost=1)


def test_batches_and_all_carry_parents_in_each_ask(client: Client, key: str) -> None:
    replies = client.ask_many([Ask("user", key, cost=2, parents=above(key)), Ask("user", key), Ask("api", key)])
    assert replies[0].ok and replies[0].remaining == 2
    assert isinstance(replies[1], Refused) and "no key for" in replies[1].message
    assert replies[2].ok
    whole = client.all([Ask("user", key, cost=3, parents=above(key)), Ask("api", key)])
    assert not whole.ok, "team has 2 of the 3"
    assert [(r.ok, r.limit) for r in whole.replies] == [(False, 4), (True, 10)]
    assert client.ask("api", key, cost=0).remaining == 9, "api was charged nothing"


def test_the_asyncio_client_asks_and_refunds_with_parents(locker: Daemon, key: str) -> None:
    async def run() -> None:
        async with AsyncClient(locker.endpoint, timeout=5.0) as client:
            assert (await client.ask("user", key, cost=4, parents=above(key))).ok
            assert not (await client.ask("user", key, parents=above(key))).ok
            assert (await client.refund("user", key, cost=1, parents=above(key))).granted == 1
            assert (await client.ask("user", key, parents=above(key))).ok

    asyncio.run(run())


def test_parents_are_written_last_in_the_callers_order() -> None:
    parents = {"team": "t3", "org": "acme"}
    body = wire.ask_body("user", "u7", parents=parents)
    assert body == wire.encode(wire.go_request("user", "u7", 1, False, None, parents=parents))
    decoded = msgpack.unpackb(body)
    assert list(decoded) == ["op", "limit", "key", "cost", "parents"]
    assert list(decoded["parents"].items()) == [("team", "t3"), ("org", "acme")]
    assert "parents" not in msgpack.unpackb(wire.ask_body("user", "u7", parents={})), "an empty map is left out"


@pytest.mark.parametrize(
    "parents, error",
    [
        (["team", "t"], TypeError),
        ({"team": 3}, TypeError),
        ({f"l{i}": "k" for i in range(8)}, ValueError),
    ],
)
def test_bad_parents_are_refused_before_sending(parents: object, error: type) -> None:
    with pytest.raises(error, match="parents"):
        wire.ask_body("user", "u7", parents=parents)  # type: ignore[arg-type]
    with pytest.raises(error, match="parents"):
        wire.batch_body([Ask("user", "u7", parents=parents)])  # type: ignore[arg-type]
