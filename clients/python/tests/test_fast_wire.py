"""The shortcuts of the wire module give what the general way gives: the
common ask and a batch's common entries written straight to bytes are the
bytes of the request map packed; the usual go reply taken as decoded is
the reply the field-by-field way builds, a sorry included; anything odd
still goes the general way. No daemon needed."""

from __future__ import annotations

import itertools
import pickle
import random

import msgpack
import pytest

from locker_client import Ask, BadReply, GoReply, LockerError, Refused, wire

NAMES = [None, "", "a", "big", "x" * 31, "x" * 32, "y" * 255, "z" * 256, "é", "ünïcødé-" * 5, "k" * 70_000]
COSTS = [0, 1, 5, 127, 128, 255, 256, 65_535, 65_536, 2**32, 2**64 - 1]
OPTIONS = [(False, None, None), (True, None, None), (False, 0, None), (False, None, 5), (True, 250, 60_000)]


def test_an_ask_written_straight_to_bytes_is_the_request_map_packed() -> None:
    for limit, key, cost in itertools.product(NAMES, NAMES, COSTS):
        for up_to, max_wait_ms, hold_ms in OPTIONS:
            want = wire.encode(wire.go_request(limit, key, cost, up_to, max_wait_ms, hold_ms))
            assert wire.ask_body(limit, key, cost, up_to, max_wait_ms, hold_ms) == want, (limit, key, cost)


def test_a_batch_written_straight_to_bytes_is_the_request_map_packed() -> None:
    rng = random.Random(5)
    asks = [
        Ask(limit, key, cost, up_to, max_wait_ms)
        for limit, key, cost in itertools.product(NAMES[:7], NAMES[:7], COSTS[:7])
        for up_to, max_wait_ms in [(False, None), (True, 3)]
    ]
    for size in [0, 1, 15, 16, 17, 100, 1000]:
        batch = [rng.choice(asks) for _ in range(size)]
        body, count = wire.batch_body(batch)
        assert count == size
        assert body == wire.encode(wire.batch_request(batch)), size
        assert wire.batch_body(iter(batch))[0] == body, "any iterable"


@pytest.mark.parametrize(
    "kwargs, error",
    [
        ({"cost": -1}, ValueError),
        ({"cost": True}, TypeError),
        ({"cost": 1.0}, TypeError),
        ({"limit": 5}, TypeError),
        ({"limit": ["a"]}, TypeError),
        ({"key": b"k"}, TypeError),
        ({"key": 7}, TypeError),
    ],
)
def test_the_shortcut_refuses_what_the_general_way_refuses(kwargs: dict, error: type) -> None:
    args = {"limit": "big", "key": "k", "cost": 1, **kwargs}
    with pytest.raises(error):
        wire.ask_body(**args)
    with pytest.raises(error):
        wire.batch_body([Ask(**args)])


def reply_map(ok: bool) -> dict:
    return {"ok": ok, "limit": 5, "remaining": 4 if ok else 0, "retry_after_ms": 0 if ok else 300, "reset_after_ms": 700}


@pytest.mark.parametrize("ok", [True, False])
def test_the_usual_reply_taken_as_decoded_is_the_reply_built_field_by_field(ok: bool) -> None:
    m = reply_map(ok)
    got = wire.decode_go(msgpack.packb(m))
    assert got == GoReply(
        ok=ok, remaining=m["remaining"], retry_after_ms=m["retry_after_ms"], reset_after_ms=700, granted=None, wait_ms=None, limit=5
    )
    assert bool(got) is ok and got.granted is None and got.wait_ms is None
    assert hash(got) == hash(wire._go_reply(m)), "frozen and hashable alike"
    assert pickle.loads(pickle.dumps(got)) == got
    with pytest.raises(AttributeError):
        got.ok = not ok  # type: ignore[misc]
    batch = {"replies": [m, {"error": "unknown limit"}, {**m, "granted": 2}]}
    first, refused, granted = wire.decode_batch(msgpack.packb(batch), 3)
    assert first == got and refused == Refused("unknown limit") and granted.granted == 2


def test_odd_replies_still_go_the_general_way() -> None:
    # Converted as the general way converts them.
    loose = wire.decode_go(msgpack.packb({**reply_map(True), "ok": 1, "limit": 5.0}))
    assert loose.ok is True and loose.limit == 5 and type(loose.limit) is int
    for odd in [{**reply_map(True), "remaining": "four"}, {"ok": True, "limit": 5, "remaining": 4, "retry_after_ms": 0, "x": 1}]:
        with pytest.raises(BadReply):
            wire.decode_go(msgpack.packb(odd))
    with pytest.raises(LockerError):
        wire.decode_go(msgpack.packb({"error": "unknown limit"}))
    with pytest.raises(BadReply):
        wire.decode_go(b"go")
