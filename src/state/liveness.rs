//! Which records still say something: by the limits' kinds and quotas, a
//! count of a slot that has not ended, a bucket not yet full again, a
//! lease not expired; and a record moved by a wall-clock step between runs.
//!
//! A `Liveness` is a copy of what it needs from the limits, so that
//! compaction can take it to its own thread. It reads no clock.

use crate::core::kinds::rolling::{RollingWindow, SUB_SLOTS};
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
        let limits = (0..).map_while(|i| locker.limit_at(i)).map(|id| locker.limit(id));
        Liveness { limits: limits.map(|l| (l.algorithm(), l.quota())).collect() }
    }

    /// Whether `record` still says something at `now`: a count of a slot
    /// that has not ended (of a rolling window's sub-slot, one whose last
    /// instant + the window is later), a bucket not yet full again or holding a count
    /// of the current or previous period, a lease not expired. A record
    /// naming a limit of another kind is not.
    pub fn is_live(&self, now: Nanos, record: &Record) -> bool {
        let limit = |i: u32| self.limits.get(i as usize);
        match *record {
            Record::Run { .. } | Record::Clock { .. } => true,
            Record::Window { limit: i, slot, .. } => limit(i).is_some_and(|&(a, q)| match a {
                Algorithm::FixedWindow => slot >= q.slot_of(now),
                // A rolling window's record is of a sub-slot, not a slot.
                Algorithm::RollingWindow => RollingWindow::sub_counts(q, slot, now),
                _ => false,
            }),
            Record::Bucket { limit: i, tat, period, .. } => limit(i).is_some_and(|(a, q)| {
                matches!(a, Algorithm::TokenBucket { .. }) && (tat > now || period.saturating_add(1) >= q.slot_of(now))
            }),
            Record::Lease { limit: i, until, .. } => {
                limit(i).is_some_and(|(a, _)| matches!(a, Algorithm::Semaphore)) && until > now
            }
            Record::Release { .. } => false,
        }
    }

    /// `record` moved by `step` nanoseconds, as written by a run whose wall
    /// clock read `step` less than this run's at the same true instant (the
    /// boot-time clock tells): its instants move by `step`, and its slot,
    /// sub-slot or period numbers by as many whole slots, sub-slots or
    /// periods as `step` comes nearest to. Then a wall clock stepped between
    /// two runs neither lets a slot's saved count lapse (a step ahead) nor
    /// keeps this run in the file's past or future (a step back, or a step
    /// that undid a wrong one).
    pub fn retimed<'a>(&self, record: Record<'a>, step: i64) -> Record<'a> {
        let at = |t: u64| t.saturating_add_signed(step);
        let units = |unit: Nanos| (step as f64 / unit.max(1) as f64).round() as i64;
        let quota = |i: u32| self.limits.get(i as usize).copied();
        match record {
            Record::Window { at: t, run, limit, slot, count, key } => {
                let unit = match quota(limit) {
                    Some((Algorithm::RollingWindow, q)) => (q.slot_ns() / SUB_SLOTS).max(1),
                    Some((_, q)) => q.slot_ns(),
                    None => return record,
                };
                Record::Window { at: at(t), run, limit, slot: slot.saturating_add_signed(units(unit)), count, key }
            }
            Record::Bucket { at: t, run, limit, period, count, tat, key } => {
                let Some((_, q)) = quota(limit) else { return record };
                let period = period.saturating_add_signed(units(q.slot_ns()));
                Record::Bucket { at: at(t), run, limit, period, count, tat: at(tat), key }
            }
            Record::Lease { at: t, limit, count, ttl, until, lease } => {
                Record::Lease { at: at(t), limit, count, ttl, until: at(until), lease }
            }
            Record::Release { at: t, limit, lease } => Record::Release { at: at(t), limit, lease },
            Record::Run { .. } | Record::Clock { .. } => record,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: Nanos = 1_000_000_000;

    #[test]
    fn a_rolling_windows_record_lives_while_its_sub_slot_counts() {
        // 3 per 10 s: sub-slots of 156.25 ms, numbered 64 times faster than slots.
        let q = Quota::new(3, 10.0).unwrap();
        let liveness = Liveness { limits: vec![(Algorithm::RollingWindow, q), (Algorithm::FixedWindow, q)] };
        let window = |limit, slot| Record::Window { at: 0, run: 0, limit, slot, count: 1, key: None };
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
        let window = |limit, at, slot| Record::Window { at, run: 0, limit, slot, count: 3, key: Some("k") };
        let hour = 3_600 * SEC as i64;
        assert_eq!(liveness.retimed(window(0, 5 * SEC, 0), hour), window(0, 3_605 * SEC, 360));
        assert_eq!(liveness.retimed(window(0, 3_605 * SEC, 360), -hour), window(0, 5 * SEC, 0), "and back");
        assert_eq!(liveness.retimed(window(1, 5 * SEC, 32), hour), window(1, 3_605 * SEC, 32 + 360 * 64));
        let lease = Record::Lease { at: SEC, limit: 0, count: 1, ttl: SEC, until: 2 * SEC, lease: "l" };
        let moved = Record::Lease { at: 4 * SEC, limit: 0, count: 1, ttl: SEC, until: 5 * SEC, lease: "l" };
        assert_eq!(liveness.retimed(lease, 3 * SEC as i64), moved, "a lease keeps its ttl");
        let run = Record::Run { run: 1, incarnation: 7, node: "" };
        assert_eq!(liveness.retimed(run, hour), run, "a run's record is not an instant");
    }
}
