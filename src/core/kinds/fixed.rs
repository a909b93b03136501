//! The fixed-timeslot counter: one count per key for the current slot, and
//! for keys with reservations, counts for the next few slots.
//!
//! Every key of a limit shares the limit's slot boundaries, so when the slot
//! changes every current count is stale at once and the whole map is cleared
//! in one step. A key whose slot has ended therefore costs nothing: there is
//! no per-key expiry to track and no sweep. Reservations (asks that may wait)
//! count against the first future slot they fit in; only keys holding one
//! live in the `ahead` map, so the plain go path never touches it. Slots
//! ahead are only opened when the one before is full, so a key holds at most
//! one future count per reservation. This module knows nothing of names,
//! sockets or clocks.
//!
//! When lockers are peered, a key's count in the current slot is this
//! locker's own grants plus what each peer node said it granted (see
//! [`Tally`]), and a grant must also fit the permits this locker owns of
//! the slot (conserved permits, see [`Share`]); a peered window makes no
//! reservations, since a future slot's permits may still move. Peer counts
//! for the next slot, from a peer whose clock runs a little ahead, wait in
//! `early` until the slot begins here: the window moves by this locker's
//! clock alone.

use std::collections::{HashMap, VecDeque};

pub use crate::core::ask::Verdict;
use crate::core::ask::Want;
use crate::core::limit::Quota;
use crate::core::room::{KeyRoom, Leeway, NoRoom};
use crate::core::share::Share;
use crate::core::time::Nanos;
use ahead::{roll, Landing};
use early::EarlyCounts;
use keys::KeyTable;
pub use peer::SlotFit;
use tally::{Take, Tally, TallyMut, TallyRef};

/// Counts for one limit within its current slot, and reserved counts for
/// the slots after it.
#[derive(Debug)]
pub struct FixedWindow {
    quota: Quota,
    slot: u64,
    /// When `slot` ends: the first instant of the next slot. Kept so that
    /// an ask in the current slot costs a comparison, not a division.
    slot_end: Nanos,
    unkeyed: Tally,
    keys: KeyTable,
    /// Counts of slot+1, slot+2, ... for the unkeyed count.
    unkeyed_ahead: VecDeque<u32>,
    /// Counts of slot+1, slot+2, ... for keys with reservations. Every key
    /// here is also in `keys` (maybe with 0), so `keys` alone counts live keys.
    ahead: HashMap<Box<str>, VecDeque<u32>>,
    /// Peer counts for slot+1, heard before this locker reached it.
    early: EarlyCounts,
}

impl FixedWindow {
    /// An empty window for `quota`.
    pub fn new(quota: Quota) -> FixedWindow {
        FixedWindow {
            quota,
            slot: 0,
            slot_end: quota.slot_end(0),
            unkeyed: Tally::default(),
            keys: KeyTable::new(),
            unkeyed_ahead: VecDeque::new(),
            ahead: HashMap::new(),
            early: EarlyCounts::default(),
        }
    }

    /// The quota this window enforces.
    pub fn quota(&self) -> Quota {
        self.quota
    }

    /// How long peers remember a run after they last heard of it (see
    /// `Rule::memory`): two slots. A run counts and gives in the slot it
    /// speaks in, which ends within a slot of its last message; the second
    /// slot covers a run whose clock was a little ahead and counted early
    /// in the next one (see `early`). A peered window makes no
    /// reservations, so nothing of it counts later.
    pub fn memory(&self) -> Nanos {
        self.quota.slot_ns().saturating_mul(2)
    }

    /// Takes a new quota, keeping the counts when the slots are the same
    /// (a new `max_requests` applies to them from the next ask); returns
    /// false, changing nothing, when the slots would differ.
    pub fn retune(&mut self, quota: Quota) -> bool {
        let same_slots = quota.same_slots(&self.quota);
        if same_slots {
            self.quota = quota;
        }
        same_slots
    }

    /// The slot the current counts belong to.
    pub fn slot(&self) -> u64 {
        self.slot
    }

    /// Live keys: keys with a count in the current slot or a reservation.
    #[inline]
    pub fn live_keys(&self) -> usize {
        self.keys.len()
    }

    /// When the slot ends, if its end gives something back: live keys to
    /// drop, or a table larger than the smallest to free. The loop wakes
    /// then even without a request, so a flood's memory does not wait for
    /// the next ask of this limit.
    pub fn next_deadline(&self) -> Option<Nanos> {
        let idle = self.keys.is_idle() && self.ahead.is_empty();
        (!idle).then_some(self.slot_end)
    }

    /// Bytes the key table holds on the heap (see `KeyTable::heap_bytes`).
    pub fn heap_bytes(&self) -> usize {
        self.keys.heap_bytes()
    }

    /// Starts loading `key`'s place in the key table into the cache (see
    /// `KeyTable::prefetch`); the unkeyed count needs nothing.
    #[inline]
    pub fn prefetch(&self, key: Option<&str>) {
        if let Some(k) = key {
            self.keys.prefetch(k);
        }
    }

    /// Moves to the slot that `now` falls in, dropping every count of an
    /// earlier slot. Returns how many keys were dropped. A `now` earlier than
    /// the current slot is counted in the current slot: time never runs
    /// backwards here, which is the conservative reading.
    #[inline]
    pub fn advance(&mut self, now: Nanos) -> usize {
        // Almost every ask falls in the current slot: keep that check inline
        // and the rollover out of the way.
        if now < self.slot_end {
            return 0;
        }
        self.roll_to(self.quota.slot_of(now))
    }

    #[cold]
    fn roll_to(&mut self, slot: u64) -> usize {
        let steps = slot - self.slot;
        self.slot = slot;
        self.slot_end = self.quota.slot_end(slot);
        self.unkeyed = Tally::reserved(roll(&mut self.unkeyed_ahead, steps));
        let before = self.keys.len();
        self.keys.clear();
        if !self.ahead.is_empty() {
            self.roll_reservations(steps);
        }
        if !self.early.is_empty() {
            self.join_early(slot);
        }
        before.saturating_sub(self.keys.len())
    }

    /// Joins the peer counts heard early for `slot`, now current, to its
    /// tallies. They were bounded when kept, so they take a key's room
    /// without asking for it.
    fn join_early(&mut self, slot: u64) {
        for ((key, node, what), count) in self.early.take(slot) {
            let Ok(mut tally) = self.tally_mut(key.as_deref(), KeyRoom::Free) else { continue };
            peer::merge_into(&mut tally, node, count, what);
        }
    }

    /// Takes permits for `key` (or for the limit's unkeyed count) as `want`
    /// says, for a locker on its own. See `take_shared`.
    pub fn take(&mut self, now: Nanos, key: Option<&str>, want: Want, room: KeyRoom) -> Result<Verdict, NoRoom> {
        self.take_shared(now, key, want, Leeway { room, share: Share::ALONE })
    }

    /// Takes permits for `key` (or for the limit's unkeyed count) as `want`
    /// says; otherwise takes nothing and answers sorry. Call `advance` first.
    /// `want.cost` must be at most max_requests; the caller checks. With
    /// peers live, a grant in the current slot must also fit this locker's
    /// share of what is left (`terms.share`).
    ///
    /// Arrival order: an ask never lands before the last slot holding a
    /// reservation for the same key, so later asks never go before earlier
    /// ones, and a large ask is never overtaken by small ones.
    /// A peered window makes no reservations: an ask that may wait is
    /// answered now or never, with the `retry_after` that says when.
    #[inline]
    pub fn take_shared(&mut self, now: Nanos, key: Option<&str>, want: Want, terms: Leeway) -> Result<Verdict, NoRoom> {
        let want = if terms.share.conserved() { Want { max_wait: 0, ..want } } else { want };
        if want.cost > 0 && !self.has_reservations(key) {
            if let Some(v) = self.take_now(now, key, want, terms) {
                return v;
            }
        }
        self.take_later(now, key, want, terms.room)
    }

    /// The common ask, with one lookup of the key: nothing queued for it, and
    /// it fits now, or it does not and may not wait. `None` leaves the ask to
    /// `take_later` (a reservation). The only place a grant in the current
    /// slot is made.
    #[inline]
    fn take_now(
        &mut self,
        now: Nanos,
        key: Option<&str>,
        want: Want,
        terms: Leeway,
    ) -> Option<Result<Verdict, NoRoom>> {
        let max = self.quota.max_requests();
        let (slot, reset_after) = (self.slot, self.slot_end.saturating_sub(now));
        let mut tally = match key {
            None => self.unkeyed.get_mut(),
            // A full table refuses only new keys: look before adding.
            Some(k) if matches!(terms.room, KeyRoom::Full) && !self.keys.contains_key(k) => return Some(Err(NoRoom)),
            Some(k) => self.keys.get_or_insert(k),
        };
        // A peer has begun the next slot: this one is over for the group,
        // though not yet by this clock (a little behind), and nothing more
        // goes in it.
        let over = self.early.begun(self.slot + 1);
        let free = if over { 0 } else { tally.get().free(self.quota, slot, terms.share) };
        if free < want.need() {
            if want.max_wait > 0 {
                return None;
            }
            // Owning too few while peers may own spare permits, this locker
            // asks them, and the ask may be held while the gift comes;
            // otherwise sorry until the next slot, when it would fit.
            if !over
                && terms.share.conserved()
                && tally.take(self.quota, slot, want.need(), terms.share, now) == Take::Short
            {
                let retry_after = terms.share.charged_for().min(reset_after);
                return Some(Ok(Verdict::sorry(max, free, retry_after, reset_after)));
            }
            return Some(Ok(Verdict::sorry(max, free, reset_after, reset_after)));
        }
        let granted = want.grant(free);
        match tally.take(self.quota, slot, granted, terms.share, now) {
            Take::Go => Some(Ok(Verdict::go(max, free - granted, reset_after, granted))),
            Take::Short | Take::Spent => Some(Ok(Verdict::sorry(max, free, reset_after, reset_after))),
        }
    }

    /// The commonest ask of all, for a locker on its own: `cost` permits
    /// (at least 1, at most max_requests), all or nothing, now or never,
    /// with room for a new key. The same answer as `take_shared` gives it,
    /// without the general machinery; `None` when the key holds
    /// reservations, which only the general path knows how to queue
    /// behind. Call `advance` first.
    #[inline]
    pub fn take_lone(&mut self, now: Nanos, key: Option<&str>, cost: u32) -> Option<Verdict> {
        if self.has_reservations(key) {
            return None;
        }
        let max = self.quota.max_requests();
        let reset_after = self.slot_end.saturating_sub(now);
        let mut tally = match key {
            None => self.unkeyed.get_mut(),
            Some(k) => self.keys.get_or_insert(k),
        };
        let free = tally.get().remaining(max);
        if free < cost {
            return Some(Verdict::sorry(max, free, reset_after, reset_after));
        }
        // Alone, no permits are conserved: a take that fits is a go.
        tally.take_alone(cost);
        Some(Verdict::go(max, free - cost, reset_after, cost))
    }

    /// Answers sorry without counting, for a locker that may not grant yet;
    /// `retry_after` is when it may (capped at the slot's end).
    pub fn refuse(&self, now: Nanos, key: Option<&str>, retry_after: Nanos) -> Verdict {
        let max = self.quota.max_requests();
        let remaining = self.tally(key).map_or(max, |t| t.remaining(max));
        let reset_after = self.slot_end.saturating_sub(now);
        Verdict::sorry(max, remaining, retry_after.min(reset_after), reset_after)
    }

    /// The tally for `key`, adding it if there is room.
    pub fn tally_mut(&mut self, key: Option<&str>, room: KeyRoom) -> Result<TallyMut<'_>, NoRoom> {
        match key {
            None => Ok(self.unkeyed.get_mut()),
            // A full table refuses only new keys: look before adding.
            Some(k) if matches!(room, KeyRoom::Full) && !self.keys.contains_key(k) => Err(NoRoom),
            Some(k) => Ok(self.keys.get_or_insert(k)),
        }
    }

    /// The tally for `key`, if it has one in the current slot.
    pub fn tally(&self, key: Option<&str>) -> Option<TallyRef<'_>> {
        match key {
            None => Some(self.unkeyed.get()),
            Some(k) => self.keys.get(k),
        }
    }

    /// Whether `key` already has a count in the current slot or a reservation.
    pub fn has_key(&self, key: &str) -> bool {
        self.keys.contains_key(key)
    }
}

mod ahead;
mod back;
mod charge;
mod early;
mod kept;
pub mod keys;
mod peer;
pub mod tally;

#[cfg(test)]
mod tests;
