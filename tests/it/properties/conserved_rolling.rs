//! Conserved rights on the simulated group (`locker::sim`): two to five
//! peered lockers sharing a rolling window, under the generated schedules
//! of asks and faults of `conserved` (delays from nothing to two windows,
//! jitter that reorders, loss up to a half, duplication, pauses,
//! partitions that heal, kills and restarts), and on schedules of seconds,
//! during which a majority reclaims the rights of members it cannot hear;
//! in half the cases every locker keeps a state file, which a restart
//! resumes its rights from (or a fresh, empty one).
//! Whatever the schedule, no interval of the window's length holds more
//! than `max_requests` go across the group; with timely messages, demand on every locker, or on
//! one, fills every window from the second.
//!
//! A go is counted at the true instant its locker decided it (the lockers'
//! clocks are right here). Cases: `PROPTEST_CASES`, else 32.

use locker::core::Nanos;
use proptest::prelude::*;

use super::conserved::{cases, kept_event, kept_long_event, Trial};
use crate::group::{joined_as, rolling, MS};

/// The most permits that went in any interval of length `window`, and
/// the instant that interval ends at.
pub(crate) fn worst(goes: &[(Nanos, u64)], window: Nanos) -> (u64, Nanos) {
    let within = |end: Nanos| goes.iter().filter(|&&(t, _)| t <= end && t + window > end).map(|&(_, n)| n).sum();
    goes.iter().map(|&(end, _)| (within(end), end)).max().unwrap_or((0, 0))
}

/// The permits that went in each aligned window from `start`, for `windows`.
fn per_window(goes: &[(Nanos, u64)], start: Nanos, window: Nanos, windows: u64) -> Vec<u64> {
    let within = |k: u64| goes.iter().filter(|&&(t, _)| (t - start) / window == k).map(|&(_, n)| n).sum();
    (0..windows).map(within).collect()
}

fn rolling_trial(n: usize, max: u32, window_ms: u64, seed: u64, named: bool) -> Trial {
    Trial::of(joined_as(n, seed, rolling(max, window_ms), named), n, window_ms * MS, max)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn no_interval_of_the_window_ever_holds_more_than_max_whatever_the_messages_do(
        n in 2usize..=5,
        max in 1u32..8,
        window_ms in prop::sample::select(vec![40u64, 100, 300, 800]),
        seed in any::<u64>(),
        events in prop::collection::vec((0u64..60, kept_event()), 1..80),
        kept in any::<bool>(),
    ) {
        let mut t = rolling_trial(n, max, window_ms, seed, false);
        t.keep_states(kept);
        t.run(&events);
        let (most, end) = worst(&t.gos, t.slot);
        prop_assert!(most <= u64::from(max), "{} go in the window ending at {}: {:?}", most, end, t.gos);
    }

    /// Faults of seconds, in which a majority reclaims a silent member's
    /// rights, with bursts of demand to spend them.
    #[test]
    fn no_interval_of_the_window_holds_more_than_max_while_silent_members_rights_are_reclaimed(
        n in 3usize..=5,
        max in 1u32..12,
        window_ms in prop::sample::select(vec![100u64, 300, 3000]),
        seed in any::<u64>(),
        named in any::<bool>(),
        events in prop::collection::vec((0u64..800, kept_long_event()), 1..60),
        kept in any::<bool>(),
    ) {
        let mut t = rolling_trial(n, max, window_ms, seed, named);
        t.keep_states(kept);
        t.run(&events);
        let (most, end) = worst(&t.gos, t.slot);
        prop_assert!(most <= u64::from(max), "{} go in the window ending at {}: {:?}", most, end, t.gos);
    }

    #[test]
    fn with_timely_messages_demand_on_one_locker_fills_every_window_from_the_second(
        n in 2usize..=5,
        max in 1u32..12,
        window_ms in prop::sample::select(vec![100u64, 300, 800]),
        busy in 0usize..5,
        seed in any::<u64>(),
    ) {
        let mut t = rolling_trial(n, max, window_ms, seed, false);
        let busy = busy % n;
        let start = (t.g.now() / t.slot + 1) * t.slot;
        let mut at = start;
        // One locker asked once a millisecond for four windows.
        while at < start + 4 * t.slot {
            at += MS;
            t.g.advance_to(at);
            t.ask(busy, 1);
        }
        let got = per_window(&t.gos, start, t.slot, 4);
        prop_assert!(got[1..].iter().all(|&g| g == u64::from(max)), "{:?}", got);
        prop_assert!(worst(&t.gos, t.slot).0 <= u64::from(max));
    }

    #[test]
    fn with_timely_messages_demand_on_every_locker_fills_every_window_from_the_second(
        n in 2usize..=5,
        max in 1u32..12,
        window_ms in prop::sample::select(vec![100u64, 300, 800]),
        seed in any::<u64>(),
    ) {
        let mut t = rolling_trial(n, max, window_ms, seed, false);
        let start = (t.g.now() / t.slot + 1) * t.slot;
        t.g.advance_to(start);
        // Every locker asked once a millisecond, in turn, for four windows.
        let mut at = start;
        while at < start + 4 * t.slot {
            for node in 0..n {
                at += MS / n as u64;
                t.g.advance_to(at);
                t.ask(node, 1);
            }
        }
        let got = per_window(&t.gos, start, t.slot, 4);
        prop_assert!(got[1..].iter().all(|&g| g == u64::from(max)), "{:?}", got);
        prop_assert!(worst(&t.gos, t.slot).0 <= u64::from(max));
    }
}
