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
//! This module only translates bytes to values and back. It holds no state,
//! makes no decisions and never touches a socket.

use serde::{de::IgnoredAny, Deserialize, Serialize};

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
    /// "go" (the default) or "stats".
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub op: Option<&'a str>,
    /// A configured limit's name; the default limit when absent.
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<&'a str>,
    /// A key within the limit; each key has its own count.
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub key: Option<&'a str>,
    /// Permits to take at once; 1 when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<u64>,
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
}

/// A structured "may I go?": which limit, which key, how many permits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ask<'a> {
    /// A configured limit's name; the default limit when `None`.
    pub limit: Option<&'a str>,
    /// A key within the limit; the limit's unkeyed count when `None`.
    pub key: Option<&'a str>,
    /// Permits to take at once.
    pub cost: u64,
}

impl Default for Ask<'_> {
    fn default() -> Self {
        Ask { limit: None, key: None, cost: 1 }
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

    /// The request map that carries this ask.
    pub fn to_map(&self) -> RequestMap<'a> {
        RequestMap { op: Some("go"), limit: self.limit, key: self.key, cost: Some(self.cost) }
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
    #[error("unknown op {0:?} (expected \"go\" or \"stats\")")]
    UnknownOp(String),
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
    let map = match crate::wire_fast::decode_request_map(body) {
        Some(map) => map,
        None => decode_exact(body)?,
    };
    match map.op.unwrap_or("go") {
        "go" => Ok(Request::Go(Ask { limit: map.limit, key: map.key, cost: map.cost.unwrap_or(1) })),
        "stats" => Ok(Request::Stats),
        other => Err(WireError::UnknownOp(other.to_owned())),
    }
}

/// Decodes exactly one MessagePack value of type `T` from `body`, with the
/// nesting cap, and rejects anything after it.
fn decode_exact<'a, T: Deserialize<'a>>(body: &'a [u8]) -> Result<T, WireError> {
    let mut de = rmp_serde::Deserializer::from_read_ref(body);
    de.set_max_depth(MAX_DEPTH);
    let value = T::deserialize(&mut de).map_err(|e| match e {
        rmp_serde::decode::Error::DepthLimitExceeded => WireError::TooDeep,
        other => WireError::Malformed(other.to_string()),
    })?;
    // A second value that decodes means bytes were left over; an error here
    // means the input ended where it should.
    match IgnoredAny::deserialize(&mut de) {
        Ok(_) | Err(rmp_serde::decode::Error::DepthLimitExceeded) => Err(WireError::TrailingBytes),
        Err(_) => Ok(value),
    }
}

/// The structured reply to "go".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct GoReply {
    /// Whether the caller may go.
    pub ok: bool,
    /// The limit's max_requests.
    pub limit: u32,
    /// Permits left for this key in the current slot.
    pub remaining: u32,
    /// When not ok: milliseconds until the next slot, rounded up. 0 when ok.
    pub retry_after_ms: u64,
    /// Milliseconds until the current slot ends, rounded up.
    pub reset_after_ms: u64,
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
pub fn encode_go_reply(reply: &GoReply, out: &mut Vec<u8>) {
    crate::wire_fast::encode_go_reply(reply, out);
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
