//! The locker's side of semaphore leases: checking acquire, heartbeat and
//! release against the limit they name, issuing lease ids, and counting.
//!
//! The rules of holding, waiting, expiry and restore are `core::kinds::semaphore`'s;
//! this module only adds names, checks and statistics.

use super::stats::Outcome;
use super::{wait_ns, Locker, TableError, MAX_TTL_MS};
use crate::core::ask::{AcquireAsk, HeartbeatAsk};
use crate::core::kinds::semaphore::{Hold, LeaseState, LeaseVerdict, NoCapacity, Semaphore};
use crate::core::kinds::Rule;
use crate::core::limit::LimitId;
use crate::core::room::KeyRoom;
use crate::core::time::{Nanos, NANOS_PER_MS};

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

impl Locker {
    /// Takes `ask.count` of a semaphore under a new lease that lives
    /// `ask.ttl_ms` (the limit's in_seconds when `None`), waiting in the
    /// queue up to `ask.max_wait_ms` when the count is not free now.
    /// Returns the new lease's id, meaningful when the lease is held or
    /// pending.
    pub fn acquire(&mut self, now: Nanos, ask: &AcquireAsk) -> Result<(String, LeaseVerdict), LeaseError> {
        let result = self.take_lease(now, ask);
        self.note_acquire(ask.limit, &result);
        result
    }

    fn take_lease(&mut self, now: Nanos, ask: &AcquireAsk) -> Result<(String, LeaseVerdict), LeaseError> {
        let (lease, hold) = self.lease_for(ask)?;
        let verdict = self.on_semaphore(now, ask.limit, |s, room| match room {
            KeyRoom::Full => None,
            KeyRoom::Free => Some(s.acquire(now, &lease, hold)),
        })?;
        verdict.map(|v| (lease, v)).ok_or(TableError::TooManyKeys(self.max_keys).into())
    }

    /// Checks an acquire against its limit and mints the new lease's id:
    /// the id and what to hold. Takes nothing: `acquire` does, or a store.
    pub fn lease_for(&mut self, ask: &AcquireAsk) -> Result<(String, Hold), LeaseError> {
        self.check_semaphore(ask.limit)?;
        if ask.key.is_some() {
            return Err(LeaseError::KeyOnSemaphore);
        }
        let hold = Hold {
            count: self.lease_count(ask.limit, ask.count)?,
            ttl: self.lease_ttl(ask.limit, ask.ttl_ms)?,
            max_wait: wait_ns(ask.max_wait_ms)?,
        };
        Ok((self.minter.mint(self.entries[ask.limit.0].limit.name(), hold.count), hold))
    }

    /// Extends lease `beat.lease` by `beat.ttl_ms` from now. With
    /// `beat.count`, a lease the semaphore does not know (after a restart)
    /// is restored if that count is free.
    pub fn heartbeat(&mut self, now: Nanos, beat: &HeartbeatAsk) -> Result<LeaseVerdict, LeaseError> {
        let result = self.renew(now, beat);
        self.note_follow_up(beat.limit, &result);
        result
    }

    fn renew(&mut self, now: Nanos, beat: &HeartbeatAsk) -> Result<LeaseVerdict, LeaseError> {
        let terms = self.beat_terms(beat)?;
        let mut full = false;
        let outcome = self.on_semaphore(now, beat.limit, |s, room| {
            // A full key table still lets known leases beat; it only stops a restore.
            full = matches!(room, KeyRoom::Full);
            s.heartbeat(now, beat.lease, terms.ttl, if full { None } else { terms.restore })
        })?;
        self.beat_outcome(beat.lease, &terms, outcome, full)
    }

    /// Checks a heartbeat against its limit: its ttl, and the count it
    /// restores with, which a locker of the group must have minted.
    pub fn beat_terms(&self, beat: &HeartbeatAsk) -> Result<BeatTerms, LeaseError> {
        self.check_semaphore(beat.limit)?;
        let ttl = self.lease_ttl(beat.limit, beat.ttl_ms)?;
        let restore = beat.count.map(|c| self.lease_count(beat.limit, c)).transpose()?;
        // A restore must show that a locker of the group minted the lease;
        // a known lease needs only its id, which is the holder's secret.
        let name = self.entries[beat.limit.0].limit.name();
        let forged = restore.is_some_and(|c| !self.minter.vouches(beat.lease, name, c));
        Ok(BeatTerms { ttl, restore: restore.filter(|_| !forged), forged })
    }

    /// A heartbeat's answer from the semaphore's `outcome` (`full`: the
    /// key table had no room for a restore).
    pub fn beat_outcome(
        &self,
        lease: &str,
        terms: &BeatTerms,
        outcome: Result<LeaseVerdict, NoCapacity>,
        full: bool,
    ) -> Result<LeaseVerdict, LeaseError> {
        match outcome {
            Ok(v) if v.state == LeaseState::Unknown && terms.forged => Err(LeaseError::NotMinted(lease.to_owned())),
            Ok(v) if v.state == LeaseState::Unknown && terms.restore.is_some() && full => {
                Err(TableError::TooManyKeys(self.max_keys).into())
            }
            Ok(v) if v.state == LeaseState::Unknown => Err(LeaseError::UnknownLease(lease.to_owned())),
            Ok(v) => Ok(v),
            Err(NoCapacity { free }) => {
                Err(LeaseError::CannotRestore { lease: lease.to_owned(), count: terms.restore.unwrap_or(0), free })
            }
        }
    }

    /// Frees lease `lease` of semaphore `id`; an unknown lease (already
    /// expired or released) is not an error.
    pub fn release(&mut self, now: Nanos, id: LimitId, lease: &str) -> Result<LeaseVerdict, LeaseError> {
        let result = self.on_semaphore(now, id, |s, _| s.release(now, lease));
        self.note_follow_up(id, &result);
        result
    }

    /// Counts an acquire's answer against limit `id`.
    pub fn note_acquire<T, E>(&mut self, id: LimitId, result: &Result<(T, LeaseVerdict), E>) {
        self.entries[id.0].stats.record(Outcome::of_acquire(result));
    }

    /// Counts a heartbeat's or release's answer against limit `id`.
    pub fn note_follow_up<T, E>(&mut self, id: LimitId, result: &Result<T, E>) {
        self.entries[id.0].stats.record(Outcome::of_follow_up(result));
    }

    /// Whether limit `id` is a semaphore, which lease ops need.
    pub fn check_semaphore(&self, id: LimitId) -> Result<(), LeaseError> {
        match self.entries[id.0].rule {
            Rule::Semaphore(_) => Ok(()),
            _ => Err(LeaseError::NotSemaphore(self.entries[id.0].limit.name().to_owned())),
        }
    }

    /// Runs `f` on semaphore `id`, brought up to `now`, keeping live keys in step.
    fn on_semaphore<T>(
        &mut self,
        now: Nanos,
        id: LimitId,
        f: impl FnOnce(&mut Semaphore, KeyRoom) -> T,
    ) -> Result<T, LeaseError> {
        self.check_semaphore(id)?;
        Ok(self.counted(now, id, |rule, room| f(rule.semaphore().expect("checked above"), room)))
    }

    fn lease_count(&self, id: LimitId, count: u64) -> Result<u32, LeaseError> {
        let max = self.entries[id.0].limit.capacity();
        match u32::try_from(count) {
            Ok(c) if (1..=max).contains(&c) => Ok(c),
            _ => Err(LeaseError::BadCount { count, max }),
        }
    }

    fn lease_ttl(&self, id: LimitId, ttl_ms: Option<u64>) -> Result<Nanos, LeaseError> {
        match ttl_ms {
            None => Ok(self.entries[id.0].limit.quota().slot_ns()),
            Some(ms) if (1..=MAX_TTL_MS).contains(&ms) => Ok(ms * NANOS_PER_MS),
            Some(ms) => Err(LeaseError::BadTtl(ms)),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::core::kinds::semaphore::LeaseState;
    use crate::core::limit::{Algorithm, Limit, Quota, DEFAULT_LIMIT};
    use crate::core::{AcquireAsk, AskError, HeartbeatAsk, LeaseError, Locker, TableError};

    const MS: u64 = 1_000_000;

    fn locker(max_keys: usize) -> Locker {
        let q = Quota::new(2, 1.0).unwrap();
        let db = Limit::with_algorithm("db", q, Algorithm::Semaphore).unwrap();
        Locker::new(Limit::new(DEFAULT_LIMIT, q).unwrap(), vec![db], max_keys)
    }

    #[test]
    fn leases_have_minted_ids_count_as_live_keys_and_drive_the_deadline() {
        let mut l = locker(10);
        let db = l.find(Some("db")).unwrap();
        let (lease, v) = l.acquire(0, &AcquireAsk { ttl_ms: Some(100), ..AcquireAsk::new(db, 1) }).unwrap();
        assert_eq!(lease, "00000000000000000000000000000001", "counting entropy, no secret");
        assert_eq!(v.state, LeaseState::Held { until: 100 * MS });
        assert_eq!(l.live_keys(), 1);
        assert_eq!(l.next_deadline(), Some(100 * MS));
        l.expire(100 * MS);
        assert_eq!((l.live_keys(), l.next_deadline()), (0, None));
        assert_eq!(l.heartbeat(0, &HeartbeatAsk::new(db, &lease)), Err(LeaseError::UnknownLease(lease.clone())));
        let restore = HeartbeatAsk { count: Some(2), ..HeartbeatAsk::new(db, &lease) };
        let restored = l.heartbeat(200 * MS, &restore).unwrap();
        assert_eq!(restored.state, LeaseState::Held { until: 1_200 * MS }, "the default ttl is in_seconds");
    }

    #[test]
    fn with_a_secret_only_a_minted_lease_is_restored() {
        use crate::core::lease_id::{Counting, LeaseMinter, LeaseSecret};
        let secret = LeaseSecret::new(vec![3; 32]).unwrap();
        let minter = || LeaseMinter::new(Box::<Counting>::default(), Some(&secret));
        let mut l = locker(10).with_lease_minter(minter());
        let db = l.find(Some("db")).unwrap();
        let (lease, _) = l.acquire(0, &AcquireAsk { ttl_ms: Some(100), ..AcquireAsk::new(db, 1) }).unwrap();
        // A restart: the same secret, none of the leases.
        let mut l = locker(10).with_lease_minter(minter());
        let restore = |lease, count| HeartbeatAsk { count: Some(count), ..HeartbeatAsk::new(db, lease) };
        let made_up = "00000000000000000000000000000001.00000000000000000000000000000000";
        assert_eq!(l.heartbeat(0, &restore(made_up, 2)), Err(LeaseError::NotMinted(made_up.into())));
        assert_eq!(l.heartbeat(0, &restore(&lease, 2)), Err(LeaseError::NotMinted(lease.clone())), "a larger count");
        assert_eq!(l.live_keys(), 0, "nothing was restored");
        assert!(matches!(l.heartbeat(0, &restore(&lease, 1)).unwrap().state, LeaseState::Held { .. }));
        assert!(
            matches!(l.heartbeat(1, &restore(&lease, 2)).unwrap().state, LeaseState::Held { .. }),
            "known: the id is enough"
        );
        let stats: Vec<_> = l.stats().map(|(_, s)| s).collect();
        assert_eq!(stats[1].errors, 2, "each forged restore is counted");
    }

    #[test]
    fn lease_ops_are_checked_against_the_limit() {
        let mut l = locker(1);
        let db = l.find(Some("db")).unwrap();
        let default = l.find(None).unwrap();
        let one = AcquireAsk::new(db, 1);
        assert_eq!(l.acquire(0, &AcquireAsk::new(db, 3)), Err(LeaseError::BadCount { count: 3, max: 2 }));
        assert_eq!(l.acquire(0, &AcquireAsk { ttl_ms: Some(0), ..one }), Err(LeaseError::BadTtl(0)));
        assert_eq!(l.acquire(0, &AcquireAsk { key: Some("k"), ..one }), Err(LeaseError::KeyOnSemaphore));
        assert!(matches!(l.acquire(0, &AcquireAsk::new(default, 1)), Err(LeaseError::NotSemaphore(_))));
        assert!(matches!(l.go(0, db, None, 1), Err(AskError::IsSemaphore(_))));
        l.acquire(0, &one).unwrap();
        assert_eq!(l.acquire(0, &one), Err(TableError::TooManyKeys(1).into()));
        let stats: Vec<_> = l.stats().map(|(_, s)| s).collect();
        assert_eq!((stats[1].requests, stats[1].go, stats[1].errors), (6, 1, 5));
    }
}
