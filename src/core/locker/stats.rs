//! Each limit's counters, and the one place where the outcome of any
//! request (an ask, an acquire, a heartbeat, a release, an error) is
//! counted in them: `Counters`, reached with `Locker::counters` by deciders
//! outside the table (a store's claims and leases, held asks), and used by
//! the table's own ops.
//!
//! Counting only: what an outcome is comes from the op's result; no rules
//! or checks live here.

use super::{AskError, Entry, Locker};
use crate::core::ask::Verdict;
use crate::core::kinds::semaphore::{LeaseState, LeaseVerdict};
use crate::core::limit::LimitId;

/// Counters for one limit since start-up. Reservations count as go, and
/// also as waited; queued lease acquires count only as waited.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LimitStats {
    pub requests: u64,
    pub go: u64,
    pub sorry: u64,
    pub errors: u64,
    pub waited: u64,
}

/// What one request came to, as the counters see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// A request that went, after a wait (a reservation) or not.
    Go { waited: bool },
    /// An acquire queued behind others.
    Queued,
    /// A request answered sorry.
    Sorry,
    /// A request that failed.
    Error,
    /// A heartbeat or release that worked: it follows an acquire already
    /// counted, so it is not a request of its own.
    FollowUp,
    /// A heartbeat or release that failed: an error, still not a request.
    FollowUpError,
}

impl Outcome {
    /// The outcome of an ask for permits.
    #[inline]
    pub(crate) fn of_ask<E>(verdict: &Result<Verdict, E>) -> Outcome {
        match verdict {
            Ok(v) if v.go => Outcome::Go { waited: v.wait > 0 },
            Ok(_) => Outcome::Sorry,
            Err(_) => Outcome::Error,
        }
    }

    /// The outcome of an ask that got a verdict.
    #[inline]
    pub(crate) fn of_verdict(v: &Verdict) -> Outcome {
        if v.go {
            Outcome::Go { waited: v.wait > 0 }
        } else {
            Outcome::Sorry
        }
    }

    /// The outcome of an acquire.
    pub(crate) fn of_acquire<T, E>(result: &Result<(T, LeaseVerdict), E>) -> Outcome {
        match result {
            Ok((_, v)) => match v.state {
                LeaseState::Held { .. } => Outcome::Go { waited: false },
                LeaseState::Pending { .. } => Outcome::Queued,
                _ => Outcome::Sorry,
            },
            Err(_) => Outcome::Error,
        }
    }

    /// The outcome of a heartbeat or a release.
    pub(crate) fn of_follow_up<T, E>(result: &Result<T, E>) -> Outcome {
        match result {
            Ok(_) => Outcome::FollowUp,
            Err(_) => Outcome::FollowUpError,
        }
    }
}

impl LimitStats {
    /// Counts one request's outcome. Each arm is complete, with no test
    /// shared between them, so that on the ask path this folds into the
    /// match on the verdict.
    #[inline]
    pub(crate) fn record(&mut self, outcome: Outcome) {
        match outcome {
            Outcome::Go { waited } => {
                self.requests += 1;
                self.go += 1;
                self.waited += u64::from(waited);
            }
            Outcome::Queued => {
                self.requests += 1;
                self.waited += 1;
            }
            Outcome::Sorry => {
                self.requests += 1;
                self.sorry += 1;
            }
            Outcome::Error => {
                self.requests += 1;
                self.errors += 1;
            }
            Outcome::FollowUp => {}
            Outcome::FollowUpError => self.errors += 1,
        }
    }
}

/// Every limit's counters and the errors no limit can be blamed for.
#[derive(Debug)]
pub struct Counters<'a> {
    entries: &'a mut [Entry],
    unattributed: &'a mut u64,
}

impl Locker {
    /// The counters of every limit, to count a request's outcome in.
    pub fn counters(&mut self) -> Counters<'_> {
        Counters { entries: &mut self.entries, unattributed: &mut self.unattributed_errors }
    }
}

impl Counters<'_> {
    /// Counts an ask decided outside the table (from a store's claims).
    pub fn record_ask(&mut self, id: LimitId, verdict: &Result<Verdict, AskError>) {
        self.entries[id.0].stats.record(Outcome::of_ask(verdict));
    }

    /// Counts a request that failed before it reached a limit (it could not
    /// be decoded, or named no known limit), or one that failed on limit `id`.
    pub fn record_error(&mut self, id: Option<LimitId>) {
        match id {
            Some(LimitId(i)) => self.entries[i].stats.record(Outcome::Error),
            None => *self.unattributed += 1,
        }
    }

    /// Takes back the sorry last counted for limit `id`: the ask was held
    /// instead of answered, and is counted when it is answered.
    pub fn unrecord_sorry(&mut self, id: LimitId) {
        let stats = &mut self.entries[id.0].stats;
        stats.requests = stats.requests.saturating_sub(1);
        stats.sorry = stats.sorry.saturating_sub(1);
    }

    /// Counts an acquire's answer against limit `id`.
    pub fn note_acquire<T, E>(&mut self, id: LimitId, result: &Result<(T, LeaseVerdict), E>) {
        self.entries[id.0].stats.record(Outcome::of_acquire(result));
    }

    /// Counts a heartbeat's or release's answer against limit `id`.
    pub fn note_follow_up<T, E>(&mut self, id: LimitId, result: &Result<T, E>) {
        self.entries[id.0].stats.record(Outcome::of_follow_up(result));
    }
}
