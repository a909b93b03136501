//! Properties of limits checked together and of refunds, on the core
//! itself with generated sequences at literal instants: a refused `all`
//! leaves every count as it found it (a twin table that never saw it
//! decides every later ask alike), and refunds never let a slot grant
//! more than its limit, nor give back more than a key took.

use std::collections::HashMap;

use locker::core::{Algorithm, Limit, Locker, PermitAsk, Quota, DEFAULT_LIMIT};
use proptest::prelude::*;

/// One generated step: how far time moves first, then a go, an `all` or
/// a refund, on limits 0 and 1 and keys 0 to 2.
#[derive(Debug, Clone)]
enum Op {
    Go(usize, u8, u64),
    All(Vec<(usize, u8, u64)>),
    Refund(usize, u8, u64),
}

fn steps() -> impl Strategy<Value = Vec<(u64, Op)>> {
    let part = (0usize..2, 0u8..3, 0u64..4);
    let op = prop_oneof![
        part.clone().prop_map(|(l, k, c)| Op::Go(l, k, c)),
        prop::collection::vec(part.clone(), 1..5).prop_map(Op::All),
        part.prop_map(|(l, k, c)| Op::Refund(l, k, c)),
    ];
    prop::collection::vec((0u64..30_000_000, op), 1..300)
}

/// Two limits of `kind`: 4 and 6 per 100 ms.
fn locker(kind: u8) -> Locker {
    let algorithm = |burst| match kind {
        0 => Algorithm::FixedWindow,
        1 => Algorithm::token_bucket(burst).unwrap(),
        _ => Algorithm::RollingWindow,
    };
    let limit = |name: &str, n| Limit::with_algorithm(name, Quota::new(n, 0.1).unwrap(), algorithm(n)).unwrap();
    Locker::new(
        Limit::new(DEFAULT_LIMIT, Quota::new(1, 1.0).unwrap()).unwrap(),
        vec![limit("a", 4), limit("b", 6)],
        1000,
    )
}

const KEYS: [&str; 3] = ["k0", "k1", "k2"];

fn ask(l: &Locker, (limit, key, cost): (usize, u8, u64)) -> PermitAsk<'static> {
    let name = ["a", "b"][limit];
    PermitAsk { key: Some(KEYS[key as usize]), cost, ..PermitAsk::new(l.find(Some(name)).unwrap()) }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn a_refused_all_charges_no_part(kind in 0u8..3, start in 0u64..1_000_000_000_000, steps in steps()) {
        let (mut seen, mut twin) = (locker(kind), locker(kind));
        let mut now = start;
        let mut verdicts = Vec::new();
        for (advance, op) in steps {
            now += advance;
            match op {
                Op::Go(l, k, c) => {
                    let a = ask(&seen, (l, k, c));
                    let (x, y) = (seen.ask(now, &a), twin.ask(now, &a));
                    prop_assert_eq!(x, y, "a go decided alike at {}", now);
                }
                Op::Refund(l, k, c) => {
                    let a = ask(&seen, (l, k, c));
                    prop_assert_eq!(seen.refund(now, &a), twin.refund(now, &a));
                }
                Op::All(parts) => {
                    let asks: Vec<PermitAsk> = parts.iter().map(|&p| ask(&seen, p)).collect();
                    match seen.all(now, &asks, &mut verdicts) {
                        Ok(true) => {
                            let mut again = Vec::new();
                            prop_assert_eq!(twin.all(now, &asks, &mut again), Ok(true));
                            prop_assert_eq!(&again, &verdicts);
                        }
                        // The twin never sees a refused whole.
                        Ok(false) => prop_assert!(verdicts.iter().all(|v| v.granted == 0)),
                        Err(e) => prop_assert!(false, "no part here can be an error: {}", e),
                    }
                }
            }
            for limit in 0..2 {
                for key in 0..3 {
                    let peek = ask(&seen, (limit, key, 0));
                    let (x, y) = (seen.ask(now, &peek).unwrap(), twin.ask(now, &peek).unwrap());
                    prop_assert_eq!((x.remaining, x.reset_after), (y.remaining, y.reset_after));
                }
            }
        }
    }

    #[test]
    fn refunds_never_let_a_slot_grant_more_than_its_limit(start in 0u64..1_000_000_000_000, steps in steps()) {
        let mut l = locker(0);
        let quota = Quota::new(4, 0.1).unwrap();
        let max = [4u64, 6];
        // Permits each (limit, key) holds in a slot: granted less given back.
        let mut held: HashMap<(usize, u8, u64), u64> = HashMap::new();
        let mut verdicts = Vec::new();
        let mut now = start;
        for (advance, op) in steps {
            now += advance;
            let slot = quota.slot_of(now);
            let parts = match op {
                Op::Go(lim, k, c) => {
                    let v = l.ask(now, &ask(&l, (lim, k, c))).unwrap();
                    vec![((lim, k), i64::from(v.granted))]
                }
                Op::All(parts) => {
                    let asks: Vec<PermitAsk> = parts.iter().map(|&p| ask(&l, p)).collect();
                    l.all(now, &asks, &mut verdicts).unwrap();
                    parts.iter().zip(&verdicts).map(|(&(lim, k, _), v)| ((lim, k), i64::from(v.granted))).collect()
                }
                Op::Refund(lim, k, c) => {
                    let v = l.refund(now, &ask(&l, (lim, k, c))).unwrap();
                    prop_assert!(u64::from(v.granted) <= c, "never more than asked back");
                    vec![((lim, k), -i64::from(v.granted))]
                }
            };
            for ((lim, k), n) in parts {
                let h = held.entry((lim, k, slot)).or_default();
                let after = *h as i64 + n;
                prop_assert!(after >= 0, "a refund gave back more than the key took in the slot");
                prop_assert!(after as u64 <= max[lim], "slot {} of limit {} holds {}", slot, lim, after);
                *h = after as u64;
            }
        }
    }
}
