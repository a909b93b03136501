//! The tally's rules with literal numbers: merging, and the ledger of
//! conserved permits (what a locker owns, asks for and gives).

use super::*;
use crate::core::share::ME;

/// 5 per 0.8 s, the seed's limit.
fn seed() -> Quota {
    Quota::new(5, 0.8).unwrap()
}

/// Member `m` of a peered trio that knows every member's id.
fn trio(m: u32) -> Share {
    Share { members: 3, member: Some(m), ..Share::new(3, seed().slot_ns()) }
}

/// Runs `check` on a tally that counts nothing yet.
fn on_new(check: impl FnOnce(&mut TallyMut<'_>)) {
    check(&mut Tally::default().get_mut());
}

#[test]
fn a_tally_is_small_and_allocates_nothing_alone() {
    assert_eq!(std::mem::size_of::<InlineCount>(), 8, "the part a key table keeps inline");
    assert!(std::mem::size_of::<Tally>() <= 16, "{}", std::mem::size_of::<Tally>());
    let mut whole = Tally::default();
    assert!(whole.get_mut().take(seed(), 0, 1, Share::ALONE, 0).is_go());
    assert!(whole.peered.is_none());
    assert_eq!(whole.get().own(), 1);
}

#[test]
fn merge_keeps_the_maximum_per_node_and_sums_over_nodes() {
    on_new(|t| {
        assert!(t.merge(1, 5));
        assert!(t.merge(2, 3));
        assert!(!t.merge(1, 5), "a duplicate changes nothing");
        assert!(!t.merge(1, 4), "an older count arriving late changes nothing");
        assert!(t.merge(1, 9), "a later count replaces a lost one in between");
        assert_eq!(t.get().heard(), 12);
        assert_eq!(t.get().total(), 12);
    });
}

#[test]
fn an_echo_of_the_own_count_only_ever_raises_it() {
    on_new(|t| {
        assert!(t.merge_own(7));
        assert!(!t.merge_own(3));
        assert_eq!(t.get().own(), 7);
        assert_eq!(t.get().heard(), 0);
    });
}

#[test]
fn alone_a_tally_fills_to_max_exactly() {
    on_new(|t| {
        let granted = (0..20).filter(|_| t.take(seed(), 0, 1, Share::ALONE, 0).is_go()).count();
        assert_eq!(granted, 5);
        assert_eq!(t.get().remaining(5), 0);
    });
}

#[test]
fn peered_a_locker_grants_only_what_it_owns_and_then_asks() {
    on_new(|t| {
        // Slot 0 of 5 over three: member 0 owns 2.
        assert!(t.take(seed(), 0, 1, trio(0), 0).is_go());
        assert!(t.take(seed(), 0, 1, trio(0), 0).is_go());
        assert_eq!(t.take(seed(), 0, 1, trio(0), 0), Take::Short, "nothing heard of the others: ask them");
        assert_eq!(t.get().wanted(), 2, "as many as it granted, at least the 1 it lacks");
        assert!(t.take_wanted_new(), "a new want to publish");
        assert_eq!(t.take(seed(), 0, 1, trio(0), 0), Take::Short);
        assert!(!t.take_wanted_new(), "asked again before a gift: not twice");
        assert!(t.merge_exchange(2, Counted::Gave(ME), 1));
        assert!(!t.merge_exchange(2, Counted::Gave(ME), 1), "a repeated gift changes nothing");
        assert!(t.take(seed(), 0, 1, trio(0), 0).is_go(), "the gift is its own");
        assert_eq!(t.take(seed(), 0, 1, trio(0), 0), Take::Short);
        assert_eq!(t.get().wanted(), 4, "got 1, and asks for as many as it granted, 3");
        t.merge(1, 2);
        assert_eq!(t.take(seed(), 0, 1, trio(0), 0), Take::Spent, "all five heard of: nothing to ask for");
    });
}

#[test]
fn a_giver_gives_what_it_owns_once_per_want_and_keeps_none_of_it() {
    on_new(|t| {
        let mut gifts = Vec::new();
        // Member 1 owns 2 of slot 0; node 7 wants 3.
        assert!(t.merge_exchange(7, Counted::Wanted, 6));
        t.give(seed(), 0, trio(1), 0, |to, n| gifts.push((to, n)));
        assert_eq!(gifts, [(7, 2)], "its part of 6 between two others is 3, and it owns 2");
        assert_eq!(t.get().owned(seed(), 0, trio(1)), 0);
        assert_eq!(t.take(seed(), 0, 1, trio(1), 0), Take::Short, "what it gave is no longer its own");
        assert!(!t.merge_exchange(7, Counted::Wanted, 6), "a repeated want changes nothing");
        assert!(t.merge_exchange(7, Counted::Wanted, 8));
        t.merge_exchange(8, Counted::Gave(ME), 1);
        let mut again = Vec::new();
        t.give(seed(), 0, trio(1), 0, |to, n| again.push((to, n)));
        assert!(again.is_empty(), "a locker that asked for permits itself keeps what it is given");
        assert!(!t.merge_exchange(ME, Counted::Gave(7), 2) && t.get().ledger() == (2, 1), "an echo of its own gift");
        let until = trio(1).keeps_own_for();
        t.give(seed(), 0, trio(1), until - 1, |to, n| again.push((to, n)));
        assert!(again.is_empty(), "kept while its callers may still ask");
        t.give(seed(), 0, trio(1), until, |to, n| again.push((to, n)));
        assert_eq!(again, [(7, 3)], "its own asks over, what it was given and did not spend moves on");
        assert_eq!(t.get().owned(seed(), 0, trio(1)), 0);
    });
}

#[test]
fn no_member_owns_the_remainder_it_cannot_place_itself_for() {
    let lost = Share { member: None, ..trio(0) };
    on_new(|t| {
        assert!(t.take(seed(), 0, 1, lost, 0).is_go());
        assert_eq!(t.take(seed(), 0, 1, lost, 0), Take::Short, "1 of 5 over three, without the remainder");
        assert_eq!(t.get().owned(seed(), 0, Share { member: Some(0), ..lost }), 1);
        let _ = ME;
    });
}

#[test]
fn what_an_earlier_run_spent_and_was_given_is_carried_into_what_this_run_owns() {
    // Member 0 of the trio owns 2 of slot 0. Its earlier run granted 1,
    // gave 2 to a peer and was given 3: it still owned 2 + 3 - 1 - 2 = 2.
    on_new(|t| {
        assert_eq!(t.get().owned(seed(), 0, trio(0)), 2);
        t.carry(1 + 2, 3);
        assert_eq!(t.get().owned(seed(), 0, trio(0)), 2);
        assert!(t.take(seed(), 0, 2, trio(0), 0).is_go());
        assert_eq!(t.take(seed(), 0, 1, trio(0), 0), Take::Short, "nothing more of its own");
    });
    // Spent more than it owned and was given: none left, never below.
    on_new(|t| {
        t.carry(4, 1);
        assert_eq!(t.get().owned(seed(), 0, trio(0)), 0);
        assert_eq!(t.get().ledger(), (0, 0), "the earlier run's ledger is not this run's to publish");
    });
}
