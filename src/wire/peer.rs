//! Peer messages: what peered lockers say to each other over PUB/SUB —
//! heartbeats, cumulative counts, wants and gifts, and snapshots for
//! a locker that (re)starts.
//!
//! Like the rest of `wire`, this only translates; the ledger that merges
//! counts lives in the core.

use std::borrow::Cow;

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

/// A message from one locker to its peers, by what it says: each kind
/// carries only the fields it uses. On the wire every kind is one map of
/// the same fields (see `Frame`), so the bytes are those of the single
/// form that came before; a field a kind does not use is written empty
/// and skipped when read.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "Frame<'static>")]
pub enum PeerMsg {
    /// A heartbeat.
    Beat(PeerBeat),
    /// The sender's own cumulative counts, after grants or as a repair.
    Counts(PeerCounts),
    /// Part of a snapshot.
    Snapshot(PeerSnapshotPart),
}

/// A heartbeat: the sender is alive, its clock reads `at`, and with
/// `joining` it asks for a snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerBeat {
    pub sender: PeerNode,
    /// The sender's clock when it sent the heartbeat, in nanoseconds
    /// since the Unix epoch.
    pub at: u64,
    /// The sender is still learning the counts.
    pub joining: bool,
    pub about: PeerAbout,
    pub tenure: PeerTenure,
    /// How long, in nanoseconds, the sender's run has heard its peers
    /// without a pause of its own (since it started, or resumed from a
    /// pause). A peer that joins owns the slot under way only if some peer
    /// was up since before it began and knew of no earlier run of it (see
    /// `Peering::owns_from_joining`). Left out by an older locker, which
    /// then proves nothing.
    pub up: Option<u64>,
}

/// Counts and the nodes they name: a message of kind `counts`, and the
/// counts of a snapshot part.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerCounts {
    /// The nodes the counts name; the first is the sender (a message
    /// without one is refused).
    pub nodes: Vec<PeerNode>,
    /// The sender's clock when it sent the message, in nanoseconds since
    /// the Unix epoch.
    pub at: u64,
    /// Grants, at most `MAX_COUNTS_PER_MESSAGE` with wants and gifts.
    pub counts: Vec<PeerCount>,
    /// What a node asked its peers for, in the same form as counts: the
    /// permits of a slot it wanted beyond its own, cumulative (fixed
    /// windows).
    pub wanted: Vec<PeerCount>,
    /// Gifts of conserved permits (fixed windows).
    pub gave: Vec<PeerGift>,
}

/// Part of a snapshot: every count the sender knows, its own and its
/// peers', and what it says of itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerSnapshotPart {
    pub part: PeerCounts,
    /// This is the last part.
    pub done: bool,
    pub about: PeerAbout,
}

/// What heartbeats and snapshot parts say of their sender: how it defines
/// its limits, how it sees its peers' clocks, and its member set.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PeerAbout {
    /// The digest of every limit the sender shares, at most
    /// `MAX_LIMITS_PER_MESSAGE`.
    pub limits: Vec<PeerLimit>,
    /// The terms of the limits created from asks' terms that the sender's
    /// callers ask, at most `MAX_LIMITS_PER_MESSAGE`. A locker that does
    /// not know the field ignores it (and those limits' counts).
    pub terms: Vec<PeerTerms>,
    /// How the sender sees each peer's clock it has heard. A locker that
    /// does not know the field ignores it and measures clocks one way.
    pub seen: Vec<PeerSeen>,
    /// The sender's member set. Left out by an older locker, which is
    /// then taken to agree: it checks nothing, as before.
    pub members: Option<PeerMembers>,
    /// With `members`: the sender's member set changed (a reload) and not
    /// every peer has stated the new one since. It grants from no share,
    /// and a peer that hears this grants from none either until it ends
    /// (see `core::peering::members`). Left out when false.
    pub settling: bool,
}

/// What a heartbeat says of tenure (see `core::peering::tenure`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PeerTenure {
    /// The latest heartbeat time the sender heard from each peer it
    /// still echoes.
    pub echo: Vec<PeerEcho>,
    /// The members (node ids) the sender declared dead, for an older
    /// locker, which shuns every run of each.
    pub dead: Vec<String>,
    /// The members whose shares of every slot the sender holds, besides
    /// its own.
    pub holds: Vec<String>,
    /// The runs the sender declared dead, as `[id, incarnation]`: every
    /// run of the member up to that incarnation (for a member it never
    /// heard, every run that started before it declared). A reader that
    /// finds it reads it rather than `dead`; left out by an older locker.
    pub dead_runs: Vec<(String, u64)>,
}

impl PeerCounts {
    /// Counts sent by `sender` at `at`, none yet.
    pub fn new(sender: PeerNode, at: u64) -> PeerCounts {
        PeerCounts { nodes: vec![sender], at, counts: Vec::new(), wanted: Vec::new(), gave: Vec::new() }
    }

    /// Counts of every kind: grants, wants and gifts.
    pub fn len(&self) -> usize {
        self.counts.len() + self.wanted.len() + self.gave.len()
    }

    /// No count of any kind.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl PeerMsg {
    /// The sender.
    pub fn sender(&self) -> &PeerNode {
        match self {
            PeerMsg::Beat(beat) => &beat.sender,
            PeerMsg::Counts(part) | PeerMsg::Snapshot(PeerSnapshotPart { part, .. }) => &part.nodes[0],
        }
    }

    /// The sender's clock when it sent the message.
    pub fn at(&self) -> u64 {
        match self {
            PeerMsg::Beat(beat) => beat.at,
            PeerMsg::Counts(part) | PeerMsg::Snapshot(PeerSnapshotPart { part, .. }) => part.at,
        }
    }

    /// What the message says, as its wire name.
    pub fn kind(&self) -> PeerKind {
        match self {
            PeerMsg::Beat(_) => PeerKind::Beat,
            PeerMsg::Counts(_) => PeerKind::Counts,
            PeerMsg::Snapshot(_) => PeerKind::Snapshot,
        }
    }

    /// The counts it carries: none in a heartbeat.
    pub fn counts(&self) -> Option<&PeerCounts> {
        match self {
            PeerMsg::Beat(_) => None,
            PeerMsg::Counts(part) | PeerMsg::Snapshot(PeerSnapshotPart { part, .. }) => Some(part),
        }
    }

    /// What it says of its sender: nothing in a message of counts.
    pub fn about(&self) -> Option<&PeerAbout> {
        match self {
            PeerMsg::Beat(PeerBeat { about, .. }) | PeerMsg::Snapshot(PeerSnapshotPart { about, .. }) => Some(about),
            PeerMsg::Counts(_) => None,
        }
    }
}

/// The one map every peer message is on the wire, its fields in the order
/// written. `kind`, `nodes`, `at`, `joining`, `done` and `counts` are always
/// written, the rest left out when empty, like every field added since.
/// `asked`, the demand figures of the former split by demand, came between
/// `limits` and `seen`: no longer sent, and skipped when an older locker
/// sends it, as any unknown field is.
#[derive(Serialize, Deserialize)]
struct Frame<'a> {
    kind: PeerKind,
    nodes: List<'a, PeerNode>,
    at: u64,
    #[serde(default)]
    joining: bool,
    #[serde(default)]
    done: bool,
    #[serde(default)]
    counts: List<'a, PeerCount>,
    #[serde(default, skip_serializing_if = "is_empty")]
    limits: List<'a, PeerLimit>,
    #[serde(default, skip_serializing_if = "is_empty")]
    seen: List<'a, PeerSeen>,
    #[serde(default, skip_serializing_if = "is_empty")]
    wanted: List<'a, PeerCount>,
    #[serde(default, skip_serializing_if = "is_empty")]
    gave: List<'a, PeerGift>,
    #[serde(default, skip_serializing_if = "is_empty")]
    echo: List<'a, PeerEcho>,
    #[serde(default, skip_serializing_if = "is_empty")]
    dead: List<'a, String>,
    #[serde(default, skip_serializing_if = "is_empty")]
    holds: List<'a, String>,
    #[serde(default, skip_serializing_if = "is_empty")]
    terms: List<'a, PeerTerms>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    members: Option<PeerMembers>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    up: Option<u64>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    settling: bool,
    #[serde(default, skip_serializing_if = "is_empty")]
    dead_runs: List<'a, (String, u64)>,
}

/// A list of a frame: borrowed from the message when written, owned when
/// read.
type List<'a, T> = Cow<'a, [T]>;

fn is_empty<T: Clone>(list: &List<'_, T>) -> bool {
    list.is_empty()
}

impl Serialize for PeerMsg {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let none = PeerCounts::new(PeerNode(String::new(), 0), 0);
        let (nodes, part, about, tenure) = match self {
            PeerMsg::Beat(b) => (std::slice::from_ref(&b.sender), &none, Some(&b.about), Some(&b.tenure)),
            PeerMsg::Counts(c) => (&c.nodes[..], c, None, None),
            PeerMsg::Snapshot(s) => (&s.part.nodes[..], &s.part, Some(&s.about), None),
        };
        let (no_about, no_tenure) = (PeerAbout::default(), PeerTenure::default());
        let (about, tenure) = (about.unwrap_or(&no_about), tenure.unwrap_or(&no_tenure));
        let frame = Frame {
            kind: self.kind(),
            nodes: Cow::Borrowed(nodes),
            at: self.at(),
            joining: matches!(self, PeerMsg::Beat(b) if b.joining),
            done: matches!(self, PeerMsg::Snapshot(s) if s.done),
            counts: Cow::Borrowed(&part.counts),
            limits: Cow::Borrowed(&about.limits),
            seen: Cow::Borrowed(&about.seen),
            wanted: Cow::Borrowed(&part.wanted),
            gave: Cow::Borrowed(&part.gave),
            echo: Cow::Borrowed(&tenure.echo),
            dead: Cow::Borrowed(&tenure.dead),
            holds: Cow::Borrowed(&tenure.holds),
            terms: Cow::Borrowed(&about.terms),
            members: about.members,
            up: match self {
                PeerMsg::Beat(b) => b.up,
                _ => None,
            },
            settling: about.settling,
            dead_runs: Cow::Borrowed(&tenure.dead_runs),
        };
        frame.serialize(serializer)
    }
}

/// Reads a frame as the message of its kind. One without a sender, or
/// with more counts, nodes or limits than a locker ever sends in one, is
/// refused whole, so a message costs at most that much work. A field the
/// kind does not use (counts in a heartbeat, limits in counts) is not
/// sent by any locker, and skipped.
impl TryFrom<Frame<'static>> for PeerMsg {
    type Error = String;

    fn try_from(f: Frame<'static>) -> Result<PeerMsg, String> {
        let counts = f.counts.len() + f.wanted.len() + f.gave.len();
        // A message names at most its sender and one node per count (a
        // sender lists each node once, and names few).
        let too_many = counts > MAX_COUNTS_PER_MESSAGE
            || f.nodes.len() > MAX_COUNTS_PER_MESSAGE + 1
            || f.seen.len() > MAX_COUNTS_PER_MESSAGE
            || f.echo.len() + f.dead.len() + f.holds.len() + f.dead_runs.len() > MAX_COUNTS_PER_MESSAGE
            || f.limits.len() > MAX_LIMITS_PER_MESSAGE
            || f.terms.len() > MAX_LIMITS_PER_MESSAGE;
        if too_many {
            return Err("a peer message with too many counts, nodes or limits".into());
        }
        let Some(sender) = f.nodes.first().cloned() else { return Err("a peer message without a sender".into()) };
        let about = PeerAbout {
            limits: f.limits.into_owned(),
            terms: f.terms.into_owned(),
            seen: f.seen.into_owned(),
            members: f.members,
            settling: f.settling,
        };
        let (counts, wanted, gave) = (f.counts.into_owned(), f.wanted.into_owned(), f.gave.into_owned());
        let part = PeerCounts { nodes: f.nodes.into_owned(), at: f.at, counts, wanted, gave };
        Ok(match f.kind {
            PeerKind::Beat => {
                let (echo, dead, holds) = (f.echo.into_owned(), f.dead.into_owned(), f.holds.into_owned());
                let tenure = PeerTenure { echo, dead, holds, dead_runs: f.dead_runs.into_owned() };
                PeerMsg::Beat(PeerBeat { sender, at: f.at, joining: f.joining, about, tenure, up: f.up })
            }
            PeerKind::Counts => PeerMsg::Counts(part),
            PeerKind::Snapshot => PeerMsg::Snapshot(PeerSnapshotPart { part, done: f.done, about }),
        })
    }
}

/// Decodes one peer message (see `PeerMsg`'s `TryFrom` for what is refused).
pub fn decode_peer(body: &[u8]) -> Result<PeerMsg, WireError> {
    if !is_structured(body) {
        return Err(WireError::Malformed("a peer message is a map".into()));
    }
    decode_exact(body)
}
