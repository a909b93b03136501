//! Requests: every request a locker decodes from its REP socket
//! ([`Request`]), of either form, and the one decoder that reads them.
//!
//! Like the rest of `wire`, this only translates; what an ask means is the
//! core's business.

use super::ask::Ask;
use super::batch::AskBatch;
use super::lease::{Heartbeat, LeaseAsk, Release};
use super::{decode_exact, fast, is_structured, RequestMap, WireError};

/// A decoded request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request<'a> {
    /// The seed's form: the body selects a limit by name, or the default.
    Plain(&'a [u8]),
    /// May I go?
    Go(Ask<'a>),
    /// May each of these go? Answered in one message, in order.
    Batch(AskBatch<'a>),
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
        "stats" => Ok(Request::Stats),
        "acquire" => Ok(Request::Acquire(LeaseAsk::from_map(&map))),
        "heartbeat" => Heartbeat::from_map(&map).map(Request::Heartbeat),
        "release" => Release::from_map(&map).map(Request::Release),
        other => Err(WireError::UnknownOp(other.to_owned())),
    }
}

/// A structured body, read: a go in its common shape, or the map with a
/// batch's entries (their bytes and count) when it has them.
pub(super) enum Read<'a> {
    Go(Ask<'a>),
    Map(RequestMap<'a>, Option<(&'a [u8], usize)>),
}

/// The one cascade that reads a structured body, a request or a batch's
/// entry: a go in its common shape takes the hand-written path of every
/// ask (it stops at the first field that is not a go's); anything else is
/// read once, held to the contract as it is read, and what that reader
/// leaves to serde is held to the contract first too (serde would read
/// names and values more loosely).
pub(super) fn read_map(body: &[u8]) -> Result<Read<'_>, WireError> {
    if let Some((ask, len)) = fast::decode_go_prefix(body) {
        if len == body.len() {
            return Ok(Read::Go(ask));
        }
    }
    match fast::read_request(body)? {
        Some(fields) => Ok(Read::Map(fields.map, fields.asks)),
        None => read_by_serde(body),
    }
}

/// The last reader of the cascade: serde, after the contract's checks.
pub(super) fn read_by_serde(body: &[u8]) -> Result<Read<'_>, WireError> {
    fast::check_fields(body)?;
    Ok(Read::Map(decode_exact(body)?, None))
}
