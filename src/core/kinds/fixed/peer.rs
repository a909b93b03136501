//! The fixed window's side of peering: its own counts, wants and gifts
//! noted for the peers, peers' counts merged by maximum into the current
//! slot (or kept for the next, when a peer's clock runs a little ahead),
//! gifts answered to peers' wants, and every count listed for snapshots
//! and repairs. The counts and the ledger themselves are kept per key in
//! `tally`. No clock, no names, no wire format.

use super::tally::{Tally, TallyMut, TallyRef};
use super::FixedWindow;
use crate::core::room::{KeyRoom, Leeway};
use crate::core::share::repair::RepairWalk;
use crate::core::share::{Count, Counted, Gifts, NodeIx, ME};
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

/// Merges one count of `node` into `tally`: grants (an echo of this
/// locker's own under `ME`), wants, and gifts (to this locker, or an echo
/// of its own; gifts between other nodes change nothing here).
pub(super) fn merge_into(tally: &mut TallyMut<'_>, node: NodeIx, count: u32, what: Counted) -> bool {
    match what {
        Counted::Granted if node == ME => tally.merge_own(count),
        Counted::Granted => tally.merge(node, count),
        what => tally.merge_exchange(node, what, count),
    }
}

impl FixedWindow {
    /// What an ask for `key` that came short asked the peers for in the
    /// current slot, if that grew: `(slot, wanted)`. Grants are not
    /// published one by one: the next repair tells of them (`drain_own`).
    pub fn note_wanted(&mut self, key: Option<&str>) -> Option<(u64, u32)> {
        let slot = self.slot;
        let mut tally = self.tally_mut(key, KeyRoom::Full).ok()?;
        tally.take_wanted_new().then(|| (slot, tally.get().wanted()))
    }

    /// Calls `f` with every count of the current slot this window knows,
    /// its own and each peer node's, as `(key, slot, node, count, what)`:
    /// grants, wants, and gifts (its own and those to it), so that a locker
    /// that rejoins after a pause hears its own back.
    pub fn counts(&self, mut f: impl FnMut(Option<&str>, u64, NodeIx, u32, Counted)) {
        let slot = self.slot;
        for (key, tally) in self.tallies() {
            let mut f = |node, n, what| f(key, slot, node, n, what);
            if tally.own() > 0 {
                f(ME, tally.own(), Counted::Granted);
            }
            tally.peer_counts().for_each(|(node, n)| f(node, n, Counted::Granted));
            if let Some(e) = tally.exchange() {
                e.counts(|_, node, n, what| f(node, n, what));
            }
        }
    }

    /// Calls `f` with the own counts, as `(key, slot, node, count, what)`,
    /// of the keys granted, short or giving since they were last
    /// republished that `walk` takes: its grants, what it asked for, and
    /// its gifts, so that one lost on the way is repaired.
    pub fn drain_own(&mut self, walk: &RepairWalk, mut f: impl FnMut(Option<&str>, u64, NodeIx, u32, Counted)) {
        let slot = self.slot;
        self.drain_touched(walk, |key, tally| {
            if tally.own() > 0 {
                f(key, slot, ME, tally.own(), Counted::Granted);
            }
            if tally.wanted() > 0 {
                f(key, slot, ME, tally.wanted(), Counted::Wanted);
            }
            if let Some(e) = tally.exchange() {
                e.counts(|_, node, n, what| {
                    if node == ME {
                        f(key, slot, node, n, what)
                    }
                });
            }
        });
    }

    /// Merges a peer's count for `slot`, received at `now`, by maximum. A
    /// count for the next slot is kept until it begins here. A want not
    /// yet answered is answered with what this locker can spare of the current
    /// slot (`share` says what it owns): `give` hears each gift as
    /// `(key, slot, receiver, total given)`, already taken off this
    /// locker's own. Returns whether anything changed.
    pub fn merge_count(&mut self, now: Nanos, c: &Count, terms: Leeway, mut give: impl Gifts) -> bool {
        let (key, Leeway { room, share }) = (c.key.as_deref(), terms);
        match self.place(now, c.slot) {
            SlotFit::Next => self.early.keep(c.slot, key, c.node, c.count, c.what),
            SlotFit::Current => {
                let (quota, slot) = (self.quota, self.slot);
                let Ok(mut t) = self.tally_mut(key, room) else { return false };
                let changed = merge_into(&mut t, c.node, c.count, c.what);
                // A repeated want is answered too if it never was (it came
                // early, before its slot began here).
                if c.what == Counted::Wanted && share.conserved() {
                    t.give(quota, slot, share, now, |to, n| give(key, slot, to, n));
                }
                changed
            }
            SlotFit::Stale | SlotFit::TooEarly => false,
        }
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

    /// Calls `f` with every tally granted, short or giving since it was
    /// last drained that `walk` takes, and clears their marks.
    fn drain_touched(&mut self, walk: &RepairWalk, mut f: impl FnMut(Option<&str>, TallyRef<'_>)) {
        let mut unkeyed = self.unkeyed.get_mut();
        if walk.take() && unkeyed.take_touched() {
            f(None, unkeyed.get());
        }
        self.keys.for_each_mut(|k, mut t| {
            if walk.take() && t.take_touched() {
                f(Some(k), t.get());
            }
        });
    }
}
