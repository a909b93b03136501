//! Conserved tokens on the simulated group (`locker::sim`): two to five
//! peered lockers sharing a token bucket, under the generated schedules of
//! asks and faults of `conserved` (delays from nothing to two periods,
//! jitter that reorders, loss up to a half, duplication, pauses,
//! partitions that heal, kills and restarts). Whatever the schedule, the
//! go of the whole group in any span `T` between two of them never exceed
//! `burst + rate x T`; with timely messages, saturating demand spread over
//! the lockers, or on one of them, fills the bucket.
//!
//! Every go is counted at the true instant it was answered (the nodes'
//! clocks are right). Cases: `PROPTEST_CASES`, else 32.

use locker::core::limit::bucket_interval;
use locker::core::{Algorithm, Limit, Locker, Nanos, Quota, DEFAULT_LIMIT};
use locker::sim::Group;
use locker::wire::Ask;
use proptest::prelude::*;

use super::conserved::{cases, event, Event, Faults};
use crate::group::{joined, MS};

/// A token bucket of `burst` refilled at `max` per `period_ms`, as the
/// default limit of every node.
fn bucket(max: u32, period_ms: u64, burst: u32) -> impl Fn() -> Locker + Clone {
    move || {
        let quota = Quota::new(max, period_ms as f64 / 1000.0).unwrap();
        let limit = Limit::with_algorithm(DEFAULT_LIMIT, quota, Algorithm::token_bucket(burst).unwrap()).unwrap();
        Locker::new(limit, vec![], 1000)
    }
}

/// A group of `n` lockers sharing a bucket, and the go it answered.
struct Trial {
    g: Group,
    period: Nanos,
    burst: u32,
    /// Nanoseconds per token of the whole bucket's rate.
    interval: Nanos,
    faults: Faults,
    /// Each go: the true instant, and the tokens granted.
    gos: Vec<(Nanos, u64)>,
}

impl Trial {
    fn new(n: usize, max: u32, period_ms: u64, burst: u32, seed: u64) -> Trial {
        let g = joined(n, seed, bucket(max, period_ms, burst));
        let interval = bucket_interval(Quota::new(max, period_ms as f64 / 1000.0).unwrap());
        let period = period_ms * MS;
        Trial { g, period, burst, interval, faults: Faults::new(n, period), gos: Vec::new() }
    }

    fn ask(&mut self, node: usize, cost: u64) {
        if !self.faults.ready(&self.g, node) {
            return;
        }
        let cost = cost.min(u64::from(self.burst));
        let r = self.g.ask(node, &Ask::new().key("k").cost(cost)).expect("an answer");
        if r.ok {
            self.gos.push((self.g.now(), u64::from(r.granted.unwrap_or(1))));
        }
    }

    fn apply(&mut self, e: &Event) {
        if let Some((node, cost)) = self.faults.apply(&mut self.g, e) {
            self.ask(node, cost);
        }
    }

    /// The most the go between two instants exceed `burst + rate x span`
    /// by, over every pair of go (0 when the bound always holds), with
    /// the span and the go in it.
    fn worst_excess(&self) -> (i64, Nanos, u64) {
        let mut worst = (0, 0, 0);
        for (i, &(from, _)) in self.gos.iter().enumerate() {
            let mut taken = 0;
            for &(at, n) in &self.gos[i..] {
                taken += n;
                let bound = u64::from(self.burst) + (at - from) / self.interval;
                let excess = taken as i64 - bound as i64;
                if excess > worst.0 {
                    worst = (excess, at - from, taken);
                }
            }
        }
        worst
    }

    /// The go answered from `from` until `to`.
    fn go_between(&self, from: Nanos, to: Nanos) -> u64 {
        self.gos.iter().filter(|(at, _)| (from..to).contains(at)).map(|(_, n)| n).sum()
    }
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
        events in prop::collection::vec((0u64..60, event()), 1..80),
    ) {
        let mut t = Trial::new(n, max, period_ms, burst, seed);
        for (gap_pct, e) in &events {
            let at = t.g.now() + t.period * gap_pct / 100;
            t.g.advance_to(at);
            t.apply(e);
        }
        let (excess, span, taken) = t.worst_excess();
        prop_assert!(excess <= 0, "{} go in {} ns, {} over burst {} + rate: {:?}", taken, span, excess, burst, t.gos);
    }
}

/// `n` lockers, saturated from the start of a period for four periods by
/// asks once a millisecond on the lockers `busy` names, in turn: the go
/// against what one bucket would grant, `burst + rate x 4 periods`.
fn saturated(n: usize, max: u32, period_ms: u64, burst: u32, seed: u64, busy: &[usize]) -> (u64, u64) {
    let mut t = Trial::new(n, max, period_ms, burst, seed);
    let start = (t.g.now() / t.period + 1) * t.period;
    let end = start + 4 * t.period;
    let mut at = start;
    while at < end {
        for &node in busy {
            t.g.advance_to(at);
            t.ask(node, 1);
            at += MS / busy.len() as u64;
        }
    }
    (t.go_between(start, end), u64::from(burst) + 4 * t.period / t.interval)
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
