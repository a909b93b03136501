//! Limits checked together, permits given back and one key's count
//! cleared: the requests `all`, `refund` and `reset`, and the reply to
//! `all`.
//!
//! ```text
//! request  {"op": "all", "asks": [ask, ...], "max_wait_ms"?, "hold_ms"?}
//! reply    {"ok": bool, "replies": [go reply, ...], "retry_after_ms": n, "shadow_sorry"?: true}
//! request  {"op": "refund", "limit", "key", "cost", "parents"?}   reply: a go reply
//! request  {"op": "reset", "limit", "key"}            reply: a go reply
//! ```
//!
//! The parts of an `all` are written and read as a batch's entries (a go
//! request map without `op`), at most [`MAX_PARTS`] of them; the wait and
//! the hold are the whole's. Like the rest of `wire`, this only translates:
//! that nothing is charged to a part of a refused whole is the core's.

use serde::{Deserialize, Serialize};

use super::ask::Ask;
use super::batch::{put_array_len, AskBatch, Entries};
use super::parents::Parents;
use super::reply::{ErrorReply, GoReply, Reply};
use super::{decode_exact, RequestMap, WireError};

/// The most parts one `all` may hold.
pub const MAX_PARTS: usize = 16;

/// A decoded `all`: its parts, still as bytes, and the whole's wait and
/// hold. A locker reads the parts once, as the request's check reads them
/// (`Decoded::parts`, or `Decoded::entries_with_parts` for an entry of a
/// batch); `parts` reads them again from their bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AllAsk<'a> {
    parts: AskBatch<'a>,
    /// Accept a reservation of every part usable within this long.
    pub max_wait_ms: Option<u64>,
    /// Rather than sorry, hold the reply up to this long for a go of the whole.
    pub hold_ms: Option<u64>,
}

impl<'a> AllAsk<'a> {
    /// The `all` a request map and its `asks` carry; more than
    /// [`MAX_PARTS`] parts is an error.
    pub(super) fn new(map: &RequestMap<'a>, parts: AskBatch<'a>) -> Result<AllAsk<'a>, WireError> {
        if parts.len() > MAX_PARTS {
            return Err(WireError::TooManyParts(parts.len()));
        }
        if map.parents.is_some() {
            return Err(WireError::MisplacedParents("\"parents\" go in each part of an \"all\", not on the whole"));
        }
        Ok(AllAsk { parts, max_wait_ms: map.max_wait_ms, hold_ms: map.hold_ms })
    }

    /// How many parts it holds.
    pub fn len(&self) -> usize {
        self.parts.len()
    }

    /// Whether it holds no part.
    pub fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }

    /// The parts in order, each decoded on its own: a part that is not a
    /// go is an error (which refuses the whole).
    pub fn parts(&self) -> Entries<'a> {
        self.parts.iter()
    }
}

/// Appends the encoding of an `all` of `asks` to `out`, with the whole's
/// wait and hold. Parts are written as a batch's entries.
///
/// ```
/// use locker::wire::{self, Ask, Request};
///
/// let mut body = Vec::new();
/// wire::encode_all(&[Ask::new().limit("api"), Ask::new().limit("day").cost(2)], None, None, &mut body);
/// let Ok(Request::All(all)) = wire::decode_request(&body) else { panic!() };
/// let parts: Vec<Ask> = all.parts().map(Result::unwrap).collect();
/// assert_eq!(parts, [Ask::new().limit("api"), Ask::new().limit("day").cost(2)]);
/// ```
pub fn encode_all(asks: &[Ask], max_wait_ms: Option<u64>, hold_ms: Option<u64>, out: &mut Vec<u8>) {
    let fields = 2 + u8::from(max_wait_ms.is_some()) + u8::from(hold_ms.is_some());
    out.push(0x80 | fields);
    out.extend_from_slice(b"\xa2op\xa3all\xa4asks");
    put_array_len(out, asks.len());
    for ask in asks {
        super::encode(&ask.to_entry(), out);
    }
    for (name, value) in [("max_wait_ms", max_wait_ms), ("hold_ms", hold_ms)] {
        if let Some(v) = value {
            super::encode(&name, out);
            super::encode(&v, out);
        }
    }
}

/// Appends the encoding of the reply to an `all` to `out`: the bytes
/// `encode` gives for an [`AllReply`] whose parts' replies are `replies`,
/// written without collecting them.
///
/// ```
/// use locker::wire::{self, AllReply, GoReply};
///
/// let part = GoReply { ok: false, limit: 5, remaining: 0, retry_after_ms: 300, reset_after_ms: 300, granted: None, wait_ms: None, shadow_sorry: false };
/// let (mut fast, mut serde) = (Vec::new(), Vec::new());
/// wire::encode_all_reply(false, [part, part].into_iter(), 300, false, &mut fast);
/// wire::encode(&AllReply { ok: false, replies: vec![part, part], retry_after_ms: 300, shadow_sorry: false }, &mut serde);
/// assert_eq!(fast, serde);
/// ```
pub fn encode_all_reply(
    ok: bool,
    replies: impl ExactSizeIterator<Item = GoReply>,
    retry_after_ms: u64,
    shadow_sorry: bool,
    out: &mut Vec<u8>,
) {
    out.push(0x83 + u8::from(shadow_sorry));
    out.extend_from_slice(if ok { b"\xa2ok\xc3\xa7replies" } else { b"\xa2ok\xc2\xa7replies" });
    put_array_len(out, replies.len());
    for reply in replies {
        super::encode_go_reply(&reply, out);
    }
    out.extend_from_slice(b"\xaeretry_after_ms");
    super::encode(&retry_after_ms, out);
    if shadow_sorry {
        out.extend_from_slice(b"\xacshadow_sorry\xc3");
    }
}

/// A refund: give back up to `cost` permits `key` took of `limit` (and,
/// with `parents`, of each limit above it under the key named for it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refund<'a> {
    /// A configured limit's name; the default limit when `None`.
    pub limit: Option<&'a str>,
    pub key: Option<&'a str>,
    /// Permits to give back; 1 when absent.
    pub cost: u64,
    /// The keys for the limits above `limit`, when its config names a
    /// `parent`, as the go that took the permits named them.
    pub parents: Option<Parents<'a>>,
}

impl<'a> Refund<'a> {
    /// The request map that carries this refund.
    pub fn to_map(&self) -> RequestMap<'a> {
        RequestMap {
            op: Some("refund"),
            limit: self.limit,
            key: self.key,
            cost: Some(self.cost),
            parents: self.parents.filter(|p| !p.is_empty()),
            ..RequestMap::default()
        }
    }

    pub(super) fn from_map(map: &RequestMap<'a>) -> Refund<'a> {
        Refund { limit: map.limit, key: map.key, cost: map.cost.unwrap_or(1), parents: map.parents }
    }
}

/// A reset: clear `key`'s count of `limit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reset<'a> {
    /// A configured limit's name; the default limit when `None`.
    pub limit: Option<&'a str>,
    pub key: Option<&'a str>,
}

impl<'a> Reset<'a> {
    /// The request map that carries this reset.
    pub fn to_map(&self) -> RequestMap<'a> {
        RequestMap { op: Some("reset"), limit: self.limit, key: self.key, ..RequestMap::default() }
    }

    /// The reset a map carries; one with `parents` is refused, since a
    /// reset clears the limit it names and no other.
    pub(super) fn from_map(map: &RequestMap<'a>) -> Result<Reset<'a>, WireError> {
        if map.parents.is_some() {
            return Err(WireError::MisplacedParents("a reset clears only the limit it names: it takes no \"parents\""));
        }
        Ok(Reset { limit: map.limit, key: map.key })
    }
}

/// The reply to an `all`: whether the whole went, each part's own go
/// reply in order, and the longest of their retry-afters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllReply {
    pub ok: bool,
    pub replies: Vec<GoReply>,
    pub retry_after_ms: u64,
    /// Whether a part in shadow would have refused the whole: it was
    /// charged nothing, and its reply says `shadow_sorry`. Absent otherwise.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub shadow_sorry: bool,
}

/// Decodes the reply to an `all`: its answer, or the error that refused it.
pub fn decode_all_reply(body: &[u8]) -> Result<Reply<AllReply>, WireError> {
    if let Ok(e) = decode_exact::<ErrorReply>(body) {
        return Ok(Reply::Refused(e.error));
    }
    decode_exact(body).map(Reply::Answer)
}
