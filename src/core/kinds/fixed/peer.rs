//! The fixed window's side of peering: its own counts and demand figures
//! noted for the peers after a go, peers' counts merged by maximum into
//! the current slot (or kept for the next, when a peer's clock runs a
//! little ahead), and every count listed for snapshots and repairs. The
//! counts themselves are kept per key in `tally`. No clock, no names, no
//! wire format.

use super::tally::{Tally, TallyMut, TallyRef};
use super::{FixedWindow, Verdict};
use crate::core::room::KeyRoom;
use crate::core::share::{Count, Counted, NodeIx, ME};
use crate::core::time::Nanos;

/// Where a count reported for `slot` falls against the window's own slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotFit {
    /// The current slot: merge it.
    Current,
    /// A slot that has ended: ignore it.
    Stale,
    /// The next slot, begun on the peer's clock but not yet on this
    /// locker's: keep it for when it begins here.
    Next,
    /// A slot too far ahead of `now` to trust: ignore it.
    TooEarly,
}

impl FixedWindow {
    /// The own count of `key` in the current slot after a go `v`, and its
    /// own demand figure, for the peers: `(slot, own, asked)`. `None` for a
    /// reservation, which reaches the peers when its slot begins.
    pub fn note_own(&self, key: Option<&str>, v: &Verdict) -> Option<(u64, u32, u32)> {
        if v.wait > 0 {
            return None;
        }
        let (own, asked) = self.tally(key).map_or((0, 0), |t| (t.own(), t.asked_own()));
        Some((self.slot, own, asked))
    }

    /// Calls `f` with every count of the current slot this window knows,
    /// its own and each peer node's, as `(key, slot, node, count, what)`:
    /// grants and demand figures, and the figures of the slot before that
    /// split this one.
    pub fn counts(&self, mut f: impl FnMut(Option<&str>, u64, NodeIx, u32, Counted)) {
        let slot = self.slot;
        for (key, tally) in self.tallies() {
            if tally.own() > 0 {
                f(key, slot, ME, tally.own(), Counted::Granted);
            }
            for (node, n) in tally.peers() {
                f(key, slot, node, n, Counted::Granted);
            }
            for (node, n) in tally.asked() {
                f(key, slot, node, n, Counted::Asked);
            }
            for (node, n) in tally.basis() {
                f(key, slot.saturating_sub(1), node, n, Counted::Asked);
            }
        }
    }

    /// Calls `f` with the own count and own demand figure, as `(key, slot,
    /// count, what)`, of every key granted or asked since the last call; once
    /// the slot's figures are frozen, with every own figure at every call,
    /// so that a figure lost once still arrives before the slot it splits.
    pub fn drain_own(&mut self, now: Nanos, mut f: impl FnMut(Option<&str>, u64, u32, Counted)) {
        let (slot, frozen) = (self.slot, self.figures_frozen(now));
        self.drain_touched(frozen, |key, tally| {
            if tally.own() > 0 {
                f(key, slot, tally.own(), Counted::Granted);
            }
            if tally.asked_own() > 0 {
                f(key, slot, tally.asked_own(), Counted::Asked);
            }
        });
    }

    /// Whether the demand figures of the current slot are frozen at `now`:
    /// past the cutoff, every repair republishes them all.
    fn figures_frozen(&self, now: Nanos) -> bool {
        self.elapsed_in_slot(now) >= crate::core::share::demand_cutoff(self.quota.slot_ns())
    }

    /// Merges a peer's count for `slot`, received at `now`, by maximum: a
    /// count of grants, or a demand figure (one for the slot before joins
    /// the basis that splits the current one). `ME` as the node is an echo
    /// of this locker's own count. A count for the next slot is kept until
    /// it begins here. Returns whether anything changed.
    pub fn merge_count(&mut self, now: Nanos, c: &Count, room: KeyRoom) -> bool {
        let key = c.key.as_deref();
        let previous = c.what == Counted::Asked && c.slot.saturating_add(1) == self.slot_at(now);
        match (self.place(now, c.slot), c.what) {
            (SlotFit::Next, what) => self.early.keep(c.slot, key, c.node, c.count, what),
            (SlotFit::Current, Counted::Granted) => match self.tally_mut(key, room) {
                Ok(mut t) if c.node == ME => t.merge_own(c.count),
                Ok(mut t) => t.merge(c.node, c.count),
                Err(_) => false,
            },
            (SlotFit::Current, Counted::Asked) => {
                self.tally_mut(key, room).is_ok_and(|mut t| t.merge_asked(c.node, c.count, false))
            }
            (SlotFit::Stale, Counted::Asked) if previous => {
                self.tally_mut(key, room).is_ok_and(|mut t| t.merge_asked(c.node, c.count, true))
            }
            (SlotFit::Stale | SlotFit::TooEarly, _) => false,
        }
    }

    /// The slot `now` falls in, or the current one if `now` is before it.
    fn slot_at(&self, now: Nanos) -> u64 {
        self.quota.slot_of(now).max(self.slot)
    }

    /// Where a peer's count for `slot`, received at `now`, falls. Never
    /// moves the window past `now`'s slot: a peer whose clock runs ahead
    /// does not take this locker with it.
    pub fn place(&mut self, now: Nanos, slot: u64) -> SlotFit {
        self.advance(now);
        if slot < self.slot {
            return SlotFit::Stale;
        }
        if slot == self.slot {
            return SlotFit::Current;
        }
        let starts = self.quota.slot_end(slot - 1);
        let near = starts <= now.saturating_add(self.quota.slot_ns() / 4);
        if slot == self.slot + 1 && near {
            SlotFit::Next
        } else {
            SlotFit::TooEarly
        }
    }

    /// Every tally with a count, the unkeyed one first (as `None`).
    fn tallies(&self) -> impl Iterator<Item = (Option<&str>, TallyRef<'_>)> {
        let unkeyed = (self.unkeyed != Tally::default()).then_some((None, self.unkeyed.get()));
        unkeyed.into_iter().chain(self.keys.iter().map(|(k, t)| (Some(k), t)))
    }

    /// Calls `f` with every tally granted or asked since the last call,
    /// and clears the marks; with `all_asked` (figures frozen, see
    /// `figures_frozen`), also with every tally holding an own figure.
    fn drain_touched(&mut self, all_asked: bool, mut f: impl FnMut(Option<&str>, TallyRef<'_>)) {
        let due = |t: &mut TallyMut<'_>| t.take_touched() || (all_asked && t.get().asked_own() > 0);
        let mut unkeyed = self.unkeyed.get_mut();
        if due(&mut unkeyed) {
            f(None, unkeyed.get());
        }
        self.keys.for_each_mut(|k, mut t| {
            if due(&mut t) {
                f(Some(k), t.get());
            }
        });
    }
}
