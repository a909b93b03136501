//! The node table: the configured peers, the runs of lockers each of them
//! has told this one about, and what it knows of each peer's liveness and
//! clock.
//!
//! A node is one run of one locker: its configured id plus an incarnation
//! (the instant that run started). Counts are kept per node, so a locker
//! that restarts under the same id starts a new node and its earlier run's
//! count keeps counting until the slot ends.
//!
//! The table is bounded by the configuration, not by what arrives: every
//! message comes from one configured peer (the caller knows which, from the
//! socket it arrived on), and each peer may name at most
//! `MAX_RUNS_PER_PEER` runs: its live run (the sender of its messages) and
//! the runs it relays in snapshots (its own earlier runs, other peers',
//! this locker's earlier run). A run no longer live is forgotten once it
//! has not been named for the retention time, after its slots ended. So a
//! flood of made-up node ids costs a hash lookup each and holds at most
//! `MAX_RUNS_PER_PEER` entries per configured peer. A refused run is not
//! forgotten entirely when it is an earlier run of this locker: that one
//! existed is what keeps a joining run from owning the slot it joins in,
//! so it is kept as a flag. This module is pure: it
//! takes `now` and never logs; it reports what changed so the caller can.

use std::collections::{HashMap, VecDeque};

use crate::core::share::NodeIx;
use crate::core::time::{Nanos, NANOS_PER_MS};

/// The most runs one configured peer may have in the table at once: its
/// live run and the runs it relays. A peered trio needs four (a peer's
/// live and earlier run, the third locker's, and this one's earlier run).
pub const MAX_RUNS_PER_PEER: usize = 8;

/// How long a run no longer live is kept, unless set: enough for slots of
/// up to a second and the bucket period before.
pub const DEFAULT_RETENTION: Nanos = 2 * crate::core::time::NANOS_PER_SEC;

/// An index naming one configured peer, in configuration order.
pub type PeerIx = usize;

/// The peer of a run whose peer is no longer configured (see `set_peers`).
const NO_PEER: PeerIx = PeerIx::MAX;

/// One run of one locker.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NodeKey {
    /// The locker's configured (or generated) id.
    pub id: Box<str>,
    /// When this run started, in nanoseconds since the Unix epoch.
    pub incarnation: u64,
}

/// The node id a configured peer's name gives it, if any: `ID@ENDPOINT`
/// names it (the last `@` ahead of the endpoint's `://`, as the
/// configuration reads it), an endpoint alone does not.
fn configured_id(name: &str) -> Option<&str> {
    let (head, _) = name.split_once("://")?;
    head.rsplit_once('@').map(|(id, _)| id)
}

/// What this locker knows of one configured peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerState {
    /// The peer as configured (`[ID@]ENDPOINT`), for stats and logs.
    pub name: Box<str>,
    /// The node id the configuration names it by, if it does: its place
    /// among the members is known before it is heard, and its messages
    /// under any other id are refused.
    pub named: Option<Box<str>>,
    /// The run that sends this peer's messages, once heard.
    pub run: Option<NodeKey>,
    /// When a heartbeat from it last arrived, by this locker's clock.
    pub last_heard: Nanos,
    /// The sender's time in that heartbeat, which this locker's next
    /// heartbeats echo (see `peering::tenure`).
    pub last_beat: Nanos,
    /// The peer's clock minus this locker's, in nanoseconds: the largest of
    /// its last few heartbeats' (a delay in transit only ever makes a peer
    /// look behind, so the largest is the least delayed).
    pub offset: i64,
    /// The offsets of its last heartbeats, newest at `next - 1`.
    samples: Samples,
    /// This locker's clock minus the peer's as the peer last said it sees
    /// it (transit included), when it says so.
    reported: Option<i64>,
    /// Whether the offset is beyond the tolerated skew.
    pub flagged: bool,
    /// Whether the peer said it is still learning the counts.
    pub joining: bool,
    /// Since when, by this locker's clock, the peer's live run has heard
    /// its peers without a pause of its own, as its last heartbeat said
    /// (`Beat::up`, read as if it had arrived at once, so never earlier
    /// than true); `None` from a locker that does not say.
    pub up_since: Option<Nanos>,
    /// Whether the peer went unheard past the live timeout (and was
    /// reported silent); cleared by its next heartbeat.
    pub silent: bool,
    /// Counts and node ids from this peer that were refused.
    pub rejected: u64,
    /// When a refusal was last reported, so a flood is reported once a
    /// second, not once a message.
    last_reported: Option<Nanos>,
    /// When a restart was last reported, likewise: a publisher at the
    /// peer's address could claim a new run in every message.
    last_restart: Option<Nanos>,
}

/// Something about a peer worth logging.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PeerEvent {
    /// A peer's first heartbeat was heard: it counts as live.
    Joined { id: String },
    /// A live peer id was heard with a new incarnation: it restarted.
    Restarted { id: String },
    /// A peer's clock differs from ours by more than the tolerated skew.
    ClockSkew { id: String, offset_ms: i64 },
    /// A flagged peer's clock is back within the tolerated skew.
    ClockSkewCleared { id: String },
    /// This locker moved its clock by `by_ms` to the middle of its peers'
    /// (`correction_ms` in all since it started): its own clock is off.
    /// `still`: the move was past `tenure::MOVE_BEYOND` once joined, so it
    /// grants from no share for a lease and its margin.
    ClockFollowed { by_ms: i64, correction_ms: i64, still: bool },
    /// A peer was not heard for longer than the live timeout: it no longer
    /// counts as live. `last_heard_ms` ago it was heard last.
    Silent { id: String, last_heard_ms: u64 },
    /// A silent peer was heard again, the same run, after `silent_ms`.
    Back { id: String, silent_ms: u64 },
    /// This locker finished learning the counts (from `synced` peers; 0
    /// means the grace period ran out and it serves alone).
    Ready { synced: usize },
    /// This run owns none of the slots (windows, periods) under way of its
    /// shared limits, only those that begin after it joined, for `why`: it
    /// cannot tell that no earlier run of it granted in them.
    OwnsNextPeriods { why: &'static str },
    /// This locker's own loop was paused longer than the peer-dead time
    /// (SIGSTOP, a frozen VM): it learns the counts again before granting.
    Rejoining { paused_ms: u64 },
    /// A peer sent something refused (an implausible count, too many node
    /// ids); `rejected` is the peer's running total. Reported at most once
    /// a second per peer.
    Refused { peer: String, what: String, rejected: u64 },
    /// A peer defines a limit of the same name differently: its counts for
    /// that limit are not merged.
    LimitMismatch { peer: String, limit: String },
    /// This locker declared a peer silent for long dead: it never echoes
    /// it again (see `peering::tenure`).
    Declared { id: String },
    /// This locker holds `id`'s share (and what `id` held) for the slots
    /// that begin `in_ms` from now on.
    Reclaimed { id: String, in_ms: u64 },
    /// Peer `by` holds this locker's share: it grants what it is given
    /// until no peer holds it (see `ShareBack`).
    LostShare { by: String },
    /// No peer holds this locker's share any more: it owns it again from
    /// the slots that begin once a majority echoed it since.
    ShareBack,
    /// This locker gave back member `id`'s share, which it held: a later
    /// run of `id` than the one declared dead was heard.
    Released { id: String },
    /// The configured peer `peer` (its run `id`) states a member set other
    /// than this locker's (`theirs` and `ours` members): no grant from
    /// shares until they agree (see `peering::members`).
    MemberSetDiffers { peer: String, id: String, theirs: u32, ours: u32 },
    /// Every peer that states a member set states this locker's again,
    /// and none says its own is settling: shares are granted from the
    /// next slot on.
    MemberSetsAgree,
    /// This locker's member set changed (a reload): `ours` members now.
    /// No grant from shares until every peer states the new set.
    MemberSetChanged { ours: u32 },
}

/// A run the table holds, and the peer that named it.
#[derive(Debug, Clone)]
struct Run {
    key: NodeKey,
    peer: PeerIx,
    last_named: Nanos,
}

/// Every run this locker knows, per configured peer; index 0 is this
/// locker itself.
#[derive(Debug)]
pub struct Nodes {
    me: NodeKey,
    runs: HashMap<NodeIx, Run>,
    index: HashMap<NodeKey, NodeIx>,
    next: NodeIx,
    peers: Vec<PeerState>,
    max_skew: Nanos,
    retention: Nanos,
    /// Heartbeats received before this instant are not judged for skew: a
    /// locker resumed from a pause first reads what queued up meanwhile.
    judge_skew_from: Nanos,
    /// The incarnations of this locker's earlier runs that its state file
    /// named: their grants and gifts are known (see `Nodes::kept_runs`).
    kept: Vec<u64>,
    /// Whether this run keeps a state file (`kept_runs` was told of it).
    keeps_state: bool,
    /// Whether a peer named an earlier run of this locker that found no
    /// room among that peer's runs, and whether one its state file did not
    /// keep: the run is refused, but not the fact that it was (see
    /// `resolve`).
    refused_earlier: bool,
    refused_unkept: bool,
}

impl Nodes {
    /// A table for `me` and the configured `peers`; a peer whose clock is
    /// off by more than `max_skew` is flagged.
    pub fn new(me: NodeKey, peers: &[Box<str>], max_skew: Nanos) -> Nodes {
        let peers = peers.iter().map(|name| PeerState::new(name.clone())).collect();
        Nodes {
            me,
            runs: HashMap::new(),
            index: HashMap::new(),
            next: Self::ME + 1,
            peers,
            max_skew,
            retention: DEFAULT_RETENTION,
            judge_skew_from: 0,
            kept: Vec::new(),
            keeps_state: false,
            refused_earlier: false,
            refused_unkept: false,
        }
    }

    /// This locker's own index.
    pub const ME: NodeIx = crate::core::share::ME;

    /// This locker's own node.
    pub fn me(&self) -> &NodeKey {
        &self.me
    }

    /// How many configured peers there are.
    pub fn configured(&self) -> usize {
        self.peers.len()
    }

    /// How many runs of other lockers the table holds.
    pub fn runs(&self) -> usize {
        self.runs.len()
    }

    /// The node behind `ix`, unless it was forgotten.
    pub fn key(&self, ix: NodeIx) -> Option<&NodeKey> {
        if ix == Self::ME {
            return Some(&self.me);
        }
        self.runs.get(&ix).map(|r| &r.key)
    }

    /// The index of `key` named by `peer` in a count at `now`: this locker,
    /// a known run, or a new run while `peer` has room for one. `None`
    /// when `peer` is not configured or has no room: the count is refused.
    pub fn resolve(&mut self, now: Nanos, peer: PeerIx, key: &NodeKey) -> Option<NodeIx> {
        if *key == self.me {
            return Some(Self::ME);
        }
        if peer >= self.peers.len() {
            return None;
        }
        if let Some(&ix) = self.index.get(key) {
            self.runs.get_mut(&ix).expect("indexed runs are held").last_named = now;
            return Some(ix);
        }
        if self.held_by(peer) >= MAX_RUNS_PER_PEER {
            self.note_refused(key);
            return None;
        }
        Some(self.admit(now, peer, key))
    }

    /// Keeps, of a run refused for lack of room, whether it was an earlier
    /// run of this locker: what a joining run owns rests on knowing one
    /// existed (see `knows_earlier_run`), and a peer's room may be full of
    /// other runs it relays. Two flags, so a flood costs nothing more.
    fn note_refused(&mut self, key: &NodeKey) {
        if key.id == self.me.id && key.incarnation < self.me.incarnation {
            self.refused_earlier = true;
            self.refused_unkept |= !self.kept.contains(&key.incarnation);
        }
    }

    /// Records that `peer`'s messages are sent by `key` at `now`: its live
    /// run. A new run needs room among `peer`'s runs, which runs forgotten
    /// after the retention time make: runs are never dropped while they may
    /// still hold counts, so a publisher that claims a new run in every
    /// message adds at most `MAX_RUNS_PER_PEER` per retention time. Returns
    /// the run's index and what changed, or `None` when the sender is
    /// refused: no room, `peer` not configured, or this locker's own node
    /// id in any run (a peer is never this locker, so such a message is
    /// forged or misconfigured, and must not become a peer entry).
    pub fn sender(&mut self, now: Nanos, peer: PeerIx, key: &NodeKey) -> Option<(NodeIx, Option<PeerEvent>)> {
        if key.id == self.me.id || peer >= self.peers.len() {
            return None;
        }
        if self.peers[peer].named.as_ref().is_some_and(|id| *id != key.id) {
            return None; // another locker at a named peer's endpoint
        }
        let ix = match self.index.get(key) {
            Some(&ix) => {
                let run = self.runs.get_mut(&ix).expect("indexed runs are held");
                run.peer = peer; // a run relayed by another peer speaks for itself now
                run.last_named = now;
                ix
            }
            None => {
                if self.held_by(peer) >= MAX_RUNS_PER_PEER {
                    self.forget(now, self.retention);
                }
                if self.held_by(peer) >= MAX_RUNS_PER_PEER {
                    return None;
                }
                self.admit(now, peer, key)
            }
        };
        let state = &mut self.peers[peer];
        let event = match &state.run {
            Some(live) if live == key => return Some((ix, None)),
            // A peer is reported heard by its first heartbeat (see
            // `heartbeat`), when it starts to count as live, and a new
            // run is reported as a restart only once the peer was live.
            Some(_) if state.last_heard > 0 => {
                once_a_second(&mut state.last_restart, now).then(|| PeerEvent::Restarted { id: shown(&key.id) })
            }
            _ => None,
        };
        state.run = Some(key.clone());
        state.last_beat = 0; // a new run's heartbeats are echoed, not the last run's
        state.up_since = None; // nor is the last run's time up this run's
        Some((ix, event))
    }

    fn admit(&mut self, now: Nanos, peer: PeerIx, key: &NodeKey) -> NodeIx {
        // Indices are never reused, so a count held under one can never be
        // credited to another node. Admissions are bounded per peer and
        // retention time, so a u32 lasts far longer than any run.
        let ix = self.next;
        self.next += 1;
        self.runs.insert(ix, Run { key: key.clone(), peer, last_named: now });
        self.index.insert(key.clone(), ix);
        ix
    }

    fn held_by(&self, peer: PeerIx) -> usize {
        self.runs.values().filter(|r| r.peer == peer).count()
    }

    fn remove(&mut self, ix: NodeIx) {
        if let Some(run) = self.runs.remove(&ix) {
            self.index.remove(&run.key);
        }
    }

    /// Takes `names` as the configured peers (a reload), where `was[i]` is
    /// the index `names[i]` had before, if it was configured: a peer kept
    /// keeps what this locker knows of it, a new one starts unheard. The
    /// runs a removed peer named stay (their counts last until their slots
    /// end) under no peer, and are forgotten as any run no longer live.
    pub fn set_peers(&mut self, names: &[Box<str>], was: &[Option<PeerIx>]) {
        let mut old: Vec<Option<PeerState>> = std::mem::take(&mut self.peers).into_iter().map(Some).collect();
        let kept = |(name, w): (&str, &Option<PeerIx>)| {
            w.and_then(|i| old.get_mut(i)?.take()).unwrap_or_else(|| PeerState::new(name.into()))
        };
        self.peers = names.iter().map(|n| &**n).zip(was).map(kept).collect();
        for run in self.runs.values_mut() {
            run.peer = was.iter().position(|w| *w == Some(run.peer)).unwrap_or(NO_PEER);
        }
    }

    /// Sets how long a run no longer live is kept after it was last named:
    /// long enough for every count it may hold to have ended with its slot.
    pub fn set_retention(&mut self, retention: Nanos) {
        self.retention = retention;
    }

    /// Forgets every run that is no peer's live run and was last named
    /// longer than `retention` before `now`: its slots have ended, and the
    /// counts it held with them.
    pub fn forget(&mut self, now: Nanos, retention: Nanos) {
        let peers = &self.peers;
        let stale: Vec<NodeIx> = self
            .runs
            .iter()
            .filter(|(_, r)| peers.get(r.peer).and_then(|p| p.run.as_ref()) != Some(&r.key))
            .filter(|(_, r)| now.saturating_sub(r.last_named) > retention)
            .map(|(&ix, _)| ix)
            .collect();
        for ix in stale {
            self.remove(ix);
        }
    }

    /// Records a heartbeat from `peer`, sent by `from` at `sent_at` by its
    /// clock and received at `now` by ours. Returns what changed, if
    /// anything; nothing as well when the sender is refused.
    pub fn heartbeat(&mut self, now: Nanos, peer: PeerIx, from: &NodeKey, beat: Beat) -> Vec<PeerEvent> {
        let Beat { sent_at, joining, reported, up } = beat;
        let Some((_, event)) = self.sender(now, peer, from) else { return Vec::new() };
        let mut events: Vec<PeerEvent> = event.into_iter().collect();
        let state = &mut self.peers[peer];
        if state.last_heard == 0 {
            // Known until now from its counts alone, if at all: it never
            // counted as live, so it is reported heard now, and silent
            // only once it has been heard (see `sweep_silent`).
            events.push(PeerEvent::Joined { id: shown(&from.id) });
        } else if std::mem::replace(&mut state.silent, false) && events.is_empty() {
            let silent_ms = now.saturating_sub(state.last_heard) / 1_000_000;
            events.push(PeerEvent::Back { id: shown(&from.id), silent_ms });
        }
        state.last_heard = now;
        state.last_beat = state.last_beat.max(sent_at);
        state.joining = joining;
        state.up_since = up.map(|up| now.saturating_sub(up));
        self.measure(now, peer, sent_at, reported, &mut events);
        events
    }

    /// Measures `peer`'s clock by a message it sent at `sent_at` by its
    /// clock, received at `now` by ours, which says how it sees ours
    /// (`reported`), and flags or clears its skew. Not while the backlog of
    /// a pause is read: those messages waited.
    pub fn measure(
        &mut self,
        now: Nanos,
        peer: PeerIx,
        sent_at: Nanos,
        reported: Option<i64>,
        events: &mut Vec<PeerEvent>,
    ) {
        if now < self.judge_skew_from {
            return;
        }
        let Some(state) = self.peers.get_mut(peer) else { return };
        let offset = (sent_at as i128 - now as i128).clamp(i64::MIN as i128, i64::MAX as i128) as i64;
        state.samples.push(offset);
        state.offset = state.samples.largest();
        state.reported = reported.or(state.reported);
        self.judge_skew(events);
    }

    /// Whether every configured peer is live and its clock measured both
    /// ways (it said how it sees this locker's).
    pub fn all_measured(&self) -> bool {
        self.peers.iter().all(|p| p.run.is_some() && !p.silent && p.samples.len > 0 && p.reported.is_some())
    }

    /// The clock offsets of the peers heard recently and measured both
    /// ways, each read by `of` (`PeerState::skew`, or `sure_skew`), for the
    /// group's clock. A peer that never says how it sees this locker's
    /// clock is left out.
    pub fn live_offsets(&self, of: fn(&PeerState) -> i64) -> impl Iterator<Item = i64> + '_ {
        let measured = |p: &&PeerState| p.run.is_some() && !p.silent && p.samples.len > 0 && p.reported.is_some();
        self.peers.iter().filter(measured).map(of)
    }

    /// This locker's clock moved by `by`: every peer now looks that much
    /// nearer.
    pub fn shift_offsets(&mut self, by: i64) {
        for p in &mut self.peers {
            p.samples.shift(by);
            p.offset = p.offset.saturating_sub(by);
            p.reported = p.reported.map(|r| r.saturating_add(by));
        }
    }

    /// Flags each peer whose settled offset is beyond the tolerated skew,
    /// and clears the flag of each back within it; pushes the changes. Only
    /// peers measured both ways are judged: a one-way offset holds the
    /// whole transit, which on a busy host alone passes the in-flight
    /// window, so it says too little of the clock (as for following).
    pub fn judge_skew(&mut self, events: &mut Vec<PeerEvent>) {
        for p in self.peers.iter_mut().filter(|p| p.samples.len > 0 && p.reported.is_some()) {
            let skew = p.sure_skew();
            let flagged = skew.unsigned_abs() > self.max_skew;
            let Some(id) = p.run.as_ref().map(|r| shown(&r.id)) else { continue };
            match (std::mem::replace(&mut p.flagged, flagged), flagged) {
                (false, true) => events.push(PeerEvent::ClockSkew { id, offset_ms: skew / 1_000_000 }),
                (true, false) => events.push(PeerEvent::ClockSkewCleared { id }),
                _ => {}
            }
        }
    }

    /// After this locker's own loop was paused, heartbeats received before
    /// `until` are not judged for skew: they may have queued up meanwhile.
    pub fn hold_skew_until(&mut self, until: Nanos) {
        self.judge_skew_from = until;
    }

    /// Counts a refusal of something `peer` sent at `now`; returns the event
    /// to log, at most once a second per peer.
    pub fn refuse(&mut self, now: Nanos, peer: PeerIx, what: impl FnOnce() -> String) -> Option<PeerEvent> {
        let state = self.peers.get_mut(peer)?;
        state.rejected += 1;
        if !once_a_second(&mut state.last_reported, now) {
            return None;
        }
        Some(PeerEvent::Refused { peer: state.name.to_string(), what: what(), rejected: state.rejected })
    }

    /// Marks every peer heard (by heartbeat) but not within `timeout` of `now` silent,
    /// and reports each one once, when it goes silent.
    pub fn sweep_silent(&mut self, now: Nanos, timeout: Nanos, events: &mut VecDeque<PeerEvent>) {
        for p in &mut self.peers {
            // A peer known only from its counts was never live: nothing to lose.
            let Some(run) = p.run.as_ref().filter(|_| p.last_heard > 0) else { continue };
            let quiet = now.saturating_sub(p.last_heard);
            if !p.silent && quiet > timeout {
                p.silent = true;
                events.push_back(PeerEvent::Silent { id: shown(&run.id), last_heard_ms: quiet / 1_000_000 });
            }
        }
    }

    /// Configured peers heard within `timeout` of `now`. Costs one step per
    /// configured peer, whatever the runs.
    pub fn live_peers(&self, now: Nanos, timeout: Nanos) -> usize {
        self.peers.iter().filter(|p| p.run.is_some() && now.saturating_sub(p.last_heard) <= timeout).count()
    }

    /// How much later than the least delayed of them the recent heartbeats
    /// of the peers heard within `timeout` of `now` arrived: the largest
    /// spread of one peer's last offsets (a delay only ever makes a peer
    /// look behind, so the spread is how much more some messages took).
    /// The heartbeats a pause left queued are not measured (see `measure`).
    pub fn lateness(&self, now: Nanos, timeout: Nanos) -> Nanos {
        let live = |p: &&PeerState| p.run.is_some() && now.saturating_sub(p.last_heard) <= timeout;
        self.peers.iter().filter(live).map(|p| p.samples.spread()).max().unwrap_or(0)
    }

    /// This locker's place among every configured locker by id (the
    /// owner of a slot's remainder, see `Share::owns`), once every
    /// configured peer's id is known (heard, or named by the
    /// configuration), live or not; `None` before.
    pub fn member(&self) -> Option<usize> {
        let me = &*self.me.id;
        let ids: Option<Vec<&str>> = self.peers.iter().map(PeerState::id).collect();
        Some(ids?.into_iter().filter(|id| *id < me).count())
    }

    /// Whether a peer told of an earlier run of this locker (see
    /// `Peering::owns_from`).
    pub fn knows_earlier_run(&self) -> bool {
        self.refused_earlier
            || self.runs.values().any(|r| r.key.id == self.me.id && r.key.incarnation < self.me.incarnation)
    }

    /// Notes the runs, as `(node id, incarnation)`, that this locker's state
    /// file named: those of this locker's id recorded every grant and gift
    /// they made before it left.
    pub fn kept_runs<'a>(&mut self, runs: impl Iterator<Item = (&'a str, u64)>) {
        self.keeps_state = true;
        let me = &self.me;
        self.kept.extend(runs.filter(|&(id, at)| *id == *me.id && at < me.incarnation).map(|(_, at)| at));
    }

    /// Whether the state file named an earlier run of this locker and no
    /// peer told of one it did not name: then what every earlier run
    /// granted and gave is known (see `Peering::owns_from`).
    pub fn knows_every_earlier_run(&self) -> bool {
        let unkept = |r: &Run| {
            r.key.id == self.me.id && r.key.incarnation < self.me.incarnation && !self.kept.contains(&r.key.incarnation)
        };
        !self.kept.is_empty() && !self.refused_unkept && !self.runs.values().any(unkept)
    }

    /// Whether this run's state file named no earlier run of this locker:
    /// a new file, so this is the locker's first run (see
    /// `Peering::owns_from`). Always false without a state file.
    pub fn first_run(&self) -> bool {
        self.keeps_state && self.kept.is_empty()
    }

    /// The earliest instant, by this locker's clock, since which a peer's
    /// live run has heard its peers without a pause (`PeerState::up_since`),
    /// among the peers that say so: any earlier run of this locker that
    /// lived past it (and `live_timeout` more, for that peer to hear it)
    /// is one that peer knows of (see `Peering::owns_from`).
    pub fn heard_since(&self) -> Option<Nanos> {
        self.peers.iter().filter(|p| p.run.is_some()).filter_map(|p| p.up_since).min()
    }

    /// Every run this locker knows of other lockers, for a snapshot.
    pub fn run_indices(&self) -> impl Iterator<Item = NodeIx> + '_ {
        self.runs.keys().copied()
    }

    /// Every configured peer, in configuration order.
    pub fn peers(&self) -> impl Iterator<Item = (PeerIx, &PeerState)> {
        self.peers.iter().enumerate()
    }
}

/// Whether something last reported at `last` may be reported again at
/// `now`; if so, `now` becomes the last time.
fn once_a_second(last: &mut Option<Nanos>, now: Nanos) -> bool {
    if last.is_some_and(|at| now.saturating_sub(at) < crate::core::time::NANOS_PER_SEC) {
        return false;
    }
    *last = Some(now);
    true
}

/// A node id a peer sent, cut to a length fit for a log line.
pub fn shown(id: &str) -> String {
    const MOST: usize = 64;
    match id.char_indices().nth(MOST) {
        Some((end, _)) => format!("{}...", &id[..end]),
        None => id.to_owned(),
    }
}

impl PeerState {
    /// The peer's node id: its live run's, else the one the configuration
    /// names (the two never differ, see `Nodes::sender`); `None` while
    /// neither is known.
    pub fn id(&self) -> Option<&str> {
        self.run.as_ref().map(|r| &*r.id).or(self.named.as_deref())
    }

    /// The peer's clock minus this locker's, in nanoseconds: halfway
    /// between how each sees the other when the peer says how it sees this
    /// locker (which cancels the transit time), else as seen from here.
    pub fn skew(&self) -> i64 {
        match self.reported {
            Some(r) => ((i128::from(self.offset) - i128::from(r)) / 2) as i64,
            None => self.offset,
        }
    }

    /// The skew this locker can be sure of: `skew` moved toward 0 by how
    /// far it may be off. Halfway between the two views cancels the
    /// transit time only when it is the same both ways; a busy host that
    /// delays one direction more makes the halfway point off by up to half
    /// the round trip (the least delayed heartbeat each way, which the two
    /// views add up to). Within that, the clocks may well agree, and
    /// following or warning of such a skew would move a right clock.
    pub fn sure_skew(&self) -> i64 {
        let Some(r) = self.reported else { return self.offset };
        let round_trip = (i128::from(self.offset) + i128::from(r)).min(0).unsigned_abs();
        let (skew, doubt) = (i128::from(self.skew()), (round_trip / 2) as i128);
        (skew.signum() * (skew.abs() - doubt).max(0)) as i64
    }

    /// Whether a heartbeat has measured its clock.
    pub fn has_offset(&self) -> bool {
        self.samples.len > 0
    }

    fn new(name: Box<str>) -> PeerState {
        PeerState {
            named: configured_id(&name).map(Into::into),
            name,
            run: None,
            last_heard: 0,
            last_beat: 0,
            offset: 0,
            samples: Samples::default(),
            reported: None,
            flagged: false,
            joining: false,
            up_since: None,
            silent: false,
            rejected: 0,
            last_reported: None,
            last_restart: None,
        }
    }
}

/// What a heartbeat says besides who sent it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Beat {
    /// The sender's clock when it left.
    pub sent_at: Nanos,
    /// The sender is still learning the counts.
    pub joining: bool,
    /// This locker's clock minus the sender's, as the sender sees it.
    pub reported: Option<i64>,
    /// How long the sender's run has heard its peers without a pause of
    /// its own (since it started, or resumed from a pause), when it says.
    pub up: Option<Nanos>,
}

/// The offsets of a peer's last `SAMPLES` heartbeats.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Samples {
    last: [i64; SAMPLES],
    len: usize,
    next: usize,
}

/// How many heartbeats' offsets settle a peer's: 400 ms of them.
const SAMPLES: usize = 4;

/// A heartbeat this much ahead of a peer's settled offset means it moved
/// its clock.
const JUMP: i64 = 4 * NANOS_PER_MS as i64;

impl Samples {
    fn push(&mut self, offset: i64) {
        // A delay only makes a peer look behind; one that looks well ahead
        // of all its recent heartbeats moved its clock: start again.
        if self.len > 0 && offset > self.largest().saturating_add(JUMP) {
            self.len = 0;
            self.next = 0;
        }
        self.last[self.next] = offset;
        self.next = (self.next + 1) % SAMPLES;
        self.len = (self.len + 1).min(SAMPLES);
    }

    fn largest(&self) -> i64 {
        self.last[..self.len].iter().copied().max().unwrap_or(0)
    }

    /// How much later than the least delayed of them the others arrived.
    fn spread(&self) -> Nanos {
        let smallest = self.last[..self.len].iter().copied().min().unwrap_or(0);
        self.largest().abs_diff(smallest)
    }

    fn shift(&mut self, by: i64) {
        for o in &mut self.last[..self.len] {
            *o = o.saturating_sub(by);
        }
    }
}

#[cfg(test)]
mod tests;
