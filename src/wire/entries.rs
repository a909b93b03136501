//! A batch whose entries may be limits checked together: each entry a go
//! or an `all`, read as such ([`AskBatch::entries`]), written as such
//! ([`encode_batch_entries`]), and each reply a go's or an `all`'s
//! ([`decode_batch_entries_reply`]).
//!
//! It joins `batch` (the entries, read one at a time) and `together` (the
//! `all`), neither of which knows the other this way. Like the rest of
//! `wire`, this only translates.

use serde::Deserialize;

use super::ask::Ask;
use super::batch::{ask_of, decode_replies, put_array_len, read_other, AskBatch, Entries};
use super::cascade::Read;
use super::fast::Checked;
use super::reply::{GoReply, Reply};
use super::together::{AllAsk, AllReply};
use super::WireError;

impl<'a> AskBatch<'a> {
    /// The entries in order, each decoded on its own: a go or an `all`; an
    /// entry that is neither is an error for that entry only.
    pub fn entries(&self) -> BatchEntries<'a> {
        BatchEntries(self.iter())
    }
}

/// One entry of a batch: a go, or limits checked together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchEntry<'a> {
    Go(Ask<'a>),
    All(AllAsk<'a>),
}

/// The entries of a batch, in order; see [`AskBatch::entries`].
pub struct BatchEntries<'a>(Entries<'a>);

impl<'a> Iterator for BatchEntries<'a> {
    type Item = Result<BatchEntry<'a>, WireError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        self.0.next_read().map(|read| entry_of(read?))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

/// The entry a read body is: a go, an `all`, or an error for that entry.
fn entry_of(read: Read) -> Result<BatchEntry, WireError> {
    match read {
        Read::Go(ask) => Ok(BatchEntry::Go(ask)),
        Read::Map(map, asks) => match (map.op, asks) {
            (Some("all"), Some((parts, len))) => AllAsk::new(&map, AskBatch::new(parts, len)).map(BatchEntry::All),
            (Some("all"), None) => Err(WireError::NoParts),
            _ => ask_of(&map).map(BatchEntry::Go),
        },
    }
}

/// The entry a batch's check passed on (see `fast::read_request_into`):
/// a go it decoded is taken as it is, any other entry read once from its
/// bytes, as [`AskBatch::entries`] reads it.
#[inline]
pub(super) fn checked_entry(checked: Checked) -> Result<BatchEntry, WireError> {
    match checked {
        Ok(ask) => Ok(BatchEntry::Go(ask)),
        Err(bytes) => other_entry(bytes),
    }
}

/// An entry that is not a go in its common shape, read from its bytes.
#[cold]
fn other_entry(bytes: &[u8]) -> Result<BatchEntry<'_>, WireError> {
    entry_of(read_other(bytes)?)
}

/// One entry of a batch to send: a go, or the parts of limits checked
/// together (an `all` without a wait or a hold of its own).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum BatchAsk<'s, 'a> {
    Go(Ask<'a>),
    All(&'s [Ask<'a>]),
}

/// Appends the encoding of a batch of `entries` to `out`: a go entry as
/// `encode_batch` writes it, an `all` as `encode_all` does.
///
/// ```
/// use locker::wire::{self, Ask, BatchAsk, BatchEntry, Request};
///
/// let parts = [Ask::new().limit("api"), Ask::new().limit("day")];
/// let mut body = Vec::new();
/// wire::encode_batch_entries(&[BatchAsk::Go(Ask::new().key("a")), BatchAsk::All(&parts)], &mut body);
/// let Ok(Request::Batch(batch)) = wire::decode_request(&body) else { panic!() };
/// let entries: Vec<BatchEntry> = batch.entries().map(Result::unwrap).collect();
/// assert_eq!(entries[0], BatchEntry::Go(Ask::new().key("a")));
/// let BatchEntry::All(all) = entries[1] else { panic!() };
/// assert_eq!(all.parts().map(Result::unwrap).collect::<Vec<_>>(), parts);
/// ```
pub fn encode_batch_entries(entries: &[BatchAsk], out: &mut Vec<u8>) {
    out.extend_from_slice(b"\x82\xa2op\xa5batch\xa4asks");
    put_array_len(out, entries.len());
    for entry in entries {
        match entry {
            BatchAsk::Go(ask) => super::encode(&ask.to_entry(), out),
            BatchAsk::All(parts) => super::encode_all(parts, None, None, out),
        }
    }
}

/// The reply to one entry of a batch that may hold `all` entries: a go's
/// reply or an `all`'s.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum EntryReply {
    Go(GoReply),
    All(AllReply),
}

/// Decodes the reply to a batch that may hold `all` entries (see
/// `encode_batch_entries`): each entry's reply, or the error that entry
/// met, in order; or the error that refused the whole batch.
pub fn decode_batch_entries_reply(body: &[u8]) -> Result<Reply<Vec<Result<EntryReply, String>>>, WireError> {
    decode_replies(body)
}
