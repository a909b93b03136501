//! The four kinds of limit, one folder each, and the one place that
//! dispatches on the kind: `Rule` holds one limit's counting state and hands
//! each call to `FixedWindow`, `Bucket`, `RollingWindow` or `Semaphore`.
//!
//! Each kind's folder holds its rule, its peer sharing, its kept form (what
//! the state file restores) and its tests; a change to one kind belongs in
//! its folder. The kinds sit above the core's bottom layer (time, limit,
//! ask, room, the peer share terms) and import neither one another nor the
//! locker or the peer schedule above them. Nothing here holds names or
//! statistics (those live in `core::locker`), and like the rest of the core
//! it takes `now` and does no I/O.

pub mod bucket;
pub mod fixed;
pub mod rolling;
pub mod semaphore;

use super::ask::{Verdict, Want};
use super::limit::{Algorithm, Limit};
use super::room::{NoRoom, Terms};
use super::time::Nanos;
use bucket::Bucket;
use fixed::FixedWindow;
use rolling::RollingWindow;
use semaphore::Semaphore;

/// The counting state of one limit.
#[derive(Debug)]
pub enum Rule {
    /// Fixed timeslots.
    Window(FixedWindow),
    /// A token bucket per key.
    Bucket(Bucket),
    /// A window rolling with time, per key.
    Rolling(RollingWindow),
    /// Leases on a count of concurrent holders.
    Semaphore(Semaphore),
}

/// Why a rule could not take an ask.
#[derive(Debug, PartialEq, Eq)]
pub enum TakeError {
    /// A new key was needed but the key table is full.
    NoRoom,
    /// A semaphore is taken with leases, not with asks.
    Semaphore,
}

impl From<NoRoom> for TakeError {
    fn from(_: NoRoom) -> TakeError {
        TakeError::NoRoom
    }
}

impl Rule {
    /// Empty counts for `limit`.
    pub fn new(limit: &Limit) -> Rule {
        match limit.algorithm() {
            Algorithm::FixedWindow => Rule::Window(FixedWindow::new(limit.quota())),
            Algorithm::TokenBucket { burst } => Rule::Bucket(Bucket::new(limit.quota(), burst)),
            Algorithm::Semaphore => Rule::Semaphore(Semaphore::new(limit.capacity())),
            Algorithm::RollingWindow => Rule::Rolling(RollingWindow::new(limit.quota())),
        }
    }

    /// Brings the state up to `now`; returns how many keys or leases were dropped.
    #[inline]
    pub fn advance(&mut self, now: Nanos) -> usize {
        match self {
            Rule::Window(w) => w.advance(now),
            Rule::Bucket(b) => b.advance(now),
            Rule::Rolling(r) => r.advance(now),
            Rule::Semaphore(s) => s.advance(now),
        }
    }

    /// Keys (or leases) this rule holds, which count against --max-keys.
    #[inline]
    pub fn live_keys(&self) -> usize {
        match self {
            Rule::Window(w) => w.live_keys(),
            Rule::Bucket(b) => b.live_keys(),
            Rule::Rolling(r) => r.live_keys(),
            Rule::Semaphore(s) => s.live_keys(),
        }
    }

    /// Answers an ask on a counting rule. Call `advance` first. The share
    /// in `terms` applies to fixed windows only: a token bucket shared by
    /// peers holds its bound by absorbing their grants (see
    /// `bucket::ledger`).
    #[inline]
    pub fn take(&mut self, now: Nanos, key: Option<&str>, want: Want, terms: Terms) -> Result<Verdict, TakeError> {
        match self {
            Rule::Window(w) => Ok(w.take_shared(now, key, want, terms)?),
            Rule::Bucket(b) => Ok(b.take(now, key, want, terms.room)?),
            Rule::Rolling(r) => Ok(r.take_shared(now, key, want, terms)?),
            Rule::Semaphore(_) => Err(TakeError::Semaphore),
        }
    }

    /// Takes `limit`'s new numbers, keeping the counts, when it is of the
    /// same kind and the counts keep their meaning (see each kind's
    /// `retune`); returns false, changing nothing, when they would not.
    pub fn retune(&mut self, limit: &Limit) -> bool {
        match (self, limit.algorithm()) {
            (Rule::Window(w), Algorithm::FixedWindow) => w.retune(limit.quota()),
            (Rule::Bucket(b), Algorithm::TokenBucket { burst }) => b.retune(limit.quota(), burst),
            (Rule::Rolling(r), Algorithm::RollingWindow) => r.retune(limit.quota()),
            (Rule::Semaphore(s), Algorithm::Semaphore) => {
                s.set_capacity(limit.capacity());
                true
            }
            _ => false,
        }
    }

    /// Leases held and waiting; none for a counting rule.
    pub fn lease_counts(&self) -> (usize, usize) {
        match self {
            Rule::Semaphore(s) => s.lease_counts(),
            Rule::Window(_) | Rule::Bucket(_) | Rule::Rolling(_) => (0, 0),
        }
    }

    /// Starts loading the state an ask for `key` will read into the cache,
    /// where the kind keeps it in a table that can do so.
    #[inline]
    pub fn prefetch(&self, key: Option<&str>) {
        // A hint only: kinds without an inline key table skip it.
        match self {
            Rule::Window(w) => w.prefetch(key),
            Rule::Bucket(b) => b.prefetch(key),
            Rule::Rolling(r) => r.prefetch(key),
            Rule::Semaphore(_) => {}
        }
    }

    /// The semaphore, if this rule is one.
    pub fn semaphore(&mut self) -> Option<&mut Semaphore> {
        match self {
            Rule::Semaphore(s) => Some(s),
            Rule::Window(_) | Rule::Bucket(_) | Rule::Rolling(_) => None,
        }
    }

    /// When this rule next needs `advance` without a request: a lease
    /// expiry or the end of a wait; for counting rules, the end of a slot or
    /// a sweep that would drop keys and give memory back.
    pub fn next_deadline(&self) -> Option<Nanos> {
        match self {
            Rule::Semaphore(s) => s.next_deadline(),
            Rule::Window(w) => w.next_deadline(),
            Rule::Bucket(b) => b.next_deadline(),
            Rule::Rolling(r) => r.next_deadline(),
        }
    }

    /// Bytes this rule's key table holds on the heap, roughly.
    pub fn heap_bytes(&self) -> usize {
        match self {
            Rule::Window(w) => w.heap_bytes(),
            Rule::Bucket(b) => b.heap_bytes(),
            Rule::Rolling(r) => r.heap_bytes(),
            Rule::Semaphore(_) => 0,
        }
    }
}
