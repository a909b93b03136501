//! A rolling window shared by peers while counts arrive within the
//! in-flight window, checked with generated asks at literal instants: up
//! to 200 asks crowded into 40 ms on two to five lockers, each ask's count
//! reaching the others after a random delay under 2 ms, merged out of
//! order. The window hands out its room by the same parts and turns as the
//! fixed window's pool, so the same bound holds: all the asks fall in one
//! interval of length T, and together the lockers grant at most
//! `max_requests` in it.

use locker::core::{Algorithm, Limit, Quota, DEFAULT_LIMIT};
use proptest::prelude::*;

use super::wired::{lockers, prompt, run, Wire, MS};

const T0: u64 = 1_700_000_000_000 * MS;

proptest! {
    #[test]
    fn counts_that_arrive_in_time_keep_every_interval_within_max(
        n in 2usize..=5,
        max in 1u32..40,
        asks in prompt(40 * MS),
    ) {
        let quota = Quota::new(max, 1.0).unwrap();
        let limit = Limit::with_algorithm(DEFAULT_LIMIT, quota, Algorithm::RollingWindow).unwrap();
        let mut all = lockers(n, &limit);
        let (go, asked) = run(&mut all, &mut Wire::new(), T0, &asks);
        let granted: u32 = go.iter().sum();
        prop_assert!(granted <= max, "{} go of {:?} asked, above {}", granted, asked, max);
    }
}
