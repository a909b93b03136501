//! Peered rolling windows restarted with their state file (`--state`), on
//! a simulated clock (`locker::sim`, whose nodes keep the records the
//! daemon's keeper writes): the file keeps what each run granted, lent and
//! was given of the windows that still count, so a run restarted with it
//! resumes its rights in the window it joins in, and no interval of the
//! window's length ever holds more than max across the group; without the
//! file it holds none of its rights for three windows.

use locker::core::Nanos;
use locker::sim::{Group, Link};
use locker::wire::Ask;

use crate::group::{rolling, MS};
use crate::peering_kept::trio_of;
use crate::properties::conserved_rolling::worst;

/// A window of 100 per 4 s: long enough for a restart to join within it.
const WINDOW: Nanos = 4000 * MS;

/// Three peered nodes of 100 per 4 s with a join grace of 2 s, at the
/// start of a window; node 0 keeps a state file when `kept`.
fn trio(kept: bool) -> Group {
    trio_of(kept, rolling(100, 4000))
}

/// Asks node `i` up to `most` go, honouring each short sorry's hint,
/// until a sorry says no permit (or token) frees within a second or twenty
/// come in a row; each go is noted in `gos` at its true instant.
pub(crate) fn take(g: &mut Group, i: usize, most: u64, gos: &mut Vec<(Nanos, u64)>) -> u64 {
    let (mut go, mut sorry) = (0, 0);
    while sorry < 20 && go < most {
        let r = g.ask(i, &Ask::new().key("k")).expect("an answer");
        if r.ok {
            gos.push((g.now(), 1));
            (go, sorry) = (go + 1, 0);
            continue;
        }
        if r.retry_after_ms >= 1000 {
            break;
        }
        sorry += 1;
        g.advance(r.retry_after_ms.max(1) * MS);
    }
    go
}

/// Asks all three nodes in turn, a millisecond apart, for `span`: the go
/// each granted, each noted in `gos` at its true instant.
pub(crate) fn drain_all(g: &mut Group, span: Nanos, gos: &mut Vec<(Nanos, u64)>) -> [u64; 3] {
    let (mut go, end) = ([0; 3], g.now() + span);
    while g.now() < end {
        for (i, n) in go.iter_mut().enumerate() {
            if g.ask(i, &Ask::new().key("k")).expect("an answer").ok {
                gos.push((g.now(), 1));
                *n += 1;
            }
        }
        g.advance(MS);
    }
    go
}

/// Node 1 takes `lent` more than its share when it is above 0 (the others
/// lend it rights), node 0 grants `first`, is killed at once after its
/// last grant (before its peers heard it) and restarted behind late links;
/// then all three are asked for 1.5 s of the same window. Every go, and
/// node 0's after the restart.
fn kill_and_restart(kept: bool, first: u64, lent: u64) -> (Vec<(Nanos, u64)>, u64) {
    let mut g = trio(kept);
    let (window, mut gos) = (g.now() / WINDOW, Vec::new());
    if lent > 0 {
        take(&mut g, 1, 33 + lent, &mut gos);
    }
    take(&mut g, 0, first, &mut gos);
    g.kill(0);
    g.advance(5 * MS);
    // From now on peer messages come late: what a locker grants reaches
    // the others only after the next has granted too.
    g.set_link(Link { delay: 150 * MS, jitter: 50 * MS, loss: 0.0 });
    g.restart(0);
    // The restart joins (its peers' snapshots) before it grants.
    g.advance(800 * MS);
    let each = drain_all(&mut g, 1500 * MS, &mut gos);
    assert_eq!(g.now() / WINDOW, window, "the window ended before it was spent");
    (gos, each[0])
}

#[test]
fn a_restart_with_its_state_file_resumes_its_rights_and_never_exceeds_max() {
    let (gos, resumed) = kill_and_restart(true, 20, 0);
    let (most, _) = worst(&gos, WINDOW);
    eprintln!(
        "kill -9 after 20 of 34 rights, restarted with --state: {most} go in the worst 4 s, {resumed} by the restart"
    );
    assert_eq!(most, 100, "the window is filled exactly: the restart holds what its earlier run did not use");
    assert_eq!(resumed, 14, "the restart grants the 14 rights its earlier run still held");

    let (gos, resumed) = kill_and_restart(false, 20, 0);
    let (most, _) = worst(&gos, WINDOW);
    eprintln!("the same without --state: {most} go in the worst 4 s, {resumed} by the restart");
    assert!((66..100).contains(&most), "without the file the restart holds no rights: {most}");
    assert_eq!(resumed, 0, "without the file the restart holds no rights in the window it joins");
}

#[test]
fn what_a_killed_run_lent_and_was_given_is_kept_and_never_granted_twice() {
    for first in [1, 20, 45] {
        for lent in [4, 20] {
            let (gos, resumed) = kill_and_restart(true, first, lent);
            let (most, end) = worst(&gos, WINDOW);
            eprintln!(
                "node 1 lent {lent}, node 0 killed after {first}: {most} go in the worst 4 s, {resumed} by the restart"
            );
            assert!(most <= 100, "{most} go in the 4 s ending at {end}");
        }
    }
}
