//! The semaphore: a count of concurrent holders, taken by leases that expire.
//!
//! A lease holds `count` of the capacity until its expiry; a heartbeat moves
//! the expiry, a release or the expiry frees the count. Expiries are kept in
//! order, so the next one is the loop's next wake-up (`next_deadline`) and
//! expiry needs no periodic sweep.
//!
//! Waiting: one REP request gets one reply, so an acquire that may wait
//! (`max_wait`) and cannot be served now becomes a *pending* lease, queued in
//! arrival order with its own id. Capacity that frees goes to the head of the
//! queue, and only to the head: a large acquire is never overtaken by small
//! ones, and an acquire that does not wait is refused while anyone waits. The
//! holder of a pending lease learns it was granted by sending a heartbeat; a
//! pending lease that is not granted by its wait deadline is dropped.
//!
//! Restore: a heartbeat that carries the lease's count for a lease this
//! semaphore does not know (after a restart) re-creates it if the count is
//! free, so a restart cannot double the capacity. This module knows nothing
//! of names, sockets or clocks.

use std::collections::{BTreeSet, HashMap, VecDeque};

use super::time::Nanos;

/// What a lease is now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseState {
    /// Held until `until` unless a heartbeat extends it.
    Held { until: Nanos },
    /// Queued; dropped at `until` if not granted by then.
    Pending { until: Nanos },
    /// Not granted and not queued.
    Refused,
    /// Released by this request.
    Released,
    /// This semaphore holds no lease by that id.
    Unknown,
}

/// A semaphore's answer, with the numbers a caller may want to show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseVerdict {
    pub state: LeaseState,
    /// The semaphore's capacity.
    pub capacity: u32,
    /// Capacity neither held nor promised, after this request.
    pub free: u32,
}

/// A checked acquire: how much to hold, for how long, and how long to wait
/// in the queue for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hold {
    /// Capacity to hold, from 1 to the semaphore's capacity.
    pub count: u32,
    /// How long the lease lives without a heartbeat.
    pub ttl: Nanos,
    /// The longest the acquire may wait in the queue; 0 for now or never.
    pub max_wait: Nanos,
}

/// A heartbeat for an unknown lease asked to restore more than is free.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoCapacity {
    pub free: u32,
}

#[derive(Debug, Clone, Copy)]
struct Lease {
    count: u32,
    ttl: Nanos,
    until: Nanos,
    pending: bool,
}

/// One semaphore and its leases.
#[derive(Debug)]
pub struct Semaphore {
    capacity: u32,
    held: u32,
    leases: HashMap<Box<str>, Lease>,
    /// (expiry or wait deadline, id) for every lease, soonest first.
    deadlines: BTreeSet<(Nanos, Box<str>)>,
    /// Pending leases in arrival order.
    queue: VecDeque<Box<str>>,
}

impl Semaphore {
    /// A semaphore with `capacity` (at least 1; the limit guarantees it).
    pub fn new(capacity: u32) -> Semaphore {
        Semaphore { capacity, held: 0, leases: HashMap::new(), deadlines: BTreeSet::new(), queue: VecDeque::new() }
    }

    /// Leases held or pending.
    pub fn live_keys(&self) -> usize {
        self.leases.len()
    }

    /// The next instant a lease expires or a wait ends, if any.
    pub fn next_deadline(&self) -> Option<Nanos> {
        self.deadlines.first().map(|(t, _)| *t)
    }

    /// Held leases as (id, count, expiry), for inspection.
    pub fn holders(&self) -> impl Iterator<Item = (&str, u32, Nanos)> {
        self.leases.iter().filter(|(_, l)| !l.pending).map(|(id, l)| (&**id, l.count, l.until))
    }

    /// Frees every lease due at or before `now` and grants what the queue's
    /// head can now take. Returns how many leases were dropped.
    pub fn advance(&mut self, now: Nanos) -> usize {
        let mut dropped = 0;
        while let Some((due, _)) = self.deadlines.first() {
            if *due > now {
                break;
            }
            let (_, id) = self.deadlines.pop_first().expect("checked above");
            self.forget(&id);
            dropped += 1;
        }
        self.promote(now);
        dropped
    }

    /// Takes `hold.count` (at most the capacity; the caller checks) for
    /// `hold.ttl` under the new lease `id`, queueing it for up to
    /// `hold.max_wait` when it cannot be served now. Call `advance` first.
    pub fn acquire(&mut self, now: Nanos, id: &str, hold: Hold) -> LeaseVerdict {
        let Hold { count, ttl, max_wait } = hold;
        let state = if self.queue.is_empty() && self.free() >= count {
            self.insert(id, Lease { count, ttl, until: now.saturating_add(ttl), pending: false })
        } else if max_wait > 0 {
            self.queue.push_back(id.into());
            self.insert(id, Lease { count, ttl, until: now.saturating_add(max_wait), pending: true })
        } else {
            LeaseState::Refused
        };
        self.verdict(state)
    }

    /// Extends a held lease to `now + ttl`; reports a pending one; restores
    /// an unknown one when `restore` gives its count and the count is free.
    pub fn heartbeat(
        &mut self,
        now: Nanos,
        id: &str,
        ttl: Nanos,
        restore: Option<u32>,
    ) -> Result<LeaseVerdict, NoCapacity> {
        let state = match self.leases.get(id).copied() {
            Some(lease) if lease.pending => LeaseState::Pending { until: lease.until },
            Some(lease) => {
                self.deadlines.remove(&(lease.until, id.into()));
                self.insert(id, Lease { ttl, until: now.saturating_add(ttl), ..lease })
            }
            // A restored lease was held before the restart, so it does not
            // queue behind acquirers that came later; it only needs the count.
            None => match restore {
                Some(count) if self.free() >= count => {
                    self.insert(id, Lease { count, ttl, until: now.saturating_add(ttl), pending: false })
                }
                Some(_) => return Err(NoCapacity { free: self.free() }),
                None => LeaseState::Unknown,
            },
        };
        Ok(self.verdict(state))
    }

    /// Frees a lease, held or pending, and grants what the queue can take.
    pub fn release(&mut self, now: Nanos, id: &str) -> LeaseVerdict {
        let state = match self.leases.get(id) {
            Some(lease) => {
                self.deadlines.remove(&(lease.until, id.into()));
                self.forget(id);
                self.promote(now);
                LeaseState::Released
            }
            None => LeaseState::Unknown,
        };
        self.verdict(state)
    }

    /// Capacity neither held nor promised. After a reload lowered the
    /// capacity, leases may hold more than it until they end: none is free.
    pub fn free(&self) -> u32 {
        self.capacity.saturating_sub(self.held)
    }

    /// Takes a new capacity and keeps every lease and the queue: holders
    /// above a lowered capacity keep their count until they release it, and
    /// a raised one is granted to the queue at the next `advance`.
    pub fn set_capacity(&mut self, capacity: u32) {
        self.capacity = capacity;
    }

    /// Leases held and leases waiting in the queue.
    pub fn lease_counts(&self) -> (usize, usize) {
        (self.leases.len() - self.queue.len(), self.queue.len())
    }

    /// Removes a lease whose deadline entry is already gone.
    fn forget(&mut self, id: &str) {
        if let Some(lease) = self.leases.remove(id) {
            if lease.pending {
                self.queue.retain(|q| &**q != id);
            } else {
                self.held -= lease.count;
            }
        }
    }

    /// Grants pending leases from the head of the queue while they fit.
    fn promote(&mut self, now: Nanos) {
        while let Some(head) = self.queue.front() {
            let lease = self.leases[head];
            if lease.count > self.free() {
                break;
            }
            let id = self.queue.pop_front().expect("checked above");
            self.deadlines.remove(&(lease.until, id.clone()));
            self.insert(&id, Lease { until: now.saturating_add(lease.ttl), pending: false, ..lease });
        }
    }

    fn insert(&mut self, id: &str, lease: Lease) -> LeaseState {
        let before = self.leases.insert(id.into(), lease);
        if !lease.pending && before.map_or(true, |b| b.pending) {
            self.held += lease.count;
        }
        self.deadlines.insert((lease.until, id.into()));
        if lease.pending {
            LeaseState::Pending { until: lease.until }
        } else {
            LeaseState::Held { until: lease.until }
        }
    }

    fn verdict(&self, state: LeaseState) -> LeaseVerdict {
        LeaseVerdict { state, capacity: self.capacity, free: self.free() }
    }
}

pub mod kept;

#[cfg(test)]
mod tests {
    // The semaphore's rules with literal instants, and a property test of expiry.

    use super::*;

    const MS: Nanos = 1_000_000;

    fn held(v: LeaseVerdict) -> bool {
        matches!(v.state, LeaseState::Held { .. })
    }

    #[test]
    fn leases_take_capacity_until_released_or_expired() {
        let mut s = Semaphore::new(3);
        assert!(held(s.acquire(0, "a", Hold { count: 2, ttl: 100 * MS, max_wait: 0 })));
        let v = s.acquire(0, "b", Hold { count: 2, ttl: 100 * MS, max_wait: 0 });
        assert_eq!(v.state, LeaseState::Refused);
        assert_eq!(v.free, 1);
        assert_eq!(s.release(10 * MS, "a").state, LeaseState::Released);
        assert_eq!(s.release(10 * MS, "a").state, LeaseState::Unknown);
        assert!(held(s.acquire(10 * MS, "b", Hold { count: 2, ttl: 100 * MS, max_wait: 0 })));
        assert_eq!(s.next_deadline(), Some(110 * MS));
        assert_eq!(s.advance(110 * MS - 1), 0, "not a nanosecond early");
        assert_eq!(s.advance(110 * MS), 1, "exactly on time");
        assert_eq!(s.free(), 3);
        assert_eq!(s.next_deadline(), None);
    }

    #[test]
    fn a_heartbeat_extends_a_lease() {
        let mut s = Semaphore::new(1);
        s.acquire(0, "a", Hold { count: 1, ttl: 100 * MS, max_wait: 0 });
        let v = s.heartbeat(90 * MS, "a", 100 * MS, None).unwrap();
        assert_eq!(v.state, LeaseState::Held { until: 190 * MS });
        assert_eq!(s.advance(150 * MS), 0);
        assert_eq!(s.next_deadline(), Some(190 * MS));
        assert_eq!(s.heartbeat(150 * MS, "nope", 100 * MS, None).unwrap().state, LeaseState::Unknown);
    }

    #[test]
    fn waiters_are_served_first_come_first_served_and_big_ones_are_not_starved() {
        let mut s = Semaphore::new(3);
        s.acquire(0, "a", Hold { count: 2, ttl: 100 * MS, max_wait: 0 });
        s.acquire(0, "b", Hold { count: 1, ttl: 100 * MS, max_wait: 0 });
        assert!(matches!(
            s.acquire(1, "big", Hold { count: 3, ttl: 50 * MS, max_wait: 1_000 * MS }).state,
            LeaseState::Pending { .. }
        ));
        assert!(matches!(
            s.acquire(2, "small", Hold { count: 1, ttl: 50 * MS, max_wait: 1_000 * MS }).state,
            LeaseState::Pending { .. }
        ));
        assert_eq!(
            s.acquire(3, "eager", Hold { count: 1, ttl: 50 * MS, max_wait: 0 }).state,
            LeaseState::Refused,
            "no jumping the queue"
        );
        s.release(10 * MS, "b");
        assert_eq!(s.free(), 1, "one free, but the head needs three");
        assert!(matches!(s.heartbeat(11 * MS, "small", 50 * MS, None).unwrap().state, LeaseState::Pending { .. }));
        s.release(20 * MS, "a");
        assert_eq!(
            s.heartbeat(21 * MS, "big", 50 * MS, None).unwrap().state,
            LeaseState::Held { until: 71 * MS },
            "granted at 20 ms, beaten at 21 ms"
        );
        s.release(30 * MS, "big");
        let small = s.heartbeat(31 * MS, "small", 50 * MS, None).unwrap();
        assert_eq!(small.state, LeaseState::Held { until: 81 * MS });
    }

    #[test]
    fn a_waiter_not_served_by_its_deadline_is_dropped_and_unblocks_the_queue() {
        let mut s = Semaphore::new(2);
        s.acquire(0, "a", Hold { count: 1, ttl: 1_000 * MS, max_wait: 0 });
        s.acquire(0, "big", Hold { count: 2, ttl: 100 * MS, max_wait: 50 * MS });
        s.acquire(1, "small", Hold { count: 1, ttl: 100 * MS, max_wait: 500 * MS });
        assert_eq!(s.next_deadline(), Some(50 * MS));
        s.advance(50 * MS);
        assert_eq!(s.heartbeat(51 * MS, "big", 100 * MS, None).unwrap().state, LeaseState::Unknown);
        assert_eq!(s.heartbeat(51 * MS, "small", 100 * MS, None).unwrap().state, LeaseState::Held { until: 151 * MS });
    }

    #[test]
    fn a_heartbeat_with_a_count_restores_an_unknown_lease_if_it_fits() {
        let mut s = Semaphore::new(3);
        assert!(held(s.heartbeat(0, "old-1", 100 * MS, Some(2)).unwrap()));
        assert_eq!(s.heartbeat(0, "old-2", 100 * MS, Some(2)), Err(NoCapacity { free: 1 }));
        assert_eq!(
            s.acquire(0, "new", Hold { count: 2, ttl: 100 * MS, max_wait: 0 }).state,
            LeaseState::Refused,
            "restore cannot double capacity"
        );
    }

    #[derive(Debug, Clone)]
    enum Op {
        Acquire { count: u32, ttl_ms: u64, wait_ms: u64 },
        Heartbeat { lease: usize, ttl_ms: u64 },
        Release { lease: usize },
        Tick,
    }

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        prop_oneof![
            (1u32..=3, 1u64..200, 0u64..200).prop_map(|(count, ttl_ms, wait_ms)| Op::Acquire {
                count,
                ttl_ms,
                wait_ms
            }),
            (0usize..20, 1u64..200).prop_map(|(lease, ttl_ms)| Op::Heartbeat { lease, ttl_ms }),
            (0usize..20).prop_map(|lease| Op::Release { lease }),
            Just(Op::Tick),
        ]
    }

    proptest::proptest! {
        /// No lease outlives its ttl without a heartbeat, held counts never
        /// exceed the capacity, and the loop's next deadline is never missed.
        #[test]
        fn no_lease_outlives_its_ttl_without_a_heartbeat(
            ops in proptest::collection::vec((0u64..60, op()), 1..150),
        ) {
            let mut s = Semaphore::new(3);
            // The latest instant each lease may be held, by the test's own account.
            let mut may_hold: HashMap<String, Nanos> = HashMap::new();
            let mut ids = Vec::new();
            let mut now = 0;
            for (gap_ms, op) in ops {
                // The loop wakes at the next deadline before any later instant.
                let next = now + gap_ms * MS;
                // Bounded, so a deadline that does not clear fails instead of spinning.
                for _ in 0..100 {
                    let Some(due) = s.next_deadline().filter(|&d| d <= next) else { break };
                    s.advance(due.max(now));
                    now = due.max(now);
                    record_grants(&s, now, &ids, &mut may_hold);
                    check(&s, now, &may_hold)?;
                }
                now = next;
                s.advance(now);
                match op {
                    Op::Acquire { count, ttl_ms, wait_ms } => {
                        let id = format!("l{}", ids.len());
                        s.acquire(now, &id, Hold { count, ttl: ttl_ms * MS, max_wait: wait_ms * MS });
                        ids.push((id, ttl_ms * MS));
                    }
                    Op::Heartbeat { lease, ttl_ms } => {
                        if let Some((id, ttl)) = ids.get_mut(lease) {
                            let v = s.heartbeat(now, id, ttl_ms * MS, None).expect("no restore asked");
                            if held(v) {
                                *ttl = ttl_ms * MS;
                                may_hold.insert(id.clone(), now + *ttl);
                            }
                        }
                    }
                    Op::Release { lease } => {
                        if let Some((id, _)) = ids.get(lease) {
                            s.release(now, id);
                        }
                    }
                    Op::Tick => {}
                }
                record_grants(&s, now, &ids, &mut may_hold);
                check(&s, now, &may_hold)?;
            }
        }
    }

    /// Leases granted since the last look (at `now`: acquired or promoted) may
    /// be held for their ttl from now.
    fn record_grants(s: &Semaphore, now: Nanos, ids: &[(String, Nanos)], may_hold: &mut HashMap<String, Nanos>) {
        for (id, _, _) in s.holders() {
            let ttl = ids.iter().find(|(i, _)| i == id).map(|(_, t)| *t).expect("a lease the test made");
            may_hold.entry(id.to_owned()).or_insert(now + ttl);
        }
    }

    fn check(
        s: &Semaphore,
        now: Nanos,
        may_hold: &HashMap<String, Nanos>,
    ) -> Result<(), proptest::test_runner::TestCaseError> {
        let mut total = 0;
        for (id, count, until) in s.holders() {
            total += count;
            proptest::prop_assert!(until > now, "{} held at {} past its expiry {}", id, now, until);
            let limit = may_hold[id];
            proptest::prop_assert!(until <= limit, "{} held until {} but its ttl ends {}", id, until, limit);
        }
        proptest::prop_assert!(total <= 3);
        Ok(())
    }
}
