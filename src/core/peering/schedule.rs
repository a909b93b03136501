//! The peering schedule: when to send heartbeats, repairs and snapshots,
//! when a starting locker has learned enough to grant, and how many lockers
//! are live.
//!
//! Like quinn-proto's connection, this is a state machine without I/O: the
//! caller feeds it what arrived (`on_heartbeat`, `on_snapshot_done`) with
//! `now`, pulls what to send (`poll_transmit`), asks when to wake
//! (`next_deadline`) and drains what to log (`poll_event`). It does not
//! encode messages or hold counts; `wire` and `Locker` do.

use std::collections::{HashMap, HashSet, VecDeque};

use super::clock::{median_offset, GroupClock, FOLLOW_BEYOND};
use super::members::{MemberAgreement as Members, MemberSet};
use super::nodes::{Beat, NodeKey, Nodes, PeerEvent, PeerIx, PeerState};
use super::tenure::{Said, Tenure, MOVE_BEYOND};
use crate::core::limit::LimitId;
use crate::core::locker::Locker;
use crate::core::share::Share;
use crate::core::share::{Holding, PeerView};
use crate::core::time::{Nanos, NANOS_PER_MS};

/// Heartbeats while joining come this often, so that a sync request reaches
/// peers soon after their subscriptions reconnect.
pub const JOINING_HEARTBEAT: Nanos = 10 * NANOS_PER_MS;

/// Snapshots are sent at most this often, however many peers ask.
pub const SNAPSHOT_GAP: Nanos = 20 * NANOS_PER_MS;

/// Each peer may ask for this many snapshots in a row (a joining peer asks
/// until its subscription is up, usually within a few)...
pub const SNAPSHOT_BURST: u64 = 8;

/// ...and for one more per this much time after that, so a peer that keeps
/// asking (or a rogue at a peer's address) cannot make this locker spend
/// its time on snapshots.
pub const SNAPSHOT_REFILL: Nanos = 500 * NANOS_PER_MS;

/// The most counts one repair carries (a repair goes with every
/// heartbeat: the own counts of keys touched since they were last
/// republished, resumed where the last repair stopped; see
/// `core::share::repair`). A locker with a few thousand busy keys
/// republishes each at every heartbeat, one with a hundred thousand each
/// about every two and a half seconds; neither it nor its peers ever spend
/// a long turn on a repair, and peers merge at most this many repaired
/// counts a heartbeat whatever the number of keys. What moves permits
/// (wants, gifts) does not wait for a repair: it leaves within the loop
/// turn. Repairs carry it again (in case it was lost) and let peers see
/// the counts.
pub const REPAIR_BUDGET: usize = 4096;

/// How a locker takes part in peering.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeeringSettings {
    /// This run of this locker.
    pub me: NodeKey,
    /// The configured peers (their endpoints), in the order the caller
    /// numbers them; a starting locker grants once each has sent it its
    /// counts.
    pub peers: Vec<Box<str>>,
    /// How long a starting locker waits for its peers' counts at most;
    /// after that it serves with what it has (alone, if no peer answered).
    pub grace: Nanos,
    /// How often to send a heartbeat once joined.
    pub heartbeat: Nanos,
    /// A peer not heard for longer than this is no longer live.
    pub live_timeout: Nanos,
    /// A peer whose clock is off by more than this is flagged.
    pub max_skew: Nanos,
}

impl PeeringSettings {
    /// Settings for `me` with the configured `peers`, a `grace` period, and
    /// limits whose shortest slot is `shortest_slot`: heartbeats every
    /// 100 ms, a peer live while heard within 500 ms, and the in-flight
    /// window as the tolerated clock skew (beyond it, turns and slot
    /// boundaries can disagree: see `peering::clock`).
    pub fn new(me: NodeKey, peers: Vec<Box<str>>, grace: Nanos, shortest_slot: Nanos) -> PeeringSettings {
        PeeringSettings {
            me,
            peers,
            grace,
            heartbeat: 100 * NANOS_PER_MS,
            live_timeout: 500 * NANOS_PER_MS,
            max_skew: Share::window_for(shortest_slot),
        }
    }
}

/// Something to publish.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outgoing {
    /// "I am alive, my clock reads now", and whether this locker is still
    /// joining (which asks peers for a snapshot).
    Heartbeat { joining: bool },
    /// The own counts, wants and gifts of the keys touched since the last
    /// repair, republished (see `REPAIR_BUDGET`).
    Repair,
    /// Every count known for the current slots, own and peers'.
    Snapshot,
}

/// Whether a peer defines a limit as this locker does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LimitAgreement {
    Unknown,
    Same,
    Differs,
}

/// What this locker keeps per configured peer besides the node table.
#[derive(Debug, Clone)]
struct PeerSync {
    synced: bool,
    /// When the peer's snapshot allowance is next full again (GCRA).
    snapshot_tat: Nanos,
    /// Per limit, whether the peer's definition matches; indexed by limit.
    limits: Vec<LimitAgreement>,
}

/// The peering state of one locker.
#[derive(Debug)]
pub struct Peering {
    settings: PeeringSettings,
    nodes: Nodes,
    sync: Vec<PeerSync>,
    started: Nanos,
    joining: bool,
    next_heartbeat: Nanos,
    repair_due: bool,
    snapshot_wanted: bool,
    next_snapshot: Nanos,
    retention: Nanos,
    events: VecDeque<PeerEvent>,
    /// This locker's clock, moved to the group's.
    clock: GroupClock,
    /// This run owns initial permits of the slots that begin from this
    /// instant on (see `Share::owns_from`): every slot, unless an earlier
    /// run may have granted in the one it joined in.
    owns_from: Nanos,
    /// Whether its state file kept what every earlier run granted and gave
    /// (see `Share::resumes`), as found when it first joined.
    resumes: bool,
    /// Its state file may have lost what earlier runs last wrote (see
    /// `distrust_earlier_runs`).
    distrusts_file: bool,
    /// Which members' shares this locker grants from, and its lease.
    tenure: Tenure,
    /// Each limit's name and digest when the agreements were last fitted
    /// to the table, by limit id (see `fit_to`).
    fitted: Vec<(Box<str>, u64)>,
    /// Limits peers sent terms for that this locker did not create (see
    /// `refuse_terms`): each is refused once.
    untaught: HashSet<Box<str>>,
    /// Whether every peer states the member set this locker has.
    members: Members,
}

impl Peering {
    /// A locker starting at `now`. With peers configured it joins first:
    /// it grants nothing until they sent their counts or the grace ran out.
    pub fn new(settings: PeeringSettings, now: Nanos) -> Peering {
        let nodes = Nodes::new(settings.me.clone(), &settings.peers, settings.max_skew);
        let sync = PeerSync { synced: false, snapshot_tat: now, limits: Vec::new() };
        let settings_peers_empty = settings.peers.is_empty();
        let settings_peers_len = settings.peers.len();
        let tenure = Tenure::new(1 + settings.peers.len(), settings.peers.len());
        Peering {
            joining: !settings.peers.is_empty(),
            sync: vec![sync; settings.peers.len()],
            retention: super::nodes::DEFAULT_RETENTION,
            settings,
            nodes,
            started: now,
            next_heartbeat: now,
            repair_due: false,
            snapshot_wanted: false,
            next_snapshot: now,
            events: VecDeque::new(),
            clock: GroupClock::default(),
            owns_from: if settings_peers_empty { 0 } else { Nanos::MAX },
            resumes: false,
            distrusts_file: false,
            tenure,
            fitted: Vec::new(),
            untaught: HashSet::new(),
            members: Members::new(settings_peers_len),
        }
    }

    /// Fits the peering to the locker's limits: how many there are, and how
    /// long a run no longer live is kept (the longest memory of any limit,
    /// see `Rule::memory`: a run forgotten sooner would let a later run of
    /// the same locker take its share as new while what the earlier run
    /// granted or gave still counts). Call again whenever the table's
    /// limits change (a reload, a limit created from terms or dropped
    /// idle): what each peer said of a limit stays with the limit while its
    /// definition is the same, and is unknown again until the peer's next
    /// heartbeat otherwise.
    pub fn fit_to(&mut self, locker: &Locker) {
        let fitted: Vec<(Box<str>, u64)> =
            locker.figures().stats().map(|(l, _)| (l.name().into(), l.digest())).collect();
        let was: HashMap<(&str, u64), usize> =
            self.fitted.iter().enumerate().map(|(i, (name, digest))| ((&**name, *digest), i)).collect();
        for t in &mut self.sync {
            let agreed = |(name, digest): &(Box<str>, u64)| was.get(&(&**name, *digest)).map(|&i| t.limits[i]);
            t.limits = fitted.iter().map(|l| agreed(l).unwrap_or(LimitAgreement::Unknown)).collect();
        }
        self.fitted = fitted;
        // A run is last named by this locker's clock, which may be behind
        // the run's own by up to the tolerated skew.
        let memory = locker.figures().longest_memory().saturating_add(self.settings.max_skew);
        self.retention = self.settings.live_timeout.max(memory);
        self.nodes.set_retention(self.retention);
    }

    /// The node table.
    pub fn nodes(&self) -> &Nodes {
        &self.nodes
    }

    /// The node table, for resolving the nodes named in a message.
    pub fn nodes_mut(&mut self) -> &mut Nodes {
        &mut self.nodes
    }

    /// Whether this locker is still learning the counts.
    pub fn is_joining(&self) -> bool {
        self.joining
    }

    /// Records a heartbeat from `peer`, sent by `from`. A joining peer gets
    /// a snapshot, within its allowance. Returns false when the sender is
    /// refused (see `on_message`).
    pub fn on_heartbeat(&mut self, now: Nanos, peer: PeerIx, from: &NodeKey, beat: Beat) -> bool {
        let joining = beat.joining;
        let mut events = self.nodes.heartbeat(now, peer, from, beat);
        let heard = self.nodes.peers().nth(peer).is_some_and(|(_, s)| s.run.as_ref() == Some(from));
        if heard {
            self.recenter(now, &mut events);
        }
        self.events.extend(events);
        if heard && self.joining {
            self.update(now);
        }
        if heard && joining && self.snapshot_allowed(now, peer) {
            self.snapshot_wanted = true;
        }
        heard
    }

    /// Takes in what `peer`'s heartbeat, received at `now`, said of
    /// tenure (see `peering::tenure`): call after `on_heartbeat` heard it.
    pub fn on_tenure(&mut self, now: Nanos, peer: PeerIx, said: Said<'_>) {
        let events = self.tenure.on_beat(now, peer, said, &self.nodes);
        self.events.extend(events);
    }

    /// The heartbeats this locker's next heartbeat echoes: each peer run's
    /// id and the latest of its heartbeat times heard, for those tenure
    /// vouches for at `now` (see `Tenure::vouch`).
    pub fn echoes(&mut self, now: Nanos) -> Vec<(Box<str>, Nanos)> {
        let heard = self.nodes.peers().filter(|(_, s)| s.last_beat > 0);
        let runs = heard.filter_map(|(ix, s)| Some((ix, s.run.as_ref()?, s.last_beat)));
        let tenure = &mut self.tenure;
        let nodes = &self.nodes;
        runs.filter(|&(ix, run, at)| tenure.vouch(now, ix, run, at, nodes))
            .map(|(_, run, at)| (run.id.clone(), at))
            .collect()
    }

    /// Takes in the member set `peer`'s run `from` stated at `now` (`None`
    /// when it states none: an older locker), unless `from` is not the
    /// peer's live run. A set that differs from this locker's stops every
    /// grant from shares (see `peering::members`).
    /// `settling` is what it said of its own set (see `set_peers`): while
    /// a peer's settles, this locker grants from no share either.
    pub fn on_members(&mut self, now: Nanos, peer: PeerIx, from: &NodeKey, set: Option<MemberSet>, settling: bool) {
        let live = self.nodes.peers().nth(peer).is_some_and(|(_, s)| s.run.as_ref() == Some(from));
        if live {
            self.members.on_stated(now, peer, from, (set, settling), &self.nodes, &mut self.events);
        }
    }

    /// Takes `peers` as the configured peers from `now` on (a reload that
    /// changed them; the caller subscribes and unsubscribes to match).
    /// Returns false, changing nothing, when they are the same list.
    ///
    /// What a kept peer's state was (its runs, clock, what it said of
    /// limits and tenure) stays with it; a new peer starts unheard; the
    /// runs of a removed one stay until forgotten, their counts with
    /// them. Shares follow the new set only from the slots (windows,
    /// periods) that begin once every member agrees on it: see
    /// `peering::members` for why that is the safe choice.
    pub fn set_peers(&mut self, now: Nanos, peers: Vec<Box<str>>) -> bool {
        if peers == self.settings.peers {
            return false;
        }
        let was: Vec<Option<PeerIx>> =
            peers.iter().map(|name| self.settings.peers.iter().position(|old| old == name)).collect();
        self.nodes.set_peers(&peers, &was);
        let mut old: Vec<Option<PeerSync>> = std::mem::take(&mut self.sync).into_iter().map(Some).collect();
        let fresh =
            PeerSync { synced: false, snapshot_tat: now, limits: vec![LimitAgreement::Unknown; self.fitted.len()] };
        self.sync =
            was.iter().map(|w| w.and_then(|i| old.get_mut(i)?.take()).unwrap_or_else(|| fresh.clone())).collect();
        self.tenure.set_members(now, 1 + peers.len(), &was);
        self.settings.peers = peers;
        self.members.changed(now, &was, &self.nodes, &mut self.events);
        true
    }

    /// Whether the peers state this locker's member set.
    pub fn members(&self) -> &Members {
        &self.members
    }

    /// Tenure: whom this locker echoes, whom it declared dead, whose
    /// shares it holds.
    pub fn tenure(&self) -> &Tenure {
        &self.tenure
    }

    /// Moves this locker's clock to the middle of the group's (see
    /// `peering::clock`) once every configured peer's clock has been
    /// measured both ways, or after joining with those that are live:
    /// before that, the median of the first peers heard could be a wrong
    /// clock's, and a one-way measure is off by the transit time.
    fn recenter(&mut self, now: Nanos, events: &mut Vec<PeerEvent>) {
        if self.joining && !self.nodes.all_measured() {
            return;
        }
        // Follow only a skew the round trips leave no doubt of (a busy host
        // delaying one direction more looks like one), and then by the
        // best estimate, halfway between the two views.
        let sure = median_offset(self.nodes.live_offsets(PeerState::sure_skew));
        if sure.unsigned_abs() <= FOLLOW_BEYOND {
            return;
        }
        let by = median_offset(self.nodes.live_offsets(PeerState::skew));
        self.clock.follow(by);
        let still = !self.joining && by.unsigned_abs() > MOVE_BEYOND;
        if still {
            // `now` is a reading from before the move; after a move back
            // the group time holds still where it was.
            self.tenure.clock_moved(now.saturating_add_signed(by).max(self.clock.latest()));
        }
        self.nodes.shift_offsets(by);
        self.nodes.judge_skew(events);
        let ms = |ns: i64| ns / NANOS_PER_MS as i64;
        events.push(PeerEvent::ClockFollowed { by_ms: ms(by), correction_ms: ms(self.clock.correction()), still });
    }

    /// This locker's clock as moved to the group's.
    pub fn clock(&self) -> &GroupClock {
        &self.clock
    }

    /// The group time for `raw`, a reading of this locker's clock.
    pub fn group_now(&mut self, raw: Nanos) -> Nanos {
        self.clock.now(raw)
    }

    /// Measures `peer`'s clock by a snapshot part it sent at `sent_at`,
    /// saying how it sees this locker's (`reported`): a joining locker hears
    /// a snapshot before the peer's next heartbeat.
    pub fn on_clock(&mut self, now: Nanos, peer: PeerIx, sent_at: Nanos, reported: Option<i64>) {
        let mut events = Vec::new();
        self.nodes.measure(now, peer, sent_at, reported, &mut events);
        self.recenter(now, &mut events);
        self.events.extend(events);
    }

    /// Records that a message from `peer` was sent by `from`, its live run
    /// from now on. Returns false when the sender is refused: this locker's
    /// own node, or a peer that is not configured.
    pub fn on_message(&mut self, now: Nanos, peer: PeerIx, from: &NodeKey) -> bool {
        let Some((_, event)) = self.nodes.sender(now, peer, from) else { return false };
        self.events.extend(event);
        true
    }

    /// Takes one snapshot out of `peer`'s allowance, if there is one left.
    fn snapshot_allowed(&mut self, now: Nanos, peer: PeerIx) -> bool {
        let tat = &mut self.sync[peer].snapshot_tat;
        let start = (*tat).max(now);
        if start - now > (SNAPSHOT_BURST - 1) * SNAPSHOT_REFILL {
            return false;
        }
        *tat = start + SNAPSHOT_REFILL;
        true
    }

    /// Records that `peer`, sent by `from`, finished sending its snapshot.
    pub fn on_snapshot_done(&mut self, now: Nanos, peer: PeerIx, from: &NodeKey) {
        let live = self.nodes.peers().nth(peer).is_some_and(|(_, s)| s.run.as_ref() == Some(from));
        if self.joining && live {
            self.sync[peer].synced = true;
        }
        self.update(now);
    }

    /// Records how `peer` defines limit `id`: the same as this locker, or
    /// not. Counts for a limit are merged only from peers that define it
    /// the same.
    pub fn on_limit(&mut self, peer: PeerIx, id: LimitId, same: bool, name: impl FnOnce() -> String) {
        let Some(slot) = self.sync.get_mut(peer).and_then(|t| t.limits.get_mut(id.0)) else { return };
        let now = if same { LimitAgreement::Same } else { LimitAgreement::Differs };
        if std::mem::replace(slot, now) != LimitAgreement::Differs && now == LimitAgreement::Differs {
            let peer = self.settings.peers[peer].to_string();
            self.events.push_back(PeerEvent::LimitMismatch { peer, limit: name() });
        }
    }

    /// Whether counts from `peer` for limit `id` are merged: only once the
    /// peer said it defines the limit as this locker does.
    pub fn accepts(&self, peer: PeerIx, id: LimitId) -> bool {
        self.sync.get(peer).and_then(|t| t.limits.get(id.0)) == Some(&LimitAgreement::Same)
    }

    /// The limits `peer` defines differently.
    pub fn mismatched(&self, peer: PeerIx) -> impl Iterator<Item = LimitId> + '_ {
        let limits = self.sync.get(peer).map_or(&[][..], |t| &t.limits[..]);
        limits.iter().enumerate().filter(|(_, a)| **a == LimitAgreement::Differs).map(|(i, _)| LimitId(i))
    }

    /// Refuses, once per limit name, the terms `peer` sent for a limit this
    /// locker did not create (`why`): counted and logged as any refusal.
    /// Later terms of that name are dropped without a word.
    pub fn refuse_terms(&mut self, now: Nanos, peer: PeerIx, name: &str, why: impl FnOnce() -> String) {
        // A peer may name any number of limits: past this many, refusals
        // are no longer told apart by name (still counted, and logged at
        // most once a second).
        const MOST_NAMES: usize = 4096;
        if self.untaught.contains(name) {
            return;
        }
        if self.untaught.len() < MOST_NAMES {
            self.untaught.insert(name.into());
        }
        self.refuse(now, peer, || format!("terms of limit {name:?} not taken: {}", why()));
    }

    /// Counts a refusal of something `peer` sent, for stats and the log.
    pub fn refuse(&mut self, now: Nanos, peer: PeerIx, what: impl FnOnce() -> String) {
        if let Some(event) = self.nodes.refuse(now, peer, what) {
            self.events.push_back(event);
        }
    }

    /// Tells the peering, before it joins, that the state file this run
    /// restored may have lost what its earlier runs wrote last (it was
    /// written before the host rebooted, and its tail may never have
    /// reached the disk): this run resumes nothing of it and owns none of
    /// the slots (windows, periods) under way when it joins, as a run that
    /// cannot know what it gave. Gifts it may still use.
    pub fn distrust_earlier_runs(&mut self) {
        self.distrusts_file = true;
    }

    /// Tells the peering that this locker's own loop did not run for
    /// `paused` until `now`. Longer than the peer-dead time, its view is
    /// stale (peers counted it out and granted meanwhile) and what queued up
    /// in the sockets is old: it joins again as if restarted, keeping its
    /// own counts, and does not judge clock skew on the backlog.
    pub fn on_pause(&mut self, now: Nanos, paused: Nanos) {
        if paused <= self.settings.live_timeout || self.settings.peers.is_empty() {
            return;
        }
        self.joining = true;
        self.started = now;
        self.next_heartbeat = now;
        for t in &mut self.sync {
            t.synced = false;
        }
        self.nodes.hold_skew_until(now.saturating_add(self.settings.live_timeout));
        self.events.push_back(PeerEvent::Rejoining { paused_ms: paused / NANOS_PER_MS });
    }

    /// Ends joining once every configured peer synced or the grace ran out.
    fn update(&mut self, now: Nanos) {
        let synced = self.sync.iter().filter(|t| t.synced).count();
        // Every peer synced, and its clock measured both ways, so that this
        // locker serves on the group's clock from its first grant.
        let all = synced >= self.sync.len() && self.nodes.all_measured();
        let done = all || now >= self.started.saturating_add(self.settings.grace);
        if self.joining && done {
            self.joining = false;
            if self.owns_from == Nanos::MAX {
                // Its state file kept every grant and gift its earlier runs
                // made: then it knows exactly what is left of the slot.
                self.resumes = all && self.nodes.knows_every_earlier_run() && !self.distrusts_file;
            }
            let from = self.owns_from_joining(now, all);
            // A run that resumed its earlier runs owns what they left (see
            // `Share::resumes`), whatever `from` says of the rest.
            let not_owning =
                (from == now && self.owns_from == Nanos::MAX && !self.resumes).then(|| self.why_not_owning(all));
            self.owns_from = self.owns_from.min(from);
            self.tenure.joined(now, all);
            self.events.push_back(PeerEvent::Ready { synced });
            if let Some(why) = not_owning {
                self.events.push_back(PeerEvent::OwnsNextPeriods { why });
            }
        }
    }

    /// From when a run that finishes joining at `now` (with `all` its
    /// peers answered) owns its share of the slots (windows, periods):
    /// those that begin at or after it. An earlier run of this locker may
    /// have granted in the one under way, and nothing says how much (its
    /// last counts may be lost), so the run owns that one only if it can
    /// tell that no earlier run did:
    ///
    /// - its state file says so: a new file names no earlier run (a first
    ///   run), and a file that kept every earlier run resumes them;
    /// - or no peer knew of an earlier run, and one of them has heard its
    ///   peers since before the slot began (`Nodes::heard_since`, and the
    ///   live timeout more for it to hear a run that was up then): an
    ///   earlier run that granted in the slot would be known to it.
    ///
    /// A peer that knew of an earlier run, not every peer answered, or a
    /// file from before a reboot: none of the slot it joins in. So a group
    /// restarted together without `--state` (no peer has been up longer
    /// than the restart) owns none of the slots under way, and never
    /// grants one twice; a brand-new group without a state file serves
    /// nothing of its first slot.
    fn owns_from_joining(&self, now: Nanos, all: bool) -> Nanos {
        if !all || self.nodes.knows_earlier_run() || self.distrusts_file {
            return now;
        }
        if self.resumes || self.nodes.first_run() {
            return 0;
        }
        let heard = self.nodes.heard_since().map(|at| at.saturating_add(self.settings.live_timeout));
        heard.map_or(now, |at| at.min(now))
    }

    /// Why a run that joins at `now` owns none of the periods under way
    /// (`owns_from_joining` said `now`), for the log: a brand-new group
    /// without `--state` must learn why it answers sorry.
    fn why_not_owning(&self, all: bool) -> &'static str {
        if !all {
            "not every peer answered within the grace period"
        } else if self.nodes.knows_earlier_run() {
            "a peer knew an earlier run of this locker"
        } else if self.distrusts_file {
            "the state file was written before the host rebooted"
        } else {
            "no state file says this is a first run, and no peer was up since before the period began (--state avoids this)"
        }
    }

    /// How long this run has heard its peers without a pause of its own at
    /// `now` (since it started, or resumed from a pause), for its
    /// heartbeats (`Beat::up`): a peer that joins learns from it whether
    /// this run would know of its earlier runs (see `owns_from_joining`).
    pub fn up(&self, now: Nanos) -> Nanos {
        now.saturating_sub(self.started)
    }

    /// What the peers mean for asks at `now`. Costs one step per configured
    /// peer, whatever arrived from them.
    pub fn view(&mut self, now: Nanos) -> PeerView {
        if self.joining {
            self.update(now);
        }
        let live = 1 + self.nodes.live_peers(now, self.settings.live_timeout) as u32;
        let hold_until = self.joining.then(|| self.started.saturating_add(self.settings.grace));
        let late = self.nodes.lateness(now, self.settings.live_timeout);
        let members = 1 + self.settings.peers.len() as u32;
        let member = self.nodes.member().map(|m| m as u32);
        let mut holding = self.tenure.holding(now, &self.nodes);
        let (mut owns_from, mut resumes) = (self.owns_from, self.resumes);
        // Sets that differ or settle, or did in this run: see
        // `peering::members`. Inherited shares too, of the slots begun
        // under the old set, count only from the agreement on.
        if self.members.refuses() {
            holding = Holding::NONE;
        }
        let agreed_at = self.members.agreed_at();
        if agreed_at > 0 && owns_from != Nanos::MAX {
            (owns_from, resumes) = (owns_from.max(agreed_at), false);
        }
        if agreed_at > 0 {
            holding.held_from = holding.held_from.max(agreed_at);
        }
        // A share a peer held and gave back: only the slots after a lease
        // regained since (see `peering::tenure`).
        let own_from = self.tenure.own_from(now, &self.nodes);
        if own_from > 0 && owns_from != Nanos::MAX {
            (owns_from, resumes) = (owns_from.max(own_from), false);
        }
        PeerView { live, hold_until, late, members, member, owns_from, resumes, holding }
    }

    /// The next thing to publish at `now`, if any. Call until `None`.
    pub fn poll_transmit(&mut self, now: Nanos) -> Option<Outgoing> {
        self.update(now);
        if now >= self.next_heartbeat {
            // Once per heartbeat is often enough to notice a silent peer.
            self.nodes.sweep_silent(now, self.settings.live_timeout, &mut self.events);
            self.tenure.tick(now, &self.nodes, &mut self.events);
            let every = if self.joining { JOINING_HEARTBEAT } else { self.settings.heartbeat };
            self.next_heartbeat = now.saturating_add(every);
            self.repair_due = true;
            self.nodes.forget(now, self.retention);
            return Some(Outgoing::Heartbeat { joining: self.joining });
        }
        if std::mem::take(&mut self.repair_due) {
            return Some(Outgoing::Repair);
        }
        if self.snapshot_wanted && now >= self.next_snapshot {
            self.snapshot_wanted = false;
            self.next_snapshot = now.saturating_add(SNAPSHOT_GAP);
            return Some(Outgoing::Snapshot);
        }
        None
    }

    /// When `poll_transmit` or the end of joining next has work.
    pub fn next_deadline(&self) -> Nanos {
        let mut at = self.next_heartbeat;
        if self.snapshot_wanted {
            at = at.min(self.next_snapshot);
        }
        if self.joining {
            at = at.min(self.started.saturating_add(self.settings.grace));
        }
        at
    }

    /// The next thing worth logging, if any.
    pub fn poll_event(&mut self) -> Option<PeerEvent> {
        self.events.pop_front()
    }

    /// Every configured peer, for stats.
    pub fn peers(&self) -> impl Iterator<Item = (PeerIx, &PeerState)> {
        self.nodes.peers()
    }

    /// The settings in force.
    pub fn settings(&self) -> &PeeringSettings {
        &self.settings
    }
}

#[cfg(test)]
mod tests;
