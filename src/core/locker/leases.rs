//! The table's side of semaphore leases, through `Semaphores`
//! (`Locker::semaphores`): the checked handle on a limit's semaphore;
//! acquire, heartbeat and release run on it with the room the key table
//! has left, each counted; and the watch on pending leases that a held
//! lease request waits on (`service::hold_lease`).
//!
//! The checks, the lease ids and what an outcome means are the semaphore's
//! (`core::kinds::semaphore::leases`), as are the rules of holding, waiting,
//! expiry and restore; this module only finds the semaphore, keeps the
//! live-key count in step and counts each answer.

use super::{Locker, TableError};
use crate::core::ask::{AcquireAsk, HeartbeatAsk};
use crate::core::kinds::semaphore::leases::{LeaseError, Leases};
use crate::core::kinds::semaphore::{LeaseVerdict, Semaphore};
use crate::core::kinds::Rule;
use crate::core::limit::LimitId;
use crate::core::room::KeyRoom;
use crate::core::time::Nanos;

/// The table's semaphores, on a borrow of it: their leases taken,
/// renewed, freed and watched.
#[derive(Debug)]
pub struct Semaphores<'a> {
    locker: &'a mut Locker,
}

impl Locker {
    /// The table's semaphores, to run lease requests on.
    pub fn semaphores(&mut self) -> Semaphores<'_> {
        Semaphores { locker: self }
    }
}

impl<'a> Semaphores<'a> {
    /// Limit `id`'s semaphore, to check lease requests against and name
    /// leases with; an error when the limit is not a semaphore.
    pub fn leases(self, id: LimitId) -> Result<Leases<'a>, LeaseError> {
        self.locker.checked(id)
    }

    /// Takes `ask.count` of a semaphore under a new lease that lives
    /// `ask.ttl_ms` (the limit's in_seconds when `None`), waiting in the
    /// queue up to `ask.max_wait_ms` when the count is not free now.
    /// Returns the new lease's id, meaningful when the lease is held or
    /// pending.
    pub fn acquire(&mut self, now: Nanos, ask: &AcquireAsk) -> Result<(String, LeaseVerdict), LeaseError> {
        let result = self.locker.checked(ask.limit).and_then(|l| l.lease_for(ask)).and_then(|(lease, hold)| {
            let verdict = self.on_semaphore(now, ask.limit, |s, room| s.acquire_in(now, &lease, hold, room))?;
            verdict.map(|v| (lease, v)).ok_or(TableError::TooManyKeys(self.locker.max_keys).into())
        });
        self.locker.counters().note_acquire(ask.limit, &result);
        result
    }

    /// Extends lease `beat.lease` by `beat.ttl_ms` from now. With
    /// `beat.count`, a lease the semaphore does not know (after a restart)
    /// is restored if that count is free.
    pub fn heartbeat(&mut self, now: Nanos, beat: &HeartbeatAsk) -> Result<LeaseVerdict, LeaseError> {
        let result = self.locker.checked(beat.limit).and_then(|l| l.beat_terms(beat)).and_then(|terms| {
            let (outcome, full) =
                self.on_semaphore(now, beat.limit, |s, room| s.beat_in(now, beat.lease, &terms, room))?;
            terms.outcome(beat.lease, outcome, full.then_some(TableError::TooManyKeys(self.locker.max_keys)))
        });
        self.locker.counters().note_follow_up(beat.limit, &result);
        result
    }

    /// Frees lease `lease` of semaphore `id`; an unknown lease (already
    /// expired or released) is not an error.
    pub fn release(&mut self, now: Nanos, id: LimitId, lease: &str) -> Result<LeaseVerdict, LeaseError> {
        let result = self.on_semaphore(now, id, |s, _| s.release(now, lease));
        self.locker.counters().note_follow_up(id, &result);
        result
    }

    /// What lease `lease` of semaphore `id` is now (`Unknown` when gone),
    /// without bringing the semaphore up to date.
    pub fn lease_state(&self, id: LimitId, lease: &str) -> Result<LeaseVerdict, LeaseError> {
        match &self.locker.entries[id.0].rule {
            Rule::Semaphore(s) => Ok(s.state_of(lease)),
            _ => Err(LeaseError::NotSemaphore(self.locker.entries[id.0].limit.name().to_owned())),
        }
    }

    /// Watches pending lease `lease` of semaphore `id`, or stops: when a
    /// watched lease is granted or dropped, `take_changed_leases` names
    /// it. Whether the lease is pending (only a pending one is watched).
    pub fn watch_lease(&mut self, id: LimitId, lease: &str, watched: bool) -> bool {
        match &mut self.locker.entries[id.0].rule {
            Rule::Semaphore(s) => s.watch(lease, watched),
            _ => false,
        }
    }

    /// Moves the ids of the watched leases granted or dropped since the
    /// last call, over every semaphore, to the end of `out`.
    pub fn take_changed_leases(&mut self, out: &mut impl Extend<Box<str>>) {
        for entry in &mut self.locker.entries {
            if let Rule::Semaphore(s) = &mut entry.rule {
                s.take_changed(out);
            }
        }
    }

    /// Drops pending lease `lease` of semaphore `id` at `now`, as the end
    /// of its wait would (uncounted: no request asked for it); whether it
    /// was pending.
    pub fn drop_waiter(&mut self, now: Nanos, id: LimitId, lease: &str) -> bool {
        self.on_semaphore(now, id, |s, _| s.drop_waiter(lease)).unwrap_or(false)
    }

    /// Brings every semaphore up to `now`, so that a raised capacity is
    /// granted to its waiters at once.
    pub fn wake_waiters(&mut self, now: Nanos) {
        for i in 0..self.locker.entries.len() {
            if matches!(self.locker.entries[i].rule, Rule::Semaphore(_)) {
                self.locker.counted(now, LimitId(i), |_, _| ());
            }
        }
    }

    /// Runs `f` on semaphore `id`, brought up to `now`, keeping live keys in step.
    fn on_semaphore<T>(
        &mut self,
        now: Nanos,
        id: LimitId,
        f: impl FnOnce(&mut Semaphore, KeyRoom) -> T,
    ) -> Result<T, LeaseError> {
        self.locker.checked(id)?;
        Ok(self.locker.counted(now, id, |rule, room| f(rule.semaphore().expect("checked above"), room)))
    }
}

impl Locker {
    /// Limit `id`'s semaphore, checked (see `Semaphores::leases`).
    fn checked(&mut self, id: LimitId) -> Result<Leases<'_>, LeaseError> {
        let entry = &self.entries[id.0];
        match entry.rule {
            Rule::Semaphore(_) => Ok(Leases::new(&entry.limit, &mut self.minter)),
            _ => Err(LeaseError::NotSemaphore(entry.limit.name().to_owned())),
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
        let (lease, v) =
            l.semaphores().acquire(0, &AcquireAsk { ttl_ms: Some(100), ..AcquireAsk::new(db, 1) }).unwrap();
        assert_eq!(lease, "00000000000000000000000000000001", "counting entropy, no secret");
        assert_eq!(v.state, LeaseState::Held { until: 100 * MS });
        assert_eq!(l.figures().live_keys(), 1);
        assert_eq!(l.next_deadline(), Some(100 * MS));
        l.expire(100 * MS);
        assert_eq!((l.figures().live_keys(), l.next_deadline()), (0, None));
        assert_eq!(
            l.semaphores().heartbeat(0, &HeartbeatAsk::new(db, &lease)),
            Err(LeaseError::UnknownLease(lease.clone()))
        );
        let restore = HeartbeatAsk { count: Some(2), ..HeartbeatAsk::new(db, &lease) };
        let restored = l.semaphores().heartbeat(200 * MS, &restore).unwrap();
        assert_eq!(restored.state, LeaseState::Held { until: 1_200 * MS }, "the default ttl is in_seconds");
    }

    #[test]
    fn with_a_secret_only_a_minted_lease_is_restored() {
        use crate::core::lease_id::{Counting, LeaseMinter, LeaseSecret};
        let secret = LeaseSecret::new(vec![3; 32]).unwrap();
        let minter = || LeaseMinter::new(Box::<Counting>::default(), Some(&secret));
        let mut l = locker(10).with_lease_minter(minter());
        let db = l.find(Some("db")).unwrap();
        let (lease, _) =
            l.semaphores().acquire(0, &AcquireAsk { ttl_ms: Some(100), ..AcquireAsk::new(db, 1) }).unwrap();
        // A restart: the same secret, none of the leases.
        let mut l = locker(10).with_lease_minter(minter());
        let restore = |lease, count| HeartbeatAsk { count: Some(count), ..HeartbeatAsk::new(db, lease) };
        let made_up = "00000000000000000000000000000001.00000000000000000000000000000000";
        assert_eq!(l.semaphores().heartbeat(0, &restore(made_up, 2)), Err(LeaseError::NotMinted(made_up.into())));
        assert_eq!(
            l.semaphores().heartbeat(0, &restore(&lease, 2)),
            Err(LeaseError::NotMinted(lease.clone())),
            "a larger count"
        );
        assert_eq!(l.figures().live_keys(), 0, "nothing was restored");
        assert!(matches!(l.semaphores().heartbeat(0, &restore(&lease, 1)).unwrap().state, LeaseState::Held { .. }));
        assert!(
            matches!(l.semaphores().heartbeat(1, &restore(&lease, 2)).unwrap().state, LeaseState::Held { .. }),
            "known: the id is enough"
        );
        let stats: Vec<_> = l.figures().stats().map(|(_, s)| s).collect();
        assert_eq!(stats[1].errors, 2, "each forged restore is counted");
    }

    #[test]
    fn lease_ops_are_checked_against_the_limit() {
        let mut l = locker(1);
        let db = l.find(Some("db")).unwrap();
        let default = l.find(None).unwrap();
        let one = AcquireAsk::new(db, 1);
        assert_eq!(l.semaphores().acquire(0, &AcquireAsk::new(db, 3)), Err(LeaseError::BadCount { count: 3, max: 2 }));
        assert_eq!(l.semaphores().acquire(0, &AcquireAsk { ttl_ms: Some(0), ..one }), Err(LeaseError::BadTtl(0)));
        assert_eq!(l.semaphores().acquire(0, &AcquireAsk { key: Some("k"), ..one }), Err(LeaseError::KeyOnSemaphore));
        assert!(matches!(l.semaphores().acquire(0, &AcquireAsk::new(default, 1)), Err(LeaseError::NotSemaphore(_))));
        assert!(matches!(l.go(0, db, None, 1), Err(AskError::IsSemaphore(_))));
        l.semaphores().acquire(0, &one).unwrap();
        assert_eq!(l.semaphores().acquire(0, &one), Err(TableError::TooManyKeys(1).into()));
        let stats: Vec<_> = l.figures().stats().map(|(_, s)| s).collect();
        assert_eq!((stats[1].requests, stats[1].go, stats[1].errors), (6, 1, 5));
    }
}
