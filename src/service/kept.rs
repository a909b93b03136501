//! The state log's side of the service: noting what each request left
//! behind, handing it out as a record before the reply leaves, and putting
//! an earlier run's records back on start.
//!
//! Like the rest of the service this reads no clock and touches no file:
//! the daemon brings `now`, appends the records, and reads the file back.
//! Noting costs a copy of the key into a buffer kept between requests, and
//! only when a state file is in use; without one, requests never come here.

use std::collections::HashMap;

use super::Service;
use crate::core::kinds::rolling::{RollingWindow, SUB_SLOTS};
use crate::core::kinds::semaphore::kept::HeldLease;
use crate::core::locker::kept::{Kept, Owner, Saved};
use crate::core::{Algorithm, LimitId, Nanos, NodeIx, NodeKey, Quota, Verdict};
use crate::state::{collapse, Record};

/// What the last request changed, until the daemon takes it: one change
/// for most requests, one per granted entry for a batch.
#[derive(Debug)]
pub(super) struct Journal {
    run: u32,
    /// Each change, with where its key (or lease id) lies in `names`, if
    /// it has one. Both are cleared, never shrunk, so a warmed-up locker
    /// notes without allocating.
    pending: Vec<(Pending, Option<(usize, usize)>)>,
    names: String,
}

#[derive(Debug, Clone, Copy)]
enum Pending {
    Go { id: LimitId, verdict: Verdict },
    Lease { id: LimitId },
}

impl Journal {
    fn note(&mut self, pending: Pending, name: Option<&str>) {
        let span = name.map(|n| {
            let start = self.names.len();
            self.names.push_str(n);
            (start, self.names.len())
        });
        self.pending.push((pending, span));
    }
}

/// What a restore put back.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Restored {
    /// Fixed-window counts of earlier runs in the current slot, and
    /// rolling-window counts of sub-slots that still count.
    pub counts: usize,
    /// Reservations in later slots.
    pub reservations: usize,
    /// Token bucket keys.
    pub buckets: usize,
    /// Held leases.
    pub leases: usize,
    /// Records that could not be put back: a key beyond `max_keys`, a
    /// limit that is not of the recorded kind, a run that was not named.
    pub skipped: usize,
}

impl Service {
    /// Starts noting what each request leaves behind, for the state log,
    /// as run `run`.
    pub fn keep_state(&mut self, run: u32) {
        self.journal = Some(Journal { run, pending: Vec::with_capacity(16), names: String::with_capacity(1024) });
    }

    /// This locker's node when peered.
    pub fn node(&self) -> Option<&NodeKey> {
        self.peering.as_ref().map(|p| p.nodes().me())
    }

    #[inline]
    pub(super) fn note_go(&mut self, id: LimitId, key: Option<&str>, verdict: &Verdict) {
        if let Some(j) = &mut self.journal {
            if verdict.go && verdict.granted > 0 {
                j.note(Pending::Go { id, verdict: *verdict }, key);
            }
        }
    }

    pub(super) fn note_lease(&mut self, id: LimitId, lease: &str) {
        if let Some(j) = &mut self.journal {
            j.note(Pending::Lease { id }, Some(lease));
        }
    }

    /// Hands `f` the record of what the last request, answered at `now`,
    /// left behind, if it changed anything. The daemon calls this after
    /// each request, before the reply leaves.
    #[inline]
    pub fn take_kept(&mut self, now: Nanos, mut f: impl FnMut(&Record)) {
        let Some(mut j) = self.journal.take() else { return };
        for &(pending, span) in &j.pending {
            let name = span.map(|(start, end)| &j.names[start..end]);
            if let Some(record) = self.kept_record(now, j.run, pending, name) {
                f(&record);
            }
        }
        j.pending.clear();
        j.names.clear();
        self.journal = Some(j);
    }

    /// The record of one change, read from the locker as it is now.
    fn kept_record<'a>(&self, now: Nanos, run: u32, pending: Pending, name: Option<&'a str>) -> Option<Record<'a>> {
        let at = now;
        let record = match pending {
            Pending::Go { id, verdict } => {
                let limit = id.index() as u32;
                match self.locker.kept_go(now, id, name, &verdict) {
                    Some(Kept::Window { slot, count }) => Record::Window { at, run, limit, slot, count, key: name },
                    Some(Kept::Bucket { tat, period, count }) => {
                        Record::Bucket { at, run, limit, period, count, tat, key: name }
                    }
                    _ => return None,
                }
            }
            Pending::Lease { id } => {
                let (limit, lease) = (id.index() as u32, name.unwrap_or(""));
                match self.locker.kept_lease(id, lease) {
                    Kept::Lease(HeldLease { count, ttl, until }) => {
                        Record::Lease { at, limit, count, ttl, until, lease }
                    }
                    _ => Record::Release { at, limit, lease },
                }
            }
        };
        Some(record)
    }

    /// What decides whether a record is still live, to take to another
    /// thread: the limits' kinds and quotas.
    pub fn liveness(&self) -> Liveness {
        let limits = (0..).map_while(|i| self.locker.limit_at(i)).map(|id| self.locker.limit(id));
        Liveness { limits: limits.map(|l| (l.algorithm(), l.quota())).collect() }
    }

    /// Puts back the records of earlier runs at `now`, before serving:
    /// the latest live record of each thing. Returns what was put back and
    /// the records the new state file starts with: those read, except that
    /// counts this run now holds as its own (reservations, and every count
    /// of a locker that is not peered) become records of run `run`.
    ///
    /// A peered locker puts an earlier run's count in the current slot back
    /// as that run's node, so that a peer's snapshot of the same run merges
    /// with it by maximum; alone, the count is simply this run's own, which
    /// costs no more memory per key than a grant does.
    pub fn restore<'a>(
        &mut self,
        now: Nanos,
        run: u32,
        records: impl Iterator<Item = Record<'a>>,
    ) -> (Restored, Vec<Record<'a>>) {
        let liveness = self.liveness();
        let live = collapse(records, |r| liveness.is_live(now, r));
        let nodes = self.run_nodes(now, &live);
        let runs = live.iter().filter(|r| matches!(r, Record::Run { .. })).count();
        let mut done = Restored::default();
        let mut rewrite = Vec::with_capacity(live.len());
        for r in live {
            let id = r.limit().and_then(|i| self.locker.limit_at(i as usize));
            let (Some(id), Some((kept, key))) = (id, kept_of(&r)) else {
                match r {
                    Record::Run { .. } => rewrite.push(r),
                    // An earlier run's: this run writes its own.
                    Record::Clock { .. } => {}
                    _ => done.skipped += 1,
                }
                continue;
            };
            // When peered, a run's counts go back as its node, so that a
            // peer's snapshot of the same run merges with them by maximum;
            // alone, or reserved ahead in a fixed window, they become this
            // run's own: nobody else will ever count them.
            let node = r.run().and_then(|run| nodes.get(&run).copied());
            let later = matches!(kept, Kept::Window { slot, .. }
                if !self.locker.is_rolling(id) && slot > self.locker.limit(id).quota().slot_of(now));
            let owner = match node {
                Some(node) if !later => Owner::Node(node),
                _ => Owner::Own,
            };
            let held = self.locker.restore(now, id, key, Saved { kept, written: r.at(), owner });
            let tally = match kept {
                Kept::Window { .. } if later => &mut done.reservations,
                Kept::Window { .. } => &mut done.counts,
                Kept::Bucket { .. } => &mut done.buckets,
                Kept::Lease(_) | Kept::Released => &mut done.leases,
            };
            *tally += usize::from(held.is_some());
            match (held, kept, owner) {
                (None, _, _) => done.skipped += 1,
                // A count made this run's own: the sum of every earlier run's.
                (Some(count), Kept::Window { slot, .. }, Owner::Own) => {
                    let limit = id.index() as u32;
                    rewrite.push(Record::Window { at: now, run, limit, slot, count, key });
                }
                (Some(_), _, _) => rewrite.push(r),
            }
        }
        // Several earlier runs may have counted the same key and slot, each
        // adding to this run's own: the last record of each says the sum.
        let rewrite = if runs > 1 { collapse(rewrite.into_iter(), |_| true) } else { rewrite };
        (done, rewrite)
    }

    /// A node for every earlier run named in `records`, when peered: the
    /// run's own node key, held in the node table (as if the first
    /// configured peer had named it), so that a peer's snapshot of that run
    /// merges with what is restored. Alone, or when the table has no room,
    /// a run gets none and its counts become this run's own.
    fn run_nodes(&mut self, now: Nanos, records: &[Record]) -> HashMap<u32, NodeIx> {
        let mut nodes = HashMap::new();
        let Some(p) = &mut self.peering else { return nodes };
        for r in records {
            if let Record::Run { run, incarnation, node } = *r {
                if let Some(ix) = p.nodes_mut().resolve(now, 0, &NodeKey { id: node.into(), incarnation }) {
                    nodes.insert(run, ix);
                }
            }
        }
        nodes
    }
}

/// The kept form a record of a count, a bucket or a lease holds, and its
/// key (a lease's id); `None` for the records of runs and clocks.
fn kept_of<'a>(r: &Record<'a>) -> Option<(Kept, Option<&'a str>)> {
    match *r {
        Record::Window { slot, count, key, .. } => Some((Kept::Window { slot, count }, key)),
        Record::Bucket { tat, period, count, key, .. } => Some((Kept::Bucket { tat, period, count }, key)),
        Record::Lease { count, ttl, until, lease, .. } => {
            Some((Kept::Lease(HeldLease { count, ttl, until }), Some(lease)))
        }
        _ => None,
    }
}

/// Whether a record still says something, by the limits' kinds and quotas.
#[derive(Debug, Clone)]
pub struct Liveness {
    limits: Vec<(Algorithm, Quota)>,
}

impl Liveness {
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
