//! Lease requests checked against their semaphore's limit: an acquire's
//! count, ttl and wait, and the id its new lease is named with; a
//! heartbeat's terms, and whether the count it restores with was minted by
//! a locker of the group; what a heartbeat's outcome means to its caller;
//! and the lease ops under the room the key table has left.
//!
//! `Leases` is a checked handle on one semaphore limit, which the table
//! hands out only for a semaphore (`Semaphores::leases`). This module must not
//! find limits by name, count live keys or keep statistics: the table does
//! those around each op, since making room for a new lease may bring every
//! limit up to date.

use super::{Hold, LeaseState, LeaseVerdict, NoCapacity, Semaphore};
use crate::core::ask::{wait_ns, AcquireAsk, HeartbeatAsk, TableError};
use crate::core::lease_id::LeaseMinter;
use crate::core::limit::Limit;
use crate::core::room::KeyRoom;
use crate::core::time::{Nanos, NANOS_PER_MS};

/// The longest ttl a lease may ask for: one day, like the longest slot.
pub const MAX_TTL_MS: u64 = 86_400_000;

/// Why a lease op got no answer from the semaphore.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LeaseError {
    #[error(transparent)]
    Table(#[from] TableError),
    #[error("limit {0:?} is not a semaphore: ask it with op \"go\"")]
    NotSemaphore(String),
    #[error("a semaphore has no keys")]
    KeyOnSemaphore,
    #[error("count {count} must be from 1 to the semaphore's capacity {max}")]
    BadCount { count: u64, max: u32 },
    #[error("ttl_ms {0} must be from 1 to {MAX_TTL_MS}")]
    BadTtl(u64),
    #[error("unknown lease {0:?} (expired or released); a heartbeat with its count restores it")]
    UnknownLease(String),
    #[error("cannot restore lease {0:?}: no locker of this group minted it for this limit and count")]
    NotMinted(String),
    #[error("cannot restore lease {lease:?} of count {count}: only {free} is free")]
    CannotRestore { lease: String, count: u32, free: u32 },
}

/// A heartbeat's terms, checked: the ttl to extend by, the count to
/// restore an unknown lease with (when one was given and not forged), and
/// whether the restore was forged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BeatTerms {
    pub ttl: Nanos,
    pub restore: Option<u32>,
    forged: bool,
}

/// A semaphore limit, checked to be one, with the minter that names and
/// vouches for its leases: what lease requests are checked against.
#[derive(Debug)]
pub struct Leases<'a> {
    limit: &'a Limit,
    minter: &'a mut LeaseMinter,
}

impl<'a> Leases<'a> {
    /// The handle on `limit`, which the caller has checked is a semaphore.
    pub(in crate::core) fn new(limit: &'a Limit, minter: &'a mut LeaseMinter) -> Leases<'a> {
        Leases { limit, minter }
    }

    /// Checks an acquire against the limit and mints the new lease's id:
    /// the id and what to hold. Takes nothing: `Semaphore::acquire_in`
    /// does, or a store.
    pub fn lease_for(self, ask: &AcquireAsk) -> Result<(String, Hold), LeaseError> {
        if ask.key.is_some() {
            return Err(LeaseError::KeyOnSemaphore);
        }
        let hold =
            Hold { count: self.count(ask.count)?, ttl: self.ttl(ask.ttl_ms)?, max_wait: wait_ns(ask.max_wait_ms)? };
        Ok((self.minter.mint(self.limit.name(), hold.count), hold))
    }

    /// Checks a heartbeat against the limit: its ttl, and the count it
    /// restores with, which a locker of the group must have minted.
    pub fn beat_terms(&self, beat: &HeartbeatAsk) -> Result<BeatTerms, LeaseError> {
        let ttl = self.ttl(beat.ttl_ms)?;
        let restore = beat.count.map(|c| self.count(c)).transpose()?;
        // A restore must show that a locker of the group minted the lease;
        // a known lease needs only its id, which is the holder's secret.
        let forged = restore.is_some_and(|c| !self.minter.vouches(beat.lease, self.limit.name(), c));
        Ok(BeatTerms { ttl, restore: restore.filter(|_| !forged), forged })
    }

    fn count(&self, count: u64) -> Result<u32, LeaseError> {
        let max = self.limit.capacity();
        match u32::try_from(count) {
            Ok(c) if (1..=max).contains(&c) => Ok(c),
            _ => Err(LeaseError::BadCount { count, max }),
        }
    }

    fn ttl(&self, ttl_ms: Option<u64>) -> Result<Nanos, LeaseError> {
        match ttl_ms {
            None => Ok(self.limit.quota().slot_ns()),
            Some(ms) if (1..=MAX_TTL_MS).contains(&ms) => Ok(ms * NANOS_PER_MS),
            Some(ms) => Err(LeaseError::BadTtl(ms)),
        }
    }
}

impl BeatTerms {
    /// A heartbeat of `lease` answered from the semaphore's `outcome`;
    /// `no_room` is the key table's refusal when it had no room for a
    /// restore.
    pub fn outcome(
        &self,
        lease: &str,
        outcome: Result<LeaseVerdict, NoCapacity>,
        no_room: Option<TableError>,
    ) -> Result<LeaseVerdict, LeaseError> {
        match (outcome, no_room) {
            (Ok(v), _) if v.state == LeaseState::Unknown && self.forged => Err(LeaseError::NotMinted(lease.to_owned())),
            (Ok(v), Some(full)) if v.state == LeaseState::Unknown && self.restore.is_some() => Err(full.into()),
            (Ok(v), _) if v.state == LeaseState::Unknown => Err(LeaseError::UnknownLease(lease.to_owned())),
            (Ok(v), _) => Ok(v),
            (Err(NoCapacity { free }), _) => {
                Err(LeaseError::CannotRestore { lease: lease.to_owned(), count: self.restore.unwrap_or(0), free })
            }
        }
    }
}

impl Semaphore {
    /// Acquires `hold` under the new lease `lease` at `now` when the key
    /// table has `room` for it; `None` when it has none. Call `advance` first.
    pub fn acquire_in(&mut self, now: Nanos, lease: &str, hold: Hold, room: KeyRoom) -> Option<LeaseVerdict> {
        match room {
            KeyRoom::Full => None,
            KeyRoom::Free => Some(self.acquire(now, lease, hold)),
        }
    }

    /// A heartbeat of `lease` with `terms` at `now`, with the key table's
    /// `room`, and whether the table was full. Call `advance` first.
    pub fn beat_in(
        &mut self,
        now: Nanos,
        lease: &str,
        terms: &BeatTerms,
        room: KeyRoom,
    ) -> (Result<LeaseVerdict, NoCapacity>, bool) {
        // A full key table still lets known leases beat; it only stops a restore.
        let full = matches!(room, KeyRoom::Full);
        (self.heartbeat(now, lease, terms.ttl, if full { None } else { terms.restore }), full)
    }
}
