//! The fixed-timeslot counter: one count per key for the current slot.
//!
//! Every key of a limit shares the limit's slot boundaries, so when the slot
//! changes every count is stale at once and the whole map is cleared in one
//! step. A key whose slot has ended therefore costs nothing: there is no
//! per-key expiry to track and no sweep. This module knows nothing of names,
//! sockets or clocks.

use super::keys::KeyTable;
use super::limit::Quota;
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
    unkeyed: u32,
    keys: KeyTable,
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

impl FixedWindow {
    /// An empty window for `quota`.
    pub fn new(quota: Quota) -> FixedWindow {
        FixedWindow { quota, slot: 0, unkeyed: 0, keys: KeyTable::new() }
    }

    /// The quota this window enforces.
    pub fn quota(&self) -> Quota {
        self.quota
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
        let slot = self.quota.slot_of(now);
        if slot <= self.slot {
            return 0;
        }
        self.slot = slot;
        self.unkeyed = 0;
        let dropped = self.keys.len();
        self.keys.clear();
        dropped
    }

    /// Takes `cost` permits for `key` (or for the limit's unkeyed count) if
    /// they all fit in the current slot; otherwise takes nothing and answers
    /// sorry. Call `advance` first. `cost` must be at least 1 and at most
    /// max_requests; the caller checks.
    pub fn take(&mut self, now: Nanos, key: Option<&str>, cost: u32, room: KeyRoom) -> Result<Verdict, NoRoom> {
        let max = self.quota.max_requests();
        let count = match key {
            None => &mut self.unkeyed,
            Some(k) => match self.keys.get_mut(k) {
                Some(c) => c,
                None => match room {
                    KeyRoom::Free => self.keys.get_or_insert(k),
                    KeyRoom::Full => return Err(NoRoom),
                },
            },
        };
        let go = max - *count >= cost;
        if go {
            *count += cost;
        }
        let remaining = max - *count;
        let reset_after = self.quota.slot_end(self.slot).saturating_sub(now);
        let retry_after = if go { 0 } else { reset_after };
        Ok(Verdict { go, limit: max, remaining, retry_after, reset_after })
    }

    /// Whether `key` already has a count in the current slot.
    pub fn has_key(&self, key: &str) -> bool {
        self.keys.contains_key(key)
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
        w.take(now, key, 1, KeyRoom::Free).unwrap()
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
        assert!(w.take(0, None, 3, KeyRoom::Free).unwrap().go);
        let v = w.take(0, None, 3, KeyRoom::Free).unwrap();
        assert!(!v.go);
        assert_eq!(v.remaining, 2);
        assert!(w.take(0, None, 2, KeyRoom::Free).unwrap().go);
    }

    #[test]
    fn a_full_key_table_refuses_only_new_keys() {
        let mut w = window(2, 1.0);
        w.advance(0);
        w.take(0, Some("a"), 1, KeyRoom::Free).unwrap();
        assert!(w.take(0, Some("a"), 1, KeyRoom::Full).unwrap().go);
        assert_eq!(w.take(0, Some("b"), 1, KeyRoom::Full), Err(NoRoom));
        assert!(w.take(0, None, 1, KeyRoom::Full).unwrap().go);
    }

    #[test]
    fn time_running_backwards_counts_in_the_current_slot() {
        let mut w = window(1, 1.0);
        assert!(take(&mut w, 5_000_000_000, None).go);
        assert!(!take(&mut w, 4_000_000_000, None).go);
    }
}
