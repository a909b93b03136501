//! The batched ask: one message carrying a list of asks, answered by one
//! message carrying their replies in the same order.
//!
//! ```text
//! request  {"op": "batch", "asks": [ask, ask, ...]}
//! reply    {"replies": [reply, reply, ...]}
//! ```
//!
//! Each ask is the map of a structured go (any mix of limits, keys, costs,
//! `up_to`, `max_wait_ms`; `op` absent or `"go"`) or of an `all` (limits
//! checked together, see `together`), and each reply is what that entry
//! would get on its own: a go reply, an `all`'s reply, or an error map for
//! that entry alone. A batch costs the transport one message however many asks
//! it carries, which is what lifts a locker past the transport's message
//! rate. At most [`MAX_BATCH_ASKS`](super::MAX_BATCH_ASKS) asks travel in
//! one message, and the whole message is bounded by `--max-message-size`
//! like any other.
//!
//! Decoding checks the whole message's shape once (so a malformed batch is
//! refused before any of its asks is decided, an `all` entry's parts
//! included). A locker keeps each entry as that check decoded it, an `all`
//! entry's parts with it (`request::Decoder`, into buffers kept from one
//! batch to the next, so a batch allocates nothing once warm) and never
//! reads an entry or a part twice; a
//! reader without that buffer reads the entries again from their bytes,
//! one at a time, with [`AskBatch::iter`] (or, with `all` entries,
//! `AskBatch::entries` of `entries`). Like the rest of `wire`, this only
//! translates.

use serde::Deserialize;

use super::ask::Ask;
use super::cascade::{read_by_serde, read_rest_into, Read};
use super::fast::{self, Checked, Reader};
use super::reply::{ErrorReply, GoReply, Reply};
use super::{decode_exact, is_structured, RequestMap, WireError, BATCH_LEVELS, MAX_DEPTH};

/// The asks of a decoded batch, still as bytes: read them with `iter`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AskBatch<'a> {
    /// The encoded entries, back to back, checked to be whole values.
    entries: &'a [u8],
    len: usize,
}

impl<'a> AskBatch<'a> {
    /// The batch of `len` entries, `entries` back to back, as
    /// `fast::read_request` found them.
    pub(super) fn new(entries: &'a [u8], len: usize) -> AskBatch<'a> {
        AskBatch { entries, len }
    }

    /// How many asks the batch carries.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the batch carries no ask.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The asks in order, each decoded on its own: an entry that is not a
    /// valid go (an `all` included) is an error for that entry only.
    pub fn iter(&self) -> Entries<'a> {
        Entries { reader: Reader::new(self.entries), left: self.len }
    }
}

/// The asks of a batch, in order; see [`AskBatch::iter`].
pub struct Entries<'a> {
    reader: Reader<'a>,
    left: usize,
}

impl<'a> Iterator for Entries<'a> {
    type Item = Result<Ask<'a>, WireError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_read().map(|read| go_of(read?))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl<'a> Entries<'a> {
    /// The next entry, read: a go in its common shape read in one pass;
    /// anything else stepped over (it was checked whole when the batch was
    /// decoded) and read by `read_other`.
    #[inline]
    pub(super) fn next_read(&mut self) -> Option<Result<Read<'a>, WireError>> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let start = self.reader.at;
        if let Some((ask, len)) = fast::decode_go_prefix(&self.reader.body[start..]) {
            self.reader.at += len;
            return Some(Ok(Read::Go(ask)));
        }
        self.reader.skip(MAX_DEPTH - BATCH_LEVELS).ok()?;
        Some(read_other(&self.reader.body[start..self.reader.at]))
    }
}

/// An entry that is not a go in its common shape (its caller tried that
/// reader first), read on its own by the rest of the same cascade as a
/// request, from its bytes (checked whole when the batch was decoded).
/// What an outer request would fail on, serde reads or refuses for the
/// entry.
pub(super) fn read_other(bytes: &[u8]) -> Result<Read<'_>, WireError> {
    read_other_into(bytes, &mut |_| {})
}

/// `read_other`, handing each entry of the entry's own `asks` (an `all`'s
/// parts) to `part` as the check reads it (see `fast::read_request_into`).
pub(super) fn read_other_into<'a>(bytes: &'a [u8], part: &mut impl FnMut(Checked<'a>)) -> Result<Read<'a>, WireError> {
    if !is_structured(bytes) {
        return Err(WireError::EntryNotAMap);
    }
    read_rest_into(bytes, part).or_else(|_| read_by_serde(bytes))
}

/// The go a read entry is, if it is one.
pub(super) fn go_of(read: Read) -> Result<Ask, WireError> {
    match read {
        Read::Go(ask) => Ok(ask),
        Read::Map(map, _) => ask_of(&map),
    }
}

/// The ask an entry's map carries, if it is a go.
pub(super) fn ask_of<'a>(map: &RequestMap<'a>) -> Result<Ask<'a>, WireError> {
    match map.op {
        None | Some("go") => Ok(Ask::from_map(map)),
        Some(op) => Err(WireError::EntryNotAGo(op.to_owned())),
    }
}

/// Appends the encoding of a batch of `asks` to `out`. Entries leave out
/// `op`, which is `"go"` for all of them.
///
/// ```
/// use locker::wire::{self, Ask, Request};
///
/// let mut body = Vec::new();
/// wire::encode_batch(&[Ask::new().key("a"), Ask::new().limit("api").cost(2)], &mut body);
/// let Ok(Request::Batch(batch)) = wire::decode_request(&body) else { panic!() };
/// let asks: Vec<Ask> = batch.iter().map(Result::unwrap).collect();
/// assert_eq!(asks, [Ask::new().key("a"), Ask::new().limit("api").cost(2)]);
/// ```
pub fn encode_batch(asks: &[Ask], out: &mut Vec<u8>) {
    out.extend_from_slice(b"\x82\xa2op\xa5batch\xa4asks");
    put_array_len(out, asks.len());
    for ask in asks {
        super::encode(&ask.to_entry(), out);
    }
}

/// Appends the start of a batch's reply to `out`: the map and the header
/// of its array of `len` replies. Each reply follows, in order, as
/// `encode_go_reply` or `encode` (an `ErrorReply`) writes it.
pub fn begin_batch_reply(len: usize, out: &mut Vec<u8>) {
    out.extend_from_slice(b"\x81\xa7replies");
    put_array_len(out, len);
}

/// A MessagePack array header for `len` items.
pub(super) fn put_array_len(out: &mut Vec<u8>, len: usize) {
    match len {
        0..=15 => out.push(0x90 | len as u8),
        16..=0xffff => {
            out.push(0xdc);
            out.extend_from_slice(&(len as u16).to_be_bytes());
        }
        _ => {
            out.push(0xdd);
            out.extend_from_slice(&(len as u32).to_be_bytes());
        }
    }
}

/// One reply in a batch, as a client reads it.
#[derive(Deserialize)]
#[serde(untagged)]
enum ReadEntry<T> {
    Answer(T),
    Refused(ErrorReply),
}

#[derive(Deserialize)]
struct BatchReplyMap<T> {
    replies: Vec<ReadEntry<T>>,
}

/// Decodes the reply to a batch: each ask's go reply, or the error that
/// entry met, in order; or the error that refused the whole batch.
pub fn decode_batch_reply(body: &[u8]) -> Result<Reply<Vec<Result<GoReply, String>>>, WireError> {
    decode_replies(body)
}

pub(super) fn decode_replies<'de, T: Deserialize<'de>>(
    body: &'de [u8],
) -> Result<Reply<Vec<Result<T, String>>>, WireError> {
    if let Ok(e) = decode_exact::<ErrorReply>(body) {
        return Ok(Reply::Refused(e.error));
    }
    let map: BatchReplyMap<T> = decode_exact(body)?;
    let replies = map
        .replies
        .into_iter()
        .map(|e| match e {
            ReadEntry::Answer(answer) => Ok(answer),
            ReadEntry::Refused(e) => Err(e.error),
        })
        .collect();
    Ok(Reply::Answer(replies))
}

/// Calls `f` with what each reply of a batch's reply says, read from its
/// first bytes as `classify_reply` reads one reply; a reply that is not a
/// batch's (an error map refusing the whole batch) is one error. Returns
/// how many replies it saw.
pub fn classify_batch_reply(reply: &[u8], mut f: impl FnMut(super::ReplyKind)) -> usize {
    let mut r = Reader::new(reply);
    let header = r.map_len() == Some(1) && r.str_bytes() == Some(b"replies");
    let Some(len) = header.then(|| r.array_len()).flatten() else {
        f(super::ReplyKind::Error);
        return 1;
    };
    let mut seen = 0;
    for _ in 0..len {
        let start = r.at;
        if r.skip(MAX_DEPTH).is_err() {
            f(super::ReplyKind::Error);
            return seen + 1;
        }
        f(super::classify_reply(&r.body[start..r.at]));
        seen += 1;
    }
    seen
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{self, Request};

    fn decoded(body: &[u8]) -> Result<Vec<Result<Ask<'_>, WireError>>, WireError> {
        match wire::decode_request(body)? {
            Request::Batch(b) => Ok(b.iter().collect()),
            other => panic!("not a batch: {other:?}"),
        }
    }

    #[test]
    fn entries_are_errors_on_their_own() {
        // [go, stats, 5, {cost: "x"}, {key: "k", extra: [1]}]
        let body = b"\x82\xa2op\xa5batch\xa4asks\x95\x80\x81\xa2op\xa5stats\x05\x81\xa4cost\xa1x\x82\xa3key\xa1k\xa5extra\x91\x01";
        let asks = decoded(body).unwrap();
        assert_eq!(asks.len(), 5);
        assert_eq!(asks[0], Ok(Ask::new()));
        assert_eq!(asks[1], Err(WireError::EntryNotAGo("stats".into())));
        assert_eq!(asks[2], Err(WireError::EntryNotAMap));
        assert!(matches!(&asks[3], Err(WireError::Malformed(m)) if m.contains("wrong type")), "{:?}", asks[3]);
        assert_eq!(asks[4], Ok(Ask::new().key("k")), "unknown fields are ignored");
    }

    #[test]
    fn a_malformed_batch_is_refused_whole() {
        let cut = b"\x82\xa2op\xa5batch\xa4asks\x92\x80";
        assert!(wire::decode_request(cut).unwrap_err().to_string().contains("ends in the middle"));
        assert_eq!(wire::decode_request(b"\x81\xa2op\xa5batch"), Err(WireError::NoAsks));
        assert_eq!(wire::decode_request(b"\x82\xa2op\xa5batch\xa4asks\x05"), Err(WireError::NoAsks));
        let mut many = b"\x82\xa2op\xa5batch\xa4asks\xdc\x03\xe9".to_vec();
        many.extend(std::iter::repeat_n(0x80, 1001));
        assert_eq!(wire::decode_request(&many), Err(WireError::TooManyAsks(1001)));
        let mut deep = b"\x82\xa2op\xa5batch\xa4asks\x91\x81\xa1x".to_vec();
        deep.extend(std::iter::repeat_n(0x91, 100_000));
        deep.push(0x00);
        assert_eq!(wire::decode_request(&deep), Err(WireError::TooDeep));
        let mut trailing = b"\x82\xa2op\xa5batch\xa4asks\x90".to_vec();
        assert_eq!(decoded(&trailing).unwrap(), vec![], "an empty batch is a batch");
        trailing.push(0xc0);
        assert_eq!(wire::decode_request(&trailing), Err(WireError::TrailingBytes));
    }

    #[test]
    fn replies_are_classified_one_by_one() {
        let mut out = Vec::new();
        begin_batch_reply(3, &mut out);
        let go = GoReply {
            ok: true,
            limit: 5,
            remaining: 4,
            retry_after_ms: 0,
            reset_after_ms: 7,
            granted: None,
            wait_ms: None,
            shadow_sorry: false,
        };
        wire::encode_go_reply(&go, &mut out);
        wire::encode_go_reply(&GoReply { ok: false, ..go }, &mut out);
        wire::encode(&ErrorReply { error: "no".into() }, &mut out);
        let mut kinds = Vec::new();
        assert_eq!(classify_batch_reply(&out, |k| kinds.push(k)), 3);
        use wire::ReplyKind::*;
        assert_eq!(kinds, [Go, Sorry, Error]);
        assert_eq!(
            decode_batch_reply(&out),
            Ok(Reply::Answer(vec![Ok(go), Ok(GoReply { ok: false, ..go }), Err("no".into())]))
        );
        kinds.clear();
        assert_eq!(classify_batch_reply(b"\x81\xa5error\xa2no", |k| kinds.push(k)), 1);
        assert_eq!(kinds, [Error]);
    }

    #[test]
    fn long_arrays_take_the_longer_headers() {
        let mut out = Vec::new();
        put_array_len(&mut out, 15);
        put_array_len(&mut out, 16);
        put_array_len(&mut out, 70_000);
        assert_eq!(out, [0x9f, 0xdc, 0x00, 0x10, 0xdd, 0x00, 0x01, 0x11, 0x70]);
    }
}
