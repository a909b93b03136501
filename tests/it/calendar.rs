//! Calendar windows: a fixed window counting per day, week or month of a
//! time zone. On the seam, from a config file's text with given instants:
//! a monthly quota in Europe/Berlin resets at Berlin's midnight of the
//! 1st, its `reset_after_ms` names that boundary, and an ask that may
//! wait is reserved into the next month. Peered on a simulated clock: two
//! lockers count one month together and begin the next at the same
//! instant. A restart with its state file keeps the month's count.

use locker::config::{FileConfig, Flags, ServeConfig};
use locker::core::{Locker, Nanos};
use locker::service::Service;
use locker::wire::Ask;

use crate::support::seam_ask;

const MS: Nanos = 1_000_000;
const SEC: Nanos = 1_000 * MS;

/// 3 a month in Berlin, 10 a month in New York.
const CONFIG: &str = "
[[limits]]
name = 'plan'
max_requests = 3
period = 'month'
time_zone = 'Europe/Berlin'

[[limits]]
name = 'ny'
max_requests = 10
period = 'month'
time_zone = 'America/New_York'
";

/// The instant of the civil time `civil` in `zone`.
fn at(zone: &str, civil: &str) -> Nanos {
    let dt: jiff::civil::DateTime = civil.parse().unwrap();
    let ts = jiff::tz::db().get(zone).unwrap().to_timestamp(dt).unwrap();
    u64::try_from(ts.as_nanosecond()).unwrap()
}

fn berlin(civil: &str) -> Nanos {
    at("Europe/Berlin", civil)
}

fn locker() -> Locker {
    let config = ServeConfig::resolve(Flags::default(), FileConfig::parse(CONFIG).unwrap()).unwrap();
    Locker::new(config.default, config.limits, config.max_keys)
}

fn plan(key: &'static str) -> Ask<'static> {
    Ask::new().limit("plan").key(key)
}

#[test]
fn a_monthly_quota_resets_at_midnight_of_the_first_in_its_zone() {
    let mut s = Service::new(locker());
    for civil in ["2026-01-01T00:00:00", "2026-01-10T08:00:00", "2026-01-31T22:00:00"] {
        assert!(seam_ask(&mut s, berlin(civil), &plan("k")).unwrap().ok, "{civil}");
    }
    let r = seam_ask(&mut s, berlin("2026-01-31T23:59:59"), &plan("k")).unwrap();
    assert!(!r.ok);
    // Berlin's midnight is a second away (UTC's an hour later).
    assert_eq!((r.reset_after_ms, r.retry_after_ms), (1_000, 1_000));
    assert!(!seam_ask(&mut s, berlin("2026-02-01T00:00:00") - 1, &plan("k")).unwrap().ok);
    let r = seam_ask(&mut s, berlin("2026-02-01T00:00:00"), &plan("k")).unwrap();
    assert!(r.ok, "February begins at Berlin's midnight");
    assert_eq!((r.remaining, r.reset_after_ms), (2, 28 * 86_400_000));
}

#[test]
fn an_ask_that_may_wait_is_reserved_into_the_next_month() {
    let mut s = Service::new(locker());
    let late = berlin("2026-01-31T23:59:59.5");
    for _ in 0..3 {
        assert!(seam_ask(&mut s, late, &plan("k")).unwrap().ok);
    }
    let r = seam_ask(&mut s, late, &plan("k").max_wait_ms(1_000)).unwrap();
    assert!(r.ok);
    assert_eq!(r.wait_ms, Some(500), "it goes at Berlin's midnight");
    let feb = berlin("2026-02-01T00:00:00");
    assert_eq!(seam_ask(&mut s, feb, &plan("k").cost(0)).unwrap().remaining, 2, "the reservation counts in February");
}

#[test]
fn peered_lockers_count_one_month_together_and_begin_the_next_at_once() {
    use locker::sim::{self, Group};
    let make = |boot: &sim::Boot| sim::peered(locker(), boot, 300 * MS);
    let ny = |civil| at("America/New_York", civil);
    let mut g = Group::new(2, ny("2026-01-31T23:58:00"), 7, Box::new(make));
    g.first_runs();
    g.advance(5 * SEC);
    let ask = Ask::new().limit("ny").key("k");
    let mut went = [0; 2];
    for i in (0..2).cycle().take(40) {
        went[i] += usize::from(g.ask(i, &ask).unwrap().ok);
        g.advance(50 * MS);
    }
    assert_eq!(went.iter().sum::<usize>(), 10, "{went:?}: January's 10, between them");
    // Both end January at New York's midnight, and February's count is new on both.
    let reset = [g.ask(0, &ask).unwrap().reset_after_ms, g.ask(1, &ask).unwrap().reset_after_ms];
    let left = (ny("2026-02-01T00:00:00") - g.now()).div_ceil(MS);
    assert!(reset.iter().all(|&r| r.abs_diff(left) <= 1), "{reset:?} against {left}");
    g.advance_to(ny("2026-02-01T00:00:00") + SEC);
    let mut went = [0; 2];
    for i in (0..2).cycle().take(40) {
        went[i] += usize::from(g.ask(i, &ask).unwrap().ok);
        g.advance(50 * MS);
    }
    assert_eq!(went.iter().sum::<usize>(), 10, "{went:?}: February's 10, between them");
}

#[test]
fn a_restart_with_its_state_file_keeps_the_months_count() {
    use locker::sim::{self, Group};
    let make = |_: &sim::Boot| Service::new(locker());
    let mut g = Group::new(1, berlin("2026-03-10T12:00:00"), 3, Box::new(make));
    g.keep_state(0);
    assert!(g.ask(0, &plan("k")).unwrap().ok);
    assert!(g.ask(0, &plan("k")).unwrap().ok);
    g.kill(0);
    g.advance(3_600 * SEC);
    g.restart(0);
    let r = g.ask(0, &plan("k")).unwrap();
    assert_eq!((r.ok, r.remaining), (true, 0), "the restart kept March's two");
    assert!(!g.ask(0, &plan("k")).unwrap().ok);
    // March in Berlin has a day of 23 hours: April begins 30 days and 11 hours on, not 12.
    g.advance_to(berlin("2026-04-01T00:00:00"));
    assert!(g.ask(0, &plan("k")).unwrap().ok, "April's count is new");
}
