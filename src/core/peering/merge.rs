//! The locker's side of peering: its own grants queued for publishing, the
//! counts peers report merged into the limit they name, and the snapshot
//! and repair lists.
//!
//! Fixed windows, token buckets and rolling windows are shared; semaphores
//! are not, and their counts are never published or merged. How a count
//! is kept is `core::kinds::fixed::tally`'s (windows), `core::kinds::bucket::ledger`'s (buckets)
//! and `core::kinds::rolling`'s (rolling windows, per sub-slot); this
//! module only dispatches and keeps the live-key count in step. It must
//! not reach into a kind's private state, nor encode anything: the bytes
//! are `wire`'s.

use super::nodes::Nodes;
use crate::core::ask::{PermitAsk, Verdict};
use crate::core::kinds::bucket::Bucket;
use crate::core::kinds::rolling::RollingWindow;
use crate::core::kinds::Rule;
use crate::core::limit::LimitId;
use crate::core::locker::Locker;
use crate::core::room::KeyBudget;
use crate::core::share::PeerView;
use crate::core::share::{Count, Counted};
use crate::core::time::Nanos;

impl Locker {
    /// Queues the own count of a key after a go that took permits (a peek
    /// takes none), for the peers: a fixed
    /// window's count in the current slot (a reservation reaches the peers
    /// when its slot begins), a bucket's count in the current period
    /// (a reservation is consumption at once, so it goes out at once), or
    /// a rolling window's count in the sub-slot its caller goes in (a
    /// reservation goes out at once, so that peers count it ahead).
    pub(in crate::core) fn note_grant(&mut self, now: Nanos, ask: &PermitAsk, v: &Verdict) {
        let (id, key) = (ask.limit, ask.key);
        let (slot, count, asked) = match &mut self.entries[id.0].rule {
            Rule::Window(w) if v.wait == 0 && v.granted > 0 => {
                let (own, asked) = w.tally(key).map_or((0, 0), |t| (t.own(), t.asked_own()));
                (w.slot(), own, asked)
            }
            Rule::Bucket(b) if v.granted > 0 => {
                let (period, count) = b.note_own(now, key, v.granted);
                (period, count, 0)
            }
            Rule::Rolling(r) if v.granted > 0 => {
                let (sub, count) = r.note_own(key, now + v.wait);
                (sub, count, 0)
            }
            _ => return,
        };
        self.granted.push(Count::granted(id, key, slot, Nodes::ME, count));
        if asked > 0 {
            self.granted.push(Count::asked(id, key, slot, Nodes::ME, asked));
        }
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
        let changed = match (&mut *rule, c.what) {
            (Rule::Window(w), _) => {
                let room = budget.room(w.live_keys());
                w.merge_count(now, c, room)
            }
            (Rule::Bucket(b), Counted::Granted) => merge_bucket(b, now, c, budget),
            (Rule::Rolling(r), Counted::Granted) => merge_rolling(r, now, c, budget),
            (Rule::Bucket(_) | Rule::Rolling(_), Counted::Asked) | (Rule::Semaphore(_), _) => false,
        };
        self.live_keys = others + rule.live_keys();
        changed
    }

    /// Calls `f` with every count this locker knows at `now`, its own and
    /// each peer node's: for the current slot of every fixed window, the
    /// current and previous period of every token bucket, and every
    /// sub-slot of a rolling window that still counts.
    pub fn snapshot(&mut self, now: Nanos, mut f: impl FnMut(Count)) {
        self.each_shared(now, |i, rule| {
            let count = |key: Option<&str>, slot, node, count| Count::granted(LimitId(i), key, slot, node, count);
            let asked = |key: Option<&str>, slot, node, count| Count::asked(LimitId(i), key, slot, node, count);
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
                        for (node, n) in tally.asked() {
                            f(asked(key, slot, node, n));
                        }
                        for (node, n) in tally.basis() {
                            f(asked(key, slot.saturating_sub(1), node, n));
                        }
                    }
                }
                Rule::Bucket(b) => b.counts(now, |key, period, node, n| f(count(key, period, node, n))),
                Rule::Rolling(r) => r.counts(now, |key, sub, node, n| f(count(key, sub, node, n))),
                Rule::Semaphore(_) => {}
            }
        });
    }

    /// Calls `f` with the own count of every key granted since the last
    /// call, for republishing: a count lost on the way is repaired by the
    /// next one. Own demand figures go along: those changed since the last
    /// call, and once a slot's figures are frozen, all of them at every
    /// call, so that a figure lost once still arrives before the slot it
    /// splits.
    pub fn drain_touched(&mut self, now: Nanos, mut f: impl FnMut(Count)) {
        self.each_shared(now, |i, rule| {
            let id = LimitId(i);
            match rule {
                Rule::Window(w) => {
                    let (slot, frozen) = (w.slot(), w.figures_frozen(now));
                    w.drain_touched(frozen, |key, tally| {
                        if tally.own() > 0 {
                            f(Count::granted(id, key, slot, Nodes::ME, tally.own()));
                        }
                        if tally.asked_own() > 0 {
                            f(Count::asked(id, key, slot, Nodes::ME, tally.asked_own()));
                        }
                    });
                }
                Rule::Bucket(b) => {
                    b.drain_touched(|key, slot, count| f(Count::granted(id, key, slot, Nodes::ME, count)))
                }
                Rule::Rolling(r) => {
                    r.drain_touched(|key, sub, count| f(Count::granted(id, key, sub, Nodes::ME, count)))
                }
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

fn merge_bucket(b: &mut Bucket, now: Nanos, c: &Count, budget: KeyBudget) -> bool {
    b.advance(now);
    let room = budget.room(b.live_keys());
    b.merge(now, c, room).unwrap_or(false)
}

fn merge_rolling(r: &mut RollingWindow, now: Nanos, c: &Count, budget: KeyBudget) -> bool {
    r.advance(now);
    let room = budget.room(r.live_keys());
    r.merge(now, c.key.as_deref(), c.slot, c.node, c.count, room).unwrap_or(false)
}
