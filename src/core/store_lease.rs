//! Semaphore leases kept in a shared store: the call a locker makes for an
//! acquire, a heartbeat or a release, and the store's answer read back as
//! the semaphore's verdict.
//!
//! With a store, a semaphore is not counted by this locker at all: the
//! store runs the same rules as `kinds::semaphore` (hold, queue, expiry in
//! deadline order, restore) on one record per semaphore, by its own clock,
//! so every locker sees every lease. A call is checked first by the
//! locker's own rules (`Leases::lease_for`, `Leases::beat_terms`), so a bad
//! count or ttl never reaches the store.
//!
//! Pure: it names what to ask and reads the answer; the daemon's store
//! thread turns one into a script call and the reply into the other. It
//! never touches a socket or a clock.

use crate::core::kinds::semaphore::{Hold, LeaseState, LeaseVerdict, NoCapacity};
use crate::core::time::Nanos;

/// Names one lease call, to match its answer.
pub type CallId = u64;

/// What a lease call does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseOp {
    /// Takes a new lease (queued up to `hold.max_wait` when it cannot be
    /// held now).
    Acquire(Hold),
    /// Extends a lease by `ttl`; with `restore`, re-creates an unknown one
    /// of that count when it is free.
    Heartbeat { ttl: Nanos, restore: Option<u32> },
    /// Frees a lease.
    Release,
}

/// A lease call for the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseCall {
    pub id: CallId,
    /// The semaphore's name: the store's record is named by it.
    pub name: Box<str>,
    /// The semaphore's capacity, which the store counts against.
    pub capacity: u32,
    pub lease: Box<str>,
    pub op: LeaseOp,
}

/// The store's verdict on a lease call, its times relative to the store's
/// now (the locker's clock and the store's need not agree).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreLease {
    pub state: StoreLeaseState,
    /// For a held or pending lease: microseconds until it expires or its
    /// wait ends.
    pub left_us: u64,
    pub capacity: u32,
    pub free: u32,
}

/// What the store says a lease is now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreLeaseState {
    Held,
    Pending,
    Refused,
    Released,
    Unknown,
    /// A restore asked for more than is free.
    NoCapacity,
}

/// The store's answer to a lease call: a verdict, or why the store could
/// not be asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseAnswer {
    pub id: CallId,
    pub result: Result<StoreLease, String>,
}

impl StoreLease {
    /// Reads the store's `{state, left_us, capacity, free}`; the state's
    /// codes are the script's (1 held, 2 pending, 3 refused, 4 released,
    /// 5 unknown, 6 no capacity).
    pub fn from_numbers(numbers: &[i64]) -> Result<StoreLease, String> {
        let [state, left_us, capacity, free] = numbers[..] else {
            return Err(format!("the store's lease answer has {} numbers, not 4", numbers.len()));
        };
        let state = match state {
            1 => StoreLeaseState::Held,
            2 => StoreLeaseState::Pending,
            3 => StoreLeaseState::Refused,
            4 => StoreLeaseState::Released,
            5 => StoreLeaseState::Unknown,
            6 => StoreLeaseState::NoCapacity,
            other => return Err(format!("the store's lease answer has an unknown state {other}")),
        };
        let n = |x: i64| u32::try_from(x.max(0)).unwrap_or(u32::MAX);
        Ok(StoreLease { state, left_us: u64::try_from(left_us).unwrap_or(0), capacity: n(capacity), free: n(free) })
    }

    /// The verdict as the semaphore would give it, its deadline placed on
    /// the locker's clock at `now`.
    pub fn verdict(&self, now: Nanos) -> Result<LeaseVerdict, NoCapacity> {
        let until = now.saturating_add(self.left_us.saturating_mul(1_000));
        let state = match self.state {
            StoreLeaseState::Held => LeaseState::Held { until },
            StoreLeaseState::Pending => LeaseState::Pending { until },
            StoreLeaseState::Refused => LeaseState::Refused,
            StoreLeaseState::Released => LeaseState::Released,
            StoreLeaseState::Unknown => LeaseState::Unknown,
            StoreLeaseState::NoCapacity => return Err(NoCapacity { free: self.free }),
        };
        Ok(LeaseVerdict { state, capacity: self.capacity, free: self.free })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stores_numbers_read_as_the_semaphores_verdict_on_the_lockers_clock() {
        let held = StoreLease::from_numbers(&[1, 1_500, 4, 1]).unwrap();
        let v = held.verdict(1_000_000).unwrap();
        assert_eq!(v, LeaseVerdict { state: LeaseState::Held { until: 2_500_000 }, capacity: 4, free: 1 });
        let pending = StoreLease::from_numbers(&[2, 10, 4, 0]).unwrap().verdict(0).unwrap();
        assert_eq!(pending.state, LeaseState::Pending { until: 10_000 });
        let states: Vec<_> =
            (3..=5).map(|s| StoreLease::from_numbers(&[s, 0, 4, 4]).unwrap().verdict(0).unwrap().state).collect();
        assert_eq!(states, [LeaseState::Refused, LeaseState::Released, LeaseState::Unknown]);
        assert_eq!(StoreLease::from_numbers(&[6, 0, 4, 2]).unwrap().verdict(0), Err(NoCapacity { free: 2 }));
    }

    #[test]
    fn a_malformed_answer_is_an_error_not_a_verdict() {
        assert!(StoreLease::from_numbers(&[1, 2, 3]).unwrap_err().contains("3 numbers"));
        assert!(StoreLease::from_numbers(&[9, 0, 1, 1]).unwrap_err().contains("unknown state 9"));
        let negative = StoreLease::from_numbers(&[1, -5, 4, -1]).unwrap();
        assert_eq!((negative.left_us, negative.free), (0, 0), "nothing negative leaks into a verdict");
    }
}
