//! What the load generator sends and how it reads the answers: every request
//! body encoded once, up front, so that producing load costs a slice lookup,
//! and a classifier that tells go, sorry and errors apart from the reply's
//! first bytes without decoding it.
//!
//! This module holds bytes only; it opens no socket and keeps no time.

use crate::wire::{self, Ask, GO, SORRY};

/// The plain form's body when no limit is named: the seed's own message.
pub const PLAIN_BODY: &[u8] = b"let me go";

/// The request bodies a run cycles through, stored back to back.
#[derive(Debug, Clone)]
pub struct Requests {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl Requests {
    /// The plain form: the limit's name as the body, or the seed's message
    /// for the default limit. Plain requests carry no key, so there is one body.
    pub fn plain(limit: Option<&str>) -> Requests {
        let body = limit.map_or(PLAIN_BODY, str::as_bytes);
        Requests { bytes: body.to_vec(), ends: vec![body.len()] }
    }

    /// The structured form, as `Client::ask` encodes it: one body per key
    /// (`key_name(0)` up to `key_name(keys - 1)`), or a single body without a
    /// key when `keys` is 0.
    pub fn structured(limit: Option<&str>, keys: usize) -> Requests {
        let mut requests = Requests { bytes: Vec::new(), ends: Vec::with_capacity(keys.max(1)) };
        let ask = Ask { limit, ..Ask::new() };
        if keys == 0 {
            requests.push(&ask);
        }
        let mut name = String::new();
        for i in 0..keys {
            name.clear();
            key_name(i, &mut name);
            requests.push(&ask.key(&name));
        }
        requests
    }

    fn push(&mut self, ask: &Ask) {
        wire::encode(&ask.to_map(), &mut self.bytes);
        self.ends.push(self.bytes.len());
    }

    /// How many distinct bodies there are.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether there are none (never, for the constructors above).
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Body number `i`.
    pub fn get(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.bytes[start..self.ends[i]]
    }
}

/// Writes the name of key number `i` into `out`: fixed width, so every body
/// of a run has the same size, and as long as a typical user id.
pub fn key_name(i: usize, out: &mut String) {
    use std::fmt::Write;
    let _ = write!(out, "user-{i:07}");
}

/// What one reply said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Go,
    Sorry,
    /// An error map, or anything that is neither go nor sorry.
    Error,
}

/// Reads a reply of either form. A structured go reply is a map whose first
/// field is `ok` (see `wire::GoReply`), so its first five bytes decide it.
pub fn classify(reply: &[u8]) -> Outcome {
    match reply {
        GO => Outcome::Go,
        SORRY => Outcome::Sorry,
        [0x80..=0x8f, 0xa2, b'o', b'k', 0xc3, ..] => Outcome::Go,
        [0x80..=0x8f, 0xa2, b'o', b'k', 0xc2, ..] => Outcome::Sorry,
        _ => Outcome::Error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{ErrorReply, GoReply};

    fn encoded<T: serde::Serialize>(value: &T) -> Vec<u8> {
        let mut out = Vec::new();
        wire::encode(value, &mut out);
        out
    }

    #[test]
    fn structured_bodies_decode_to_their_keys() {
        let r = Requests::structured(Some("api"), 3);
        assert_eq!(r.len(), 3);
        for i in 0..3 {
            let expected = format!("user-000000{i}");
            match wire::decode_request(r.get(i)).unwrap() {
                wire::Request::Go(ask) => assert_eq!(ask, Ask::new().limit("api").key(&expected)),
                other => panic!("{other:?}"),
            }
        }
        assert!(matches!(wire::decode_request(Requests::structured(None, 0).get(0)), Ok(wire::Request::Go(_))));
    }

    #[test]
    fn plain_bodies_are_the_limit_name_or_the_seed_message() {
        assert_eq!(Requests::plain(None).get(0), b"let me go");
        assert_eq!(Requests::plain(Some("api")).get(0), b"api");
    }

    #[test]
    fn classify_reads_both_forms_and_errors() {
        let reply = |ok| GoReply {
            ok,
            limit: 5,
            remaining: 0,
            retry_after_ms: 0,
            reset_after_ms: 9,
            granted: None,
            wait_ms: None,
        };
        assert_eq!(classify(b"go"), Outcome::Go);
        assert_eq!(classify(b"sorry"), Outcome::Sorry);
        assert_eq!(classify(&encoded(&reply(true))), Outcome::Go);
        assert_eq!(classify(&encoded(&reply(false))), Outcome::Sorry);
        assert_eq!(classify(&encoded(&ErrorReply { error: "no".into() })), Outcome::Error);
        assert_eq!(classify(b""), Outcome::Error);
    }
}
