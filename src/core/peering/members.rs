//! The member set: which lockers share this locker's limits, as each
//! heartbeat states it, and whether every peer states the same.
//!
//! Each locker computes its share of a limit from its own member set: `N`
//! (itself and every configured peer) and its place by id among them (see
//! `core::share`). Lockers that count or name the group differently
//! compute shares that need not add up to the limit (four lockers, one of
//! which still lists only the old trio: 25 + 25 + 25 + 33 of 100). So a
//! heartbeat carries the sender's set as a count and a digest of the
//! members' ids, and a locker that hears a peer state another set grants
//! nothing from shares (`MemberAgreement::differs`) until the sets agree, and
//! then only from the slots that begin after they do (`agreed_at`): a
//! slot begun under the old shares may have been granted by them.
//!
//! The digest covers ids, not endpoints: each locker names its peers by
//! the endpoints it reaches them at, and itself by the address it binds
//! (`tcp://*:7778`), so no two lockers list the same endpoints; ids are
//! the names every member gives alike. A peer's id is known once it was
//! heard, or from the start when the configuration names it
//! (`ID@ENDPOINT`); until every member's is, the digest is left out and
//! only the counts are compared. A peer that states no set (an older locker) is
//! taken to agree, as every peer was before the check.
//!
//! **A set that changes (a reload, `MemberAgreement::changed`).** A slot's
//! permits are conserved only while every member splits it by the same
//! set; in the slot where the set changes, some members may still split
//! it by the old one (a third each) while others split it by the new (a
//! quarter each, or a half), and the two splits need not add up to the
//! limit. So a locker whose set changed owns nothing of the slot
//! (rolling window, bucket period) under way under the new set, and of
//! none after it either, until every configured peer has stated the new
//! set since the change; then it owns from the slots that begin after
//! that instant (`agreed_at`, as when sets that differed come to agree),
//! its inherited shares too. The other choice, owning under the new set
//! what it owned under the old, at most, would need each member to know
//! what every other still owns of the slot under the old split, which
//! no message says. Meanwhile its heartbeats say it is *settling*, and a
//! locker that hears a peer settling grants from no share either, and
//! owns again only from the slots that begin after the peer stops: a new
//! member started after the others reloaded hears nothing but its own set
//! and would own its share of the slot under way, which the old members'
//! shares had covered (a simulated group shows it, `change_tests`). No
//! one waits for another to stop settling: a locker stops once every peer
//! states its set, settling or not. A member that does not run keeps the
//! others settling until it states the set: add a member by starting it
//! first, remove one by stopping it first (`docs/peering.md`).
//!
//! Pure, like the rest of the core: it takes `now`, never logs (it hands
//! events to the schedule), and never touches a socket.

use super::nodes::{shown, Nodes, PeerEvent, PeerIx};
use super::NodeKey;
use crate::core::time::Nanos;

/// A member set as one locker sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MemberSet {
    /// The lockers of the group: this one and every configured peer.
    pub members: u32,
    /// A digest of every member's id, order aside, once each is known.
    pub digest: Option<u64>,
}

impl MemberSet {
    /// The set `nodes` describes: this locker and its configured peers,
    /// with the digest once every peer's id is known.
    pub fn of(nodes: &Nodes) -> MemberSet {
        let members = 1 + nodes.configured() as u32;
        let peers: Option<Vec<&str>> = nodes.peers().map(|(_, s)| s.id()).collect();
        let digest = peers.map(|mut ids| {
            ids.push(&nodes.me().id);
            digest_of(ids)
        });
        MemberSet { members, digest }
    }

    /// Whether `other` may be the same set: the same count, and the same
    /// ids when both know every one.
    pub fn agrees(&self, other: &MemberSet) -> bool {
        let ids = match (self.digest, other.digest) {
            (Some(mine), Some(theirs)) => mine == theirs,
            _ => true,
        };
        self.members == other.members && ids
    }
}

/// A digest of `ids` in any order: FNV-1a over the sorted ids, each after
/// its length, the same on every locker and every build (like
/// `Limit::digest`, it only has to tell honest configurations apart).
pub fn digest_of(mut ids: Vec<&str>) -> u64 {
    ids.sort_unstable();
    let text: String = ids.iter().map(|id| format!("{}:{id};", id.len())).collect();
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// What one configured peer last stated of its set.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Stated {
    /// The run that stated it: a restart states its own.
    run: Option<NodeKey>,
    set: Option<MemberSet>,
    /// Whether it said its own set is settling (see `MemberAgreement::changed`).
    settling: bool,
    /// Whether it stated a set since this locker's last changed.
    since_change: bool,
    /// Whether it differs from this locker's, as last judged.
    differs: bool,
}

/// Whether the configured peers agree with this locker's member set.
#[derive(Debug, Clone)]
pub struct MemberAgreement {
    stated: Vec<Stated>,
    mine: Option<MemberSet>,
    /// Whether some peer's set differs from this locker's now.
    differs: bool,
    /// Whether this locker's set changed (a reload) and not every peer has
    /// stated the new one since.
    settling: bool,
    /// Whether it grants from no share: a set differs, or this locker's
    /// or a peer's is settling.
    refusing: bool,
    /// When the sets last came to agree after differing or settling; 0 if
    /// they never did in this run.
    agreed_at: Nanos,
}

impl MemberAgreement {
    /// No peer has stated a set yet.
    pub fn new(peers: usize) -> MemberAgreement {
        let stated = vec![Stated::default(); peers];
        MemberAgreement { stated, mine: None, differs: false, settling: false, refusing: false, agreed_at: 0 }
    }

    /// Records the set `peer`'s run `from` stated (`None`: it states
    /// none) at `now`, and whether it said its own is `settling`, and
    /// judges every peer's against this locker's as `nodes` has it now.
    /// Pushes a `MemberSetDiffers` for each peer that begins to differ, and
    /// a `MemberSetsAgree` when the last refusal ends.
    pub fn on_stated(
        &mut self,
        now: Nanos,
        peer: PeerIx,
        from: &NodeKey,
        (set, settling): (Option<MemberSet>, bool),
        nodes: &Nodes,
        events: &mut impl Extend<PeerEvent>,
    ) {
        if let Some(s) = self.stated.get_mut(peer) {
            (s.run, s.set, s.settling, s.since_change) = (Some(from.clone()), set, settling, true);
        }
        self.judge(now, nodes, events);
    }

    /// This locker's member set changed at `now` (a reload): the peers
    /// are now numbered as `was` maps them from before (see
    /// `Nodes::set_peers`), and `nodes` has the new set. It grants from no
    /// share, and says it is settling so that its peers grant from none
    /// either, until every configured peer has stated a set since and each
    /// agrees; then only from the slots that begin after (`agreed_at`).
    pub fn changed(&mut self, now: Nanos, was: &[Option<PeerIx>], nodes: &Nodes, events: &mut impl Extend<PeerEvent>) {
        let mut old: Vec<Option<Stated>> = std::mem::take(&mut self.stated).into_iter().map(Some).collect();
        let kept = |w: &Option<PeerIx>| w.and_then(|i| old.get_mut(i)?.take()).unwrap_or_default();
        self.stated = was.iter().map(kept).map(|s| Stated { since_change: false, ..s }).collect();
        (self.settling, self.refusing) = (true, true);
        events.extend([PeerEvent::MemberSetChanged { ours: MemberSet::of(nodes).members }]);
        self.judge(now, nodes, events);
    }

    /// Judges every peer's stated set against this locker's, as above.
    fn judge(&mut self, now: Nanos, nodes: &Nodes, events: &mut impl Extend<PeerEvent>) {
        let mine = MemberSet::of(nodes);
        self.mine = Some(mine);
        let (mut any, mut unheard, mut peers_settle) = (false, false, false);
        for ((_, state), s) in nodes.peers().zip(&mut self.stated) {
            // What an earlier run of the peer stated says nothing of this one.
            let current = s.run.is_some() && s.run == state.run;
            let differs = current && s.set.is_some_and(|theirs| !mine.agrees(&theirs));
            if differs && !s.differs {
                let peer = state.name.to_string();
                let id = state.run.as_ref().map_or_else(String::new, |r| shown(&r.id));
                let theirs = s.set.map_or(0, |t| t.members);
                events.extend([PeerEvent::MemberSetDiffers { peer, id, theirs, ours: mine.members }]);
            }
            s.differs = differs;
            any |= differs;
            unheard |= !(current && s.since_change);
            peers_settle |= current && s.settling;
        }
        // Settled once every peer stated this locker's set since it
        // changed (whether or not theirs still settles: each settles on
        // hearing the others, so none waits for another's end).
        self.settling &= any || unheard;
        let refusing = any || self.settling || peers_settle;
        if self.refusing && !refusing {
            self.agreed_at = now;
            events.extend([PeerEvent::MemberSetsAgree]);
        }
        (self.differs, self.refusing) = (any, refusing);
    }

    /// Whether this locker grants from no share now: a peer's set differs
    /// from its own, or its own or a peer's is settling.
    pub fn refuses(&self) -> bool {
        self.refusing
    }

    /// Whether this locker's set changed and not every peer has stated
    /// the new one since: its heartbeats say so.
    pub fn settling(&self) -> bool {
        self.settling
    }

    /// Whether some peer's set differs from this locker's: it grants from
    /// no share while one does.
    pub fn differs(&self) -> bool {
        self.differs
    }

    /// When the sets last came to agree after differing or settling (0 if
    /// they never did): shares are owned only of the slots that begin
    /// after it.
    pub fn agreed_at(&self) -> Nanos {
        self.agreed_at
    }

    /// Whether `peer`'s stated set differs from this locker's.
    pub fn peer_differs(&self, peer: PeerIx) -> bool {
        self.stated.get(peer).is_some_and(|s| s.differs)
    }

    /// The set `peer` last stated, if any.
    pub fn stated(&self, peer: PeerIx) -> Option<MemberSet> {
        self.stated.get(peer).and_then(|s| s.set)
    }

    /// This locker's own set, as last judged.
    pub fn mine(&self) -> Option<MemberSet> {
        self.mine
    }
}

#[cfg(test)]
mod change_tests;
#[cfg(test)]
mod tests;
