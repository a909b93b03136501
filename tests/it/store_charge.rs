//! Charges on a real Redis (`op: charge` on a store-backed limit): each
//! counting kind takes a charge past its limit in the store, the reply
//! says the debt the store counted, and every locker on the store answers
//! sorry until that kind's own refill has paid it: a fixed window's slots
//! each filled up to max, a token bucket's tokens, a rolling window's
//! charge leaving it. Periods are long (an hour, a minute), so that the
//! figures are exact whatever the machine's speed.

use std::time::Duration;

use locker::Ask;

use crate::store::{two_lockers_on, Redis};
use crate::support::wait_for_room;

const LIMITS: &str = "\
[[limits]]\nname = \"fixed\"\nmax_requests = 10\nin_seconds = 3600\n\
[[limits]]\nname = \"bucket\"\nmax_requests = 10\nin_seconds = 60\nalgorithm = \"token-bucket\"\n\
[[limits]]\nname = \"rolling\"\nmax_requests = 10\nin_seconds = 60\nalgorithm = \"rolling-window\"\n";

/// Charges 25 of each kind's 10 on one locker: a debt of 15, and both
/// lockers are sorry for as long as the kind needs to pay it (a fixed
/// window's next slot is still full, a bucket refills one token every
/// 6 s, a rolling window's charge leaves it after the window and a
/// claim's life).
#[test]
fn a_charge_past_the_limit_is_a_debt_in_the_store_that_every_locker_waits_out() {
    let redis = Redis::start(false);
    // Far from an hour's end, so the fixed window's slot does not change.
    wait_for_room(3_600_000_000_000, Duration::from_secs(10));
    let (_lockers, [mut a, mut b], _config) = two_lockers_on(&redis, LIMITS);
    // What the store must have counted: the debt, and how long the asks
    // after it wait (in ms; lower by up to 10 s an ask that comes late on a
    // loaded machine).
    let expected =
        [("fixed", 15, 3_600_001..=7_200_000), ("bucket", 15, 86_000..=96_000), ("rolling", 15, 55_000..=68_000)];
    for (limit, debt, wait) in expected {
        let fresh = a.charge(Some(limit), Some("fresh"), 3).unwrap();
        assert_eq!((fresh.ok, fresh.granted, fresh.debt), (true, 3, 0), "{limit}: within the limit, no debt");
        let c = a.charge(Some(limit), Some("k"), 25).unwrap();
        assert_eq!((c.ok, c.granted, c.remaining, c.debt), (true, 25, 0, debt), "{limit}: {c:?}");
        for (who, client) in [("the charging locker", &mut a), ("the other locker", &mut b)] {
            let next = client.ask(&Ask::new().limit(limit).key("k")).unwrap();
            assert!(!next.ok && wait.contains(&next.retry_after_ms), "{limit}, {who}: sorry for {wait:?} ms: {next:?}");
        }
        let other_key = b.ask(&Ask::new().limit(limit).key("fresh")).unwrap();
        assert!(other_key.ok, "{limit}: another key's count is its own");
    }
    assert_eq!(redis.cli(&["HGET", "locker:{5:fixed:k}:f", "n"]).trim(), "25", "the store counts the whole charge");
    let stats = a.stats().unwrap();
    let charged = stats.limits.iter().find(|l| l.name == "fixed").map(|l| l.charged);
    assert_eq!(charged, Some(28));
}
