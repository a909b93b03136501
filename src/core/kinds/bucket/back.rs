//! Tokens given back to a bucket: a refund moves a key's TAT back by whole
//! intervals (never before `now`, so a full bucket stays full), and a
//! reset fills it. Peered, the tokens go back to this locker's own share
//! (its ledger), never a peer's. Pure arithmetic.

use super::Bucket;
use crate::core::time::Nanos;

impl Bucket {
    /// Gives back up to `n` of the tokens `key` lacks at `now`; returns how
    /// many. Call `advance` first.
    pub fn give_back(&mut self, now: Nanos, key: Option<&str>, n: u32) -> u32 {
        let (interval, depth) = (self.interval, self.depth);
        let ledger = match key {
            None => self.unkeyed_peered.as_deref_mut(),
            Some(k) => self.ledgers.get_mut(k),
        };
        if let Some(ledger) = ledger {
            return ledger.give_back(now, depth, n);
        }
        let tat = match key {
            None => Some(&mut self.unkeyed),
            Some(k) => self.tats.get_mut(k),
        };
        let Some(tat) = tat else { return 0 };
        let lacked = tat.saturating_sub(now) / interval;
        let back = u32::try_from(lacked).unwrap_or(u32::MAX).min(n);
        *tat -= interval * u64::from(back);
        back
    }

    /// Fills `key`'s bucket (this locker's share of it, peered); returns
    /// whether it lacked anything.
    pub fn clear(&mut self, now: Nanos, key: Option<&str>) -> bool {
        let back = self.give_back(now, key, u32::MAX);
        // Less than a whole token may be left lacking.
        let rest = self.tat_of(key).is_some_and(|tat| tat > now);
        if rest {
            self.store_tat(key, now);
        }
        back > 0 || rest
    }

    fn tat_of(&self, key: Option<&str>) -> Option<Nanos> {
        match key {
            None => Some(self.unkeyed),
            Some(k) => self.tats.get(k).copied(),
        }
    }

    fn store_tat(&mut self, key: Option<&str>, tat: Nanos) {
        match key {
            None => self.unkeyed = tat,
            Some(k) => {
                if let Some(t) = self.tats.get_mut(k) {
                    *t = tat;
                }
            }
        }
    }
}
