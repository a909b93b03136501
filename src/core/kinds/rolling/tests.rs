//! The rolling window on its own, with literal instants: exact retry
//! instants, costs, peeks, reservations in arrival order, sub-slots, and
//! property tests over every interval of length T.

use super::*;
use crate::core::limit::{Algorithm, Limit};
use proptest::prelude::*;

const MS: Nanos = 1_000_000;
/// An instant far from the epoch, on no round boundary of 0.8 s.
const T0: Nanos = 1_700_000_000_123 * MS;

/// The seed's example: 5 in any 0.8 s, counted exactly.
fn seed() -> RollingWindow {
    RollingWindow::new(Quota::new(5, 0.8).unwrap())
}

fn ask(w: &mut RollingWindow, now: Nanos, want: Want) -> Verdict {
    w.advance(now);
    w.take(now, Some("k"), want, KeyRoom::Free).unwrap()
}

fn go(w: &mut RollingWindow, now: Nanos) -> bool {
    ask(w, now, Want::now(1)).go
}

fn patient(cost: u32, max_wait: Nanos) -> Want {
    Want { cost, up_to: false, max_wait }
}

#[test]
fn never_more_than_max_in_any_window_and_retry_after_is_when_the_oldest_leaves() {
    let mut w = seed();
    assert!(w.is_exact());
    for i in 0..5 {
        assert!(go(&mut w, T0 + i * 100 * MS));
    }
    let v = ask(&mut w, T0 + 500 * MS, Want::now(1));
    assert!(!v.go);
    assert_eq!(v.retry_after, 300 * MS, "the grant at T0 leaves at T0 + 800 ms");
    assert_eq!((v.remaining, v.reset_after), (0, 700 * MS));
    assert!(!go(&mut w, T0 + 800 * MS - 1), "a nanosecond early");
    assert!(go(&mut w, T0 + 800 * MS));
    let v = ask(&mut w, T0 + 850 * MS, Want::now(1));
    assert_eq!((v.go, v.retry_after), (false, 50 * MS));
}

#[test]
fn a_burst_at_a_slot_end_is_not_followed_by_another_at_the_next_start() {
    // A fixed window would let 5 more go right after the slot boundary.
    let mut w = seed();
    let boundary = (T0 / (800 * MS) + 1) * 800 * MS;
    for _ in 0..5 {
        assert!(go(&mut w, boundary - MS));
    }
    assert!(!go(&mut w, boundary));
    assert!(!go(&mut w, boundary + 798 * MS));
    assert!(go(&mut w, boundary + 799 * MS));
}

#[test]
fn costs_wait_for_enough_grants_to_leave_and_up_to_takes_what_is_free() {
    let mut w = seed();
    assert!(ask(&mut w, T0, Want::now(3)).go);
    let v = ask(&mut w, T0 + 100 * MS, Want::now(3));
    assert!(!v.go);
    assert_eq!(v.retry_after, 700 * MS, "3 fit once the 3 taken at T0 leave");
    let batch = ask(&mut w, T0 + 100 * MS, Want { cost: 3, up_to: true, max_wait: 0 });
    assert_eq!((batch.go, batch.granted, batch.remaining), (true, 2, 0));
    let v = ask(&mut w, T0 + 800 * MS, Want::now(4));
    assert_eq!((v.go, v.retry_after), (false, 100 * MS), "2 of T0 + 100 ms still count");
    assert!(ask(&mut w, T0 + 800 * MS, Want::now(3)).go);
}

#[test]
fn a_peek_takes_nothing_and_creates_no_key() {
    let mut w = seed();
    let peek = ask(&mut w, T0, Want::now(0));
    assert_eq!((peek.go, peek.granted, peek.remaining, peek.reset_after), (true, 0, 5, 0));
    assert_eq!(w.live_keys(), 0);
    assert!(ask(&mut w, T0, Want::now(5)).go);
    let peek = ask(&mut w, T0 + 10 * MS, Want::now(0));
    assert_eq!((peek.go, peek.remaining, peek.retry_after, peek.reset_after), (false, 0, 790 * MS, 790 * MS));
}

#[test]
fn reservations_go_in_arrival_order_at_the_instant_room_frees() {
    let mut w = seed();
    assert!(ask(&mut w, T0, Want::now(4)).go);
    assert!(ask(&mut w, T0 + 100 * MS, Want::now(1)).go);
    let first = ask(&mut w, T0 + 200 * MS, patient(2, 900 * MS));
    assert_eq!((first.go, first.wait, first.remaining), (true, 600 * MS, 0));
    let small = ask(&mut w, T0 + 300 * MS, patient(1, 900 * MS));
    assert_eq!((small.go, small.wait), (true, 500 * MS), "goes with the first, behind it");
    let v = ask(&mut w, T0 + 300 * MS, patient(2, 500 * MS));
    assert!(!v.go);
    assert_eq!(v.retry_after, 600 * MS, "2 more fit once the grant of T0 + 100 ms leaves");
    // A plain ask may not jump ahead of the queue, though one permit is free.
    let plain = ask(&mut w, T0 + 400 * MS, Want::now(1));
    assert_eq!((plain.go, plain.remaining, plain.retry_after), (false, 0, 400 * MS));
}

#[test]
fn reset_after_is_when_the_window_empties() {
    let mut w = seed();
    assert_eq!(ask(&mut w, T0, Want::now(2)).reset_after, 800 * MS);
    let v = ask(&mut w, T0 + 300 * MS, Want::now(1));
    assert_eq!((v.remaining, v.reset_after), (2, 800 * MS));
    let reserved = ask(&mut w, T0 + 300 * MS, patient(5, 900 * MS));
    assert_eq!((reserved.wait, reserved.reset_after), (800 * MS, 1_600 * MS));
}

#[test]
fn large_quotas_count_sub_slots_in_full_until_their_end() {
    // 1000 per second: sub-slots of 15.625 ms.
    let mut w = RollingWindow::new(Quota::new(1000, 1.0).unwrap());
    assert!(!w.is_exact());
    let sub = 15_625_000;
    let start = (T0 / sub) * sub;
    assert!(ask(&mut w, start + MS, Want::now(1000)).go);
    let v = ask(&mut w, start + 2 * MS, Want::now(1));
    // The sub-slot's last nanosecond is start + sub - 1.
    assert_eq!(v.retry_after, sub - 1 - 2 * MS + 1000 * MS, "counted until its sub-slot's end + T");
    assert!(!go(&mut w, start + sub - 1 + 1000 * MS - 1));
    assert!(go(&mut w, start + sub - 1 + 1000 * MS));
}

#[test]
fn keys_count_apart_and_are_swept_once_nothing_counts() {
    let mut w = seed();
    for key in ["a", "b"] {
        assert!(w.take(T0, Some(key), Want::now(5), KeyRoom::Free).unwrap().go);
    }
    assert!(w.take(T0, None, Want::now(5), KeyRoom::Free).unwrap().go, "the unkeyed count is apart");
    assert_eq!(w.take(T0, Some("c"), Want::now(1), KeyRoom::Full), Err(NoRoom));
    assert!(!w.take(T0, Some("a"), Want::now(1), KeyRoom::Full).unwrap().go, "existing keys still count");
    assert_eq!(w.live_keys(), 2);
    assert_eq!(w.advance(T0 + 799 * MS), 0);
    assert_eq!(w.advance(T0 + 2_000 * MS), 2);
}

#[test]
fn a_flood_of_keys_is_swept_at_the_loops_deadline_and_the_map_given_back() {
    // 5 in any 3 s: a sweep every 1.5 s, while grants count for 3 s.
    let mut w = RollingWindow::new(Quota::new(5, 3.0).unwrap());
    assert_eq!(w.next_deadline(), None, "no keys, nothing to wake for");
    w.advance(T0);
    for i in 0..10_000 {
        assert!(w.take(T0, Some(&format!("key-{i}")), Want::now(1), KeyRoom::Free).unwrap().go);
    }
    let sweep = w.next_deadline().expect("keys to sweep");
    assert_eq!(sweep, T0 + 1_500 * MS);
    let map = w.heap_bytes();
    assert!(map >= 10_000 * 64, "a 64-byte slot per key at least: {map} bytes");
    // A hundred keys get a second grant: theirs no longer fit inline.
    for i in 0..100 {
        assert!(w.take(T0 + MS, Some(&format!("key-{i}")), Want::now(1), KeyRoom::Free).unwrap().go);
    }
    // The first sweep keeps every key (their grants still count) and
    // counts the bytes of the grants kept in lists.
    assert_eq!(w.advance(sweep), 0);
    assert!(w.heap_bytes() >= map + 100 * 2 * 16, "{} bytes with the lists", w.heap_bytes());
    let next = w.next_deadline().expect("still keys");
    assert_eq!(next, sweep + 1_500 * MS);
    // By the next one only the second grants count: the other keys go,
    // and by the one after, every key, and the memory with them.
    assert_eq!(w.advance(next), 9_900);
    assert_eq!(w.advance(next + 1_500 * MS), 100);
    assert_eq!((w.live_keys(), w.next_deadline()), (0, None));
    assert!(w.heap_bytes() <= 16 * 64, "{} bytes kept", w.heap_bytes());
}

#[test]
fn a_reload_keeps_the_counts_only_while_grants_are_stamped_alike() {
    let mut w = seed();
    assert!(ask(&mut w, T0, Want::now(5)).go);
    assert!(w.retune(Quota::new(6, 0.8).unwrap()), "same window, still exact");
    let v = ask(&mut w, T0 + MS, Want::now(1));
    assert_eq!((v.go, v.remaining), (true, 0), "the 5 still count against the new 6");
    assert!(!w.retune(Quota::new(6, 1.0).unwrap()), "another window length");
    assert!(!w.retune(Quota::new(100, 0.8).unwrap()), "sub-slots instead of instants");
    assert_eq!(w.quota().max_requests(), 6);
}

/// Every interval of length `window` that ends at a grant's instant holds
/// at most `max` permits. `grants` must be sorted by instant.
fn worst_window(grants: &[(Nanos, u32)], window: Nanos) -> u64 {
    let (mut first, mut inside, mut worst) = (0, 0u64, 0);
    for &(at, n) in grants {
        inside += u64::from(n);
        while grants[first].0 + window <= at {
            inside -= u64::from(grants[first].1);
            first += 1;
        }
        worst = worst.max(inside);
    }
    worst
}

/// One generated ask: time moves by `gap`, then `cost` permits, maybe up
/// to, maybe waiting.
fn asks(max_cost: u32) -> impl Strategy<Value = Vec<(Nanos, u32, bool, Nanos)>> {
    let ask = (0..60 * MS, 0..=max_cost, any::<bool>(), prop_oneof![Just(0), 0..2_000 * MS]);
    prop::collection::vec(ask, 1..250)
}

proptest! {
    /// No interval of length T, aligned or not, holds more than max
    /// permits, counting a reservation at the instant its caller goes.
    #[test]
    fn no_interval_of_length_t_holds_more_than_max(
        max in prop_oneof![1u32..=8, 60u32..=70, 200u32..=300],
        tenths in 1u64..=12,
        start in 0..1_000_000 * MS,
        asks in asks(8),
    ) {
        let window = tenths * 100 * MS;
        let mut w = RollingWindow::new(Quota::new(max, window as f64 / 1e9).unwrap());
        let mut grants = Vec::new();
        let mut now = T0 + start;
        for (gap, cost, up_to, max_wait) in asks {
            now += gap;
            let v = ask(&mut w, now, Want { cost: cost.min(max), up_to, max_wait });
            if v.granted > 0 {
                grants.push((now + v.wait, v.granted));
            }
        }
        prop_assert!(grants.windows(2).all(|g| g[0].0 <= g[1].0), "grants go in arrival order");
        let worst = worst_window(&grants, window);
        prop_assert!(worst <= u64::from(max), "{} in one window of {} ms", worst, tenths * 100);
    }

    /// With a margin, a resource that itself allows max in any T never
    /// refuses: grants reach it each after its own delay below the
    /// margin, and no interval of T holds more than max arrivals (any
    /// max + 1 of them were granted within T + margin, which the window,
    /// counted over T + margin, does not allow).
    #[test]
    fn with_a_margin_the_resource_never_refuses_what_arrives_late_by_less(
        max in prop_oneof![1u32..=8, 60u32..=70],
        tenths in 1u64..=12,
        margin_us in 1u64..=20_000,
        asks in asks(8),
        delays in prop::collection::vec(0.0f64..1.0, 250),
    ) {
        let (window, margin) = (tenths * 100 * MS, margin_us * 1_000);
        let limit = Limit::with_algorithm("r", Quota::new(max, window as f64 / 1e9).unwrap(), Algorithm::RollingWindow);
        let limit = limit.unwrap().with_margin(margin as f64 / 1e6).unwrap();
        let mut w = RollingWindow::new(limit.quota());
        let mut arrivals = Vec::new();
        let mut now = T0;
        for ((gap, cost, up_to, max_wait), delay) in asks.into_iter().zip(&delays) {
            now += gap;
            let v = ask(&mut w, now, Want { cost: cost.min(max), up_to, max_wait });
            if v.granted > 0 {
                arrivals.push((now + v.wait + (delay * margin as f64) as Nanos, v.granted));
            }
        }
        arrivals.sort_unstable();
        let worst = worst_window(&arrivals, window);
        prop_assert!(worst <= u64::from(max), "the resource saw {} in one window of {} ms", worst, tenths * 100);
    }

    /// Asking again after `retry_after` goes, and a nanosecond earlier
    /// does not: the hint is exact.
    #[test]
    fn retry_after_is_exact(
        max in prop_oneof![1u32..=8, 100u32..=200],
        asks in asks(8),
    ) {
        let mut w = RollingWindow::new(Quota::new(max, 0.8).unwrap());
        let mut now = T0;
        for (gap, cost, up_to, max_wait) in asks {
            now += gap;
            let want = Want { cost: cost.clamp(1, max), up_to, max_wait };
            let v = ask(&mut w, now, want);
            if !v.go && v.retry_after > 0 {
                let again = Want { max_wait: 0, ..want };
                let early = ask(&mut w.clone(), now + v.retry_after - 1, again);
                prop_assert!(!early.go, "went {} ns early", 1);
                let then = ask(&mut w.clone(), now + v.retry_after, again);
                prop_assert!(then.go, "sorry after retry_after {}", v.retry_after);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// A caller asking without pause gets at least 0.95 x max per T on
    /// average over many T (exactly max when exact; 64/65 with sub-slots).
    #[test]
    fn a_saturated_caller_gets_nearly_max_per_window(
        max in prop_oneof![1u32..=64, 65u32..=2_000],
        tenths in 1u64..=5,
        gap_us in 50u64..=500,
        start in 0..1_000_000 * MS,
    ) {
        let window = tenths * 100 * MS;
        let mut w = RollingWindow::new(Quota::new(max, window as f64 / 1e9).unwrap());
        let (from, rounds) = (T0 + start, 20);
        let mut granted = 0u64;
        let mut now = from;
        while now < from + rounds * window {
            granted += u64::from(ask(&mut w, now, Want::now(1)).granted);
            now += gap_us * 1_000;
        }
        let ideal = u64::from(max) * rounds;
        // A caller cannot take more often than it asks.
        let asked = rounds * window / (gap_us * 1_000);
        prop_assert!(granted * 100 >= ideal.min(asked) * 95, "{} of {}", granted, ideal);
    }
}
