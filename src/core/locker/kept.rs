//! What the locker keeps across a restart, through `Keeping`: after each
//! grant, lease change or gift, what it left behind in its limit
//! (`kept_go`, `kept_lease`, `kept_exchange`, read with
//! `Locker::keeping`), and on start, an earlier
//! run's record put back (`restore`, with `Locker::keeping_mut`); and the
//! table's `generation`, which tells when the limit numbers records use
//! have moved. Each kind's kept form is the kind's (`core::kinds` dispatches); this module
//! only finds the limit and keeps the live-key count in step.
//!
//! The daemon turns these into state-log records and back. An earlier
//! run's counts in the current slot go back as that run's node, the way a
//! peer's snapshot delivers them, so restore and peering merge by maximum
//! per node run and neither counts the other's twice.

use std::ops::Deref;

use super::Locker;
use crate::core::ask::Verdict;
pub use crate::core::kinds::{Kept, Owner, Saved};
use crate::core::limit::LimitId;
use crate::core::time::Nanos;

impl LimitId {
    /// The limit's place in the locker's order, the default limit first:
    /// stable for as long as the limits' definitions are.
    pub fn index(self) -> usize {
        self.0
    }
}

/// What the locker keeps across a restart, on a borrow of the table:
/// shared to read what a change left behind, exclusive to put an earlier
/// run's records back.
#[derive(Debug)]
pub struct Keeping<L> {
    locker: L,
}

impl Locker {
    /// What the table keeps across a restart, to write down after a change.
    pub fn keeping(&self) -> Keeping<&Locker> {
        Keeping { locker: self }
    }

    /// What the table keeps across a restart, to put an earlier run's
    /// records back into.
    pub fn keeping_mut(&mut self) -> Keeping<&mut Locker> {
        Keeping { locker: self }
    }
}

impl<L: Deref<Target = Locker>> Keeping<L> {
    /// A number that changes whenever the limits' numbers or definitions
    /// do (a reload, a limit created from terms, retuned or dropped):
    /// records name a limit by its number, which means the same limit only
    /// within one generation.
    pub fn generation(&self) -> u64 {
        self.locker.generation
    }

    /// The limit at `index` (see `LimitId::index`), if there is one.
    pub fn limit_at(&self, index: usize) -> Option<LimitId> {
        (index < self.locker.entries.len()).then_some(LimitId(index))
    }

    /// What a go answered with `v` for `key` of limit `id` at `now` left
    /// behind; `None` when it took nothing.
    pub fn kept_go(&self, now: Nanos, id: LimitId, key: Option<&str>, v: &Verdict) -> Option<Kept> {
        self.locker.entries[id.0].rule.kept_go(now, key, v)
    }

    /// What `key` of limit `id` holds in the slots after the current one
    /// (see `Rule::kept_ahead`), each as its record keeps it.
    pub fn kept_ahead(&self, id: LimitId, key: Option<&str>, f: impl FnMut(Kept)) {
        self.locker.entries[id.0].rule.kept_ahead(key, f);
    }

    /// What lease `lease` of semaphore `id` is after a lease request.
    pub fn kept_lease(&self, id: LimitId, lease: &str) -> Kept {
        self.locker.entries[id.0].rule.kept_lease(lease)
    }

    /// What the exchange of conserved permits of `key` of limit `id` left
    /// at `now`, as the state file keeps it (see `Rule::kept_exchange`).
    pub fn kept_exchange(&self, now: Nanos, id: LimitId, key: Option<&str>, mut f: impl FnMut(Kept)) {
        self.locker.entries[id.0].rule.kept_exchange(now, key, |e| f(Kept::Exchange(e)));
    }
}

impl Keeping<&mut Locker> {
    /// Puts back `saved`, an earlier run's record for `key` of limit `id`
    /// (a lease's id for a semaphore), at `now`. Returns `None` when
    /// nothing was put back, else the count now held (see `Rule::restore`).
    pub fn restore(&mut self, now: Nanos, id: LimitId, key: Option<&str>, saved: Saved) -> Option<u32> {
        self.locker.counted(now, id, |rule, room| rule.restore(now, id, key, saved, room))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::ask::{AcquireAsk, PermitAsk};
    use crate::core::limit::{Algorithm, Limit, Quota, DEFAULT_LIMIT};

    const SEC: Nanos = 1_000_000_000;
    const OLD_RUN: Owner = Owner::Node(7);

    /// A window's count of `count` in `slot`.
    fn window(slot: u64, count: u32) -> Kept {
        Kept::Window { slot, count }
    }

    /// An earlier run's count of `count` in `slot`, written at `written`, as `owner`'s.
    fn saved_count(slot: u64, count: u32, written: Nanos, owner: Owner) -> Saved {
        Saved { kept: window(slot, count), written, owner, run: 0 }
    }

    /// Asks `ask` of `l` at `now`; returns the verdict and what it kept.
    fn kept_after(l: &mut Locker, now: Nanos, ask: &PermitAsk) -> (Verdict, Kept) {
        let v = l.ask(now, ask).unwrap();
        (v, l.keeping().kept_go(now, ask.limit, ask.key, &v).unwrap())
    }

    /// Puts `saved`, an earlier run's window count for `key` of `d`, back
    /// into `l` at `now`, and checks that all of its count is then held.
    fn restores_whole(l: &mut Locker, now: Nanos, d: LimitId, key: Option<&str>, saved: Saved) {
        let Kept::Window { count, .. } = saved.kept else { unreachable!() };
        assert_eq!(l.keeping_mut().restore(now, d, key, saved), Some(count));
    }

    fn locker() -> Locker {
        let q = Quota::new(3, 1.0).unwrap();
        Locker::new(
            Limit::new(DEFAULT_LIMIT, q).unwrap(),
            vec![
                Limit::with_algorithm("smooth", q, Algorithm::token_bucket(3).unwrap()).unwrap(),
                Limit::with_algorithm("db", q, Algorithm::Semaphore).unwrap(),
            ],
            100,
        )
    }

    /// Runs asks on a first locker, then restores what they kept into a
    /// second one, as a restart with a state log does.
    #[test]
    fn a_restarted_window_grants_only_what_the_earlier_run_left() {
        let mut first = locker();
        let d = first.keeping().limit_at(0).unwrap();
        let one = PermitAsk::new(d).key("k");
        let mut kept: Vec<_> = (0..2).map(|_| kept_after(&mut first, 10 * SEC, &one).1).collect();
        let (reserved, later) = kept_after(&mut first, 10 * SEC, &one.cost(3).max_wait_ms(5_000));
        assert!(reserved.go && reserved.wait > 0);
        kept.push(later);
        assert_eq!(kept, [window(10, 1), window(10, 2), window(11, 3)]);

        let mut second = locker();
        for &kept in &kept[1..] {
            restores_whole(&mut second, 10 * SEC + 1, d, Some("k"), Saved { kept, written: 0, owner: OLD_RUN, run: 0 });
        }
        assert_eq!(
            second.keeping_mut().restore(10 * SEC, d, Some("k"), saved_count(9, 3, 0, OLD_RUN)),
            None,
            "an ended slot"
        );
        // One permit left in slot 10, but the reservation queued in 11 goes first.
        assert!(!second.go(10 * SEC, d, Some("k"), 1).unwrap().go);
        assert!(!second.go(11 * SEC, d, Some("k"), 1).unwrap().go, "slot 11 is reserved whole");
        assert!(second.go(12 * SEC, d, Some("k"), 1).unwrap().go);
    }

    #[test]
    fn alone_earlier_runs_counts_add_up_as_this_runs_own() {
        let mut l = locker();
        let d = l.keeping().limit_at(0).unwrap();
        assert_eq!(l.keeping_mut().restore(10 * SEC, d, Some("k"), saved_count(10, 1, 0, Owner::Own)), Some(1));
        assert_eq!(
            l.keeping_mut().restore(10 * SEC, d, Some("k"), saved_count(10, 1, 0, Owner::Own)),
            Some(2),
            "a second earlier run adds to it"
        );
        assert_eq!(
            l.keeping_mut().restore(10 * SEC, d, Some("k"), saved_count(11, 3, 0, Owner::Own)),
            Some(3),
            "a reservation"
        );
        assert_eq!(
            l.keeping_mut().restore(10 * SEC, d, Some("k"), saved_count(9, 3, 0, Owner::Own)),
            None,
            "an ended slot"
        );
        let v = l.go(10 * SEC, d, Some("k"), 1).unwrap();
        assert!(!v.go, "one permit left, but the reservation is queued first: {v:?}");
        assert!(!l.go(11 * SEC, d, Some("k"), 1).unwrap().go, "slot 11 is reserved whole");
    }

    /// Grants and a reservation of a rolling window of 3 per 10 s, kept
    /// by a first locker and put back into a second one alone.
    #[test]
    fn a_restarted_rolling_window_counts_the_earlier_runs_grants_and_reservation() {
        let rolling = || {
            let q = Quota::new(3, 10.0).unwrap();
            Locker::new(Limit::with_algorithm(DEFAULT_LIMIT, q, Algorithm::RollingWindow).unwrap(), vec![], 100)
        };
        let mut first = rolling();
        let d = first.keeping().limit_at(0).unwrap();
        let one = PermitAsk::new(d);
        let mut kept: Vec<_> = (0..2).map(|_| (10 * SEC, kept_after(&mut first, 10 * SEC, &one).1)).collect();
        let (reserved, later) = kept_after(&mut first, 11 * SEC, &one.cost(2).max_wait_ms(20_000));
        assert!(reserved.go && reserved.wait == 9 * SEC, "{reserved:?}");
        kept.push((11 * SEC, later));
        // Sub-slots are 10 s / 64 = 156.25 ms: 10 s is the first of #64, 20 s of #128.
        let subs: Vec<_> = kept.iter().map(|&(_, k)| k).collect();
        assert_eq!(subs, [window(64, 1), window(64, 2), window(128, 2)]);

        let mut second = rolling();
        // The reservation's record first: the order of a file is no promise.
        for &(written, kept) in kept[1..].iter().rev() {
            restores_whole(&mut second, 12 * SEC, d, None, Saved { kept, written, owner: Owner::Own, run: 0 });
        }
        assert_eq!(
            second.keeping_mut().restore(12 * SEC, d, None, saved_count(8, 3, SEC, Owner::Own)),
            None,
            "a sub-slot that ended"
        );
        assert!(!second.go(12 * SEC, d, None, 1).unwrap().go, "the reservation is queued first");
        // At 21 s the grants of 10 s have stopped counting; the reservation's have not.
        assert!(second.go(21 * SEC, d, None, 1).unwrap().go);
        assert!(!second.go(21 * SEC, d, None, 1).unwrap().go);
    }

    #[test]
    fn a_restarted_bucket_and_semaphore_hold_what_the_earlier_run_granted() {
        let mut first = locker();
        let (smooth, db) = (first.keeping().limit_at(1).unwrap(), first.keeping().limit_at(2).unwrap());
        let v = first.go(0, smooth, None, 3).unwrap();
        let bucket = first.keeping().kept_go(0, smooth, None, &v).unwrap();
        assert!(matches!(bucket, Kept::Bucket { count: 0, .. }), "alone: the TAT only: {bucket:?}");
        let ask = AcquireAsk { limit: db, key: None, count: 3, ttl_ms: Some(30_000), max_wait_ms: 0 };
        let (lease, _) = first.semaphores().acquire(0, &ask).unwrap();
        let held = first.keeping().kept_lease(db, &lease);
        assert!(matches!(held, Kept::Lease(_)), "{held:?}");

        let mut second = locker();
        let saved = |kept| Saved { kept, written: 0, owner: OLD_RUN, run: 0 };
        assert!(second.keeping_mut().restore(4 * SEC / 10, smooth, None, saved(bucket)).is_some());
        assert_eq!(second.keeping_mut().restore(SEC, db, Some(&lease), saved(held)), Some(3));
        assert_eq!(second.keeping_mut().restore(SEC, db, Some(&lease), saved(held)), None, "an id held already");
        let after = second.go(4 * SEC / 10, smooth, None, 2).unwrap();
        assert!(!after.go && after.remaining == 1, "one token refilled in 400 ms");
        let one = AcquireAsk { limit: db, key: None, count: 1, ttl_ms: None, max_wait_ms: 0 };
        assert!(second.semaphores().acquire(SEC, &one).unwrap().1.free == 0);
        assert_eq!(second.next_deadline(), Some(30 * SEC));
        assert_eq!(
            second.semaphores().release(SEC, db, &lease).map(|_| second.keeping().kept_lease(db, &lease)),
            Ok(Kept::Released)
        );
    }
}
