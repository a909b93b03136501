//! Replies: the plain form's go and sorry, the structured go reply, the
//! error reply, the stats reply, and how a client reads them.
//!
//! Like the rest of `wire`, this only translates. The go reply's bytes are
//! also written by hand in `wire::fast`, which a field added here must reach.

use serde::{Deserialize, Serialize};

use super::{decode_exact, WireError};

/// The plain form's reply when the caller may go.
pub const GO: &[u8] = b"go";
/// The plain form's reply when the caller may not go.
pub const SORRY: &[u8] = b"sorry";

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
    /// Whether an ask in shadow (or of a limit in shadow) would have got
    /// sorry: it is answered ok and charged nothing, with the sorry's
    /// figures. Absent otherwise.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub shadow_sorry: bool,
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
    /// Bytes the key tables hold on the heap, roughly: they shrink when a
    /// flood's keys have ended (docs/operations.md, "Memory and keys").
    #[serde(default, skip_serializing_if = "is_zero")]
    pub key_bytes: u64,
    /// This locker's node id, when peered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// Whether this locker is still learning the counts from its peers.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub joining: bool,
    /// Every configured peer heard from, when peered.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub peers: Vec<PeerStatsReply>,
    /// Runs of other lockers in the node table, when peered: at most
    /// `MAX_RUNS_PER_PEER` per configured peer, whatever peers send.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer_runs: Option<u64>,
    /// Peer messages, counts and node ids refused since start, from every
    /// configured peer: also from one never heard from (a peer that only
    /// sent messages under this locker's own node id), which has no entry
    /// in `peers` (absent when 0).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub peer_rejected: u64,
    /// Whether a majority of the group echoes this locker lately, so that
    /// it may grant from its own share (docs/peering.md, "leases and
    /// reclaim"); absent under three members, where leases do not apply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leased: Option<bool>,
    /// How many lockers this locker shares its limits with, itself
    /// included, when peered (docs/peering.md, "One member set").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub members: Option<u32>,
    /// Whether a peer names another member set than this locker: it then
    /// grants nothing from shares until they agree (absent when not).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub member_set_mismatch: bool,
    /// Whether this locker grants nothing from shares while a change of
    /// the member set settles, its own or a peer's (absent when not; see
    /// docs/peering.md, "Adding or removing a member").
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub member_set_settling: bool,
    /// The peers this locker declared dead (absent when none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub declared_dead: Vec<String>,
    /// The members whose shares this locker holds besides its own, taken
    /// back from them once a majority declared them dead (absent when none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub holds: Vec<String>,
    /// CURVE handshakes refused by the allowlist since start (each retry of
    /// a refused client counts again).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub refused_connections: u64,
    /// Why every grant is refused for now, if it is: the state file cannot
    /// grow (docs/operations.md, "A full disk").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refusing: Option<String>,
    /// Client connections the locker could not accept since start (it ran
    /// out of open files; docs/operations.md, "Open files").
    #[serde(default, skip_serializing_if = "is_zero")]
    pub accept_failures: u64,
    /// How far this locker moved its clock to the middle of its peers',
    /// in milliseconds (its own clock is off by about that much); present
    /// when peered and moved.
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub clock_correction_ms: f64,
    /// Asks held now, for a go instead of sorry (absent when none).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub parked: u64,
    /// Asks held since start, and those of them answered go (absent when 0).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub held: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub held_go: u64,
    /// Replies that could not be delivered since start (the client went
    /// away, or would not take its replies), and how many of them were go
    /// (absent when 0; docs/wire.md, "Every reply arrives").
    #[serde(default, skip_serializing_if = "is_zero")]
    pub undelivered: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub undelivered_go: u64,
    /// The store's claims, when the counts live in one (docs/store.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<StoreStatsReply>,
}

/// The store's side of a stats reply.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StoreStatsReply {
    /// Claims sent to the store since start.
    pub claims: u64,
    /// Permits those claims brought.
    pub claimed: u64,
    /// Claims the store could not answer.
    pub failed: u64,
    /// Claims on their way now.
    pub in_flight: u64,
    /// Why the store fails, while it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub down: Option<String>,
}

/// One peer in a stats reply.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PeerStatsReply {
    /// The peer's node id.
    pub node: String,
    /// Milliseconds since its last heartbeat arrived.
    pub last_heard_ms: u64,
    /// Its clock minus this locker's, in milliseconds, measured both ways
    /// so that transit cancels.
    pub clock_offset_ms: f64,
    /// Whether the offset is beyond the in-flight window, where skew can
    /// cost a grant.
    pub flagged: bool,
    /// Whether it was heard recently enough to count as live.
    pub live: bool,
    /// The peer as configured (its endpoint).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub endpoint: String,
    /// Counts and node ids it sent that were refused (implausible counts,
    /// too many runs).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub rejected: u64,
    /// Limits it defines differently from this locker: their counts are
    /// not merged.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mismatched_limits: Vec<String>,
    /// How many members the peer's last heartbeat counted, when it says
    /// (an older locker does not).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub members: Option<u32>,
    /// Whether the peer names another member set than this locker.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub member_set_mismatch: bool,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn is_zero_f64(n: &f64) -> bool {
    *n == 0.0
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
    /// "fixed-window", "token-bucket", "semaphore" or "rolling-window".
    #[serde(default)]
    pub algorithm: String,
    /// A token bucket's burst; absent for other kinds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<u32>,
    /// A rolling window's margin in milliseconds; absent when none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub margin_ms: Option<f64>,
    /// Go that were reservations, and lease acquires that queued.
    #[serde(default)]
    pub waited: u64,
    /// Peeks (`cost` 0) answered: requests, but neither go nor sorry;
    /// absent when 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub peeks: u64,
    /// Permits charged after the fact (`charge`; each charge is also a
    /// request and a go); absent when 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub charged: u64,
    /// Asks in shadow answered go that would have got sorry (each also
    /// counted in `sorry`); absent when 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub shadow_sorry: u64,
}

/// What a reply to "may I go?" said; see `wire::classify_reply`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyKind {
    Go,
    Sorry,
    /// An error map, or anything that is neither go nor sorry.
    Error,
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
