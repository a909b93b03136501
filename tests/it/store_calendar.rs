//! A calendar quota on a real Redis: a monthly limit in America/New_York
//! served by two lockers on one store is counted once, in the store, by
//! that zone's months: its five permits go on either locker, and then
//! both are sorry until midnight of the 1st in New York, which the test
//! computes on its own from the zone's rules.

use std::time::Duration;

use jiff::civil::DateTime;
use jiff::tz::TimeZone;
use jiff::{Timestamp, ToSpan};
use locker::Ask;

use crate::store::{two_lockers_on, Redis};

const ZONE: &str = "America/New_York";

/// Milliseconds from now to the next midnight of the 1st in `ZONE`.
fn to_next_month() -> i64 {
    let tz = TimeZone::get(ZONE).unwrap();
    let now = Timestamp::now();
    let first = tz.to_datetime(now).date().first_of_month().checked_add(1.month()).unwrap();
    tz.to_timestamp(DateTime::from(first)).unwrap().as_millisecond() - now.as_millisecond()
}

#[test]
fn a_monthly_quota_in_a_zone_is_counted_in_the_store_until_that_zones_first_of_the_month() {
    // Not across a boundary: a month that ends within the minute is waited out.
    if to_next_month() < 60_000 {
        std::thread::sleep(Duration::from_millis(to_next_month().max(0) as u64 + 1_000));
    }
    let redis = Redis::start(false);
    let limits =
        format!("[[limits]]\nname = \"monthly\"\nmax_requests = 5\nperiod = \"month\"\ntime_zone = \"{ZONE}\"\n");
    let (_lockers, mut clients, _config) = two_lockers_on(&redis, &limits);
    let ask = Ask::new().limit("monthly").key("k");
    // One at a time, alternating: a locker's claim takes at most a
    // quarter of the capacity (1), so both lockers claim from the store.
    let go = (0..8).filter(|i| clients[i % 2].ask(&ask).unwrap().ok).count();
    assert_eq!(go, 5, "five in the month, on two lockers");
    for client in &mut clients {
        let sorry = client.ask(&ask).unwrap();
        let expected = to_next_month();
        let off = i64::try_from(sorry.retry_after_ms).unwrap() - expected;
        assert!(!sorry.ok && (-15_000..=1_000).contains(&off), "sorry until {ZONE}'s 1st, in {expected} ms: {sorry:?}");
    }
    assert_eq!(redis.cli(&["HGET", "locker:{7:monthly:k}:c", "n"]).trim(), "5", "one count, in the store");
}
