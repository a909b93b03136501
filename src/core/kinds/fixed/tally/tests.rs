//! The tally's rules with literal instants: merging, the split, the pool.

use super::*;
use crate::core::time::NANOS_PER_MS;

const MS: Nanos = NANOS_PER_MS;
const TRIO: Share = Share { live: 3, rank: 0, in_flight_window: 2 * MS, turn_window: 2 * MS, split: true };

#[test]
fn a_tally_is_small_and_allocates_nothing_alone() {
    assert_eq!(std::mem::size_of::<Count>(), 8, "the part a key table keeps inline");
    assert!(std::mem::size_of::<Tally>() <= 16, "{}", std::mem::size_of::<Tally>());
    let mut whole = Tally::default();
    assert!(whole.get_mut().take(0, 10, 1, Share::ALONE).is_go());
    assert!(whole.peered.is_none());
    assert_eq!(whole.get().own(), 1);
}

#[test]
fn merge_keeps_the_maximum_per_node_and_sums_over_nodes() {
    let mut whole = Tally::default();
    let mut t = whole.get_mut();
    assert!(t.merge(1, 5));
    assert!(t.merge(2, 3));
    assert!(!t.merge(1, 5), "a duplicate changes nothing");
    assert!(!t.merge(1, 4), "an older count arriving late changes nothing");
    assert!(t.merge(1, 9), "a later count replaces a lost one in between");
    assert_eq!(t.get().heard(), 12);
    assert_eq!(t.get().total(), 12);
}

#[test]
fn an_echo_of_the_own_count_only_ever_raises_it() {
    let mut whole = Tally::default();
    let mut t = whole.get_mut();
    assert!(t.merge_own(7));
    assert!(!t.merge_own(3));
    assert_eq!(t.get().own(), 7);
    assert_eq!(t.get().heard(), 0);
}

#[test]
fn alone_a_tally_fills_to_max_exactly() {
    let mut whole = Tally::default();
    let mut t = whole.get_mut();
    let granted = (0..20).filter(|&i| t.take(i, 10, 1, Share::ALONE).is_go()).count();
    assert_eq!(granted, 10);
    assert_eq!(t.get().remaining(10), 0);
}

#[test]
fn with_peers_in_flight_grants_stay_within_a_share_of_what_is_left() {
    let mut whole = Tally::default();
    let mut t = whole.get_mut();
    t.merge(1, 970); // 30 left: a third of it is 10
    let granted = (0..30).filter(|_| t.take(100 * MS, 1000, 1, TRIO).is_go()).count();
    // The first grant is free; then in-flight + 1 must fit ceil(left / 3).
    assert!((7..=10).contains(&granted), "granted {granted}");
    // Own grants count as in flight for two windows (or a little more:
    // up to twice that), then no longer.
    assert_eq!(t.take(100 * MS, 1000, 1, TRIO), Take::OverShare);
    assert_eq!(t.take(100 * MS + TRIO.charged_for() - 1, 1000, 1, TRIO), Take::OverShare);
    assert!(t.take(100 * MS + 2 * TRIO.charged_for(), 1000, 1, TRIO).is_go());
}

#[test]
fn three_stale_views_together_stay_near_max() {
    // Three lockers start from the same view with 30 left and grant as
    // fast as they can before hearing from each other.
    let mut total = 0;
    for rank in 0..3 {
        let share = Share { rank, ..TRIO };
        let mut whole = Tally::default();
        let mut t = whole.get_mut();
        t.merge(1, 970);
        total += (0..100).filter(|_| t.take(3 * MS, 1000, 1, share).is_go()).count();
    }
    assert!((20..=30).contains(&total), "granted {total} of 30 left");
}

#[test]
fn a_share_is_granted_at_once_and_others_unused_shares_are_held() {
    // The previous slot: this locker asked 6, node 1 asked 3, node 2 asked 1.
    let mut whole = Tally::default();
    let mut t = whole.get_mut();
    t.set_basis(vec![(crate::core::share::ME, 6), (1, 3), (2, 1)]);
    assert_eq!(t.get().split(10), Split { mine: 6, pool: 0, beyond: 0 });
    let granted = (0..10).filter(|_| t.take(MS, 10, 1, TRIO).is_go()).count();
    assert_eq!(granted, 6, "the whole share at once, nothing of the others'");
    t.merge(1, 3);
    assert_eq!(t.get().split(10), Split { mine: 0, pool: 0, beyond: 0 }, "node 2 still holds its 1");
    assert_eq!(t.get().free(10, TRIO), 0);
    assert_eq!(t.get().free(10, Share::ALONE), 1, "alone, every permit left is free");
}

#[test]
fn what_rounding_leaves_is_pool_under_the_in_flight_rule() {
    let mut whole = Tally::default();
    let mut t = whole.get_mut();
    t.set_basis(vec![(crate::core::share::ME, 1), (1, 1), (2, 1)]);
    assert_eq!(t.get().split(5), Split { mine: 1, pool: 2, beyond: 0 });
    // Turns last 8 ms here (four 2 ms windows); rank 0's come every third.
    assert_eq!(t.take(MS, 5, 2, TRIO), Take::OverShare, "a turn's first window is no one's");
    assert_eq!(t.take(3 * MS, 5, 2, TRIO), Take::Go, "one from the share, one from the pool on its turn");
    assert_eq!(t.take(3 * MS, 5, 1, TRIO), Take::OverShare, "the pool grant is still in flight");
    assert_eq!(t.get().split(5), Split { mine: 0, pool: 1, beyond: 1 });
    assert_eq!(t.take(11 * MS, 5, 1, TRIO), Take::OverShare, "one permit of pool for three: not its turn");
    assert_eq!(t.take(27 * MS, 5, 1, TRIO), Take::Go, "its turn again");
    assert_eq!(t.take(40 * MS, 5, 1, TRIO), Take::Spent, "the other two hold their shares");
}

#[test]
fn three_lockers_on_stale_views_never_grant_more_than_the_pool_together() {
    // The seed's limit: 5, split 1 + 1 + 1, a pool of 2. Each locker grants
    // as fast as it can, at every instant of a slot, before hearing from
    // the others: together they grant their shares and at most the pool.
    for start in (0..30 * MS).step_by(250_000) {
        let mut total = 0;
        for rank in 0..3 {
            let share = Share { rank, ..TRIO };
            let mut whole = Tally::default();
            let mut t = whole.get_mut();
            t.set_basis(vec![(crate::core::share::ME, 1), (1, 1), (2, 1)]);
            total += (0..10).filter(|_| t.take(start, 5, 1, share).is_go()).count();
        }
        assert!(total <= 5, "granted {total} of 5 at {start} ns");
    }
}

#[test]
fn figures_merge_by_maximum_and_roll_into_the_basis() {
    let mut whole = Tally::default();
    let mut t = whole.get_mut();
    t.note_asked(2);
    t.note_asked(1);
    assert!(t.merge_asked(1, 4, false));
    assert!(!t.merge_asked(1, 3, false), "an older figure changes nothing");
    assert!(t.merge_asked(crate::core::share::ME, 5, false), "an echo of the own figure raises it");
    assert_eq!(t.get().asked_own(), 5);
    let basis = t.take_asked().expect("figures");
    let mut next = Tally::default();
    next.get_mut().set_basis(basis);
    assert_eq!(next.get().split(9), Split { mine: 5, pool: 0, beyond: 0 });
}

#[test]
fn a_large_cost_is_never_starved_by_the_share_rule() {
    let mut whole = Tally::default();
    let mut t = whole.get_mut();
    assert_eq!(t.take(11 * MS, 5, 5, TRIO), Take::OverShare, "not its turn");
    assert!(t.take(3 * MS, 5, 5, TRIO).is_go(), "on its turn, with nothing in flight");
}

#[test]
fn a_lone_busy_locker_still_drains_the_slot() {
    // All load on one of three live lockers: its grants in flight are
    // capped by its part of the room for two in-flight windows each (the
    // round trip of `Share::charged_for`), but the count still fills
    // within a few dozen round trips: under a quarter of a 1 s slot.
    let mut whole = Tally::default();
    let mut t = whole.get_mut();
    let mut now = 0;
    while t.get().remaining(1000) > 0 && now < 1000 * MS {
        for _ in 0..50 {
            t.take(now, 1000, 1, TRIO);
        }
        now += 100_000; // 0.1 ms between bursts
    }
    assert_eq!(t.get().remaining(1000), 0, "filled by {} ms", now / MS);
    assert!(now < 250 * MS, "took {} ms", now / MS);
}
