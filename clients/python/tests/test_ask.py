"""Asks against a real locker: go and sorry within a slot, keys and cost,
up_to, peeks, reservations through acquire, the plain form, stats, the
locker's error replies and arguments refused before sending."""

from __future__ import annotations

import time

import pytest
import zmq

from conftest import Daemon, limit_stats
from locker_client import Client, LockerError, NoAnswer


@pytest.fixture
def client(locker: Daemon):
    with Client(locker.endpoint, timeout=5.0) as c:
        yield c


def test_a_slot_answers_go_up_to_its_limit_then_sorry(client: Client, key: str) -> None:
    replies = [client.ask("api", key) for _ in range(7)]
    assert [r.ok for r in replies] == [True] * 5 + [False] * 2
    assert [r.remaining for r in replies[:5]] == [4, 3, 2, 1, 0]
    sorry = replies[-1]
    assert sorry.limit == 5 and sorry.retry_after_ms > 0 and sorry.granted is None and sorry.wait_ms is None
    assert not sorry, "a reply is false in a boolean context when sorry"


def test_each_key_has_its_own_count_and_cost_takes_several(client: Client, key: str) -> None:
    assert client.ask("api", key, cost=4).remaining == 1
    assert not client.ask("api", key, cost=2).ok, "all or nothing"
    assert client.ask("api", key, cost=1).ok
    assert client.ask("api", key + "-other", cost=5).ok, "another key starts whole"


def test_up_to_takes_what_is_left_and_says_how_much(client: Client, key: str) -> None:
    assert client.ask("api", key, cost=3).ok
    batch = client.ask("api", key, cost=50, up_to=True)
    assert batch.ok and batch.granted == 2 and batch.remaining == 0
    empty = client.ask("api", key, cost=50, up_to=True)
    assert not empty.ok and empty.granted == 0


def test_cost_zero_peeks_without_taking(client: Client, key: str) -> None:
    peek = client.ask("api", key, cost=0)
    assert peek.ok and peek.remaining == 5
    assert client.ask("api", key, cost=5).ok
    peek = client.ask("api", key, cost=0)
    assert not peek.ok and peek.remaining == 0


def test_acquire_sleeps_through_a_reservation(client: Client, key: str) -> None:
    assert client.ask("smooth", key).ok, "the bucket's one token"
    started = time.monotonic()
    reply = client.acquire("smooth", key, max_wait_ms=1000)
    assert reply.ok and reply.wait_ms is not None and 1 <= reply.wait_ms <= 200, reply
    assert time.monotonic() - started >= reply.wait_ms / 1000, "returned before the reservation"
    sorry = client.acquire("smooth", key, max_wait_ms=10)
    assert not sorry.ok and sorry.retry_after_ms > 10, sorry
    assert not client.ask("smooth", key).ok, "a plain ask does not jump the queue"


def test_the_plain_form_answers_go_then_sorry(client: Client) -> None:
    # The body "hour" selects that limit: 3 go per hour-long slot, unkeyed.
    assert [client.go("hour") for _ in range(4)] == [True, True, True, False]
    assert client.go() is True, "the seed's body asks the default limit"


def test_stats_count_what_was_asked(locker: Daemon, key: str) -> None:
    with Client(locker.endpoint, timeout=5.0) as c:
        before = limit_stats(c.stats(), "api")
        for _ in range(7):
            c.ask("api", key)
        after = limit_stats(c.stats(), "api")
        stats = c.stats()
    assert after["requests"] - before["requests"] == 7
    assert after["go"] - before["go"] == 5
    assert after["sorry"] - before["sorry"] == 2
    assert after["algorithm"] == "fixed-window" and after["max_requests"] == 5
    assert limit_stats(stats)["name"] == "default" and stats["live_keys"] >= 1


@pytest.mark.parametrize(
    "call, words",
    [
        (lambda c: c.ask("nope"), "unknown limit"),
        (lambda c: c.ask("api", cost=6), "cost"),
        (lambda c: c.ask("db"), "semaphore"),
        (lambda c: c.heartbeat("db", "no-such-lease"), "lease"),
        (lambda c: c.acquire_lease("api"), "semaphore"),
    ],
)
def test_the_lockers_error_replies_raise_locker_error(client: Client, call, words: str) -> None:
    with pytest.raises(LockerError) as caught:
        call(client)
    assert words in caught.value.message, caught.value.message
    assert client.ask().ok, "the client keeps working after an error reply"


@pytest.fixture
def listener():
    """A socket that takes requests and never answers: what reaches it was sent."""
    ctx = zmq.Context.instance()
    sock = ctx.socket(zmq.ROUTER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.bind("tcp://127.0.0.1:*")
    yield sock
    sock.close()


def received(sock: zmq.Socket, wait_ms: int = 50) -> int:
    n = 0
    while sock.poll(wait_ms, zmq.POLLIN):
        sock.recv_multipart()
        n += 1
    return n


@pytest.mark.parametrize(
    "call, error",
    [
        (lambda c: c.ask(cost=-1), ValueError),
        (lambda c: c.ask(cost=1.0), TypeError),
        (lambda c: c.ask(cost="2"), TypeError),
        (lambda c: c.ask(colour="red"), TypeError),
        (lambda c: c.ask(limit=7), TypeError),
        (lambda c: c.ask(up_to="yes"), TypeError),
        (lambda c: c.ask(max_wait_ms=-1), ValueError),
        (lambda c: c.acquire(cost=-3), ValueError),
        (lambda c: c.go(b"bytes"), TypeError),
        (lambda c: c.acquire_lease("db", count=0), ValueError),
        (lambda c: c.acquire_lease("db", ttl=-1), ValueError),
        (lambda c: c.lease("db", wait="2"), TypeError),
        (lambda c: c.heartbeat("db", 42), TypeError),
    ],
)
def test_bad_arguments_raise_before_anything_is_sent(listener: zmq.Socket, call, error: type) -> None:
    endpoint = listener.getsockopt_string(zmq.LAST_ENDPOINT)
    with Client(endpoint, timeout=0.2) as c:
        with pytest.raises(error):
            call(c)
        with pytest.raises(NoAnswer):
            c.ask()  # the listener does get a well-formed request
    assert received(listener) == 1, "only the well-formed request was sent"


def test_a_client_needs_endpoints_and_a_timeout() -> None:
    with pytest.raises(ValueError):
        Client([])
    with pytest.raises(TypeError):
        Client([b"tcp://127.0.0.1:1"])
    with pytest.raises(ValueError):
        Client("tcp://127.0.0.1:1", timeout=0)
    with pytest.raises(ValueError):
        Client("tcp://127.0.0.1:1", timeout=-1)


def test_a_held_ask_gets_go_when_the_bucket_refills_instead_of_sorry(client: Client, key: str) -> None:
    assert client.ask("smooth", key, cost=100, up_to=True).ok, "takes every token"
    assert not client.ask("smooth", key).ok, "empty: sorry at once"
    start = time.monotonic()
    held = client.ask("smooth", key, hold_ms=1000)
    waited = time.monotonic() - start
    assert held.ok, "held until a token came back, then go"
    assert 0.05 < waited < 1.0, waited


def test_a_hold_beyond_a_minute_is_refused_before_sending(client: Client) -> None:
    with pytest.raises(ValueError):
        client.ask("api", hold_ms=60_001)
