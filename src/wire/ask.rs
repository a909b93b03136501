//! The structured "may I go?" ([`Ask`]): which limit, which key, how many
//! permits and how long the caller would wait, with the request map that
//! carries it. Both sides build it here: clients to send, the decoders
//! (`request`, `batch`, `fast`) to read. Like the rest of `wire`, this only
//! translates; what an ask means is the core's business.

use serde::{Deserialize, Serialize};

use super::{Parents, RequestMap};

/// A structured "may I go?": which limit, which key, how many permits, and
/// how long the caller would wait for them.
///
/// Built at the edge with its builder methods, carried in a [`RequestMap`]:
///
/// ```
/// use locker::wire::{self, Ask, Request};
///
/// let ask = Ask::new().limit("api").key("user-7").cost(2);
/// let mut body = Vec::new();
/// wire::encode(&ask.to_map(), &mut body);
/// assert_eq!(body, b"\x84\xa2op\xa2go\xa5limit\xa3api\xa3key\xa6user-7\xa4cost\x02");
/// assert_eq!(wire::decode_request(&body), Ok(Request::Go(ask)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ask<'a> {
    /// A configured limit's name; the default limit when `None`.
    pub limit: Option<&'a str>,
    /// A key within the limit; the limit's unkeyed count when `None`.
    pub key: Option<&'a str>,
    /// Permits to take at once; 0 peeks without taking.
    pub cost: u64,
    /// Take as many of `cost` as are available (at least one).
    pub up_to: bool,
    /// Accept a reservation that may be used after at most this long.
    pub max_wait_ms: Option<u64>,
    /// Rather than sorry, hold the reply up to this long for a go (the
    /// limit's `hold_ms` when absent).
    pub hold_ms: Option<u64>,
    /// The limit's terms, for a limit the locker creates on first use
    /// (`--runtime-limits`, see docs/wire.md).
    pub terms: Option<Terms<'a>>,
    /// The keys for the limits above this one, when its config names a
    /// `parent` (see [`Parents`]).
    pub parents: Option<Parents<'a>>,
    /// Decide and count the ask as usual, but answer a would-be sorry go
    /// (the reply says `shadow_sorry`), charging nothing; never held or
    /// reserved.
    pub shadow: bool,
}

impl Default for Ask<'_> {
    fn default() -> Self {
        Ask {
            limit: None,
            key: None,
            cost: 1,
            up_to: false,
            max_wait_ms: None,
            hold_ms: None,
            terms: None,
            parents: None,
            shadow: false,
        }
    }
}

/// A limit's terms sent with an ask: the fields of a `[[limits]]` table
/// that say how it counts. A locker run with `--runtime-limits` creates a
/// limit of these terms on first use; see docs/wire.md.
///
/// ```
/// use locker::wire::{self, Ask, Request, Terms};
///
/// let ask = Ask::new().limit("tenant-7").terms(Terms::new("fixed-window", 5, 0.8));
/// let mut body = Vec::new();
/// wire::encode(&ask.to_map(), &mut body);
/// assert_eq!(wire::decode_request(&body), Ok(Request::Go(ask)));
/// ```
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Terms<'a> {
    /// "fixed-window" (the default), "token-bucket" or "rolling-window".
    #[serde(borrow, default = "fixed_window")]
    pub algorithm: &'a str,
    /// Permits per `in_seconds`.
    pub max_requests: u64,
    /// The slot length in seconds (a bucket's refill period); always
    /// written as a float.
    pub in_seconds: f64,
    /// A token bucket's capacity; `max_requests` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<u64>,
}

fn fixed_window<'a>() -> &'a str {
    "fixed-window"
}

impl<'a> Terms<'a> {
    /// `max_requests` per `in_seconds`, counted by `algorithm`.
    pub fn new(algorithm: &'a str, max_requests: u64, in_seconds: f64) -> Terms<'a> {
        Terms { algorithm, max_requests, in_seconds, burst: None }
    }

    /// A token bucket's capacity.
    pub fn burst(self, burst: u64) -> Terms<'a> {
        Terms { burst: Some(burst), ..self }
    }
}

/// Terms are equal when every field is, `in_seconds` bit for bit, so that
/// a decoded ask equals the one encoded.
impl PartialEq for Terms<'_> {
    fn eq(&self, other: &Self) -> bool {
        let key = |t: &Self| (t.algorithm, t.max_requests, t.in_seconds.to_bits(), t.burst);
        key(self) == key(other)
    }
}

impl Eq for Terms<'_> {}

impl<'a> Ask<'a> {
    /// One permit of the default limit.
    pub fn new() -> Ask<'a> {
        Ask::default()
    }

    /// Asks the limit called `name`.
    pub fn limit(self, name: &'a str) -> Ask<'a> {
        Ask { limit: Some(name), ..self }
    }

    /// Asks for `key`'s own count within the limit.
    pub fn key(self, key: &'a str) -> Ask<'a> {
        Ask { key: Some(key), ..self }
    }

    /// Asks for `cost` permits at once.
    pub fn cost(self, cost: u64) -> Ask<'a> {
        Ask { cost, ..self }
    }

    /// Takes as many of `cost` permits as are available, at least one.
    pub fn up_to(self) -> Ask<'a> {
        Ask { up_to: true, ..self }
    }

    /// Accepts a reservation usable within `ms` milliseconds instead of sorry.
    pub fn max_wait_ms(self, ms: u64) -> Ask<'a> {
        Ask { max_wait_ms: Some(ms), ..self }
    }

    /// Asks the locker to hold the reply up to `ms` for a go rather than
    /// answer sorry (see docs/wire.md).
    pub fn hold_ms(self, ms: u64) -> Ask<'a> {
        Ask { hold_ms: Some(ms), ..self }
    }

    /// Sends the limit's `terms` with the ask (see [`Terms`]).
    pub fn terms(self, terms: Terms<'a>) -> Ask<'a> {
        Ask { terms: Some(terms), ..self }
    }

    /// Names the key of each limit above this one (see [`Parents`]): the
    /// ask takes its cost from every one of them too, or from none.
    pub fn parents(self, parents: Parents<'a>) -> Ask<'a> {
        Ask { parents: Some(parents), ..self }
    }

    /// Asks in shadow: decided and counted as usual, but a would-be sorry
    /// is answered go with `shadow_sorry` and charges nothing (see
    /// docs/wire.md).
    pub fn shadow(self) -> Ask<'a> {
        Ask { shadow: true, ..self }
    }

    /// The request map that carries this ask.
    pub fn to_map(&self) -> RequestMap<'a> {
        RequestMap {
            op: Some("go"),
            limit: self.limit,
            key: self.key,
            cost: Some(self.cost),
            up_to: self.up_to.then_some(true),
            max_wait_ms: self.max_wait_ms,
            hold_ms: self.hold_ms,
            terms: self.terms,
            // An empty map names nothing: it is left out, as a read one is.
            parents: self.parents.filter(|p| !p.is_empty()),
            shadow: self.shadow.then_some(true),
            ..RequestMap::default()
        }
    }

    /// The map that carries this ask in a batch: `to_map` without `op`.
    pub fn to_entry(&self) -> RequestMap<'a> {
        RequestMap { op: None, ..self.to_map() }
    }

    /// The ask a go request's map carries.
    pub(in crate::wire) fn from_map(map: &RequestMap<'a>) -> Ask<'a> {
        Ask {
            limit: map.limit,
            key: map.key,
            cost: map.cost.unwrap_or(1),
            up_to: map.up_to.unwrap_or(false),
            max_wait_ms: map.max_wait_ms,
            hold_ms: map.hold_ms,
            terms: map.terms,
            parents: map.parents,
            shadow: map.shadow.unwrap_or(false),
        }
    }
}
