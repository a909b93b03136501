//! The wire format, for both sides: every message a client sends and every
//! reply a locker gives, how each is encoded, and the limits on their size
//! and shape.
//!
//! Two request forms share one REP socket:
//! - the seed's **plain form**: any single-part message that is not a
//!   MessagePack map (b"let me go", a limit's name, even an empty message),
//!   answered with the bare bytes `go` or `sorry`;
//! - the **structured form**: a MessagePack map with an `op`, answered with a
//!   MessagePack map.
//!
//! Peered lockers talk over PUB/SUB with [`PeerMsg`]: heartbeats, the
//! cumulative counts each grant produces, and snapshots for a locker that
//! (re)starts.
//!
//! This module only translates bytes to values and back. It holds no state,
//! makes no decisions and never touches a socket. Lease messages live in
//! `wire::lease`.

use serde::{de::IgnoredAny, Deserialize, Serialize};

mod fast;
mod lease;

pub use lease::{Heartbeat, LeaseAsk, LeaseReply, Release};

/// The plain form's reply when the caller may go.
pub const GO: &[u8] = b"go";
/// The plain form's reply when the caller may not go.
pub const SORRY: &[u8] = b"sorry";

/// The largest request a locker accepts by default; larger messages are
/// dropped by ZeroMQ itself (ZMQ_MAXMSGSIZE), which disconnects the sender.
pub const DEFAULT_MAX_MESSAGE_SIZE: usize = 64 * 1024;

/// How deeply values may nest inside a request map. Requests are flat maps;
/// a small allowance leaves room for fields this version ignores, and the
/// cap keeps a hostile message from exhausting the stack.
pub const MAX_DEPTH: usize = 8;

/// A request as it travels: a flat map whose fields depend on `op`. The
/// client encodes this struct and the locker decodes it, so both sides share
/// one definition.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestMap<'a> {
    /// "go" (the default), "stats", "acquire", "heartbeat" or "release".
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

/// A decoded request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request<'a> {
    /// The seed's form: the body selects a limit by name, or the default.
    Plain(&'a [u8]),
    /// May I go?
    Go(Ask<'a>),
    /// The locker's counters.
    Stats,
    /// Take a semaphore count under a new lease.
    Acquire(LeaseAsk<'a>),
    /// Keep a lease alive, or restore it.
    Heartbeat(Heartbeat<'a>),
    /// Free a lease.
    Release(Release<'a>),
}

/// A structured "may I go?": which limit, which key, how many permits, and
/// how long the caller would wait for them.
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
}

impl Default for Ask<'_> {
    fn default() -> Self {
        Ask { limit: None, key: None, cost: 1, up_to: false, max_wait_ms: None }
    }
}

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

    /// The request map that carries this ask.
    pub fn to_map(&self) -> RequestMap<'a> {
        RequestMap {
            op: Some("go"),
            limit: self.limit,
            key: self.key,
            cost: Some(self.cost),
            up_to: self.up_to.then_some(true),
            max_wait_ms: self.max_wait_ms,
            ..RequestMap::default()
        }
    }
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
    #[error("unknown op {0:?} (expected \"go\", \"stats\", \"acquire\", \"heartbeat\" or \"release\")")]
    UnknownOp(String),
    #[error("bad request: op {0:?} needs a lease")]
    NoLease(&'static str),
}

/// Whether `body` is a structured request: it starts with a MessagePack map
/// marker (fixmap, map16 or map32). Everything else is the plain form.
pub fn is_structured(body: &[u8]) -> bool {
    matches!(body.first(), Some(0x80..=0x8f | 0xde | 0xdf))
}

/// Decodes one single-part request.
pub fn decode_request(body: &[u8]) -> Result<Request<'_>, WireError> {
    if !is_structured(body) {
        return Ok(Request::Plain(body));
    }
    // The hand-written decoder reads the common shapes; everything else,
    // errors included, goes to serde.
    let map = match fast::decode_request_map(body) {
        Some(map) => map,
        None => decode_exact(body)?,
    };
    match map.op.unwrap_or("go") {
        "go" => Ok(Request::Go(Ask {
            limit: map.limit,
            key: map.key,
            cost: map.cost.unwrap_or(1),
            up_to: map.up_to.unwrap_or(false),
            max_wait_ms: map.max_wait_ms,
        })),
        "stats" => Ok(Request::Stats),
        "acquire" => Ok(Request::Acquire(LeaseAsk::from_map(&map))),
        "heartbeat" => Heartbeat::from_map(&map).map(Request::Heartbeat),
        "release" => Release::from_map(&map).map(Request::Release),
        other => Err(WireError::UnknownOp(other.to_owned())),
    }
}

/// Decodes exactly one MessagePack value of type `T` from `body`, with the
/// nesting cap, and rejects anything after it.
fn decode_exact<'a, T: Deserialize<'a>>(body: &'a [u8]) -> Result<T, WireError> {
    let mut de = rmp_serde::Deserializer::from_read_ref(body);
    de.set_max_depth(MAX_DEPTH);
    let value = T::deserialize(&mut de).map_err(malformed)?;
    // A second value that decodes means bytes were left over; an error here
    // means the input ended where it should.
    match IgnoredAny::deserialize(&mut de) {
        Ok(_) | Err(rmp_serde::decode::Error::DepthLimitExceeded) => Err(WireError::TrailingBytes),
        Err(_) => Ok(value),
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

/// The structured reply to "go".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct GoReply {
    /// Whether the caller may go (after `wait_ms`, when present).
    pub ok: bool,
    /// The limit's capacity: max_requests, or a token bucket's burst.
    pub limit: u32,
    /// Permits a new ask could take now.
    pub remaining: u32,
    /// When not ok: milliseconds until the ask would fit, rounded up. 0 when ok.
    pub retry_after_ms: u64,
    /// Milliseconds until the count is whole again (the slot ends, the
    /// bucket is full), rounded up.
    pub reset_after_ms: u64,
    /// Permits taken; present when the request had `up_to`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub granted: Option<u32>,
    /// Milliseconds, rounded up, after which the caller may go; present
    /// when the request had `max_wait_ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_ms: Option<u64>,
}

/// The reply to a request that could not be served.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorReply {
    /// What was wrong, for a person to read.
    pub error: String,
}

/// The reply to "stats".
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StatsReply {
    /// One entry per limit, the default limit first.
    pub limits: Vec<LimitStatsReply>,
    /// Requests that failed before reaching a limit.
    pub errors: u64,
    /// Keys with a count in their limit's current slot.
    pub live_keys: u64,
    /// This locker's node id, when peered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// Whether this locker is still learning the counts from its peers.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub joining: bool,
    /// Every peer heard of, when peered.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub peers: Vec<PeerStatsReply>,
}

/// One peer in a stats reply.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PeerStatsReply {
    /// The peer's node id.
    pub node: String,
    /// Milliseconds since its last heartbeat arrived.
    pub last_heard_ms: u64,
    /// Its clock minus this locker's, in milliseconds (transit included).
    pub clock_offset_ms: f64,
    /// Whether the offset is beyond a quarter of the shortest slot.
    pub flagged: bool,
    /// Whether it was heard recently enough to count as live.
    pub live: bool,
}

/// One limit's counters in a stats reply.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LimitStatsReply {
    pub name: String,
    pub max_requests: u32,
    pub in_seconds: f64,
    pub requests: u64,
    pub go: u64,
    pub sorry: u64,
    pub errors: u64,
    /// "fixed-window", "token-bucket" or "semaphore".
    #[serde(default)]
    pub algorithm: String,
    /// A token bucket's burst; absent for other kinds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<u32>,
    /// Go that were reservations, and lease acquires that queued.
    #[serde(default)]
    pub waited: u64,
}

/// Appends the MessagePack encoding of `value` (as a map with field names)
/// to `out`. Encoding into a reused buffer does not allocate once the buffer
/// has grown to fit.
pub fn encode<T: Serialize>(value: &T, out: &mut Vec<u8>) {
    // Writing to a Vec cannot fail, and every type here is serialisable.
    rmp_serde::encode::write_named(out, value).expect("encoding to a Vec cannot fail");
}

/// The most counts one peer message carries; longer lists are split.
pub const MAX_COUNTS_PER_MESSAGE: usize = 256;

/// The largest peer message accepted (ZMQ_MAXMSGSIZE on the SUB socket).
/// It fits `MAX_COUNTS_PER_MESSAGE` counts with long keys, and bounds what a
/// stray publisher can make a locker buffer.
pub const MAX_PEER_MESSAGE_SIZE: usize = 4 * 1024 * 1024;

/// What a peer message says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PeerKind {
    /// A heartbeat: the sender is alive, its clock reads `at`, and with
    /// `joining` it asks for a snapshot.
    Beat,
    /// The sender's own cumulative counts, after grants or as a repair.
    Counts,
    /// Part of a snapshot: every count the sender knows, its own and its
    /// peers'; `done` marks the last part.
    Snapshot,
}

/// One run of one locker, as `[id, incarnation]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerNode(pub String, pub u64);

/// A cumulative count, as `[limit, key or nil, slot, node, count]`, where
/// `node` indexes the message's `nodes`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerCount(pub String, pub Option<String>, pub u64, pub u32, pub u32);

/// A message from one locker to its peers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerMsg {
    /// What the message says.
    pub kind: PeerKind,
    /// The nodes the counts name; the first is the sender.
    pub nodes: Vec<PeerNode>,
    /// The sender's clock when it sent the message, in nanoseconds since
    /// the Unix epoch.
    pub at: u64,
    /// In a heartbeat: the sender is still learning the counts.
    #[serde(default)]
    pub joining: bool,
    /// In a snapshot: this is the last part.
    #[serde(default)]
    pub done: bool,
    /// The counts, at most `MAX_COUNTS_PER_MESSAGE`.
    #[serde(default)]
    pub counts: Vec<PeerCount>,
}

impl PeerMsg {
    /// The sender.
    pub fn sender(&self) -> Option<&PeerNode> {
        self.nodes.first()
    }
}

/// Decodes one peer message.
pub fn decode_peer(body: &[u8]) -> Result<PeerMsg, WireError> {
    if !is_structured(body) {
        return Err(WireError::Malformed("a peer message is a map".into()));
    }
    decode_exact(body)
}

/// Appends the encoding of a go reply to `out`: the bytes `encode` gives,
/// written by hand because every structured request's reply is one.
pub fn encode_go_reply(reply: &GoReply, out: &mut Vec<u8>) {
    fast::encode_go_reply(reply, out);
}

/// A structured reply as a client reads it.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply<T> {
    /// The locker answered the request.
    Answer(T),
    /// The locker refused the request and said why.
    Refused(String),
}

/// Decodes a structured reply: either a `T` or an error map.
pub fn decode_reply<'a, T: Deserialize<'a>>(body: &'a [u8]) -> Result<Reply<T>, WireError> {
    if let Ok(e) = decode_exact::<ErrorReply>(body) {
        return Ok(Reply::Refused(e.error));
    }
    decode_exact(body).map(Reply::Answer)
}

/// Decodes a plain-form reply.
pub fn decode_plain_reply(body: &[u8]) -> Result<bool, WireError> {
    match body {
        GO => Ok(true),
        SORRY => Ok(false),
        other => Err(WireError::Malformed(format!("expected go or sorry, got {:?}", String::from_utf8_lossy(other)))),
    }
}
