//! Peered lockers sharing a fixed window, on a simulated clock
//! (`locker::sim`): saturated lockers fill each slot and never pass it,
//! two lockers share one count, a locker killed and restarted mid-slot
//! grants nothing of it again, a locker whose peers are all gone serves
//! alone after the grace, and stats list each peer.
//!
//! Counts reach the peers in 100 µs here (`Link::FAST`), within the 2 ms
//! in-flight window, so the docs' bound is max itself and the figures are
//! exact. What this does not test: real sockets between lockers, and a
//! real kill -9 (see `peer_attacks` for SIGSTOP, `seed_scenario` for a
//! group of real processes).

use std::collections::BTreeMap;

use locker::core::Nanos;
use locker::sim::{self, Group};
use locker::wire::Ask;

use crate::group::{ask_patiently, fixed, joined, run, Caller, MS};
use crate::support::sim_stats;

const SLOT: Nanos = 1000 * MS;

/// `per_node` callers on each locker in `nodes`, each call taking 50 µs
/// (a loopback round trip), from `from`.
fn saturating(nodes: &[usize], per_node: usize, from: Nanos) -> Vec<Caller> {
    let each = nodes.iter().flat_map(|&node| std::iter::repeat_n(node, per_node));
    each.enumerate().map(|(i, node)| Caller { node, next: from + i as u64 * 7_000, work: 50_000 }).collect()
}

/// Every slot of the run holds exactly `max` go: never more, and saturated
/// callers leave none unused.
fn every_slot_exactly(per_slot: &BTreeMap<u64, u64>, max: u64, what: &str) {
    assert!(per_slot.len() >= 3, "{what}: too few slots {per_slot:?}");
    assert!(per_slot.values().all(|&n| n == max), "{what}: go per slot {per_slot:?}, each should be {max}");
}

#[test]
fn three_saturated_lockers_grant_exactly_max_together_in_every_slot() {
    let mut g = joined(3, 1, fixed(1000, 1000));
    let start = g.now();
    let per_slot = run(&mut g, &mut saturating(&[0, 1, 2], 2, start), start + 3 * SLOT, SLOT);
    every_slot_exactly(&per_slot, 1000, "three lockers saturated");
}

#[test]
fn one_busy_locker_of_three_still_fills_every_slot() {
    let mut g = joined(3, 2, fixed(1000, 1000));
    let start = g.now();
    let per_slot = run(&mut g, &mut saturating(&[0], 3, start), start + 3 * SLOT, SLOT);
    every_slot_exactly(&per_slot, 1000, "all load on one locker");
}

#[test]
fn two_lockers_share_one_count() {
    let mut g = joined(2, 3, fixed(20, 2000));
    let start = g.now();
    let mut go = BTreeMap::new();
    let mut spent = 0;
    for i in 0..400 {
        let r = ask_patiently(&mut g, i % 2, "shared");
        if r.ok {
            *go.entry(g.now() / (2 * SLOT)).or_insert(0) += 1;
        } else {
            spent += 1;
            if spent == 6 {
                break;
            }
        }
        g.advance(MS);
    }
    assert_eq!(spent, 6, "the count was never spent: {go:?}");
    assert_eq!(go, BTreeMap::from([(start / (2 * SLOT), 20)]), "go per slot");
}

/// A group of three on 100 per 4 s with a grace of 2 s, as a restart
/// needs to learn the slot back from its peers.
fn trio_with_grace(grace: Nanos, max: u32, slot_ms: u64) -> Group {
    let locker = fixed(max, slot_ms);
    let mut g = Group::new(3, crate::group::T0, 4, Box::new(move |boot| sim::peered(locker(), boot, grace)));
    g.advance(grace + 500 * MS);
    g
}

#[test]
fn a_killed_and_restarted_locker_does_not_grant_the_slot_again() {
    let slot = 4 * SLOT;
    let mut g = trio_with_grace(2 * SLOT, 100, 4000);
    g.advance_to((g.now() / slot + 1) * slot + 10 * MS);
    let first_slot = g.now() / slot;
    let mut go = 0;
    for _ in 0..60 {
        assert!(ask_patiently(&mut g, 0, "restart").ok, "the first 60 of 100 go");
        go += 1;
    }
    // The last count reaches the peers within a loop turn; then kill -9.
    g.advance(10 * MS);
    g.kill(0);
    g.advance(5 * MS);
    g.restart(0);
    let mut i = 0;
    while g.now() / slot == first_slot {
        let r = ask_patiently(&mut g, i % 2, "restart");
        go += u64::from(r.ok && g.now() / slot == first_slot);
        i += 1;
        g.advance(5 * MS);
    }
    // The restarted run owns none of the slot (its earlier run may have
    // granted more than the peers heard of); what the earlier run held and
    // had not granted, its own and what it was given, is lost with it.
    eprintln!("kill -9 and restart mid-slot: {go} go in the slot of 100");
    assert!((60..=100).contains(&go), "kill -9 and restart mid-slot: {go} go in the slot of 100");
}

#[test]
fn a_locker_whose_peers_are_all_gone_serves_alone_once_the_grace_ends() {
    let grace = 300 * MS;
    let mut g = trio_with_grace(grace, 1000, 1000);
    for i in [1, 2, 0] {
        g.kill(i);
    }
    g.restart(0);
    let restarted = g.now();
    let first = g.ask(0, &Ask::new().key("alone")).expect("an answer");
    assert!(!first.ok, "a restarted locker grants nothing before it learned the counts or the grace ran out");
    g.advance_to(restarted + grace - MS);
    assert!(!g.go(0), "still joining 1 ms before the grace ends");
    g.advance_to(restarted + grace + TICK_SLACK);
    // No peer answered: its earlier run may have granted in this slot, so
    // it owns none of it; from the next slot on it serves its own third
    // (the others' permits stay theirs: a dead peer looks like one cut off).
    assert!(!g.go(0), "none of the slot it joined in");
    g.advance_to((g.now() / SLOT + 1) * SLOT + MS);
    let granted = (0..500).filter(|_| g.ask(0, &Ask::new().key("alone")).unwrap().ok).count();
    assert_eq!(granted, 333, "alone, the locker serves its own share of 1000");
    let stats = sim_stats(&mut g, 0);
    assert!(!stats.joining);
    assert!(stats.peers.iter().all(|p| !p.live), "{stats:?}");
}

/// How long after the grace a joining locker may still say sorry: it
/// notices the end of the grace on its next loop turn at the latest.
const TICK_SLACK: Nanos = sim::TICK;

#[test]
fn stats_show_each_peer_by_name_with_its_age_and_clock_offset() {
    let mut g = joined(3, 5, fixed(5, 800));
    let s = sim_stats(&mut g, 0);
    assert_eq!(s.node.as_deref(), Some("node-0"));
    let names: Vec<&str> = s.peers.iter().map(|p| p.node.as_str()).collect();
    assert_eq!(names, ["node-1", "node-2"]);
    for p in &s.peers {
        assert!(p.live && !p.flagged, "{p:?}");
        assert!(p.last_heard_ms <= sim::TICK / MS, "heard within a loop turn: {p:?}");
        assert_eq!(p.clock_offset_ms, 0.0, "clocks that agree: {p:?}");
    }
}

/// Issue 37: the seed's scenario with every peer message 40 to 70 ms late
/// (a WAN, or a busy host), eight callers spread over three lockers. With
/// the former in-flight rule a slot reached 6 and the group filled 3.7 to
/// 4.1 of 5 per slot; conserved permits never put more than 5 in a slot
/// whatever the delay, and the callers, asking all three, use them all.
#[test]
fn the_seeds_limit_with_peer_links_40_to_70_ms_late_never_puts_six_in_a_slot() {
    let slot = 800 * MS;
    let (mut slots, mut total, mut worst) = (0, 0, 0);
    for seed in 0..8 {
        let mut g = joined(3, seed, fixed(5, 800));
        g.set_link(sim::Link { delay: 40 * MS, jitter: 30 * MS, loss: 0.0 });
        let start = (g.now() / slot + 2) * slot;
        let per_slot = run(&mut g, &mut crate::group::spread(3, start), start + 31 * slot, slot);
        worst = worst.max(per_slot.values().copied().max().unwrap_or(0));
        slots += per_slot.len();
        total += per_slot.values().sum::<u64>();
        assert!(per_slot.values().all(|&n| n <= 5), "seed {seed}: {per_slot:?}");
    }
    let mean = total as f64 / slots as f64;
    eprintln!("40-70 ms late: {slots} slots, at most {worst} go in one, {mean:.2} go per slot on average");
    assert!(mean >= 4.5, "{mean:.2} go per slot");
}
