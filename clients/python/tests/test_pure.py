"""The pure parts, on literal instants: the failover plan and the permit
bookkeeping (the Rust pool's own unit tests)."""

from __future__ import annotations

from locker_client import GoReply, Permits
from locker_client.pirate import attempts


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


def test_each_endpoint_is_tried_once_from_the_preferred_one_sharing_the_time_left() -> None:
    now = [0.0]
    plan = []
    for index, budget in attempts(3, 1, 0.9, lambda: now[0]):
        plan.append((index, round(budget, 6)))
        now[0] += budget  # the try used its whole share
    assert plan == [(1, 0.3), (2, 0.3), (0, 0.3)]


def test_no_try_starts_after_the_deadline() -> None:
    assert list(attempts(2, 0, 1.0, lambda: 1.0)) == []


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
