//! The fixed window's rules with literal instants, and a property test of reservations.

use super::*;
use crate::core::limit::calendar::tests::{at, calendar};
use crate::core::limit::Period;
use crate::core::share::Count;
use crate::core::time::NANOS_PER_SEC;

fn window(max: u32, secs: f64) -> FixedWindow {
    FixedWindow::new(Quota::new(max, secs).unwrap())
}

fn take(w: &mut FixedWindow, now: Nanos, key: Option<&str>) -> Verdict {
    w.advance(now);
    w.take(now, key, Want::now(1), KeyRoom::Free).unwrap()
}

#[test]
fn grants_max_requests_then_sorry_until_the_slot_ends() {
    let mut w = window(5, 0.8);
    let t0 = 8_000_000_000; // the start of slot 10
    for i in 0..5 {
        let v = take(&mut w, t0 + i, None);
        assert!(v.go, "ask {i} should go");
        assert_eq!(v.remaining, 4 - i as u32);
        assert_eq!(v.retry_after, 0);
    }
    let v = take(&mut w, t0 + 100_000_000, None);
    assert!(!v.go);
    assert_eq!(v.retry_after, 700_000_000);
    assert_eq!(v.reset_after, 700_000_000);
    assert!(take(&mut w, t0 + 800_000_000, None).go, "the next slot frees the count");
}

#[test]
fn each_key_has_its_own_count() {
    let mut w = window(1, 1.0);
    assert!(take(&mut w, 0, Some("a")).go);
    assert!(!take(&mut w, 1, Some("a")).go);
    assert!(take(&mut w, 2, Some("b")).go);
    assert!(take(&mut w, 3, None).go);
    assert_eq!(w.live_keys(), 2);
}

#[test]
fn a_new_slot_drops_every_key() {
    let mut w = window(1, 1.0);
    take(&mut w, 0, Some("a"));
    take(&mut w, 0, Some("b"));
    assert_eq!(w.advance(1_000_000_000), 2);
    assert_eq!(w.live_keys(), 0);
}

#[test]
fn a_cost_that_does_not_fit_takes_nothing() {
    let mut w = window(5, 1.0);
    w.advance(0);
    assert!(w.take(0, None, Want::now(3), KeyRoom::Free).unwrap().go);
    let v = w.take(0, None, Want::now(3), KeyRoom::Free).unwrap();
    assert!(!v.go);
    assert_eq!(v.remaining, 2);
    assert!(w.take(0, None, Want::now(2), KeyRoom::Free).unwrap().go);
}

#[test]
fn a_full_key_table_refuses_only_new_keys() {
    let mut w = window(2, 1.0);
    w.advance(0);
    w.take(0, Some("a"), Want::now(1), KeyRoom::Free).unwrap();
    assert!(w.take(0, Some("a"), Want::now(1), KeyRoom::Full).unwrap().go);
    assert_eq!(w.take(0, Some("b"), Want::now(1), KeyRoom::Full), Err(NoRoom));
    assert!(w.take(0, None, Want::now(1), KeyRoom::Full).unwrap().go);
}

#[test]
fn time_running_backwards_counts_in_the_current_slot() {
    let mut w = window(1, 1.0);
    assert!(take(&mut w, 5_000_000_000, None).go);
    assert!(!take(&mut w, 4_000_000_000, None).go);
}

fn wait(w: &mut FixedWindow, now: Nanos, cost: u32, max_wait: Nanos) -> Verdict {
    w.advance(now);
    w.take(now, Some("k"), Want { cost, up_to: false, max_wait }, KeyRoom::Free).unwrap()
}

#[test]
fn a_reservation_counts_against_the_next_slot_in_arrival_order() {
    let mut w = window(2, 1.0);
    let t = 10_250_000_000; // 250 ms into slot 10
    assert_eq!(wait(&mut w, t, 2, 0).wait, 0);
    let first = wait(&mut w, t, 1, 1_000_000_000);
    assert!(first.go);
    assert_eq!(first.wait, 750_000_000, "go at the start of slot 11");
    assert_eq!(wait(&mut w, t, 1, 1_000_000_000).wait, 750_000_000);
    let third = wait(&mut w, t, 1, 2_000_000_000);
    assert_eq!(third.wait, 1_750_000_000, "slot 11 is full, so slot 12");
    let beyond = wait(&mut w, t, 1, 1_000_000_000);
    assert!(!beyond.go, "slot 12 starts beyond max_wait");
    assert_eq!(beyond.retry_after, 1_750_000_000);
    w.advance(11_000_000_000);
    assert_eq!(w.live_keys(), 1, "the key lives on with its reservations");
    assert!(!wait(&mut w, 11_000_000_000, 1, 0).go, "slot 11 was filled by reservations");
    w.advance(12_000_000_000);
    let v = wait(&mut w, 12_000_000_000, 1, 0);
    assert!(v.go, "slot 12 holds one reservation and one free permit");
    assert_eq!(v.remaining, 0);
}

#[test]
fn a_plain_ask_does_not_jump_ahead_of_reservations() {
    let mut w = window(4, 1.0);
    assert!(wait(&mut w, 0, 3, 0).go);
    let big = wait(&mut w, 0, 3, 2_000_000_000);
    assert_eq!(big.wait, 1_000_000_000);
    let small = wait(&mut w, 0, 1, 0);
    assert!(!small.go, "one permit is free now, but a reservation is queued");
    assert_eq!(small.retry_after, 1_000_000_000);
    assert_eq!(small.remaining, 0);
}

#[test]
fn up_to_takes_what_is_left_and_a_zero_cost_peeks() {
    let mut w = window(5, 1.0);
    w.advance(0);
    let batch = Want { cost: 3, up_to: true, max_wait: 0 };
    assert_eq!(w.take(0, None, batch, KeyRoom::Free).unwrap().granted, 3);
    let v = w.take(0, None, batch, KeyRoom::Free).unwrap();
    assert!(v.go);
    assert_eq!((v.granted, v.remaining), (2, 0));
    assert!(!w.take(0, None, batch, KeyRoom::Free).unwrap().go);
    let peek = w.take(0, Some("new"), Want::now(0), KeyRoom::Full).unwrap();
    assert!(peek.go && peek.granted == 0 && peek.remaining == 5, "{peek:?}");
    assert_eq!(w.live_keys(), 0, "a peek adds no key");
    assert!(!w.take(0, None, Want::now(0), KeyRoom::Free).unwrap().go);
}

proptest::proptest! {
    /// Honoured go (immediate or reserved) never exceed max_requests in
    /// any slot, whatever the asks and their timing.
    #[test]
    fn honoured_reservations_never_exceed_the_limit(
        asks in proptest::collection::vec((0u64..400, 1u32..=3, 0u64..3_000, proptest::bool::ANY), 1..120),
    ) {
        let q = Quota::new(3, 0.1).unwrap();
        let mut w = FixedWindow::new(q);
        let mut per_slot = HashMap::new();
        let mut now = 1_000_000_000;
        for (gap_ms, cost, max_wait_ms, up_to) in asks {
            now += gap_ms * 100_000;
            w.advance(now);
            let want = Want { cost, up_to, max_wait: max_wait_ms * 100_000 };
            let v = w.take(now, Some("k"), want, KeyRoom::Free).unwrap();
            if v.go {
                proptest::prop_assert!(v.wait <= want.max_wait);
                *per_slot.entry(q.slot_of(now + v.wait)).or_insert(0) += v.granted;
            }
        }
        for (slot, n) in per_slot {
            proptest::prop_assert!(n <= 3, "slot {} got {}", slot, n);
        }
    }

    /// The short path answers every ask it takes exactly as the general
    /// path does, and leaves the same counts behind, reservations included.
    #[test]
    fn the_lone_path_answers_as_the_general_path(
        asks in proptest::collection::vec((0u64..300, 0usize..3, 1u32..=3, 0u64..3_000), 1..120),
    ) {
        let q = Quota::new(3, 0.1).unwrap();
        let (mut lone, mut general) = (FixedWindow::new(q), FixedWindow::new(q));
        let mut now = 1_000_000_000;
        for (gap_ms, key, cost, max_wait_ms) in asks {
            now += gap_ms * 100_000;
            let key = [None, Some("a"), Some("b")][key];
            lone.advance(now);
            general.advance(now);
            // Asks that may wait build up reservations on both sides, which
            // the lone path must then leave to the general one.
            let want = Want { cost, up_to: false, max_wait: max_wait_ms * 100_000 };
            let short = if want.max_wait == 0 { lone.take_lone(now, key, cost) } else { None };
            let expected = general.take(now, key, want, KeyRoom::Free).unwrap();
            let got = match short {
                Some(v) => v,
                None => lone.take(now, key, want, KeyRoom::Free).unwrap(),
            };
            proptest::prop_assert_eq!(got, expected);
            proptest::prop_assert_eq!(lone.live_keys(), general.live_keys());
        }
    }
}

/// A peer's count for `slot`: `n` grants of key "k" by node 1.
fn heard(slot: u64, n: u32) -> Count {
    Count::granted(crate::core::limit::LimitId(0), Some("k"), slot, 1, n)
}

#[test]
fn a_count_from_a_peer_ahead_waits_for_its_slot_and_does_not_move_the_window() {
    let mut w = window(5, 0.8);
    let t0 = 8_000_000_000; // the start of slot 10
    let late = t0 + 790_000_000; // 10 ms before slot 11 here
    assert!(take(&mut w, late, Some("k")).go, "one go in slot 10");
    assert!(w.merge_count(late, &heard(11, 3), Leeway::ALONE, |_, _, _, _| {}), "slot 11 begun on the peer's clock");
    assert_eq!(w.slot(), 10, "the window stays in this locker's slot");
    assert_eq!(w.tally(Some("k")).unwrap().total(), 1, "slot 10's count is untouched");
    assert!(
        !w.merge_count(late, &heard(11, 2), Leeway::ALONE, |_, _, _, _| {}),
        "by maximum: an older count changes nothing"
    );
    w.advance(t0 + 800_000_000);
    assert_eq!(w.tally(Some("k")).unwrap().heard(), 3, "the peer's grants join slot 11 when it begins here");
    let goes = (0..5).filter(|i| take(&mut w, t0 + 800_000_000 + i, Some("k")).go).count();
    assert_eq!(goes, 2, "slot 11 holds 5 with the peer's 3");
}

#[test]
fn counts_too_far_ahead_or_for_a_skipped_slot_are_not_kept() {
    let mut w = window(5, 0.8);
    let t0 = 8_000_000_000;
    assert!(
        !w.merge_count(t0, &heard(11, 3), Leeway::ALONE, |_, _, _, _| {}),
        "slot 11 starts 800 ms away, beyond a quarter slot"
    );
    assert!(!w.merge_count(t0, &heard(12, 3), Leeway::ALONE, |_, _, _, _| {}));
    assert!(w.merge_count(t0 + 700_000_000, &heard(11, 3), Leeway::ALONE, |_, _, _, _| {}));
    w.advance(t0 + 2_400_000_000); // slot 13: slot 11 passed unseen
    assert!(w.tally(Some("k")).is_none_or(|t| t.heard() == 0), "nothing of slot 11 reaches slot 13");
}

/// A window of `max` per calendar `period` in `zone`.
fn calendar_window(max: u32, period: Period, zone: &str) -> FixedWindow {
    FixedWindow::new(Quota::per_period(max, calendar(period, zone)).unwrap())
}

#[test]
fn a_monthly_window_resets_at_midnight_of_the_first_in_its_zone() {
    for zone in ["America/New_York", "Europe/Berlin"] {
        let mut w = calendar_window(2, Period::Month, zone);
        let last = at(zone, "2026-01-31T23:59:59");
        assert!(take(&mut w, at(zone, "2026-01-01T00:00:00"), Some("k")).go, "{zone}");
        assert!(take(&mut w, at(zone, "2026-01-15T12:00:00"), Some("k")).go, "{zone}");
        let v = take(&mut w, last, Some("k"));
        assert!(!v.go, "{zone}: the month's two are spent");
        // The reset names the zone's midnight, a second away, not UTC's.
        assert_eq!((v.reset_after, v.retry_after), (NANOS_PER_SEC, NANOS_PER_SEC), "{zone}");
        assert!(!take(&mut w, at(zone, "2026-02-01T00:00:00") - 1, Some("k")).go, "{zone}");
        let v = take(&mut w, at(zone, "2026-02-01T00:00:00"), Some("k"));
        assert!(v.go, "{zone}: February begins at its midnight");
        assert_eq!(v.reset_after, 28 * 86_400 * NANOS_PER_SEC, "{zone}: February 2026 has 28 days");
    }
}

#[test]
fn a_daily_window_follows_a_daylight_saving_day_of_23_hours() {
    let zone = "Europe/Berlin";
    let mut w = calendar_window(1, Period::Day, zone);
    let v = take(&mut w, at(zone, "2026-03-29T00:00:00"), None);
    assert_eq!(v.reset_after, 23 * 3_600 * NANOS_PER_SEC, "the clocks skip an hour that day");
    assert!(!take(&mut w, at(zone, "2026-03-29T23:59:59"), None).go);
    assert!(take(&mut w, at(zone, "2026-03-30T00:00:00"), None).go);
}

#[test]
fn a_weekly_window_starts_on_monday() {
    let zone = "UTC";
    let mut w = calendar_window(1, Period::Week, zone);
    assert!(take(&mut w, at(zone, "2026-12-02T10:00:00"), None).go, "a Wednesday");
    let v = take(&mut w, at(zone, "2026-12-06T23:00:00"), None);
    assert!(!v.go, "the Sunday after is the same week");
    assert_eq!(v.reset_after, 3_600 * NANOS_PER_SEC);
    assert!(take(&mut w, at(zone, "2026-12-07T00:00:00"), None).go, "Monday begins the next");
}

#[test]
fn a_reservation_waits_into_the_next_month_and_counts_there() {
    let zone = "America/New_York";
    let mut w = calendar_window(1, Period::Month, zone);
    let last = at(zone, "2026-01-31T23:59:59");
    assert!(take(&mut w, last, None).go);
    w.advance(last);
    let v = w.take(last, None, Want { cost: 1, up_to: false, max_wait: 2 * NANOS_PER_SEC }, KeyRoom::Free).unwrap();
    assert!(v.go);
    assert_eq!(v.wait, NANOS_PER_SEC, "it goes at the zone's midnight");
    // February's one permit went to the reservation.
    let feb = at(zone, "2026-02-01T00:00:00");
    assert!(!take(&mut w, feb, None).go);
    assert!(take(&mut w, at(zone, "2026-03-01T00:00:00"), None).go, "March's is free");
}

#[test]
fn a_retune_keeps_counts_only_for_the_same_calendar() {
    let mut w = calendar_window(1, Period::Month, "Europe/Berlin");
    assert!(w.retune(Quota::per_period(5, calendar(Period::Month, "Europe/Berlin")).unwrap()));
    assert!(!w.retune(Quota::per_period(5, calendar(Period::Month, "America/New_York")).unwrap()));
    assert!(!w.retune(Quota::new(5, 86_400.0).unwrap()));
}
