//! Permits charged to a fixed window after they were used (`op: charge`):
//! counted in the current slot whatever is left, and what goes beyond the
//! slot's max carried into the slots after it, each filled up to its max
//! in turn: a debt of D means the next slot starts with D counted (at most
//! its max, the rest in the slot after), until it is paid. The carried
//! counts are kept as reservations are (`ahead`), so an ask waits behind
//! them and its `retry_after` names the slot where it fits.
//!
//! Peered, a charge takes what this locker owns of the slot and carries
//! the rest into its own share of the slots after (`Share::owns`): the
//! count it publishes never goes past what it owns, so a peer's permits
//! are untouched, and the group's count in a slot is at most its max plus
//! what was charged beyond it. No clock: the caller brings `now`.

use std::collections::VecDeque;

use super::FixedWindow;
use crate::core::ask::{Charged, Verdict};
use crate::core::room::{Leeway, NoRoom};
use crate::core::time::Nanos;

impl FixedWindow {
    /// Counts `cost` permits of `key` at `now`, past max_requests if need
    /// be, on `terms`, and carries the excess forward. Call `advance` first.
    pub fn charge(&mut self, now: Nanos, key: Option<&str>, cost: u32, terms: Leeway) -> Result<Charged, NoRoom> {
        let (quota, slot, share) = (self.quota, self.slot, terms.share);
        let queued = self.has_reservations(key);
        let mut tally = self.tally_mut(key, terms.room)?;
        let free = if queued { 0 } else { tally.get().free(quota, slot, share) };
        // Alone the slot counts all it was charged; peered, only what this
        // locker owns of it goes out to the peers.
        tally.take_alone(if share.conserved() { cost.min(free) } else { cost });
        let excess = cost.saturating_sub(free);
        let ahead = match key {
            None => &mut self.unkeyed_ahead,
            Some(k) if excess == 0 => match self.ahead.get_mut(k) {
                Some(a) => a,
                None => return Ok(self.charged(now, key, free - cost, cost)),
            },
            Some(k) => self.ahead.entry(k.into()).or_default(),
        };
        // Each slot after takes what it may: its max alone, this locker's
        // own share of it peered (at least 1, so that a debt always ends).
        let members = share.members.max(1);
        let cap = |i: u64| match share.conserved() {
            true => share.owns(quota, slot + i).max(quota.max_requests() / members).max(1),
            false => quota.max_requests(),
        };
        carry(ahead, excess, cap);
        Ok(self.charged(now, key, free.saturating_sub(cost), cost))
    }

    /// The answer to a charge of `cost` for `key` at `now` with
    /// `remaining` left: the debt is every count the key holds in the
    /// slots after this one.
    fn charged(&self, now: Nanos, key: Option<&str>, remaining: u32, cost: u32) -> Charged {
        let (_, ahead) = self.current_and_ahead(key);
        let (queued, owed) = ahead.map_or((0, 0), |a| (a.len(), a.iter().map(|&n| u64::from(n)).sum::<u64>()));
        let max = self.quota.max_requests();
        let reset_after = self.wait_for(now, queued + 1);
        let remaining = if queued > 0 { 0 } else { remaining };
        let verdict = Verdict::go(max, remaining, reset_after, cost);
        Charged { verdict, debt: u32::try_from(owed).unwrap_or(u32::MAX) }
    }
}

/// Adds `excess` to the counts of the slots after the current one
/// (`ahead`, the first is slot + 1), filling each up to `cap` of it.
fn carry(ahead: &mut VecDeque<u32>, mut excess: u32, cap: impl Fn(u64) -> u32) {
    let mut i = 0;
    while excess > 0 {
        if ahead.len() <= i {
            ahead.push_back(0);
        }
        let room = cap(i as u64 + 1).saturating_sub(ahead[i]);
        let n = room.min(excess);
        ahead[i] += n;
        excess -= n;
        i += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::ask::Want;
    use crate::core::limit::Quota;
    use crate::core::room::KeyRoom;

    const S: Nanos = 1_000_000_000;

    fn ask(w: &mut FixedWindow, now: Nanos, cost: u32) -> Verdict {
        w.advance(now);
        w.take(now, Some("k"), Want::now(cost), KeyRoom::Free).unwrap()
    }

    fn charge(w: &mut FixedWindow, now: Nanos, cost: u32) -> Charged {
        w.advance(now);
        w.charge(now, Some("k"), cost, Leeway::ALONE).unwrap()
    }

    #[test]
    fn a_charge_past_max_carries_its_excess_into_the_following_slots() {
        // 10 per 1 s slot.
        let mut w = FixedWindow::new(Quota::new(10, 1.0).unwrap());
        let t = 100 * S;
        assert!(ask(&mut w, t, 4).go);
        let c = charge(&mut w, t + S / 4, 31);
        // 35 counted in this slot: 25 owed, 10 + 10 + 5 in the next three.
        assert_eq!((c.verdict.go, c.verdict.remaining, c.debt), (true, 0, 25));
        assert_eq!(c.verdict.reset_after, 3 * S + 3 * S / 4, "whole again when the third slot after ends");
        let v = ask(&mut w, t + S / 2, 1);
        assert!(!v.go);
        assert_eq!(v.retry_after, 2 * S + S / 2, "the third slot after has room");
        assert!(!ask(&mut w, t + S, 1).go, "the next slot starts full");
        assert!(!ask(&mut w, t + 2 * S, 1).go);
        let v = ask(&mut w, t + 3 * S, 6);
        assert!(!v.go, "5 of the debt count in the third slot");
        assert_eq!(v.retry_after, S);
        assert!(ask(&mut w, t + 3 * S, 5).go);
        assert!(ask(&mut w, t + 4 * S, 10).go, "paid");
    }

    #[test]
    fn a_charge_that_fits_owes_nothing() {
        let mut w = FixedWindow::new(Quota::new(10, 1.0).unwrap());
        let c = charge(&mut w, 0, 7);
        assert_eq!((c.verdict.remaining, c.debt), (3, 0));
        assert_eq!(ask(&mut w, 0, 3).remaining, 0);
    }
}
