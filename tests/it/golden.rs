//! Golden bytes for both wire forms and for the peer messages, in one place;
//! the cases both clients share (asks, stats, replies) are in
//! `tests/golden/wire.json`, which the Python client's tests read too.
//! A change that alters any of these breaks deployed clients or peers
//! running the previous version, so it must be deliberate: update the
//! README's wire contract in the same change.

use locker::wire::{
    self, Ask, ErrorReply, GoReply, LeaseAsk, LeaseReply, LimitStatsReply, PeerCount, PeerGift, PeerKind, PeerMsg,
    PeerNode, PeerSeen, Reply, ReplyKind, Request, RequestMap, StatsReply,
};

/// A MessagePack fixstr, written out by hand rather than by the encoder.
fn fixstr(s: &str) -> Vec<u8> {
    assert!(s.len() < 32);
    let mut out = vec![0xa0 | s.len() as u8];
    out.extend_from_slice(s.as_bytes());
    out
}

fn concat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(" ")
}

fn encoded_bytes<T: serde::Serialize>(value: &T) -> Vec<u8> {
    let mut out = Vec::new();
    wire::encode(value, &mut out);
    out
}

fn encoded<T: serde::Serialize>(value: &T) -> String {
    hex(&encoded_bytes(value))
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
fn the_readme_request_example_decodes() {
    // {"op": "go", "limit": "api", "key": "user-7"}, as written in the README.
    let bytes = b"\x83\xa2op\xa2go\xa5limit\xa3api\xa3key\xa6user-7";
    assert_eq!(bytes.len(), 28);
    let want = Ask::new().limit("api").key("user-7");
    assert_eq!(wire::decode_request(bytes), Ok(Request::Go(want)));
}

#[test]
fn an_ask_encodes_as_a_named_map() {
    let ask = Ask::new().limit("api").key("k").cost(2);
    assert_eq!(
        encoded(&ask.to_map()),
        "84 a2 6f 70 a2 67 6f a5 6c 69 6d 69 74 a3 61 70 69 a3 6b 65 79 a1 6b a4 63 6f 73 74 02"
    );
    // Absent fields are left out, not sent as nil.
    assert_eq!(encoded(&Ask::new().to_map()), "82 a2 6f 70 a2 67 6f a4 63 6f 73 74 01");
}

#[test]
fn a_stats_request_is_one_field() {
    let stats = RequestMap { op: Some("stats"), ..RequestMap::default() };
    assert_eq!(encoded(&stats), "81 a2 6f 70 a5 73 74 61 74 73");
    assert_eq!(wire::decode_request(b"\x81\xa2op\xa5stats"), Ok(Request::Stats));
}

#[test]
fn a_go_reply_encodes_as_the_readme_says() {
    let reply = GoReply {
        ok: true,
        limit: 5,
        remaining: 4,
        retry_after_ms: 0,
        reset_after_ms: 700,
        granted: None,
        wait_ms: None,
    };
    assert_eq!(
        encoded(&reply),
        "85 a2 6f 6b c3 a5 6c 69 6d 69 74 05 a9 72 65 6d 61 69 6e 69 6e 67 04 \
         ae 72 65 74 72 79 5f 61 66 74 65 72 5f 6d 73 00 \
         ae 72 65 73 65 74 5f 61 66 74 65 72 5f 6d 73 cd 02 bc"
    );
}

#[test]
fn an_error_reply_is_a_map_with_one_field() {
    let reply = ErrorReply { error: "unknown limit \"x\"".into() };
    assert_eq!(encoded(&reply), "81 a5 65 72 72 6f 72 b1 75 6e 6b 6e 6f 77 6e 20 6c 69 6d 69 74 20 22 78 22");
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
fn a_reservation_and_batch_request_and_its_reply() {
    let ask = Ask::new().limit("api").cost(3).up_to().max_wait_ms(500);
    let expected = concat(&[
        &[0x85],
        &fixstr("op"),
        &fixstr("go"),
        &fixstr("limit"),
        &fixstr("api"),
        &fixstr("cost"),
        &[3],
        &fixstr("up_to"),
        &[0xc3],
        &fixstr("max_wait_ms"),
        &[0xcd, 0x01, 0xf4],
    ]);
    let bytes = encoded_bytes(&ask.to_map());
    assert_eq!(bytes, expected);
    assert_eq!(wire::decode_request(&bytes).unwrap(), Request::Go(ask));
    let reply = GoReply {
        ok: true,
        limit: 5,
        remaining: 0,
        retry_after_ms: 0,
        reset_after_ms: 700,
        granted: Some(2),
        wait_ms: Some(300),
    };
    let tail = concat(&[&fixstr("granted"), &[2], &fixstr("wait_ms"), &[0xcd, 0x01, 0x2c]]);
    let bytes = encoded_bytes(&reply);
    assert_eq!(bytes[0], 0x87);
    assert!(bytes.ends_with(&tail), "{bytes:02x?}");
}

#[test]
fn a_lease_acquire_and_its_reply() {
    let acquire = LeaseAsk::new("db", 2).ttl_ms(5_000);
    let expected = concat(&[
        &[0x84],
        &fixstr("op"),
        &fixstr("acquire"),
        &fixstr("limit"),
        &fixstr("db"),
        &fixstr("count"),
        &[2],
        &fixstr("ttl_ms"),
        &[0xcd, 0x13, 0x88],
    ]);
    assert_eq!(encoded_bytes(&acquire.to_map()), expected);
    let reply = LeaseReply {
        ok: true,
        lease: Some("00000000000000ab-1".into()),
        pending: false,
        limit: 4,
        remaining: 2,
        expires_in_ms: 5_000,
    };
    let expected = concat(&[
        &[0x86],
        &fixstr("ok"),
        &[0xc3],
        &fixstr("lease"),
        &fixstr("00000000000000ab-1"),
        &fixstr("pending"),
        &[0xc2],
        &fixstr("limit"),
        &[4],
        &fixstr("remaining"),
        &[2],
        &fixstr("expires_in_ms"),
        &[0xcd, 0x13, 0x88],
    ]);
    assert_eq!(encoded_bytes(&reply), expected);
}

#[test]
fn heartbeat_and_release_carry_the_lease_and_unknown_fields_are_ignored() {
    let beat = concat(&[
        &[0x85],
        &fixstr("op"),
        &fixstr("heartbeat"),
        &fixstr("limit"),
        &fixstr("db"),
        &fixstr("lease"),
        &fixstr("ab-1"),
        &fixstr("count"),
        &[2],
        &fixstr("future"),
        &[0xc3],
    ]);
    let Request::Heartbeat(h) = wire::decode_request(&beat).unwrap() else { panic!("not a heartbeat") };
    assert_eq!((h.limit, h.lease, h.count, h.ttl_ms), (Some("db"), "ab-1", Some(2), None));
    let release = concat(&[&[0x82], &fixstr("op"), &fixstr("release"), &fixstr("lease"), &fixstr("ab-1")]);
    let Request::Release(r) = wire::decode_request(&release).unwrap() else { panic!("not a release") };
    assert_eq!((r.limit, r.lease), (None, "ab-1"));
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
    };
    assert_eq!(wire::classify_reply(b"go"), ReplyKind::Go);
    assert_eq!(wire::classify_reply(b"sorry"), ReplyKind::Sorry);
    assert_eq!(wire::classify_reply(&encoded_bytes(&go(true))), ReplyKind::Go);
    assert_eq!(wire::classify_reply(&encoded_bytes(&go(false))), ReplyKind::Sorry);
    assert_eq!(wire::classify_reply(&encoded_bytes(&ErrorReply { error: "no".into() })), ReplyKind::Error);
    assert_eq!(wire::classify_reply(b""), ReplyKind::Error);
    assert_eq!(wire::classify_reply(b"gone"), ReplyKind::Error);
}

fn peer_round_trip(msg: &PeerMsg, expected: &[u8]) {
    let bytes = encoded_bytes(msg);
    assert_eq!(hex(&bytes), hex(expected));
    assert_eq!(wire::decode_peer(&bytes).as_ref(), Ok(msg));
}

#[test]
fn a_peer_heartbeat_has_pinned_bytes() {
    let beat = PeerMsg {
        kind: PeerKind::Beat,
        nodes: vec![PeerNode("b".into(), 1)],
        at: 1_700_000_000_000_000_000,
        joining: true,
        done: false,
        counts: vec![],
        limits: vec![],
        asked: vec![],
        seen: vec![],
        wanted: vec![],
        gave: vec![],
    };
    let expected = concat(&[
        &[0x86],
        &fixstr("kind"),
        &fixstr("beat"),
        &fixstr("nodes"),
        &[0x91, 0x92],
        &fixstr("b"),
        &[0x01],
        &fixstr("at"),
        &[0xcf, 0x17, 0x97, 0x9c, 0xfe, 0x36, 0x2a, 0x00, 0x00],
        &fixstr("joining"),
        &[0xc3],
        &fixstr("done"),
        &[0xc2],
        &fixstr("counts"),
        &[0x90],
    ]);
    peer_round_trip(&beat, &expected);
}

#[test]
fn peer_counts_have_pinned_bytes() {
    let msg = PeerMsg {
        kind: PeerKind::Counts,
        nodes: vec![PeerNode("a".into(), 7)],
        at: 9,
        joining: false,
        done: false,
        counts: vec![PeerCount("api".into(), Some("k".into()), 3, 0, 5)],
        limits: vec![],
        asked: vec![],
        seen: vec![],
        wanted: vec![],
        gave: vec![],
    };
    let expected: &[u8] = &[
        0x86, // a map of 6
        0xa4, b'k', b'i', b'n', b'd', 0xa6, b'c', b'o', b'u', b'n', b't', b's', // kind: "counts"
        0xa5, b'n', b'o', b'd', b'e', b's', 0x91, 0x92, 0xa1, b'a', 0x07, // nodes: [["a", 7]]
        0xa2, b'a', b't', 0x09, // at: 9
        0xa7, b'j', b'o', b'i', b'n', b'i', b'n', b'g', 0xc2, // joining: false
        0xa4, b'd', b'o', b'n', b'e', 0xc2, // done: false
        0xa6, b'c', b'o', b'u', b'n', b't', b's', // counts:
        0x91, 0x95, 0xa3, b'a', b'p', b'i', 0xa1, b'k', 0x03, 0x00, 0x05, // [["api", "k", 3, 0, 5]]
    ];
    peer_round_trip(&msg, expected);
}

/// Issue 37: a want and a gift of conserved permits, as the last two
/// fields of a peer message; a locker built before them skips both.
#[test]
fn wants_and_gifts_have_pinned_bytes_and_an_older_peer_skips_them() {
    let msg = PeerMsg {
        kind: PeerKind::Counts,
        nodes: vec![PeerNode("a".into(), 7), PeerNode("b".into(), 8)],
        at: 9,
        joining: false,
        done: false,
        counts: vec![],
        limits: vec![],
        asked: vec![],
        seen: vec![],
        wanted: vec![PeerCount("api".into(), Some("k".into()), 3, 0, 4)],
        gave: vec![PeerGift("api".into(), None, 3, 0, 1, 2)],
    };
    let expected = concat(&[
        &[0x88], // a map of 8: `wanted` and `gave` after the six fields always sent
        &fixstr("kind"),
        &fixstr("counts"),
        &fixstr("nodes"),
        &[0x92, 0x92, 0xa1, b'a', 0x07, 0x92, 0xa1, b'b', 0x08],
        &fixstr("at"),
        &[0x09],
        &fixstr("joining"),
        &[0xc2],
        &fixstr("done"),
        &[0xc2],
        &fixstr("counts"),
        &[0x90],
        &fixstr("wanted"),
        &[0x91, 0x95, 0xa3, b'a', b'p', b'i', 0xa1, b'k', 0x03, 0x00, 0x04],
        &fixstr("gave"),
        // ["api", nil, 3, giver 0, receiver 1, 2]
        &[0x91, 0x96, 0xa3, b'a', b'p', b'i', 0xc0, 0x03, 0x00, 0x01, 0x02],
    ]);
    peer_round_trip(&msg, &expected);
    #[derive(serde::Deserialize)]
    #[allow(dead_code)]
    struct OlderPeerMsg {
        kind: PeerKind,
        nodes: Vec<PeerNode>,
        at: u64,
        counts: Vec<PeerCount>,
        #[serde(default)]
        asked: Vec<PeerCount>,
    }
    let older: OlderPeerMsg = rmp_serde::from_slice(&expected).expect("unknown fields are skipped");
    assert!(older.counts.is_empty() && older.asked.is_empty());
}

#[test]
fn demand_figures_have_pinned_bytes_and_an_older_peer_skips_them() {
    let msg = PeerMsg {
        kind: PeerKind::Counts,
        nodes: vec![PeerNode("a".into(), 7)],
        at: 9,
        joining: false,
        done: false,
        counts: vec![],
        limits: vec![],
        asked: vec![PeerCount("api".into(), Some("k".into()), 3, 0, 12)],
        seen: vec![],
        wanted: vec![],
        gave: vec![],
    };
    let expected = concat(&[
        &[0x87], // a map of 7: `asked` is the seventh field
        &fixstr("kind"),
        &fixstr("counts"),
        &fixstr("nodes"),
        &[0x91, 0x92, 0xa1, b'a', 0x07],
        &fixstr("at"),
        &[0x09],
        &fixstr("joining"),
        &[0xc2],
        &fixstr("done"),
        &[0xc2],
        &fixstr("counts"),
        &[0x90],
        &fixstr("asked"),
        &[0x91, 0x95, 0xa3, b'a', b'p', b'i', 0xa1, b'k', 0x03, 0x00, 0x0c],
    ]);
    peer_round_trip(&msg, &expected);
    // A peer built before `asked` existed decodes the same map without it.
    #[derive(serde::Deserialize)]
    #[allow(dead_code)]
    struct OlderPeerMsg {
        kind: PeerKind,
        nodes: Vec<PeerNode>,
        at: u64,
        counts: Vec<PeerCount>,
    }
    let older: OlderPeerMsg = rmp_serde::from_slice(&expected).expect("unknown fields are skipped");
    assert_eq!(older.at, 9);
}

#[test]
fn a_heartbeat_says_how_it_sees_each_peer_clock_and_an_older_peer_skips_it() {
    let beat = PeerMsg {
        kind: PeerKind::Beat,
        nodes: vec![PeerNode("a".into(), 7)],
        at: 9,
        joining: false,
        done: false,
        counts: vec![],
        limits: vec![],
        asked: vec![],
        seen: vec![PeerSeen("b".into(), -1500)],
        wanted: vec![],
        gave: vec![],
    };
    let expected = concat(&[
        &[0x87], // a map of 7: `seen` is the seventh field
        &fixstr("kind"),
        &fixstr("beat"),
        &fixstr("nodes"),
        &[0x91, 0x92, 0xa1, b'a', 0x07],
        &fixstr("at"),
        &[0x09],
        &fixstr("joining"),
        &[0xc2],
        &fixstr("done"),
        &[0xc2],
        &fixstr("counts"),
        &[0x90],
        &fixstr("seen"),
        &[0x91, 0x92, 0xa1, b'b', 0xd1, 0xfa, 0x24], // [["b", -1500]]
    ]);
    peer_round_trip(&beat, &expected);
    #[derive(serde::Deserialize)]
    #[allow(dead_code)]
    struct OlderPeerMsg {
        kind: PeerKind,
        at: u64,
    }
    let older: OlderPeerMsg = rmp_serde::from_slice(&expected).expect("unknown fields are skipped");
    assert_eq!(older.at, 9);
}

#[test]
fn the_last_part_of_a_snapshot_has_pinned_bytes() {
    // A count another node made, for an unkeyed limit: the node indexes
    // `nodes`, the key is nil.
    let part = PeerMsg {
        kind: PeerKind::Snapshot,
        nodes: vec![PeerNode("a".into(), 7), PeerNode("b".into(), 2)],
        at: 9,
        joining: false,
        done: true,
        counts: vec![PeerCount("api".into(), None, 3, 1, 200)],
        limits: vec![],
        asked: vec![],
        seen: vec![],
        wanted: vec![],
        gave: vec![],
    };
    let expected = concat(&[
        &[0x86],
        &fixstr("kind"),
        &fixstr("snapshot"),
        &fixstr("nodes"),
        &[0x92, 0x92, 0xa1, b'a', 0x07, 0x92, 0xa1, b'b', 0x02],
        &fixstr("at"),
        &[0x09],
        &fixstr("joining"),
        &[0xc2],
        &fixstr("done"),
        &[0xc3],
        &fixstr("counts"),
        &[0x91, 0x95, 0xa3, b'a', b'p', b'i', 0xc0, 0x03, 0x01, 0xcc, 0xc8],
    ]);
    peer_round_trip(&part, &expected);
    assert_eq!(part.sender(), Some(&PeerNode("a".into(), 7)));
}

#[test]
fn a_peer_message_may_leave_out_its_flags_and_counts_but_must_be_a_map() {
    // {"kind": "beat", "nodes": [["a", 7]], "at": 9}, as an older peer may send.
    let short = concat(&[
        &[0x83],
        &fixstr("kind"),
        &fixstr("beat"),
        &fixstr("nodes"),
        &[0x91, 0x92, 0xa1, b'a', 0x07],
        &fixstr("at"),
        &[0x09],
    ]);
    let msg = wire::decode_peer(&short).unwrap();
    assert_eq!((msg.kind, msg.joining, msg.done, msg.counts.len()), (PeerKind::Beat, false, false, 0));
    assert!(wire::decode_peer(b"let me go").is_err());
    assert!(wire::decode_peer(&[0x81, 0xa1, 0x78, 0xc0]).is_err(), "a map without the fields");
}

#[test]
fn a_batch_of_asks_and_its_reply() {
    let mut body = Vec::new();
    wire::encode_batch(&[Ask::new().key("a"), Ask::new().limit("api").cost(2)], &mut body);
    let expected = concat(&[
        &[0x82],
        &fixstr("op"),
        &fixstr("batch"),
        &fixstr("asks"),
        &[0x92],
        &[0x82],
        &fixstr("key"),
        &fixstr("a"),
        &fixstr("cost"),
        &[1],
        &[0x82],
        &fixstr("limit"),
        &fixstr("api"),
        &fixstr("cost"),
        &[2],
    ]);
    assert_eq!(hex(&body), hex(&expected));
    let Ok(Request::Batch(batch)) = wire::decode_request(&body) else { panic!("not a batch") };
    let asks: Vec<Ask> = batch.iter().map(Result::unwrap).collect();
    assert_eq!(asks, [Ask::new().key("a"), Ask::new().limit("api").cost(2)]);

    // {"replies": [a go reply, {"error": "unknown limit \"x\""}]}
    let mut reply = Vec::new();
    wire::begin_batch_reply(2, &mut reply);
    let go = GoReply {
        ok: true,
        limit: 5,
        remaining: 4,
        retry_after_ms: 0,
        reset_after_ms: 700,
        granted: None,
        wait_ms: None,
    };
    wire::encode_go_reply(&go, &mut reply);
    wire::encode(&ErrorReply { error: "unknown limit \"x\"".into() }, &mut reply);
    let expected = concat(&[
        &[0x81],
        &fixstr("replies"),
        &[0x92],
        &encoded_bytes(&go),
        &[0x81],
        &fixstr("error"),
        &fixstr("unknown limit \"x\""),
    ]);
    assert_eq!(hex(&reply), hex(&expected));
    assert_eq!(wire::decode_batch_reply(&reply), Ok(Reply::Answer(vec![Ok(go), Err("unknown limit \"x\"".into())])));
    let mut kinds = Vec::new();
    assert_eq!(wire::classify_batch_reply(&reply, |k| kinds.push(k)), 2);
    assert_eq!(kinds, [ReplyKind::Go, ReplyKind::Error]);
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

/// The cases in `tests/golden/wire.json`, which the Python client's tests
/// read too: both clients are held to the same bytes.
#[test]
fn the_shared_golden_file_holds_for_the_rust_side() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/wire.json");
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let cases = doc["cases"].as_array().expect("cases");
    assert!(cases.len() >= 6);
    for case in cases {
        let (name, want) = (case["name"].as_str().unwrap(), case["hex"].as_str().unwrap());
        let got = if let Some(a) = case.get("ask") {
            let s = |f: &str| a.get(f).and_then(serde_json::Value::as_str);
            let n = |f: &str| a.get(f).and_then(serde_json::Value::as_u64);
            let ask = Ask {
                limit: s("limit"),
                key: s("key"),
                cost: n("cost").unwrap_or(1),
                up_to: a.get("up_to").and_then(serde_json::Value::as_bool).unwrap_or(false),
                max_wait_ms: n("max_wait_ms"),
                hold_ms: n("hold_ms"),
            };
            encoded(&ask.to_map())
        } else if case["request"] == "stats" {
            encoded(&RequestMap { op: Some("stats"), ..RequestMap::default() })
        } else if let Some(r) = case.get("go_reply") {
            let n = |f: &str| r[f].as_u64().unwrap();
            let reply = GoReply {
                ok: r["ok"].as_bool().unwrap(),
                limit: n("limit") as u32,
                remaining: n("remaining") as u32,
                retry_after_ms: n("retry_after_ms"),
                reset_after_ms: n("reset_after_ms"),
                granted: None,
                wait_ms: None,
            };
            encoded(&reply)
        } else if let Some(e) = case.get("error") {
            encoded(&ErrorReply { error: e.as_str().unwrap().to_owned() })
        } else {
            panic!("{name}: a case of an unknown kind");
        };
        assert_eq!(got, want, "{name}");
    }
}
