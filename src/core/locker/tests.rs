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
    assert_eq!(
        stats[1].1,
        LimitStats { requests: 2, go: 0, sorry: 0, errors: 2, waited: 0, peeks: 0, charged: 0, shadow_sorry: 0 }
    );
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

/// A limit in shadow is known by one flag while none is; in `all`, a range
/// of asks in shadow that would refuse is given back alone and does not
/// refuse the whole, each of its asks counted a sorry; a usual refusal
/// still gives back every part.
#[test]
#[allow(clippy::single_range_in_vec_init)] // one range of asks in shadow, not the indices in it
fn a_shadow_range_that_would_refuse_is_given_back_alone_and_does_not_refuse_the_whole() {
    let mut l = locker(10);
    let (d, api) = (l.find(None).unwrap(), l.find(Some("api")).unwrap());
    assert!(!l.shadow(api), "no limit is in shadow");
    let shadowed = Locker::new(limit(DEFAULT_LIMIT, 2, 1.0), vec![limit("api", 5, 0.8).with_shadow(true)], 10);
    assert!(shadowed.shadow(api) && !shadowed.shadow(d));

    assert!(l.go(0, d, Some("k"), 2).unwrap().go, "the default limit's key k is spent");
    // Part 0 (api) goes; parts 1..3 (api, then the spent default) are in shadow.
    let asks = [PermitAsk::new(api).key("k"), PermitAsk::new(api).key("k"), PermitAsk::new(d).key("k")];
    let (mut verdicts, shadow) = (Vec::new(), [1..3]);
    assert_eq!(l.all_shadowed(0, &asks, &shadow, &mut verdicts), Ok(true));
    assert_eq!(verdicts.iter().map(|v| (v.go, v.granted)).collect::<Vec<_>>(), [(true, 1), (true, 0), (false, 0)]);
    assert!(refused_range(&shadow, &verdicts, 1) && !refused_range(&shadow, &verdicts, 0));
    assert_eq!(l.go(0, api, Some("k"), 0).unwrap().remaining, 4, "only part 0 charged api");
    let counts = |l: &Locker| l.figures().stats().map(|(_, s)| (s.go, s.sorry)).collect::<Vec<_>>();
    assert_eq!(counts(&l), [(1, 1), (1, 1)], "each ask of the refused range a sorry (the peek neither)");

    // A refusal outside the ranges refuses the whole, as ever.
    let second = [1..2];
    assert_eq!(l.all_shadowed(0, &[asks[2], asks[0]], &second, &mut verdicts), Ok(false));
    assert_eq!(l.go(0, api, Some("k"), 0).unwrap().remaining, 4, "nothing charged");
}

#[test]
fn a_repair_carries_at_most_its_budget_and_the_next_resumes_where_it_stopped() {
    // Peered, two members: each owns 50 of 100 per key and slot.
    let mut l = Locker::new(limit(DEFAULT_LIMIT, 100, 10.0), vec![limit("api", 100, 10.0)], 1000);
    l.sharing().set_view(PeerView { members: 2, live: 2, ..PeerView::ALONE });
    let now = 1_000 * crate::core::time::NANOS_PER_SEC;
    let keys: Vec<String> = (0..10).map(|i| format!("k{i}")).collect();
    for id in [l.default, l.find(Some("api")).unwrap()] {
        for k in &keys {
            assert!(l.go(now, id, Some(k), 1).unwrap().go);
        }
    }
    // 20 touched keys, one count each (the own count): 3 repairs of 8.
    let mut seen = Vec::new();
    let mut sizes = Vec::new();
    for _ in 0..4 {
        let sent = l.sharing().drain_touched(now, 8, |c| seen.push((c.limit, c.key.clone())));
        sizes.push(sent);
    }
    assert_eq!(sizes, [8, 8, 4, 0], "at most the budget, the rest in the next; then nothing is touched");
    let mut unique = seen.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), 20, "every touched key once: {seen:?}");
    // Touched again: the next cycle starts over from the first limit.
    assert!(l.go(now, l.default, Some("k3"), 1).unwrap().go);
    let mut again = Vec::new();
    assert_eq!(l.sharing().drain_touched(now, 8, |c| again.push((c.limit, c.key.clone(), c.count))), 1);
    assert_eq!(again, [(l.default, Some("k3".into()), 2)]);
}
