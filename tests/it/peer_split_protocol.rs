//! Splitting each slot by the previous slot's demand, on the seam: peered
//! services wired by hand at literal instants, over a network the test
//! controls. Each locker grants its share at once, and the shares add up
//! to max_requests even when the lockers burst at the same instant on
//! views that never heard of each other's grants.

use locker::service::Service;

use crate::peer_protocol::{ask, bucket_pair, deliver, deliver_from, joined_pair, outbox, service, stats, MS, T0};

/// Delivers what each of `a` and `b` publishes at `now` to the other.
fn exchange(a: &mut Service, b: &mut Service, now: u64) {
    let (from_a, from_b) = (outbox(a, now), outbox(b, now));
    deliver(b, now, &from_a);
    deliver(a, now, &from_b);
}

/// How many of `n` asks at `now` go on `s`.
fn go_of(s: &mut Service, now: u64, n: usize) -> usize {
    (0..n).filter(|_| ask(s, now).ok).count()
}

/// Slot 0 of a joined pair (max 10 per 1 s slot): a is asked 6 times and b
/// 4 times, and their messages are lost, repeated and reordered on the
/// way, but each figure reaches the other before the slot ends.
fn pair_asked_six_and_four() -> (Service, Service) {
    let (a, b) = joined_pair();
    asked_six_and_four(a, b)
}

/// The same for a pair that expects a third locker (configured peer 1 of
/// each), which has not started: they serve together once the grace ends.
fn pair_of_three_asked_six_and_four() -> (Service, Service) {
    let start = T0 - 700 * MS;
    let (mut a, mut b) = (service("a", start, 2, start), service("b", start, 2, start));
    for round in 0..60 {
        exchange(&mut a, &mut b, start + round * 10 * MS);
    }
    assert!(!stats(&mut a, T0).joining && !stats(&mut b, T0).joining);
    asked_six_and_four(a, b)
}

fn asked_six_and_four(mut a: Service, mut b: Service) -> (Service, Service) {
    let t1 = T0 + 100 * MS;
    go_of(&mut a, t1, 6);
    go_of(&mut b, t1, 4);
    // a's counts and figure are lost; b's arrive in reverse order.
    let _lost = outbox(&mut a, t1);
    let mut from_b = outbox(&mut b, t1);
    from_b.reverse();
    deliver(&mut a, t1, &from_b);
    // The next heartbeat's repair carries a's figure, twice over.
    let t2 = T0 + 300 * MS;
    let repair = outbox(&mut a, t2);
    deliver(&mut b, t2, &repair);
    deliver(&mut b, t2 + MS, &repair);
    deliver(&mut a, t2, &outbox(&mut b, t2));
    // Heartbeats keep both live into the next slot.
    exchange(&mut a, &mut b, T0 + 900 * MS);
    (a, b)
}

#[test]
fn each_locker_grants_its_share_at_once_and_the_shares_add_up_to_max() {
    let (mut a, mut b) = pair_asked_six_and_four();
    // Slot 1: both burst at the same instant, hearing nothing of the other.
    let t = T0 + 1001 * MS;
    let (mut go_a, mut go_b) = (0, 0);
    for _ in 0..10 {
        go_a += usize::from(ask(&mut a, t).ok);
        go_b += usize::from(ask(&mut b, t).ok);
    }
    assert_eq!((go_a, go_b), (6, 4), "10 split 6 : 4 as asked in the slot before");
}

#[test]
fn a_share_not_yet_granted_is_held_for_its_locker() {
    let (mut a, mut b) = pair_asked_six_and_four();
    let t = T0 + 1001 * MS;
    assert_eq!(go_of(&mut a, t, 10), 6);
    deliver(&mut b, t, &outbox(&mut a, t));
    let sorry = ask(&mut a, t + MS);
    assert!(!sorry.ok);
    assert_eq!(sorry.retry_after_ms, sorry.reset_after_ms, "b's share is b's until the slot ends");
    assert_eq!(go_of(&mut b, t + 2 * MS, 10), 4, "b still has all of its share");
}

#[test]
fn demand_after_the_cutoff_does_not_count() {
    let (mut a, mut b) = joined_pair();
    // Two thirds into the slot, asks no longer count towards the split.
    let early = T0 + 100 * MS;
    go_of(&mut a, early, 3);
    deliver(&mut b, early, &outbox(&mut a, early));
    let late = T0 + 700 * MS;
    go_of(&mut b, late, 5);
    deliver(&mut a, late, &outbox(&mut b, late));
    exchange(&mut a, &mut b, T0 + 900 * MS);
    let t = T0 + 1001 * MS;
    assert_eq!(go_of(&mut a, t, 10), 10, "only a was asked before the cutoff: all of the slot is its share");
    assert_eq!(go_of(&mut b, t, 10), 0);
}

#[test]
fn a_joining_locker_learns_the_split_and_takes_no_share_of_others() {
    let (mut a, mut b) = pair_of_three_asked_six_and_four();
    let t = T0 + 1001 * MS;
    assert_eq!(go_of(&mut a, t, 6), 6);
    assert_eq!(go_of(&mut b, t, 2), 2);
    deliver(&mut b, t, &outbox(&mut a, t));
    deliver(&mut a, t, &outbox(&mut b, t));
    // c starts now and learns every count and figure from a's and b's snapshots.
    let start = t + 5 * MS;
    let mut c = service("c", start, 2, start);
    // Over 120 ms, so that c also hears a's and b's heartbeats.
    for round in 0..13 {
        let now = start + round * 10 * MS;
        let from_c = outbox(&mut c, now);
        deliver_from(&mut a, 1, now, &from_c);
        deliver_from(&mut b, 1, now, &from_c);
        let (from_a, from_b) = (outbox(&mut a, now), outbox(&mut b, now));
        deliver_from(&mut c, 0, now, &from_a);
        deliver_from(&mut c, 1, now, &from_b);
    }
    let now = start + 130 * MS;
    assert!(!stats(&mut c, now).joining);
    assert_eq!(go_of(&mut c, now, 5), 0, "the 2 left are b's unused share");
    assert_eq!(go_of(&mut b, now, 5), 2, "and b still grants them");
}

/// A token bucket needs no split: a peered bucket holds its bound by
/// absorbing the peers' grants, with no in-flight rule, so a burst on one
/// locker takes the whole burst at once, and its peer then has none.
#[test]
fn a_burst_on_one_peered_bucket_takes_the_whole_burst() {
    let (mut a, mut b) = bucket_pair();
    let now = T0 + 100 * MS;
    assert_eq!(go_of(&mut a, now, 10), 5, "a bucket of 5, all of it on the first locker");
    deliver(&mut b, now, &outbox(&mut a, now));
    assert_eq!(go_of(&mut b, now, 10), 0);
}
