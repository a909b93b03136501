//! From a stream of records to the live state they describe: the latest
//! record of each thing, without what has ended.
//!
//! Compaction writes what this returns; a restore replays it. Which records
//! are still live (a slot not ended, a lease not expired) is the caller's
//! to say: this module knows records, not limits or clocks.

use std::collections::{HashMap, HashSet};

use foldhash::fast::RandomState;

use super::record::{Identity, Record};

/// The latest record of each identity that `keep` keeps, in the order of
/// those latest records. A `Release` is never kept (it voids the lease it
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
    let live: Vec<Record<'a>> =
        all.into_iter().flatten().filter(|r| !matches!(r, Record::Release { .. }) && keep(r)).collect();
    let runs: HashSet<u32> = live.iter().filter_map(run_of).collect();
    live.into_iter().filter(|r| !matches!(r, Record::Run { run, .. } if !runs.contains(run))).collect()
}

/// The run a count record belongs to.
fn run_of(r: &Record) -> Option<u32> {
    match *r {
        Record::Window { run, .. } | Record::Bucket { run, .. } => Some(run),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(at: u64, run: u32, slot: u64, count: u32, key: Option<&str>) -> Record<'_> {
        Record::Window { at, run, limit: 0, slot, count, key }
    }

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
            Record::Lease { at: 22, limit: 1, count: 1, ttl: 5, until: 27, lease: "l1" },
            Record::Lease { at: 22, limit: 1, count: 1, ttl: 5, until: 27, lease: "l2" },
            Record::Release { at: 23, limit: 1, lease: "l1" },
        ];
        let live = collapse(records.into_iter(), |r| !matches!(r, Record::Window { slot: 5, .. }));
        assert_eq!(
            live,
            vec![
                Record::Run { run: 2, incarnation: 20, node: "a" },
                window(21, 2, 6, 1, None),
                Record::Lease { at: 22, limit: 1, count: 1, ttl: 5, until: 27, lease: "l2" },
            ]
        );
    }
}
