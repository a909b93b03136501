//! Tokens charged to a bucket after they were used (`op: charge`): taken
//! whatever is left, so the tokens go below zero and later asks wait until
//! the refill brings them back to their cost.
//!
//! Alone, the TAT moves `cost` intervals later, past `now + depth` if it
//! must: tokens are negative while the TAT is more than a depth ahead, and
//! `wait_for` already says exactly when `n` are back. Peered, the charge
//! is this locker's own share's debt (its ledger's lack beyond its room):
//! it grants and gives nothing from that share until its own refill, or a
//! peer's gift, covers it; no peer's tokens are taken. No clock: the
//! caller brings `now`.

use super::Bucket;
use crate::core::ask::{Charged, Verdict};
use crate::core::room::{Leeway, NoRoom};
use crate::core::time::Nanos;

impl Bucket {
    /// Takes `cost` tokens for `key` at `now`, past zero if need be, from
    /// the whole bucket alone or from this locker's share when peered
    /// (`terms`). Call `advance` first.
    pub fn charge(&mut self, now: Nanos, key: Option<&str>, cost: u32, terms: Leeway) -> Result<Charged, NoRoom> {
        let (burst, depth) = (self.burst, self.depth);
        if terms.share.conserved() {
            let k = self.peered_mut(now, key, terms.room, terms.share)?;
            k.take(now, depth, cost);
            let verdict = Verdict::go(burst, k.available(now, depth), k.full_in(now), cost);
            return Ok(Charged { verdict, debt: k.debt(now, depth) });
        }
        let tat = self.tat(key).max(now).saturating_add(self.interval.saturating_mul(u64::from(cost)));
        self.store(key, tat, terms.room)?;
        let owed = (tat - now).saturating_sub(depth).div_ceil(self.interval);
        let verdict = Verdict::go(burst, self.available(now, tat), tat - now, cost);
        Ok(Charged { verdict, debt: u32::try_from(owed).unwrap_or(u32::MAX) })
    }
}

#[cfg(test)]
mod tests {
    use std::num::NonZeroU32;

    use super::*;
    use crate::core::ask::Want;
    use crate::core::limit::Quota;
    use crate::core::room::KeyRoom;

    const MS: Nanos = 1_000_000;

    /// 10 per second (one token per 100 ms), burst 3.
    fn bucket() -> Bucket {
        Bucket::new(Quota::new(10, 1.0).unwrap(), NonZeroU32::new(3).unwrap())
    }

    #[test]
    fn a_charge_past_zero_is_taken_and_asks_wait_for_the_refill() {
        let mut b = bucket();
        let t = 1_000 * MS;
        let c = b.charge(t, Some("k"), 5, Leeway::ALONE).unwrap();
        assert_eq!((c.verdict.go, c.verdict.granted, c.verdict.remaining, c.debt), (true, 5, 0, 2));
        assert_eq!(c.verdict.reset_after, 500 * MS, "full again after 5 intervals");
        // -2 tokens: one token is back after 3 intervals.
        let v = b.take(t, Some("k"), Want::now(1), KeyRoom::Free).unwrap();
        assert!(!v.go);
        assert_eq!(v.retry_after, 300 * MS);
        assert!(!b.take(t + 300 * MS - 1, Some("k"), Want::now(1), KeyRoom::Free).unwrap().go);
        assert!(b.take(t + 300 * MS, Some("k"), Want::now(1), KeyRoom::Free).unwrap().go);
    }

    #[test]
    fn a_charge_within_the_tokens_left_owes_nothing() {
        let mut b = bucket();
        let c = b.charge(0, None, 2, Leeway::ALONE).unwrap();
        assert_eq!((c.verdict.remaining, c.debt), (1, 0));
        let c = b.charge(0, None, 1, Leeway::ALONE).unwrap();
        assert_eq!((c.verdict.remaining, c.debt), (0, 0));
    }
}
