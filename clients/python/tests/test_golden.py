"""The golden bytes of tests/golden/ that test_wire.py does not read: the
requests and replies of client.json and combined.json, each against this
client's encoders and decoders, and the peer messages of peer.json, as
plain MessagePack. tests/it/golden.rs holds the Rust side to the same
cases; no daemon needed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import msgpack
import pytest

from locker_client import AllAsks, AllReply, Ask, ChargeReply, GoReply, LeaseReply, Refused, Terms, wire

GOLDEN = Path(__file__).resolve().parents[3] / "tests" / "golden"

#: Every file of tests/golden/ and the test that reads it here.
READERS = {
    "client.json": "test_golden.py",
    "combined.json": "test_golden.py",
    "peer.json": "test_golden.py",
    "wire.json": "test_wire.py",
}


def cases(name: str) -> List[Dict[str, Any]]:
    return list(json.loads((GOLDEN / name).read_text())["cases"])


def go_reply(fields: Dict[str, Any]) -> GoReply:
    """A go reply as a case writes it: granted and wait_ms only when present."""
    return GoReply(**{"granted": None, "wait_ms": None, **fields})


def fields_read(body: bytes, op: str, fields: Dict[str, Any]) -> None:
    """The locker reads ``body`` as ``op`` with ``fields``, whatever else it holds."""
    decoded = msgpack.unpackb(body)
    assert decoded["op"] == op
    assert {k: decoded.get(k) for k in fields} == fields


def check_ask(body: bytes, a: Dict[str, Any]) -> None:
    args = (a.get("limit"), a.get("key"), a.get("cost", 1), a.get("up_to", False), a.get("max_wait_ms"))
    assert wire.encode(wire.go_request(*args, hold_ms=a.get("hold_ms"))) == body


def check_acquire(body: bytes, a: Dict[str, Any]) -> None:
    args = (a.get("limit"), a["count"], a.get("ttl_ms"), a.get("max_wait_ms"), a.get("hold_ms"))
    assert wire.encode(wire.acquire_request(*args)) == body


def check_release(body: bytes, r: Dict[str, Any]) -> None:
    assert wire.encode(wire.release_request(r.get("limit"), r["lease"])) == body


def check_batch(body: bytes, asks: List[Dict[str, Any]]) -> None:
    assert wire.encode(wire.batch_request([Ask(**a) for a in asks])) == body


def check_go_reply(body: bytes, r: Dict[str, Any]) -> None:
    assert wire.decode_go(body) == go_reply(r)


def check_lease_reply(body: bytes, r: Dict[str, Any]) -> None:
    assert wire.decode_lease(body) == LeaseReply(**r)


def check_batch_reply(body: bytes, replies: List[Dict[str, Any]]) -> None:
    want = [go_reply(r["go_reply"]) if "go_reply" in r else Refused(r["error"]) for r in replies]
    assert wire.decode_batch(body, len(replies)) == want


def check_batch_entries(body: bytes, entries: List[Dict[str, Any]]) -> None:
    sent = [Ask(**e["ask"]) if "ask" in e else AllAsks(Ask(**a) for a in e["all"]) for e in entries]
    assert wire.encode(wire.batch_request(sent)) == body
    assert wire.batch_body(sent) == (body, len(entries))


def check_batch_entries_reply(body: bytes, replies: List[Dict[str, Any]]) -> None:
    def read(r: Dict[str, Any]) -> Any:
        if "go_reply" in r:
            return go_reply(r["go_reply"])
        whole = r["all_reply"]
        parts = tuple(go_reply(p) for p in whole["replies"])
        return AllReply(ok=whole["ok"], replies=parts, retry_after_ms=whole["retry_after_ms"])

    assert wire.decode_batch(body, len(replies)) == [read(r) for r in replies]


#: What this client does with each kind of case in client.json.
CLIENT_KINDS: Dict[str, Callable[[bytes, Any], None]] = {
    "ask": check_ask,
    "reads_as_ask": lambda body, a: fields_read(body, "go", a),
    "go_reply": check_go_reply,
    "acquire": check_acquire,
    "lease_reply": check_lease_reply,
    "reads_as_heartbeat": lambda body, h: fields_read(body, "heartbeat", h),
    "release": check_release,
    "batch": check_batch,
    "batch_reply": check_batch_reply,
    "batch_entries": check_batch_entries,
    "batch_entries_reply": check_batch_entries_reply,
}


def terms(fields: Dict[str, Any]) -> Terms:
    return Terms(**fields)


def ask_of(fields: Dict[str, Any]) -> Ask:
    """An Ask as a case writes one: its terms as a map."""
    return Ask(**{**fields, "terms": terms(fields["terms"])} if "terms" in fields else fields)


def check_ask_with_terms(body: bytes, a: Dict[str, Any]) -> None:
    args = (a.get("limit"), a.get("key"), a.get("cost", 1), a.get("up_to", False), a.get("max_wait_ms"))
    given = terms(a["terms"]) if "terms" in a else None
    assert wire.encode(wire.go_request(*args, hold_ms=a.get("hold_ms"), terms=given)) == body
    # The common ask's short cut steps aside for terms, and writes the same bytes.
    assert wire.ask_body(*args, hold_ms=a.get("hold_ms"), terms=given) == body


def check_all(body: bytes, a: Dict[str, Any]) -> None:
    asks = [ask_of(part) for part in a["asks"]]
    assert wire.encode(wire.all_request(asks, a.get("max_wait_ms"), a.get("hold_ms"))) == body


def check_all_reply(body: bytes, r: Dict[str, Any]) -> None:
    want = AllReply(
        ok=r["ok"],
        replies=tuple(go_reply(part) for part in r["replies"]),
        retry_after_ms=r["retry_after_ms"],
        wait_ms=r.get("wait_ms"),
        shadow_sorry=r.get("shadow_sorry", False),
    )
    got = wire.decode_all(body)
    assert got == want
    assert bool(got) is r["ok"] and got.retry_after == r["retry_after_ms"] / 1000


def parents_of(fields: Dict[str, Any]) -> Optional[Dict[str, str]]:
    """The keys of the limits above, as a case writes them: pairs, in the
    order of the bytes."""
    pairs = fields.get("parents")
    return None if pairs is None else {limit: key for limit, key in pairs}


def check_refund(body: bytes, r: Dict[str, Any]) -> None:
    request = wire.refund_request(r.get("limit"), r.get("key"), r.get("cost", 1), parents_of(r))
    assert wire.encode(request) == body


def check_ask_with_parents(body: bytes, a: Dict[str, Any]) -> None:
    args = (a.get("limit"), a.get("key"), a.get("cost", 1), a.get("up_to", False), a.get("max_wait_ms"))
    parents = parents_of(a)
    assert wire.encode(wire.go_request(*args, hold_ms=a.get("hold_ms"), parents=parents)) == body
    # The common ask's short cut steps aside for parents, and writes the same bytes.
    assert wire.ask_body(*args, hold_ms=a.get("hold_ms"), parents=parents) == body


def check_charge(body: bytes, r: Dict[str, Any]) -> None:
    request = wire.charge_request(r.get("limit"), r.get("key"), r.get("cost", 1), parents_of(r))
    assert wire.encode(request) == body


def check_charge_reply(body: bytes, r: Dict[str, Any]) -> None:
    got = wire.decode_charge(body)
    assert isinstance(got, ChargeReply) and got.debt == r["debt"]
    assert (got.ok, got.limit, got.remaining, got.granted) == (r["ok"], r["limit"], r["remaining"], r["granted"])
    assert (got.retry_after_ms, got.reset_after_ms, got.wait_ms) == (r["retry_after_ms"], r["reset_after_ms"], None)


def check_reset(body: bytes, r: Dict[str, Any]) -> None:
    assert wire.encode(wire.reset_request(r.get("limit"), r.get("key"))) == body


#: What this client does with each kind of case in combined.json.
COMBINED_KINDS: Dict[str, Callable[[bytes, Any], None]] = {
    "all": check_all,
    "all_reply": check_all_reply,
    "refund": check_refund,
    "charge": check_charge,
    "charge_reply": check_charge_reply,
    "reset": check_reset,
    "ask": check_ask_with_terms,
    "ask_with_parents": check_ask_with_parents,
}


def test_every_golden_file_is_read() -> None:
    assert sorted(p.name for p in GOLDEN.iterdir()) == sorted(READERS)


@pytest.mark.parametrize("case", cases("client.json"), ids=lambda c: str(c["name"]))
def test_the_client_golden_file_holds_for_the_python_side(case: Dict[str, Any]) -> None:
    body = bytes.fromhex(case["hex"])
    kinds = [k for k in case if k in CLIENT_KINDS]
    assert len(kinds) == 1, f"{case['name']}: a case of an unknown kind"
    CLIENT_KINDS[kinds[0]](body, case[kinds[0]])


@pytest.mark.parametrize("case", cases("combined.json"), ids=lambda c: str(c["name"]))
def test_the_combined_golden_file_holds_for_the_python_side(case: Dict[str, Any]) -> None:
    body = bytes.fromhex(case["hex"])
    kinds = [k for k in case if k in COMBINED_KINDS]
    assert len(kinds) == 1, f"{case['name']}: a case of an unknown kind"
    COMBINED_KINDS[kinds[0]](body, case[kinds[0]])


def test_every_combined_kind_has_a_case() -> None:
    """Each op of combined.json is pinned: a kind without a case would let
    its encoder drift unnoticed."""
    seen = {k for case in cases("combined.json") for k in case if k in COMBINED_KINDS}
    assert seen == set(COMBINED_KINDS)


@pytest.mark.parametrize("case", cases("peer.json"), ids=lambda c: str(c["name"]))
def test_the_peer_golden_file_is_plain_messagepack(case: Dict[str, Any]) -> None:
    """A peer message is a MessagePack map any language reads, and one a
    later locker writes is the map of its fields in their order."""
    body = bytes.fromhex(case["hex"])
    if "peer" in case:
        assert msgpack.packb(case["peer"], use_bin_type=True) == body
        assert msgpack.unpackb(body) == case["peer"]
    else:
        assert msgpack.unpackb(body) == case["reads_as_peer"]
