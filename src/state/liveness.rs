//! Which records still say something, and a record moved by a wall-clock
//! step between runs: each kind says so of its kept form (`Kept::is_live`,
//! `Kept::retimed`); this module reads a record's kept form out and finds
//! its limit's kind and quota.
//!
//! A `Liveness` is a copy of what it needs from the limits, so that
//! compaction can take it to its own thread. It reads no clock.

use crate::core::kinds::Kept;
use crate::core::{Algorithm, Locker, Nanos, Quota};

use super::Record;

/// Whether a record still says something, by the limits' kinds and quotas.
#[derive(Debug, Clone)]
pub struct Liveness {
    limits: Vec<(Algorithm, Quota)>,
}

impl Liveness {
    /// What decides liveness for `locker`'s limits.
    pub fn of(locker: &Locker) -> Liveness {
        let limits = (0..).map_while(|i| locker.keeping().limit_at(i)).map(|id| locker.limit(id));
        Liveness { limits: limits.map(|l| (l.algorithm(), l.quota())).collect() }
    }

    /// Whether `record` still says something at `now`: a run's and a
    /// clock's always, a release never, a count, a bucket or a lease as
    /// its limit's kind says (`Kept::is_live`). A record naming a limit of
    /// another kind, or none, does not.
    pub fn is_live(&self, now: Nanos, record: &Record) -> bool {
        match *record {
            Record::Run { .. } | Record::Clock { .. } => true,
            Record::Lease { kept: Kept::Released, .. } => false,
            _ => match (self.terms(record), record.kept()) {
                (Some((a, q)), Some((kept, _))) => kept.is_live(a, q, now),
                _ => false,
            },
        }
    }

    /// `record` moved by `step` nanoseconds, as written by a run whose wall
    /// clock read `step` less than this run's at the same true instant (the
    /// boot-time clock tells): its instants move by `step`, and its slot,
    /// sub-slot or period numbers by as many whole slots, sub-slots or
    /// periods as `step` comes nearest to (`Kept::retimed`). Then a wall
    /// clock stepped between two runs neither lets a slot's saved count
    /// lapse (a step ahead) nor keeps this run in the file's past or future
    /// (a step back, or a step that undid a wrong one).
    pub fn retimed<'a>(&self, record: Record<'a>, step: i64) -> Record<'a> {
        let (Some((a, q)), Some((kept, _))) = (self.terms(&record), record.kept()) else {
            return match record {
                Record::Lease { kept: Kept::Released, .. } => record.moved(step, Kept::Released),
                _ => record,
            };
        };
        record.moved(step, kept.retimed(a, q, step))
    }

    /// The kind and quota of the limit `record` names.
    fn terms(&self, record: &Record) -> Option<(Algorithm, Quota)> {
        record.limit().and_then(|i| self.limits.get(i as usize)).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::kinds::semaphore::kept::HeldLease;

    const SEC: Nanos = 1_000_000_000;

    #[test]
    fn a_rolling_windows_record_lives_while_its_sub_slot_counts() {
        // 3 per 10 s: sub-slots of 156.25 ms, numbered 64 times faster than slots.
        let q = Quota::new(3, 10.0).unwrap();
        let liveness = Liveness { limits: vec![(Algorithm::RollingWindow, q), (Algorithm::FixedWindow, q)] };
        let window =
            |limit, slot| Record::Count { at: 0, run: 0, limit, key: None, kept: Kept::Window { slot, count: 1 } };
        // Sub-slot 64 is [10 s, 10.15625 s): its last instant counts for 10 s more.
        assert!(liveness.is_live(20 * SEC, &window(0, 64)));
        assert!(liveness.is_live(20 * SEC + 156_249_998, &window(0, 64)));
        assert!(!liveness.is_live(20 * SEC + 156_249_999, &window(0, 64)));
        assert!(liveness.is_live(20 * SEC, &window(0, 200)), "a reservation ahead");
        // The same numbers as a fixed window's slots.
        assert!(liveness.is_live(20 * SEC, &window(1, 2)));
        assert!(!liveness.is_live(30 * SEC, &window(1, 2)));
    }

    #[test]
    fn a_step_moves_instants_and_slot_numbers_by_the_nearest_whole_unit() {
        // Slots of 10 s; the rolling window's sub-slots of 156.25 ms.
        let q = Quota::new(3, 10.0).unwrap();
        let liveness = Liveness { limits: vec![(Algorithm::FixedWindow, q), (Algorithm::RollingWindow, q)] };
        let window = |limit, at, slot| Record::Count {
            at,
            run: 0,
            limit,
            key: Some("k"),
            kept: Kept::Window { slot, count: 3 },
        };
        let hour = 3_600 * SEC as i64;
        assert_eq!(liveness.retimed(window(0, 5 * SEC, 0), hour), window(0, 3_605 * SEC, 360));
        assert_eq!(liveness.retimed(window(0, 3_605 * SEC, 360), -hour), window(0, 5 * SEC, 0), "and back");
        assert_eq!(liveness.retimed(window(1, 5 * SEC, 32), hour), window(1, 3_605 * SEC, 32 + 360 * 64));
        let held = |at, until| Record::Lease {
            at,
            limit: 0,
            lease: "l",
            kept: Kept::Lease(HeldLease { count: 1, ttl: SEC, until }),
        };
        let (lease, moved) = (held(SEC, 2 * SEC), held(4 * SEC, 5 * SEC));
        assert_eq!(liveness.retimed(lease, 3 * SEC as i64), moved, "a lease keeps its ttl");
        let run = Record::Run { run: 1, incarnation: 7, node: "" };
        assert_eq!(liveness.retimed(run, hour), run, "a run's record is not an instant");
    }

    #[test]
    fn a_bucket_lives_until_full_again_a_lease_until_it_expires_and_another_kinds_record_not_at_all() {
        let q = Quota::new(3, 10.0).unwrap();
        let bucket = Algorithm::TokenBucket { burst: std::num::NonZeroU32::new(3).unwrap() };
        let liveness = Liveness { limits: vec![(bucket, q), (Algorithm::Semaphore, q), (Algorithm::FixedWindow, q)] };
        let b = |limit, tat, period| Record::Count {
            at: 0,
            run: 0,
            limit,
            key: None,
            kept: Kept::Bucket { tat, period, count: 1 },
        };
        assert!(liveness.is_live(25 * SEC, &b(0, 26 * SEC, 0)), "not yet full again");
        assert!(liveness.is_live(25 * SEC, &b(0, 0, 1)), "a count of the previous period");
        assert!(!liveness.is_live(25 * SEC, &b(0, 0, 0)));
        let lease = |limit, until| Record::Lease {
            at: 0,
            limit,
            lease: "l",
            kept: Kept::Lease(HeldLease { count: 1, ttl: SEC, until }),
        };
        assert!(liveness.is_live(SEC, &lease(1, SEC + 1)));
        assert!(!liveness.is_live(SEC, &lease(1, SEC)), "expired");
        assert!(!liveness.is_live(0, &lease(2, SEC)), "a lease of a fixed window");
        assert!(!liveness.is_live(0, &b(2, SEC, 0)), "a bucket of a fixed window");
        assert!(!liveness.is_live(0, &lease(9, SEC)), "a limit that is not there");
    }
}
