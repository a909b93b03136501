//! Which records still say something, and a record moved by a wall-clock
//! step between runs (exactly, to the nanosecond): each kind says whether
//! its kept form is live (`Kept::is_live`), `retime` how it moves; this
//! module reads a record's kept form out, finds its limit's kind and
//! quota, and writes the moved kept form back into a record (or two).
//!
//! A `Liveness` is a copy of what it needs from the limits, so that
//! compaction can take it to its own thread. It reads no clock.

use std::collections::HashMap;

use crate::core::kinds::Kept;

use super::retime::{retimed, Written};
use crate::core::{Algorithm, Locker, Nanos, Quota};

use super::Record;

/// A step of the wall clock between the file's last run and this one.
#[derive(Debug, Clone)]
pub struct Step {
    /// How far, in nanoseconds (ahead when positive).
    pub by: i64,
    /// When this run started, on the file's clock.
    pub restart: Nanos,
    /// When each run in the file started (its `Run` record): a count
    /// written after is that run's own grants, one written at or before
    /// its start a count it carried over from a run before it.
    pub runs: HashMap<u32, Nanos>,
}

impl Step {
    /// When `record` was written, as `retime::retimed` reads it.
    fn written(&self, record: &Record) -> Written {
        let started = record.run().and_then(|run| self.runs.get(&run)).copied();
        let own = started.is_some_and(|started| record.at() > started);
        Written { at: record.at(), own_until: own.then_some(self.restart) }
    }
}

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
            // A runtime limit's terms: dropping the limit rewrites the file.
            Record::Run { .. } | Record::Clock { .. } | Record::Terms { .. } => true,
            Record::Lease { kept: Kept::Released, .. } => false,
            _ => match (self.terms(record), record.kept()) {
                (Some((a, q)), Some((kept, _))) => kept.is_live(a, q, now),
                _ => false,
            },
        }
    }

    /// `record` moved by `step`, as written by a run whose wall clock read
    /// `step.by` nanoseconds less than this run's at the same real instant
    /// (the boot-time clock tells): its instants move by exactly that, and
    /// its count goes to the slots of this run's clock it must hold in
    /// (`retime::retimed`), never rounded to whole slots. A fixed window's
    /// count that must hold in two slots becomes two records, one per
    /// slot, each with the whole count. Then a wall clock stepped between
    /// two runs, by an hour or by 4 s, neither lets a slot's saved count
    /// lapse nor moves it into a slot its grants never went in.
    pub fn retimed<'a>(&self, record: Record<'a>, step: &Step) -> (Record<'a>, Option<Record<'a>>) {
        let by = step.by;
        let (Some((a, q)), Some((kept, _))) = (self.terms(&record), record.kept()) else {
            let moved = match record {
                Record::Lease { kept: Kept::Released, .. } => record.moved(by, Kept::Released),
                _ => record,
            };
            return (moved, None);
        };
        let (first, second) = retimed(kept, a, q, step.written(&record), by);
        (record.moved(by, first), second.map(|k| record.moved(by, k)))
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
    fn a_step_moves_instants_exactly_and_a_count_to_the_slots_its_grants_went_in() {
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
        let by = |by: i64| Step { by, restart: 0, runs: HashMap::new() };
        let hour = &by(3_600 * SEC as i64);
        assert_eq!(liveness.retimed(window(0, 5 * SEC, 0), hour), (window(0, 3_605 * SEC, 360), None));
        let back = &by(-3_600 * SEC as i64);
        assert_eq!(liveness.retimed(window(0, 3_605 * SEC, 360), back), (window(0, 5 * SEC, 0), None), "and back");
        assert_eq!(liveness.retimed(window(1, 5 * SEC, 32), hour), (window(1, 3_605 * SEC, 32 + 360 * 64), None));
        // Granted in [0, 6.5 s]: 4 s ahead, in [4 s, 10.5 s], slots 0 and 1.
        let four = &by(4 * SEC as i64);
        let split = (window(0, 10_500_000_000, 0), Some(window(0, 10_500_000_000, 1)));
        assert_eq!(liveness.retimed(window(0, 6_500_000_000, 0), four), split);
        // Granted in slot 1 up to 11.5 s by run 0, which started at 11 s;
        // restarted at 11.7 s with the clock 4 s back: the grants went in
        // [6 s, 7.5 s] (slot 0), the slot's rest is [7.7 s, 16 s) (slots 0
        // and 1). Carried over by run 0 (written at its start): slot 0 only.
        let restart =
            |started| Step { by: -4 * SEC as i64, restart: 11_700_000_000, runs: HashMap::from([(0, started)]) };
        let w = window(0, 11_500_000_000, 1);
        let held = (window(0, 7_500_000_000, 0), Some(window(0, 7_500_000_000, 1)));
        assert_eq!(liveness.retimed(w, &restart(11 * SEC)), held);
        assert_eq!(liveness.retimed(w, &restart(11_500_000_000)), (window(0, 7_500_000_000, 0), None));
        let held = |at, until| Record::Lease {
            at,
            limit: 0,
            lease: "l",
            kept: Kept::Lease(HeldLease { count: 1, ttl: SEC, until }),
        };
        let (lease, moved) = (held(SEC, 2 * SEC), held(4 * SEC, 5 * SEC));
        assert_eq!(liveness.retimed(lease, &by(3 * SEC as i64)), (moved, None), "a lease keeps its ttl");
        let run = Record::Run { run: 1, incarnation: 7, node: "" };
        assert_eq!(liveness.retimed(run, hour), (run, None), "a run's record is not an instant");
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
