//! From a stream of records to the live state they describe: the latest
//! record of each thing, without what has ended.
//!
//! Compaction writes what this returns; a restore replays it. Which records
//! are still live (a slot not ended, a lease not expired) is the caller's
//! to say: this module knows records, not limits or clocks.

use std::collections::{HashMap, HashSet};

use foldhash::fast::RandomState;

use super::record::{Identity, Record};
use crate::core::kinds::Kept;

/// The latest record of each identity that `keep` keeps, in the order of
/// those latest records. A release is never kept (it voids the lease it
/// names), and a `Run` only while a kept record carries its tag.
pub fn collapse<'a>(
    records: impl Iterator<Item = Record<'a>>,
    mut keep: impl FnMut(&Record) -> bool,
) -> Vec<Record<'a>> {
    let mut latest: HashMap<Identity<'a>, usize, RandomState> = HashMap::default();
    let mut all: Vec<Option<Record<'a>>> = Vec::new();
    for r in records {
        if let Some(i) = latest.insert(r.identity(), all.len()) {
            all[i] = None;
        }
        all.push(Some(r));
    }
    let live: Vec<Record<'a>> = all
        .into_iter()
        .flatten()
        .filter(|r| !matches!(r, Record::Lease { kept: Kept::Released, .. }) && keep(r))
        .collect();
    let runs: HashSet<u32> = live.iter().filter_map(run_of).collect();
    live.into_iter().filter(|r| !matches!(r, Record::Run { run, .. } if !runs.contains(run))).collect()
}

/// The run a count (or ledger) record belongs to.
fn run_of(r: &Record) -> Option<u32> {
    match *r {
        Record::Count { run, .. } => Some(run),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::core::kinds::semaphore::kept::HeldLease;

    fn window(at: u64, run: u32, slot: u64, count: u32, key: Option<&str>) -> Record<'_> {
        Record::Count { at, run, limit: 0, key, kept: Kept::Window { slot, count } }
    }

    fn lease(at: u64, lease: &str, kept: Kept) -> Record<'_> {
        Record::Lease { at, limit: 1, lease, kept }
    }

    const HELD: Kept = Kept::Lease(HeldLease { count: 1, ttl: 5, until: 27 });

    #[test]
    fn the_latest_record_of_each_thing_wins_in_order() {
        let records = vec![
            Record::Run { run: 1, incarnation: 10, node: "a" },
            window(11, 1, 5, 1, Some("x")),
            window(12, 1, 5, 1, Some("y")),
            window(13, 1, 5, 2, Some("x")),
            window(14, 1, 6, 1, Some("x")),
        ];
        let live = collapse(records.into_iter(), |_| true);
        assert_eq!(live.len(), 4);
        assert_eq!(live[1], window(12, 1, 5, 1, Some("y")));
        assert_eq!(live[2], window(13, 1, 5, 2, Some("x")));
    }

    #[test]
    fn ended_things_released_leases_and_runs_without_counts_are_dropped() {
        let records = vec![
            Record::Run { run: 1, incarnation: 10, node: "a" },
            Record::Run { run: 2, incarnation: 20, node: "a" },
            window(11, 1, 5, 3, None),
            window(21, 2, 6, 1, None),
            lease(22, "l1", HELD),
            lease(22, "l2", HELD),
            lease(23, "l1", Kept::Released),
        ];
        let live =
            collapse(records.into_iter(), |r| !matches!(r, Record::Count { kept: Kept::Window { slot: 5, .. }, .. }));
        assert_eq!(
            live,
            vec![Record::Run { run: 2, incarnation: 20, node: "a" }, window(21, 2, 6, 1, None), lease(22, "l2", HELD),]
        );
    }
}
