//! The keys an ask names for the limits above its own (`parents`): a map
//! of limit names to keys, `{"team": "t3", "org": "acme"}`, carried by a
//! go and a refund of a limit whose config names a `parent`.
//!
//! A client lists the pairs ([`Parents::new`]); a locker's codec (`fast`)
//! checks them once where they lie in the request, and they are walked
//! again from the bytes when a key is needed: no allocation on either
//! side. Which limits are above which, and what an ask of them takes, is
//! the service's and the core's business: like the rest of `wire`, this
//! only translates.

use serde::ser::{Serialize, SerializeMap, Serializer};

/// The most limits one `parents` map may name: a chain holds at most 8
/// levels, the limit asked and 7 above it.
pub const MAX_PARENTS: usize = 7;

/// The keys of an ask for the limits above its own, by limit name.
///
/// ```
/// use locker::wire::{self, Ask, Parents, Request};
///
/// let keys = [("team", "t3"), ("org", "acme")];
/// let ask = Ask::new().limit("user").key("u7").parents(Parents::new(&keys));
/// let mut body = Vec::new();
/// wire::encode(&ask.to_map(), &mut body);
/// let Ok(Request::Go(read)) = wire::decode_request(&body) else { panic!() };
/// assert_eq!(read, ask);
/// let parents = read.parents.unwrap();
/// assert_eq!((parents.key_of("org"), parents.key_of("user")), (Some("acme"), None));
/// ```
#[derive(Clone, Copy)]
pub struct Parents<'a>(Held<'a>);

/// Where the pairs are: listed by a caller, or read from a request.
#[derive(Clone, Copy)]
enum Held<'a> {
    Listed(&'a [(&'a str, &'a str)]),
    /// The map's bytes, already held to the contract by the codec; its
    /// marker says how many pairs they hold. Two words, like a list, so
    /// that every ask carries three at most for its `parents`, named or
    /// not (a batch keeps a thousand asks decoded at once).
    Read(&'a [u8]),
}

impl<'a> Parents<'a> {
    /// The keys `pairs` lists, each a limit name and the key the ask
    /// names in it, in the order they are written.
    pub fn new(pairs: &'a [(&'a str, &'a str)]) -> Parents<'a> {
        Parents(Held::Listed(pairs))
    }

    /// How many limits it names.
    pub fn len(&self) -> usize {
        match self.0 {
            Held::Listed(pairs) => pairs.len(),
            Held::Read(bytes) => map_header(bytes).1,
        }
    }

    /// Whether it names none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Each limit name with its key, in the order written.
    pub fn iter(&self) -> ParentKeys<'a> {
        ParentKeys(match self.0 {
            Held::Listed(pairs) => Walk::Listed(pairs.iter()),
            Held::Read(bytes) => {
                let (at, left) = map_header(bytes);
                Walk::Read { bytes, at, left }
            }
        })
    }

    /// The key it names for limit `name`, if it names one.
    pub fn key_of(&self, name: &str) -> Option<&'a str> {
        self.iter().find(|&(limit, _)| limit == name).map(|(_, key)| key)
    }

    /// The pairs of `bytes`, a map of pairs of strings that the codec has
    /// held to the contract (`fast::read_parents`).
    pub(super) fn checked(bytes: &'a [u8]) -> Parents<'a> {
        Parents(Held::Read(bytes))
    }
}

/// The length of the marker of the map `bytes` (checked by the codec),
/// and how many pairs it says follow.
fn map_header(bytes: &[u8]) -> (usize, usize) {
    let be = |n: usize| bytes.get(1..1 + n).map_or(0, |b| b.iter().fold(0, |v, &b| v << 8 | usize::from(b)));
    match bytes.first() {
        Some(&m @ 0x80..=0x8f) => (1, usize::from(m & 0x0f)),
        Some(0xde) => (3, be(2)),
        Some(0xdf) => (5, be(4)),
        _ => (bytes.len(), 0),
    }
}

/// The pairs of a [`Parents`], in order; see [`Parents::iter`].
pub struct ParentKeys<'a>(Walk<'a>);

/// Where a walk over the pairs is: in the caller's list, or in the bytes.
enum Walk<'a> {
    Listed(std::slice::Iter<'a, (&'a str, &'a str)>),
    Read { bytes: &'a [u8], at: usize, left: usize },
}

impl<'a> Iterator for ParentKeys<'a> {
    type Item = (&'a str, &'a str);

    fn next(&mut self) -> Option<Self::Item> {
        match &mut self.0 {
            Walk::Listed(pairs) => pairs.next().copied(),
            Walk::Read { bytes, at, left } => {
                *left = left.checked_sub(1)?;
                Some((string_at(bytes, at)?, string_at(bytes, at)?))
            }
        }
    }
}

/// The string at `at` in `bytes`, which the reader checked, stepped over.
/// Only the walk over checked pairs reads with this; reading a request is
/// the codec's (`fast`).
fn string_at<'a>(bytes: &'a [u8], at: &mut usize) -> Option<&'a str> {
    let be = |n: usize| bytes.get(*at + 1..*at + 1 + n).map(|b| b.iter().fold(0, |v, &b| v << 8 | usize::from(b)));
    let (head, len) = match *bytes.get(*at)? {
        m @ 0xa0..=0xbf => (1, usize::from(m & 0x1f)),
        0xd9 => (2, be(1)?),
        0xda => (3, be(2)?),
        0xdb => (5, be(4)?),
        _ => return None,
    };
    let text = bytes.get(*at + head..*at + head + len)?;
    *at += head + len;
    std::str::from_utf8(text).ok()
}

/// Two are equal when they name the same keys in the same order, however
/// each is held: a request read equals the ask that was written.
impl PartialEq for Parents<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for Parents<'_> {}

impl std::fmt::Debug for Parents<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

/// Written as a MessagePack map of strings, in the order listed.
impl Serialize for Parents<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.len()))?;
        for (name, key) in self.iter() {
            map.serialize_entry(name, key)?;
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{decode_request, Ask, Request};

    /// The parents of `{"limit": "u", "parents": <parents>}`.
    fn read(parents: &[u8]) -> Result<Option<Parents<'static>>, String> {
        let body: &'static [u8] = [&b"\x82\xa5limit\xa1u\xa7parents"[..], parents].concat().leak();
        match decode_request(body) {
            Ok(Request::Go(Ask { parents, .. })) => Ok(parents),
            Ok(other) => panic!("not a go: {other:?}"),
            Err(e) => Err(e.to_string()),
        }
    }

    #[test]
    fn a_map_of_strings_reads_as_the_pairs_it_holds() {
        // {"team": "t3", "org": "acme"}, and the same with a map16 and a str8.
        for body in [&b"\x82\xa4team\xa2t3\xa3org\xa4acme"[..], b"\xde\x00\x02\xa4team\xa2t3\xd9\x03org\xa4acme"] {
            let parents = read(body).unwrap().unwrap();
            assert_eq!(parents.iter().collect::<Vec<_>>(), [("team", "t3"), ("org", "acme")]);
            assert_eq!(parents, Parents::new(&[("team", "t3"), ("org", "acme")]));
            assert_ne!(parents, Parents::new(&[("org", "acme"), ("team", "t3")]), "the order is the caller's");
            assert_eq!(format!("{parents:?}"), r#"{"team": "t3", "org": "acme"}"#);
            assert_eq!(parents.key_of("org"), Some("acme"));
        }
        assert_eq!(read(b"\x80"), Ok(None), "an empty map names nothing");
    }

    #[test]
    fn an_ask_carries_them_in_three_words() {
        assert_eq!(std::mem::size_of::<Option<Parents>>(), 3 * std::mem::size_of::<usize>());
    }

    #[test]
    fn anything_else_is_a_bad_request_that_says_what_it_found() {
        let cases: [(&[u8], &str); 5] = [
            (b"\x92\xa1a\xa1b", "must be a map of limit names to keys, found an array"),
            (b"\x81\xa4team\x03", "both strings, found an integer"),
            (b"\x81\xc4\x01a\xa1b", "both strings, found binary data"),
            (b"\x82\xa4team\xa1a\xa4team\xa1b", "\"parents\" names \"team\" twice"),
            (
                b"\x88\xa1a\xa1a\xa1b\xa1b\xa1c\xa1c\xa1d\xa1d\xa1e\xa1e\xa1f\xa1f\xa1g\xa1g\xa1h\xa1h",
                "at most 7 limits, this one names 8",
            ),
        ];
        for (body, want) in cases {
            let e = read(body).unwrap_err();
            assert!(e.contains("bad request: ") && e.contains(want), "{e}");
        }
    }
}
