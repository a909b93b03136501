//! What the locker keeps across a restart: after each grant or lease
//! change, what it left behind in its limit (`kept_go`, `kept_lease`), and
//! on start, the same put back (`restore_*`).
//!
//! The daemon turns these into state-log records and back; this module
//! only reads and writes counts. An earlier run's counts in the current
//! slot go back as that run's node, the way a peer's snapshot delivers
//! them, so restore and peering merge by maximum per node run and neither
//! counts the other's twice.

use super::Locker;
use crate::core::ask::Verdict;
use crate::core::kinds::semaphore::kept::HeldLease;
use crate::core::kinds::Rule;
use crate::core::limit::LimitId;
use crate::core::room::KeyRoom;
use crate::core::share::{Count, NodeIx};
use crate::core::time::Nanos;

/// What a request left behind in its limit, for the state log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kept {
    /// A fixed window key's own count in `slot` (the current one, or the
    /// later one a reservation landed in); for a rolling window, its own
    /// count in the peers' sub-slot `slot` its caller goes in.
    Window { slot: u64, count: u32 },
    /// A token bucket key's TAT, and its own grants in `period` (0 unless
    /// peered).
    Bucket { tat: Nanos, period: u64, count: u32 },
    /// A lease held.
    Lease(HeldLease),
    /// A lease no longer held (released, or not held at all).
    Released,
}

impl LimitId {
    /// The limit's place in the locker's order, the default limit first:
    /// stable for as long as the limits' definitions are.
    pub fn index(self) -> usize {
        self.0
    }
}

impl Locker {
    /// The limit at `index` (see `LimitId::index`), if there is one.
    pub fn limit_at(&self, index: usize) -> Option<LimitId> {
        (index < self.entries.len()).then_some(LimitId(index))
    }

    /// What a go answered with `v` for `key` of limit `id` at `now` left
    /// behind; `None` when it took nothing.
    pub fn kept_go(&self, now: Nanos, id: LimitId, key: Option<&str>, v: &Verdict) -> Option<Kept> {
        if !v.go || v.granted == 0 {
            return None;
        }
        match &self.entries[id.0].rule {
            Rule::Window(w) => {
                // A reservation waits exactly until the start of its slot.
                let slot = if v.wait == 0 { w.slot() } else { w.quota().slot_of(now.saturating_add(v.wait)) };
                Some(Kept::Window { slot, count: w.own_in(key, slot) })
            }
            Rule::Bucket(b) => {
                let (tat, period, count) = b.kept(now, key);
                Some(Kept::Bucket { tat, period, count })
            }
            Rule::Rolling(r) => {
                // The figure peers are sent (`note_own`): cumulative, so the
                // latest record of a sub-slot says all of it.
                let slot = r.sub_slot(now.saturating_add(v.wait));
                Some(Kept::Window { slot, count: r.own_in(key, slot) })
            }
            // Leases are kept by `kept_lease`.
            Rule::Semaphore(_) => None,
        }
    }

    /// What lease `lease` of semaphore `id` is after a lease request.
    pub fn kept_lease(&self, id: LimitId, lease: &str) -> Kept {
        match &self.entries[id.0].rule {
            Rule::Semaphore(s) => s.held(lease).map_or(Kept::Released, Kept::Lease),
            _ => Kept::Released,
        }
    }

    /// Puts back `count`, an earlier run's own count for `key` of fixed
    /// window `id` in `slot`: in the current slot as node `node`'s (see
    /// `merge`), in a later slot as this run's own reservation. Returns
    /// whether anything was put back (an ended slot, or a key beyond
    /// `max_keys`, is not).
    #[allow(clippy::too_many_arguments)]
    pub fn restore_count(
        &mut self,
        now: Nanos,
        id: LimitId,
        key: Option<&str>,
        slot: u64,
        node: NodeIx,
        count: u32,
    ) -> bool {
        let current = match &mut self.entries[id.0].rule {
            Rule::Window(w) => {
                w.advance(now);
                w.slot()
            }
            _ => return false,
        };
        if slot <= current {
            return self.merge(now, &Count::granted(id, key, slot, node, count));
        }
        self.counted(now, id, |rule, room| match rule {
            Rule::Window(w) => w.restore_reserved(key, slot, count, room).unwrap_or(false),
            _ => false,
        })
    }

    /// Adds `count`, an earlier run's own count for `key` of fixed window
    /// `id` in `slot` (the current slot or a later one), to this run's own.
    /// Returns the own count after, or `None` when nothing was added (an
    /// ended slot, or a key beyond `max_keys`).
    pub fn restore_own(&mut self, now: Nanos, id: LimitId, key: Option<&str>, slot: u64, count: u32) -> Option<u32> {
        self.counted(now, id, |rule, room| match rule {
            Rule::Window(w) => w.restore_own(key, slot, count, room).ok().flatten(),
            _ => None,
        })
    }

    /// Adds `count`, an earlier run's own count for `key` of rolling
    /// window `id` in sub-slot `sub`, written at `written`, to this run's
    /// own. Returns the own count in `sub` after, or `None` when nothing
    /// was added (a sub-slot that no longer counts, or a key beyond
    /// `max_keys`). A peered locker merges it as the earlier run's node
    /// instead (`merge`).
    pub fn restore_rolling_own(
        &mut self,
        now: Nanos,
        id: LimitId,
        key: Option<&str>,
        sub: u64,
        written: Nanos,
        count: u32,
    ) -> Option<u32> {
        self.counted(now, id, |rule, room| match rule {
            Rule::Rolling(r) => r.restore_own(now, key, sub, written, count, room).ok().flatten(),
            _ => None,
        })
    }

    /// Whether limit `id` is a rolling window.
    pub fn is_rolling(&self, id: LimitId) -> bool {
        matches!(self.entries[id.0].rule, Rule::Rolling(_))
    }

    /// Puts back a token bucket key: its TAT, and `node`'s grants in
    /// `period`. Returns whether the key is held.
    #[allow(clippy::too_many_arguments)]
    pub fn restore_bucket(
        &mut self,
        now: Nanos,
        id: LimitId,
        key: Option<&str>,
        tat: Nanos,
        node: NodeIx,
        period: u64,
        count: u32,
    ) -> bool {
        self.counted(now, id, |rule, room| match rule {
            Rule::Bucket(b) => b.restore(now, key, tat, node, period, count, room).unwrap_or(false),
            _ => false,
        })
    }

    /// Puts back lease `lease` of semaphore `id`, held until `held.until`
    /// (after `now`). Returns whether it was.
    pub fn restore_lease(&mut self, now: Nanos, id: LimitId, lease: &str, held: HeldLease) -> bool {
        self.counted(now, id, |rule, room| match (rule, room) {
            (Rule::Semaphore(s), KeyRoom::Free) => s.restore(now, lease, held),
            _ => false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::ask::{AcquireAsk, PermitAsk};
    use crate::core::limit::{Algorithm, Limit, Quota, DEFAULT_LIMIT};

    const SEC: Nanos = 1_000_000_000;
    const OLD_RUN: NodeIx = 7;

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
        let d = first.limit_at(0).unwrap();
        let mut kept = Vec::new();
        for _ in 0..2 {
            let v = first.go(10 * SEC, d, Some("k"), 1).unwrap();
            kept.push(first.kept_go(10 * SEC, d, Some("k"), &v).unwrap());
        }
        let reserved = first.ask(10 * SEC, &PermitAsk::new(d).key("k").cost(3).max_wait_ms(5_000)).unwrap();
        assert!(reserved.go && reserved.wait > 0);
        kept.push(first.kept_go(10 * SEC, d, Some("k"), &reserved).unwrap());
        assert_eq!(
            kept,
            [
                Kept::Window { slot: 10, count: 1 },
                Kept::Window { slot: 10, count: 2 },
                Kept::Window { slot: 11, count: 3 }
            ]
        );

        let mut second = locker();
        for k in &kept[1..] {
            let Kept::Window { slot, count } = *k else { unreachable!() };
            assert!(second.restore_count(10 * SEC + 1, d, Some("k"), slot, OLD_RUN, count));
        }
        assert!(!second.restore_count(10 * SEC, d, Some("k"), 9, OLD_RUN, 3), "an ended slot");
        // One permit left in slot 10, but the reservation queued in 11 goes first.
        assert!(!second.go(10 * SEC, d, Some("k"), 1).unwrap().go);
        assert!(!second.go(11 * SEC, d, Some("k"), 1).unwrap().go, "slot 11 is reserved whole");
        assert!(second.go(12 * SEC, d, Some("k"), 1).unwrap().go);
    }

    #[test]
    fn alone_earlier_runs_counts_add_up_as_this_runs_own() {
        let mut l = locker();
        let d = l.limit_at(0).unwrap();
        assert_eq!(l.restore_own(10 * SEC, d, Some("k"), 10, 1), Some(1));
        assert_eq!(l.restore_own(10 * SEC, d, Some("k"), 10, 1), Some(2), "a second earlier run adds to it");
        assert_eq!(l.restore_own(10 * SEC, d, Some("k"), 11, 3), Some(3), "a reservation");
        assert_eq!(l.restore_own(10 * SEC, d, Some("k"), 9, 3), None, "an ended slot");
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
        let d = first.limit_at(0).unwrap();
        let mut kept = Vec::new();
        for _ in 0..2 {
            let v = first.go(10 * SEC, d, None, 1).unwrap();
            kept.push((10 * SEC, first.kept_go(10 * SEC, d, None, &v).unwrap()));
        }
        let reserved = first.ask(11 * SEC, &PermitAsk::new(d).cost(2).max_wait_ms(20_000)).unwrap();
        assert!(reserved.go && reserved.wait == 9 * SEC, "{reserved:?}");
        kept.push((11 * SEC, first.kept_go(11 * SEC, d, None, &reserved).unwrap()));
        // Sub-slots are 10 s / 64 = 156.25 ms: 10 s is the first of #64, 20 s of #128.
        let subs: Vec<_> = kept.iter().map(|&(_, k)| k).collect();
        assert_eq!(
            subs,
            [
                Kept::Window { slot: 64, count: 1 },
                Kept::Window { slot: 64, count: 2 },
                Kept::Window { slot: 128, count: 2 }
            ]
        );

        let mut second = rolling();
        // The reservation's record first: the order of a file is no promise.
        for &(written, k) in kept[1..].iter().rev() {
            let Kept::Window { slot, count } = k else { unreachable!() };
            assert_eq!(second.restore_rolling_own(12 * SEC, d, None, slot, written, count), Some(count));
        }
        assert_eq!(second.restore_rolling_own(12 * SEC, d, None, 8, SEC, 3), None, "a sub-slot that ended");
        assert!(!second.go(12 * SEC, d, None, 1).unwrap().go, "the reservation is queued first");
        // At 21 s the grants of 10 s have stopped counting; the reservation's have not.
        assert!(second.go(21 * SEC, d, None, 1).unwrap().go);
        assert!(!second.go(21 * SEC, d, None, 1).unwrap().go);
    }

    #[test]
    fn a_restarted_bucket_and_semaphore_hold_what_the_earlier_run_granted() {
        let mut first = locker();
        let (smooth, db) = (first.limit_at(1).unwrap(), first.limit_at(2).unwrap());
        let v = first.go(0, smooth, None, 3).unwrap();
        let Some(Kept::Bucket { tat, period, count }) = first.kept_go(0, smooth, None, &v) else { panic!() };
        let ask = AcquireAsk { limit: db, key: None, count: 3, ttl_ms: Some(30_000), max_wait_ms: 0 };
        let (lease, _) = first.acquire(0, &ask).unwrap();
        let Kept::Lease(held) = first.kept_lease(db, &lease) else { panic!() };

        let mut second = locker();
        assert!(second.restore_bucket(4 * SEC / 10, smooth, None, tat, OLD_RUN, period, count));
        assert!(second.restore_lease(SEC, db, &lease, held));
        let after = second.go(4 * SEC / 10, smooth, None, 2).unwrap();
        assert!(!after.go && after.remaining == 1, "one token refilled in 400 ms");
        let one = AcquireAsk { limit: db, key: None, count: 1, ttl_ms: None, max_wait_ms: 0 };
        assert!(second.acquire(SEC, &one).unwrap().1.free == 0);
        assert_eq!(second.next_deadline(), Some(30 * SEC));
        assert_eq!(second.release(SEC, db, &lease).map(|_| second.kept_lease(db, &lease)), Ok(Kept::Released));
    }
}
