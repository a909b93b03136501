//! Requests: every request a locker decodes from its REP socket
//! ([`Request`]), of either form, and the one decoder that reads them.
//!
//! Like the rest of `wire`, this only translates; what an ask means is the
//! core's business.

use super::ask::Ask;
use super::batch::AskBatch;
use super::cascade::{read_go, read_other_into, Read};
use super::entries::{checked_entry, BatchEntry};
use super::fast::Checked;
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
    decode_request_into(body, &mut |_| {})
}

/// `decode_request`, handing each entry of a batch to `entry` as the
/// batch's check reads it (see `fast::read_request_into`).
fn decode_request_into<'a>(body: &'a [u8], entry: &mut impl FnMut(Checked<'a>)) -> Result<Request<'a>, WireError> {
    match decode_common(body) {
        Some(request) => Ok(request),
        None => decode_other_into(body, entry),
    }
}

/// The commonest requests, which need no more: a plain body, or a go in
/// its common shape.
#[inline]
fn decode_common(body: &[u8]) -> Option<Request<'_>> {
    if !is_structured(body) {
        return Some(Request::Plain(body));
    }
    read_go(body).map(Request::Go)
}

/// Any other structured request, one `decode_common` did not read.
fn decode_other_into<'a>(body: &'a [u8], entry: &mut impl FnMut(Checked<'a>)) -> Result<Request<'a>, WireError> {
    let (map, asks) = match read_other_into(body, entry)? {
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

/// A request decoded once: the request, and a batch's entries each decoded
/// when the batch's check read them, so that nothing reads an entry twice.
#[derive(Debug)]
pub struct Decoded<'a> {
    pub request: Result<Request<'a>, WireError>,
    /// A batch's entries in order; empty for any other request.
    entries: Vec<Result<BatchEntry<'a>, WireError>>,
}

impl<'a> Decoded<'a> {
    /// A batch's entries in order, each a go, an `all` or an error for that
    /// entry alone, as [`AskBatch::entries`] reads them; empty for any
    /// other request.
    pub fn entries(&self) -> &[Result<BatchEntry<'a>, WireError>] {
        &self.entries
    }
}

/// Decodes requests into [`Decoded`], keeping one buffer for a batch's
/// entries from one request to the next: once it has held the largest
/// batch, decoding allocates nothing.
///
/// ```
/// use locker::wire::{self, Ask, BatchEntry, Decoder, Request};
///
/// let mut body = Vec::new();
/// wire::encode_batch(&[Ask::new().key("a"), Ask::new().limit("api")], &mut body);
/// let mut decoder = Decoder::default();
/// let decoded = decoder.decode(&body);
/// assert!(matches!(decoded.request, Ok(Request::Batch(_))));
/// assert_eq!(decoded.entries(), [Ok(BatchEntry::Go(Ask::new().key("a"))), Ok(BatchEntry::Go(Ask::new().limit("api")))]);
/// decoder.recycle(decoded);
/// ```
#[derive(Debug, Default)]
pub struct Decoder {
    spare: Vec<Result<BatchEntry<'static>, WireError>>,
}

impl Decoder {
    /// Decodes `body` as [`decode_request`] does, a batch's entries with it.
    pub fn decode<'a>(&mut self, body: &'a [u8]) -> Decoded<'a> {
        if let Some(request) = decode_common(body) {
            return Decoded { request: Ok(request), entries: Vec::new() };
        }
        // The buffer is taken at a batch's first entry only: an ask of
        // another shape never touches it.
        let spare = &mut self.spare;
        let mut entries = Vec::new();
        let request = decode_other_into(body, &mut |checked| {
            if entries.capacity() == 0 {
                entries = reuse(std::mem::take(spare));
            }
            entries.push(checked_entry(checked));
        });
        match &request {
            // Entries count only for the batch the check read whole; a map
            // with two arrays of asks is never one (serde refuses it).
            Ok(Request::Batch(batch)) if entries.len() == batch.len() => {}
            Ok(Request::Batch(batch)) => {
                entries.clear();
                entries.extend(batch.entries());
            }
            _ => entries.clear(),
        }
        Decoded { request, entries }
    }

    /// Takes back the buffer of `decoded` for the next request.
    pub fn recycle(&mut self, decoded: Decoded) {
        if decoded.entries.capacity() > 0 {
            self.spare = reuse(decoded.entries);
        }
    }
}

/// An empty vector of entries borrowing from other bodies, in the same
/// allocation: an empty vector collected into one of the same layout keeps
/// its buffer (the standard library collects in place), so the buffer
/// outlives the bodies without any unsafe code. `tests/alloc.rs` sees a
/// batch allocate nothing once warm.
fn reuse<'b>(mut entries: Vec<Result<BatchEntry<'_>, WireError>>) -> Vec<Result<BatchEntry<'b>, WireError>> {
    entries.clear();
    // Maps no element (there are none) only to change their lifetime.
    #[allow(clippy::unnecessary_filter_map)]
    entries.into_iter().filter_map(|_| None).collect()
}
