//! Golden bytes for both wire forms. A change that alters any of these
//! breaks deployed clients, so it must be deliberate: update the README's
//! wire contract in the same change.

use locker::wire::{self, Ask, ErrorReply, GoReply, LimitStatsReply, Reply, Request, RequestMap, StatsReply};

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(" ")
}

fn encoded<T: serde::Serialize>(value: &T) -> String {
    let mut out = Vec::new();
    wire::encode(value, &mut out);
    hex(&out)
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
    let want = Ask { limit: Some("api"), key: Some("user-7"), cost: 1 };
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
    let reply = GoReply { ok: true, limit: 5, remaining: 4, retry_after_ms: 0, reset_after_ms: 700 };
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
    let go = GoReply { ok: false, limit: 1, remaining: 0, retry_after_ms: 9, reset_after_ms: 9 };
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
    };
    wire::encode(&stats, &mut out);
    assert_eq!(wire::decode_reply::<StatsReply>(&out), Ok(Reply::Answer(stats)));
}

#[test]
fn malformed_structured_requests_are_errors() {
    use wire::WireError::*;
    let cases: &[(&[u8], &str)] = &[
        (b"\x81\xa2op\xa4jump", "unknown op"),
        (b"\x81\xa3key\x05", "invalid type: integer `5`, expected a string"),
        (b"\x81\xa4cost\xff", "integer `-1`, expected u64"),
        (b"\x81\xa4cost\xa1x", "wrong type"),
        (b"\x81\xa2op", "ends in the middle"),
        (b"\x80\x00", "trailing bytes"),
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
