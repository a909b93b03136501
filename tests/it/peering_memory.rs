//! How long peers remember a locker's earlier run, on a simulated clock
//! (`locker::sim`): a rolling window's rights lent by a run bear on the
//! windows up to two after the one it last spoke in, so a run restarted
//! more than two windows after its last message must still learn of the
//! earlier one and hold none of its rights until they came back; else the
//! group grants them twice.

use locker::core::Nanos;
use locker::sim::Group;
use locker::wire::Ask;

use crate::group::{joined, rolling, MS};
use crate::properties::conserved_rolling::worst;

/// A window of 99 per second.
const WINDOW: Nanos = 1000 * MS;

/// Asks `busy` nodes in turn a millisecond apart until true time `end`,
/// noting every go at its true instant.
fn ask_until(g: &mut Group, busy: &[usize], end: Nanos, gos: &mut Vec<(Nanos, u64)>) {
    while g.now() < end {
        for &i in busy {
            if g.ask(i, &Ask::new().key("k")).expect("an answer").ok {
                gos.push((g.now(), 1));
            }
        }
        g.advance(MS);
    }
}

/// Of a pair (no leases: a dead member's share waits for it, see
/// `core::peering::tenure`), node 1 takes every right node 0 lends it from `phase` into a
/// window on; node 0, is killed `dies` later and
/// restarted `away` after that; then every node is asked for four windows.
/// The most go in any interval of a window.
fn lent_then_restarted(phase: Nanos, dies: Nanos, away: Nanos) -> u64 {
    let mut g = joined(2, 7, rolling(99, 1000));
    let mut gos = Vec::new();
    let start = (g.now() / WINDOW + 1) * WINDOW + phase;
    g.advance_to(start);
    ask_until(&mut g, &[1], start + dies, &mut gos);
    g.kill(0);
    let back = g.now() + away;
    ask_until(&mut g, &[1], back, &mut gos);
    g.restart(0);
    let end = g.now() + 4 * WINDOW;
    ask_until(&mut g, &[0, 1], end, &mut gos);
    worst(&gos, WINDOW).0
}

#[test]
fn a_run_restarted_after_more_than_two_windows_never_takes_rights_its_earlier_run_lent() {
    for phase in [0, 300 * MS, 600 * MS, 900 * MS] {
        for dies in [1500 * MS, 1950 * MS] {
            for away in [2100 * MS, 2300 * MS, 2600 * MS] {
                let most = lent_then_restarted(phase, dies, away);
                eprintln!("phase {phase} dies {dies} away {away}: {most}");
                assert!(most <= 99, "{most} go in one window");
            }
        }
    }
}
