//! Requests: every request a locker decodes from its REP socket
//! ([`Request`]), of either form, and the one decoder that reads them.
//!
//! Like the rest of `wire`, this only translates; what an ask means is the
//! core's business.

use super::ask::Ask;
use super::batch::AskBatch;
use super::cascade::{read_go, read_rest_into, Read};
use super::charge::Charge;
use super::entries::{other_entry, part_of_entry, BatchEntry};
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
    /// Take permits a key used, whatever is left.
    Charge(Charge<'a>),
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
    let (map, asks) = match read_rest_into(body, entry)? {
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
        "charge" => Charge::from_map(&map).map(Request::Charge),
        "reset" => Reset::from_map(&map).map(Request::Reset),
        "stats" => Ok(Request::Stats),
        "acquire" => Ok(Request::Acquire(LeaseAsk::from_map(&map))),
        "heartbeat" => Heartbeat::from_map(&map).map(Request::Heartbeat),
        "release" => Release::from_map(&map).map(Request::Release),
        other => Err(WireError::UnknownOp(other.to_owned())),
    }
}

/// A request decoded once: the request, a batch's entries each decoded
/// when the batch's check read them, and the parts of every `all` (alone,
/// or an entry of the batch) decoded once too, so that nothing reads an
/// entry or a part twice.
#[derive(Debug)]
pub struct Decoded<'a> {
    pub request: Result<Request<'a>, WireError>,
    /// A batch's entries in order; empty for any other request.
    entries: Vec<Result<BatchEntry<'a>, WireError>>,
    /// An `all`'s parts in order; for a batch, the parts of its `all`
    /// entries, each entry's in turn (see `entries_with_parts`); empty
    /// for any other request.
    parts: Vec<Result<Ask<'a>, WireError>>,
}

impl<'a> Decoded<'a> {
    /// A batch's entries in order, each a go, an `all` or an error for that
    /// entry alone, as [`AskBatch::entries`] reads them; empty for any
    /// other request.
    pub fn entries(&self) -> &[Result<BatchEntry<'a>, WireError>] {
        &self.entries
    }

    /// An `all`'s parts in order, each a go or the error that refuses the
    /// whole, as [`AllAsk::parts`] reads them; empty for any other request.
    pub fn parts(&self) -> &[Result<Ask<'a>, WireError>] {
        match self.request {
            Ok(Request::All(_)) => &self.parts,
            _ => &[],
        }
    }

    /// A batch's entries in order, each with its parts when it is an
    /// `all` (as [`AllAsk::parts`] reads them; none for any other entry).
    pub fn entries_with_parts(&self) -> EntriesWithParts<'_, 'a> {
        EntriesWithParts { entries: self.entries.iter(), parts: self.entry_parts() }
    }

    /// The parts of a batch's `all` entries, handed out one entry at a
    /// time and in order ([`EntryParts::of`]), for a caller that walks
    /// [`entries`](Decoded::entries) itself.
    pub fn entry_parts(&self) -> EntryParts<'_, 'a> {
        let parts = match self.request {
            Ok(Request::Batch(_)) => &self.parts[..],
            _ => &[],
        };
        EntryParts { rest: parts }
    }
}

/// The parts of a batch's `all` entries; see [`Decoded::entry_parts`].
#[derive(Debug)]
pub struct EntryParts<'d, 'a> {
    /// The parts of the `all` entries still to come, in order.
    rest: &'d [Result<Ask<'a>, WireError>],
}

impl<'d, 'a> EntryParts<'d, 'a> {
    /// The parts of `all`, the batch's next `all` entry: ask for every
    /// `all` entry, in order. The decoder keeps exactly `all.len()` parts
    /// for each; were fewer left, this hands none out rather than panic on
    /// the request path, and the service refuses an `all` whose parts do
    /// not match it.
    #[inline]
    pub fn of(&mut self, all: &AllAsk<'a>) -> &'d [Result<Ask<'a>, WireError>] {
        debug_assert!(self.rest.len() >= all.len(), "the decoder keeps every all entry's parts");
        let Some((parts, rest)) = self.rest.split_at_checked(all.len()) else {
            self.rest = &[];
            return &[];
        };
        self.rest = rest;
        parts
    }
}

/// A batch's entries, each with its parts; see
/// [`Decoded::entries_with_parts`].
pub struct EntriesWithParts<'d, 'a> {
    entries: std::slice::Iter<'d, Result<BatchEntry<'a>, WireError>>,
    parts: EntryParts<'d, 'a>,
}

impl<'d, 'a> Iterator for EntriesWithParts<'d, 'a> {
    type Item = (&'d Result<BatchEntry<'a>, WireError>, &'d [Result<Ask<'a>, WireError>]);

    fn next(&mut self) -> Option<Self::Item> {
        let entry = self.entries.next()?;
        let parts = match entry {
            Ok(BatchEntry::All(all)) => self.parts.of(all),
            _ => &[],
        };
        Some((entry, parts))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.entries.size_hint()
    }
}

/// Decodes requests into [`Decoded`], keeping one buffer for a batch's
/// entries and one for the parts of `all`s from one request to the next:
/// once they have held the largest batch, decoding allocates nothing.
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
///
/// body.clear();
/// wire::encode_all(&[Ask::new().limit("api"), Ask::new().key("b")], None, None, &mut body);
/// let decoded = decoder.decode(&body);
/// assert_eq!(decoded.parts(), [Ok(Ask::new().limit("api")), Ok(Ask::new().key("b"))]);
/// decoder.recycle(decoded);
/// ```
#[derive(Debug, Default)]
pub struct Decoder {
    spare: Vec<Result<BatchEntry<'static>, WireError>>,
    spare_parts: Vec<Result<Ask<'static>, WireError>>,
}

impl Decoder {
    /// Decodes `body` as [`decode_request`] does, a batch's entries and
    /// every `all`'s parts with it.
    pub fn decode<'a>(&mut self, body: &'a [u8]) -> Decoded<'a> {
        if let Some(request) = decode_common(body) {
            return Decoded { request: Ok(request), entries: Vec::new(), parts: Vec::new() };
        }
        // The buffers are taken at the first entry (or part) only: an ask
        // of another shape never touches them.
        let Decoder { spare, spare_parts } = self;
        let (mut entries, mut parts) = (Vec::new(), Vec::new());
        // Every array of asks is read as a batch's entries, whatever the
        // op (the check may read `asks` before `op`): an `all` entry's
        // parts go to `parts` as it is read.
        let request = decode_other_into(body, &mut |checked| {
            if entries.capacity() == 0 {
                entries = reuse(std::mem::take(spare));
            }
            entries.push(match checked {
                Ok(ask) => Ok(BatchEntry::Go(ask)),
                Err(bytes) => {
                    if parts.capacity() == 0 {
                        parts = reuse(std::mem::take(spare_parts));
                    }
                    other_entry(bytes, &mut parts)
                }
            });
        });
        match &request {
            // Entries count only for the batch the check read whole; a map
            // with two arrays of asks is never one (serde refuses it).
            Ok(Request::Batch(batch)) if entries.len() == batch.len() => {}
            Ok(Request::Batch(batch)) => {
                entries.clear();
                parts.clear();
                entries.extend(batch.entries());
                for entry in &entries {
                    if let Ok(BatchEntry::All(all)) = entry {
                        parts.extend(all.parts());
                    }
                }
            }
            // An `all`'s parts are the entries of its (last) array of
            // asks, each taken as a part rather than as an entry.
            Ok(Request::All(all)) => {
                parts.clear();
                if parts.capacity() == 0 {
                    parts = reuse(std::mem::take(spare_parts));
                }
                match entries.len().checked_sub(all.len()) {
                    Some(from) => parts.extend(entries.drain(from..).map(part_of_entry)),
                    // Never: the check hands on every entry of every array.
                    None => parts.extend(all.parts()),
                }
                entries.clear();
            }
            _ => {
                entries.clear();
                parts.clear();
            }
        }
        Decoded { request, entries, parts }
    }

    /// Takes back the buffers of `decoded` for the next request.
    #[inline]
    pub fn recycle(&mut self, decoded: Decoded) {
        // A plain body or a go in its common shape took neither.
        if decoded.entries.capacity() > 0 || decoded.parts.capacity() > 0 {
            self.take_back(decoded.entries, decoded.parts);
        }
    }

    fn take_back(&mut self, entries: Vec<Result<BatchEntry, WireError>>, parts: Vec<Result<Ask, WireError>>) {
        if entries.capacity() > 0 {
            self.spare = reuse(entries);
        }
        if parts.capacity() > 0 {
            self.spare_parts = reuse(parts);
        }
    }
}

/// An empty vector borrowing from other bodies, in the same allocation: an
/// empty vector collected into one of the same layout (here, the same type
/// with another lifetime) keeps its buffer (the standard library collects
/// in place), so the buffer outlives the bodies without any unsafe code.
/// `tests/alloc.rs` sees a batch and an `all` allocate nothing once warm.
fn reuse<T, U>(mut items: Vec<T>) -> Vec<U> {
    items.clear();
    // Maps no element (there are none) only to change their lifetime.
    #[allow(clippy::unnecessary_filter_map)]
    items.into_iter().filter_map(|_| None).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A part or entry of each shape: a go in its common shape, a go with
    /// an unknown field, another op, not a map, a value of the wrong type,
    /// and an `all` (with parts, without, with too many).
    fn shapes() -> Vec<Vec<u8>> {
        let mut too_many = b"\x82\xa2op\xa3all\xa4asks\xdc\x00\x11".to_vec();
        too_many.extend([0x80; 17]);
        vec![
            b"\x81\xa5limit\xa3api".to_vec(),
            b"\x82\xa3key\xa1k\xa5extra\x91\x01".to_vec(),
            b"\x81\xa2op\xa5stats".to_vec(),
            b"\x05".to_vec(),
            b"\x81\xa4cost\xa1x".to_vec(),
            b"\x82\xa2op\xa3all\xa4asks\x92\x80\x81\xa2op\xa5stats".to_vec(),
            b"\x81\xa2op\xa3all".to_vec(),
            too_many,
        ]
    }

    /// A map of `op` whose `asks` are `arrays` (more than one is a field
    /// given twice).
    fn with_asks(op: &str, arrays: &[&[Vec<u8>]]) -> Vec<u8> {
        let mut body = vec![0x80 + 1 + arrays.len() as u8, 0xa2, b'o', b'p', 0xa0 + op.len() as u8];
        body.extend(op.as_bytes());
        for items in arrays {
            body.extend(b"\xa4asks");
            body.push(0x90 + items.len() as u8);
            items.iter().for_each(|item| body.extend(item));
        }
        body
    }

    /// What the decoder keeps of `body`, from fresh buffers and from
    /// recycled ones, is what reading it again from its bytes gives.
    fn assert_kept_as_read(body: &[u8]) {
        let mut decoder = Decoder::default();
        for round in 0..2 {
            let decoded = decoder.decode(body);
            match &decoded.request {
                Ok(Request::All(all)) => {
                    assert_eq!(decoded.parts(), all.parts().collect::<Vec<_>>(), "round {round}");
                    assert!(decoded.entries().is_empty() && decoded.entries_with_parts().next().is_none());
                }
                Ok(Request::Batch(batch)) => {
                    assert_eq!(decoded.entries(), batch.entries().collect::<Vec<_>>(), "round {round}");
                    assert!(decoded.parts().is_empty());
                    for ((entry, parts), again) in decoded.entries_with_parts().zip(batch.entries()) {
                        assert_eq!(*entry, again);
                        let want: Vec<_> = match again {
                            Ok(BatchEntry::All(all)) => all.parts().collect(),
                            _ => Vec::new(),
                        };
                        assert_eq!(parts, want, "round {round}: {entry:?}");
                    }
                }
                other => panic!("neither an all nor a batch: {other:?}"),
            }
            decoder.recycle(decoded);
        }
    }

    #[test]
    fn an_alls_parts_are_kept_as_reading_them_again_gives_them() {
        let shapes = shapes();
        let body = with_asks("all", &[&shapes]);
        assert_kept_as_read(&body);
        let all = decode_request(&body);
        let Ok(Request::All(all)) = all else { panic!("{all:?}") };
        let parts: Vec<_> = all.parts().collect();
        assert_eq!(parts[0], Ok(Ask::new().limit("api")));
        assert_eq!(parts[1], Ok(Ask::new().key("k")));
        assert_eq!(parts[2], Err(WireError::EntryNotAGo("stats".into())));
        assert_eq!(parts[3], Err(WireError::EntryNotAMap));
        assert!(matches!(&parts[4], Err(WireError::Malformed(_))), "{:?}", parts[4]);
        assert!(parts[5..].iter().all(|p| *p == Err(WireError::EntryNotAGo("all".into()))), "{parts:?}");
        // The parts of the last array of asks are the `all`'s.
        assert_kept_as_read(&with_asks("all", &[&shapes[..3], &shapes[3..]]));
        assert_kept_as_read(&with_asks("all", &[&[], &shapes[..2]]));
    }

    #[test]
    fn a_batchs_all_entries_keep_their_parts_as_reading_them_again_gives_them() {
        let shapes = shapes();
        let mut entries = shapes.clone();
        entries.push(with_asks("all", &[&shapes]));
        entries.push(with_asks("all", &[&shapes[..2], &shapes[2..4]]));
        entries.push(with_asks("all", &[&shapes[..1]]));
        let body = with_asks("batch", &[&entries]);
        assert_kept_as_read(&body);
        let decoded = Decoder::default().decode(&body);
        let alls: Vec<usize> = decoded.entries_with_parts().map(|(_, parts)| parts.len()).collect();
        assert_eq!(alls, [0, 0, 0, 0, 0, 2, 0, 0, 8, 2, 1], "each `all` entry with its own parts");
    }
}
