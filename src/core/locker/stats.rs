//! Each limit's counters, and the one place where the outcome of any
//! request (an ask, an acquire, a heartbeat, a release, an error) is
//! counted in them.
//!
//! Counting only: what an outcome is comes from the op's result; no rules
//! or checks live here.

use crate::core::ask::Verdict;
use crate::core::kinds::semaphore::{LeaseState, LeaseVerdict};

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
