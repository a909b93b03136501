//! Requests: every request a locker decodes from its REP socket
//! ([`Request`]), of either form, and the one decoder that reads them.
//!
//! Like the rest of `wire`, this only translates; what an ask means is the
//! core's business.

use super::ask::Ask;
use super::batch::AskBatch;
use super::cascade::{read_map, Read};
use super::lease::{Heartbeat, LeaseAsk, Release};
use super::together::{AllAsk, Refund, Reset};
use super::{is_structured, WireError};

/// A decoded request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request<'a> {
    /// The seed's form: the body selects a limit by name, or the default.
    Plain(&'a [u8]),
    /// May I go?
    Go(Ask<'a>),
    /// May each of these go? Answered in one message, in order.
    Batch(AskBatch<'a>),
    /// May all of these go together? Nothing is charged unless every part goes.
    All(AllAsk<'a>),
    /// Give back permits a key took.
    Refund(Refund<'a>),
    /// Clear one key's count.
    Reset(Reset<'a>),
    /// The locker's counters.
    Stats,
    /// Take a semaphore count under a new lease.
    Acquire(LeaseAsk<'a>),
    /// Keep a lease alive, or restore it.
    Heartbeat(Heartbeat<'a>),
    /// Free a lease.
    Release(Release<'a>),
}

/// Decodes one single-part request: a body that is not a MessagePack map is
/// the plain form, whatever it holds.
///
/// ```
/// use locker::wire::{decode_request, Ask, Request};
///
/// assert_eq!(decode_request(b"let me go"), Ok(Request::Plain(b"let me go")));
/// assert_eq!(decode_request(b"\x81\xa5limit\xa3api"), Ok(Request::Go(Ask::new().limit("api"))));
/// assert!(decode_request(b"\x81\xa2op\xa4jump").is_err());
/// ```
pub fn decode_request(body: &[u8]) -> Result<Request<'_>, WireError> {
    if !is_structured(body) {
        return Ok(Request::Plain(body));
    }
    let (map, asks) = match read_map(body)? {
        Read::Go(ask) => return Ok(Request::Go(ask)),
        Read::Map(map, asks) => (map, asks),
    };
    match map.op.unwrap_or("go") {
        "go" => Ok(Request::Go(Ask::from_map(&map))),
        // The reader gives a batch its asks, or refuses it; past it, a batch
        // has none that could be read.
        "batch" => asks.map(|(entries, len)| Request::Batch(AskBatch::new(entries, len))).ok_or(WireError::NoAsks),
        "all" => match asks {
            Some((entries, len)) => AllAsk::new(&map, AskBatch::new(entries, len)).map(Request::All),
            None => Err(WireError::NoParts),
        },
        "refund" => Ok(Request::Refund(Refund::from_map(&map))),
        "reset" => Ok(Request::Reset(Reset::from_map(&map))),
        "stats" => Ok(Request::Stats),
        "acquire" => Ok(Request::Acquire(LeaseAsk::from_map(&map))),
        "heartbeat" => Heartbeat::from_map(&map).map(Request::Heartbeat),
        "release" => Release::from_map(&map).map(Request::Release),
        other => Err(WireError::UnknownOp(other.to_owned())),
    }
}
