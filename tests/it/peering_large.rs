//! A large peered group on a simulated clock (`locker::sim`): ten
//! lockers, so each peer's snapshot names nine runs, past what one peer
//! may name at once (`MAX_RUNS_PER_PEER`, 8, a bound against forged
//! floods). A member killed and restarted without its state file within a
//! slot must still learn from its peers that its earlier run granted in
//! that slot, whatever else their snapshots name, and own none of it: the
//! runs one peer's room refuses are named by the others', and an earlier
//! run of the restarted locker refused everywhere is still known to have
//! been (`Nodes::resolve`, unit-tested there).

use locker::core::peering::MAX_RUNS_PER_PEER;
use locker::core::Nanos;
use locker::sim::{self, Group};
use locker::wire::Ask;

use crate::group::{fixed, MS, T0};

/// A slot of 4 s: long enough for a member to restart and join within it.
const SLOT: Nanos = 4000 * MS;
const MEMBERS: usize = 10;
// Each snapshot names more runs than a peer may name at once.
const _: () = assert!(MEMBERS - 1 > MAX_RUNS_PER_PEER);

/// The go every node answers at once until each says sorry, `rounds`
/// times 10 ms apart, counted while the true slot is `slot`.
fn drain(g: &mut Group, slot: u64, rounds: usize) -> u64 {
    let mut go = 0;
    for _ in 0..rounds {
        for i in 0..MEMBERS {
            let ok = (0..1000).take_while(|_| g.ask(i, &Ask::new().key("k")).expect("an answer").ok).count();
            go += if g.now() / SLOT == slot { ok as u64 } else { 0 };
        }
        g.advance(10 * MS);
    }
    go
}

#[test]
fn a_member_of_ten_restarted_without_its_file_within_a_slot_owns_none_of_it() {
    let grace = 500 * MS;
    let mut g = Group::new(MEMBERS, T0, 11, Box::new(move |boot| sim::peered(fixed(100, 4000)(), boot, grace)));
    g.first_runs();
    g.advance(2 * SLOT);
    let start = (g.now() / SLOT + 1) * SLOT;
    g.advance_to(start + 10 * MS);
    let slot = g.now() / SLOT;
    // Every member spends its share: the slot's 100.
    let mut go = drain(&mut g, slot, 5);
    g.kill(0);
    g.advance(5 * MS);
    g.restart(0);
    // The rest of the slot: the restarted run joins, then everyone asks.
    while g.now() / SLOT == slot {
        go += drain(&mut g, slot, 1);
    }
    eprintln!("ten members, one killed and restarted without its file mid-slot: {go} go in the slot of 100");
    assert_eq!(go, 100, "the slot spent before the restart, and never granted again");
}
