//! Golden bytes for both wire forms and for the peer messages. The bytes
//! live in `tests/golden/`, one case a message, and the Python client's
//! tests read the same files: `wire.json` (asks, stats and replies, read by
//! `test_wire.py`), `client.json` (reservations, leases, batches) and
//! `peer.json` (messages between lockers), both read by `test_golden.py`.
//! Here are the Rust side of every case and the malformed requests the
//! locker must refuse. A change that alters any of these breaks deployed
//! clients or peers running the previous version, so it must be
//! deliberate: update the README's wire contract in the same change.

use locker::wire::{
    self, AllReply, Ask, BatchAsk, BatchEntry, Charge, ChargeReply, EntryReply, ErrorReply, GoReply, LeaseAsk,
    LeaseReply, LimitStatsReply, Parents, PeerKind, PeerMsg, Refund, Release, Reply, ReplyKind, Request, RequestMap,
    Reset, StatsReply, Terms,
};
use serde_json::Value;

/// The files of `tests/golden/`: a new one must be read here and by the
/// Python client's tests before this test passes.
const GOLDEN_FILES: [&str; 4] = ["client.json", "combined.json", "peer.json", "wire.json"];

/// The cases of `tests/golden/<file>`.
fn cases(file: &str) -> Vec<Value> {
    let path = format!("{}/tests/golden/{file}", env!("CARGO_MANIFEST_DIR"));
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    doc["cases"].as_array().expect("cases").clone()
}

/// A case's name and bytes.
fn named_bytes(case: &Value) -> (&str, Vec<u8>) {
    let name = case["name"].as_str().expect("a name");
    let bytes = case["hex"].as_str().expect("hex").split_whitespace().map(|b| u8::from_str_radix(b, 16).unwrap());
    (name, bytes.collect())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(" ")
}

fn encoded_bytes<T: serde::Serialize>(value: &T) -> Vec<u8> {
    let mut out = Vec::new();
    wire::encode(value, &mut out);
    out
}

/// An ask as a case writes it: absent fields take the ask's defaults.
fn ask_of(a: &Value) -> Ask<'_> {
    let s = |f: &str| a.get(f).and_then(Value::as_str);
    let n = |f: &str| a.get(f).and_then(Value::as_u64);
    Ask {
        limit: s("limit"),
        key: s("key"),
        cost: n("cost").unwrap_or(1),
        up_to: a.get("up_to").and_then(Value::as_bool).unwrap_or(false),
        max_wait_ms: n("max_wait_ms"),
        hold_ms: n("hold_ms"),
        terms: a.get("terms").map(terms_of),
        parents: None,
        shadow: a.get("shadow").and_then(Value::as_bool).unwrap_or(false),
    }
}

/// The keys of the limits above a case's own, as it writes them: pairs in
/// the order of the bytes (a JSON object would not keep it).
fn parent_pairs(v: &Value) -> Vec<(&str, &str)> {
    let pairs = v.get("parents").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    pairs.iter().map(|p| (p[0].as_str().expect("a limit"), p[1].as_str().expect("a key"))).collect()
}

/// A limit's terms as a case writes them.
fn terms_of(t: &Value) -> Terms<'_> {
    Terms {
        algorithm: t["algorithm"].as_str().expect("an algorithm"),
        max_requests: t["max_requests"].as_u64().expect("max_requests"),
        in_seconds: t["in_seconds"].as_f64().expect("in_seconds"),
        burst: t.get("burst").and_then(Value::as_u64),
    }
}

fn go_reply_of(r: &Value) -> GoReply {
    serde_json::from_value(r.clone()).expect("a go reply")
}

#[test]
fn every_golden_file_is_read() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden");
    let mut files: Vec<_> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    files.sort();
    assert_eq!(files, GOLDEN_FILES);
}

/// The cases in `tests/golden/wire.json`, which the Python client's tests
/// read too: both clients are held to the same bytes.
#[test]
fn the_shared_golden_file_holds_for_the_rust_side() {
    let cases = cases("wire.json");
    assert!(cases.len() >= 6);
    for case in &cases {
        let (name, want) = named_bytes(case);
        let got = if let Some(a) = case.get("ask") {
            let ask = ask_of(a);
            // Absent fields are left out, not sent as nil.
            assert_eq!(wire::decode_request(&want), Ok(Request::Go(ask)), "{name}");
            encoded_bytes(&ask.to_map())
        } else if case["request"] == "stats" {
            assert_eq!(wire::decode_request(&want), Ok(Request::Stats), "{name}");
            encoded_bytes(&RequestMap { op: Some("stats"), ..RequestMap::default() })
        } else if let Some(r) = case.get("go_reply") {
            encoded_bytes(&go_reply_of(r))
        } else if let Some(e) = case.get("error") {
            encoded_bytes(&ErrorReply { error: e.as_str().unwrap().to_owned() })
        } else {
            panic!("{name}: a case of an unknown kind");
        };
        assert_eq!(hex(&got), hex(&want), "{name}");
    }
}

/// The cases in `tests/golden/client.json`: each message as the Rust
/// client writes it (where it writes one) and as the locker reads it.
#[test]
fn the_client_golden_file_holds_for_the_rust_side() {
    let cases = cases("client.json");
    assert!(cases.len() >= 11);
    for case in &cases {
        let (name, want) = named_bytes(case);
        let got = client_case(case, &want).unwrap_or_else(|| panic!("{name}: a case of an unknown kind"));
        if let Some(got) = got {
            assert_eq!(hex(&got), hex(&want), "{name}");
        }
    }
}

/// Checks one case of `client.json` that the locker reads, and returns
/// the bytes the Rust side writes for it (`None` inside where it writes
/// none); `None` for a case of an unknown kind.
fn client_case(case: &Value, want: &[u8]) -> Option<Option<Vec<u8>>> {
    let name = case["name"].as_str().unwrap_or_default();
    let read = wire::decode_request(want);
    let written = if let Some(a) = case.get("ask") {
        assert_eq!(read, Ok(Request::Go(ask_of(a))), "{name}");
        Some(encoded_bytes(&ask_of(a).to_map()))
    } else if let Some(a) = case.get("reads_as_ask") {
        assert_eq!(read, Ok(Request::Go(ask_of(a))), "{name}");
        None
    } else if let Some(r) = case.get("go_reply") {
        Some(encoded_bytes(&go_reply_of(r)))
    } else if let Some(a) = case.get("acquire") {
        let (limit, count) = (a["limit"].as_str().unwrap(), a["count"].as_u64().unwrap());
        let n = |f: &str| a.get(f).and_then(Value::as_u64);
        let ask = LeaseAsk { max_wait_ms: n("max_wait_ms"), hold_ms: n("hold_ms"), ..LeaseAsk::new(limit, count) };
        assert_eq!(read, Ok(Request::Acquire(LeaseAsk { ttl_ms: n("ttl_ms"), ..ask })), "{name}");
        Some(encoded_bytes(&LeaseAsk { ttl_ms: n("ttl_ms"), ..ask }.to_map()))
    } else if let Some(r) = case.get("lease_reply") {
        Some(encoded_bytes(&serde_json::from_value::<LeaseReply>(r.clone()).unwrap()))
    } else if let Some(h) = case.get("reads_as_heartbeat") {
        let Ok(Request::Heartbeat(got)) = read else { panic!("{name}: not a heartbeat") };
        let s = |f: &str| h.get(f).and_then(Value::as_str);
        let n = |f: &str| h.get(f).and_then(Value::as_u64);
        assert_eq!(
            (got.limit, Some(got.lease), got.count, got.ttl_ms, got.hold_ms),
            (s("limit"), s("lease"), n("count"), n("ttl_ms"), n("hold_ms"))
        );
        None
    } else if let Some(r) = case.get("release") {
        let release = Release { limit: r.get("limit").and_then(Value::as_str), lease: r["lease"].as_str().unwrap() };
        assert_eq!(read, Ok(Request::Release(release)), "{name}");
        Some(encoded_bytes(&release.to_map()))
    } else if let Some(asks) = case.get("batch") {
        let asks: Vec<Ask> = asks.as_array().unwrap().iter().map(ask_of).collect();
        let Ok(Request::Batch(batch)) = read else { panic!("{name}: not a batch") };
        assert_eq!(batch.iter().map(Result::unwrap).collect::<Vec<_>>(), asks, "{name}");
        let mut body = Vec::new();
        wire::encode_batch(&asks, &mut body);
        Some(body)
    } else if let Some(replies) = case.get("batch_reply") {
        Some(batch_reply_case(replies.as_array().unwrap(), want))
    } else if let Some(entries) = case.get("batch_entries") {
        Some(batch_entries_case(entries.as_array().unwrap(), &read, name))
    } else if let Some(replies) = case.get("batch_entries_reply") {
        let read: Vec<_> = replies.as_array().unwrap().iter().map(entry_reply_of).collect();
        assert_eq!(wire::decode_batch_entries_reply(want), Ok(Reply::Answer(read.iter().cloned().map(Ok).collect())));
        let mut body = Vec::new();
        wire::begin_batch_reply(read.len(), &mut body);
        for r in &read {
            match r {
                EntryReply::Go(go) => wire::encode_go_reply(go, &mut body),
                EntryReply::All(all) => wire::encode(all, &mut body),
            }
        }
        Some(body)
    } else {
        return None;
    };
    Some(written)
}

/// The bytes of a batch of `entries` (each an ask or an `all`'s parts),
/// after checking that the locker reads `read` as them.
fn batch_entries_case(entries: &[Value], read: &Result<Request, wire::WireError>, name: &str) -> Vec<u8> {
    let parts: Vec<Vec<Ask>> = entries
        .iter()
        .map(|e| e.get("all").map_or(vec![], |a| a.as_array().unwrap().iter().map(ask_of).collect()))
        .collect();
    let sent: Vec<BatchAsk> = entries
        .iter()
        .zip(&parts)
        .map(|(e, parts)| e.get("ask").map_or(BatchAsk::All(parts), |a| BatchAsk::Go(ask_of(a))))
        .collect();
    let Ok(Request::Batch(batch)) = read else { panic!("{name}: not a batch") };
    for (entry, sent) in batch.entries().map(Result::unwrap).zip(&sent) {
        match (entry, sent) {
            (BatchEntry::Go(got), BatchAsk::Go(ask)) => assert_eq!(got, *ask, "{name}"),
            (BatchEntry::All(got), BatchAsk::All(parts)) => {
                assert_eq!(got.parts().map(Result::unwrap).collect::<Vec<_>>(), *parts, "{name}")
            }
            other => panic!("{name}: {other:?}"),
        }
    }
    let mut body = Vec::new();
    wire::encode_batch_entries(&sent, &mut body);
    body
}

/// One reply of a batch's entries as a case writes it.
fn entry_reply_of(r: &Value) -> EntryReply {
    match (r.get("go_reply"), r.get("all_reply")) {
        (Some(go), None) => EntryReply::Go(go_reply_of(go)),
        (None, Some(all)) => EntryReply::All(serde_json::from_value(all.clone()).expect("an all reply")),
        _ => panic!("a reply of an unknown kind: {r}"),
    }
}

/// The bytes of a batch's reply of `replies` (each a go reply or an
/// error), after checking that `want` reads back as them.
fn batch_reply_case(replies: &[Value], want: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    wire::begin_batch_reply(replies.len(), &mut body);
    let mut read = Vec::new();
    for r in replies {
        if let Some(go) = r.get("go_reply") {
            wire::encode_go_reply(&go_reply_of(go), &mut body);
            read.push(Ok(go_reply_of(go)));
        } else {
            let error = r["error"].as_str().unwrap().to_owned();
            wire::encode(&ErrorReply { error: error.clone() }, &mut body);
            read.push(Err(error));
        }
    }
    assert_eq!(wire::decode_batch_reply(want), Ok(Reply::Answer(read.clone())));
    let mut kinds = Vec::new();
    assert_eq!(wire::classify_batch_reply(want, |k| kinds.push(k)), replies.len());
    let want_kinds: Vec<_> = read.iter().map(|r| if r.is_ok() { ReplyKind::Go } else { ReplyKind::Error }).collect();
    assert_eq!(kinds, want_kinds);
    body
}

/// The cases in `tests/golden/combined.json` of limits checked together,
/// refunds and resets: each message as the Rust client writes it and as
/// the locker reads it. The cases of limits sent with the ask (`terms`)
/// are read by `asks_with_terms_hold_to_the_combined_golden_file`.
#[test]
fn the_combined_golden_file_holds_for_the_rust_side() {
    let mut seen = 0;
    for case in &cases("combined.json") {
        let (name, want) = named_bytes(case);
        let read = wire::decode_request(&want);
        let s = |v: &Value, f: &str| v.get(f).and_then(Value::as_str).map(str::to_owned);
        let got = if let Some(all) = case.get("all") {
            let asks: Vec<Ask> = all["asks"].as_array().unwrap().iter().map(ask_of).collect();
            let n = |f: &str| all.get(f).and_then(Value::as_u64);
            let Ok(Request::All(read)) = read else { panic!("{name}: not an all: {read:?}") };
            assert_eq!(read.parts().map(Result::unwrap).collect::<Vec<_>>(), asks, "{name}");
            assert_eq!((read.max_wait_ms, read.hold_ms), (n("max_wait_ms"), n("hold_ms")), "{name}");
            let mut body = Vec::new();
            wire::encode_all(&asks, n("max_wait_ms"), n("hold_ms"), &mut body);
            body
        } else if let Some(r) = case.get("all_reply") {
            let reply: AllReply = serde_json::from_value(r.clone()).expect("an all reply");
            assert_eq!(wire::decode_all_reply(&want), Ok(Reply::Answer(reply.clone())), "{name}");
            encoded_bytes(&reply)
        } else if let Some(r) = case.get("refund") {
            let (limit, key, pairs) = (s(r, "limit"), s(r, "key"), parent_pairs(r));
            let cost = r["cost"].as_u64().unwrap();
            let parents = (!pairs.is_empty()).then(|| Parents::new(&pairs));
            let refund = Refund { limit: limit.as_deref(), key: key.as_deref(), cost, parents };
            assert_eq!(read, Ok(Request::Refund(refund)), "{name}");
            encoded_bytes(&refund.to_map())
        } else if let Some(r) = case.get("charge") {
            let (limit, key, pairs) = (s(r, "limit"), s(r, "key"), parent_pairs(r));
            let cost = r["cost"].as_u64().unwrap();
            let parents = (!pairs.is_empty()).then(|| Parents::new(&pairs));
            let charge = Charge { limit: limit.as_deref(), key: key.as_deref(), cost, parents };
            assert_eq!(read, Ok(Request::Charge(charge)), "{name}");
            encoded_bytes(&charge.to_map())
        } else if let Some(r) = case.get("charge_reply") {
            let reply: ChargeReply = serde_json::from_value(r.clone()).expect("a charge's reply");
            assert_eq!(wire::decode_charge_reply(&want), Ok(Reply::Answer(reply)), "{name}");
            let mut fast = Vec::new();
            wire::encode_charge_reply(&reply.go(), reply.debt, &mut fast);
            assert_eq!(hex(&fast), hex(&want), "{name}: as the locker writes it");
            encoded_bytes(&reply)
        } else if let Some(r) = case.get("reset") {
            let (limit, key) = (s(r, "limit"), s(r, "key"));
            let reset = Reset { limit: limit.as_deref(), key: key.as_deref() };
            assert_eq!(read, Ok(Request::Reset(reset)), "{name}");
            encoded_bytes(&reset.to_map())
        } else if let Some(a) = case.get("ask_with_parents") {
            let pairs = parent_pairs(a);
            let ask = Ask { parents: Some(Parents::new(&pairs)), ..ask_of(a) };
            assert_eq!(read, Ok(Request::Go(ask)), "{name}");
            // Read the same as a batch's entry, and as a part of an `all`.
            let mut batch = Vec::new();
            wire::encode_batch(&[ask], &mut batch);
            let Ok(Request::Batch(b)) = wire::decode_request(&batch) else { panic!("{name}: a batch") };
            assert_eq!(b.iter().collect::<Vec<_>>(), [Ok(ask)], "{name}");
            let mut all = Vec::new();
            wire::encode_all(&[ask], None, None, &mut all);
            let Ok(Request::All(all)) = wire::decode_request(&all) else { panic!("{name}: an all") };
            assert_eq!(all.parts().collect::<Vec<_>>(), [Ok(ask)], "{name}");
            encoded_bytes(&ask.to_map())
        } else {
            assert!(case.get("ask").is_some_and(|a| a.get("terms").is_some()), "{name}: a case of an unknown kind");
            continue;
        };
        assert_eq!(hex(&got), hex(&want), "{name}");
        seen += 1;
    }
    assert_eq!(
        seen, 13,
        "three of all, three of its reply, two refunds, two charges, a charge's reply, a reset and an ask with parents"
    );
}

/// The cases in `tests/golden/peer.json`: each message written as its
/// bytes and read back, its sender the first of its nodes; a case that
/// `reads_as_peer` (an older peer's) is read only.
#[test]
fn the_peer_golden_file_holds() {
    let cases = cases("peer.json");
    assert!(cases.len() >= 6);
    for case in &cases {
        let (name, want) = named_bytes(case);
        let (value, written) = match (case.get("peer"), case.get("reads_as_peer")) {
            (Some(v), None) => (v, true),
            (None, Some(v)) => (v, false),
            _ => panic!("{name}: a case of an unknown kind"),
        };
        let msg: PeerMsg = serde_json::from_value(value.clone()).expect(name);
        if written {
            assert_eq!(hex(&encoded_bytes(&msg)), hex(&want), "{name}");
        }
        assert_eq!(wire::decode_peer(&want).as_ref(), Ok(&msg), "{name}");
        assert_eq!(msg.kind(), serde_json::from_value(value["kind"].clone()).unwrap(), "{name}");
        let first: wire::PeerNode = serde_json::from_value(value["nodes"][0].clone()).expect(name);
        assert_eq!(msg.sender(), &first, "{name}");
    }
}

/// An older locker's `asked` (the demand figures of the former split) is
/// read and skipped: the message is understood, its figures count for
/// nothing, and no message is written with them.
#[test]
fn a_peer_message_with_asked_is_read_and_its_figures_skipped() {
    let case = cases("peer.json").into_iter().find(|c| c["reads_as_peer"].get("asked").is_some()).expect("asked");
    let (_, bytes) = named_bytes(&case);
    let Ok(PeerMsg::Counts(part)) = wire::decode_peer(&bytes) else { panic!("a message of counts") };
    assert_eq!(part.nodes, [wire::PeerNode("a".into(), 7)]);
    assert!(part.is_empty(), "asked is not a count, a want or a gift");
    let mut again = Vec::new();
    wire::encode(&PeerMsg::Counts(part), &mut again);
    assert!(again.len() < bytes.len() && !hex(&again).contains(&hex(b"asked")), "asked is not written");
}

/// A peer built before `asked` and `seen` existed, or before the flags
/// and counts, reads every message of `peer.json`: it skips what it does
/// not know.
#[test]
fn an_older_peer_reads_every_peer_message() {
    #[derive(serde::Deserialize)]
    #[allow(dead_code)]
    struct OlderPeerMsg {
        kind: PeerKind,
        nodes: Vec<wire::PeerNode>,
        at: u64,
    }
    for case in cases("peer.json") {
        let (name, bytes) = named_bytes(&case);
        let older: OlderPeerMsg = rmp_serde::from_slice(&bytes).expect("unknown fields are skipped");
        assert_eq!(older.at, wire::decode_peer(&bytes).unwrap().at(), "{name}");
    }
}

/// A peer built before limits carried terms reads each limit's
/// `[name, digest]` beside them: the terms are a field of their own, since
/// a third element in a limit's entry would make it refuse the whole
/// heartbeat.
#[test]
fn an_older_peer_reads_the_limits_of_a_message_with_terms() {
    #[derive(serde::Deserialize)]
    struct OlderPeerMsg {
        #[serde(default)]
        limits: Vec<wire::PeerLimit>,
    }
    #[derive(serde::Serialize)]
    struct Entry(&'static str, u64, &'static str);
    let case = cases("peer.json").into_iter().find(|c| c["peer"].get("terms").is_some()).expect("a case with terms");
    let (_, bytes) = named_bytes(&case);
    let older: OlderPeerMsg = rmp_serde::from_slice(&bytes).expect("terms are skipped");
    assert_eq!(older.limits, wire::decode_peer(&bytes).unwrap().about().unwrap().limits);
    assert!(!older.limits.is_empty());
    let mut longer = Vec::new();
    wire::encode(&serde_json::json!({"limits": [Entry("t", 1, "fixed-window")]}), &mut longer);
    assert!(rmp_serde::from_slice::<OlderPeerMsg>(&longer).is_err(), "a longer entry is refused");
}

/// A peer built before declarations named runs reads the members a
/// heartbeat declared dead from `dead`, which still names their ids, and
/// skips `dead_runs`; this version reads the runs.
#[test]
fn an_older_peer_reads_the_ids_of_a_heartbeat_that_declares_runs() {
    #[derive(serde::Deserialize)]
    struct OlderPeerMsg {
        dead: Vec<String>,
        holds: Vec<String>,
    }
    let case = cases("peer.json").into_iter().find(|c| c["peer"].get("dead_runs").is_some()).expect("dead_runs");
    let (_, bytes) = named_bytes(&case);
    let older: OlderPeerMsg = rmp_serde::from_slice(&bytes).expect("dead_runs is skipped");
    assert_eq!((older.dead, older.holds), (vec!["c".to_string()], vec!["c".to_string()]));
    let Ok(PeerMsg::Beat(beat)) = wire::decode_peer(&bytes) else { panic!("a heartbeat") };
    assert_eq!(beat.tenure.dead_runs, [("c".to_string(), 5)]);
}

#[test]
fn a_peer_message_must_be_a_map_with_its_fields() {
    assert!(wire::decode_peer(b"let me go").is_err());
    assert!(wire::decode_peer(&[0x81, 0xa1, 0x78, 0xc0]).is_err(), "a map without the fields");
    let mut senderless = Vec::new();
    wire::encode(&serde_json::json!({"kind": "counts", "nodes": [], "at": 9}), &mut senderless);
    assert!(wire::decode_peer(&senderless).is_err(), "a message without a sender");
}

#[test]
fn plain_replies_are_the_seeds_bytes() {
    assert_eq!(wire::GO, b"go");
    assert_eq!(wire::SORRY, b"sorry");
}

#[test]
fn plain_requests_are_anything_but_a_map() {
    for body in [&b"let me go"[..], b"", b"api", &[0x00], &[0x90], &[0xc0], &[0xff, 0xfe]] {
        assert_eq!(wire::decode_request(body), Ok(Request::Plain(body)), "{body:?}");
    }
}

#[test]
fn replies_round_trip_through_the_client_decoder() {
    let mut out = Vec::new();
    let go = GoReply {
        ok: false,
        limit: 1,
        remaining: 0,
        retry_after_ms: 9,
        reset_after_ms: 9,
        granted: None,
        wait_ms: None,
        shadow_sorry: false,
    };
    wire::encode(&go, &mut out);
    assert_eq!(wire::decode_reply::<GoReply>(&out), Ok(Reply::Answer(go)));
    out.clear();
    wire::encode(&ErrorReply { error: "no".into() }, &mut out);
    assert_eq!(wire::decode_reply::<GoReply>(&out), Ok(Reply::Refused("no".into())));
    out.clear();
    let stats = StatsReply {
        limits: vec![LimitStatsReply {
            name: "default".into(),
            max_requests: 1,
            in_seconds: 1.0,
            ..Default::default()
        }],
        errors: 3,
        live_keys: 2,
        ..Default::default()
    };
    wire::encode(&stats, &mut out);
    assert_eq!(wire::decode_reply::<StatsReply>(&out), Ok(Reply::Answer(stats)));
}

#[test]
fn malformed_structured_requests_are_errors() {
    use wire::WireError::*;
    let cases: &[(&[u8], &str)] = &[
        (b"\x81\xa2op\xa4jump", "unknown op"),
        (b"\x81\xa3key\x05", "field \"key\" must be a string, found an integer"),
        (b"\x81\xa4cost\xff", "integer `-1`, expected u64"),
        (b"\x81\xa4cost\xa1x", "wrong type"),
        (b"\x81\xa2op", "ends in the middle"),
        (b"\x80\x00", "trailing bytes"),
        // Bytes that do not form a whole value are no less trailing (issue 11).
        (b"\x81\xa2op\xa2go\xc1", "trailing bytes"),
        (b"\x81\xa2op\xa2go\xb1", "trailing bytes"),
        (b"\x81\xa2op\xa2go\x91", "trailing bytes"),
        (b"\x81\xa2op\xa5stats\x81\xa1x", "trailing bytes"),
        (b"\x82\xa2op\xa9heartbeat\xa5lease\xa1x\xdb\x00", "trailing bytes"),
        (b"\x82\xa2op\xa2go\xa2op\xa2go", "duplicate"),
    ];
    for (body, want) in cases {
        let err = wire::decode_request(body).expect_err(&hex(body));
        assert!(err.to_string().contains(want), "{}: {err}", hex(body));
    }
    // An ignored field nested far too deep.
    let mut deep = b"\x81\xa1x".to_vec();
    deep.extend(std::iter::repeat_n(0x91, 100_000));
    deep.push(0x00);
    assert_eq!(wire::decode_request(&deep), Err(TooDeep));
    // Unknown fields within the depth cap are ignored.
    assert!(
        matches!(wire::decode_request(b"\x82\xa5extra\x91\x91\x01\xa4cost\x02"), Ok(Request::Go(a)) if a.cost == 2)
    );
}

#[test]
fn the_load_generator_reads_replies_of_both_forms() {
    let go = |ok| GoReply {
        ok,
        limit: 5,
        remaining: 0,
        retry_after_ms: 0,
        reset_after_ms: 9,
        granted: Some(1),
        wait_ms: None,
        shadow_sorry: false,
    };
    assert_eq!(wire::classify_reply(b"go"), ReplyKind::Go);
    assert_eq!(wire::classify_reply(b"sorry"), ReplyKind::Sorry);
    assert_eq!(wire::classify_reply(&encoded_bytes(&go(true))), ReplyKind::Go);
    assert_eq!(wire::classify_reply(&encoded_bytes(&go(false))), ReplyKind::Sorry);
    assert_eq!(wire::classify_reply(&encoded_bytes(&ErrorReply { error: "no".into() })), ReplyKind::Error);
    assert_eq!(wire::classify_reply(b""), ReplyKind::Error);
    assert_eq!(wire::classify_reply(b"gone"), ReplyKind::Error);
}

/// Requests are read exactly as docs/wire.md describes them: field names
/// are strings (an integer name is not read as a field's position), string
/// fields hold strings (not binary data), and the error names the real
/// problem, in a batch as anywhere else.
#[test]
fn requests_are_read_only_as_the_contract_describes() {
    let cases: &[(&[u8], &str)] = &[
        // {0: "acquire", 1: "sem"} used to acquire a lease.
        (b"\x82\x00\xa7acquire\x01\xa3sem", "field names must be strings, found an integer"),
        // {"op": "go", "limit": b"api"}
        (b"\x82\xa2op\xa2go\xa5limit\xc4\x03api", "field \"limit\" must be a string, found binary data"),
        // {"op": b"stats"}
        (b"\x81\xa2op\xc4\x05stats", "field \"op\" must be a string, found binary data"),
        // {"op": "batch", "asks": [{"key": "a"}], 7: 1} was "needs one array of asks".
        (b"\x83\xa2op\xa5batch\xa4asks\x91\x81\xa3key\xa1a\x07\x01", "field names must be strings, found an integer"),
        // {"op": "batch", "asks": [{"key": b"a"}]}
        (b"\x82\xa2op\xa5batch\xa4asks\x91\x81\xa3key\xc4\x01a", "field \"key\" must be a string, found binary data"),
        // {"op": "heartbeat", "lease": 7}
        (b"\x82\xa2op\xa9heartbeat\xa5lease\x07", "field \"lease\" must be a string, found an integer"),
    ];
    for (body, want) in cases {
        let err = wire::decode_request(body).expect_err(&hex(body));
        assert!(err.to_string().contains(want), "{}: {err}", hex(body));
    }
}

/// The asks of `tests/golden/combined.json` that carry their limit's
/// terms: written after the ask's own fields, `in_seconds` always a float,
/// `burst` only for a token bucket; read back as the same ask, alone and
/// as a batch's entry.
#[test]
fn asks_with_terms_hold_to_the_combined_golden_file() {
    let cases = cases("combined.json");
    let asks: Vec<&Value> = cases.iter().filter(|c| c.get("ask").is_some()).collect();
    assert!(asks.len() >= 2, "the file has asks with terms");
    for case in asks {
        let (name, want) = named_bytes(case);
        let ask = ask_of(&case["ask"]);
        assert!(ask.terms.is_some(), "{name}");
        assert_eq!(wire::decode_request(&want), Ok(Request::Go(ask)), "{name}");
        assert_eq!(hex(&encoded_bytes(&ask.to_map())), hex(&want), "{name}");
        let batch = encoded_bytes(&RequestMap { op: Some("batch"), ..RequestMap::default() });
        // A batch of this one entry: the map's op, then `asks` with the entry's bytes.
        let mut body = vec![0x82];
        body.extend_from_slice(&batch[1..]);
        body.extend_from_slice(b"\xa4asks\x91");
        body.extend_from_slice(&encoded_bytes(&ask.to_entry()));
        let Ok(Request::Batch(b)) = wire::decode_request(&body) else { panic!("{name}: a batch") };
        assert_eq!(b.iter().collect::<Vec<_>>(), [Ok(ask)], "{name}");
    }
}

#[test]
fn terms_take_an_integer_in_seconds_and_default_to_a_fixed_window() {
    // {"op": "go", "limit": "t", "terms": {"max_requests": 3, "in_seconds": 2}}
    let body = b"\x83\xa2op\xa2go\xa5limit\xa1t\xa5terms\x82\xacmax_requests\x03\xaain_seconds\x02";
    let want = Ask::new().limit("t").terms(Terms::new("fixed-window", 3, 2.0));
    assert_eq!(wire::decode_request(body), Ok(Request::Go(want)));
    // Terms that are not a map, or lack a field, are a bad request.
    let no_secs = b"\x82\xa5limit\xa1t\xa5terms\x81\xacmax_requests\x03";
    let e = wire::decode_request(no_secs).unwrap_err().to_string();
    assert!(e.contains("in_seconds"), "{e}");
    assert!(wire::decode_request(b"\x82\xa5limit\xa1t\xa5terms\x03").is_err());
}
