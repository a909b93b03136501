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
//! - **Runs.** A member's run is its id and incarnation (see
//!   `peering::nodes`). Declarations name runs: a declaration of run `i`
//!   of a member covers its runs up to `i`, and a member never heard is
//!   declared as every run of it started before the declaration. A later
//!   run is not the run declared.
//! - **Shunning.** A locker does not echo a run that it declared dead or
//!   that a majority declared dead (one declaration is not enough: two
//!   members that cannot hear each other would both lose their leases),
//!   nor any run of a member whose share it holds or that a peer says it
//!   holds (a peer's latest heartbeat by the peer's own clock, so a late
//!   one never speaks over a newer one; a peer whose run a majority
//!   declared, or whose share this locker holds, no longer speaks for
//!   holdings, as this locker shuns it). A run that had echoed the run it
//!   now shuns echoes no one until a lease and `MARGIN` after the last
//!   heartbeat of it that it echoed, each time it comes to shun it.
//! - **Reclaiming.** A member's share passes to its heir (the next member
//!   by id, or whoever holds the heir's share) once a majority declared
//!   its newest run heard dead, for the slots that begin `LEASE + MARGIN`
//!   after this locker learned of the last of those declarations; it
//!   stopped echoing the member by then. The heir grants from an
//!   inherited share only while a majority without the members it
//!   inherited from echoes its heartbeats sent since (which say it holds
//!   the share), and only in the slots that begin once each of those
//!   echoes first arrived and a lease and `MARGIN` after the echoing run
//!   was first heard.
//! - **Why one grantor per slot.** The member's majority and the heir's
//!   meet in a locker that echoed both. Its run echoed the member before
//!   it learned of the holding, then stayed quiet past that echo's lease,
//!   so the heir's slot begins after the member's lease from it ran out;
//!   or an earlier run of it echoed the member, and died before this run
//!   was first heard. This holds whatever a restart without a state file
//!   forgot; `MARGIN` covers clock drift and skew.
//! - **Handing back.** A holding covers the member's runs up to the one a
//!   majority declared. When the holder hears a later run of the member,
//!   it gives the share back at once: it grants from it no more, then its
//!   heartbeats stop saying it holds it (always safe for it: it grants
//!   less). The new run is shunned while any peer says it holds the share,
//!   so it has no lease then; a run that heard a holding, or a declaration
//!   of a run of its member, grants from its own share only in the slots
//!   that begin once a majority echoed heartbeats it sent after the last
//!   holding it heard of ended, each echo counting from a `MARGIN` after it
//!   arrived and a lease and `MARGIN` after the echoing run was first
//!   heard (the heir's rule, mirrored). Why no slot has two grantors: the
//!   holder's majority (its own, or the heir's it took the share from)
//!   and the new run's meet in a locker `Y` that echoed both. If the same
//!   run of `Y` echoed the holder's heartbeat saying it held the share and
//!   later the new run, `Y` heard the holding end first (its view of the
//!   holder is the holder's latest heartbeat), and the holder stopped
//!   granting before it sent that: every grant of the holder precedes the
//!   echo, whose slot comes after (the margin covers the clocks' skew). If
//!   `Y` echoed the new run first and then learned of a holding, it went
//!   quiet past that echo's lease, as for any member it comes to shun. If
//!   `Y` no longer heeds the holder (a majority declared it, or `Y` holds
//!   its share), `Y` shunned the holder and stayed quiet past its last
//!   echo of it, so the holder's lease from `Y` ran out before `Y` echoed
//!   the new run. If two runs of `Y` echoed them, the earlier died before
//!   the later was first heard, and both rules wait a lease and `MARGIN`
//!   past that. So a peer that hears the giving back late only echoes the
//!   new run late; one cut off from the holder keeps its last word of it
//!   (the holding) and echoes the new run only once a majority declared
//!   the holder; lost, repeated or reordered heartbeats change nothing, as
//!   each is cumulative and the latest by the sender's clock speaks; a
//!   holder that dies just after giving back granted nothing since. A run
//!   that never heard the holding is still safe: of the new run's
//!   majority, one locker at least declared its earlier run (a majority
//!   of the others did), and says so in the heartbeat that echoes it.
//! - **No second holder.** While a peer held a member's share, that peer
//!   was heir to whatever the member is heir to, and took those shares;
//!   it keeps them when it gives the member's own share back. So a run
//!   whose share a peer may have held (it heard a holding of it, or a
//!   declaration of a run of its member) reclaims nothing: it could
//!   otherwise take, as heir, a share that peer still grants from.
//! - **The declared run.** A run declared by a majority (cut off, then
//!   healed) stays shunned, and its share held: it grants only what peers
//!   give it until it is restarted. Its restart is a later run, handed
//!   its share back; should it die too, its heir reclaims it again, as
//!   that run.
//! - **Incarnations** are start times by the member's wall clock: a run
//!   started after its wall clock was set back looks earlier, and is not
//!   handed its share back (the safe side).
//! - **A restart** that did not hear every peer while joining echoes no
//!   one for `LEASE + MARGIN`.
//!
//! With two members there is no majority but both: leases do not apply,
//! each keeps its own share, and a dead member's share waits for it.
//!
//! Pure: takes `now` (the group clock) and never reads one.

use crate::core::share::Holding;
use crate::core::time::{Nanos, NANOS_PER_MS};

use std::collections::VecDeque;

use super::nodes::{shown, NodeKey, Nodes, PeerEvent, PeerIx, PeerState};

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

/// A move of the group clock larger than this, at once, would eat into
/// `MARGIN` (a lease and an heir's wait are measured on two lockers'
/// clocks): after one, a locker grants from no share for a lease and its
/// margin (see `Tenure::clock_moved`).
pub const MOVE_BEYOND: Nanos = MARGIN / 2;

/// What a peer's heartbeat says of tenure.
#[derive(Debug, Clone, Copy, Default)]
pub struct Said<'a> {
    /// The sender's time in the heartbeat: what it says of holdings is
    /// taken from its latest heartbeat, whatever order they arrive in.
    pub at: Nanos,
    /// The latest of this locker's heartbeat times the peer heard.
    pub echo: Option<Nanos>,
    /// The runs the peer declared dead, as (member id, incarnation): every
    /// run of the member up to that incarnation. An incarnation of 0 (an
    /// older locker's, which names members only) reads as every run that
    /// started before this locker first heard the declaration.
    pub dead: &'a [(String, u64)],
    /// The members whose shares the peer holds.
    pub holds: &'a [String],
}

/// What one peer said of tenure, as last heard.
#[derive(Debug, Clone, Default)]
struct LastSaid {
    /// The latest of this locker's heartbeat times the peer echoed.
    echoed: Nanos,
    /// The runs it declared dead, one entry per member (the newest run
    /// declared, covering every earlier one), with when this locker first
    /// heard so.
    dead: Vec<(NodeKey, Nanos)>,
    /// The members whose shares it holds, as its latest heartbeat said.
    holds: Vec<Box<str>>,
    /// The sender's time of that heartbeat.
    said_at: Nanos,
    /// Its newest run heard (a heartbeat of an older one arriving late is
    /// not taken in), and when this locker first heard that run.
    run: u64,
    since: Nanos,
    /// The earliest slot start for which its echoes count for inherited
    /// shares (see `inherited_from`); `Nanos::MAX` until it echoed a
    /// heartbeat sent since `held_from`.
    counts_from: Nanos,
    /// The same for this run's own share once regained (see `own_from`):
    /// `Nanos::MAX` until it echoed a heartbeat sent since `regained_at`.
    own_counts_from: Nanos,
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
    /// this run echoed of a member run it learned later it must shun.
    quiet_until: Nanos,
    /// Grants from no share before this: a lease and its margin past a
    /// move of the group clock beyond `MOVE_BEYOND`.
    still_until: Nanos,
    /// The peers' runs this run shuns now (see `shun_named`).
    shunned: Vec<NodeKey>,
    /// The runs this run declared dead (one entry per member, covering
    /// its earlier runs), and when.
    declared: Vec<(NodeKey, Nanos)>,
    /// The members whose shares this run holds, besides its own, each with
    /// the newest of its runs the holding covers: a later run of it, once
    /// heard, gets its share back (see `release`).
    held: Vec<NodeKey>,
    /// Inherited shares count for the slots that begin from this instant
    /// on, and their lease counts echoes of heartbeats sent since.
    held_from: Nanos,
    /// A peer holds this run's own share.
    lost_own: bool,
    /// 0 while no peer held this run's share; `Nanos::MAX` while one
    /// does; else when the last holding ended: the own share then counts
    /// only in the slots after a lease regained since (see `own_from`).
    regained_at: Nanos,
    /// Whether a peer may have held this locker's share in this run or
    /// before it: one held it, or declared a run of this locker dead.
    once_held: bool,
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
            still_until: 0,
            shunned: Vec::new(),
            declared: Vec::new(),
            held: Vec::new(),
            held_from: Nanos::MAX,
            lost_own: false,
            regained_at: 0,
            once_held: false,
        }
    }

    /// Takes a new member set (a reload at `now`): `members` of them, with
    /// the configured peers now numbered as `was` maps them from before
    /// (see `Nodes::set_peers`). What a kept peer said stays with it; a new
    /// one is unheard, listed from `now`. Declarations, holdings and
    /// shunned runs stay: they name members by id, and a holding of a
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
    /// of a time this locker has not reached are ignored, and so is a
    /// heartbeat of a run older than the newest heard of the peer.
    /// Declarations are kept even before this locker knows the member: a
    /// run restarted while a declared member was out of its reach must
    /// still never echo it once it comes back. What a peer can make this
    /// locker keep is bounded by the number of members.
    pub fn on_beat(&mut self, now: Nanos, peer: PeerIx, said: Said<'_>, nodes: &Nodes) -> Vec<PeerEvent> {
        if !self.applies() || peer >= self.heard.len() {
            return Vec::new();
        }
        let members = self.heard.len() + 1;
        let run = nodes.peers().nth(peer).and_then(|(_, s)| s.run.as_ref()).map_or(0, |r| r.incarnation);
        let h = &mut self.heard[peer];
        if run < h.run {
            return Vec::new(); // a late heartbeat of a run since replaced
        }
        if h.since == 0 || run > h.run {
            (h.run, h.since, h.vouched) = (run, now, 0);
            (h.counts_from, h.own_counts_from, h.said_at) = (Nanos::MAX, Nanos::MAX, 0);
        }
        if let Some(at) = said.echo.filter(|&at| at <= now) {
            h.echoed = h.echoed.max(at);
            let from = now.max(h.since.saturating_add(LEASE + MARGIN));
            if at >= self.held_from && h.counts_from == Nanos::MAX {
                h.counts_from = from;
            }
            if at >= self.regained_at && h.own_counts_from == Nanos::MAX {
                // The peer echoes this run only while no peer holds its
                // share, as far as it knows: a margin for the clocks' skew.
                h.own_counts_from = from.max(now.saturating_add(MARGIN));
            }
        }
        let mut dead = std::mem::take(&mut self.heard[peer].dead);
        for (id, inc) in said.dead {
            // An older locker's word names no run: every run started
            // before it was heard.
            let key = NodeKey { id: id.as_str().into(), incarnation: if *inc == 0 { now } else { *inc } };
            match dead.iter_mut().find(|(d, _)| d.id == key.id) {
                Some(entry) if *inc != 0 && key.incarnation > entry.0.incarnation => *entry = (key, now),
                Some(_) => {}
                None => {
                    if dead.len() >= members {
                        // Full: room is made by forgetting a declaration
                        // of no member's current run (a run long gone, or
                        // a rogue's invention), never one that counts.
                        let Some(i) = dead.iter().position(|(d, _)| !self.covers_current(d, nodes)) else { continue };
                        dead.remove(i);
                    }
                    dead.push((key, now));
                }
            }
        }
        self.heard[peer].dead = dead;
        // A run of this locker declared dead, by a peer whose heartbeat
        // this is: its share may have been held (see `own_from`).
        let me = &nodes.me().id;
        self.once_held |= self.heard[peer].dead.iter().any(|(d, _)| d.id == *me);
        let h = &mut self.heard[peer];
        if said.at >= h.said_at {
            h.said_at = said.at;
            h.holds = said.holds.iter().take(members).map(|id| id.as_str().into()).collect();
        }
        let mut events = Vec::new();
        self.release(nodes, &mut events);
        self.shun_named(nodes);
        self.own_share(now, nodes, &mut events);
        events
    }

    /// Whether this locker echoes `beat`, the latest heartbeat time heard
    /// from `peer`, whose run is `run`, at `now`; if so, it remembers
    /// echoing it. Not before it may (see `joined`), nor while quiet (see
    /// `shun_named`), and never a run it shuns.
    pub fn vouch(&mut self, now: Nanos, peer: PeerIx, run: &NodeKey, beat: Nanos, nodes: &Nodes) -> bool {
        if !self.applies() {
            return true;
        }
        let echoes =
            now >= self.echo_from.max(self.quiet_until) && !self.shunned.contains(run) && !self.named(run, nodes);
        if let Some(h) = self.heard.get_mut(peer).filter(|_| echoes) {
            h.vouched = h.vouched.max(beat);
        }
        echoes
    }

    /// Whether this run must not echo `run` of a member: it declared that
    /// run dead or holds the member's share, a peer holds the member's
    /// share (a peer that holds it says so until it gives it back), or a
    /// majority declared that run dead. One declaration alone is not
    /// enough: a member cut off from one peer but heard by the rest would
    /// lose its lease, and two that cannot hear each other would each
    /// lose it. A later run of a member is not the run declared.
    fn named(&self, run: &NodeKey, nodes: &Nodes) -> bool {
        let id = &*run.id;
        self.declared.iter().any(|(d, _)| covers(d, run))
            || self.held.iter().any(|h| *h.id == *id)
            || self.holder_of(id, nodes).is_some()
            || self.declared_by_majority(run, nodes).is_some()
    }

    /// A peer whose latest heartbeat says it holds member `id`'s share,
    /// unless its own run is out: a majority declared it dead, or this
    /// locker holds its share (it holds what that peer held). Such a peer
    /// is shunned here (see `shun_named`), so its lease from this locker
    /// ran out before this locker echoes anyone after it.
    fn holder_of(&self, id: &str, nodes: &Nodes) -> Option<PeerIx> {
        let out = |s: &PeerState| {
            let Some(pid) = s.id() else { return false };
            let run = NodeKey { id: pid.into(), incarnation: self.newest_run(pid, nodes).unwrap_or(0) };
            self.held.iter().any(|h| *h.id == *pid) || self.declared_by_majority(&run, nodes).is_some()
        };
        let mut holders = self.heard.iter().zip(nodes.peers()).filter(|(h, _)| h.holds.iter().any(|x| **x == *id));
        holders.find(|(_, (_, s))| !out(s)).map(|(_, (ix, _))| ix)
    }

    /// Shuns each peer's run newly named (see `named`), and stays quiet a
    /// lease and its margin past the last of its heartbeats this run
    /// echoed. A member this run echoed may still be leased by that echo;
    /// the heir's lease over its share needs this run's echo of a
    /// heartbeat that said it holds the share, so the two never overlap.
    /// That is what keeps a run that restarted without its state file, and
    /// so knew of no declaration, from lending both of them a lease. A run
    /// no longer named (its share given back) is echoed again: shunned
    /// later, the quiet is taken again.
    fn shun_named(&mut self, nodes: &Nodes) {
        let mut shunned = std::mem::take(&mut self.shunned);
        shunned.retain(|run| self.named(run, nodes));
        for (ix, s) in nodes.peers() {
            let Some(run) = s.run.as_ref() else { continue };
            if shunned.contains(run) || !self.named(run, nodes) {
                continue;
            }
            shunned.push(run.clone());
            let vouched = self.heard[ix].vouched;
            if vouched > 0 {
                self.quiet_until = self.quiet_until.max(vouched.saturating_add(LEASE + MARGIN));
            }
        }
        // Bounded: one run per configured peer, and the runs still named
        // of those a peer ran before.
        let current = |run: &NodeKey| self.newest_run(&run.id, nodes).is_some_and(|n| run.incarnation >= n);
        shunned.retain(current);
        self.shunned = shunned;
    }

    /// The runs this run declared dead, as (member id, incarnation): every
    /// run of the member up to that one.
    pub fn declared(&self) -> impl Iterator<Item = (&str, u64)> {
        self.declared.iter().map(|(run, _)| (&*run.id, run.incarnation))
    }

    /// The members whose shares this run holds, besides its own.
    pub fn held(&self) -> impl Iterator<Item = &str> {
        self.held.iter().map(|run| &*run.id)
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
        let inherited = |s: &PeerState| s.id().is_some_and(|id| self.held.iter().any(|h| *h.id == *id));
        let counting = self.heard.iter().zip(nodes.peers()).filter(|(_, (_, s))| !inherited(s));
        self.majority_from(now, self.held_from, counting.map(|(h, _)| (h, h.counts_from)))
    }

    /// The first slot start from which this locker may grant from its own
    /// share at `now`: 0 while no peer may have held it (see
    /// `once_held`); none while one does; else as for inherited shares
    /// (see `inherited_from`), of a lease of heartbeats sent since the last
    /// holding it heard of ended (`regained_at`), each echo counting for
    /// the slots that begin a margin after it arrived. A peer echoes this
    /// run only while it knows of no holding of its share, and a holder
    /// gave the share back before its heartbeats stopped saying so; an
    /// earlier run of the peer, which may not have known, died before this
    /// run first heard it, a lease and its margin before its echoes count.
    pub fn own_from(&self, now: Nanos, nodes: &Nodes) -> Nanos {
        match self.regained_at {
            _ if !self.once_held => 0,
            Nanos::MAX => Nanos::MAX,
            since => {
                let echoers = self.heard.iter().zip(nodes.peers()).map(|(h, _)| (h, h.own_counts_from));
                self.majority_from(now, since, echoers)
            }
        }
    }

    /// The slot start from which the echoes of `echoers` (each peer's
    /// word, and from when its echoes count) lend a lease at `now` of
    /// heartbeats sent since `since`: the latest of a majority's (this
    /// locker counted), no earlier than `since`.
    fn majority_from<'a>(
        &self,
        now: Nanos,
        since: Nanos,
        echoers: impl Iterator<Item = (&'a LastSaid, Nanos)>,
    ) -> Nanos {
        let fresh = |h: &LastSaid| h.echoed >= since && h.echoed.saturating_add(LEASE) > now;
        let mut from: Vec<Nanos> = echoers.filter(|(h, f)| fresh(h) && *f != Nanos::MAX).map(|(_, f)| f).collect();
        from.sort_unstable();
        match from.get(self.majority.saturating_sub(2)) {
            Some(&f) if self.majority >= 2 => f.max(since),
            _ => Nanos::MAX,
        }
    }

    /// The group clock moved past `MOVE_BEYOND` at once, and reads `now`
    /// after the move: every lease and wait this run measured on the clock
    /// before may be off by as much, more than the margin allows for. It
    /// grants from no share until a lease and its margin have passed on
    /// the new clock: by then every lease it held then has run out, and
    /// every wait it began then has passed in true time too.
    pub fn clock_moved(&mut self, now: Nanos) {
        self.still_until = self.still_until.max(now.saturating_add(LEASE + MARGIN));
    }

    /// What tenure means for grants at `now`.
    pub fn holding(&self, now: Nanos, nodes: &Nodes) -> Holding {
        if !self.applies() {
            return Holding::OWN;
        }
        if now < self.still_until {
            return Holding { leased: false, held: 0, held_from: Nanos::MAX };
        }
        let leased = !self.lost_own && self.majority_echoes(now);
        let held_from = if self.held.is_empty() { Nanos::MAX } else { self.inherited_from(now, nodes) };
        let held = if held_from == Nanos::MAX {
            0
        } else {
            self.held.iter().filter_map(|run| place_of(nodes, &run.id)).fold(0u64, |bits, p| bits | 1 << p)
        };
        Holding { leased, held, held_from }
    }

    /// Declares the peers silent for `DECLARE_AFTER` dead, while leased,
    /// and reclaims the shares this locker is heir to. Call once a
    /// heartbeat or so.
    ///
    /// A peer is declared as its newest run heard. A peer the
    /// configuration names by id (`ID@ENDPOINT`) and this run never heard
    /// is silent since this run joined (or a reload listed it, so that a
    /// member added is not declared before it could start): a run
    /// restarted while a member is down declares it as a run that heard
    /// it would (every run of it started before now), so that a majority
    /// can still reclaim its share. It is the same word ("not heard for
    /// `DECLARE_AFTER` while leased"), and a member that is alive and
    /// heard by the rest is echoed by them, and never declared by a
    /// majority.
    pub fn tick(&mut self, now: Nanos, nodes: &Nodes, events: &mut VecDeque<PeerEvent>) {
        if !self.applies() {
            return;
        }
        if self.holding(now, nodes).leased {
            for (ix, s) in nodes.peers() {
                let listed = self.heard.get(ix).map_or(0, |h| h.listed);
                let (id, last, incarnation) = match (&s.run, &s.named) {
                    (Some(run), _) if s.last_heard > 0 => {
                        (&run.id, s.last_heard, self.newest_run(&run.id, nodes).unwrap_or(run.incarnation))
                    }
                    (None, Some(named)) if self.joined_at != Nanos::MAX => (named, self.joined_at.max(listed), now),
                    _ => continue,
                };
                let run = NodeKey { id: id.clone(), incarnation };
                let quiet = now.saturating_sub(last) > DECLARE_AFTER;
                if quiet && !self.declared.iter().any(|(d, _)| covers(d, &run)) {
                    // One entry per member: a later run covers the earlier.
                    self.declared.retain(|(d, _)| d.id != run.id);
                    self.declared.push((run, now));
                    events.push_back(PeerEvent::Declared { id: shown(id) });
                }
            }
        }
        let mut more = Vec::new();
        self.release(nodes, &mut more);
        self.reclaim(now, nodes, events);
        self.shun_named(nodes);
        self.own_share(now, nodes, &mut more);
        events.extend(more);
    }

    /// Gives back each share this locker holds of a member that a run
    /// later than every run the holding covers speaks for now: that run
    /// is not the one declared dead. It stops granting from the share at
    /// once, and its heartbeats stop saying it holds it. Always safe for
    /// this locker, which grants less; the new run owns the share again
    /// only from the slots after a lease it regains since (see
    /// `own_from`).
    fn release(&mut self, nodes: &Nodes, events: &mut Vec<PeerEvent>) {
        let mut held = std::mem::take(&mut self.held);
        held.retain(|run| {
            let later = self.newest_run(&run.id, nodes).is_some_and(|n| n > run.incarnation);
            if later {
                events.push(PeerEvent::Released { id: shown(&run.id) });
            }
            !later
        });
        self.held = held;
    }

    /// Notes whether a peer holds this run's own share (see `holder_of`):
    /// while one does, this run grants from none of it; once none does,
    /// from the slots after a lease regained since (see `own_from`).
    fn own_share(&mut self, now: Nanos, nodes: &Nodes, events: &mut Vec<PeerEvent>) {
        let holder = self.holder_of(&nodes.me().id, nodes);
        match (self.lost_own, holder) {
            (false, Some(ix)) => {
                (self.lost_own, self.regained_at, self.once_held) = (true, Nanos::MAX, true);
                let by = nodes.peers().nth(ix).and_then(|(_, s)| s.id()).map_or("?".into(), shown);
                events.push(PeerEvent::LostShare { by });
            }
            (true, None) => {
                (self.lost_own, self.regained_at, self.once_held) = (false, now, true);
                self.heard.iter_mut().for_each(|h| h.own_counts_from = Nanos::MAX);
                events.push(PeerEvent::ShareBack);
            }
            _ => {}
        }
    }

    /// Takes over each member this locker (or a member whose share it
    /// holds) is heir to, once a majority declared its newest run dead.
    ///
    /// Not a run whose own share a peer may have held (`once_held`): while
    /// a peer held it, that peer was heir to whatever this locker is heir
    /// to, and may hold it still; a second holder would grant beside it.
    fn reclaim(&mut self, now: Nanos, nodes: &Nodes, events: &mut VecDeque<PeerEvent>) {
        if self.once_held {
            return;
        }
        let Some(members) = member_ids(nodes) else { return };
        let me = nodes.me().id.clone();
        // Taking one over can make this locker heir to the next: go round
        // until nothing changes, at most once per member.
        for _ in 0..members.len() {
            let Some((peer, run, from)) = self.next_heirloom(&members, &me, nodes) else { return };
            let inherited = self.heard[peer].holds.clone();
            let id = run.id.clone();
            self.held.push(run);
            for h in inherited {
                if h != me && !self.held.iter().any(|run| run.id == h) {
                    // Given back once a run of it later than any a
                    // majority declared speaks.
                    let incarnation = self.majority_declared_upto(&h, nodes);
                    self.held.push(NodeKey { id: h, incarnation });
                }
            }
            self.held_from = if self.held_from == Nanos::MAX { from } else { self.held_from.max(from) };
            // Echoes count again from one of a heartbeat sent since.
            self.heard.iter_mut().for_each(|h| h.counts_from = Nanos::MAX);
            let in_ms = from.saturating_sub(now) / NANOS_PER_MS;
            events.push_back(PeerEvent::Reclaimed { id: shown(&id), in_ms });
        }
    }

    /// A peer whose share this locker may take over now: its index, its
    /// newest run (the holding covers it and every earlier one) and the
    /// instant its share counts from.
    fn next_heirloom(&self, members: &[Box<str>], me: &str, nodes: &Nodes) -> Option<(PeerIx, NodeKey, Nanos)> {
        let heir_is_me = |id: &str| {
            let place = members.iter().position(|m| **m == *id)?;
            let heir = &members[(place + 1) % members.len()];
            Some(**heir == *me || self.held.iter().any(|h| h.id == *heir))
        };
        for (peer, s) in nodes.peers() {
            let Some(id) = s.id() else { continue };
            if self.held.iter().any(|h| *h.id == *id) || heir_is_me(id) != Some(true) {
                continue;
            }
            let run = NodeKey { id: id.into(), incarnation: self.newest_run(id, nodes).unwrap_or(0) };
            if let Some(learned) = self.declared_by_majority(&run, nodes) {
                return Some((peer, run, learned.saturating_add(LEASE + MARGIN)));
            }
        }
        None
    }

    /// The declarations of member `id` this locker knows, its own and its
    /// peers' (a member's word about itself does not count), each with
    /// when this locker learned it.
    fn declarations<'a>(&'a self, id: &'a str, nodes: &'a Nodes) -> impl Iterator<Item = &'a (NodeKey, Nanos)> + 'a {
        let mine = self.declared.iter().filter(move |(d, _)| *d.id == *id);
        let theirs = self.heard.iter().zip(nodes.peers()).filter_map(move |(h, (_, s))| {
            let speaker = s.run.as_ref()?;
            if *speaker.id == *id {
                return None; // a member's word about itself does not count
            }
            h.dead.iter().find(|(d, _)| *d.id == *id)
        });
        mine.chain(theirs)
    }

    /// When this locker had learned that a majority declared `run` dead
    /// (the earliest such instant), if it has.
    fn declared_by_majority(&self, run: &NodeKey, nodes: &Nodes) -> Option<Nanos> {
        let covering = self.declarations(&run.id, nodes).filter(|(d, _)| covers(d, run));
        let mut learned: Vec<Nanos> = covering.map(|&(_, at)| at).collect();
        learned.sort_unstable();
        learned.get(self.majority.checked_sub(1)?).copied()
    }

    /// The newest run of member `id` that a majority declared dead, 0 if
    /// none: a holding of its share taken over from a dead holder covers
    /// that run.
    fn majority_declared_upto(&self, id: &str, nodes: &Nodes) -> u64 {
        let mut runs: Vec<u64> = self.declarations(id, nodes).map(|(d, _)| d.incarnation).collect();
        runs.sort_unstable_by(|a, b| b.cmp(a));
        self.majority.checked_sub(1).and_then(|m| runs.get(m)).copied().unwrap_or(0)
    }

    /// The newest run of member `id` this locker heard (0 for a member
    /// never heard), `None` when `id` is no member's.
    fn newest_run(&self, id: &str, nodes: &Nodes) -> Option<u64> {
        if *nodes.me().id == *id {
            return Some(nodes.me().incarnation);
        }
        let (ix, s) = nodes.peers().find(|(_, s)| s.id() == Some(id))?;
        let live = s.run.as_ref().map_or(0, |r| r.incarnation);
        Some(live.max(self.heard.get(ix).map_or(0, |h| h.run)))
    }

    /// Whether declaration `d` covers a member's newest run heard: else it
    /// names a run long gone (or no member at all), which counts for
    /// nothing but shunning that run should it speak again.
    fn covers_current(&self, d: &NodeKey, nodes: &Nodes) -> bool {
        self.newest_run(&d.id, nodes).is_some_and(|n| n <= d.incarnation)
    }
}

/// Whether declaration `d` (every run of its member up to its
/// incarnation) covers `run`.
fn covers(d: &NodeKey, run: &NodeKey) -> bool {
    d.id == run.id && run.incarnation <= d.incarnation
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

#[cfg(test)]
mod tests;
