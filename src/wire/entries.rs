//! A batch whose entries may be limits checked together: each entry a go
//! or an `all`, read as such ([`AskBatch::entries`]), written as such
//! ([`encode_batch_entries`]), and each reply a go's or an `all`'s
//! ([`decode_batch_entries_reply`]).
//!
//! It joins `batch` (the entries, read one at a time) and `together` (the
//! `all`), neither of which knows the other this way. For a locker's
//! decoder it reads an `all` entry's parts with the entry, once
//! (`other_entry`), and takes an `all`'s parts from the entries its check
//! read (`part_of_entry`). Like the rest of `wire`, this only translates.

use serde::Deserialize;

use super::ask::Ask;
use super::batch::{ask_of, decode_replies, go_of, put_array_len, read_other, read_other_into, AskBatch, Entries};
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

/// An entry that is not a go in its common shape, read once from its
/// bytes, as [`AskBatch::entries`] reads it; an `all`'s parts are read
/// with it, once, and kept at the end of `parts` (as
/// [`AllAsk::parts`] reads them), which holds nothing more of it.
#[cold]
pub(super) fn other_entry<'a>(
    bytes: &'a [u8],
    parts: &mut Vec<Result<Ask<'a>, WireError>>,
) -> Result<BatchEntry<'a>, WireError> {
    let mark = parts.len();
    let entry = read_other_into(bytes, &mut |checked| parts.push(part_of(checked))).and_then(entry_of);
    match &entry {
        // The parts of its last array of asks, the `all`'s (the check hands
        // on those of every array).
        Ok(BatchEntry::All(all)) => match (parts.len() - mark).checked_sub(all.len()) {
            Some(extra) => drop(parts.drain(mark..mark + extra)),
            // Never: the check hands on every entry of every array.
            None => {
                parts.truncate(mark);
                parts.extend(all.parts());
            }
        },
        _ => parts.truncate(mark),
    }
    entry
}

/// A part of an `all` as the check passed it on: a go it decoded taken as
/// it is, any other part read once from its bytes.
fn part_of(checked: Checked) -> Result<Ask, WireError> {
    match checked {
        Ok(ask) => Ok(ask),
        Err(bytes) => go_of(read_other(bytes)?),
    }
}

/// A part of an `all`, from the entry its bytes read as in a batch: the
/// same go, or the same error, that [`AllAsk::parts`] reads from them. An
/// entry with the op `all` (read as one, or refused as one: no parts, or
/// too many) is no go.
pub(super) fn part_of_entry(entry: Result<BatchEntry, WireError>) -> Result<Ask, WireError> {
    match entry {
        Ok(BatchEntry::Go(ask)) => Ok(ask),
        Ok(BatchEntry::All(_)) | Err(WireError::NoParts | WireError::TooManyParts(_)) => {
            Err(WireError::EntryNotAGo("all".to_owned()))
        }
        Err(e) => Err(e),
    }
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
