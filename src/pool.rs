//! A permit pool: the client side of "many permits per round trip".
//!
//! A busy caller asks the locker for a batch of permits at once (up to
//! `batch`, taking as many as the slot has left) and hands them out locally,
//! one per `acquire`, without a round trip. The limit stays exact: the pool
//! never hands out more permits than the locker granted, and it drops the
//! ones left over when the slot they were granted in ends (a permit of an
//! ended slot would be counted in the wrong slot). After a grant of none it
//! answers sorry locally until the locker said to retry.
//!
//! The pool reads no clock and sends nothing itself: `now` comes in on every
//! call, and permits come from a `PermitSource`, so the rules are tested with
//! literal instants. The source that asks a locker needs the request field
//! `up_to` (reply field `granted`); until the locker has it, no source here
//! talks to one.

use std::time::{Duration, Instant};

/// What a locker granted in answer to a request for up to n permits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grant {
    /// Permits granted, from 0 to the number asked for.
    pub granted: u32,
    /// How long the granted permits stay usable: until the current slot
    /// ends, counted from when the request was sent (reply `reset_after_ms`).
    pub valid_for: Duration,
    /// When nothing was granted: how long until asking again can succeed
    /// (reply `retry_after_ms`).
    pub retry_after: Duration,
}

/// Where a pool gets its permits.
pub trait PermitSource {
    /// Why a batch could not be had.
    type Error;
    /// Asks for up to `want` permits at once.
    fn take_up_to(&mut self, want: u32) -> Result<Grant, Self::Error>;
}

impl<E, F: FnMut(u32) -> Result<Grant, E>> PermitSource for F {
    type Error = E;
    fn take_up_to(&mut self, want: u32) -> Result<Grant, E> {
        self(want)
    }
}

/// Permits fetched in batches and handed out one at a time.
#[derive(Debug)]
pub struct PermitPool<S> {
    source: S,
    batch: u32,
    left: u32,
    /// When the permits in hand stop being usable.
    valid_until: Option<Instant>,
    /// After a grant of none: when the locker may grant again.
    retry_at: Option<Instant>,
}

impl<S: PermitSource> PermitPool<S> {
    /// A pool that asks `source` for up to `batch` permits at a time
    /// (at least 1).
    pub fn new(source: S, batch: u32) -> PermitPool<S> {
        PermitPool { source, batch: batch.max(1), left: 0, valid_until: None, retry_at: None }
    }

    /// Permits in hand that are still usable at `now`.
    pub fn available(&self, now: Instant) -> u32 {
        if self.valid_until.is_some_and(|t| now < t) {
            self.left
        } else {
            0
        }
    }

    /// Takes one permit at `now`: `Ok(true)` for go, `Ok(false)` for sorry.
    /// Asks the source only when no usable permit is in hand and the
    /// locker has not just said none are left.
    pub fn acquire(&mut self, now: Instant) -> Result<bool, S::Error> {
        if self.available(now) > 0 {
            self.left -= 1;
            return Ok(true);
        }
        if self.retry_at.is_some_and(|t| now < t) {
            // The last grant was none, and its retry time has not come.
            return Ok(false);
        }
        self.refill(now)
    }

    fn refill(&mut self, now: Instant) -> Result<bool, S::Error> {
        // `now` is no later than when the locker decided, so counting the
        // validity from it can only end the pool's permits early, never late.
        let grant = self.source.take_up_to(self.batch)?;
        let granted = grant.granted.min(self.batch);
        self.left = granted.saturating_sub(1);
        if granted == 0 {
            self.valid_until = None;
            self.retry_at = Some(now + grant.retry_after);
            return Ok(false);
        }
        self.valid_until = Some(now + grant.valid_for);
        self.retry_at = None;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use std::cell::{Cell, RefCell};
    use std::convert::Infallible;
    use std::rc::Rc;

    use super::*;

    /// A fixed-window locker with `max` permits per `slot`, whose clock the
    /// test moves; it records what it granted in each slot.
    #[derive(Clone)]
    struct FakeLocker {
        t0: Instant,
        now: Rc<Cell<Instant>>,
        slot: Duration,
        max: u32,
        granted: Rc<RefCell<Vec<u32>>>,
        asks: Rc<Cell<u32>>,
    }

    impl FakeLocker {
        fn new(max: u32, slot: Duration) -> FakeLocker {
            let t0 = Instant::now();
            let (now, granted, asks) = (Rc::new(Cell::new(t0)), Rc::default(), Rc::default());
            FakeLocker { t0, now, slot, max, granted, asks }
        }

        fn slot_of(&self, t: Instant) -> usize {
            ((t - self.t0).as_nanos() / self.slot.as_nanos()) as usize
        }
    }

    impl PermitSource for FakeLocker {
        type Error = Infallible;
        fn take_up_to(&mut self, want: u32) -> Result<Grant, Infallible> {
            self.asks.set(self.asks.get() + 1);
            let now = self.now.get();
            let i = self.slot_of(now);
            let mut granted = self.granted.borrow_mut();
            if granted.len() <= i {
                granted.resize(i + 1, 0);
            }
            let n = want.min(self.max - granted[i]);
            granted[i] += n;
            let reset = self.t0 + self.slot * (i as u32 + 1) - now;
            Ok(Grant { granted: n, valid_for: reset, retry_after: if n == 0 { reset } else { Duration::ZERO } })
        }
    }

    #[test]
    fn never_hands_out_more_than_granted_nor_outside_its_slot() {
        let locker = FakeLocker::new(10, Duration::from_millis(100));
        let mut pool = PermitPool::new(locker.clone(), 4);
        let mut used = [0u32; 6];
        for ms in 0..600u64 {
            let now = locker.t0 + Duration::from_millis(ms);
            locker.now.set(now);
            for _ in 0..3 {
                if pool.acquire(now).unwrap() {
                    used[locker.slot_of(now)] += 1;
                }
            }
        }
        let granted = locker.granted.borrow();
        for (slot, &n) in used.iter().enumerate() {
            assert!(n <= granted[slot], "slot {slot}: used {n}, granted {}", granted[slot]);
            assert_eq!(n, 10, "slot {slot}: a busy caller fills every slot exactly");
        }
    }

    #[test]
    fn one_ask_serves_a_whole_batch() {
        let locker = FakeLocker::new(1000, Duration::from_secs(1));
        let mut pool = PermitPool::new(locker.clone(), 100);
        let now = locker.t0;
        assert!((0..100).all(|_| pool.acquire(now).unwrap()));
        assert_eq!(locker.asks.get(), 1);
        assert_eq!(pool.available(now), 0);
        assert!(pool.acquire(now).unwrap());
        assert_eq!(locker.asks.get(), 2);
    }

    #[test]
    fn after_a_grant_of_none_it_waits_for_the_retry_time() {
        let locker = FakeLocker::new(2, Duration::from_secs(1));
        let mut pool = PermitPool::new(locker.clone(), 8);
        let t = |ms| locker.t0 + Duration::from_millis(ms);
        assert!(pool.acquire(t(0)).unwrap() && pool.acquire(t(0)).unwrap());
        locker.now.set(t(10));
        assert!(!pool.acquire(t(10)).unwrap());
        let asks = locker.asks.get();
        assert!(!pool.acquire(t(500)).unwrap(), "still the same slot");
        assert_eq!(locker.asks.get(), asks, "answered locally");
        locker.now.set(t(1000));
        assert!(pool.acquire(t(1000)).unwrap(), "the next slot grants again");
    }

    #[test]
    fn leftover_permits_expire_with_their_slot() {
        let locker = FakeLocker::new(10, Duration::from_secs(1));
        let mut pool = PermitPool::new(locker.clone(), 10);
        let t = |ms| locker.t0 + Duration::from_millis(ms);
        locker.now.set(t(900));
        assert!(pool.acquire(t(900)).unwrap());
        assert_eq!(pool.available(t(999)), 9);
        assert_eq!(pool.available(t(1000)), 0, "the slot ended");
        locker.now.set(t(1000));
        assert!(pool.acquire(t(1000)).unwrap());
        assert_eq!(locker.asks.get(), 2);
    }

    #[test]
    fn a_closure_is_a_source() {
        let calls = Cell::new(0);
        let source = |want: u32| -> Result<Grant, ()> {
            calls.set(calls.get() + 1);
            Ok(Grant { granted: want / 2, valid_for: Duration::from_secs(1), retry_after: Duration::ZERO })
        };
        let mut pool = PermitPool::new(source, 10);
        let now = Instant::now();
        assert_eq!((0..5).filter(|_| pool.acquire(now).unwrap()).count(), 5);
        assert_eq!(calls.get(), 1);
    }
}
