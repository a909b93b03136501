//! The peering schedule: when to send heartbeats, repairs and snapshots,
//! when a starting locker has learned enough to grant, and how many lockers
//! are live.
//!
//! Like quinn-proto's connection, this is a state machine without I/O: the
//! caller feeds it what arrived (`on_heartbeat`, `on_snapshot_done`) with
//! `now`, pulls what to send (`poll_transmit`), asks when to wake
//! (`next_deadline`) and drains what to log (`poll_event`). It does not
//! encode messages or hold counts; `wire` and `Locker` do.

use std::collections::{BTreeSet, VecDeque};

use super::nodes::{NodeKey, Nodes, PeerEvent, PeerState};
use super::view::PeerView;
use crate::core::time::{Nanos, NANOS_PER_MS};

/// Heartbeats while joining come this often, so that a sync request reaches
/// peers soon after their subscriptions reconnect.
pub const JOINING_HEARTBEAT: Nanos = 10 * NANOS_PER_MS;

/// Snapshots are sent at most this often, however many peers ask.
pub const SNAPSHOT_GAP: Nanos = 20 * NANOS_PER_MS;

/// How a locker takes part in peering.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeeringSettings {
    /// This run of this locker.
    pub me: NodeKey,
    /// How many peers are configured; a starting locker grants once this
    /// many have sent it their counts.
    pub expected_peers: usize,
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
    /// Settings for `me` with `expected_peers` peers, a `grace` period, and
    /// limits whose shortest slot is `shortest_slot`: heartbeats every
    /// 100 ms, a peer live while heard within 500 ms, and a quarter of the
    /// shortest slot as the tolerated clock skew.
    pub fn new(me: NodeKey, expected_peers: usize, grace: Nanos, shortest_slot: Nanos) -> PeeringSettings {
        PeeringSettings {
            me,
            expected_peers,
            grace,
            heartbeat: 100 * NANOS_PER_MS,
            live_timeout: 500 * NANOS_PER_MS,
            max_skew: shortest_slot / 4,
        }
    }
}

/// Something to publish.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outgoing {
    /// "I am alive, my clock reads now", and whether this locker is still
    /// joining (which asks peers for a snapshot).
    Heartbeat { joining: bool },
    /// Own counts granted since the last repair, republished.
    Repair,
    /// Every count known for the current slots, own and peers'.
    Snapshot,
}

/// The peering state of one locker.
#[derive(Debug)]
pub struct Peering {
    settings: PeeringSettings,
    nodes: Nodes,
    started: Nanos,
    joining: bool,
    synced: BTreeSet<Box<str>>,
    next_heartbeat: Nanos,
    repair_due: bool,
    snapshot_wanted: bool,
    next_snapshot: Nanos,
    events: VecDeque<PeerEvent>,
}

impl Peering {
    /// A locker starting at `now`. With peers configured it joins first:
    /// it grants nothing until they sent their counts or the grace ran out.
    pub fn new(settings: PeeringSettings, now: Nanos) -> Peering {
        let nodes = Nodes::new(settings.me.clone(), settings.max_skew);
        Peering {
            joining: settings.expected_peers > 0,
            settings,
            nodes,
            started: now,
            synced: BTreeSet::new(),
            next_heartbeat: now,
            repair_due: false,
            snapshot_wanted: false,
            next_snapshot: now,
            events: VecDeque::new(),
        }
    }

    /// The node table.
    pub fn nodes(&self) -> &Nodes {
        &self.nodes
    }

    /// The node table, for interning the nodes named in a message.
    pub fn nodes_mut(&mut self) -> &mut Nodes {
        &mut self.nodes
    }

    /// Whether this locker is still learning the counts.
    pub fn is_joining(&self) -> bool {
        self.joining
    }

    /// Records a heartbeat from `from`. A joining peer gets a snapshot.
    pub fn on_heartbeat(&mut self, now: Nanos, from: &NodeKey, sent_at: Nanos, joining: bool) {
        if from == self.nodes.me() {
            return; // our own publication, when subscribed to ourselves
        }
        if let Some(event) = self.nodes.heartbeat(now, from, sent_at, joining) {
            self.events.push_back(event);
        }
        self.snapshot_wanted |= joining;
    }

    /// Records that `from` finished sending its snapshot.
    pub fn on_snapshot_done(&mut self, now: Nanos, from: &NodeKey) {
        if self.joining && from != self.nodes.me() {
            self.synced.insert(from.id.clone());
        }
        self.update(now);
    }

    /// Ends joining once every configured peer synced or the grace ran out.
    fn update(&mut self, now: Nanos) {
        let done = self.synced.len() >= self.settings.expected_peers
            || now >= self.started.saturating_add(self.settings.grace);
        if self.joining && done {
            self.joining = false;
            self.events.push_back(PeerEvent::Ready { synced: self.synced.len() });
        }
    }

    /// What the peers mean for asks at `now`.
    pub fn view(&mut self, now: Nanos) -> PeerView {
        self.update(now);
        let live = 1 + self.nodes.live_peers(now, self.settings.live_timeout) as u32;
        let hold_until = self.joining.then(|| self.started.saturating_add(self.settings.grace));
        PeerView { live, hold_until }
    }

    /// The next thing to publish at `now`, if any. Call until `None`.
    pub fn poll_transmit(&mut self, now: Nanos) -> Option<Outgoing> {
        self.update(now);
        if now >= self.next_heartbeat {
            // Once per heartbeat is often enough to notice a silent peer.
            self.nodes.sweep_silent(now, self.settings.live_timeout, &mut self.events);
            let every = if self.joining { JOINING_HEARTBEAT } else { self.settings.heartbeat };
            self.next_heartbeat = now.saturating_add(every);
            self.repair_due = true;
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

    /// Every peer heard of, for stats.
    pub fn peers(&self) -> impl Iterator<Item = (&str, &PeerState)> {
        self.nodes.peers()
    }

    /// The settings in force.
    pub fn settings(&self) -> &PeeringSettings {
        &self.settings
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Nanos = NANOS_PER_MS;
    const T0: Nanos = 1_000_000 * MS;

    fn node(id: &str, incarnation: u64) -> NodeKey {
        NodeKey { id: id.into(), incarnation }
    }

    fn peering(expected: usize) -> Peering {
        Peering::new(PeeringSettings::new(node("a", T0), expected, 1000 * MS, 1000 * MS), T0)
    }

    fn drain(p: &mut Peering, now: Nanos) -> Vec<Outgoing> {
        std::iter::from_fn(|| p.poll_transmit(now)).take(10).collect()
    }

    #[test]
    fn a_starting_locker_holds_until_every_peer_synced() {
        let mut p = peering(2);
        assert_eq!(p.view(T0).hold_until, Some(T0 + 1000 * MS));
        assert_eq!(drain(&mut p, T0), [Outgoing::Heartbeat { joining: true }, Outgoing::Repair]);
        p.on_snapshot_done(T0 + 5 * MS, &node("b", 1));
        assert!(p.is_joining());
        p.on_snapshot_done(T0 + 6 * MS, &node("b", 1));
        assert!(p.is_joining(), "the same peer twice is still one peer");
        p.on_snapshot_done(T0 + 7 * MS, &node("c", 1));
        assert!(!p.is_joining());
        assert_eq!(p.view(T0 + 7 * MS).hold_until, None);
        assert_eq!(p.poll_event(), Some(PeerEvent::Ready { synced: 2 }));
    }

    #[test]
    fn a_locker_whose_peers_are_gone_serves_alone_after_the_grace() {
        let mut p = peering(2);
        assert_eq!(p.next_deadline(), T0);
        drain(&mut p, T0);
        assert_eq!(p.next_deadline(), T0 + JOINING_HEARTBEAT);
        assert!(p.view(T0 + 999 * MS).hold_until.is_some());
        let view = p.view(T0 + 1000 * MS);
        assert_eq!(view, PeerView { live: 1, hold_until: None });
        assert_eq!(p.poll_event(), Some(PeerEvent::Ready { synced: 0 }));
    }

    #[test]
    fn without_peers_there_is_nothing_to_wait_for() {
        let mut p = peering(0);
        assert_eq!(p.view(T0).hold_until, None);
    }

    #[test]
    fn a_joining_peer_gets_a_snapshot_at_most_every_gap() {
        let mut p = peering(0);
        drain(&mut p, T0);
        p.on_heartbeat(T0 + MS, &node("b", 1), T0 + MS, true);
        assert_eq!(drain(&mut p, T0 + MS), [Outgoing::Snapshot]);
        p.on_heartbeat(T0 + 2 * MS, &node("b", 1), T0 + 2 * MS, true);
        assert_eq!(drain(&mut p, T0 + 2 * MS), []);
        assert_eq!(p.next_deadline(), T0 + MS + SNAPSHOT_GAP);
        assert_eq!(drain(&mut p, T0 + MS + SNAPSHOT_GAP), [Outgoing::Snapshot]);
    }

    #[test]
    fn live_counts_peers_heard_recently_and_ignores_itself() {
        let mut p = peering(0);
        p.on_heartbeat(T0, &node("a", T0), T0, false);
        p.on_heartbeat(T0, &node("b", 1), T0, false);
        p.on_heartbeat(T0 + 400 * MS, &node("c", 1), T0 + 400 * MS, false);
        assert_eq!(p.view(T0 + 450 * MS).live, 3);
        assert_eq!(p.view(T0 + 600 * MS).live, 2, "b has gone quiet");
        assert_eq!(p.peers().count(), 2);
    }

    #[test]
    fn heartbeats_slow_down_once_joined() {
        let mut p = peering(1);
        drain(&mut p, T0);
        p.on_snapshot_done(T0 + MS, &node("b", 1));
        assert_eq!(drain(&mut p, T0 + JOINING_HEARTBEAT), [Outgoing::Heartbeat { joining: false }, Outgoing::Repair]);
        assert_eq!(p.next_deadline(), T0 + JOINING_HEARTBEAT + 100 * MS);
    }
}
