//! Peered token buckets restarted with their state file (`--state`), on a
//! simulated clock (`locker::sim`, whose nodes keep the records the
//! daemon's keeper writes): the file keeps each share's TAT after a grant
//! and its room and fill after a gift, so a run restarted with it resumes
//! its share in the period it joins in, and the group never grants more
//! than `burst + rate x T` in any span `T`; without the file it holds no
//! room in that period.

use locker::core::limit::bucket_interval;
use locker::core::{Nanos, Quota};
use locker::sim::{Group, Link};

use crate::group::MS;
use crate::peering_kept::trio_of;
use crate::peering_kept_rolling::{drain_all, take};
use crate::properties::conserved_bucket::{bucket, worst_excess};

/// A bucket of 60 tokens refilled at 60 per 4 s: rooms of 20, and a
/// period long enough for a restart to join within it.
const BURST: u32 = 60;
const PERIOD: Nanos = 4000 * MS;

/// Three peered nodes of the bucket with a join grace of 2 s, at the start
/// of a period; node 0 keeps a state file when `kept`.
fn trio(kept: bool) -> Group {
    trio_of(kept, bucket(60, 4000, BURST))
}

/// Node 0 grants `first`, then node 1 takes `gifts` more than its room
/// when above 0 (the others give it tokens and room, after node 0's last
/// grant), node 0 is killed (before its peers heard its last counts) and
/// restarted behind late links; then all three are asked for 1.5 s of the
/// same period. Every go, and node 0's after the restart.
fn kill_and_restart(kept: bool, first: u64, gifts: u64) -> (Vec<(Nanos, u64)>, u64) {
    let mut g = trio(kept);
    let (period, mut gos) = (g.now() / PERIOD, Vec::new());
    take(&mut g, 0, first, &mut gos);
    if gifts > 0 {
        take(&mut g, 1, 20 + gifts, &mut gos);
    }
    g.kill(0);
    g.advance(5 * MS);
    g.set_link(Link { delay: 150 * MS, jitter: 50 * MS, loss: 0.0 });
    g.restart(0);
    // The restart joins (its peers' snapshots) before it grants.
    g.advance(800 * MS);
    let each = drain_all(&mut g, 1500 * MS, &mut gos);
    assert_eq!(g.now() / PERIOD, period, "the period ended before it was spent");
    (gos, each[0])
}

fn interval() -> Nanos {
    bucket_interval(Quota::new(60, 4.0).unwrap())
}

#[test]
fn a_restart_with_its_state_file_resumes_its_share_and_never_exceeds_burst_plus_rate() {
    let (gos, resumed) = kill_and_restart(true, 5, 0);
    let (excess, span, taken) = worst_excess(&gos, BURST, interval());
    eprintln!("kill -9 after 5 of a room of 20, restarted with --state: {resumed} go by the restart, worst excess {excess} ({taken} in {span} ns)");
    assert!(excess <= 0, "{taken} go in {span} ns");
    // 15 tokens left at the kill, and its room of 20 refills at 5 a
    // second while it is out and joining.
    assert!((15..=15 + 12).contains(&resumed), "the restart grants what its earlier run still held: {resumed}");

    let (gos, resumed) = kill_and_restart(false, 5, 0);
    let (excess, span, taken) = worst_excess(&gos, BURST, interval());
    eprintln!("the same without --state: {resumed} go by the restart, worst excess {excess}");
    assert!(excess <= 0, "{taken} go in {span} ns");
    assert_eq!(resumed, 0, "without the file the restart holds no room in the period it joins");
}

#[test]
fn a_gift_given_after_the_last_grant_is_kept_and_never_granted_twice() {
    for first in [1, 5, 15] {
        for gifts in [4, 20] {
            let (gos, resumed) = kill_and_restart(true, first, gifts);
            let (excess, span, taken) = worst_excess(&gos, BURST, interval());
            eprintln!("node 0 killed after {first}, then gave to node 1 (wanting {gifts} more): {resumed} by the restart, worst excess {excess} ({taken} in {span} ns)");
            assert!(excess <= 0, "{taken} go in {span} ns");
        }
    }
}
