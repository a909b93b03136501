//! Conserved tokens on the simulated group (`locker::sim`): two to five
//! peered lockers sharing a token bucket, under the generated schedules of
//! asks and faults of `conserved` (delays from nothing to two periods,
//! jitter that reorders, loss up to a half, duplication, pauses,
//! partitions that heal, kills and restarts, with state files in half
//! the cases). Whatever the schedule, the go of the whole group in any
//! span `T` between two of them never exceed `burst + rate x T`; with
//! timely messages, saturating demand spread over the lockers, or on one
//! of them, fills the bucket.
//!
//! Every go is counted at the true instant it was answered (the nodes'
//! clocks are right). Cases: `PROPTEST_CASES`, else 32.

use locker::core::limit::bucket_interval;
use locker::core::{Algorithm, Limit, Locker, Nanos, Quota, DEFAULT_LIMIT};
use proptest::prelude::*;

use super::conserved::{cases, kept_event, kept_long_event, Event, Trial};
use crate::group::{joined_as, MS};

/// A token bucket of `burst` refilled at `max` per `period_ms`, as the
/// default limit of every node.
pub(crate) fn bucket(max: u32, period_ms: u64, burst: u32) -> impl Fn() -> Locker + Clone {
    move || {
        let quota = Quota::new(max, period_ms as f64 / 1000.0).unwrap();
        let limit = Limit::with_algorithm(DEFAULT_LIMIT, quota, Algorithm::token_bucket(burst).unwrap()).unwrap();
        Locker::new(limit, vec![], 1000)
    }
}

/// A trial of `n` lockers sharing a bucket, with the bucket's rate as
/// nanoseconds per token.
fn trial(n: usize, max: u32, period_ms: u64, burst: u32, seed: u64, named: bool) -> (Trial, Nanos) {
    let g = joined_as(n, seed, bucket(max, period_ms, burst), named);
    let interval = bucket_interval(Quota::new(max, period_ms as f64 / 1000.0).unwrap());
    (Trial::of(g, n, period_ms * MS, burst), interval)
}

/// The most the go of `gos` between two of them exceed `burst + span /
/// interval` by, over every pair (0 when the bound always holds), with the
/// span and the go in it.
pub(crate) fn worst_excess(gos: &[(Nanos, u64)], burst: u32, interval: Nanos) -> (i64, Nanos, u64) {
    let mut worst = (0, 0, 0);
    for (i, &(from, _)) in gos.iter().enumerate() {
        let mut taken = 0;
        for &(at, n) in &gos[i..] {
            taken += n;
            let excess = taken as i64 - (u64::from(burst) + (at - from) / interval) as i64;
            if excess > worst.0 {
                worst = (excess, at - from, taken);
            }
        }
    }
    worst
}

/// Runs `events` (each after `gap_pct` % of a period) on a trial; the
/// worst excess over the bound.
fn run(t: &mut Trial, events: &[(u64, Event)], burst: u32, interval: Nanos) -> (i64, Nanos, u64) {
    t.run(events);
    worst_excess(&t.gos, burst, interval)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn the_group_never_grants_more_than_burst_plus_rate_times_any_span_whatever_the_messages_do(
        n in 2usize..=5,
        max in 1u32..10,
        burst in 1u32..8,
        period_ms in prop::sample::select(vec![40u64, 100, 300, 800]),
        seed in any::<u64>(),
        events in prop::collection::vec((0u64..60, kept_event()), 1..80),
        kept in any::<bool>(),
    ) {
        let (mut t, interval) = trial(n, max, period_ms, burst, seed, false);
        t.keep_states(kept);
        let (excess, span, taken) = run(&mut t, &events, burst, interval);
        prop_assert!(excess <= 0, "{} go in {} ns, {} over burst {} + rate: {:?}", taken, span, excess, burst, t.gos);
    }

    /// Faults of seconds, in which a majority reclaims a silent member's
    /// room, with bursts of demand to spend it.
    #[test]
    fn the_group_never_grants_more_than_burst_plus_rate_times_any_span_while_silent_members_rooms_are_reclaimed(
        n in 3usize..=5,
        max in 1u32..12,
        burst in 1u32..12,
        period_ms in prop::sample::select(vec![100u64, 300]),
        seed in any::<u64>(),
        named in any::<bool>(),
        events in prop::collection::vec((0u64..800, kept_long_event()), 1..60),
        kept in any::<bool>(),
    ) {
        let (mut t, interval) = trial(n, max, period_ms, burst, seed, named);
        t.keep_states(kept);
        let (excess, span, taken) = run(&mut t, &events, burst, interval);
        prop_assert!(excess <= 0, "{} go in {} ns, {} over burst {} + rate: {:?}", taken, span, excess, burst, t.gos);
    }
}

/// `n` lockers, saturated from the start of a period for four periods by
/// asks once a millisecond on the lockers `busy` names, in turn: the go
/// against what one bucket would grant, `burst + rate x 4 periods`.
fn saturated(n: usize, max: u32, period_ms: u64, burst: u32, seed: u64, busy: &[usize]) -> (u64, u64) {
    let (mut t, interval) = trial(n, max, period_ms, burst, seed, false);
    let start = (t.g.now() / t.slot + 1) * t.slot;
    let end = start + 4 * t.slot;
    let mut at = start;
    while at < end {
        for &node in busy {
            t.g.advance_to(at);
            t.ask(node, 1);
            at += MS / busy.len() as u64;
        }
    }
    let go = t.gos.iter().filter(|(at, _)| (start..end).contains(at)).map(|(_, n)| n).sum();
    (go, u64::from(burst) + 4 * t.slot / interval)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

    /// Every locker holds a room of at least two tokens (a room of one is
    /// full, and stops refilling, between a token and the next ask).
    /// Demand on every locker leaves each at most part of a token of its
    /// own unspent; demand on one locker, besides, may lose part of a token
    /// per locker as a gift's room ends with its period.
    #[test]
    fn with_timely_messages_demand_on_every_locker_or_on_one_fills_the_bucket(
        n in 2usize..=5,
        max in 1u32..40,
        extra in 0u32..10,
        period_ms in prop::sample::select(vec![100u64, 300, 800]),
        one in prop::option::of(0usize..5),
        seed in any::<u64>(),
    ) {
        let burst = 2 * n as u32 + extra;
        let busy: Vec<usize> = match one {
            Some(node) => vec![node % n],
            None => (0..n).collect(),
        };
        let (go, one_bucket) = saturated(n, max, period_ms, burst, seed, &busy);
        let slack = if one.is_some() { 2 * n } else { n } as u64;
        prop_assert!(go + slack >= one_bucket, "{} go of {} on {:?}", go, one_bucket, busy);
    }
}

/// A case the reclaim property found at 100,000 cases: three lockers at 1
/// per 300 ms with a burst of 11, a member paused for 2.6 periods (long
/// enough for the others to reclaim its room) while lossy, late links and
/// bursts of demand move tokens between them.
#[test]
fn a_paused_members_room_reclaimed_under_lossy_links_grants_no_more_than_the_bucket() {
    use Event::*;
    let events = [
        (211, Link { delay_pct: 30, jitter_pct: 77, loss_pct: 37, dup_pct: 8 }),
        (306, Cut { a: 1, b: 1 }),
        (778, Burst { node: 4, n: 16 }),
        (568, Pause { node: 0, pct: 885 }),
        (204, Drain),
        (687, Isolate { node: 3 }),
        (403, Link { delay_pct: 18, jitter_pct: 66, loss_pct: 33, dup_pct: 1 }),
        (214, Drain),
        (89, Burst { node: 4, n: 25 }),
        (600, Drain),
    ];
    let (burst, seed) = (11, 16_300_330_749_935_257_597);
    let (mut t, interval) = trial(3, 1, 300, burst, seed, false);
    t.keep_states(false);
    let (excess, span, taken) = run(&mut t, &events, burst, interval);
    assert!(excess <= 0, "{taken} go in {span} ns, {excess} over burst {burst} + rate: {:?}", t.gos);
}
