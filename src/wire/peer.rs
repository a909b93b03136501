//! Peer messages: what peered lockers say to each other over PUB/SUB —
//! heartbeats, the cumulative counts each grant produces, and snapshots for
//! a locker that (re)starts.
//!
//! Like the rest of `wire`, this only translates; the ledger that merges
//! counts lives in the core.

use serde::{Deserialize, Serialize};

use super::{decode_exact, is_structured, WireError};

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

/// A gift of conserved permits (fixed windows), as `[limit, key or nil,
/// slot, giver, receiver, count]`, where giver and receiver index the
/// message's `nodes`: the giver's cumulative total given to the receiver
/// in that slot, already taken off the giver's own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerGift(pub String, pub Option<String>, pub u64, pub u32, pub u32, pub u32);

/// A limit's name and the digest of its definition (`Limit::digest`), as
/// `[name, digest]`: peers merge counts only for limits defined alike.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerLimit(pub String, pub u64);

/// A limit created from terms sent with an ask (`--runtime-limits`), as
/// `[name, algorithm, max_requests, in_seconds, burst or nil]`: a peer
/// that has no limit of that name creates it under its own bound. Its
/// digest travels in `limits` as any limit's does.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PeerTerms(pub String, pub String, pub u64, pub f64, pub Option<u64>);

/// Terms are equal when every field is, `in_seconds` bit for bit.
impl PartialEq for PeerTerms {
    fn eq(&self, other: &Self) -> bool {
        let key = |t: &Self| (t.2, t.3.to_bits(), t.4);
        self.0 == other.0 && self.1 == other.1 && key(self) == key(other)
    }
}

impl Eq for PeerTerms {}

/// How a heartbeat's sender sees one of its peers' clocks, as `[node id,
/// offset]`: that peer's clock minus the sender's, in nanoseconds, transit
/// included. The peer reads its own entry and halves the difference with
/// its own view of the sender, which cancels the transit time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerSeen(pub String, pub i64);

/// A heartbeat's echo of one peer's, as `[node id, at]`: the `at` of the
/// latest heartbeat the sender heard from that peer. A majority's echoes
/// are a locker's lease on its share (see `core::peering::tenure`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerEcho(pub String, pub u64);

/// The member set as the sender sees it, as `[members, digest or nil]`:
/// how many lockers share its limits (itself and every configured peer),
/// and a digest of their ids once it knows every one (see
/// `core::peering::members`). Peers that count or name the group
/// differently each compute another share of a limit, so a locker that
/// hears a set other than its own grants nothing from shares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerMembers(pub u32, pub Option<u64>);

/// The most limits a peer message may describe.
pub const MAX_LIMITS_PER_MESSAGE: usize = 4096;

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
    /// In a heartbeat and in each part of a snapshot: the digest of every
    /// limit the sender shares, at most `MAX_LIMITS_PER_MESSAGE`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub limits: Vec<PeerLimit>,
    /// Demand figures of the former split by demand, in the same form as
    /// counts. No longer sent, and ignored when an older locker sends them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub asked: Vec<PeerCount>,
    /// In a heartbeat: how the sender sees each peer's clock it has heard.
    /// Left out when empty; a locker that does not know the field ignores
    /// it and measures clocks one way.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub seen: Vec<PeerSeen>,
    /// What a node asked its peers for, in the same form as counts: the
    /// permits of a slot it wanted beyond its own, cumulative (fixed
    /// windows). Left out when empty, like every field added since.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub wanted: Vec<PeerCount>,
    /// Gifts of conserved permits (fixed windows). Left out when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gave: Vec<PeerGift>,
    /// In a heartbeat: the latest heartbeat time the sender heard from
    /// each peer it still echoes. Left out when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub echo: Vec<PeerEcho>,
    /// In a heartbeat: the members (node ids) the sender declared dead.
    /// Left out when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dead: Vec<String>,
    /// In a heartbeat: the members whose shares of every slot the sender
    /// holds, besides its own. Left out when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub holds: Vec<String>,
    /// In a heartbeat and in each part of a snapshot: the terms of the
    /// limits created from asks' terms that the sender's callers ask, at
    /// most `MAX_LIMITS_PER_MESSAGE`. Left out when empty; a locker that
    /// does not know the field ignores it (and those limits' counts).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub terms: Vec<PeerTerms>,
    /// In a heartbeat and in each part of a snapshot: the sender's member
    /// set. Left out by an older locker, which is then taken to agree:
    /// it checks nothing, as before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub members: Option<PeerMembers>,
    /// In a heartbeat: how long, in nanoseconds, the sender's run has
    /// heard its peers without a pause of its own (since it started, or
    /// resumed from a pause). A peer that joins owns the slot under way
    /// only if some peer was up since before it began and knew of no
    /// earlier run of it (see `Peering::owns_from_joining`). Left out by an
    /// older locker, which then proves nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub up: Option<u64>,
    /// With `members`: the sender's member set changed (a reload) and not
    /// every peer has stated the new one since. It grants from no share,
    /// and a peer that hears this grants from none either until it ends
    /// (see `core::peering::members`). Left out when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub settling: bool,
}

impl PeerMsg {
    /// A message of `kind` from `nodes` (the sender first), sent at `at`
    /// by the sender's clock, with nothing else in it yet.
    pub fn new(kind: PeerKind, nodes: Vec<PeerNode>, at: u64) -> PeerMsg {
        PeerMsg {
            kind,
            nodes,
            at,
            joining: false,
            done: false,
            counts: Vec::new(),
            limits: Vec::new(),
            asked: Vec::new(),
            seen: Vec::new(),
            wanted: Vec::new(),
            gave: Vec::new(),
            echo: Vec::new(),
            dead: Vec::new(),
            holds: Vec::new(),
            terms: Vec::new(),
            members: None,
            up: None,
            settling: false,
        }
    }

    /// The sender.
    pub fn sender(&self) -> Option<&PeerNode> {
        self.nodes.first()
    }
}

/// Decodes one peer message. One that carries more counts, nodes or
/// limits than a locker ever sends in one is refused whole, so a message
/// costs at most that much work.
pub fn decode_peer(body: &[u8]) -> Result<PeerMsg, WireError> {
    if !is_structured(body) {
        return Err(WireError::Malformed("a peer message is a map".into()));
    }
    let msg: PeerMsg = decode_exact(body)?;
    let counts = msg.counts.len() + msg.asked.len() + msg.wanted.len() + msg.gave.len();
    // A message names at most its sender and one node per count (a
    // sender lists each node once, and names few).
    let too_many = counts > MAX_COUNTS_PER_MESSAGE
        || msg.nodes.len() > MAX_COUNTS_PER_MESSAGE + 1
        || msg.seen.len() > MAX_COUNTS_PER_MESSAGE
        || msg.echo.len() + msg.dead.len() + msg.holds.len() > MAX_COUNTS_PER_MESSAGE
        || msg.limits.len() > MAX_LIMITS_PER_MESSAGE
        || msg.terms.len() > MAX_LIMITS_PER_MESSAGE;
    if too_many {
        return Err(WireError::Malformed("a peer message with too many counts, nodes or limits".into()));
    }
    Ok(msg)
}
