//! The bound on a token bucket shared by peers, checked with generated
//! sequences at literal instants: two or three lockers ask from one key's
//! bucket and exchange their cumulative counts with bounded, random delays
//! (so messages arrive late and out of order).
//!
//! The stated bound: over any span from `s` to `t`, all lockers together
//! grant at most `burst + rate x (t - s)`, plus what the peers of the
//! locker granting at `t` granted within the delay `d` before it (grants it
//! could not have heard of yet). Each peer grants at most
//! `burst + rate x d` within `d`, so the overshoot is at most
//! `(N - 1) x (burst + rate x d)`, reached only when every locker spends a
//! full burst within `d` of the others.

use std::num::NonZeroU32;

use locker::core::{Algorithm, Count, Limit, Locker, PeerView, PermitAsk, Quota, DEFAULT_LIMIT};
use proptest::prelude::*;

const MS: u64 = 1_000_000;

/// One generated ask: how far time moves first, which locker, what cost,
/// and how long its count takes to reach the others.
#[derive(Debug, Clone)]
struct Step {
    advance_ns: u64,
    locker: usize,
    cost: u32,
    up_to: bool,
    delay_ns: u64,
}

fn steps(max_delay_ns: u64, burst: u32) -> impl Strategy<Value = Vec<Step>> {
    let step = (0u64..4 * MS, 0usize..3, 1..=burst, any::<bool>(), 0..=max_delay_ns)
        .prop_map(|(advance_ns, locker, cost, up_to, delay_ns)| Step { advance_ns, locker, cost, up_to, delay_ns });
    prop::collection::vec(step, 1..300)
}

/// A grant: when, by which locker, how many.
struct Grant {
    at: u64,
    locker: usize,
    n: u64,
}

fn lockers(n: usize, max: u32, in_seconds: f64, burst: u32) -> Vec<Locker> {
    let quota = Quota::new(max, in_seconds).unwrap();
    let limit = Limit::with_algorithm(DEFAULT_LIMIT, quota, Algorithm::TokenBucket { burst: nz(burst) }).unwrap();
    (0..n)
        .map(|_| {
            let mut l = Locker::new(limit.clone(), vec![], 10);
            l.peers().set_view(PeerView { live: n as u32, ..PeerView::ALONE });
            l
        })
        .collect()
}

fn nz(n: u32) -> NonZeroU32 {
    NonZeroU32::new(n).unwrap()
}

/// Runs `steps` on `n` lockers; returns the grants in the order made.
fn run(n: usize, lockers: &mut [Locker], start: u64, steps: &[Step]) -> Vec<Grant> {
    let id = lockers[0].find(None).unwrap();
    // (deliver at, to, count as the receiver names the sender's node)
    let mut wire: Vec<(u64, usize, Count)> = Vec::new();
    let mut grants = Vec::new();
    let mut now = start;
    for step in steps {
        now += step.advance_ns;
        deliver(lockers, &mut wire, now);
        let from = step.locker % n;
        let ask = PermitAsk { up_to: step.up_to, ..PermitAsk::new(id).key("k").cost(u64::from(step.cost)) };
        let v = lockers[from].ask(now, &ask).unwrap();
        if v.go {
            grants.push(Grant { at: now, locker: from, n: u64::from(v.granted) });
        }
        let sent: Vec<Count> = lockers[from].peers().take_granted().collect();
        for to in (0..n).filter(|&to| to != from) {
            for c in &sent {
                // Node 0 is the receiver itself; the sender is from + 1.
                let c = Count { node: from as u32 + 1, ..c.clone() };
                wire.push((now + step.delay_ns, to, c));
            }
        }
        deliver(lockers, &mut wire, now);
    }
    grants
}

/// Merges every count due by `now` into its receiver.
fn deliver(lockers: &mut [Locker], wire: &mut Vec<(u64, usize, Count)>, now: u64) {
    let (due, later): (Vec<_>, Vec<_>) = wire.drain(..).partition(|(at, _, _)| *at <= now);
    *wire = later;
    for (_, to, count) in due {
        lockers[to].peers().merge(now, &count);
    }
}

proptest! {
    #[test]
    fn peers_together_stay_within_burst_plus_rate_plus_what_was_in_flight(
        n in 2usize..=3,
        max in 1u32..40,
        in_tenths in 1u32..20,
        burst in 1u32..8,
        delay_ms in 0u64..5,
        start in 0u64..1_000_000_000_000,
        steps in steps(5 * MS, 8),
    ) {
        let in_seconds = f64::from(in_tenths) / 10.0;
        let mut all = lockers(n, max, in_seconds, burst);
        let d = delay_ms * MS;
        let steps: Vec<Step> =
            steps.into_iter().map(|s| Step { cost: s.cost.min(burst), delay_ns: s.delay_ns.min(d), ..s }).collect();
        let grants = run(n, &mut all, start, &steps);
        let interval = (in_tenths as u64 * 100 * MS).div_ceil(u64::from(max));
        for b in 0..grants.len() {
            let end = &grants[b];
            // Grants by the other lockers the locker granting at `end` may not have heard of.
            let unheard = |a: usize| -> u64 {
                grants[a..=b].iter().filter(|g| g.locker != end.locker && g.at + d >= end.at).map(|g| g.n).sum()
            };
            let mut total = 0;
            for a in (0..=b).rev() {
                total += grants[a].n;
                let bound = u64::from(burst) + (end.at - grants[a].at) / interval + unheard(a);
                prop_assert!(total <= bound, "{} granted from {} to {} ns, bound {}", total, grants[a].at, end.at, bound);
            }
        }
    }

    #[test]
    fn without_delay_peers_grant_exactly_what_one_locker_would(
        n in 2usize..=3,
        max in 1u32..40,
        burst in 1u32..8,
        steps in steps(0, 1),
    ) {
        // Counts arrive at once: the lockers together are one bucket.
        let mut peered = lockers(n, max, 1.0, burst);
        let mut alone = lockers(1, max, 1.0, burst);
        let start = 1_000_000 * MS;
        let shared: Vec<u64> = run(n, &mut peered, start, &steps).iter().map(|g| g.at).collect();
        let one: Vec<u64> = run(1, &mut alone, start, &steps).iter().map(|g| g.at).collect();
        prop_assert_eq!(shared, one);
    }
}
