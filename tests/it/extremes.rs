//! No limit whose numbers can be written down turns into no limit: a limit
//! built from extreme numbers is either refused when it is built, or every
//! kind holds its documented bound at extreme instants and costs.

use locker::core::{Algorithm, Limit, LimitError, Locker, Quota, DEFAULT_LIMIT};
use proptest::prelude::*;

const NANOS_PER_SEC: u128 = 1_000_000_000;

/// One generated ask: how far time moves first, and what share of the
/// limit's capacity it asks for.
fn steps() -> impl Strategy<Value = Vec<(u64, u32)>> {
    // Time moves by nothing, by a little, or by days at a step.
    let advance = prop_oneof![Just(0u64), 0u64..1_000_000_000, 0u64..200_000_000_000_000];
    prop::collection::vec((advance, any::<u32>()), 1..120)
}

/// Numbers a config file may hold: tiny and huge counts, slots from 1 ms to a day.
fn quotas() -> impl Strategy<Value = Quota> {
    let max = prop_oneof![1u32..10, Just(u32::MAX), any::<u32>().prop_map(|m| m.max(1))];
    let secs = prop_oneof![Just(0.001f64), Just(86_400.0f64), 0.001f64..86_400.0];
    (max, secs).prop_map(|(m, s)| Quota::new(m, s).unwrap())
}

/// Runs `steps` against a locker of `limit` from `start`, recording each
/// grant as (instant, permits).
fn run(limit: Limit, start: u64, steps: &[(u64, u32)]) -> Vec<(u64, u64)> {
    let capacity = limit.capacity();
    let mut locker = Locker::new(limit, vec![], 16);
    let id = locker.find(None).unwrap();
    let mut now = start;
    let mut grants = Vec::new();
    for &(advance, share) in steps {
        now = now.saturating_add(advance);
        let cost = u64::from(share % capacity) + 1;
        let verdict = locker.go(now, id, Some("k"), cost).expect("a cost within the capacity is never an error");
        if verdict.go {
            grants.push((now, cost));
        }
    }
    grants
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    /// A token bucket grants at most `burst + rate x span` over any span
    /// from its first grant, or it was refused when built.
    #[test]
    fn a_token_bucket_never_grants_past_burst_plus_rate(
        quota in quotas(),
        burst in prop_oneof![1u32..10, any::<u32>().prop_map(|b| b.max(1))],
        start in 0u64..4_000_000_000_000_000_000,
        steps in steps(),
    ) {
        let algorithm = Algorithm::token_bucket(burst).unwrap();
        let limit = match Limit::with_algorithm(DEFAULT_LIMIT, quota, algorithm) {
            Ok(limit) => limit,
            Err(e) => {
                prop_assert!(matches!(e, LimitError::BucketTooDeep { .. }), "refused for {e}");
                return Ok(());
            }
        };
        let grants = run(limit, start, &steps);
        let Some(&(first, _)) = grants.first() else { return Ok(()) };
        let mut total: u128 = 0;
        for &(at, n) in &grants {
            total += u128::from(n);
            // Tokens refill at max_requests per slot, never faster.
            let refilled = u128::from(at - first) * u128::from(quota.max_requests()) / u128::from(quota.slot_ns());
            prop_assert!(
                total <= u128::from(burst) + refilled,
                "{} granted by {} ns after the first grant; burst {}, refill {}", total, at - first, burst, refilled
            );
        }
    }

    /// A fixed window grants at most `max_requests` in any slot and a
    /// rolling window at most `max_requests` in any interval of its length,
    /// whatever the numbers and instants.
    #[test]
    fn windows_never_grant_past_max_at_extreme_numbers(
        quota in quotas(),
        rolling in any::<bool>(),
        start in 0u64..4_000_000_000_000_000_000,
        steps in steps(),
    ) {
        let algorithm = if rolling { Algorithm::RollingWindow } else { Algorithm::FixedWindow };
        let grants = run(Limit::with_algorithm(DEFAULT_LIMIT, quota, algorithm).unwrap(), start, &steps);
        let max = u128::from(quota.max_requests());
        for (i, &(at, _)) in grants.iter().enumerate() {
            let counted: u128 = grants[..=i]
                .iter()
                .filter(|&&(t, _)| if rolling { at - t < quota.slot_ns() } else { quota.slot_of(t) == quota.slot_of(at) })
                .map(|&(_, n)| u128::from(n))
                .sum();
            prop_assert!(counted <= max, "{} go within one {} of {} ns", counted, if rolling { "window" } else { "slot" }, at);
        }
    }
}

/// The bucket from the report: 1 per day with a burst of 200,000 would take
/// 200,000 days to refill, and its arithmetic would saturate. It is refused,
/// with the numbers in the message.
#[test]
fn a_bucket_deeper_than_a_year_is_refused_with_its_numbers() {
    let quota = Quota::new(1, 86_400.0).unwrap();
    let err = Limit::with_algorithm("slow", quota, Algorithm::token_bucket(200_000).unwrap()).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("burst 200000") && text.contains("200000 days") && text.contains("365 days"), "{text}");
    // A year exactly is still fine.
    assert!(Limit::with_algorithm("slow", quota, Algorithm::token_bucket(365).unwrap()).is_ok());
    let deep = u128::from(quota.slot_ns()) * 366;
    assert!(deep > 365 * 86_400 * NANOS_PER_SEC);
    assert!(Limit::with_algorithm("slow", quota, Algorithm::token_bucket(366).unwrap()).is_err());
}
