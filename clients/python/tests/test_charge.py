"""Permits charged after the fact against a real locker, through the
blocking and the asyncio clients: ``charge`` past the limit and its
``debt``, the ask after it waiting it out, a permit settled with what was
used (charged when more, refunded when fewer), a semaphore refused; and,
without a locker, the bytes a charge writes and its checks."""

from __future__ import annotations

import asyncio

import msgpack
import pytest

from conftest import Daemon, served
from locker_client import AsyncClient, ChargeReply, Client, LockerError, wire

#: Hour-long slots and a bucket refilling 1 token an hour, so no count
#: comes back in the middle of a test.
CONFIG = """
[[limits]]
name = "tokens"
max_requests = 1000
in_seconds = 3600

[[limits]]
name = "bucket"
algorithm = "token-bucket"
max_requests = 1
in_seconds = 3600
burst = 10

[[limits]]
name = "db"
algorithm = "semaphore"
max_requests = 2
in_seconds = 10
"""


locker, client = served(CONFIG)


def test_a_charge_past_the_limit_is_taken_and_the_next_ask_waits_out_its_debt(client: Client, key: str) -> None:
    assert client.ask("tokens", key, cost=600).ok
    reply = client.charge("tokens", key, 700)
    assert isinstance(reply, ChargeReply)
    assert (reply.ok, reply.granted, reply.remaining, reply.debt) == (True, 700, 0, 300)
    sorry = client.ask("tokens", key)
    assert not sorry.ok and 0 < sorry.retry_after <= 3600, "the next slot has room beside the 300 owed"


def test_a_buckets_charge_leaves_its_tokens_below_zero(client: Client, key: str) -> None:
    reply = client.charge("bucket", key, 12)
    assert (reply.remaining, reply.debt) == (0, 2)
    assert not client.ask("bucket", key).ok


def test_a_permit_settled_with_what_was_used_charges_or_refunds_the_difference(client: Client, key: str) -> None:
    more = client.permit("tokens", key, cost=400)
    with more:
        charged = more.settle(1100)
    assert isinstance(charged, ChargeReply) and (charged.granted, charged.debt) == (700, 100)
    other = key + "-less"
    less = client.permit("tokens", other, cost=400)
    with less:
        refunded = less.settle(150)
    assert refunded is not None and (refunded.granted, refunded.remaining) == (250, 850)
    exact = client.permit("tokens", other, cost=10)
    with exact:
        assert exact.settle(10) is None, "nothing to settle"
    with pytest.raises(RuntimeError):
        exact.settle(20)


def test_a_semaphore_takes_no_charge(client: Client) -> None:
    with pytest.raises(LockerError, match="is a semaphore: a lease is not a rate"):
        client.charge("db", None, 1)


def test_the_asyncio_client_charges_and_settles(locker: Daemon, key: str) -> None:
    async def run() -> None:
        async with AsyncClient(locker.endpoint, timeout=5.0) as client:
            reply = await client.charge("tokens", key, 1200)
            assert (reply.ok, reply.debt) == (True, 200)
            permit = client.permit("bucket", key + "-a", cost=4)
            async with permit:
                settled = await permit.settle(15)
            assert settled is not None and (settled.granted, settled.debt) == (11, 5)

    asyncio.run(run())


def test_a_charges_bytes_and_its_checks() -> None:
    body = wire.encode(wire.charge_request("tokens", "u", 30, {"org": "o"}))
    assert msgpack.unpackb(body) == {"op": "charge", "limit": "tokens", "key": "u", "cost": 30, "parents": {"org": "o"}}
    with pytest.raises(ValueError):
        wire.charge_request("tokens", "u", 0)
    with pytest.raises(TypeError):
        wire.charge_request("tokens", "u", True)
