//! The locker's side of peering: its own grants queued for publishing, the
//! counts peers report merged into the limit they name, and the snapshot
//! and repair lists.
//!
//! Fixed windows and token buckets are shared; semaphores are not, and
//! their counts are never published or merged. How a count is kept is
//! `core::tally`'s (windows) and `core::bucket::ledger`'s (buckets); this
//! module only dispatches and keeps the live-key count in step. It must
//! not reach into a kind's private state, nor encode anything: the bytes
//! are `wire`'s.

use super::nodes::Nodes;
use super::share::NodeIx;
use super::view::PeerView;
use crate::core::ask::{PermitAsk, Verdict};
use crate::core::bucket::Bucket;
use crate::core::locker::{LimitId, Locker};
use crate::core::room::KeyBudget;
use crate::core::rule::Rule;
use crate::core::time::Nanos;
use crate::core::window::{FixedWindow, SlotFit};

/// A cumulative count of one node for one (limit, key, slot): what peers
/// publish to each other.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Count {
    pub limit: LimitId,
    pub key: Option<Box<str>>,
    pub slot: u64,
    pub node: NodeIx,
    pub count: u32,
}

impl Locker {
    /// Queues the own count of a key after a go that took permits (a peek
    /// takes none), for the peers: a fixed
    /// window's count in the current slot (a reservation reaches the peers
    /// when its slot begins), or a bucket's count in the current period
    /// (a reservation is consumption at once, so it goes out at once).
    pub(in crate::core) fn note_grant(&mut self, now: Nanos, ask: &PermitAsk, v: &Verdict) {
        let (id, key) = (ask.limit, ask.key);
        let (slot, count) = match &mut self.entries[id.0].rule {
            Rule::Window(w) if v.wait == 0 && v.granted > 0 => (w.slot(), w.tally(key).map_or(0, |t| t.own())),
            Rule::Bucket(b) if v.granted > 0 => b.note_own(now, key, v.granted),
            _ => return,
        };
        self.granted.push(Count { limit: id, key: key.map(Into::into), slot, node: Nodes::ME, count });
    }

    /// Sets what the peers mean for the next asks, and starts keeping own
    /// counts for publishing.
    pub fn set_view(&mut self, view: PeerView) {
        self.view = view;
        self.publishing = true;
    }

    /// Own counts after each grant since the last call, oldest first.
    pub fn take_granted(&mut self) -> std::vec::Drain<'_, Count> {
        self.granted.drain(..)
    }

    /// Merges a count a peer reported, received at `now`. `Nodes::ME` as
    /// the node is an echo of this locker's own count. Returns whether
    /// anything changed: a count for an ended slot (for a bucket, a period
    /// before the previous one), a slot too far ahead, a semaphore, a
    /// smaller count than known, or a new key beyond `max_keys` changes
    /// nothing.
    pub fn merge(&mut self, now: Nanos, c: &Count) -> bool {
        let rule = &mut self.entries[c.limit.0].rule;
        let others = self.live_keys - rule.live_keys();
        let budget = KeyBudget { others, max_keys: self.max_keys };
        let changed = match rule {
            Rule::Window(w) => merge_window(w, now, c, budget),
            Rule::Bucket(b) => merge_bucket(b, now, c, budget),
            Rule::Semaphore(_) => false,
        };
        self.live_keys = others + rule.live_keys();
        changed
    }

    /// Calls `f` with every count this locker knows at `now`, its own and
    /// each peer node's: for the current slot of every fixed window, and
    /// the current and previous period of every token bucket.
    pub fn snapshot(&mut self, now: Nanos, mut f: impl FnMut(Count)) {
        self.each_shared(now, |i, rule| {
            let count = |key: Option<&str>, slot, node, count| Count {
                limit: LimitId(i),
                key: key.map(Into::into),
                slot,
                node,
                count,
            };
            match rule {
                Rule::Window(w) => {
                    let slot = w.slot();
                    for (key, tally) in w.tallies() {
                        if tally.own() > 0 {
                            f(count(key, slot, Nodes::ME, tally.own()));
                        }
                        for (node, n) in tally.peers() {
                            f(count(key, slot, node, n));
                        }
                    }
                }
                Rule::Bucket(b) => b.counts(now, |key, period, node, n| f(count(key, period, node, n))),
                Rule::Semaphore(_) => {}
            }
        });
    }

    /// Calls `f` with the own count of every key granted since the last
    /// call, for republishing: a count lost on the way is repaired by the
    /// next one.
    pub fn drain_touched(&mut self, now: Nanos, mut f: impl FnMut(Count)) {
        self.each_shared(now, |i, rule| {
            let mut own = |key: Option<&str>, slot, count| {
                f(Count { limit: LimitId(i), key: key.map(Into::into), slot, node: Nodes::ME, count })
            };
            match rule {
                Rule::Window(w) => {
                    let slot = w.slot();
                    w.drain_touched(|key, count| own(key, slot, count));
                }
                Rule::Bucket(b) => b.drain_touched(own),
                Rule::Semaphore(_) => {}
            }
        });
    }

    /// Brings every shared limit up to `now` and calls `f` with each.
    fn each_shared(&mut self, now: Nanos, mut f: impl FnMut(usize, &mut Rule)) {
        for (i, entry) in self.entries.iter_mut().enumerate() {
            if !matches!(entry.rule, Rule::Semaphore(_)) {
                entry.rule.advance(now);
                f(i, &mut entry.rule);
            }
        }
        self.live_keys = self.entries.iter().map(|e| e.rule.live_keys()).sum();
    }
}

fn merge_window(w: &mut FixedWindow, now: Nanos, c: &Count, budget: KeyBudget) -> bool {
    let (fit, _) = w.advance_for_peer(now, c.slot);
    let room = budget.room(w.live_keys());
    fit == SlotFit::Current
        && match w.tally_mut(c.key.as_deref(), room) {
            Ok(tally) if c.node == Nodes::ME => tally.merge_own(c.count),
            Ok(tally) => tally.merge(c.node, c.count),
            Err(_) => false,
        }
}

fn merge_bucket(b: &mut Bucket, now: Nanos, c: &Count, budget: KeyBudget) -> bool {
    b.advance(now);
    let room = budget.room(b.live_keys());
    b.merge(now, c, room).unwrap_or(false)
}
