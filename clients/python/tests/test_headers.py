"""A reply's rate-limit header fields (IETF draft-ietf-httpapi-ratelimit-
headers-10 and draft-03), and the permit over several limits, from canned
replies: pure, no daemon."""

from __future__ import annotations

import asyncio
from typing import Any, List

import msgpack
import pytest

from locker_client import AllReply, AsyncClient, Client, GoReply, RateLimited
from locker_client import calls, headers, web
from locker_client.wire import Ask


def go(ok: bool = True, limit: int = 5, remaining: int = 4, retry_after_ms: int = 0, reset_after_ms: int = 700) -> GoReply:
    return GoReply(ok, remaining, retry_after_ms, reset_after_ms, None, None, limit)


def test_a_go_names_its_policy_and_rounds_every_time_up_to_whole_seconds() -> None:
    fields = go(remaining=4, reset_after_ms=700).headers("api", window=0.8)
    assert fields == {
        "RateLimit-Policy": '"api";q=5;w=1',
        "RateLimit": '"api";r=4;t=1',
        "X-RateLimit-Limit": "5",
        "X-RateLimit-Remaining": "4",
        "X-RateLimit-Reset": "1",
    }


def test_without_a_window_the_policy_leaves_w_out_and_the_default_limit_is_named_default() -> None:
    fields = go(limit=1000, remaining=997, reset_after_ms=86_399_000).headers()
    assert fields["RateLimit-Policy"] == '"default";q=1000'
    assert fields["RateLimit"] == '"default";r=997;t=86399'
    assert "Retry-After" not in fields


def test_a_sorry_adds_retry_after_rounded_up_and_never_zero() -> None:
    fields = go(ok=False, remaining=0, retry_after_ms=2001, reset_after_ms=2001).headers("api", window=3600)
    assert fields["Retry-After"] == "3"
    assert fields["RateLimit"] == '"api";r=0;t=3'
    assert fields["RateLimit-Policy"] == '"api";q=5;w=3600'
    # A peered locker's few milliseconds still say one second, not "now".
    assert go(ok=False, remaining=0, retry_after_ms=4).headers("api")["Retry-After"] == "1"


def test_limits_checked_together_list_every_part_and_give_the_x_fields_of_the_refusing_one() -> None:
    reply = AllReply(
        ok=False,
        replies=(go(), go(ok=False, limit=1000, remaining=0, retry_after_ms=3000, reset_after_ms=3000)),
        retry_after_ms=3000,
        names=("api", "day"),
    )
    fields = reply.headers(windows={"day": 86400})
    assert fields == {
        "RateLimit-Policy": '"api";q=5, "day";q=1000;w=86400',
        "RateLimit": '"api";r=4;t=1, "day";r=0;t=3',
        "X-RateLimit-Limit": "1000",
        "X-RateLimit-Remaining": "0",
        "X-RateLimit-Reset": "3",
        "Retry-After": "3",
    }
    assert reply.tightest == 1


def test_a_granted_whole_gives_the_x_fields_of_the_part_with_the_fewest_left() -> None:
    reply = AllReply(True, (go(limit=1000, remaining=997), go(limit=5, remaining=1, reset_after_ms=400)), 0, names=(None, "api"))
    fields = reply.headers()
    assert (fields["X-RateLimit-Limit"], fields["X-RateLimit-Remaining"], fields["X-RateLimit-Reset"]) == ("5", "1", "1")
    assert fields["RateLimit-Policy"] == '"default";q=1000, "api";q=5'
    assert "Retry-After" not in fields
    # Names given by the caller win over the recorded ones, and must match the parts.
    assert reply.headers(names=["a", "b"])["RateLimit"].startswith('"a";r=997')
    with pytest.raises(ValueError):
        reply.headers(names=["only-one"])


def test_most_restrictive_prefers_a_refusal_then_fewest_left_then_the_longest_waits() -> None:
    replies = [go(remaining=0), go(ok=False, remaining=3, retry_after_ms=10), go(ok=False, remaining=3, retry_after_ms=900)]
    assert headers.most_restrictive(replies) == 2
    assert headers.most_restrictive([go(remaining=2, reset_after_ms=5), go(remaining=2, reset_after_ms=9)]) == 1
    assert headers.most_restrictive([go(remaining=2), go(remaining=2)]) == 0


def test_names_are_structured_field_strings() -> None:
    fields = go().headers('we"ird\\ name-é')
    assert fields["RateLimit-Policy"] == '"we\\"ird\\\\ name-%C3%A9";q=5'
    fields["RateLimit-Policy"].encode("ascii")


@pytest.mark.parametrize("window", [0, -1, float("inf"), float("nan"), "60", True])
def test_a_window_must_be_positive_seconds(window: Any) -> None:
    with pytest.raises((TypeError, ValueError)):
        go().headers("api", window=window)


def test_a_refusal_raised_by_a_permit_carries_the_reply_and_names_the_refusing_part() -> None:
    whole = calls.permit_all(["api", "day", Ask("global", cost=2)], "u", 1)
    assert [(a.limit, a.key, a.cost) for a in whole.asks] == [("api", "u", 1), ("day", "u", 1), ("global", None, 2)]
    reply = AllReply(False, (go(), go(ok=False, remaining=0, retry_after_ms=5000), go(ok=False, remaining=0, retry_after_ms=200)), 5000)
    with pytest.raises(RateLimited) as raised:
        whole.pause(reply, 1.0)
    assert (raised.value.limit, raised.value.key, raised.value.retry_after) == ("day", "u", 5.0)
    assert raised.value.reply is reply
    # Within the wait, the pause is the whole's retry-after.
    assert whole.pause(reply, 10.0) == 5.0


def test_the_middlewares_429_carries_retry_after_and_both_rate_limit_fields() -> None:
    sorry = go(ok=False, remaining=0, retry_after_ms=1500, reset_after_ms=1500)
    fields, body = web.too_many(RateLimited("api", "u", 1.5, sorry), "api", {"api": 60})
    got = dict(fields)
    assert got["Retry-After"] == "2"
    assert got["RateLimit-Policy"] == '"api";q=5;w=60'
    assert got["RateLimit"] == '"api";r=0;t=2'
    assert got["Content-Length"] == str(len(body)) and b"2 s" in body
    # A refusal without its reply (raised by hand) still says when to come back.
    fields, _ = web.too_many(RateLimited("api", None, 0.2), "api", {})
    assert dict(fields)["Retry-After"] == "1"
    with pytest.raises(ValueError):
        web.windows_of({"api": 0})


class Canned:
    """Stands in for a client's round trip: answers each request with the
    next of ``answers`` and keeps what was sent."""

    def __init__(self, *answers: dict) -> None:
        self.answers = [msgpack.packb(a) for a in answers]
        self.sent: List[dict] = []

    def __call__(self, body: bytes) -> bytes:
        self.sent.append(msgpack.unpackb(body))
        return self.answers.pop(0)

    async def aio(self, body: bytes) -> bytes:
        return self(body)


def whole(ok: bool, retry_after_ms: int) -> dict:
    part = {"ok": True, "limit": 5, "remaining": 4, "retry_after_ms": 0, "reset_after_ms": 700}
    refused = {"ok": ok, "limit": 2, "remaining": 0 if not ok else 1, "retry_after_ms": retry_after_ms, "reset_after_ms": 900}
    return {"ok": ok, "replies": [part, refused], "retry_after_ms": retry_after_ms}


def test_a_permit_over_several_limits_asks_again_after_the_retry_hint_in_both_clients(monkeypatch: pytest.MonkeyPatch) -> None:
    canned = Canned(whole(False, 20), whole(True, 0))
    client = Client("tcp://127.0.0.1:1")
    monkeypatch.setattr(client, "round_trip", canned)
    with client.permit(["api", Ask("day", "shared")], key="u", wait=1.0) as reply:
        assert reply.ok and reply.names == ("api", "day")
    assert len(canned.sent) == 2 and canned.sent[0] == canned.sent[1]
    assert canned.sent[0] == {
        "op": "all",
        "asks": [{"limit": "api", "key": "u", "cost": 1}, {"limit": "day", "key": "shared", "cost": 1}],
    }

    aio = AsyncClient("tcp://127.0.0.1:1")
    canned = Canned(whole(False, 20), whole(False, 5000))
    monkeypatch.setattr(aio, "round_trip", canned.aio)

    async def refused() -> RateLimited:
        with pytest.raises(RateLimited) as raised:
            async with aio.permit(["api", Ask("day", "shared")], key="u", wait=1.0):
                pytest.fail("refused")
        return raised.value

    sorry = asyncio.run(refused())
    assert (sorry.limit, sorry.key, sorry.retry_after) == ("day", "shared", 5.0)
    assert isinstance(sorry.reply, AllReply) and len(canned.sent) == 2
    client.close()
    aio.close()
