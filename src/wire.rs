//! The wire format, for both sides: every message a client sends, every
//! reply a locker gives and every message peered lockers exchange, how each
//! is encoded, and the limits on their size and shape. Nothing else in the
//! crate knows a byte of it.
//!
//! Two request forms share one REP socket:
//! - the seed's **plain form**: any single-part message that is not a
//!   MessagePack map (b"let me go", a limit's name, even an empty message),
//!   answered with the bare bytes `go` or `sorry`;
//! - the **structured form**: a MessagePack map with an `op`, answered with a
//!   MessagePack map.
//!
//! One file per message family: `ask` (the structured "may I go?"),
//! `request` (every request, and the one decoder), `batch` (many asks in one
//! message), `together` (`all`, refund, reset), `charge` (permits charged
//! after the fact, and the debt they leave), `entries` (a batch with
//! `all` entries),
//! `parents` (the keys an ask names for the limits above its own),
//! `lease` (acquire, heartbeat, release), `reply` (go, sorry, errors, stats)
//! and `peer` (what peered lockers say over PUB/SUB). This file holds what
//! they share: the request map they all travel in, the error, the size
//! limits, and the encode and decode entry points. The private `fast` codec
//! reads every request map once by hand (a go straight into an ask),
//! checking field names and string fields against the contract as it
//! reads, and writes the go reply; `request` and `batch` call it and fall
//! back to serde for the shapes it leaves.
//!
//! This module only translates bytes to values and back. It holds no state,
//! makes no decisions and never touches a socket.

use serde::{Deserialize, Serialize};

mod ask;
mod batch;
mod cascade;
mod charge;
mod entries;
mod fast;
mod lease;
mod parents;
mod peer;
mod reply;
mod request;
mod together;

pub use ask::{Ask, Terms};
pub use batch::{begin_batch_reply, classify_batch_reply, decode_batch_reply, encode_batch, AskBatch, Entries};
pub use charge::{decode_charge_reply, encode_charge_reply, Charge, ChargeReply};
pub use entries::{decode_batch_entries_reply, encode_batch_entries, BatchAsk, BatchEntries, BatchEntry, EntryReply};
#[cfg(test)]
pub(crate) use fast::reads as map_reads;
pub use lease::{Heartbeat, LeaseAsk, LeaseReply, Release};
pub use parents::{ParentKeys, Parents, MAX_PARENTS};
pub use peer::{
    decode_peer, PeerAbout, PeerBeat, PeerCount, PeerCounts, PeerEcho, PeerGift, PeerKind, PeerLimit, PeerMembers,
    PeerMsg, PeerNode, PeerSeen, PeerSnapshotPart, PeerTenure, PeerTerms, MAX_COUNTS_PER_MESSAGE,
    MAX_LIMITS_PER_MESSAGE, MAX_PEER_MESSAGE_SIZE,
};
pub use reply::{
    decode_plain_reply, decode_reply, ErrorReply, GoReply, LimitStatsReply, PeerStatsReply, Reply, ReplyKind,
    StatsReply, StoreStatsReply, GO, SORRY,
};
pub use request::{decode_request, Decoded, Decoder, EntriesWithParts, EntryParts, Request};
pub use together::{decode_all_reply, encode_all, encode_all_reply, AllAsk, AllReply, Refund, Reset, MAX_PARTS};

/// The largest request a locker accepts by default; larger messages are
/// dropped by ZeroMQ itself (ZMQ_MAXMSGSIZE), which disconnects the sender.
pub const DEFAULT_MAX_MESSAGE_SIZE: usize = 64 * 1024;

/// The most asks one batch may carry. A batch of this many short asks is
/// about 40 KB, within the default `--max-message-size` of 64 KiB; its
/// reply is about 70 KB.
pub const MAX_BATCH_ASKS: usize = 1000;

/// Nesting levels a batch itself takes above its entries: the request
/// map and the `asks` array.
const BATCH_LEVELS: usize = 2;

/// How deeply values may nest inside a request map. Requests are flat maps;
/// a small allowance leaves room for fields this version ignores, and the
/// cap keeps a hostile message from exhausting the stack.
pub const MAX_DEPTH: usize = 8;

/// A request as it travels: a flat map whose fields depend on `op`. The
/// client encodes this struct and the locker decodes it, so both sides share
/// one definition.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestMap<'a> {
    /// "go" (the default), "batch", "stats", "acquire", "heartbeat" or "release".
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub op: Option<&'a str>,
    /// A configured limit's name; the default limit when absent.
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<&'a str>,
    /// A key within the limit; each key has its own count.
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub key: Option<&'a str>,
    /// Permits to take at once; 1 when absent, 0 peeks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<u64>,
    /// Take as many of `cost` as are available instead of all or nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub up_to: Option<bool>,
    /// Wait up to this long for a reservation (go) or in the queue (acquire).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_wait_ms: Option<u64>,
    /// Hold the reply up to this long for a go rather than answer sorry,
    /// or for a queued lease to be granted rather than answer pending.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold_ms: Option<u64>,
    /// A go's limit terms, for a limit created on first use (`--runtime-limits`).
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub terms: Option<Terms<'a>>,
    /// A go's or a refund's keys for the limits above its own. Read by
    /// hand wherever the map is read (`fast`), serde's reading included
    /// (`cascade::read_by_serde`): it stays in the request's bytes.
    #[serde(skip_deserializing, skip_serializing_if = "Option::is_none")]
    pub parents: Option<Parents<'a>>,
    /// A go in shadow: a would-be sorry is answered go and charges nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shadow: Option<bool>,
    /// A semaphore count to hold (acquire), or to restore (heartbeat).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
    /// How long a lease lives without a heartbeat.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<u64>,
    /// A lease id (heartbeat, release).
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<&'a str>,
}

/// Why a structured request could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("a request has one part, this one has {0}")]
    MultiPart(usize),
    #[error("bad request: {0}")]
    Malformed(String),
    #[error("bad request: nesting deeper than {MAX_DEPTH} levels")]
    TooDeep,
    #[error("bad request: trailing bytes after the request map")]
    TrailingBytes,
    #[error("unknown op {0:?} (expected \"go\", \"batch\", \"all\", \"refund\", \"charge\", \"reset\", \"stats\", \"acquire\", \"heartbeat\" or \"release\")")]
    UnknownOp(String),
    #[error("bad request: op {0:?} needs a lease")]
    NoLease(&'static str),
    #[error("bad request: op \"batch\" needs one array of asks")]
    NoAsks,
    #[error("bad request: a batch carries at most {MAX_BATCH_ASKS} asks, this one has {0}")]
    TooManyAsks(usize),
    #[error("bad request: op \"all\" needs one array of asks")]
    NoParts,
    #[error("bad request: \"all\" holds at most {} parts, this one has {0}", together::MAX_PARTS)]
    TooManyParts(usize),
    #[error("bad request: a batch entry must be a map")]
    EntryNotAMap,
    #[error("bad request: a batch entry is a go, not op {0:?}")]
    EntryNotAGo(String),
    #[error("bad request: field names must be strings, found {0}")]
    FieldNameNotAString(&'static str),
    #[error("bad request: field {0:?} must be a string, found {1}")]
    NotAString(String, &'static str),
    #[error("bad request: {0}")]
    BadParents(String),
    #[error("bad request: {0}")]
    MisplacedParents(&'static str),
    #[error("bad request: {0}")]
    MisplacedField(&'static str),
}

/// Whether `body` is a structured request: it starts with a MessagePack map
/// marker (fixmap, map16 or map32). Everything else is the plain form.
pub fn is_structured(body: &[u8]) -> bool {
    matches!(body.first(), Some(0x80..=0x8f | 0xde | 0xdf))
}

/// Appends the MessagePack encoding of `value` (as a map with field names)
/// to `out`. Encoding into a reused buffer does not allocate once the buffer
/// has grown to fit.
pub fn encode<T: Serialize>(value: &T, out: &mut Vec<u8>) {
    // Writing to a Vec cannot fail, and every type here is serialisable.
    rmp_serde::encode::write_named(out, value).expect("encoding to a Vec cannot fail");
}

/// Appends the encoding of a go reply to `out`: the bytes `encode` gives,
/// written by hand because every structured request's reply is one.
///
/// ```
/// use locker::wire::{self, GoReply};
///
/// let reply = GoReply { ok: true, limit: 5, remaining: 4, retry_after_ms: 0, reset_after_ms: 700, granted: None, wait_ms: None, shadow_sorry: false };
/// let (mut fast, mut serde) = (Vec::new(), Vec::new());
/// wire::encode_go_reply(&reply, &mut fast);
/// wire::encode(&reply, &mut serde);
/// assert_eq!(fast, serde);
/// ```
pub fn encode_go_reply(reply: &GoReply, out: &mut Vec<u8>) {
    fast::encode_go_reply(reply, out);
}

/// What a reply to "may I go?" says, in either form, read from its first
/// bytes without decoding it: the load generator's view of a reply.
///
/// ```
/// use locker::wire::{self, ReplyKind};
///
/// assert_eq!(wire::classify_reply(wire::GO), ReplyKind::Go);
/// assert_eq!(wire::classify_reply(b"sorry"), ReplyKind::Sorry);
/// assert_eq!(wire::classify_reply(b"\x81\xa5error\xa2no"), ReplyKind::Error);
/// ```
pub fn classify_reply(reply: &[u8]) -> ReplyKind {
    match reply {
        GO => ReplyKind::Go,
        SORRY => ReplyKind::Sorry,
        structured => match fast::go_reply_ok(structured) {
            Some(true) => ReplyKind::Go,
            Some(false) => ReplyKind::Sorry,
            None => ReplyKind::Error,
        },
    }
}

/// Whether a reply grants anything: a go, or a batch's reply with a go
/// among its entries. Read from the reply's first bytes, as
/// `classify_reply` reads it.
///
/// ```
/// use locker::wire;
///
/// assert!(wire::grants(wire::GO));
/// assert!(!wire::grants(b"sorry"));
/// // {"replies": [{"ok": false}, {"ok": true}]}
/// assert!(wire::grants(b"\x81\xa7replies\x92\x81\xa2ok\xc2\x81\xa2ok\xc3"));
/// ```
pub fn grants(reply: &[u8]) -> bool {
    match classify_reply(reply) {
        ReplyKind::Go => true,
        ReplyKind::Sorry => false,
        ReplyKind::Error => {
            let mut any = false;
            batch::classify_batch_reply(reply, |kind| any |= kind == ReplyKind::Go);
            any
        }
    }
}

/// Decodes exactly one MessagePack value of type `T` from `body`, with the
/// nesting cap, and rejects anything after it.
fn decode_exact<'a, T: Deserialize<'a>>(body: &'a [u8]) -> Result<T, WireError> {
    let mut de = rmp_serde::Deserializer::from_read_ref(body);
    de.set_max_depth(MAX_DEPTH);
    let value = T::deserialize(&mut de).map_err(malformed)?;
    // Any byte left over is an error, whether or not it starts a whole
    // value: a reserved marker (0xc1) or a value cut short (0xb1 with no
    // string after it) must not pass for the end of the message.
    // The decoder does not say where the value ended, so the codec measures it.
    match fast::value_len(body, MAX_DEPTH) {
        Some(len) if len == body.len() => Ok(value),
        _ => Err(WireError::TrailingBytes),
    }
}

/// Turns a decoder error into a message for the person who sent the request.
fn malformed(e: rmp_serde::decode::Error) -> WireError {
    use rmp_serde::decode::Error as E;
    let message = match e {
        E::DepthLimitExceeded => return WireError::TooDeep,
        E::InvalidMarkerRead(_) | E::InvalidDataRead(_) => "the message ends in the middle of a value".to_owned(),
        E::TypeMismatch(marker) => format!("a field has the wrong type (found MessagePack {marker:?})"),
        // serde's own wording, minus an implementation detail.
        other => other.to_string().replace("a borrowed string", "a string"),
    };
    WireError::Malformed(message)
}
