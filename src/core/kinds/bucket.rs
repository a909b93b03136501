//! The token bucket, as GCRA: per key, one theoretical arrival time (TAT).
//!
//! A bucket of `burst` tokens refills at one token per `interval`
//! nanoseconds. Instead of a token count and a refill timer it keeps the
//! instant the bucket would be full again (the TAT): the tokens available at
//! `now` are `(burst * interval - (TAT - now)) / interval`, so refill is
//! computed from elapsed time to the nanosecond and no thread ever runs.
//! Taking n tokens moves the TAT n intervals later; a reservation moves it
//! past `now + burst * interval`, which makes every later ask wait behind it,
//! so reservations are served in arrival order. A key whose TAT has passed
//! holds a full bucket, exactly like a key never seen, so such keys are
//! dropped by a sweep at most once a refill period (and at least once a
//! second). This module knows nothing of names, sockets or clocks.
//!
//! The TATs live in an `InlineKeys` table: a key and its TAT share one
//! 32-byte slot, so a decision usually costs one cache line, as the fixed
//! window's does, and a batch prefetches its keys' lines.
//!
//! When lockers are peered, the bucket's tokens are conserved (see `peer`):
//! each locker holds a share of the bucket's room and refills it at that
//! share of the rate, and tokens move only as gifts, with their room.
//! Peered keys are kept aside, by key, in a `ledger` each, so a locker on
//! its own never pays for them.

use std::collections::HashMap;
use std::num::NonZeroU32;

use crate::core::ask::{Verdict, Want};
use crate::core::inline_keys::InlineKeys;
use crate::core::limit::{bucket_interval, Quota};
use crate::core::room::give_back_spare;
use crate::core::room::{KeyRoom, NoRoom};
use crate::core::time::{Nanos, NANOS_PER_SEC};

mod back;
mod charge;
mod kept;
mod ledger;
mod peer;

pub use ledger::Ledger;

/// Token buckets for every key of one limit.
#[derive(Debug)]
pub struct Bucket {
    /// Nanoseconds per token, rounded up so the rate is never above the quota's.
    interval: Nanos,
    burst: u32,
    /// `burst * interval`: how far ahead of `now` a TAT may be with tokens left.
    depth: Nanos,
    /// The refill period, whose epoch-aligned slots number the counts that
    /// peers exchange.
    quota: Quota,
    /// The unkeyed bucket's TAT, on its own.
    unkeyed: Nanos,
    /// Each live key's TAT, on its own.
    tats: InlineKeys<Nanos>,
    /// The unkeyed bucket's share, when peered.
    unkeyed_peered: Option<Box<Ledger>>,
    /// Each live key's share, when peered; such a key is not in `tats`.
    ledgers: HashMap<Box<str>, Ledger>,
    /// What an earlier run's state file said of each peered key's share,
    /// until the key is first held (see `kept`).
    earlier: HashMap<Option<Box<str>>, kept::Earlier>,
    /// This locker's own room of the bucket as last seen, for the sweep
    /// (`Share::holds`).
    base: u32,
    next_sweep: Nanos,
}

impl Bucket {
    /// A bucket of `burst` tokens refilled at the quota's max_requests per in_seconds.
    pub fn new(quota: Quota, burst: NonZeroU32) -> Bucket {
        // `Limit` refuses buckets deeper than a year, so the depth fits.
        let interval = bucket_interval(quota);
        let burst = burst.get();
        Bucket {
            interval,
            burst,
            depth: interval.saturating_mul(u64::from(burst)),
            quota,
            unkeyed: 0,
            tats: InlineKeys::new(),
            unkeyed_peered: None,
            ledgers: HashMap::new(),
            earlier: HashMap::new(),
            base: 0,
            next_sweep: 0,
        }
    }

    /// Takes a new rate and burst, keeping every key's state when the
    /// refill period is the same (its epoch-aligned periods number the
    /// counts peers exchange); returns false, changing nothing, otherwise.
    pub fn retune(&mut self, quota: Quota, burst: NonZeroU32) -> bool {
        if quota.slot_ns() != self.quota.slot_ns() {
            return false;
        }
        let fresh = Bucket::new(quota, burst);
        (self.interval, self.burst, self.depth, self.quota) = (fresh.interval, fresh.burst, fresh.depth, fresh.quota);
        true
    }

    /// Nanoseconds per token at the steady rate.
    pub fn interval(&self) -> Nanos {
        self.interval
    }

    /// How long peers remember a run after they last heard of it (see
    /// `Rule::memory`): two refill periods and `burst / rate`. Its gifts
    /// end with the period they are of, which ends within a period of its
    /// last message (the second period covers a run whose clock was a
    /// little ahead); its room, which its grants may have emptied, comes
    /// back full `burst / rate` (the depth) after its last gift ended. A
    /// later run that did not learn of it holds a full room at once, which
    /// is only safe once the earlier room would have refilled.
    pub fn memory(&self) -> Nanos {
        self.quota.slot_ns().saturating_mul(2).saturating_add(self.depth)
    }

    /// Keys whose bucket is not full, or that hold a period's wants and
    /// gifts.
    pub fn live_keys(&self) -> usize {
        self.tats.len() + self.ledgers.len()
    }

    /// Drops keys whose bucket has refilled, once per refill period at most;
    /// returns how many were dropped.
    pub fn advance(&mut self, now: Nanos) -> usize {
        if now < self.next_sweep {
            return 0;
        }
        self.next_sweep = now.saturating_add(self.depth.max(NANOS_PER_SEC));
        let before = self.live_keys();
        self.sweep_peered(now);
        give_back_spare(&mut self.ledgers);
        self.tats.retain(|_, tat| *tat > now);
        before - self.live_keys()
    }

    /// The next sweep, while there are keys for it to drop: the loop wakes
    /// then even without a request, so a flood's memory comes back.
    pub fn next_deadline(&self) -> Option<Nanos> {
        (self.live_keys() > 0).then_some(self.next_sweep)
    }

    /// Bytes the keys' tables hold on the heap, roughly (not the peers'
    /// ledgers' own entries). Walks the long keys: for stats only.
    pub fn heap_bytes(&self) -> usize {
        self.tats.heap_bytes() + self.ledgers.capacity() * (std::mem::size_of::<(Box<str>, Ledger)>() + 1)
    }

    /// Starts loading `key`'s TAT into the cache (see
    /// `InlineKeys::prefetch`); the unkeyed bucket needs nothing.
    #[inline]
    pub fn prefetch(&self, key: Option<&str>) {
        if let Some(k) = key {
            self.tats.prefetch(k);
        }
    }

    /// Takes tokens for `key` as `want` says, now or (with `max_wait`) as a
    /// reservation; otherwise takes nothing and answers sorry. `want.cost`
    /// must be at most `burst`; the caller checks.
    pub fn take(&mut self, now: Nanos, key: Option<&str>, want: Want, room: KeyRoom) -> Result<Verdict, NoRoom> {
        let stored = self.tat(key);
        let tat = stored.max(now);
        let available = self.available(now, tat);
        let sorry = Verdict::sorry(self.burst, available, 0, tat - now);
        if want.cost == 0 {
            let retry_after = self.wait_for(now, tat, 1);
            return Ok(Verdict { go: available > 0, retry_after, ..sorry });
        }
        let (granted, wait) = if available >= want.need() {
            (want.grant(available), 0)
        } else {
            // At the instant `need` tokens fit, no more than `need` do.
            (want.need(), self.wait_for(now, tat, want.need()))
        };
        if wait > want.max_wait {
            return Ok(Verdict { retry_after: wait, ..sorry });
        }
        let tat = tat.saturating_add(self.interval.saturating_mul(u64::from(granted)));
        self.store(key, tat, room)?;
        // The TAT moved by whole intervals: that many fewer tokens, with
        // no second division (none left when it moved past the depth).
        let remaining = available.saturating_sub(granted);
        Ok(Verdict { go: true, granted, wait, ..Verdict::sorry(self.burst, remaining, 0, tat - now) })
    }

    /// Answers sorry without taking, for a locker that may not grant yet;
    /// `retry_after` is when it may.
    pub fn refuse(&self, now: Nanos, key: Option<&str>, retry_after: Nanos) -> Verdict {
        let tat = self.tat(key).max(now);
        Verdict::sorry(self.burst, self.available(now, tat), retry_after, tat - now)
    }

    /// `key`'s TAT; 0 (a full bucket) for a key not held.
    #[inline]
    fn tat(&self, key: Option<&str>) -> Nanos {
        match key {
            None => self.unkeyed,
            Some(k) => self.tats.get(k).copied().unwrap_or(0),
        }
    }

    /// Whole tokens available at `now` for a key whose TAT is `tat` (>= now).
    fn available(&self, now: Nanos, tat: Nanos) -> u32 {
        let slack = self.depth.saturating_sub(tat - now);
        (slack / self.interval) as u32
    }

    /// Nanoseconds from `now` until `n` tokens are available.
    fn wait_for(&self, now: Nanos, tat: Nanos, n: u32) -> Nanos {
        let needed = tat.saturating_add(self.interval.saturating_mul(u64::from(n)));
        needed.saturating_sub(self.depth).saturating_sub(now)
    }

    fn store(&mut self, key: Option<&str>, tat: Nanos, room: KeyRoom) -> Result<(), NoRoom> {
        match key {
            None => self.unkeyed = tat,
            Some(k) => match self.tats.get_mut(k) {
                Some(t) => *t = tat,
                None => match room {
                    KeyRoom::Free => self.tats.insert(k, tat),
                    KeyRoom::Full => return Err(NoRoom),
                },
            },
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Nanos = 1_000_000;

    /// 10 per second (one token per 100 ms), burst 3.
    fn bucket() -> Bucket {
        Bucket::new(Quota::new(10, 1.0).unwrap(), NonZeroU32::new(3).unwrap())
    }

    fn ask(b: &mut Bucket, now: Nanos, want: Want) -> Verdict {
        b.advance(now);
        b.take(now, Some("k"), want, KeyRoom::Free).unwrap()
    }

    #[test]
    fn a_burst_then_one_token_per_interval() {
        let mut b = bucket();
        let t = 1_000 * MS;
        for left in [2, 1, 0] {
            let v = ask(&mut b, t, Want::now(1));
            assert!(v.go);
            assert_eq!(v.remaining, left);
        }
        let v = ask(&mut b, t, Want::now(1));
        assert!(!v.go);
        assert_eq!(v.retry_after, 100 * MS);
        assert!(!ask(&mut b, t + 100 * MS - 1, Want::now(1)).go, "a nanosecond early");
        assert!(ask(&mut b, t + 100 * MS, Want::now(1)).go);
        assert!(!ask(&mut b, t + 150 * MS, Want::now(1)).go);
        let later = ask(&mut b, t + 10_000 * MS, Want::now(3));
        assert!(later.go, "a long pause refills only up to burst");
        assert!(!ask(&mut b, t + 10_000 * MS, Want::now(1)).go);
    }

    #[test]
    fn reservations_are_spaced_at_the_steady_rate_in_arrival_order() {
        let mut b = bucket();
        let t = 1_000 * MS;
        ask(&mut b, t, Want::now(3));
        let patient = Want { cost: 1, up_to: false, max_wait: 250 * MS };
        assert_eq!(ask(&mut b, t, patient).wait, 100 * MS);
        assert_eq!(ask(&mut b, t, patient).wait, 200 * MS);
        let v = ask(&mut b, t, patient);
        assert!(!v.go, "the next token comes after 300 ms");
        assert_eq!(v.retry_after, 300 * MS);
        assert!(!ask(&mut b, t + 150 * MS, Want::now(1)).go, "no jumping ahead of reservations");
    }

    #[test]
    fn up_to_takes_what_is_there_and_zero_peeks() {
        let mut b = bucket();
        let batch = Want { cost: 3, up_to: true, max_wait: 0 };
        assert_eq!(ask(&mut b, 0, Want::now(2)).remaining, 1);
        let v = ask(&mut b, 0, batch);
        assert_eq!((v.go, v.granted, v.remaining), (true, 1, 0));
        let peek = ask(&mut b, 0, Want::now(0));
        assert!(!peek.go);
        assert_eq!((peek.granted, peek.retry_after), (0, 100 * MS));
        assert_eq!(ask(&mut b, 200 * MS, batch).granted, 2);
    }

    #[test]
    fn full_buckets_are_swept() {
        let mut b = bucket();
        ask(&mut b, 0, Want::now(1));
        assert_eq!(b.live_keys(), 1);
        assert_eq!(b.advance(50 * MS), 0, "not before the next sweep");
        assert_eq!(b.advance(2_000 * MS), 1);
        assert_eq!(b.next_deadline(), None);
    }

    proptest::proptest! {
        /// In any span of time the bucket grants at most burst + rate x span,
        /// counting reservations at the instant they may go.
        #[test]
        fn never_grants_more_than_burst_plus_rate_times_elapsed(
            asks in proptest::collection::vec((0u64..150, 0u32..=3, 0u64..400, proptest::bool::ANY), 1..80),
        ) {
            let mut b = bucket();
            let mut grants = Vec::new();
            let mut now = 0;
            for (gap_ms, cost, wait_ms, up_to) in asks {
                now += gap_ms * MS;
                let v = ask(&mut b, now, Want { cost, up_to, max_wait: wait_ms * MS });
                if v.granted > 0 {
                    grants.push((now + v.wait, v.granted));
                    let peek = ask(&mut b, now, Want::now(0));
                    proptest::prop_assert_eq!(v.remaining, peek.remaining, "remaining is what is left");
                }
            }
            grants.sort();
            for (i, &(start, _)) in grants.iter().enumerate() {
                let mut taken = 0;
                for &(at, n) in &grants[i..] {
                    taken += u64::from(n);
                    // 10 per second: span / 100 ms tokens, plus the burst of 3.
                    proptest::prop_assert!(taken <= 3 + (at - start) / (100 * MS), "{} by {}", taken, at - start);
                }
            }
        }
    }
}
