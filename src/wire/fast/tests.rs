//! Unit tests of `fast`.

use proptest::prelude::*;

use super::*;
use crate::wire;

fn serde_bytes<T: serde::Serialize>(value: &T) -> Vec<u8> {
    let mut out = Vec::new();
    wire::encode(value, &mut out);
    out
}

fn serde_map(body: &[u8]) -> Option<RequestMap<'_>> {
    rmp_serde::from_slice(body).ok()
}

/// Any optional number, small ones often.
fn small_or_any() -> impl Strategy<Value = Option<u64>> {
    proptest::option::of(prop_oneof![0..300u64, any::<u64>()])
}

/// The fields every ask has: an optional op, limit and key of these
/// patterns, an optional cost and an optional `up_to`.
#[allow(clippy::type_complexity)]
fn ask_fields(
    op: &'static str,
    limit: &'static str,
    key: &'static str,
) -> impl Strategy<Value = (Option<String>, Option<String>, Option<String>, Option<u64>, Option<bool>)> {
    use proptest::option::of;
    (of(op), of(limit), of(key), small_or_any(), any::<Option<bool>>())
}

/// The request map `read_request` reads, when it reads one.
fn decode_request_map(body: &[u8]) -> Option<RequestMap<'_>> {
    read_request(body).ok().flatten().map(|f| f.map)
}

/// What `decode_go_prefix` must give for a whole `body`: the request map's
/// one reading, for a go of the fields a go has.
fn go_by_map(body: &[u8]) -> Option<(Ask<'_>, usize)> {
    let map = decode_request_map(body)?;
    let go_fields = map.count.is_none() && map.ttl_ms.is_none() && map.lease.is_none();
    (matches!(map.op, None | Some("go")) && go_fields).then(|| (Ask::from_map(&map), body.len()))
}

/// A MessagePack fixstr.
fn fixstr(s: &str) -> Vec<u8> {
    [&[0xa0 | s.len() as u8][..], s.as_bytes()].concat()
}

/// A request map built from parts: names among a request's and a made-up
/// one (or an integer), values a string, binary data, an integer, nil or
/// an array of entries whose key is a string or binary data.
fn request_of(fields: &[(usize, usize, Vec<bool>)]) -> Vec<u8> {
    let mut body = vec![0x80 | fields.len() as u8];
    for (name, value, entries) in fields {
        match ["op", "asks", "key", "cost", "lease", "x"].get(*name) {
            Some(n) => body.extend(fixstr(n)),
            None => body.push(0x07),
        }
        match value {
            0 => body.extend(fixstr("batch")),
            1 => body.extend(fixstr("go")),
            2 => body.extend([0xc4, 0x01, b'a']),
            3 => body.push(0x05),
            4 => body.push(0xc0),
            _ => {
                body.push(0x90 | entries.len() as u8);
                for &binary in entries {
                    body.extend([0x81, 0xa3, b'k', b'e', b'y']);
                    body.extend(if binary { vec![0xc4, 0x01, b'a'] } else { fixstr("a") });
                }
            }
        }
    }
    body
}

proptest! {
    // `asks` arrays are drawn often, and many cases run: a repeated `asks`
    // whose second array holds a bad entry is one body in a few hundred.
    #![proptest_config(ProptestConfig::with_cases(4096))]

    /// The one reader holds a map to the contract exactly as the check
    /// does: the same first error, and no map read that the check refuses.
    #[test]
    fn the_reader_refuses_what_the_contract_check_refuses(
        fields in proptest::collection::vec(
            (
                prop_oneof![2 => Just(1usize), 3 => 0usize..7],
                prop_oneof![Just(5usize), 0usize..6],
                proptest::collection::vec(any::<bool>(), 0..3),
            ),
            0..5,
        ),
    ) {
        let body = request_of(&fields);
        match read_request(&body) {
            Err(WireError::NoAsks | WireError::TooManyAsks(_)) => {
                prop_assert_eq!(check_fields(&body), Ok(()));
            }
            Err(e) => prop_assert_eq!(check_fields(&body), Err(e)),
            Ok(Some(read)) => {
                prop_assert_eq!(check_fields(&body), Ok(()));
                if read.map.op == Some("batch") {
                    prop_assert!(read.asks.is_some(), "a batch read has its asks");
                }
            }
            Ok(None) => {}
        }
    }
}

proptest! {
    #[test]
    fn the_ascii_check_agrees_with_std(bytes in proptest::collection::vec(prop_oneof![0..0x80u8, any::<u8>()], 0..40)) {
        prop_assert_eq!(is_ascii(&bytes), bytes.is_ascii());
    }

    #[test]
    fn go_replies_encode_as_serde_does(
        ok: bool, limit: u32, remaining: u32,
        retry in prop_oneof![Just(0u64), 0..200u64, any::<u64>()],
        reset in prop_oneof![0..70_000u64, any::<u64>()],
        granted: Option<u32>,
        wait_ms in proptest::option::of(prop_oneof![0..1000u64, any::<u64>()]),
    ) {
        let reply = GoReply { ok, limit, remaining, retry_after_ms: retry, reset_after_ms: reset, granted, wait_ms, shadow_sorry: false };
        let mut out = Vec::new();
        encode_go_reply(&reply, &mut out);
        prop_assert_eq!(&out, &serde_bytes(&reply));
        prop_assert_eq!(go_reply_ok(&out), Some(ok));
    }

    #[test]
    fn request_maps_decode_as_serde_does(
        (op, limit, key, cost, up_to) in ask_fields("go|stats|[a-z]{0,3}", ".{0,40}", ".{0,300}"),
        max_wait_ms in small_or_any(),
    ) {
        let map = RequestMap {
            op: op.as_deref(),
            limit: limit.as_deref(),
            key: key.as_deref(),
            cost,
            up_to,
            max_wait_ms,
            ..RequestMap::default()
        };
        let body = serde_bytes(&map);
        prop_assert_eq!(decode_request_map(&body), Some(map));
        prop_assert_eq!(value_len(&body, 8), Some(body.len()));
        prop_assert_eq!(value_len(&body[..body.len() - 1], 8), None, "cut short");
    }

    #[test]
    fn any_bytes_decode_as_serde_does_or_fall_back(body in proptest::collection::vec(any::<u8>(), 0..40)) {
        match read_request(&body) {
            Ok(Some(fast)) => {
                // Read means held to the contract, as the check holds it.
                prop_assert_eq!(check_fields(&body), Ok(()));
                if fast.asks.is_none() {
                    prop_assert_eq!(Some(fast.map), serde_map(&body));
                }
            }
            Ok(None) => {}
            // An error the reader finds is the one the contract check finds.
            Err(e) => prop_assert_eq!(check_fields(&body), Err(e)),
        }
        // The go path gives up on more shapes (any other field) than the
        // reader; what it reads, the reader reads alike.
        if let Some(whole) = decode_go_prefix(&body).filter(|&(_, len)| len == body.len()) {
            prop_assert_eq!(Some(whole), go_by_map(&body));
        }
    }

    #[test]
    fn gos_decode_as_through_the_request_map(
        (op, limit, key, cost, up_to) in ask_fields("go|stats|g", "[a-z]{0,6}", ".{0,30}"),
        max_wait_ms in proptest::option::of(0..100_000u64),
        count in proptest::option::of(0..3u64),
        tail in proptest::collection::vec(any::<u8>(), 0..3),
    ) {
        let map = RequestMap { op: op.as_deref(), limit: limit.as_deref(), key: key.as_deref(), cost, up_to, max_wait_ms, count, ..RequestMap::default() };
        let clean = serde_bytes(&map);
        let body = [&clean[..], &tail].concat();
        let fast = decode_go_prefix(&body);
        prop_assert_eq!(fast, go_by_map(&clean), "the map is read up to its end, whatever follows");
        prop_assert_eq!(fast.is_some(), matches!(op.as_deref(), None | Some("go")) && count.is_none());
    }
}

#[test]
fn only_a_go_reply_reads_as_one() {
    assert_eq!(go_reply_ok(&serde_bytes(&wire::ErrorReply { error: "no".into() })), None);
    assert_eq!(go_reply_ok(b"go"), None);
    assert_eq!(go_reply_ok(b"\x85\xa2ok"), None, "cut short before the value");
    assert_eq!(go_reply_ok(b""), None);
}

#[test]
fn every_kind_of_value_is_measured_whole() {
    let value = (
        (-1i8, 300u16, -70_000i32, u64::MAX, 1.5f32, 2.5f64, "s", "x".repeat(40), "y".repeat(300)),
        (vec![true; 20], Vec::<u8>::new(), None::<u8>, -100_000_000_000i64),
        std::collections::BTreeMap::from([(1u8, "a"); 1]),
        (0..20u32).map(|i| (i, i)).collect::<std::collections::BTreeMap<_, _>>(),
    );
    let body = serde_bytes(&value);
    assert_eq!(value_len(&body, 8), Some(body.len()));
    for cut in 0..body.len() {
        assert_eq!(value_len(&body[..cut], 8), None, "cut at {cut}");
    }
    for ext in [
        &b"\xc4\x03bin"[..],
        b"\xd4\x01\x00",
        b"\xd8\x01\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f",
        b"\xc7\x02\x05ab",
    ] {
        assert_eq!(value_len(ext, 8), Some(ext.len()), "{ext:?}");
    }
    assert_eq!(value_len(b"\xc1", 8), None, "reserved");
    assert_eq!(value_len(b"\x91\x91\x91\x00", 4), Some(4));
    assert_eq!(value_len(b"\x91\x91\x91\x91\x00", 4), None, "nested too deep");
}

#[test]
fn uncommon_shapes_fall_back_to_serde() {
    let with = |extra: &[u8]| [&[0x82, 0xa2, b'o', b'p', 0xa2, b'g', b'o'][..], extra].concat();
    assert_eq!(decode_request_map(&with(&[0xa2, b'o', b'p', 0xa2, b'g', b'o'])), None, "a repeated field");
    assert_eq!(decode_request_map(&with(&[0xa4, b'c', b'o', b's', b't', 0xd0, 0x01])), None, "a signed cost");
    let mut trailing = serde_bytes(&RequestMap { op: Some("go"), ..RequestMap::default() });
    trailing.push(0xc0);
    assert_eq!(decode_request_map(&trailing), None, "trailing bytes");
    assert_eq!(decode_request_map(&[0x81, 0xa2, b'o', b'p', 0xa2, 0xff, 0xfe]), None, "invalid UTF-8");
}

#[test]
fn every_field_of_a_request_is_read_in_one_pass_and_unknown_ones_are_stepped_over() {
    let with = |extra: &[u8]| [&[0x82, 0xa2, b'o', b'p', 0xa2, b'g', b'o'][..], extra].concat();
    let unknown = with(&[0xa1, b'x', 0x91, 0x01]);
    assert_eq!(decode_request_map(&unknown), serde_map(&unknown), "an unknown field, as serde ignores it");
    let lease = with(&[0xa5, b'l', b'e', b'a', b's', b'e', 0xa1, b'x']);
    assert_eq!(decode_request_map(&lease).and_then(|m| m.lease), Some("x"));
    assert_eq!(decode_request_map(&lease), serde_map(&lease));
    let nil_key = with(&[0xa3, b'k', b'e', b'y', 0xc0]);
    assert_eq!(read_request(&nil_key), Err(WireError::NotAString("key".into(), "nil")), "held to the contract");
}

#[test]
fn a_batch_is_read_with_its_asks_and_held_to_the_contract() {
    // {"op": "batch", "asks": [{"key": "a"}, {}], "cost": "x"}: fields
    // other than `op` and `asks` do not matter to a batch.
    let body = b"\x83\xa2op\xa5batch\xa4asks\x92\x81\xa3key\xa1a\x80\xa4cost\xa1x";
    let fields = read_request(body).unwrap().unwrap();
    assert_eq!(fields.asks, Some((&b"\x81\xa3key\xa1a\x80"[..], 2)));
    assert_eq!(read_request(b"\x81\xa2op\xa5batch"), Err(WireError::NoAsks));
    let twice = b"\x83\xa2op\xa5batch\xa4asks\x90\xa4asks\x90";
    assert_eq!(read_request(twice), Ok(None), "asks twice: serde says");
    // {"op": "go", "asks": [], "asks": [{"key": b"a"}]}: a second array is
    // held to the contract as the first is, whatever the op.
    let second = b"\x83\xa2op\xa2go\xa4asks\x90\xa4asks\x91\x81\xa3key\xc4\x01a";
    assert_eq!(read_request(second), Err(WireError::NotAString("key".into(), "binary data")));
    assert_eq!(read_request(second), check_fields(second).map(|()| None));
    let bad_entry = b"\x82\xa2op\xa5batch\xa4asks\x91\x81\xa3key\xc4\x01a";
    assert_eq!(read_request(bad_entry), Err(WireError::NotAString("key".into(), "binary data")));
}
