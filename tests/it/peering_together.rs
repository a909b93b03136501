//! A peered group restarted all together without `--state` (an upgrade
//! "all together"), on a simulated clock (`locker::sim`): each new run
//! finds peers that never heard of its earlier run, since they restarted
//! too, so nothing but the time its peers have been up tells it whether
//! an earlier run granted in the slot (window, period) under way. It owns
//! none of it, and the group never grants it twice.

use locker::core::{Locker, Nanos};
use locker::sim::Group;
use locker::wire::Ask;

use crate::group::{fixed, joined, rolling, MS};
use crate::properties::conserved_bucket::{bucket, worst_excess};
use crate::properties::conserved_rolling::worst;

/// A slot (window, period) of 4 s: long enough for the group to restart
/// within it.
const SLOT: Nanos = 4000 * MS;

/// Asks every node in turn a millisecond apart until true time `end`,
/// noting every go at its true instant.
fn ask_until(g: &mut Group, end: Nanos, gos: &mut Vec<(Nanos, u64)>) {
    while g.now() < end {
        for i in 0..3 {
            if g.ask(i, &Ask::new().key("k")).expect("an answer").ok {
                gos.push((g.now(), 1));
            }
        }
        g.advance(MS);
    }
}

/// A joined trio of `locker` asked from the start of a slot until
/// `restart` into it, when all three are killed and started again at
/// once, each without a state file; then, after `quiet` without asks,
/// asked until two slots after. Every go at its true instant.
fn restarted_together(
    seed: u64,
    locker: impl Fn() -> Locker + 'static,
    restart: Nanos,
    quiet: Nanos,
) -> Vec<(Nanos, u64)> {
    let mut g = joined(3, seed, locker);
    let start = (g.now() / SLOT + 2) * SLOT;
    g.advance_to(start);
    let mut gos = Vec::new();
    ask_until(&mut g, start + restart, &mut gos);
    for i in 0..3 {
        g.kill(i);
    }
    for i in 0..3 {
        g.restart(i);
    }
    g.advance(quiet);
    ask_until(&mut g, start + 3 * SLOT, &mut gos);
    gos
}

/// The go in each true slot.
fn per_slot(gos: &[(Nanos, u64)]) -> Vec<(u64, u64)> {
    let mut slots: Vec<(u64, u64)> = Vec::new();
    for &(at, n) in gos {
        match slots.last_mut() {
            Some((slot, sum)) if *slot == at / SLOT => *sum += n,
            _ => slots.push((at / SLOT, n)),
        }
    }
    slots
}

#[test]
fn a_fixed_window_trio_restarted_together_without_state_never_grants_a_slot_twice() {
    for (seed, restart) in [(1, 500 * MS), (2, 1900 * MS), (3, 3000 * MS)] {
        let gos = restarted_together(seed, fixed(99, 4000), restart, 0);
        let slots = per_slot(&gos);
        eprintln!("restarted {restart} ns into the slot: {slots:?}");
        assert!(slots.iter().all(|&(_, n)| n <= 99), "a slot over 99: {slots:?}");
        assert_eq!(slots.first().map(|s| s.1), Some(99), "the slot is spent before the restart");
        assert_eq!(slots.last().map(|s| s.1), Some(99), "the restarted group fills the slots after");
    }
}

#[test]
fn a_rolling_window_trio_restarted_together_without_state_never_grants_a_window_twice() {
    for (seed, restart) in [(4, 500 * MS), (5, 2500 * MS)] {
        let gos = restarted_together(seed, rolling(99, 4000), restart, 0);
        let (most, at) = worst(&gos, SLOT);
        eprintln!("restarted {restart} ns into the window: {most} go in the window from {at}");
        assert!(most <= 99, "{most} go in the window from {at}");
    }
}

#[test]
fn a_token_bucket_trio_restarted_together_without_state_never_exceeds_burst_and_rate() {
    // 60 tokens of room, refilled at 60 per 4 s: a token every 66.7 ms.
    // Asked at once after the restart, each new run makes its room at the
    // first ask, before its lease, and a room grows empty when the lease
    // comes: that alone keeps the bucket under the bound, whatever the
    // run owns. Asked only after the group leased again (the third case),
    // a run that owned the period under way would grant its full room
    // once more (on the former rule, 60 more within the span).
    for (seed, restart, quiet) in [(6, 500 * MS, 0), (7, 2500 * MS, 0), (8, 500 * MS, 2000 * MS)] {
        let gos = restarted_together(seed, bucket(60, 4000, 60), restart, quiet);
        let (excess, span, n) = worst_excess(&gos, 60, SLOT.div_ceil(60));
        eprintln!(
            "restarted {restart} ns into the period, asked {quiet} ns after: {} go, worst {n} in {span} ns",
            gos.len()
        );
        assert!(excess <= 0, "{n} go in {span} ns: {excess} over burst + rate x T");
    }
}
