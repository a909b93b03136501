//! Peered lockers split each slot of a fixed window by the previous slot's
//! demand, on a simulated clock (`locker::sim`): a caller whose load lands
//! on one locker gets its whole quota, and the lockers together still
//! never grant more than max_requests in a slot; load that moves to
//! another locker adapts within a slot.
//!
//! The caller here honours a sorry's hint when it is sooner than the
//! slot's end (a grant in flight), as the daemon does for it by holding
//! such an ask (`hold` tests the holding). What this does not test: real
//! sockets between lockers.

use locker::core::Nanos;
use locker::sim::Group;
use locker::wire::Ask;

use crate::group::{ask_patiently, fixed, joined, MS};
use crate::support::sim_stats;

/// `n` asks back to back on node `i`: the go among them, all in the slot
/// of `slot` the burst began in.
fn burst(g: &mut Group, i: usize, key: &str, n: usize, slot: Nanos) -> u64 {
    let began = g.now() / slot;
    let go = (0..n).filter(|_| ask_patiently(g, i, key).ok).count() as u64;
    assert_eq!(g.now() / slot, began, "the burst on node {i} ran into the next slot");
    go
}

/// The start of the slot after the current one.
fn next_slot(g: &Group, slot: Nanos) -> Nanos {
    (g.now() / slot + 1) * slot
}

/// The go answered for the only limit, summed over the running lockers.
fn total_go(g: &mut Group, nodes: &[usize]) -> u64 {
    nodes.iter().map(|&i| sim_stats(g, i).limits.iter().map(|l| l.go).sum::<u64>()).sum()
}

/// Issue 15: three peered lockers, 5 per 0.8 s, and a caller sending 5 asks
/// back to back to one locker at the start of each slot. Alone a locker
/// grants 5 of 5; peered under the in-flight rule alone it granted 2; with
/// the split by demand, 5 from the first slot on.
#[test]
fn a_bursty_caller_on_one_of_three_lockers_gets_its_whole_quota() {
    let slot = 800 * MS;
    let mut g = joined(3, 21, fixed(5, 800));
    let mut go = Vec::new();
    for _ in 0..5 {
        let start = next_slot(&g, slot);
        g.advance_to(start + 10 * MS);
        go.push(burst(&mut g, 0, "burst", 5, slot));
        // Asks on the other two lockers after the demand cutoff (two thirds
        // into the slot): they find the slot spent, and do not count as demand.
        g.advance_to(start + 620 * MS);
        for probe in 1..3 {
            assert!(!g.ask(probe, &Ask::new().key("burst")).unwrap().ok, "locker {probe} granted past the 5");
        }
    }
    assert_eq!(go, [5, 5, 5, 5, 5], "every slot grants the whole burst, the first included");
    assert_eq!(total_go(&mut g, &[0, 1, 2]), 25, "the lockers counted exactly the go answered");
}

/// Issue 15: two peered lockers, 100 per 5 s, one fast caller on one of
/// them: the first sorry comes after all 100 go in every slot (it came
/// after 33 to 46 under the in-flight rule alone).
#[test]
fn a_fast_caller_on_one_of_two_lockers_gets_all_100_before_its_first_sorry() {
    let slot = 5000 * MS;
    let mut g = joined(2, 22, fixed(100, 5000));
    let mut before_sorry = Vec::new();
    for round in 0..3 {
        // The first slot starts early enough that its demand is counted
        // before its cutoff.
        let start = if round == 0 { g.now() } else { next_slot(&g, slot) + 10 * MS };
        g.advance_to(start);
        let first_slot = g.now() / slot;
        let mut go = 0;
        // A fast caller: 50 µs a call, waiting out the short hints while
        // permits come from the other locker (the daemon holds such an ask).
        while ask_patiently(&mut g, 0, "fast").ok {
            go += 1;
            assert!(go <= 100, "more than 100 go in one slot");
            g.advance(50_000);
        }
        assert_eq!(g.now() / slot, first_slot, "the caller stayed in one slot");
        before_sorry.push(go);
    }
    assert_eq!(before_sorry, [100, 100, 100], "go before the first sorry, per slot");
}

/// Issue 15: a client failing over. Bursts go to locker 0 for three slots,
/// then locker 0 is killed and the bursts go to locker 1, which gets its
/// own permits and those locker 2 gives it: locker 0's share stays its own
/// while it is down (nothing tells a dead locker from one cut off, and no
/// reclaim is built yet: see docs/peering.md).
#[test]
fn load_that_moves_to_another_locker_adapts_within_one_slot() {
    let slot = 800 * MS;
    let mut g = joined(3, 23, fixed(5, 800));
    let mut go = Vec::new();
    for round in 0..6 {
        g.advance_to(next_slot(&g, slot) + 10 * MS);
        if round == 3 {
            g.kill(0);
        }
        go.push(burst(&mut g, if round < 3 { 0 } else { 1 }, "moving", 5, slot));
    }
    eprintln!("bursts of 5 moving from locker 0 to locker 1 after three slots: go per slot {go:?}");
    assert_eq!(go[..3], [5, 5, 5], "before the move");
    assert!(go[3] <= 5, "the slot of the move: {go:?}");
    assert!(go[4..].iter().all(|&n| (3..=4).contains(&n)), "all but the dead locker's share: {go:?}");
}

/// Issue 37's short hold, measured: three peered lockers at 5 per 0.8 s,
/// every peer message 40 to 70 ms late, and four callers of the seed's
/// plain form on one locker, each asking again a millisecond after a
/// sorry. A want and its gift take a round trip of 80 to 140 ms, longer
/// than the 50 ms an ask short of permits is held, so held asks end in
/// sorry and ask again (most sorries, though, are those of a spent slot).
/// Prints the go per slot and the sorries; asserts only the limit.
#[test]
fn demand_on_one_locker_behind_links_40_to_70_ms_late_is_measured() {
    let slot = 800 * MS;
    let mut g = joined(3, 11, fixed(5, 800));
    g.set_link(locker::sim::Link { delay: 40 * MS, jitter: 30 * MS, loss: 0.0 });
    let start = next_slot(&g, slot);
    g.advance_to(start);
    let mut waiting: Vec<(u64, Nanos)> = (0..4).map(|_| (g.send(0, b"let me go"), 0)).collect();
    let (mut per_slot, mut sorries) = (std::collections::BTreeMap::<u64, u64>::new(), 0u64);
    let end = start + 10 * slot;
    while g.now() < end {
        g.advance(MS);
        for w in &mut waiting {
            if w.1 > 0 {
                if g.now() >= w.1 {
                    *w = (g.send(0, b"let me go"), 0);
                }
                continue;
            }
            let Some(reply) = g.reply(w.0) else { continue };
            if reply == b"go" {
                *per_slot.entry(g.now() / slot - start / slot).or_default() += 1;
                *w = (g.send(0, b"let me go"), 0);
            } else {
                sorries += 1;
                w.1 = g.now() + MS;
            }
        }
    }
    let full: Vec<u64> = (1..10).map(|s| per_slot.get(&s).copied().unwrap_or(0)).collect();
    let mean = full.iter().sum::<u64>() as f64 / full.len() as f64;
    let first = per_slot.get(&0).copied().unwrap_or(0);
    eprintln!(
        "one busy locker, links 40-70 ms late: {first} go in the first slot, then {full:?} ({mean:.2}); {sorries} sorries in 10 slots"
    );
    assert!(per_slot.values().all(|&n| n <= 5), "a slot over 5: {per_slot:?}");
}
