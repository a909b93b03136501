"""The bytes this client sends and reads, against the golden bytes of
tests/golden/ that tests/it/golden.rs holds the Rust side to: wire.json's
cases all here, and single cases of client.json where a test needs their
bytes; no daemon needed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict

import msgpack
import pytest

from locker_client import Ask, BadReply, GoReply, LockerError, Refused, Terms, wire


GOLDEN = Path(__file__).resolve().parents[3] / "tests" / "golden"


def golden(file: str, name: str) -> Dict[str, Any]:
    """The case called ``name`` in ``tests/golden/<file>``."""
    (case,) = [c for c in json.loads((GOLDEN / file).read_text())["cases"] if c["name"] == name]
    return case


#: The go reply of docs/wire.md: ok, limit 5, remaining 4, reset after 700 ms.
GO_REPLY = bytes.fromhex(golden("wire.json", "a go reply")["hex"])


def test_optional_fields_appear_only_when_asked_for() -> None:
    decoded = msgpack.unpackb(wire.encode(wire.go_request("a", None, 3, True, 250)))
    assert decoded == {"op": "go", "limit": "a", "cost": 3, "up_to": True, "max_wait_ms": 250}
    beat = msgpack.unpackb(wire.encode(wire.heartbeat_request("db", "x-1", 900, 2)))
    assert list(beat) == ["op", "limit", "count", "ttl_ms", "lease"], "the Rust field order"
    acquire = msgpack.unpackb(wire.encode(wire.acquire_request("db", 1, None, 0)))
    assert acquire == {"op": "acquire", "limit": "db", "max_wait_ms": 0, "count": 1}


def test_the_readme_go_reply_decodes() -> None:
    reply = wire.decode_go(GO_REPLY)
    assert reply == GoReply(ok=True, remaining=4, retry_after_ms=0, reset_after_ms=700, granted=None, wait_ms=None, limit=5)
    assert reply


def test_replies_of_another_shape_are_bad_replies() -> None:
    for body in [b"go", b"\x81\xa2ok\xc3", b"\xc1", msgpack.packb([1, 2])]:
        with pytest.raises(BadReply):
            wire.decode_go(body)
    assert wire.decode_plain(b"go") is True
    assert wire.decode_plain(b"sorry") is False
    with pytest.raises(BadReply):
        wire.decode_plain(b"\x81\xa2ok\xc3")


def test_the_plain_body_is_the_seeds_or_a_limits_name() -> None:
    assert wire.plain_body(None) == b"let me go"
    assert wire.plain_body("hour") == b"hour"


@pytest.mark.parametrize(
    "kwargs, error",
    [
        ({"cost": -1}, ValueError),
        ({"cost": 2**64}, ValueError),
        ({"cost": 1.5}, TypeError),
        ({"cost": "1"}, TypeError),
        ({"cost": True}, TypeError),
        ({"up_to": 1}, TypeError),
        ({"max_wait_ms": -5}, ValueError),
        ({"max_wait_ms": 3_600_001}, ValueError),
        ({"limit": 5}, TypeError),
        ({"key": b"bytes"}, TypeError),
    ],
)
def test_bad_ask_arguments_are_refused(kwargs: dict, error: type) -> None:
    args = {"limit": None, "key": None, "cost": 1, "up_to": False, "max_wait_ms": None, **kwargs}
    with pytest.raises(error):
        wire.go_request(**args)


def test_batch_entries_are_asks_without_op_in_the_rust_field_order() -> None:
    request = msgpack.unpackb(wire.encode(wire.batch_request([Ask("a", "k", 3, True, 250), Ask()])))
    assert list(request) == ["op", "asks"]
    first, second = request["asks"]
    assert list(first) == ["limit", "key", "cost", "up_to", "max_wait_ms"]
    assert first == {"limit": "a", "key": "k", "cost": 3, "up_to": True, "max_wait_ms": 250}
    assert second == {"cost": 1}
    # Past 15 asks the array takes the 16-bit header: client.json's case of sixteen, read by test_golden.py.
    assert msgpack.unpackb(wire.encode(wire.batch_request([]))) == {"op": "batch", "asks": []}


def test_a_batch_reply_decodes_each_entry_on_its_own() -> None:
    # docs/wire.md: {"replies": [a go reply, {"error": "unknown limit \"x\""}]}
    body = bytes.fromhex(golden("client.json", "a batch's reply: a go, and an error for the second ask alone")["hex"])
    go, refused = wire.decode_batch(body, 2)
    assert go == GoReply(ok=True, remaining=4, retry_after_ms=0, reset_after_ms=700, granted=None, wait_ms=None, limit=5)
    assert refused == Refused('unknown limit "x"')
    assert refused.ok is False and not refused
    assert wire.decode_batch(msgpack.packb({"replies": []}), 0) == []


def test_a_refused_batch_raises_and_odd_batch_replies_are_bad_replies() -> None:
    whole = msgpack.packb({"error": "bad request: a batch carries at most 1000 asks, this one has 1001"})
    with pytest.raises(LockerError) as caught:
        wire.decode_batch(whole, 1001)
    assert caught.value.message.endswith("this one has 1001")
    for body in [GO_REPLY, msgpack.packb({"replies": 5}), msgpack.packb({"replies": [1]}), msgpack.packb({"replies": [{"ok": True}]})]:
        with pytest.raises(BadReply):
            wire.decode_batch(body, 1)
    with pytest.raises(BadReply, match="1 replies to a batch of 2 asks"):
        wire.decode_batch(msgpack.packb({"replies": [msgpack.unpackb(GO_REPLY)]}), 2)


def test_seconds_become_whole_milliseconds_rounded_up() -> None:
    assert wire.ttl_ms(10) == 10_000
    assert wire.ttl_ms(0.0001) == 1
    assert wire.wait_ms(0) == 0
    assert wire.wait_ms(None) is None
    for bad, error in [(0, ValueError), (-1, ValueError), (float("nan"), ValueError), ("1", TypeError)]:
        with pytest.raises(error):
            wire.ttl_ms(bad)


def test_the_shared_golden_file_holds_for_the_python_side() -> None:
    """The cases in tests/golden/wire.json, which the Rust tests read too."""
    doc = json.loads((GOLDEN / "wire.json").read_text())
    assert len(doc["cases"]) >= 6
    for case in doc["cases"]:
        want = bytes.fromhex(case["hex"])
        if "ask" in case:
            a = case["ask"]
            args = (a.get("limit"), a.get("key"), a.get("cost", 1), a.get("up_to", False), a.get("max_wait_ms"))
            shadow = a.get("shadow", False)
            assert wire.encode(wire.go_request(*args, hold_ms=a.get("hold_ms"), shadow=shadow)) == want, case["name"]
            # The common ask's short cut steps aside for shadow, and writes the same bytes.
            assert wire.ask_body(*args, hold_ms=a.get("hold_ms"), shadow=shadow) == want, case["name"]
        elif case.get("request") == "stats":
            assert wire.encode(wire.STATS_REQUEST) == want, case["name"]
        elif "go_reply" in case:
            r = case["go_reply"]
            assert wire.decode_go(want) == GoReply(granted=None, wait_ms=None, **r), case["name"]
        elif "error" in case:
            with pytest.raises(LockerError) as caught:
                wire.decode_go(want)
            assert caught.value.message == case["error"], case["name"]
        else:
            pytest.fail(f"{case['name']}: a case of an unknown kind")


def test_limits_checked_together_are_1_to_16_plain_asks_checked_before_sending() -> None:
    sixteen = [Ask("api", f"k{i}") for i in range(wire.MAX_ALL_ASKS)]
    assert len(msgpack.unpackb(wire.encode(wire.all_request(sixteen)))["asks"]) == 16
    with pytest.raises(ValueError, match="1 to 16"):
        wire.all_request(sixteen + [Ask("api")])
    with pytest.raises(ValueError, match="1 to 16"):
        wire.all_request([])
    with pytest.raises(ValueError, match="ask 1: .*up_to"):
        wire.all_request([Ask("api"), Ask("api", up_to=True)])
    with pytest.raises(ValueError, match="ask 0: .*the whole's"):
        wire.all_request([Ask("api", max_wait=1.0)])
    with pytest.raises(TypeError, match="ask 0 must be an Ask"):
        wire.all_request(["api"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="max_wait_ms"):
        wire.all_request([Ask("api")], max_wait_ms=wire.MAX_WAIT_MS + 1)


@pytest.mark.parametrize(
    "kwargs, error",
    [
        ({"max_requests": 5, "in_seconds": 1.0, "algorithm": "semaphore"}, ValueError),
        ({"max_requests": 0, "in_seconds": 1.0}, ValueError),
        ({"max_requests": 5, "in_seconds": 0}, ValueError),
        ({"max_requests": 5, "in_seconds": float("inf")}, ValueError),
        ({"max_requests": 5, "in_seconds": "1"}, TypeError),
        ({"max_requests": 5, "in_seconds": 1.0, "burst": 10}, ValueError),
        ({"max_requests": 5, "in_seconds": 1.0, "algorithm": "token-bucket", "burst": 0}, ValueError),
        ({"max_requests": 5.0, "in_seconds": 1.0}, TypeError),
    ],
)
def test_bad_terms_are_refused_when_built(kwargs: dict, error: type) -> None:
    with pytest.raises(error):
        Terms(**kwargs)


def test_terms_always_send_in_seconds_as_a_float_and_burst_only_for_a_bucket() -> None:
    assert Terms(5, 2).entry() == {"algorithm": "fixed-window", "max_requests": 5, "in_seconds": 2.0}
    assert isinstance(Terms(5, 2).entry()["in_seconds"], float)
    assert Terms(10, 1, algorithm="token-bucket", burst=20).entry()["burst"] == 20
    batch = msgpack.unpackb(wire.encode(wire.batch_request([Ask("t", terms=Terms(3, 60))])))
    assert batch["asks"][0]["terms"]["max_requests"] == 3
    body, _ = wire.batch_body([Ask("t", terms=Terms(3, 60))])
    assert body == wire.encode(wire.batch_request([Ask("t", terms=Terms(3, 60))]))


def test_refund_and_reset_requests_are_checked() -> None:
    with pytest.raises(ValueError):
        wire.refund_request("api", "u", 0)
    with pytest.raises(TypeError):
        wire.reset_request("api", 7)  # type: ignore[arg-type]
    assert msgpack.unpackb(wire.encode(wire.refund_request(None, None, 1))) == {"op": "refund", "cost": 1}


def test_the_reply_to_limits_checked_together_decodes_and_odd_ones_are_bad_replies() -> None:
    part = {"ok": True, "limit": 5, "remaining": 4, "retry_after_ms": 0, "reset_after_ms": 700}
    whole = msgpack.packb({"ok": True, "replies": [part], "retry_after_ms": 0})
    assert wire.decode_all(whole, ["api"]).names == ("api",)
    with pytest.raises(BadReply):
        wire.decode_all(whole, ["api", "day"])
    with pytest.raises(BadReply):
        wire.decode_all(msgpack.packb({"ok": True, "replies": [part]}))
    with pytest.raises(LockerError, match="semaphore"):
        wire.decode_all(msgpack.packb({"ok": False, "replies": [{"error": "db is a semaphore"}], "retry_after_ms": 0}))
