//! Unit tests of `locker`.

use super::*;
use crate::core::limit::Quota;

fn limit(name: &str, max: u32, secs: f64) -> Limit {
    Limit::new(name, Quota::new(max, secs).unwrap()).unwrap()
}

fn locker(max_keys: usize) -> Locker {
    Locker::new(limit(DEFAULT_LIMIT, 2, 1.0), vec![limit("api", 5, 0.8)], max_keys)
}

#[test]
fn requests_without_a_limit_use_the_default() {
    let mut l = locker(10);
    let d = l.find(None).unwrap();
    assert_eq!(l.limit(d).name(), DEFAULT_LIMIT);
    assert!(l.go(0, d, None, 1).unwrap().go);
    assert!(l.go(0, d, None, 1).unwrap().go);
    assert!(!l.go(0, d, None, 1).unwrap().go);
}

#[test]
fn plain_bodies_pick_a_limit_by_name_or_fall_back_to_the_default() {
    let l = locker(10);
    assert_eq!(l.limit(l.find_plain(b"api")).name(), "api");
    assert_eq!(l.limit(l.find_plain(b"let me go")).name(), DEFAULT_LIMIT);
    assert_eq!(l.limit(l.find_plain(b"")).name(), DEFAULT_LIMIT);
    assert_eq!(l.limit(l.find_plain(&[0xff, 0xfe])).name(), DEFAULT_LIMIT);
}

#[test]
fn bad_asks_are_errors_and_are_counted() {
    let mut l = locker(10);
    let api = l.find(Some("api")).unwrap();
    assert_eq!(l.find(Some("nope")), Err(TableError::UnknownLimit("nope".into())));
    assert_eq!(l.go(0, api, None, 6), Err(AskError::CostAboveMax { cost: 6, max: 5 }));
    let patient = PermitAsk::new(api).max_wait_ms(MAX_WAIT_MS + 1);
    assert_eq!(l.ask(0, &patient), Err(TableError::WaitTooLong(MAX_WAIT_MS + 1).into()));
    let stats: Vec<_> = l.figures().stats().map(|(lim, s)| (lim.name().to_owned(), s)).collect();
    assert_eq!(stats[1].1, LimitStats { requests: 2, go: 0, sorry: 0, errors: 2, waited: 0, peeks: 0, charged: 0 });
}

#[test]
fn a_full_key_table_reclaims_keys_of_limits_nobody_asks_any_more() {
    let mut l = locker(1);
    let (default, api) = (l.find(None).unwrap(), l.find(Some("api")).unwrap());
    assert!(l.go(0, default, Some("a"), 1).is_ok());
    // The default limit's slot (1 s) has ended; nobody asks it again.
    assert!(l.go(1_600_000_000, api, Some("b"), 1).unwrap().go);
    assert_eq!(l.figures().live_keys(), 1);
}

#[test]
fn max_keys_caps_live_keys_and_frees_them_with_the_slot() {
    let mut l = locker(2);
    let api = l.find(Some("api")).unwrap();
    assert!(l.go(0, api, Some("a"), 1).is_ok());
    assert!(l.go(0, api, Some("b"), 1).is_ok());
    assert_eq!(l.go(0, api, Some("c"), 1), Err(TableError::TooManyKeys(2).into()));
    assert!(l.go(0, api, Some("a"), 1).is_ok(), "existing keys still count");
    assert_eq!(l.figures().live_keys(), 2);
    assert!(l.go(800_000_000, api, Some("c"), 1).unwrap().go, "a new slot frees the table");
    assert_eq!(l.figures().live_keys(), 1);
}

#[test]
fn a_named_default_replaces_the_flag_default() {
    let l = Locker::new(limit(DEFAULT_LIMIT, 2, 1.0), vec![limit(DEFAULT_LIMIT, 9, 1.0)], 10);
    assert_eq!(l.limit(l.find(None).unwrap()).quota().max_requests(), 9);
    assert_eq!(l.figures().stats().count(), 1);
}
