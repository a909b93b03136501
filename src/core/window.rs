//! The fixed-timeslot counter: one count per key for the current slot.
//!
//! Every key of a limit shares the limit's slot boundaries, so when the slot
//! changes every count is stale at once and the whole map is cleared in one
//! step. A key whose slot has ended therefore costs nothing: there is no
//! per-key expiry to track and no sweep. This module knows nothing of names,
//! sockets or clocks.
//!
//! When lockers are peered, a key's count is this locker's own grants plus
//! what each peer node said it granted (see [`Tally`]), and a grant must
//! also fit the key's share of what is left (see [`Share`]).

use std::collections::HashMap;

use super::limit::Quota;
use super::tally::{Share, Take, Tally};
use super::time::Nanos;

/// The answer to one ask: go or sorry, and the numbers a caller needs to
/// plan its next ask. "Sorry" is a value, not an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    /// Whether the caller may go.
    pub go: bool,
    /// The limit's max_requests.
    pub limit: u32,
    /// Permits left for this key in the current slot after this ask.
    pub remaining: u32,
    /// When not go: nanoseconds until the next slot starts. Zero on go.
    pub retry_after: Nanos,
    /// Nanoseconds until the current slot ends.
    pub reset_after: Nanos,
}

/// Counts for one limit within its current slot.
#[derive(Debug)]
pub struct FixedWindow {
    quota: Quota,
    slot: u64,
    unkeyed: Tally,
    keys: HashMap<Box<str>, Tally>,
}

/// What a take needs from the caller when it must add a new key.
pub enum KeyRoom {
    /// A new key may be added.
    Free,
    /// The key table is full; only existing keys may be counted.
    Full,
}

/// A new key was needed but the key table is full.
#[derive(Debug, PartialEq, Eq)]
pub struct NoRoom;

/// Where a count reported for `slot` falls against the window's own slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotFit {
    /// The current slot: merge it.
    Current,
    /// A slot that has ended: ignore it.
    Stale,
    /// A slot too far ahead of `now` to trust: ignore it.
    TooEarly,
}

impl FixedWindow {
    /// An empty window for `quota`.
    pub fn new(quota: Quota) -> FixedWindow {
        FixedWindow { quota, slot: 0, unkeyed: Tally::default(), keys: HashMap::new() }
    }

    /// The quota this window enforces.
    pub fn quota(&self) -> Quota {
        self.quota
    }

    /// The slot the counts belong to.
    pub fn slot(&self) -> u64 {
        self.slot
    }

    /// Live keys: keys with a count in the current slot.
    pub fn live_keys(&self) -> usize {
        self.keys.len()
    }

    /// Moves to the slot that `now` falls in, dropping every count of an
    /// earlier slot. Returns how many keys were dropped. A `now` earlier than
    /// the current slot is counted in the current slot: time never runs
    /// backwards here, which is the conservative reading.
    pub fn advance(&mut self, now: Nanos) -> usize {
        self.advance_to(self.quota.slot_of(now))
    }

    fn advance_to(&mut self, slot: u64) -> usize {
        if slot <= self.slot {
            return 0;
        }
        self.slot = slot;
        self.unkeyed = Tally::default();
        let dropped = self.keys.len();
        self.keys.clear();
        dropped
    }

    /// Prepares for a peer's count for `slot` received at `now`: a slot that
    /// starts less than a quarter slot after `now` (a peer whose clock runs a
    /// little ahead) moves the window there, which only ever counts more.
    /// Returns where the slot falls and how many keys were dropped.
    pub fn advance_for_peer(&mut self, now: Nanos, slot: u64) -> (SlotFit, usize) {
        let dropped = self.advance(now);
        if slot < self.slot {
            return (SlotFit::Stale, dropped);
        }
        let starts = self.quota.slot_end(slot.saturating_sub(1));
        if slot > self.slot && starts > now.saturating_add(self.quota.slot_ns() / 4) {
            return (SlotFit::TooEarly, dropped);
        }
        (SlotFit::Current, dropped + self.advance_to(slot))
    }

    /// Takes `cost` permits for `key` (or for the limit's unkeyed count) if
    /// they all fit in the current slot; otherwise takes nothing and answers
    /// sorry. Call `advance` first. `cost` must be at least 1 and at most
    /// max_requests; the caller checks.
    pub fn take(
        &mut self,
        now: Nanos,
        key: Option<&str>,
        cost: u32,
        room: KeyRoom,
        share: Share,
    ) -> Result<Verdict, NoRoom> {
        let max = self.quota.max_requests();
        let tally = self.tally_mut(key, room)?;
        let take = tally.take(now, max, cost, share);
        let remaining = tally.remaining(max);
        // Over its share, this locker may grant again once its recent grants
        // are no longer in flight; the slot's end would be a needless wait.
        let retry = (take == Take::OverShare).then_some(share.in_flight_window);
        Ok(self.verdict(now, take.is_go(), remaining, retry))
    }

    /// Answers sorry without counting, for a locker that may not grant yet;
    /// `retry_after` is when it may (capped at the slot's end).
    pub fn refuse(&self, now: Nanos, key: Option<&str>, retry_after: Nanos) -> Verdict {
        let max = self.quota.max_requests();
        let remaining = self.tally(key).map_or(max, |t| t.remaining(max));
        self.verdict(now, false, remaining, Some(retry_after))
    }

    fn verdict(&self, now: Nanos, go: bool, remaining: u32, retry: Option<Nanos>) -> Verdict {
        let reset_after = self.quota.slot_end(self.slot).saturating_sub(now);
        let retry_after = if go { 0 } else { retry.map_or(reset_after, |r| r.min(reset_after)) };
        Verdict { go, limit: self.quota.max_requests(), remaining, retry_after, reset_after }
    }

    /// The tally for `key`, adding it if there is room.
    pub fn tally_mut(&mut self, key: Option<&str>, room: KeyRoom) -> Result<&mut Tally, NoRoom> {
        match key {
            None => Ok(&mut self.unkeyed),
            Some(k) => {
                if !self.keys.contains_key(k) {
                    if let KeyRoom::Full = room {
                        return Err(NoRoom);
                    }
                    self.keys.insert(k.into(), Tally::default());
                }
                Ok(self.keys.get_mut(k).expect("present or just inserted"))
            }
        }
    }

    /// The tally for `key`, if it has one in the current slot.
    pub fn tally(&self, key: Option<&str>) -> Option<&Tally> {
        match key {
            None => Some(&self.unkeyed),
            Some(k) => self.keys.get(k),
        }
    }

    /// Whether `key` already has a count in the current slot.
    pub fn has_key(&self, key: &str) -> bool {
        self.keys.contains_key(key)
    }

    /// Every tally with a count, the unkeyed one first (as `None`).
    pub fn tallies(&self) -> impl Iterator<Item = (Option<&str>, &Tally)> {
        let unkeyed = (self.unkeyed != Tally::default()).then_some((None, &self.unkeyed));
        unkeyed.into_iter().chain(self.keys.iter().map(|(k, t)| (Some(&**k), t)))
    }

    /// Calls `f` with the own count of every tally granted since the last
    /// call, and clears the marks.
    pub fn drain_touched(&mut self, mut f: impl FnMut(Option<&str>, u32)) {
        if std::mem::take(&mut self.unkeyed.touched) {
            f(None, self.unkeyed.own());
        }
        for (k, t) in self.keys.iter_mut() {
            if std::mem::take(&mut t.touched) {
                f(Some(k), t.own());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(max: u32, secs: f64) -> FixedWindow {
        FixedWindow::new(Quota::new(max, secs).unwrap())
    }

    fn take(w: &mut FixedWindow, now: Nanos, key: Option<&str>) -> Verdict {
        w.advance(now);
        w.take(now, key, 1, KeyRoom::Free, Share::ALONE).unwrap()
    }

    #[test]
    fn grants_max_requests_then_sorry_until_the_slot_ends() {
        let mut w = window(5, 0.8);
        let t0 = 8_000_000_000; // the start of slot 10
        for i in 0..5 {
            let v = take(&mut w, t0 + i, None);
            assert!(v.go, "ask {i} should go");
            assert_eq!(v.remaining, 4 - i as u32);
            assert_eq!(v.retry_after, 0);
        }
        let v = take(&mut w, t0 + 100_000_000, None);
        assert!(!v.go);
        assert_eq!(v.retry_after, 700_000_000);
        assert_eq!(v.reset_after, 700_000_000);
        assert!(take(&mut w, t0 + 800_000_000, None).go, "the next slot frees the count");
    }

    #[test]
    fn each_key_has_its_own_count() {
        let mut w = window(1, 1.0);
        assert!(take(&mut w, 0, Some("a")).go);
        assert!(!take(&mut w, 1, Some("a")).go);
        assert!(take(&mut w, 2, Some("b")).go);
        assert!(take(&mut w, 3, None).go);
        assert_eq!(w.live_keys(), 2);
    }

    #[test]
    fn a_new_slot_drops_every_key() {
        let mut w = window(1, 1.0);
        take(&mut w, 0, Some("a"));
        take(&mut w, 0, Some("b"));
        assert_eq!(w.advance(1_000_000_000), 2);
        assert_eq!(w.live_keys(), 0);
    }

    #[test]
    fn a_cost_that_does_not_fit_takes_nothing() {
        let mut w = window(5, 1.0);
        w.advance(0);
        assert!(w.take(0, None, 3, KeyRoom::Free, Share::ALONE).unwrap().go);
        let v = w.take(0, None, 3, KeyRoom::Free, Share::ALONE).unwrap();
        assert!(!v.go);
        assert_eq!(v.remaining, 2);
        assert!(w.take(0, None, 2, KeyRoom::Free, Share::ALONE).unwrap().go);
    }

    #[test]
    fn a_full_key_table_refuses_only_new_keys() {
        let mut w = window(2, 1.0);
        w.advance(0);
        w.take(0, Some("a"), 1, KeyRoom::Free, Share::ALONE).unwrap();
        assert!(w.take(0, Some("a"), 1, KeyRoom::Full, Share::ALONE).unwrap().go);
        assert_eq!(w.take(0, Some("b"), 1, KeyRoom::Full, Share::ALONE), Err(NoRoom));
        assert!(w.take(0, None, 1, KeyRoom::Full, Share::ALONE).unwrap().go);
    }

    #[test]
    fn time_running_backwards_counts_in_the_current_slot() {
        let mut w = window(1, 1.0);
        assert!(take(&mut w, 5_000_000_000, None).go);
        assert!(!take(&mut w, 4_000_000_000, None).go);
    }
}
