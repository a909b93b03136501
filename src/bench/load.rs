//! What the load generator sends: every request body encoded once, up
//! front, so that producing load costs a slice lookup. The replies are read
//! by `wire::classify_reply`, which alone knows their layout.
//!
//! This module holds bytes only; it opens no socket and keeps no time.

use crate::wire::{self, Ask};

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
