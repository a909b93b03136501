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
//! Watching: a pending lease whose caller waits for the answer (a held
//! acquire, see `service::hold`) is *watched*. When a watched lease is
//! granted or dropped, its id is noted (`take_changed`), so that the caller
//! is answered then without anyone polling; the note is made wherever the
//! change happens (a release, an expiry, a raised capacity, any request
//! that brings the semaphore up to date).
//!
//! Restore: a heartbeat that carries the lease's count for a lease this
//! semaphore does not know (after a restart) re-creates it if the count is
//! free, so a restart cannot double the capacity. This module knows nothing
//! of names, sockets or clocks; `leases` checks requests against the
//! semaphore's limit and names the leases.

use std::collections::{BTreeSet, HashMap, VecDeque};

use crate::core::time::Nanos;

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
struct SemaphoreLease {
    count: u32,
    ttl: Nanos,
    until: Nanos,
    pending: bool,
    /// A caller waits for this pending lease to be granted or dropped.
    watched: bool,
}

/// One semaphore and its leases.
#[derive(Debug)]
pub struct Semaphore {
    capacity: u32,
    held: u32,
    leases: HashMap<Box<str>, SemaphoreLease>,
    /// (expiry or wait deadline, id) for every lease, soonest first.
    deadlines: BTreeSet<(Nanos, Box<str>)>,
    /// Pending leases in arrival order.
    queue: VecDeque<Box<str>>,
    /// Watched leases granted or dropped since `take_changed`, in order.
    changed: Vec<Box<str>>,
}

impl Semaphore {
    /// A semaphore with `capacity` (at least 1; the limit guarantees it).
    pub fn new(capacity: u32) -> Semaphore {
        Semaphore {
            capacity,
            held: 0,
            leases: HashMap::new(),
            deadlines: BTreeSet::new(),
            queue: VecDeque::new(),
            changed: Vec::new(),
        }
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
    ///
    /// Deadlines are handled in time order, as if the loop had woken at
    /// each: what a lease frees at its expiry goes to the waiters queued
    /// then (granted from that instant), before any later deadline drops a
    /// waiter. A late wake-up (a coarse poll timeout, a long batch) thus
    /// gives the same leases as a timely one.
    pub fn advance(&mut self, now: Nanos) -> usize {
        let mut dropped = 0;
        while let Some(due) = self.next_deadline().filter(|&d| d <= now) {
            dropped += self.pass(due);
        }
        self.promote(now);
        dropped
    }

    /// Handles every deadline at `due`: held leases end first, so that what
    /// they free reaches a waiter whose wait ends at the same instant; then
    /// the waits that end there and were not granted drop their lease, which
    /// may let the waiters behind them in.
    fn pass(&mut self, due: Nanos) -> usize {
        let mut ending = Vec::new();
        while self.deadlines.first().is_some_and(|(t, _)| *t == due) {
            ending.push(self.deadlines.pop_first().expect("checked above").1);
        }
        let (waits, holds): (Vec<_>, Vec<_>) = ending.into_iter().partition(|id| self.is_pending(id));
        for id in &holds {
            self.forget(id);
        }
        self.promote(due);
        let unserved: Vec<_> = waits.into_iter().filter(|id| self.is_pending(id)).collect();
        for id in &unserved {
            self.forget(id);
        }
        self.promote(due);
        holds.len() + unserved.len()
    }

    fn is_pending(&self, id: &str) -> bool {
        self.leases.get(id).is_some_and(|l| l.pending)
    }

    /// Takes `hold.count` (at most the capacity; the caller checks) for
    /// `hold.ttl` under the new lease `id`, queueing it for up to
    /// `hold.max_wait` when it cannot be served now. Call `advance` first.
    pub fn acquire(&mut self, now: Nanos, id: &str, hold: Hold) -> LeaseVerdict {
        let Hold { count, ttl, max_wait } = hold;
        let state = if self.queue.is_empty() && self.free() >= count {
            self.insert(
                id,
                SemaphoreLease { count, ttl, until: now.saturating_add(ttl), pending: false, watched: false },
            )
        } else if max_wait > 0 {
            self.queue.push_back(id.into());
            self.insert(
                id,
                SemaphoreLease { count, ttl, until: now.saturating_add(max_wait), pending: true, watched: false },
            )
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
                self.insert(id, SemaphoreLease { ttl, until: now.saturating_add(ttl), ..lease })
            }
            // A restored lease was held before the restart, so it does not
            // queue behind acquirers that came later; it only needs the count.
            None => match restore {
                Some(count) if self.free() >= count => {
                    let lease =
                        SemaphoreLease { count, ttl, until: now.saturating_add(ttl), pending: false, watched: false };
                    self.insert(id, lease)
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

    /// What lease `id` is now: held or pending with its deadline, else
    /// `Unknown`.
    pub fn state_of(&self, id: &str) -> LeaseVerdict {
        let state = match self.leases.get(id) {
            Some(l) if l.pending => LeaseState::Pending { until: l.until },
            Some(l) => LeaseState::Held { until: l.until },
            None => LeaseState::Unknown,
        };
        self.verdict(state)
    }

    /// Watches pending lease `id` (`watched`) or stops (`!watched`): a
    /// watched lease is noted when it is granted or dropped. Whether `id`
    /// is pending (only a pending lease is watched).
    pub fn watch(&mut self, id: &str, watched: bool) -> bool {
        match self.leases.get_mut(id) {
            Some(l) if l.pending => {
                l.watched = watched;
                true
            }
            _ => false,
        }
    }

    /// Moves the ids of the watched leases granted or dropped since the
    /// last call to the end of `out`, in the order it happened.
    pub fn take_changed(&mut self, out: &mut impl Extend<Box<str>>) {
        out.extend(self.changed.drain(..));
    }

    /// Drops pending lease `id`, as its wait ending would, noting it if it
    /// is watched; whether it was pending.
    pub fn drop_waiter(&mut self, id: &str) -> bool {
        let Some(lease) = self.leases.get(id).filter(|l| l.pending).copied() else { return false };
        self.deadlines.remove(&(lease.until, id.into()));
        self.forget(id);
        true
    }

    /// Removes a lease whose deadline entry is already gone.
    fn forget(&mut self, id: &str) {
        if let Some(lease) = self.leases.remove(id) {
            if lease.pending {
                if lease.watched {
                    self.changed.push(id.into());
                }
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
            if lease.watched {
                self.changed.push(id.clone());
            }
            self.insert(
                &id,
                SemaphoreLease { until: now.saturating_add(lease.ttl), pending: false, watched: false, ..lease },
            );
        }
    }

    fn insert(&mut self, id: &str, lease: SemaphoreLease) -> LeaseState {
        let before = self.leases.insert(id.into(), lease);
        if !lease.pending && before.is_none_or(|b| b.pending) {
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
pub mod leases;

#[cfg(test)]
mod tests;
