//! Golden bytes: the wire format may not drift unnoticed. The first two
//! messages are the README's examples; the rest pin the fields and ops for
//! reservations, batches and leases, which are additive: a request or reply
//! that does not use them keeps its old bytes.

use locker::wire::{self, GoReply, LeaseAsk, LeaseReply, Request, RequestMap};
use locker::Ask;

/// Bytes from hex, ignoring spaces.
fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

/// A MessagePack fixstr, written out by hand rather than by the encoder.
fn fixstr(s: &str) -> Vec<u8> {
    assert!(s.len() < 32);
    let mut out = vec![0xa0 | s.len() as u8];
    out.extend_from_slice(s.as_bytes());
    out
}

fn encoded<T: serde::Serialize>(value: &T) -> Vec<u8> {
    let mut out = Vec::new();
    wire::encode(value, &mut out);
    out
}

fn concat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

#[test]
fn the_readme_request_and_reply_keep_their_bytes() {
    let request = RequestMap { op: Some("go"), limit: Some("api"), key: Some("user-7"), ..RequestMap::default() };
    assert_eq!(
        encoded(&request),
        hex("83 a2 6f 70 a2 67 6f a5 6c 69 6d 69 74 a3 61 70 69 a3 6b 65 79 a6 75 73 65 72 2d 37")
    );
    let reply = GoReply {
        ok: true,
        limit: 5,
        remaining: 4,
        retry_after_ms: 0,
        reset_after_ms: 700,
        granted: None,
        wait_ms: None,
    };
    let expected = concat(&[
        &[0x85],
        &fixstr("ok"),
        &[0xc3],
        &fixstr("limit"),
        &[5],
        &fixstr("remaining"),
        &[4],
        &fixstr("retry_after_ms"),
        &[0],
        &fixstr("reset_after_ms"),
        &[0xcd, 0x02, 0xbc],
    ]);
    assert_eq!(encoded(&reply), expected);
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
    let bytes = encoded(&ask.to_map());
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
    let bytes = encoded(&reply);
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
    assert_eq!(encoded(&acquire.to_map()), expected);
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
    assert_eq!(encoded(&reply), expected);
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
