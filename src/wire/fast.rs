//! Hand-written MessagePack for the two messages on every structured
//! request's path: the request map in, the go reply out (and the go reply's
//! first field read back, for the load generator). They give the same
//! values and the same bytes as the serde definitions in `wire` (the tests
//! below check this on generated values), at a fraction of the cost.
//!
//! The decoder is a fast path only: it reads the common shape of a go (a
//! flat map of `op`, `limit`, `key`, `cost`, `up_to` and `max_wait_ms`) and
//! answers `None` for anything else, any other field included, so that
//! `wire` falls back to the full serde decoder, which gives the same values
//! or the same errors. The encoder destructures `GoReply` field by field, so
//! a field added to it fails to compile here until this module learns it.
//! This module holds no state and makes no decisions. It depends on the
//! message types in `wire`; they never call it: the entry points in
//! `wire` (mod.rs) choose between it and serde.

use super::reply::GoReply;
use super::RequestMap;

/// Decodes a request map in its common shape, or `None` to leave it to the
/// serde decoder.
pub fn decode_request_map(body: &[u8]) -> Option<RequestMap<'_>> {
    let mut r = Reader { body, at: 0 };
    let fields = r.map_len()?;
    let mut map = RequestMap::default();
    for _ in 0..fields {
        // Field names are compared as bytes: only values need to be text. A
        // repeated field is an error for serde: leave it to serde.
        let fresh = match r.str_bytes()? {
            b"op" => map.op.replace(r.str()?).is_none(),
            b"limit" => map.limit.replace(r.str()?).is_none(),
            b"key" => map.key.replace(r.str()?).is_none(),
            b"cost" => map.cost.replace(r.uint()?).is_none(),
            b"up_to" => map.up_to.replace(r.bool()?).is_none(),
            b"max_wait_ms" => map.max_wait_ms.replace(r.uint()?).is_none(),
            _ => return None,
        };
        if !fresh {
            return None;
        }
    }
    (r.at == body.len()).then_some(map)
}

/// Appends the encoding of `reply` to `out`: the bytes `wire::encode` gives
/// (a map of five named fields, integers in their shortest form).
pub fn encode_go_reply(reply: &GoReply, out: &mut Vec<u8>) {
    let GoReply { ok, limit, remaining, retry_after_ms, reset_after_ms, granted, wait_ms } = *reply;
    // A fixmap: five fields, plus the optional ones that are present.
    out.push(0x85 + u8::from(granted.is_some()) + u8::from(wait_ms.is_some()));
    out.extend_from_slice(b"\xa2ok");
    out.push(if ok { 0xc3 } else { 0xc2 });
    out.extend_from_slice(b"\xa5limit");
    put_uint(out, u64::from(limit));
    out.extend_from_slice(b"\xa9remaining");
    put_uint(out, u64::from(remaining));
    out.extend_from_slice(b"\xaeretry_after_ms");
    put_uint(out, retry_after_ms);
    out.extend_from_slice(b"\xaereset_after_ms");
    put_uint(out, reset_after_ms);
    if let Some(granted) = granted {
        out.extend_from_slice(b"\xa7granted");
        put_uint(out, u64::from(granted));
    }
    if let Some(wait_ms) = wait_ms {
        out.extend_from_slice(b"\xa7wait_ms");
        put_uint(out, wait_ms);
    }
}

/// Whether a reply that starts as `encode_go_reply` writes it (a map whose
/// first field is `ok`) says ok, read from its first five bytes; `None` for
/// anything else.
pub fn go_reply_ok(reply: &[u8]) -> Option<bool> {
    match reply {
        [0x80..=0x8f, 0xa2, b'o', b'k', 0xc3, ..] => Some(true),
        [0x80..=0x8f, 0xa2, b'o', b'k', 0xc2, ..] => Some(false),
        _ => None,
    }
}

/// The length in bytes of the one MessagePack value `body` starts with,
/// nested at most `depth` deep; `None` when `body` does not start with a
/// whole value (a reserved marker, or a value cut short). The serde path
/// asks this after decoding, since its decoder does not say where it stopped.
pub fn value_len(body: &[u8], depth: usize) -> Option<usize> {
    let mut r = Reader { body, at: 0 };
    r.skip(depth)?;
    Some(r.at)
}

/// An unsigned integer in its shortest MessagePack form.
fn put_uint(out: &mut Vec<u8>, v: u64) {
    match v {
        0..=0x7f => out.push(v as u8),
        0x80..=0xff => out.extend_from_slice(&[0xcc, v as u8]),
        0x100..=0xffff => {
            out.push(0xcd);
            out.extend_from_slice(&(v as u16).to_be_bytes());
        }
        0x1_0000..=0xffff_ffff => {
            out.push(0xce);
            out.extend_from_slice(&(v as u32).to_be_bytes());
        }
        _ => {
            out.push(0xcf);
            out.extend_from_slice(&v.to_be_bytes());
        }
    }
}

/// A cursor over a message; every read answers `None` past the end or on
/// a marker it does not handle.
struct Reader<'a> {
    body: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let bytes = self.body.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(bytes)
    }

    fn byte(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    /// A big-endian unsigned integer of `n` bytes.
    fn be(&mut self, n: usize) -> Option<u64> {
        Some(self.take(n)?.iter().fold(0, |acc, &b| acc << 8 | u64::from(b)))
    }

    fn map_len(&mut self) -> Option<u64> {
        match self.byte()? {
            m @ 0x80..=0x8f => Some(u64::from(m & 0x0f)),
            0xde => self.be(2),
            0xdf => self.be(4),
            _ => None,
        }
    }

    /// A string's bytes, not yet checked to be UTF-8.
    fn str_bytes(&mut self) -> Option<&'a [u8]> {
        let len = match self.byte()? {
            m @ 0xa0..=0xbf => u64::from(m & 0x1f),
            0xd9 => self.be(1)?,
            0xda => self.be(2)?,
            0xdb => self.be(4)?,
            _ => return None,
        };
        self.take(usize::try_from(len).ok()?)
    }

    fn str(&mut self) -> Option<&'a str> {
        let bytes = self.str_bytes()?;
        if bytes.is_ascii() {
            // SAFETY: ASCII is UTF-8. Checking ASCII a word at a time is far
            // cheaper than full UTF-8 validation for the short names and
            // keys of a request; anything else takes the full check.
            return Some(unsafe { std::str::from_utf8_unchecked(bytes) });
        }
        std::str::from_utf8(bytes).ok()
    }

    fn bool(&mut self) -> Option<bool> {
        match self.byte()? {
            0xc2 => Some(false),
            0xc3 => Some(true),
            _ => None,
        }
    }

    /// Steps over one whole value of any type, with arrays and maps nested
    /// fewer than `depth` deep (as the serde decoder counts them).
    fn skip(&mut self, depth: usize) -> Option<()> {
        let marker = self.byte()?;
        let (data, items) = match marker {
            0x00..=0x7f | 0xc0 | 0xc2 | 0xc3 | 0xe0..=0xff => (0, 0),
            0x80..=0x8f => (0, 2 * u64::from(marker & 0x0f)),
            0x90..=0x9f => (0, u64::from(marker & 0x0f)),
            0xa0..=0xbf => (u64::from(marker & 0x1f), 0),
            0xc4 | 0xd9 => (self.be(1)?, 0),
            0xc5 | 0xda => (self.be(2)?, 0),
            0xc6 | 0xdb => (self.be(4)?, 0),
            // ext: a length, then a type byte, then the data.
            0xc7 => (self.be(1)? + 1, 0),
            0xc8 => (self.be(2)? + 1, 0),
            0xc9 => (self.be(4)? + 1, 0),
            0xca => (4, 0),
            0xcb => (8, 0),
            0xcc | 0xd0 => (1, 0),
            0xcd | 0xd1 => (2, 0),
            0xce | 0xd2 => (4, 0),
            0xcf | 0xd3 => (8, 0),
            0xd4..=0xd8 => (1 + (1 << (marker - 0xd4)), 0),
            0xdc => (0, self.be(2)?),
            0xdd => (0, self.be(4)?),
            0xde => (0, 2 * self.be(2)?),
            0xdf => (0, 2 * self.be(4)?),
            // 0xc1 is reserved: never a value.
            0xc1 => return None,
        };
        self.take(usize::try_from(data).ok()?)?;
        let depth =
            if matches!(marker, 0x80..=0x9f | 0xdc..=0xdf) { depth.checked_sub(1).filter(|&d| d > 0)? } else { depth };
        for _ in 0..items {
            self.skip(depth)?;
        }
        Some(())
    }

    fn uint(&mut self) -> Option<u64> {
        match self.byte()? {
            m @ 0x00..=0x7f => Some(u64::from(m)),
            0xcc => self.be(1),
            0xcd => self.be(2),
            0xce => self.be(4),
            0xcf => self.be(8),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
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

    proptest! {
        #[test]
        fn go_replies_encode_as_serde_does(
            ok: bool, limit: u32, remaining: u32,
            retry in prop_oneof![Just(0u64), 0..200u64, any::<u64>()],
            reset in prop_oneof![0..70_000u64, any::<u64>()],
            granted: Option<u32>,
            wait_ms in proptest::option::of(prop_oneof![0..1000u64, any::<u64>()]),
        ) {
            let reply = GoReply { ok, limit, remaining, retry_after_ms: retry, reset_after_ms: reset, granted, wait_ms };
            let mut out = Vec::new();
            encode_go_reply(&reply, &mut out);
            prop_assert_eq!(&out, &serde_bytes(&reply));
            prop_assert_eq!(go_reply_ok(&out), Some(ok));
        }

        #[test]
        fn request_maps_decode_as_serde_does(
            op in proptest::option::of("go|stats|[a-z]{0,3}"),
            limit in proptest::option::of(".{0,40}"),
            key in proptest::option::of(".{0,300}"),
            cost in proptest::option::of(prop_oneof![0..300u64, any::<u64>()]),
            up_to: Option<bool>,
            max_wait_ms in proptest::option::of(prop_oneof![0..300u64, any::<u64>()]),
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
            if let Some(fast) = decode_request_map(&body) {
                prop_assert_eq!(Some(fast), serde_map(&body));
            }
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
        assert_eq!(decode_request_map(&with(&[0xa1, b'x', 0x01])), None, "an unknown field");
        assert_eq!(decode_request_map(&with(&[0xa5, b'l', b'e', b'a', b's', b'e', 0xa1, b'x'])), None, "a lease field");
        assert_eq!(decode_request_map(&with(&[0xa2, b'o', b'p', 0xa2, b'g', b'o'])), None, "a repeated field");
        assert_eq!(decode_request_map(&with(&[0xa3, b'k', b'e', b'y', 0xc0])), None, "a nil key");
        assert_eq!(decode_request_map(&with(&[0xa4, b'c', b'o', b's', b't', 0xd0, 0x01])), None, "a signed cost");
        let mut trailing = serde_bytes(&RequestMap { op: Some("go"), ..RequestMap::default() });
        trailing.push(0xc0);
        assert_eq!(decode_request_map(&trailing), None, "trailing bytes");
        assert_eq!(decode_request_map(&[0x81, 0xa2, b'o', b'p', 0xa2, 0xff, 0xfe]), None, "invalid UTF-8");
    }
}
