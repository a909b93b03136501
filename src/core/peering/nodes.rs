//! The node table: every locker process this one has heard of, and what it
//! knows about each peer's liveness and clock.
//!
//! A node is one run of one locker: its configured id plus an incarnation
//! (the instant that run started). Counts are kept per node, so a locker
//! that restarts under the same id starts a new node and its earlier run's
//! count keeps counting until the slot ends. Liveness and clock offsets are
//! kept per id. This module is pure: it takes `now` and never logs; it
//! reports what changed so the caller can.

use std::collections::{BTreeMap, HashMap, VecDeque};

use super::share::NodeIx;
use crate::core::time::Nanos;

/// One run of one locker.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NodeKey {
    /// The locker's configured (or generated) id.
    pub id: Box<str>,
    /// When this run started, in nanoseconds since the Unix epoch.
    pub incarnation: u64,
}

/// What this locker knows of one peer id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerState {
    /// The peer's latest run.
    pub incarnation: u64,
    /// When a heartbeat from it last arrived, by this locker's clock.
    pub last_heard: Nanos,
    /// The peer's clock minus this locker's, in nanoseconds, as of its last
    /// heartbeat (it includes the transit time, microseconds on a LAN).
    pub offset: i64,
    /// Whether the offset is beyond the tolerated skew.
    pub flagged: bool,
    /// Whether the peer said it is still learning the counts.
    pub joining: bool,
    /// Whether the peer went unheard past the live timeout (and was
    /// reported silent); cleared by its next heartbeat.
    pub silent: bool,
}

/// Something about a peer worth logging.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PeerEvent {
    /// A peer id was heard for the first time.
    Joined { id: String },
    /// A peer id was heard with a new incarnation: it restarted.
    Restarted { id: String },
    /// A peer's clock differs from ours by more than the tolerated skew.
    ClockSkew { id: String, offset_ms: i64 },
    /// A flagged peer's clock is back within the tolerated skew.
    ClockSkewCleared { id: String },
    /// A peer was not heard for longer than the live timeout: it no longer
    /// counts as live. `last_heard_ms` ago it was heard last.
    Silent { id: String, last_heard_ms: u64 },
    /// A silent peer was heard again, the same run, after `silent_ms`.
    Back { id: String, silent_ms: u64 },
    /// This locker finished learning the counts (from `synced` peers; 0
    /// means the grace period ran out and it serves alone).
    Ready { synced: usize },
}

/// Every node this locker has heard of; index 0 is this locker itself.
#[derive(Debug)]
pub struct Nodes {
    keys: Vec<NodeKey>,
    index: HashMap<NodeKey, NodeIx>,
    peers: BTreeMap<Box<str>, PeerState>,
    max_skew: Nanos,
}

impl Nodes {
    /// A table holding only `me`; a peer whose clock is off by more than
    /// `max_skew` is flagged.
    pub fn new(me: NodeKey, max_skew: Nanos) -> Nodes {
        let mut nodes = Nodes { keys: Vec::new(), index: HashMap::new(), peers: BTreeMap::new(), max_skew };
        nodes.intern(&me);
        nodes
    }

    /// This locker's own index.
    pub const ME: NodeIx = 0;

    /// This locker's own node.
    pub fn me(&self) -> &NodeKey {
        &self.keys[Self::ME as usize]
    }

    /// The index for `key`, adding it when new. Indices are never reused, so
    /// a count held under one can never be credited to another node.
    pub fn intern(&mut self, key: &NodeKey) -> NodeIx {
        if let Some(&ix) = self.index.get(key) {
            return ix;
        }
        let ix = self.keys.len() as NodeIx;
        self.keys.push(key.clone());
        self.index.insert(key.clone(), ix);
        ix
    }

    /// The node behind `ix`.
    pub fn key(&self, ix: NodeIx) -> &NodeKey {
        &self.keys[ix as usize]
    }

    /// Records a heartbeat from `from`, sent at `sent_at` by its clock and
    /// received at `now` by ours. Returns what changed, if anything.
    pub fn heartbeat(&mut self, now: Nanos, from: &NodeKey, sent_at: Nanos, joining: bool) -> Option<PeerEvent> {
        let offset = (sent_at as i128 - now as i128).clamp(i64::MIN as i128, i64::MAX as i128) as i64;
        let flagged = offset.unsigned_abs() > self.max_skew;
        let id = from.id.to_string();
        let offset_ms = offset / 1_000_000;
        let fresh =
            PeerState { incarnation: from.incarnation, last_heard: now, offset, flagged, joining, silent: false };
        let Some(state) = self.peers.get_mut(&from.id) else {
            self.peers.insert(from.id.clone(), fresh);
            return Some(if flagged { PeerEvent::ClockSkew { id, offset_ms } } else { PeerEvent::Joined { id } });
        };
        let old = std::mem::replace(state, fresh);
        match (old.flagged, flagged) {
            (false, true) => Some(PeerEvent::ClockSkew { id, offset_ms }),
            (true, false) => Some(PeerEvent::ClockSkewCleared { id }),
            _ if old.incarnation != from.incarnation => Some(PeerEvent::Restarted { id }),
            _ if old.silent => Some(PeerEvent::Back { id, silent_ms: now.saturating_sub(old.last_heard) / 1_000_000 }),
            _ => None,
        }
    }

    /// Marks every peer not heard within `timeout` of `now` silent, and
    /// reports each one once, when it goes silent.
    pub fn sweep_silent(&mut self, now: Nanos, timeout: Nanos, events: &mut VecDeque<PeerEvent>) {
        for (id, p) in &mut self.peers {
            let quiet = now.saturating_sub(p.last_heard);
            if !p.silent && quiet > timeout {
                p.silent = true;
                events.push_back(PeerEvent::Silent { id: id.to_string(), last_heard_ms: quiet / 1_000_000 });
            }
        }
    }

    /// Peers heard within `timeout` of `now`.
    pub fn live_peers(&self, now: Nanos, timeout: Nanos) -> usize {
        self.peers.values().filter(|p| now.saturating_sub(p.last_heard) <= timeout).count()
    }

    /// Every peer id heard of, in id order.
    pub fn peers(&self) -> impl Iterator<Item = (&str, &PeerState)> {
        self.peers.iter().map(|(id, p)| (&**id, p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Nanos = 1_000_000;

    fn node(id: &str, incarnation: u64) -> NodeKey {
        NodeKey { id: id.into(), incarnation }
    }

    #[test]
    fn interning_keeps_runs_of_one_id_apart() {
        let mut n = Nodes::new(node("a", 1), 250 * MS);
        assert_eq!(n.intern(&node("a", 1)), Nodes::ME);
        let b1 = n.intern(&node("b", 1));
        let b2 = n.intern(&node("b", 2));
        assert_ne!(b1, b2);
        assert_eq!(n.intern(&node("b", 1)), b1);
        assert_eq!(n.key(b2), &node("b", 2));
    }

    #[test]
    fn heartbeats_track_liveness_offset_and_restarts() {
        let mut n = Nodes::new(node("a", 1), 250 * MS);
        let t = 10_000 * MS;
        assert_eq!(n.heartbeat(t, &node("b", 1), t + 3 * MS, false), Some(PeerEvent::Joined { id: "b".into() }));
        assert_eq!(n.heartbeat(t + 100 * MS, &node("b", 1), t + 100 * MS, false), None);
        assert_eq!(
            n.heartbeat(t + 200 * MS, &node("b", 2), t + 200 * MS, true),
            Some(PeerEvent::Restarted { id: "b".into() })
        );
        assert_eq!(n.live_peers(t + 300 * MS, 500 * MS), 1);
        assert_eq!(n.live_peers(t + 800 * MS, 500 * MS), 0);
        let (_, b) = n.peers().next().unwrap();
        assert!(b.joining);
        assert_eq!(b.incarnation, 2);
    }

    #[test]
    fn a_peer_going_silent_and_coming_back_is_reported_once_each_way() {
        let mut n = Nodes::new(node("a", 1), 250 * MS);
        let t = 10_000 * MS;
        let mut events = VecDeque::new();
        n.heartbeat(t, &node("b", 1), t, false);
        n.sweep_silent(t + 500 * MS, 500 * MS, &mut events);
        assert!(events.is_empty(), "heard within the timeout");
        n.sweep_silent(t + 501 * MS, 500 * MS, &mut events);
        n.sweep_silent(t + 900 * MS, 500 * MS, &mut events);
        assert_eq!(events, [PeerEvent::Silent { id: "b".into(), last_heard_ms: 501 }], "once");
        let back = n.heartbeat(t + 2_000 * MS, &node("b", 1), t + 2_000 * MS, false);
        assert_eq!(back, Some(PeerEvent::Back { id: "b".into(), silent_ms: 2_000 }));
        assert_eq!(n.heartbeat(t + 2_100 * MS, &node("b", 1), t + 2_100 * MS, false), None);
        n.sweep_silent(t + 3_000 * MS, 500 * MS, &mut events);
        let restarted = n.heartbeat(t + 3_100 * MS, &node("b", 2), t + 3_100 * MS, false);
        assert_eq!(restarted, Some(PeerEvent::Restarted { id: "b".into() }), "a new run is a restart");
    }

    #[test]
    fn a_skewed_clock_is_flagged_and_cleared() {
        let mut n = Nodes::new(node("a", 1), 250 * MS);
        let t = 10_000 * MS;
        let skewed = n.heartbeat(t, &node("b", 1), t - 300 * MS, false);
        assert_eq!(skewed, Some(PeerEvent::ClockSkew { id: "b".into(), offset_ms: -300 }));
        assert!(n.peers().next().unwrap().1.flagged);
        let cleared = n.heartbeat(t + 100 * MS, &node("b", 1), t + 100 * MS, false);
        assert_eq!(cleared, Some(PeerEvent::ClockSkewCleared { id: "b".into() }));
    }
}
