//! Properties of the fixed-timeslot counter that must hold for any sequence
//! of requests, checked with generated sequences at literal instants.

use std::collections::HashMap;

use locker::core::{Limit, Locker, Quota, DEFAULT_LIMIT};
use proptest::prelude::*;

/// One generated ask: how far time moves first, which key, what cost.
#[derive(Debug, Clone)]
struct Step {
    advance_ns: u64,
    key: Option<u8>,
    cost: u64,
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    let step = (0u64..40_000_000, prop::option::of(0u8..4), 0u64..8).prop_map(|(advance_ns, key, cost)| Step {
        advance_ns,
        key,
        cost,
    });
    prop::collection::vec(step, 1..400)
}

proptest! {
    #[test]
    fn no_slot_ever_grants_more_than_max_requests(
        max in 1u32..7,
        slot_ms in 1u64..100,
        start in 0u64..1_000_000_000_000,
        steps in steps(),
    ) {
        let quota = Quota::new(max, slot_ms as f64 / 1000.0).unwrap();
        let mut locker = Locker::new(Limit::new(DEFAULT_LIMIT, quota).unwrap(), vec![], 2);
        let id = locker.find(None).unwrap();
        let mut granted: HashMap<(Option<u8>, u64), u64> = HashMap::new();
        let mut now = start;
        for step in steps {
            now += step.advance_ns;
            let key = step.key.map(|k| k.to_string());
            if let Ok(v) = locker.go(now, id, key.as_deref(), step.cost) {
                let total = granted.entry((step.key, quota.slot_of(now))).or_default();
                if v.go {
                    *total += step.cost;
                }
                prop_assert!(*total <= u64::from(max), "slot {} got {}", quota.slot_of(now), total);
                prop_assert_eq!(u64::from(v.remaining), u64::from(max) - *total);
            }
        }
    }

    #[test]
    fn under_saturation_every_slot_is_filled_exactly(
        max in 1u32..20,
        slot_ms in 1u64..50,
        slots in 1u64..20,
    ) {
        let quota = Quota::new(max, slot_ms as f64 / 1000.0).unwrap();
        let mut locker = Locker::new(Limit::new(DEFAULT_LIMIT, quota).unwrap(), vec![], 1);
        let id = locker.find(None).unwrap();
        let step = quota.slot_ns() / (u64::from(max) * 3);
        for slot in 0..slots {
            let start = slot * quota.slot_ns();
            let go = (0..u64::from(max) * 3)
                .filter(|i| locker.go(start + i * step, id, None, 1).unwrap().go)
                .count();
            prop_assert_eq!(go, max as usize, "slot {}", slot);
        }
    }
}
