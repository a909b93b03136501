//! A token bucket shared across peers: per key, the cumulative grants each
//! node made in each refill period, and how a peer's grants move the key's
//! TAT.
//!
//! Peers exchange the same cumulative counts as fixed windows do, numbered
//! by the limit's `in_seconds` period aligned to the epoch. A receiver keeps
//! the largest count heard per (node, period) and absorbs only the growth,
//! `delta x interval` on the TAT, so repeats and reordering change nothing
//! and a later count repairs a lost one. Counts of the current and the
//! previous period are kept, so a grant made just before a period boundary
//! is still absorbed when its count arrives just after. This module does
//! the arithmetic only: no clock, no names, no wire format. It stays with
//! the bucket, not under `core::peering`, because it moves the bucket's
//! private TATs; `Rule::merge` (in `core::kinds`) calls it.

use super::{absorb, Bucket};
use crate::core::room::{KeyRoom, NoRoom};
use crate::core::share::ME;
use crate::core::share::{Count, NodeIx};
use crate::core::time::Nanos;

/// One node's cumulative grants from one key in one period.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    node: NodeIx,
    period: u64,
    count: u32,
    /// Own grants since the last repair publish.
    touched: bool,
}

/// The grants made from one key, per node and period, this locker's own
/// (`ME`) among them. Empty, it allocates nothing, so a locker that
/// is not peered pays only for an empty `Vec` per key.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Ledger {
    entries: Vec<Entry>,
}

impl Ledger {
    /// Forgets counts of periods before `oldest`.
    pub fn prune(&mut self, oldest: u64) {
        self.entries.retain(|e| e.period >= oldest);
    }

    /// Whether no count is held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn entry(&mut self, node: NodeIx, period: u64) -> &mut Entry {
        let i = match self.entries.iter().position(|e| e.node == node && e.period == period) {
            Some(i) => i,
            None => {
                self.entries.push(Entry { node, period, count: 0, touched: false });
                self.entries.len() - 1
            }
        };
        &mut self.entries[i]
    }

    /// Adds `n` own grants in `period`; returns the own count to publish.
    pub fn add_own(&mut self, period: u64, n: u32) -> u32 {
        let e = self.entry(ME, period);
        e.count = e.count.saturating_add(n);
        e.touched = true;
        e.count
    }

    /// Records that `node` granted `count` in all in `period`. Returns the
    /// growth over what was known, which is what the TAT must absorb.
    pub fn merge(&mut self, node: NodeIx, period: u64, count: u32) -> u32 {
        let e = self.entry(node, period);
        let grew = count.saturating_sub(e.count);
        e.count = e.count.max(count);
        grew
    }

    /// Every (node, period, count) held.
    pub fn counts(&self) -> impl Iterator<Item = (NodeIx, u64, u32)> + '_ {
        self.entries.iter().filter(|e| e.count > 0).map(|e| (e.node, e.period, e.count))
    }

    /// Calls `f` with each own (period, count) granted since the last call.
    fn drain_touched(&mut self, mut f: impl FnMut(u64, u32)) {
        for e in self.entries.iter_mut().filter(|e| e.touched) {
            e.touched = false;
            f(e.period, e.count);
        }
    }
}

impl Bucket {
    /// The period `now` falls in: the number peers' counts carry.
    pub fn period(&self, now: Nanos) -> u64 {
        self.quota.slot_of(now)
    }

    /// The oldest period whose counts are still kept at `now`.
    pub(super) fn oldest_period(&self, now: Nanos) -> u64 {
        self.period(now).saturating_sub(1)
    }

    /// Whether a count for `period` received at `now` is merged: the
    /// current or the previous period, or the next one when it starts less
    /// than a quarter period from now (a peer whose clock runs a little
    /// ahead).
    fn fits(&self, now: Nanos, period: u64) -> bool {
        let current = self.period(now);
        let early = self.quota.slot_end(current) <= now.saturating_add(self.quota.slot_ns() / 4);
        period >= self.oldest_period(now) && (period <= current || (period == current + 1 && early))
    }

    /// Records `n` tokens this locker granted from `key` at `now`; returns
    /// the period and the own count in it, for the peers.
    pub fn note_own(&mut self, now: Nanos, key: Option<&str>, n: u32) -> (u64, u32) {
        let (period, oldest) = (self.period(now), self.oldest_period(now));
        let k = self.key_mut(key);
        k.ledger.prune(oldest);
        (period, k.ledger.add_own(period, n))
    }

    /// Merges `c`, the cumulative grants of `c.node` from `c.key` in the
    /// period `c.slot`, received at `now`: the growth over what was heard
    /// moves the TAT. Returns whether anything changed; a count for a
    /// period that does not fit, or no larger than known, changes nothing.
    pub fn merge(&mut self, now: Nanos, c: &Count, room: KeyRoom) -> Result<bool, NoRoom> {
        let (key, period) = (c.key.as_deref(), c.slot);
        if !self.fits(now, period) {
            return Ok(false);
        }
        if let (Some(k), KeyRoom::Full) = (key, room) {
            if !self.tats.contains_key(k) {
                return Err(NoRoom);
            }
        }
        let (oldest, interval) = (self.oldest_period(now), self.interval);
        let k = self.key_mut(key);
        k.ledger.prune(oldest);
        let grew = k.ledger.merge(c.node, period, c.count);
        if grew > 0 {
            absorb(k.tat, now, interval, grew);
        }
        Ok(grew > 0)
    }

    /// Calls `f` with every count held for the periods kept at `now`: own
    /// and each peer node's, per key (`None` for the unkeyed bucket).
    pub fn counts(&self, now: Nanos, mut f: impl FnMut(Option<&str>, u64, NodeIx, u32)) {
        let oldest = self.oldest_period(now);
        let keyed = self.ledgers.iter().map(|(k, ledger)| (Some(&**k), ledger));
        for (key, ledger) in std::iter::once((None, &self.unkeyed.ledger)).chain(keyed) {
            for (node, period, count) in ledger.counts().filter(|c| c.1 >= oldest) {
                f(key, period, node, count);
            }
        }
    }

    /// Calls `f` with each own (key, period, count) granted since the last
    /// call, for republishing.
    pub fn drain_touched(&mut self, mut f: impl FnMut(Option<&str>, u64, u32)) {
        self.unkeyed.ledger.drain_touched(|p, c| f(None, p, c));
        for (key, ledger) in self.ledgers.iter_mut() {
            ledger.drain_touched(|p, c| f(Some(key), p, c));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::limit::LimitId;
    use crate::core::limit::Quota;
    use crate::core::room::KeyRoom::Free;
    use crate::core::{Verdict, Want};
    use std::num::NonZeroU32;

    const MS: Nanos = 1_000_000;
    /// The start of a 1 s period.
    const T0: Nanos = 1_000_000 * MS;

    /// 10 per second (one token per 100 ms), burst 3.
    fn bucket() -> Bucket {
        Bucket::new(Quota::new(10, 1.0).unwrap(), NonZeroU32::new(3).unwrap())
    }

    /// `count` granted in all by `node` from `key` in `period`.
    fn heard(key: &str, period: u64, node: NodeIx, count: u32) -> Count {
        Count::granted(LimitId(0), Some(key), period, node, count)
    }

    fn ask(b: &mut Bucket, now: Nanos) -> Verdict {
        b.take(now, Some("k"), Want::now(1), Free).unwrap()
    }

    #[test]
    fn only_growth_is_absorbed_whatever_the_order() {
        let mut b = bucket();
        let p = b.period(T0);
        assert!(b.merge(T0, &heard("k", p, 1, 2), Free).unwrap());
        assert!(!b.merge(T0, &heard("k", p, 1, 2), Free).unwrap(), "a repeat");
        assert!(!b.merge(T0, &heard("k", p, 1, 1), Free).unwrap(), "an older count, late");
        assert_eq!(ask(&mut b, T0).remaining, 0, "2 by the peer, 1 here, of 3");
        assert!(!ask(&mut b, T0).go);
    }

    #[test]
    fn a_later_count_repairs_a_lost_one() {
        let mut b = bucket();
        let p = b.period(T0);
        b.merge(T0, &heard("k", p, 1, 1), Free).unwrap();
        // The count 2 was lost; 3 arrives.
        b.merge(T0, &heard("k", p, 1, 3), Free).unwrap();
        assert!(!ask(&mut b, T0).go, "the peer took the whole burst");
        assert!(ask(&mut b, T0 + 100 * MS).go, "and the bucket refills at the rate");
    }

    #[test]
    fn the_previous_period_is_still_absorbed_and_older_ones_are_not() {
        let mut b = bucket();
        let p = b.period(T0);
        assert!(b.merge(T0 + 1000 * MS, &heard("k", p, 1, 3), Free).unwrap(), "granted just before the boundary");
        assert!(!ask(&mut b, T0 + 1000 * MS).go);
        assert!(!b.merge(T0 + 2500 * MS, &heard("k", p, 1, 3), Free).unwrap());
        assert!(!b.merge(T0 + 2500 * MS, &heard("x", p, 1, 3), Free).unwrap(), "two periods late");
        assert!(b.merge(T0 + 2500 * MS, &heard("k", p + 2, 1, 1), Free).unwrap());
        let early = T0 + 2800 * MS;
        assert!(b.merge(early, &heard("k", p + 3, 1, 1), Free).unwrap(), "a peer's clock a little ahead");
        assert!(!b.merge(early, &heard("k", p + 4, 1, 1), Free).unwrap(), "too far ahead");
    }

    #[test]
    fn own_grants_are_counted_per_period_and_drained_once() {
        let mut b = bucket();
        let p = b.period(T0);
        ask(&mut b, T0);
        assert_eq!(b.note_own(T0, Some("k"), 1), (p, 1));
        ask(&mut b, T0 + 100 * MS);
        assert_eq!(b.note_own(T0 + 100 * MS, Some("k"), 1), (p, 2));
        let mut drained = Vec::new();
        b.drain_touched(|k, p, c| drained.push((k.map(String::from), p, c)));
        assert_eq!(drained, [(Some("k".to_owned()), p, 2)]);
        b.drain_touched(|_, _, _| panic!("nothing granted since"));
        b.merge(T0, &heard("k", p, 4, 1), Free).unwrap();
        let mut all = Vec::new();
        b.counts(T0, |_, p, node, c| all.push((p, node, c)));
        all.sort();
        assert_eq!(all, [(p, ME, 2), (p, 4, 1)]);
    }

    #[test]
    fn a_key_holding_peer_counts_stays_live_until_its_periods_end() {
        let mut b = bucket();
        let p = b.period(T0);
        b.merge(T0, &heard("k", p, 1, 1), Free).unwrap();
        assert_eq!(b.live_keys(), 1);
        b.advance(T0 + 1500 * MS);
        assert_eq!(b.live_keys(), 1, "the count may still be repeated");
        assert_eq!(b.advance(T0 + 3000 * MS), 1);
        assert_eq!(b.merge(T0 + 3000 * MS, &heard("n", p + 3, 1, 1), KeyRoom::Full), Err(NoRoom));
    }
}
