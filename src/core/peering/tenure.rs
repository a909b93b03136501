//! Tenure: which members' shares of a slot this locker may grant from,
//! and for how long. A majority of the group takes a silent member's share
//! back, and a member cut off from a majority stops granting from any share
//! before that can happen.
//!
//! Conserved permits (see `core::share`) keep a slot's grants within its
//! limit only while each member's share is granted from by one locker. A
//! dead member's share would sit idle for good; giving it to the others is
//! safe only once that member surely no longer grants from it, which no
//! one can tell from silence alone (a member cut off looks dead). So, with
//! three or more members:
//!
//! - **A lease.** Every heartbeat echoes the latest heartbeat time it heard
//!   from each peer. A member grants from a share only while a majority of
//!   the members (itself counted) echoed one of its heartbeats sent less
//!   than `LEASE` ago, by its own clock.
//! - **Declaring.** A member that holds a lease and has not heard a peer
//!   for `DECLARE_AFTER` declares it dead and says so in every heartbeat
//!   from then on. A member cut off from a majority lost its lease before
//!   it could declare anyone.
//! - **Shunning.** A locker never echoes again a member it declared dead
//!   or whose share it holds, that a peer says it holds, or that a
//!   majority declared dead (one declaration is not enough: two members
//!   that cannot hear each other would both lose their leases for good). A
//!   run that had echoed the member it now shuns echoes no one until a
//!   lease and `MARGIN` after the last heartbeat of it that it echoed.
//! - **Reclaiming.** A member's share passes to its heir (the next member
//!   by id, or whoever holds the heir's share) once a majority declared it
//!   dead, for the slots that begin `LEASE + MARGIN` after this locker
//!   learned of the last of those declarations; it stopped echoing the
//!   member by then. The heir grants from an inherited share only while a
//!   majority without the members it inherited from echoes its heartbeats
//!   sent since (which say it holds the share), and only in the slots
//!   that begin once each of those echoes first arrived and a lease and
//!   `MARGIN` after the echoing run was first heard.
//! - **Why one grantor per slot.** The member's majority and the heir's
//!   meet in a locker that echoed both. Its run echoed the member before
//!   it learned of the holding, then stayed quiet past that echo's lease,
//!   so the heir's slot begins after the member's lease from it ran out;
//!   or an earlier run of it echoed the member, and died before this run
//!   was first heard. This holds whatever a restart without a state file
//!   forgot; `MARGIN` covers clock drift and skew.
//! - **For good.** A member whose share was reclaimed never grants from it
//!   again in that run. A run that started without hearing every peer
//!   echoes no one for `LEASE + MARGIN`.
//!
//! With two members there is no majority but both: leases do not apply,
//! each keeps its own share, and a dead member's share waits for it.
//!
//! Pure: takes `now` (the group clock) and never reads one.

use crate::core::share::Holding;
use crate::core::time::{Nanos, NANOS_PER_MS};

use std::collections::VecDeque;

use super::nodes::{shown, Nodes, PeerEvent, PeerIx, PeerState};

/// How long a majority's echo lets a member grant from its shares.
pub const LEASE: Nanos = 1000 * NANOS_PER_MS;

/// How long a peer must go unheard before a leased member declares it
/// dead: past a lease, so that a member cut off from a majority has lost
/// its own lease (and so cannot declare) by then.
pub const DECLARE_AFTER: Nanos = LEASE + LEASE / 2;

/// Waited beyond a lease before an heir grants from an inherited share:
/// clock drift over a lease (far below 1 %), the group clock's skew and
/// its moves.
pub const MARGIN: Nanos = LEASE / 4;

/// What a peer's heartbeat says of tenure.
#[derive(Debug, Clone, Copy, Default)]
pub struct Said<'a> {
    /// The latest of this locker's heartbeat times the peer heard.
    pub echo: Option<Nanos>,
    /// The members the peer declared dead.
    pub dead: &'a [String],
    /// The members whose shares the peer holds.
    pub holds: &'a [String],
}

/// What one peer said of tenure, as last heard.
#[derive(Debug, Clone, Default)]
struct LastSaid {
    /// The latest of this locker's heartbeat times the peer echoed.
    echoed: Nanos,
    /// The members it declared dead, with when this locker first heard so.
    dead: Vec<(Box<str>, Nanos)>,
    /// The members whose shares it holds.
    holds: Vec<Box<str>>,
    /// The run it was when first heard here, and when that was.
    run: u64,
    since: Nanos,
    /// The earliest slot start for which its echoes count for inherited
    /// shares (see `inherited_from`); `Nanos::MAX` until it echoed a
    /// heartbeat sent since `held_from`.
    counts_from: Nanos,
    /// The latest of the peer's heartbeat times this run echoed.
    vouched: Nanos,
    /// When a reload listed the peer, 0 for one listed from the start: a
    /// peer never heard is silent to this run only since then (see `tick`).
    listed: Nanos,
}

/// This locker's tenure.
#[derive(Debug)]
pub struct Tenure {
    /// How many members make a majority; 0 when leases do not apply.
    majority: usize,
    heard: Vec<LastSaid>,
    /// Echo no one before this (see the module header).
    echo_from: Nanos,
    /// When joining ended: a peer the configuration names and this run
    /// never heard has been silent to it since (see `tick`).
    joined_at: Nanos,
    /// Nor before this: a lease and its margin past the last heartbeat
    /// this run echoed of a member it learned later it must shun.
    quiet_until: Nanos,
    /// The members this run never echoes again (see `shun_named`).
    shunned: Vec<Box<str>>,
    /// The members this run declared dead, and when.
    declared: Vec<(Box<str>, Nanos)>,
    /// The members whose shares this run holds, besides its own.
    held: Vec<Box<str>>,
    /// Inherited shares count for the slots that begin from this instant
    /// on, and their lease counts echoes of heartbeats sent since.
    held_from: Nanos,
    /// A peer holds this run's own share.
    lost_own: bool,
}

impl Tenure {
    /// Tenure for a group of `members` (this locker included) with `peers`
    /// configured peers.
    pub fn new(members: usize, peers: usize) -> Tenure {
        Tenure {
            majority: if members >= 3 { members / 2 + 1 } else { 0 },
            heard: vec![LastSaid::default(); peers],
            echo_from: Nanos::MAX,
            joined_at: Nanos::MAX,
            quiet_until: 0,
            shunned: Vec::new(),
            declared: Vec::new(),
            held: Vec::new(),
            held_from: Nanos::MAX,
            lost_own: false,
        }
    }

    /// Takes a new member set (a reload at `now`): `members` of them, with
    /// the configured peers now numbered as `was` maps them from before
    /// (see `Nodes::set_peers`). What a kept peer said stays with it; a new
    /// one is unheard, listed from `now`. Declarations, holdings and
    /// shunned names stay: they name members by id, and a holding of a
    /// member no longer in the set holds no place (see `place_of`). The
    /// majority is the new set's.
    pub fn set_members(&mut self, now: Nanos, members: usize, was: &[Option<PeerIx>]) {
        let mut old: Vec<Option<LastSaid>> = std::mem::take(&mut self.heard).into_iter().map(Some).collect();
        let kept_or_new = |w: &Option<PeerIx>| {
            w.and_then(|i| old.get_mut(i)?.take()).unwrap_or(LastSaid { listed: now, ..LastSaid::default() })
        };
        self.heard = was.iter().map(kept_or_new).collect();
        self.majority = if members >= 3 { members / 2 + 1 } else { 0 };
    }

    /// Whether leases apply: three members or more.
    pub fn applies(&self) -> bool {
        self.majority > 0
    }

    /// Joining ended at `now`, having heard every peer (`all`) or not.
    pub fn joined(&mut self, now: Nanos, all: bool) {
        let from = if all { now } else { now.saturating_add(LEASE + MARGIN) };
        self.echo_from = self.echo_from.min(from);
        self.joined_at = self.joined_at.min(now);
    }

    /// Takes in what `peer` said in a heartbeat received at `now`. Echoes
    /// of a time this locker has not reached are ignored. Names are kept
    /// even before this locker knows them as a member's: a run restarted
    /// while a declared member was out of its reach must still never echo
    /// it once it comes back. What a peer can make this locker keep is
    /// bounded by the number of members.
    pub fn on_beat(&mut self, now: Nanos, peer: PeerIx, said: Said<'_>, nodes: &Nodes) -> Option<PeerEvent> {
        if !self.applies() || peer >= self.heard.len() {
            return None;
        }
        let members = self.heard.len() + 1;
        let h = &mut self.heard[peer];
        let run = nodes.peers().nth(peer).and_then(|(_, s)| s.run.as_ref()).map_or(0, |r| r.incarnation);
        if h.since == 0 || h.run != run {
            (h.run, h.since, h.vouched, h.counts_from) = (run, now, 0, Nanos::MAX);
        }
        if let Some(at) = said.echo.filter(|&at| at <= now) {
            h.echoed = h.echoed.max(at);
            if at >= self.held_from && h.counts_from == Nanos::MAX {
                h.counts_from = now.max(h.since.saturating_add(LEASE + MARGIN));
            }
        }
        for id in said.dead {
            if h.dead.iter().any(|(d, _)| **d == **id) {
                continue;
            }
            if h.dead.len() >= members {
                // Full: room is made by forgetting a name that is no
                // member's (a run long gone, or a rogue's invention), never
                // a member's declaration.
                let Some(i) = h.dead.iter().position(|(d, _)| !is_member(nodes, d)) else { continue };
                h.dead.remove(i);
            }
            h.dead.push((id.as_str().into(), now));
        }
        h.holds = said.holds.iter().take(members).map(|id| id.as_str().into()).collect();
        self.shun_named(nodes);
        let me = &nodes.me().id;
        if !self.lost_own && self.heard[peer].holds.iter().any(|id| id == me) {
            self.lost_own = true;
            let by = nodes.peers().nth(peer).and_then(|(_, s)| s.run.as_ref()).map_or("?".into(), |r| shown(&r.id));
            return Some(PeerEvent::LostShare { by });
        }
        None
    }

    /// Whether this locker echoes `beat`, the latest heartbeat time heard
    /// from `peer`, member `id`, at `now`; if so, it remembers echoing it.
    /// Not before it may (see `joined`), nor while quiet (see
    /// `shun_named`), and never a member it shuns.
    pub fn vouch(&mut self, now: Nanos, peer: PeerIx, id: &str, beat: Nanos, nodes: &Nodes) -> bool {
        if !self.applies() {
            return true;
        }
        let echoes = now >= self.echo_from.max(self.quiet_until)
            && !self.shunned.iter().any(|s| **s == *id)
            && !self.named(id, nodes);
        if let Some(h) = self.heard.get_mut(peer).filter(|_| echoes) {
            h.vouched = h.vouched.max(beat);
        }
        echoes
    }

    /// Whether this run must never echo member `id` again: it declared it
    /// dead or holds its share, a peer holds its share, or a majority
    /// declared it dead. One declaration alone is not enough: a member
    /// cut off from one peer but heard by the rest would lose its lease
    /// for good, and two that cannot hear each other would each lose it.
    fn named(&self, id: &str, nodes: &Nodes) -> bool {
        let named = |list: &[Box<str>]| list.iter().any(|d| **d == *id);
        self.declared.iter().any(|(d, _)| **d == *id)
            || named(&self.held)
            || self.heard.iter().any(|h| named(&h.holds))
            || self.declared_by_majority(id, nodes).is_some()
    }

    /// Shuns each member newly named (see `named`), and stays quiet a
    /// lease and its margin past the last of its heartbeats this run
    /// echoed. A member this run echoed may still be leased by that echo;
    /// the heir's lease over its share needs this run's echo of a
    /// heartbeat that said it holds the share, so the two never overlap.
    /// That is what keeps a run that restarted without its state file, and
    /// so knew of no declaration, from lending both of them a lease.
    fn shun_named(&mut self, nodes: &Nodes) {
        for (ix, s) in nodes.peers() {
            let Some(run) = s.run.as_ref() else { continue };
            if self.shunned.contains(&run.id) || !self.named(&run.id, nodes) {
                continue;
            }
            self.shunned.push(run.id.clone());
            let vouched = self.heard[ix].vouched;
            if vouched > 0 {
                self.quiet_until = self.quiet_until.max(vouched.saturating_add(LEASE + MARGIN));
            }
        }
    }

    /// The members this run declared dead.
    pub fn declared(&self) -> impl Iterator<Item = &str> {
        self.declared.iter().map(|(id, _)| &**id)
    }

    /// The members whose shares this run holds, besides its own.
    pub fn held(&self) -> impl Iterator<Item = &str> {
        self.held.iter().map(|id| &**id)
    }

    /// Whether a majority echoed this locker's heartbeats sent less than a
    /// lease before `now`.
    fn majority_echoes(&self, now: Nanos) -> bool {
        let echoing = self.heard.iter().filter(|h| h.echoed.saturating_add(LEASE) > now).count();
        echoing + 1 >= self.majority
    }

    /// The first slot start from which this locker may grant from its
    /// inherited shares at `now`, if a majority without the members it
    /// inherited from echoed its heartbeats sent since `held_from` lately.
    ///
    /// Each echoing peer counts only for the slots that begin once its
    /// first such echo arrived, and a lease and its margin after its run
    /// was first heard. A dead member may have been leased by a peer's
    /// echo until that peer learned this locker holds the share, which its
    /// first such echo says it did; the peer then stayed quiet past that
    /// lease (see `shun_named`). And a peer's earlier runs, which died
    /// before its run started, may have echoed the dead member too. So no
    /// slot the dead member granted in is granted from again.
    fn inherited_from(&self, now: Nanos, nodes: &Nodes) -> Nanos {
        let inherited = |s: &PeerState| s.id().is_some_and(|id| self.held.iter().any(|h| **h == *id));
        let fresh = |h: &LastSaid| h.echoed >= self.held_from && h.echoed.saturating_add(LEASE) > now;
        let counting = self.heard.iter().zip(nodes.peers()).filter(|(h, (_, s))| fresh(h) && !inherited(s));
        let mut from: Vec<Nanos> = counting.map(|(h, _)| h.counts_from).filter(|&f| f != Nanos::MAX).collect();
        from.sort_unstable();
        match from.get(self.majority.saturating_sub(2)) {
            Some(&f) if self.majority >= 2 => f.max(self.held_from),
            _ => Nanos::MAX,
        }
    }

    /// What tenure means for grants at `now`.
    pub fn holding(&self, now: Nanos, nodes: &Nodes) -> Holding {
        if !self.applies() {
            return Holding::OWN;
        }
        let leased = !self.lost_own && self.majority_echoes(now);
        let held_from = if self.held.is_empty() { Nanos::MAX } else { self.inherited_from(now, nodes) };
        let held = if held_from == Nanos::MAX {
            0
        } else {
            self.held.iter().filter_map(|id| place_of(nodes, id)).fold(0u64, |bits, p| bits | 1 << p)
        };
        Holding { leased, held, held_from }
    }

    /// Declares the peers silent for `DECLARE_AFTER` dead, while leased,
    /// and reclaims the shares this locker is heir to. Call once a
    /// heartbeat or so.
    ///
    /// A peer the configuration names by id (`ID@ENDPOINT`) and this run
    /// never heard is silent since this run joined (or a reload listed
    /// it, so that a member added is not declared before it could start):
    /// a run restarted while
    /// a member is down declares it as a run that heard it would, so that
    /// a majority can still reclaim its share. It is the same word ("not
    /// heard for `DECLARE_AFTER` while leased"), and a member that is
    /// alive and heard by the rest is echoed by them, and never declared
    /// by a majority.
    pub fn tick(&mut self, now: Nanos, nodes: &Nodes, events: &mut VecDeque<PeerEvent>) {
        if !self.applies() {
            return;
        }
        if self.holding(now, nodes).leased {
            for (ix, s) in nodes.peers() {
                let listed = self.heard.get(ix).map_or(0, |h| h.listed);
                let (id, last) = match (&s.run, &s.named) {
                    (Some(run), _) if s.last_heard > 0 => (&run.id, s.last_heard),
                    (None, Some(named)) if self.joined_at != Nanos::MAX => (named, self.joined_at.max(listed)),
                    _ => continue,
                };
                let quiet = now.saturating_sub(last) > DECLARE_AFTER;
                if quiet && !self.declared.iter().any(|(d, _)| d == id) {
                    self.declared.push((id.clone(), now));
                    events.push_back(PeerEvent::Declared { id: shown(id) });
                }
            }
        }
        self.reclaim(now, nodes, events);
        self.shun_named(nodes);
    }

    /// Takes over each member this locker (or a member whose share it
    /// holds) is heir to, once a majority declared it dead.
    fn reclaim(&mut self, now: Nanos, nodes: &Nodes, events: &mut VecDeque<PeerEvent>) {
        let Some(members) = member_ids(nodes) else { return };
        let me = nodes.me().id.clone();
        // Taking one over can make this locker heir to the next: go round
        // until nothing changes, at most once per member.
        for _ in 0..members.len() {
            let Some((peer, id, from)) = self.next_heirloom(&members, &me, nodes) else { return };
            let inherited = self.heard[peer].holds.clone();
            self.held.push(id.clone());
            for h in inherited {
                if h != me && !self.held.contains(&h) {
                    self.held.push(h);
                }
            }
            self.held_from = if self.held_from == Nanos::MAX { from } else { self.held_from.max(from) };
            // Echoes count again from one of a heartbeat sent since.
            self.heard.iter_mut().for_each(|h| h.counts_from = Nanos::MAX);
            let in_ms = from.saturating_sub(now) / NANOS_PER_MS;
            events.push_back(PeerEvent::Reclaimed { id: shown(&id), in_ms });
        }
    }

    /// A peer whose share this locker may take over now: its index, id and
    /// the instant its share counts from.
    fn next_heirloom(&self, members: &[Box<str>], me: &str, nodes: &Nodes) -> Option<(PeerIx, Box<str>, Nanos)> {
        let heir_is_me = |id: &str| {
            let place = members.iter().position(|m| **m == *id)?;
            let heir = &members[(place + 1) % members.len()];
            Some(**heir == *me || self.held.contains(heir))
        };
        for (peer, s) in nodes.peers() {
            let Some(id) = s.id() else { continue };
            if self.held.iter().any(|h| **h == *id) || heir_is_me(id) != Some(true) {
                continue;
            }
            if let Some(learned) = self.declared_by_majority(id, nodes) {
                return Some((peer, id.into(), learned.saturating_add(LEASE + MARGIN)));
            }
        }
        None
    }

    /// When this locker had learned that a majority declared `id` dead
    /// (the earliest such instant), if it has.
    fn declared_by_majority(&self, id: &str, nodes: &Nodes) -> Option<Nanos> {
        let mine = self.declared.iter().filter(|(d, _)| **d == *id).map(|&(_, at)| at);
        let theirs = self.heard.iter().zip(nodes.peers()).filter_map(|(h, (_, s))| {
            let speaker = s.run.as_ref()?;
            if *speaker.id == *id {
                return None; // a member's word about itself does not count
            }
            h.dead.iter().find(|(d, _)| **d == *id).map(|&(_, at)| at)
        });
        let mut learned: Vec<Nanos> = mine.chain(theirs).collect();
        learned.sort_unstable();
        learned.get(self.majority.checked_sub(1)?).copied()
    }
}

/// Every member's id in order (this locker's and every configured
/// peer's), once each is known (heard, or named by the configuration).
fn member_ids(nodes: &Nodes) -> Option<Vec<Box<str>>> {
    let mut ids = vec![nodes.me().id.clone()];
    for (_, s) in nodes.peers() {
        ids.push(s.id()?.into());
    }
    ids.sort_unstable();
    Some(ids)
}

/// Member `id`'s place among the members by id, once every id is known.
fn place_of(nodes: &Nodes, id: &str) -> Option<u32> {
    member_ids(nodes)?.iter().position(|m| **m == *id).map(|p| p as u32)
}

/// Whether `id` names a member: this locker, a configured peer's run, or
/// an id the configuration names.
fn is_member(nodes: &Nodes, id: &str) -> bool {
    *nodes.me().id == *id || nodes.peers().any(|(_, s)| s.id() == Some(id))
}

#[cfg(test)]
mod tests;
