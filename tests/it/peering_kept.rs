//! Peered fixed windows restarted with their state file (`--state`), on a
//! simulated clock (`locker::sim`, whose nodes keep the records the
//! daemon's keeper writes): the file keeps what each run granted, gave
//! and was given of a slot, so a run restarted with it resumes its share
//! of the slot it joins in, and the group never grants more than max in
//! a slot; without the file it owns none of that slot.

use locker::core::{Locker, Nanos};
use locker::sim::{self, Group, Link};
use locker::wire::Ask;

use crate::group::{fixed, MS, T0};

/// A slot of 100 per 4 s: long enough for a restart to join within it.
const SLOT: Nanos = 4000 * MS;

/// Three peered nodes of 100 per 4 s with a join grace of 2 s; node 0
/// keeps a state file when `kept`.
fn trio(kept: bool) -> Group {
    trio_of(kept, fixed(100, 4000))
}

/// `trio`, each node's locker made by `locker` (of a 4 s slot or window),
/// at the start of a slot.
pub(crate) fn trio_of(kept: bool, locker: impl Fn() -> Locker + 'static) -> Group {
    let grace = 2000 * MS;
    let mut g = Group::new(3, T0, 4, Box::new(move |boot| sim::peered(locker(), boot, grace)));
    g.first_runs();
    if kept {
        g.keep_state(0);
    }
    g.advance(grace + 500 * MS);
    g.advance_to((g.now() / SLOT + 1) * SLOT + 10 * MS);
    g
}

/// Asks node `i` up to `most` go, honouring each sorry's hint, until it
/// answers a sorry that says the slot is spent or twenty in a row: the go
/// it granted in `slot`.
fn take(g: &mut Group, i: usize, slot: u64, most: u64) -> u64 {
    let (mut go, mut sorry) = (0, 0);
    while g.now() / SLOT == slot && sorry < 20 && go < most {
        let r = g.ask(i, &Ask::new().key("k")).expect("an answer");
        if r.ok {
            go += u64::from(g.now() / SLOT == slot);
            sorry = 0;
            continue;
        }
        if r.retry_after_ms >= r.reset_after_ms {
            break;
        }
        sorry += 1;
        g.advance(r.retry_after_ms.max(1) * MS);
    }
    go
}

/// Asks all three nodes in turn, a millisecond apart, until each has
/// answered a sorry that says the slot is spent or a hundred sorries in a
/// row (the permits left, if any, were lost with a killed run): the go
/// each granted in `slot`.
fn drain_all(g: &mut Group, slot: u64) -> [u64; 3] {
    let (mut go, mut sorry) = ([0; 3], [0; 3]);
    while g.now() / SLOT == slot && sorry.iter().any(|&s| s < 100) {
        for i in 0..3 {
            if sorry[i] >= 100 {
                continue;
            }
            let r = g.ask(i, &Ask::new().key("k")).expect("an answer");
            if r.ok {
                go[i] += u64::from(g.now() / SLOT == slot);
                sorry[i] = 0;
            } else {
                sorry[i] = if r.retry_after_ms >= r.reset_after_ms { 100 } else { sorry[i] + 1 };
            }
        }
        g.advance(MS);
    }
    go
}

/// Node 0 grants `first` (more than its share: it is given the rest),
/// gives some to node 1 when `gives`, is killed at once after its last
/// grant (before its peers heard it) and restarted; then all three are
/// asked until the slot is spent. The go of the slot, and node 0's after
/// the restart.
fn kill_and_restart(kept: bool, first: u64, gives: bool) -> (u64, u64) {
    let mut g = trio(kept);
    let slot = g.now() / SLOT;
    let mut go = 0;
    if gives {
        // Node 1 spends its own share and is given more by the others.
        go += take(&mut g, 1, slot, 40);
    }
    go += take(&mut g, 0, slot, first);
    g.kill(0);
    g.advance(5 * MS);
    // From now on peer messages come late: what a locker grants reaches
    // the others only after the next has granted too.
    g.set_link(Link { delay: 150 * MS, jitter: 50 * MS, loss: 0.0 });
    g.restart(0);
    // The restart joins (its peers' snapshots) before it grants.
    g.advance(800 * MS);
    let each = drain_all(&mut g, slot);
    go += each.iter().sum::<u64>();
    let resumed = each[0];
    assert_eq!(g.now() / SLOT, slot, "the slot ended before it was spent");
    (go, resumed)
}

#[test]
fn a_restart_with_its_state_file_resumes_its_share_of_the_slot_and_never_exceeds_max() {
    let (go, resumed) = kill_and_restart(true, 20, false);
    eprintln!("kill -9 after 20 of a share of 34, restarted with --state: {go} go in the slot of 100, {resumed} by the restart");
    assert_eq!(go, 100, "the slot is filled exactly: the restart owns what its earlier run did not grant");
    assert_eq!(resumed, 14, "the restart grants the 14 its earlier run still owned");

    let (go, resumed) = kill_and_restart(false, 20, false);
    eprintln!("the same without --state: {go} go in the slot, {resumed} by the restart");
    assert!((66..100).contains(&go), "without the file the restart owns none of the slot: {go}");
    assert_eq!(resumed, 0, "without the file the restart owns none of the slot");
}

#[test]
fn what_a_killed_run_gave_and_was_given_is_kept_and_never_granted_twice() {
    for first in [1, 20, 45] {
        let (go, resumed) = kill_and_restart(true, first, true);
        eprintln!("node 1 given permits, node 0 killed after {first}: {go} go in the slot, {resumed} by the restart");
        assert!(go <= 100, "{first} before the kill: {go} go in a slot of 100");
    }
}

/// A full disk under node 0's state file, with room reserved for one more
/// record: node 0 grants nothing once a call found the disk full (a grant
/// must be recorded before its reply), and gives nothing either, since a
/// gift must be recorded before it leaves. Node 2 is down, so node 1, once
/// its share is spent, can be given permits by node 0 alone. Node 0 is
/// then killed and restarted with its file in the same slot: had it given
/// what its file could not keep, the restart would grant those permits
/// again.
#[test]
fn a_full_disk_stops_gifts_as_it_stops_grants_so_a_restart_never_grants_a_permit_twice() {
    let mut g = trio(true);
    g.kill(2);
    let slot = g.now() / SLOT;
    let mut go = take(&mut g, 0, slot, 10);
    g.fill_disk(0, 1);
    // The call that finds the disk full is recorded in the room kept for
    // it; the next is refused.
    go += u64::from(g.ask(0, &Ask::new().key("k")).unwrap().ok);
    let refused = g.ask(0, &Ask::new().key("k")).expect_err("no grant without room to record it");
    assert!(refused.contains("disk is full"), "{refused}");
    let spent = take(&mut g, 1, slot, 60);
    assert_eq!(spent, 33, "node 1's own share and no gift from node 0");
    go += spent;
    g.kill(0);
    g.advance(5 * MS);
    g.restart(0);
    g.advance(800 * MS);
    let each = [take(&mut g, 0, slot, 100), take(&mut g, 1, slot, 100)];
    go += each.iter().sum::<u64>();
    assert_eq!(g.now() / SLOT, slot, "the slot ended before it was spent");
    eprintln!("a full disk, then kill -9 and a restart with the file: {go} go in the slot of 100, {each:?} after");
    assert!(go <= 100, "{go} go in a slot of 100: {each:?}");
}

/// Issue 52, item 6, on the simulated clock: a pair of 100 per 4 s, both
/// with a state file; node 0 grants `first` (past its share of 50: node 1
/// gives it the rest it asks for), is killed at once and restarted with
/// its file; then both are asked until the slot is spent. The go of the
/// slot and the restart's.
fn pair_kill_and_restart(first: u64) -> (u64, u64) {
    let grace = 2000 * MS;
    let mut g = Group::new(2, T0, 5, Box::new(move |boot| sim::peered(fixed(100, 4000)(), boot, grace)));
    g.keep_state(0);
    g.keep_state(1);
    g.advance(grace + 500 * MS);
    g.advance_to((g.now() / SLOT + 1) * SLOT + 10 * MS);
    let slot = g.now() / SLOT;
    let mut go = take(&mut g, 0, slot, first);
    g.kill(0);
    g.advance(5 * MS);
    g.restart(0);
    g.advance(800 * MS);
    let (mut resumed, mut sorry) = (0, [0u32; 2]);
    while g.now() / SLOT == slot && sorry.iter().any(|&s| s < 100) {
        for (i, s) in sorry.iter_mut().enumerate() {
            if *s >= 100 {
                continue;
            }
            let r = g.ask(i, &Ask::new().key("k")).expect("an answer");
            if r.ok && g.now() / SLOT == slot {
                go += 1;
                resumed += u64::from(i == 0);
                *s = 0;
            } else {
                *s = if r.retry_after_ms >= r.reset_after_ms { 100 } else { *s + 1 };
            }
        }
        g.advance(MS);
    }
    assert_eq!(g.now() / SLOT, slot, "the slot ended before it was spent");
    (go, resumed)
}

#[test]
fn a_pair_restarted_with_its_state_files_fills_the_slot_exactly() {
    for first in [30, 60] {
        let (go, resumed) = pair_kill_and_restart(first);
        eprintln!("a pair, node 0 killed after {first} and restarted with --state: {go} go in the slot, {resumed} by the restart");
        assert!(go <= 100, "{first} before the kill: {go} go in a slot of 100");
        assert_eq!(go, 100, "{first} before the kill: the slot is filled, no permit left with the dead run");
    }
}
