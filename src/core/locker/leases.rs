//! The locker's side of semaphore leases: checking acquire, heartbeat and
//! release against the limit they name, issuing lease ids, and counting.
//!
//! The rules of holding, waiting, expiry and restore are `core::semaphore`'s;
//! this module only adds names, checks and statistics.

use super::{AskError, LimitId, Locker, MAX_TTL_MS, MAX_WAIT_MS};
use crate::core::rule::Rule;
use crate::core::semaphore::{LeaseState, LeaseVerdict, NoCapacity, Semaphore};
use crate::core::time::{Nanos, NANOS_PER_MS};
use crate::core::window::KeyRoom;

impl Locker {
    /// Takes `count` of semaphore `id` under a new lease that lives
    /// `ttl_ms` (the limit's in_seconds when `None`), waiting in the queue up
    /// to `max_wait_ms` when the count is not free now. Returns the new
    /// lease's id, meaningful when the lease is held or pending.
    pub fn acquire(
        &mut self,
        now: Nanos,
        id: LimitId,
        key: Option<&str>,
        count: u64,
        ttl_ms: Option<u64>,
        max_wait_ms: u64,
    ) -> Result<(String, LeaseVerdict), AskError> {
        let result = self.try_acquire(now, id, key, count, ttl_ms, max_wait_ms);
        let stats = &mut self.entries[id.0].stats;
        stats.requests += 1;
        match &result {
            Ok((_, v)) => match v.state {
                LeaseState::Held { .. } => stats.go += 1,
                LeaseState::Pending { .. } => stats.waited += 1,
                _ => stats.sorry += 1,
            },
            Err(_) => stats.errors += 1,
        }
        result
    }

    fn try_acquire(
        &mut self,
        now: Nanos,
        id: LimitId,
        key: Option<&str>,
        count: u64,
        ttl_ms: Option<u64>,
        max_wait_ms: u64,
    ) -> Result<(String, LeaseVerdict), AskError> {
        if key.is_some() {
            return Err(AskError::KeyOnSemaphore);
        }
        let count = self.lease_count(id, count)?;
        let ttl = self.lease_ttl(id, ttl_ms)?;
        if max_wait_ms > MAX_WAIT_MS {
            return Err(AskError::WaitTooLong(max_wait_ms));
        }
        self.leases_made += 1;
        let lease = format!("{:016x}-{}", self.lease_prefix, self.leases_made);
        let max_wait = max_wait_ms * NANOS_PER_MS;
        let verdict = self.on_semaphore(now, id, |s, room| match room {
            KeyRoom::Full => None,
            KeyRoom::Free => Some(s.acquire(now, &lease, count, ttl, max_wait)),
        })?;
        verdict.map(|v| (lease, v)).ok_or(AskError::TooManyKeys(self.max_keys))
    }

    /// Extends lease `lease` of semaphore `id` by `ttl_ms` from now. With
    /// `count`, a lease the semaphore does not know (after a restart) is
    /// restored if that count is free.
    pub fn heartbeat(
        &mut self,
        now: Nanos,
        id: LimitId,
        lease: &str,
        ttl_ms: Option<u64>,
        count: Option<u64>,
    ) -> Result<LeaseVerdict, AskError> {
        let result = self.try_heartbeat(now, id, lease, ttl_ms, count);
        if result.is_err() {
            self.entries[id.0].stats.errors += 1;
        }
        result
    }

    fn try_heartbeat(
        &mut self,
        now: Nanos,
        id: LimitId,
        lease: &str,
        ttl_ms: Option<u64>,
        count: Option<u64>,
    ) -> Result<LeaseVerdict, AskError> {
        let ttl = self.lease_ttl(id, ttl_ms)?;
        let restore = count.map(|c| self.lease_count(id, c)).transpose()?;
        let max_keys = self.max_keys;
        let outcome = self.on_semaphore(now, id, |s, room| {
            // A full key table still lets known leases beat; it only stops a restore.
            let restore = if matches!(room, KeyRoom::Full) { None } else { restore };
            s.heartbeat(now, lease, ttl, restore)
        })?;
        match outcome {
            Ok(v) if v.state == LeaseState::Unknown && restore.is_some() => Err(AskError::TooManyKeys(max_keys)),
            Ok(v) if v.state == LeaseState::Unknown => Err(AskError::UnknownLease(lease.to_owned())),
            Ok(v) => Ok(v),
            Err(NoCapacity { free }) => {
                Err(AskError::CannotRestore { lease: lease.to_owned(), count: restore.unwrap_or(0), free })
            }
        }
    }

    /// Frees lease `lease` of semaphore `id`; an unknown lease (already
    /// expired or released) is not an error.
    pub fn release(&mut self, now: Nanos, id: LimitId, lease: &str) -> Result<LeaseVerdict, AskError> {
        let result = self.on_semaphore(now, id, |s, _| s.release(now, lease));
        if result.is_err() {
            self.entries[id.0].stats.errors += 1;
        }
        result
    }

    /// Runs `f` on semaphore `id`, brought up to `now`, keeping live keys in step.
    fn on_semaphore<T>(
        &mut self,
        now: Nanos,
        id: LimitId,
        f: impl FnOnce(&mut Semaphore, KeyRoom) -> T,
    ) -> Result<T, AskError> {
        if !matches!(self.entries[id.0].rule, Rule::Semaphore(_)) {
            return Err(AskError::NotSemaphore(self.entries[id.0].limit.name().to_owned()));
        }
        Ok(self.counted(now, id, |rule, room| f(rule.semaphore().expect("checked above"), room)))
    }

    fn lease_count(&self, id: LimitId, count: u64) -> Result<u32, AskError> {
        let max = self.entries[id.0].limit.capacity();
        match u32::try_from(count) {
            Ok(c) if (1..=max).contains(&c) => Ok(c),
            _ => Err(AskError::BadCount { count, max }),
        }
    }

    fn lease_ttl(&self, id: LimitId, ttl_ms: Option<u64>) -> Result<Nanos, AskError> {
        match ttl_ms {
            None => Ok(self.entries[id.0].limit.quota().slot_ns()),
            Some(ms) if (1..=MAX_TTL_MS).contains(&ms) => Ok(ms * NANOS_PER_MS),
            Some(ms) => Err(AskError::BadTtl(ms)),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::core::limit::{Algorithm, Limit, Quota, DEFAULT_LIMIT};
    use crate::core::semaphore::LeaseState;
    use crate::core::{AskError, Locker};

    const MS: u64 = 1_000_000;

    fn locker(max_keys: usize) -> Locker {
        let q = Quota::new(2, 1.0).unwrap();
        let db = Limit::with_algorithm("db", q, Algorithm::Semaphore).unwrap();
        Locker::new(Limit::new(DEFAULT_LIMIT, q).unwrap(), vec![db], max_keys).with_lease_prefix(0xab)
    }

    #[test]
    fn leases_have_prefixed_ids_count_as_live_keys_and_drive_the_deadline() {
        let mut l = locker(10);
        let db = l.find(Some("db")).unwrap();
        let (lease, v) = l.acquire(0, db, None, 1, Some(100), 0).unwrap();
        assert_eq!(lease, "00000000000000ab-1");
        assert_eq!(v.state, LeaseState::Held { until: 100 * MS });
        assert_eq!(l.live_keys(), 1);
        assert_eq!(l.next_deadline(), Some(100 * MS));
        l.expire(100 * MS);
        assert_eq!((l.live_keys(), l.next_deadline()), (0, None));
        assert_eq!(l.heartbeat(0, db, &lease, None, None), Err(AskError::UnknownLease(lease.clone())));
        let restored = l.heartbeat(200 * MS, db, &lease, None, Some(2)).unwrap();
        assert_eq!(restored.state, LeaseState::Held { until: 1_200 * MS }, "the default ttl is in_seconds");
    }

    #[test]
    fn lease_ops_are_checked_against_the_limit() {
        let mut l = locker(1);
        let db = l.find(Some("db")).unwrap();
        let default = l.find(None).unwrap();
        assert_eq!(l.acquire(0, db, None, 3, None, 0), Err(AskError::BadCount { count: 3, max: 2 }));
        assert_eq!(l.acquire(0, db, None, 1, Some(0), 0), Err(AskError::BadTtl(0)));
        assert_eq!(l.acquire(0, db, Some("k"), 1, None, 0), Err(AskError::KeyOnSemaphore));
        assert!(matches!(l.acquire(0, default, None, 1, None, 0), Err(AskError::NotSemaphore(_))));
        assert!(matches!(l.go(0, db, None, 1), Err(AskError::IsSemaphore(_))));
        l.acquire(0, db, None, 1, None, 0).unwrap();
        assert_eq!(l.acquire(0, db, None, 1, None, 0), Err(AskError::TooManyKeys(1)));
        let stats: Vec<_> = l.stats().map(|(_, s)| s).collect();
        assert_eq!((stats[1].requests, stats[1].go, stats[1].errors), (6, 1, 5));
    }
}
