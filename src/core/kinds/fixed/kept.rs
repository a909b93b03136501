//! What a fixed window keeps across a restart: a key's own count in a slot
//! (the current one, or a later one holding reservations), read after a
//! grant for the state log and put back on start.
//!
//! Counts of an earlier run in the current slot go back as a peer node's
//! (`TallyMut::merge`), so a peer's snapshot of that run merges with them by
//! maximum; reservations go back as this run's own, since only this locker
//! will ever count them. No clock, no file: the caller brings both.
//!
//! A peered window also keeps its slot's ledger of conserved permits (what
//! it gave and was given, `kept_exchange`), written before a gift leaves. An
//! earlier run's ledger and counts are carried into the slot's tally
//! (`carry`), so a run restarted with its state file owns what that run
//! still owned of the slot it joins in, no more.

use std::collections::VecDeque;

use super::{FixedWindow, Landing};
use crate::core::limit::Quota;
use crate::core::room::{KeyRoom, NoRoom};
use crate::core::share::exchange::KeptExchange;
use crate::core::time::Nanos;

impl FixedWindow {
    /// Whether a count kept for `slot` of a window for `quota` still
    /// counts at `now`: its slot has not ended (a later one holds
    /// reservations).
    pub fn slot_counts(quota: Quota, slot: u64, now: Nanos) -> bool {
        slot >= quota.slot_of(now)
    }

    /// This locker's own count for `key` in `slot`: granted in the current
    /// slot, or reserved in a later one; 0 for anything else.
    pub fn own_in(&self, key: Option<&str>, slot: u64) -> u32 {
        match slot.checked_sub(self.slot) {
            Some(0) => self.tally(key).map_or(0, |t| t.own()),
            Some(index) => self.ahead_of(key).and_then(|a| a.get(index as usize - 1)).copied().unwrap_or(0),
            None => 0,
        }
    }

    /// Adds `n` to this locker's own count for `key` in `slot`: the current
    /// slot, or (as a reservation) a later one. Returns the own count after,
    /// or `None` when `slot` is neither.
    pub fn restore_own(&mut self, key: Option<&str>, slot: u64, n: u32, room: KeyRoom) -> Result<Option<u32>, NoRoom> {
        if slot != self.slot || n == 0 {
            let reserved = self.restore_reserved(key, slot, n, room)?;
            return Ok(reserved.then(|| self.own_in(key, slot)));
        }
        let mut tally = self.tally_mut(key, room)?;
        tally.merge_own(tally.get().own().saturating_add(n));
        Ok(Some(tally.get().own()))
    }

    /// Adds `n` reserved permits for `key` in `slot`, a slot after the
    /// current one. Returns whether it was one.
    pub fn restore_reserved(&mut self, key: Option<&str>, slot: u64, n: u32, room: KeyRoom) -> Result<bool, NoRoom> {
        match slot.checked_sub(self.slot) {
            Some(index) if index > 0 && n > 0 => {
                self.reserve(key, &Landing { index: usize::try_from(index).unwrap_or(usize::MAX), granted: n }, room)?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// Calls `f` with the current slot's exchange for `key`: the permits
    /// this locker gave its peers and was given, each in all.
    pub fn kept_exchange(&self, key: Option<&str>, mut f: impl FnMut(KeptExchange)) {
        let (gave, got) = self.tally(key).map_or((0, 0), |t| t.ledger());
        f(KeptExchange { period: self.slot, gave, got, ..KeptExchange::default() });
    }

    /// Carries what an earlier run of this locker spent of `slot`
    /// (granted or gave away) and was given into `key`'s tally, if `slot`
    /// is current at `now`; returns whether it was.
    pub fn carry(&mut self, now: Nanos, key: Option<&str>, slot: u64, spent: u32, got: u32, room: KeyRoom) -> bool {
        self.advance(now);
        if slot != self.slot {
            return false;
        }
        let Ok(mut tally) = self.tally_mut(key, room) else { return false };
        tally.carry(spent, got);
        true
    }

    /// Calls `f` with each later slot for which `key` holds counts
    /// (reservations, or a charge's debt carried into it) and this
    /// locker's own count there, as a go into that slot would be kept.
    pub fn kept_ahead(&self, key: Option<&str>, mut f: impl FnMut(u64, u32)) {
        let ahead = self.ahead_of(key).into_iter().flatten();
        for (index, &count) in ahead.enumerate().filter(|(_, &count)| count > 0) {
            f(self.slot + 1 + index as u64, count);
        }
    }

    fn ahead_of(&self, key: Option<&str>) -> Option<&VecDeque<u32>> {
        match key {
            None => Some(&self.unkeyed_ahead),
            Some(k) => self.ahead.get(k),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::core::ask::Want;
    use crate::core::kinds::fixed::FixedWindow;
    use crate::core::limit::Quota;
    use crate::core::room::KeyRoom;

    const SEC: u64 = 1_000_000_000;

    #[test]
    fn own_counts_of_the_current_and_reserved_slots_are_read_and_put_back() {
        let mut w = FixedWindow::new(Quota::new(2, 1.0).unwrap());
        w.advance(10 * SEC);
        let wait = Want { cost: 2, up_to: false, max_wait: 5 * SEC };
        w.take(10 * SEC, Some("k"), Want::now(1), KeyRoom::Free).unwrap();
        assert!(w.take(10 * SEC, Some("k"), wait, KeyRoom::Free).unwrap().go);
        assert_eq!((w.own_in(Some("k"), 10), w.own_in(Some("k"), 11), w.own_in(Some("k"), 12)), (1, 2, 0));

        let mut back = FixedWindow::new(Quota::new(2, 1.0).unwrap());
        back.advance(10 * SEC);
        assert_eq!(back.restore_reserved(Some("k"), 11, 2, KeyRoom::Free), Ok(true));
        assert_eq!(back.restore_reserved(Some("k"), 10, 2, KeyRoom::Free), Ok(false), "not a later slot");
        assert!(!back.take(10 * SEC, Some("k"), Want::now(1), KeyRoom::Free).unwrap().go, "queued behind it");
        back.advance(11 * SEC);
        assert!(!back.take(11 * SEC, Some("k"), Want::now(1), KeyRoom::Free).unwrap().go, "the reserved slot is full");
    }
}
