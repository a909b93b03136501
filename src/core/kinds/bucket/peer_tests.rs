use std::num::NonZeroU32;

use super::*;
use crate::core::kinds::Kept;
use crate::core::limit::{LimitId, Quota};
use crate::core::share::exchange::KeptExchange;

const MS: Nanos = 1_000_000;
/// The start of a 1 s period.
const T0: Nanos = 1_000_000 * MS;

/// 10 per second (one token per 100 ms), burst 5: 500 ms deep.
fn bucket() -> Bucket {
    Bucket::new(Quota::new(10, 1.0).unwrap(), NonZeroU32::new(5).unwrap())
}

/// Member `m` of three, all live.
fn member(m: u32) -> Share {
    Share { live: 3, members: 3, member: Some(m), ..Share::ALONE }
}

fn terms(m: u32) -> Leeway {
    Leeway { room: KeyRoom::Free, share: member(m) }
}

fn ask(b: &mut Bucket, now: Nanos, m: u32) -> Verdict {
    b.take_shared(now, Some("k"), Want::now(1), terms(m)).unwrap()
}

/// What `count` says, from `node`, about key "k" in `period`.
fn heard(what: Counted, period: u64, node: NodeIx, count: u32) -> Count {
    Count::of(what, LimitId(0), Some("k"), period, node, count)
}

#[test]
fn each_member_grants_its_own_room_and_then_asks_its_peers() {
    // 5 over 3: rooms of 2, 2 and 1.
    for (m, room) in [(0, 2), (1, 2), (2, 1)] {
        let mut b = bucket();
        let go = (0..5).filter(|_| ask(&mut b, T0, m).go).count();
        assert_eq!(go, room, "member {m}");
        let short = ask(&mut b, T0, m);
        assert!(short.retry_after <= member(m).charged_for(), "a gift may come: {short:?}");
        assert_eq!(b.note_wanted(Some("k")).map(|w| w.1), Some(room as u32), "asks for as many as it granted");
    }
    // Member 2 refills its room of 1 at a fifth of the rate: one per 500 ms.
    let mut b = bucket();
    ask(&mut b, T0, 2);
    assert!(!ask(&mut b, T0 + 499 * MS, 2).go);
    assert!(ask(&mut b, T0 + 500 * MS, 2).go);
}

#[test]
fn a_want_is_answered_with_tokens_taken_off_the_giver_first() {
    let (mut taker, mut giver) = (bucket(), bucket());
    ask(&mut taker, T0, 0);
    ask(&mut taker, T0, 0);
    assert!(!ask(&mut taker, T0, 0).go);
    let (period, wanted) = taker.note_wanted(Some("k")).unwrap();
    let mut gifts = Vec::new();
    let want = heard(Counted::Wanted, period, 1, wanted);
    assert!(giver.merge_want_or_gift(T0, &want, terms(1), |_, p, to, n| gifts.push((p, to, n))));
    // The giver granted none in the period: it gives the whole want, not
    // its half (two other members), and holds no room until the period
    // ends (at T0 + 1 s), when its room comes back empty to fill in 500 ms.
    assert_eq!(gifts, [(period, 1, 2)]);
    let emptied = ask(&mut giver, T0, 1);
    assert!(!emptied.go, "the giver gave both its tokens");
    assert_eq!(emptied.reset_after, 1_500 * MS, "{emptied:?}");
    assert!(!giver.merge_want_or_gift(T0, &want, terms(1), |_, _, _, _| panic!("answered")));
    let gift = heard(Counted::Gave(ME), period, 2, 1);
    assert!(taker.merge_want_or_gift(T0, &gift, terms(0), |_, _, _, _| {}));
    assert!(!taker.merge_want_or_gift(T0, &gift, terms(0), |_, _, _, _| {}), "a repeat");
    assert!(ask(&mut taker, T0, 0).go, "the gift is the taker's own");
    assert!(!ask(&mut taker, T0, 0).go);
}

#[test]
fn a_member_that_granted_in_the_period_gives_its_part_of_a_want() {
    let mut giver = bucket();
    assert!(ask(&mut giver, T0, 0).go, "one of its 2");
    // Its room of 2 refills at 4 a second: full again 250 ms later.
    let at = T0 + 250 * MS;
    let mut gifts = Vec::new();
    let want = heard(Counted::Wanted, giver.period(at), 1, 2);
    giver.merge_want_or_gift(at, &want, terms(0), |_, p, to, n| gifts.push((p, to, n)));
    assert_eq!(gifts, [(giver.period(at), 1, 1)], "half of the want: two other members");
    assert!(ask(&mut giver, at, 0).go, "and keeps the other");
}

#[test]
fn a_gift_of_an_ended_period_is_never_used_and_the_giver_gets_its_room_back_empty() {
    let mut giver = bucket();
    let want = heard(Counted::Wanted, giver.period(T0), 1, 4);
    giver.merge_want_or_gift(T0 + 900 * MS, &want, terms(0), |_, _, _, _| {});
    assert_eq!(ask(&mut giver, T0 + 900 * MS, 0).retry_after, member(0).charged_for(), "gave both");
    // From the next period on its room of 2 refills from empty, at 4 per second.
    assert!(!ask(&mut giver, T0 + 1200 * MS, 0).go);
    assert!(ask(&mut giver, T0 + 1250 * MS, 0).go);
    let mut taker = bucket();
    let late = heard(Counted::Gave(ME), taker.period(T0), 0, 2);
    assert!(!taker.merge_want_or_gift(T0 + 1000 * MS, &late, terms(1), |_, _, _, _| {}));
}

#[test]
fn a_run_that_joined_late_holds_no_room_in_that_period_and_fills_from_empty_after() {
    let late = Share { owns_from: T0 + 300 * MS, ..member(0) };
    let mut b = bucket();
    let terms = Leeway { room: KeyRoom::Free, share: late };
    assert!(!b.take_shared(T0 + 300 * MS, Some("k"), Want::now(1), terms).unwrap().go);
    // Room 2 from T0 + 1 s, empty then: one token per 250 ms.
    assert!(!b.take_shared(T0 + 1200 * MS, Some("k"), Want::now(1), terms).unwrap().go);
    assert!(b.take_shared(T0 + 1250 * MS, Some("k"), Want::now(1), terms).unwrap().go);
    let mut fresh = bucket();
    assert!(!fresh.take_shared(T0 + 1200 * MS, Some("x"), Want::now(1), terms).unwrap().go, "untouched: empty too");
}

#[test]
fn idle_shares_are_swept_and_busy_ones_kept() {
    let mut b = bucket();
    ask(&mut b, T0, 0);
    b.take_shared(T0, Some("idle"), Want::now(0), terms(0)).unwrap();
    assert_eq!(b.live_keys(), 2);
    b.advance(T0);
    assert_eq!(b.live_keys(), 2, "touched within the depth (500 ms): a fresh share might be fuller");
    // Sweeps come at most once a second.
    ask(&mut b, T0 + 900 * MS, 0);
    assert_eq!(b.advance(T0 + 1000 * MS), 1, "full and untouched for the depth, a share says nothing");
    assert_eq!(b.live_keys(), 1, "granted from 100 ms ago");
    assert_eq!(b.advance(T0 + 2000 * MS), 1);
    assert_eq!(b.live_keys(), 0);
}

/// Member 0 restarted at `at` with a state file it resumes (`resumes`),
/// or without.
fn restarted(at: Nanos, resumes: bool) -> Leeway {
    Leeway { room: KeyRoom::Free, share: Share { owns_from: at, resumes, ..member(0) } }
}

/// How many of `n` asks for "k" at `now` go.
fn gos(b: &mut Bucket, now: Nanos, n: u32, terms: Leeway) -> usize {
    (0..n).filter(|_| b.take_shared(now, Some("k"), Want::now(1), terms).unwrap().go).count()
}

#[test]
fn a_resumed_share_holds_what_its_earlier_run_held_after_a_gift_and_a_grant_alone_would_hold_more() {
    // Member 0's room of 2: it grants one, then gives its last token (and
    // one unit of room) to member 1, which wanted two.
    let mut earlier = bucket();
    assert!(ask(&mut earlier, T0, 0).go);
    let Kept::Bucket { tat, period, .. } = earlier.kept(T0, Some("k")) else { unreachable!() };
    let mut given = 0;
    earlier.merge_want_or_gift(T0 + MS, &heard(Counted::Wanted, period, 1, 2), terms(0), |_, _, _, n| given = n);
    assert_eq!(given, 1);
    let fill = kept_fill(&earlier, T0 + MS);
    assert_eq!((fill.period, fill.base, fill.room), (period, 2, 1));
    // Killed, and restarted 100 ms later: the earlier run held no whole
    // token (a room of 1 refills at 2 a second).
    let at = T0 + 100 * MS;
    let resumed = |fill: Option<KeptExchange>| {
        let mut b = bucket();
        b.carry_grant(at, Some("k"), T0, (period, tat), KeyRoom::Free);
        if let Some(fill) = fill {
            assert!(b.carry_fill(at, Some("k"), T0 + MS, fill, KeyRoom::Free));
        }
        b
    };
    let mut b = resumed(Some(fill));
    assert_eq!(gos(&mut b, at, 3, restarted(at, true)), 0, "as empty as the earlier run");
    assert_eq!(gos(&mut b, T0 + 600 * MS, 3, restarted(at, true)), 1, "its room of 1 full 500 ms after the gift");
    // The grant's TAT alone, on the room before the gift: a token more.
    let mut b = resumed(None);
    assert_eq!(gos(&mut b, at, 3, restarted(at, true)), 1, "the grant alone holds more than the run had");
    // Not resumed: no room in the period it joined in.
    let mut b = resumed(Some(fill));
    assert_eq!(gos(&mut b, at, 3, restarted(at, false)), 0);
    assert_eq!(gos(&mut b, T0 + 900 * MS, 3, restarted(at, false)), 0);
}

#[test]
fn a_grant_after_the_last_gift_resumes_on_the_room_the_gift_left() {
    let mut earlier = bucket();
    let mut given = 0;
    // Idle, it gives the whole want: one of its two tokens.
    earlier.merge_want_or_gift(T0, &heard(Counted::Wanted, earlier.period(T0), 1, 1), terms(0), |_, _, _, n| given = n);
    assert_eq!(given, 1);
    let fill = kept_fill(&earlier, T0);
    assert!(ask(&mut earlier, T0 + MS, 0).go, "the one token left");
    let Kept::Bucket { tat, period, .. } = earlier.kept(T0 + MS, Some("k")) else { unreachable!() };
    let at = T0 + 100 * MS;
    let mut b = bucket();
    b.carry_grant(at, Some("k"), T0 + MS, (period, tat), KeyRoom::Free);
    assert!(b.carry_fill(at, Some("k"), T0, fill, KeyRoom::Free));
    assert_eq!(gos(&mut b, at, 3, restarted(at, true)), 0);
    assert_eq!(gos(&mut b, T0 + 600 * MS, 3, restarted(at, true)), 1, "a room of 1, not 2");
}

#[test]
fn records_older_than_the_period_before_are_not_resumed() {
    let fill = KeptExchange { period: 1_000, base: 2, room: 0, tat: T0, ..KeptExchange::default() };
    let mut b = bucket();
    let later = T0 + 2000 * MS;
    assert!(!b.carry_fill(later, Some("k"), T0, fill, KeyRoom::Free));
    assert!(b.carry_fill(T0 + 1000 * MS, Some("k"), T0, fill, KeyRoom::Free));
    // A room of 0 at the period's end comes back empty: none yet 100 ms
    // into the next (2 of room, 4 a second).
    assert_eq!(gos(&mut b, T0 + 1100 * MS, 3, restarted(T0 + 1000 * MS, true)), 0);
    assert_eq!(gos(&mut b, T0 + 1260 * MS, 3, restarted(T0 + 1000 * MS, true)), 1);
}

/// What `b` keeps of its share of "k" at `now` (see `kept_exchange`).
fn kept_fill(b: &Bucket, now: Nanos) -> KeptExchange {
    let mut kept = None;
    b.kept_exchange(now, Some("k"), |e| kept = Some(e));
    kept.expect("a peered share")
}
