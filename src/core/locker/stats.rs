//! Each limit's counters, and the one place where the outcome of any
//! request (an ask, an acquire, a heartbeat, a release, an error) is
//! counted in them: `Counters`, reached with `Locker::counters` by deciders
//! outside the table (a store's claims and leases, held asks), and used by
//! the table's own ops. And the table's figures, read only, for stats,
//! metrics and start-up checks: `Figures`, reached with `Locker::figures`
//! (its peering facts are `peers`'s).
//!
//! Counting and reading only: what an outcome is comes from the op's
//! result; no rules or checks live here.

use super::{AskError, LimitEntry, Locker};
use crate::core::ask::{PermitAsk, Verdict};
use crate::core::kinds::semaphore::{LeaseState, LeaseVerdict};
use crate::core::kinds::Rule;
use crate::core::limit::{Limit, LimitId};

/// Counters for one limit since start-up. Reservations count as go, and
/// also as waited; queued lease acquires count only as waited; a peek
/// (`cost` 0) counts as a request and a peek, never as go or sorry: it
/// took nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LimitStats {
    pub requests: u64,
    pub go: u64,
    pub sorry: u64,
    pub errors: u64,
    pub waited: u64,
    pub peeks: u64,
    /// Permits charged after the fact (`charge`), each charge also a go.
    pub charged: u64,
    /// Sorries answered go because the ask or its limit was in shadow
    /// (each also counted as a sorry).
    pub shadow_sorry: u64,
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
    /// A peek (`cost` 0) answered, go or sorry: it took nothing.
    Peek,
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

    /// The outcome of an ask for `cost` permits: a peek when `cost` is 0
    /// and it was answered.
    #[inline]
    pub(crate) fn of_ask_for<E>(cost: u64, verdict: &Result<Verdict, E>) -> Outcome {
        match Outcome::of_ask(verdict) {
            Outcome::Go { .. } | Outcome::Sorry if cost == 0 => Outcome::Peek,
            outcome => outcome,
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
                self.request().go += 1;
                self.waited += u64::from(waited);
            }
            Outcome::Queued => self.request().waited += 1,
            Outcome::Sorry => self.request().sorry += 1,
            Outcome::Peek => self.request().peeks += 1,
            Outcome::Error => self.request().errors += 1,
            Outcome::FollowUp => {}
            Outcome::FollowUpError => self.errors += 1,
        }
    }

    /// Counts one more request, for the caller to count what came of it.
    #[inline]
    fn request(&mut self) -> &mut LimitStats {
        self.requests += 1;
        self
    }
}

/// Every limit's counters and the errors no limit can be blamed for.
#[derive(Debug)]
pub struct Counters<'a> {
    entries: &'a mut [LimitEntry],
    unattributed: &'a mut u64,
}

impl Locker {
    /// The counters of every limit, to count a request's outcome in.
    pub fn counters(&mut self) -> Counters<'_> {
        Counters { entries: &mut self.entries, unattributed: &mut self.unattributed_errors }
    }
}

impl Counters<'_> {
    /// Counts an ask decided outside the table (from a store's claims): a
    /// peek apart from go and sorry, as the table counts it.
    pub fn record_ask(&mut self, ask: &PermitAsk, verdict: &Result<Verdict, AskError>) {
        self.entries[ask.limit.0].stats.record(Outcome::of_ask_for(ask.cost, verdict));
    }

    /// Counts a charge taken outside the table (from a store's claims): a
    /// go, and its cost charged.
    pub fn record_charge(&mut self, ask: &PermitAsk, verdict: &Verdict) {
        let stats = &mut self.entries[ask.limit.0].stats;
        stats.record(Outcome::of_ask_for::<AskError>(ask.cost, &Ok(*verdict)));
        stats.charged += u64::from(verdict.granted);
    }

    /// Counts a request that failed before it reached a limit (it could not
    /// be decoded, or named no known limit), or one that failed on limit `id`.
    pub fn record_error(&mut self, id: Option<LimitId>) {
        match id {
            Some(LimitId(i)) => self.entries[i].stats.record(Outcome::Error),
            None => *self.unattributed += 1,
        }
    }

    /// Counts a sorry of limit `id` (already counted) that was answered go
    /// because the ask or the limit was in shadow.
    pub fn record_shadow_sorry(&mut self, id: LimitId) {
        self.entries[id.0].stats.shadow_sorry += 1;
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

/// What one limit holds now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Holdings {
    /// Keys (or leases) counted against `max_keys`.
    pub live_keys: usize,
    pub leases_held: usize,
    pub leases_waiting: usize,
}

/// The table's figures, read only: each limit's counters and holdings, the
/// live keys and their bytes, and whether leases can be forged; what stats,
/// metrics and start-up checks read, and what peers are told (see `Locker::sharing`).
#[derive(Debug, Clone, Copy)]
pub struct Figures<'a> {
    pub(super) locker: &'a Locker,
}

impl Locker {
    /// The table's figures, to read without changing anything.
    pub fn figures(&self) -> Figures<'_> {
        Figures { locker: self }
    }
}

impl<'a> Figures<'a> {
    /// Each limit with its counters, the default limit first.
    pub fn stats(self) -> impl Iterator<Item = (&'a Limit, LimitStats)> + 'a {
        self.locker.entries.iter().map(|e| (&e.limit, e.stats))
    }

    /// Each limit with what it holds now, the default limit first.
    pub fn holdings(self) -> impl Iterator<Item = (&'a Limit, Holdings)> + 'a {
        self.locker.entries.iter().map(|e| {
            let (leases_held, leases_waiting) = e.rule.lease_counts();
            (&e.limit, Holdings { live_keys: e.rule.live_keys(), leases_held, leases_waiting })
        })
    }

    /// Bytes the key tables of all limits hold on the heap, roughly: what
    /// `--max-keys` bounds, and what a flood of keys leaves behind until
    /// the slot changes.
    pub fn key_bytes(self) -> usize {
        self.locker.entries.iter().map(|e| e.rule.heap_bytes()).sum()
    }

    /// Errors that could not be attributed to a limit.
    pub fn unattributed_errors(self) -> u64 {
        self.locker.unattributed_errors
    }

    /// Keys with a count in their limit's current slot or a reservation,
    /// keys whose token bucket is not full or holds peers' counts of the
    /// current or previous period, and leases. Keys of a slot that
    /// has ended are dropped the next time their limit is asked.
    pub fn live_keys(self) -> usize {
        self.locker.live_keys
    }

    /// The most live keys allowed across all limits.
    pub fn max_keys(self) -> usize {
        self.locker.max_keys
    }

    /// Whether some limit is a semaphore, whose leases a client might forge
    /// a restore for unless the minter has a secret.
    pub fn has_semaphores(self) -> bool {
        self.locker.entries.iter().any(|e| matches!(e.rule, Rule::Semaphore(_)))
    }

    /// Whether lease ids carry a MAC, so that only they can be restored.
    pub fn leases_are_vouched(self) -> bool {
        self.locker.minter.has_secret()
    }
}
