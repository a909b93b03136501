"""Batched asks against a real locker: a batch answers as the same asks
sent one at a time would, in order; an entry the locker refuses leaves the
others answered; an empty batch is an empty list; more than 1000 asks are
refused before sending (and by the locker itself); the asyncio flavour."""

from __future__ import annotations

import asyncio
from typing import List, Optional, Tuple

import pytest
import zmq

from conftest import Daemon, limit_stats
from locker_client import AllReply, Ask, AsyncClient, Client, GoReply, LockerError, NoAnswer, Refused, wire


@pytest.fixture
def client(locker: Daemon):
    with Client(locker.endpoint, timeout=5.0) as c:
        yield c


def gist(reply: wire.BatchReply) -> Tuple[bool, int, Optional[int]]:
    """What a reply says regardless of when it was made: ok, remaining, granted."""
    assert isinstance(reply, GoReply), reply
    return reply.ok, reply.remaining, reply.granted


def oks(replies: List[wire.BatchReply]) -> List[bool]:
    return [r.ok for r in replies]


def test_a_batch_of_one_key_goes_up_to_the_limit_then_sorry(client: Client, key: str) -> None:
    # "hour": 3 per hour-long slot.
    replies = client.ask_many([Ask("hour", key)] * 5)
    assert oks(replies) == [True, True, True, False, False]
    assert [r.remaining for r in replies] == [2, 1, 0, 0, 0]
    assert all(isinstance(r, GoReply) and r.limit == 3 for r in replies)
    assert replies[3].retry_after_ms > 0 and replies[0].retry_after_ms == 0
    assert not client.ask("hour", key).ok, "the batch's asks were counted"


def test_a_mixed_batch_answers_as_the_same_asks_one_at_a_time(client: Client, key: str) -> None:
    def asks(k: str) -> List[Ask]:
        return [
            Ask("api", k, cost=2),
            Ask("hour", k),
            Ask("api", k + "-b", cost=5),
            Ask("api", k, cost=0),
            Ask("api", k, cost=4),
            Ask("api", k, cost=10, up_to=True),
            Ask("hour", k, cost=3),
            Ask("api", k + "-b"),
            Ask("hour", k, cost=2, up_to=True),
            Ask("api", k, cost=0),
        ]

    batched = client.ask_many(asks(key))
    one_by_one = [client.ask(a.limit, a.key, cost=a.cost, up_to=a.up_to) for a in asks(key + "-single")]
    assert [gist(r) for r in batched] == [gist(r) for r in one_by_one]
    assert [gist(r) for r in batched] == [
        (True, 3, None),
        (True, 2, None),
        (True, 0, None),
        (True, 3, None),  # a peek takes nothing
        (False, 3, None),  # all or nothing
        (True, 0, 3),
        (False, 2, None),
        (False, 0, None),
        (True, 0, 2),
        (False, 0, None),
    ]


def test_stats_count_each_entry_of_a_batch(client: Client, key: str) -> None:
    before = client.stats()
    replies = client.ask_many([Ask("hour", key)] * 5 + [Ask("api", key, cost=2)])
    after = client.stats()
    assert oks(replies) == [True] * 3 + [False] * 2 + [True]
    hour_before, hour_after = limit_stats(before, "hour"), limit_stats(after, "hour")
    assert hour_after["requests"] - hour_before["requests"] == 5
    assert hour_after["go"] - hour_before["go"] == 3
    assert hour_after["sorry"] - hour_before["sorry"] == 2
    api_before, api_after = limit_stats(before, "api"), limit_stats(after, "api")
    assert (api_after["requests"] - api_before["requests"], api_after["go"] - api_before["go"]) == (1, 1)


def test_an_entry_the_locker_refuses_leaves_the_others_answered(client: Client, key: str) -> None:
    before = client.stats()
    replies = client.ask_many(
        [Ask("hour", key), Ask("nope", key), Ask("hour", key), Ask("api", key, cost=6), Ask("db"), Ask("hour", key)]
    )
    assert len(replies) == 6
    assert [gist(replies[i]) for i in (0, 2, 5)] == [(True, 2, None), (True, 1, None), (True, 0, None)]
    refused = [replies[i] for i in (1, 3, 4)]
    assert all(isinstance(r, Refused) for r in refused), refused
    assert refused[0] == Refused('unknown limit "nope"')
    assert "cost" in refused[1].message and "semaphore" in refused[2].message, refused
    assert not any(refused) and not any(r.ok for r in refused), "a refused entry is never a go"
    after = client.stats()
    assert after["errors"] - before["errors"] == 1, "the unknown limit's"
    for name in ("api", "db"):
        assert limit_stats(after, name)["errors"] - limit_stats(before, name)["errors"] == 1, name
    assert limit_stats(after, "hour")["go"] - limit_stats(before, "hour")["go"] == 3


def test_an_empty_batch_gets_an_empty_list(client: Client) -> None:
    assert client.ask_many([]) == []
    assert client.ask_many(iter(())) == []


def test_a_full_batch_goes_through_in_one_message(client: Client, key: str) -> None:
    replies = client.ask_many(Ask("api", f"{key}-{i % 200}") for i in range(wire.MAX_BATCH_ASKS))
    assert len(replies) == 1000
    assert oks(replies) == [True] * 1000, "5 asks of each of 200 keys"
    assert [r.remaining for r in replies[:3]] == [4, 4, 4]
    assert [r.remaining for r in replies[-3:]] == [0, 0, 0]


def test_the_locker_refuses_a_batch_of_more_than_1000_asks_whole(client: Client, key: str) -> None:
    # Past the client's own check: the bytes a client without it would send.
    body = wire.encode({"op": "batch", "asks": [wire.ask_entry("hour", key, 1, False, None)] * 1001})
    with pytest.raises(LockerError) as caught:
        wire.decode_batch(client.round_trip(body), 1001)
    assert "at most 1000 asks" in caught.value.message, caught.value.message
    assert client.ask("hour", key).remaining == 2, "none of its asks was decided"


@pytest.fixture
def listener():
    """A socket that takes requests and never answers: what reaches it was sent."""
    sock = zmq.Context.instance().socket(zmq.ROUTER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.bind("tcp://127.0.0.1:*")
    yield sock
    sock.close()


def received(sock: zmq.Socket, wait_ms: int = 50) -> List[bytes]:
    bodies = []
    while sock.poll(wait_ms, zmq.POLLIN):
        bodies.append(sock.recv_multipart()[-1])
    return bodies


@pytest.mark.parametrize(
    "asks, error, words",
    [
        ([Ask()] * 1001, ValueError, "at most 1000 asks, this one has 1001"),
        ([Ask(), Ask(cost=-1)], ValueError, "ask 1: cost"),
        ([Ask(), Ask(), Ask(limit=7)], TypeError, "ask 2: limit"),
        ([Ask(up_to=1)], TypeError, "ask 0: up_to"),
        ([Ask(max_wait_ms=3_600_001)], ValueError, "ask 0: max_wait_ms"),
        ([{"limit": "api"}], TypeError, "ask 0 must be an Ask, not dict"),
        (Ask(), TypeError, "not iterable"),
    ],
)
def test_bad_batches_are_refused_before_anything_is_sent(listener: zmq.Socket, asks, error: type, words: str) -> None:
    endpoint = listener.getsockopt_string(zmq.LAST_ENDPOINT)
    with Client(endpoint, timeout=0.2) as c:
        with pytest.raises(error) as caught:
            c.ask_many(asks)
        assert words in str(caught.value)
        with pytest.raises(NoAnswer):
            c.ask_many([Ask(key="a")] * wire.MAX_BATCH_ASKS)  # the most a batch may carry is sent
    sent = received(listener)
    assert len(sent) == 1 and len(wire.decode_map(sent[0])["asks"]) == 1000


def test_the_asyncio_client_asks_many(locker: Daemon, key: str) -> None:
    async def main() -> None:
        async with AsyncClient(locker.endpoint, timeout=5.0) as c:
            replies = await c.ask_many([Ask("hour", key)] * 4 + [Ask("nope"), Ask("api", key, cost=9, up_to=True)])
            assert oks(replies) == [True, True, True, False, False, True]
            assert replies[4] == Refused('unknown limit "nope"')
            assert gist(replies[5]) == (True, 0, 5)
            assert await c.ask_many([]) == []
            with pytest.raises(ValueError):
                await c.ask_many([Ask()] * 1001)
            assert not (await c.ask("hour", key)).ok, "the client keeps working"

    asyncio.run(asyncio.wait_for(main(), 30))


def test_an_all_entry_charges_nothing_when_a_part_is_full(client: Client, key: str) -> None:
    # "hour": 3 per hour; "api": 5 per slot. hour is spent, so the all
    # entry is refused whole and api keeps what it had.
    assert oks(client.ask_many([Ask("hour", key, cost=3)])) == [True]
    replies = client.ask_many(
        [Ask("api", key), wire.AllAsks([Ask("api", key, cost=2), Ask("hour", key)]), Ask("api", key)]
    )
    whole = replies[1]
    assert isinstance(whole, AllReply), whole
    assert not whole and whole.replies[0].ok and not whole.replies[1].ok
    assert whole.retry_after_ms == whole.replies[1].retry_after_ms > 0
    assert [gist(replies[0])[:2], gist(replies[2])[:2]] == [(True, 4), (True, 3)]
    gone = client.ask_many([wire.AllAsks([Ask("api", key, cost=3)])])[0]
    assert isinstance(gone, AllReply) and gone.ok and gone.replies[0].remaining == 0


def test_a_bad_all_entry_is_refused_before_sending(client: Client, key: str) -> None:
    with pytest.raises(ValueError, match=r"ask 1 \(an all\): ask 0: a part of limits checked together takes no up_to"):
        client.ask_many([Ask("api", key), wire.AllAsks([Ask("api", key, up_to=True)])])
