"""The pure parts, on literal instants: the failover plan (the Rust
client's ``round_trip`` rule) and the permit bookkeeping (the Rust pool's
own unit tests) and the wait for a queued lease."""

from __future__ import annotations

import random
from typing import List, Tuple

import msgpack
import pytest

from locker_client import GoReply, LockerError, NotAcquired, Permits, wire
from locker_client.lease import LeaseWait
from locker_client.pirate import CONNECT_CHECK, Missed, Plan, Try


def reply(ok: bool, granted: int, reset_after_ms: int, retry_after_ms: int) -> GoReply:
    return GoReply(
        ok=ok,
        remaining=0,
        retry_after_ms=retry_after_ms,
        reset_after_ms=reset_after_ms,
        granted=granted if ok else None,
        wait_ms=None,
        limit=1000,
    )


class Clock:
    """Literal instants, moved by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def run(plan: Plan, clock: Clock, outcome: "dict[int, Missed]") -> List[Tuple[int, float, float]]:
    """Plays a request where endpoint i misses as ``outcome[i]`` says: a
    passed-over try takes its connect check, a silent one its budget."""
    tries = []
    for t in plan:
        tries.append((t.index, round(t.budget, 6), round(t.connect, 6)))
        why = outcome[t.index]
        clock.now += t.connect if why is Missed.NOT_CONNECTED else t.budget
        plan.missed(t, why)
    return tries


def test_each_endpoint_is_tried_once_from_the_preferred_one_sharing_the_time_left() -> None:
    clock = Clock()
    silent = {i: Missed.SILENT for i in range(3)}
    tries = run(Plan(3, 1, 0.9, clock), clock, silent)
    # The last one has nobody to make way for: its connect check is its share.
    assert tries == [(1, 0.3, CONNECT_CHECK), (2, 0.3, CONNECT_CHECK), (0, 0.3, 0.3)]


def test_a_dead_endpoint_is_passed_over_after_the_connect_check_and_tried_again_last() -> None:
    clock = Clock()
    plan = Plan(2, 0, 2.0, clock)
    tries = iter(plan)
    assert next(tries) == Try(0, 1.0, CONNECT_CHECK)
    clock.now = CONNECT_CHECK
    plan.missed(Try(0, 1.0, CONNECT_CHECK), Missed.NOT_CONNECTED)
    # Nothing was sent to the first: the second gets half of the time left,
    # not half of the time that was, and still checks its connection since
    # the first is waiting for another go.
    assert next(tries) == Try(1, 0.95, CONNECT_CHECK)
    clock.now = 1.05
    plan.missed(Try(1, 0.95, CONNECT_CHECK), Missed.SILENT)
    assert next(tries) == Try(0, 0.95, 0.95), "the first again, with all the time left"
    assert list(tries) == []


def test_endpoints_passed_over_share_what_is_left_in_turn() -> None:
    clock = Clock()
    dead = {i: Missed.NOT_CONNECTED for i in range(3)}
    tries = run(Plan(3, 2, 0.9, clock), clock, dead)
    assert [i for i, _, _ in tries] == [2, 0, 1, 2, 0, 1]
    assert tries[3] == (2, 0.2, 0.2), "0.6 s left over three"


def test_each_endpoint_is_sent_a_request_at_most_once_and_no_try_outlasts_the_deadline() -> None:
    rng = random.Random(7)
    for _ in range(500):
        count = rng.randint(1, 4)
        clock = Clock()
        outcome = {i: rng.choice([Missed.SILENT, Missed.NOT_CONNECTED]) for i in range(count)}
        tries = run(Plan(count, rng.randrange(count), 1.0, clock), clock, outcome)
        sent = [i for i, _, _ in tries if outcome[i] is Missed.SILENT]
        assert len(sent) == len(set(sent)), (outcome, tries)
        assert all(sum(i == e for i, _, _ in tries) <= 2 for e in range(count)), "a retry at most"
        assert all(connect <= budget for _, budget, connect in tries)
        assert clock.now <= 1.0 + 1e-9, (outcome, tries)
        assert {i for i, _, _ in tries} == set(range(count)), "every endpoint had its try"


def test_no_try_starts_after_the_deadline() -> None:
    clock = Clock()
    clock.now = 1.0
    assert list(Plan(2, 0, 1.0, clock)) == []


def test_the_wait_for_an_answer_counts_the_connect_wait_and_is_never_zero() -> None:
    t = Try(0, 0.5, 0.1)
    assert t.connect_ms() == 100
    assert t.answer_ms(0.1) == 400
    assert t.answer_ms(0.7) == 1, "a spent budget still gets one look"


def at(seconds: float) -> int:
    """An instant given in seconds, as the pool's monotonic nanoseconds."""
    return round(seconds * 1_000_000_000)


def test_hands_out_exactly_what_was_granted() -> None:
    p = Permits()
    assert not p.take(at(0.0)), "nothing in hand yet"
    p.refill(at(0.0), reply(True, 3, 500, 0))
    assert sum(p.take(at(0.0)) for _ in range(10)) == 3


def test_a_batch_lapses_before_its_slot_ends() -> None:
    p = Permits()
    p.refill(at(0.0), reply(True, 5, 10, 0))
    assert p.take(at(0.008))
    assert not p.take(at(0.009)), "the slot may end at 9.000001 ms"
    assert p.left == 0


def test_no_batch_is_asked_for_in_the_last_millisecond_of_a_slot() -> None:
    p = Permits()
    p.refill(at(0.0), reply(True, 1, 10, 0))
    assert p.take(at(0.0))
    assert p.may_ask(at(0.005)), "spent early: ask for more"
    assert not p.may_ask(at(0.0095)), "a batch now would lapse at once"
    assert p.may_ask(at(0.010)), "the next slot has begun"


def test_a_sorry_keeps_the_pool_quiet_until_its_retry_hint() -> None:
    p = Permits()
    p.refill(at(0.0), reply(False, 0, 40, 40))
    assert not p.may_ask(at(0.039))
    assert p.may_ask(at(0.040))
    assert not p.take(at(0.040))


def lease_reply(ok: bool, pending: bool, expires_in_ms: int, lease: str = "L1") -> bytes:
    fields = {"ok": ok, "lease": lease, "limit": 1, "remaining": 0, "expires_in_ms": expires_in_ms}
    return bytes(msgpack.packb({**fields, "pending": True} if pending else fields))


ACQUIRE = wire.acquire_request("db", 1, 3000, 100)


def test_a_pending_lease_is_polled_with_doubling_pauses_until_held() -> None:
    wait = LeaseWait(ACQUIRE)
    assert wait.pause(0.0) == 0.0, "the acquire goes at once"
    assert wait.request() == wire.encode(ACQUIRE)
    wait.took(lease_reply(False, True, 100), 0.0)
    assert [wait.pause(0.0) for _ in range(3)] == [0.002, 0.004, 0.008]
    assert msgpack.unpackb(wait.request())["op"] == "heartbeat"
    wait.took(lease_reply(True, False, 3000), 0.02)
    assert wait.pause(0.02) is None
    assert wait.give_back() is None
    assert wait.held() == ("db", "L1", 1, 3000)


def test_a_lease_still_pending_at_the_end_of_the_wait_is_given_back_and_not_acquired() -> None:
    wait = LeaseWait(ACQUIRE)
    wait.took(lease_reply(False, True, 100), 0.0)
    assert wait.pause(0.099) == pytest.approx(0.001), "a pause never runs past the wait"
    assert wait.pause(0.1) is None
    give_back = wait.give_back()
    assert give_back is not None and msgpack.unpackb(give_back)["op"] == "release"
    with pytest.raises(NotAcquired):
        wait.held()


def test_a_wait_asks_the_locker_to_hold_and_asks_again_at_once_when_a_hold_runs_out() -> None:
    wait = LeaseWait(wire.acquire_request("db", 1, 3000, 5000), hold_ms=400)
    assert wait.pause(0.0) == 0.0
    first = msgpack.unpackb(wait.request())
    assert (first["op"], first["max_wait_ms"], first["hold_ms"]) == ("acquire", 5000, 400), "held up to 400 ms"
    held_pending = {"ok": False, "lease": "L1", "pending": True, "limit": 1, "remaining": 0}
    wait.took(bytes(msgpack.packb({**held_pending, "expires_in_ms": 4600, "waited_ms": 400})), 0.4)
    assert wait.pause(0.4) == 0.0, "the hold ran out: asked again at once, no pause"
    beat = msgpack.unpackb(wait.request())
    assert (beat["op"], beat["lease"], beat["hold_ms"]) == ("heartbeat", "L1", 400)
    wait.took(bytes(msgpack.packb({**held_pending, "expires_in_ms": 100, "waited_ms": 400})), 4.9)
    assert wait.pause(4.95) == 0.0
    assert msgpack.unpackb(wait.request())["hold_ms"] == 50, "never held past the wait"
    wait.took(lease_reply(True, False, 3000), 5.0)
    assert wait.pause(5.0) is None and wait.held() == ("db", "L1", 1, 3000)


def test_a_locker_that_answers_pending_at_once_is_polled_with_pauses_even_asked_to_hold() -> None:
    wait = LeaseWait(ACQUIRE, hold_ms=400)
    assert msgpack.unpackb(wait.request())["hold_ms"] == 100, "at most the wait"
    wait.took(lease_reply(False, True, 100), 0.0)
    assert [wait.pause(0.0) for _ in range(2)] == [0.002, 0.004], "an older locker: polled as before"


def test_a_refused_acquire_raises_but_a_refused_poll_ends_the_wait() -> None:
    refused = msgpack.packb({"error": "unknown limit"})
    with pytest.raises(LockerError):
        LeaseWait(ACQUIRE).took(refused, 0.0)
    wait = LeaseWait(ACQUIRE)
    wait.took(lease_reply(False, True, 100), 0.0)
    wait.took(refused, 0.01)
    assert wait.pause(0.01) is None
    with pytest.raises(NotAcquired):
        wait.held()
