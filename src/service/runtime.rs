//! Asks that carry their limit's terms (`--runtime-limits`): the limit they
//! name is found, or created on first use, or retuned, by the table
//! (`core::locker::runtime`); this side builds the limit from the wire's
//! terms and keeps the service's own references to limit ids in step when
//! the table adds one or drops idle ones.
//!
//! With a store, a runtime limit's counts live in the store under its name,
//! as a configured limit's do: lockers that send the same terms count one
//! count, and dropping an idle one forgets nothing (the store still holds
//! its count until its slot ends).
//!
//! Peered, a runtime limit's terms travel in heartbeats and snapshots
//! beside its digest (`wire::PeerTerms`): a locker that hears terms for a
//! limit it lacks creates it under its own `--runtime-limits` (`learn`),
//! and merges its counts once the digests agree, as for a configured
//! limit; one it cannot create is refused once and its counts ignored.
//!
//! It reads no clock and touches no socket.

use super::Service;
use crate::core::{AskError, Limit, LimitId, Locker, Made, Nanos, PeerIx, Peering, TableError, DEFAULT_LIMIT};
use crate::wire::{self, PeerTerms, Terms};

impl Service {
    /// The limit `go` names; when it carries terms, as the table makes it
    /// count by them. An error, counted, when there is none, or when the
    /// terms are invalid, differ from a configured limit's, or would create
    /// a limit past `--runtime-limits`.
    #[inline]
    pub(super) fn find_go(&mut self, now: Nanos, go: &wire::Ask) -> Result<LimitId, AskError> {
        let Some(terms) = &go.terms else {
            return self.names.find(&mut self.locker, go.limit).map_err(AskError::from);
        };
        let made = limit_of(go.limit, terms).and_then(|l| self.take_terms(now, l).map_err(AskError::from));
        if let Err(e) = &made {
            count_refused_terms(&mut self.locker, go.limit, e);
        }
        made
    }

    /// The limit `go` names, made to count by its terms when it carries
    /// them, without counting an error: for what looks ahead of the
    /// decision (a store's claims), which counts nothing itself.
    pub(super) fn lookup_go(&mut self, now: Nanos, go: &wire::Ask) -> Result<LimitId, AskError> {
        match &go.terms {
            None => self.names.lookup(&self.locker, go.limit).map_err(AskError::from),
            Some(terms) => limit_of(go.limit, terms).and_then(|l| self.take_terms(now, l).map_err(AskError::from)),
        }
    }

    /// Finds or creates `limit` as a go with its terms, or a state file
    /// that kept it, makes it count, at `now`; keeps what refers to limits
    /// in step with a new one.
    pub(super) fn take_terms(&mut self, now: Nanos, limit: Limit) -> Result<LimitId, TableError> {
        let (id, made) = self.locker.runtime().find_with_terms(now, limit)?;
        if made != Made::Found {
            if let Some(p) = &mut self.peering {
                p.fit_to(&self.locker);
            }
        }
        if made == Made::Created {
            if let Some(s) = &mut self.store {
                s.grow(self.locker.figures().stats().count());
            }
            // A plain body of its name chose the default until now.
            self.names.forget_plain();
        }
        Ok(id)
    }
}

/// Counts an ask whose terms for limit `name` were refused with `e`:
/// against that limit when they differ from its own, else unattributed.
#[cold]
fn count_refused_terms(locker: &mut Locker, name: Option<&str>, e: &AskError) {
    let differs = matches!(e, AskError::Table(TableError::TermsDiffer(_)));
    let id = differs.then(|| locker.find(name).ok()).flatten();
    locker.counters().record_error(id);
}

/// The limit `terms` define, named `name` (else the default).
fn limit_of(name: Option<&str>, terms: &Terms) -> Result<Limit, AskError> {
    let name = name.unwrap_or(DEFAULT_LIMIT);
    Limit::from_terms(name, terms.algorithm, terms.max_requests, terms.in_seconds, terms.burst)
        .map_err(|e| AskError::Terms(e.to_string()))
}

/// Creates the limits a peer's `terms` name that `locker` lacks, while its
/// `--runtime-limits` has room, and fits the peering to them; terms that
/// make no limit, or would pass the bound, are refused once per name. A
/// limit of the same name is left as it is: its digest tells the peer's
/// definition apart. Returns whether a limit was created.
pub(super) fn learn(locker: &mut Locker, p: &mut Peering, now: Nanos, peer: PeerIx, terms: &[PeerTerms]) -> bool {
    let mut created = false;
    for PeerTerms(name, algorithm, max_requests, in_seconds, burst) in terms {
        if locker.find(Some(name)).is_ok() {
            continue;
        }
        let made = Limit::from_terms(name, algorithm, *max_requests, *in_seconds, *burst)
            .map_err(|e| e.to_string())
            .and_then(|limit| locker.runtime().learn(now, limit).map_err(|e| e.to_string()));
        match made {
            Ok(_) => created = true,
            Err(why) => p.refuse_terms(now, peer, name, || why),
        }
    }
    if created {
        p.fit_to(locker);
    }
    created
}

/// The terms a peer needs to create `limit` (see `learn`).
pub(super) fn peer_terms(limit: &Limit) -> PeerTerms {
    let (algorithm, max_requests, in_seconds, burst) = limit.terms();
    PeerTerms(limit.name().to_owned(), algorithm.to_owned(), max_requests, in_seconds, burst)
}
