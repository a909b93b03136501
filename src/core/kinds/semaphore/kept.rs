//! What a semaphore keeps across a restart: its held leases, each with its
//! count, ttl and expiry, read after an acquire or heartbeat for the state
//! log and put back on start.
//!
//! A pending lease is not kept: its holder learns by heartbeat whether it
//! was granted, and after a restart that heartbeat, carrying the count,
//! restores it. No clock, no file: the caller brings both.

use super::{Semaphore, SemaphoreLease};
use crate::core::time::Nanos;

/// A held lease as the state log keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeldLease {
    pub count: u32,
    pub ttl: Nanos,
    pub until: Nanos,
}

impl Semaphore {
    /// Lease `id`, if it is held.
    pub fn held(&self, id: &str) -> Option<HeldLease> {
        let l = self.leases.get(id).filter(|l| !l.pending)?;
        Some(HeldLease { count: l.count, ttl: l.ttl, until: l.until })
    }

    /// Puts back lease `id` as held until `lease.until`, if that is after
    /// `now`, the id is not taken and its count is free. Returns whether it
    /// was put back.
    pub fn restore(&mut self, now: Nanos, id: &str, lease: HeldLease) -> bool {
        if lease.until <= now || self.leases.contains_key(id) || self.free() < lease.count {
            return false;
        }
        self.insert(
            id,
            SemaphoreLease { count: lease.count, ttl: lease.ttl, until: lease.until, pending: false, watched: false },
        );
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::kinds::semaphore::Hold;

    #[test]
    fn a_held_lease_is_read_and_put_back_with_its_expiry() {
        let mut s = Semaphore::new(2);
        s.acquire(0, "a", Hold { count: 2, ttl: 30, max_wait: 0 });
        let held = s.held("a").unwrap();
        assert_eq!(held, HeldLease { count: 2, ttl: 30, until: 30 });
        assert_eq!(s.held("b"), None);

        let mut back = Semaphore::new(2);
        assert!(!back.restore(30, "a", held), "expired across the downtime");
        assert!(back.restore(10, "a", held));
        assert!(!back.restore(10, "a", held), "already held");
        assert_eq!((back.free(), back.next_deadline()), (0, Some(30)));
        back.advance(30);
        assert_eq!(back.free(), 2);
    }
}
