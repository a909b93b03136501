//! The hand's rules, with the store's answers made up: a short hand
//! claims and waits, a full one answers at once and claims ahead, a spent
//! store answers sorry until its retry time, permits never outlive the
//! store's deadline, a failing key is left alone for a while, and one
//! node's failure puts aside only the keys it answered for.

use super::*;
use crate::core::limit::{Quota, DEFAULT_LIMIT};

const MS: Nanos = NANOS_PER_MS;
const T0: Nanos = 1_700_000_000_000 * MS;

fn fixed(max: u32) -> Limit {
    Limit::new(DEFAULT_LIMIT, Quota::new(max, 1.0).unwrap()).unwrap()
}

fn id() -> LimitId {
    LimitId(0)
}

fn grant(id: ClaimId, got: u32, valid_ms: u64, left: u32, retry_ms: u64) -> Claimed {
    let node = "10.0.0.1:7000".into();
    Claimed {
        id,
        node,
        grant: Ok(Grant { got, valid_us: valid_ms * 1_000, left, retry_us: retry_ms * 1_000, debt: 0 }),
    }
}

/// A hand with one claim on its way for the unkeyed count of `limit`.
fn claiming(limit: &Limit) -> (Claims, ClaimId) {
    let mut c = Claims::new(1);
    let Need::Claim(claim) = c.need(T0, id(), limit, None, 1) else { panic!("an empty hand must claim") };
    c.take_outbox();
    (c, claim)
}

fn failed(id: ClaimId, node: &str, why: &str) -> Claimed {
    Claimed { id, node: node.into(), grant: Err(why.into()) }
}

#[test]
fn a_short_hand_claims_and_the_ask_waits_for_it() {
    let limit = fixed(100);
    let mut c = Claims::new(1);
    let Need::Claim(claim) = c.need(T0, id(), &limit, Some("k"), 1) else { panic!("an empty hand must claim") };
    let sent = c.take_outbox();
    assert_eq!(sent.len(), 1);
    assert_eq!((sent[0].want, &*sent[0].key, &*sent[0].name), (1, "k", "default"));
    assert_eq!(sent[0].terms, ClaimTerms::Fixed { max: 100, slot_us: 1_000_000 });
    // A second ask for the same key waits for the same claim.
    assert_eq!(c.need(T0, id(), &limit, Some("k"), 1), Need::Claim(claim));
    assert!(c.take_outbox().is_empty(), "one claim on its way per key");
    assert_eq!(c.settle(T0 + MS, vec![grant(claim, 2, 500, 98, 0)]), vec![claim]);
    assert_eq!(c.need(T0 + MS, id(), &limit, Some("k"), 1), Need::Ready);
    assert!(c.take(T0 + MS, id(), &limit, Some("k"), 1, false).go);
    assert!(c.take(T0 + MS, id(), &limit, Some("k"), 1, false).go);
    let third = c.take(T0 + MS, id(), &limit, Some("k"), 1, false);
    assert!(!third.go, "two permits claimed, two granted");
}

#[test]
fn permits_are_not_spent_past_the_stores_deadline() {
    let limit = fixed(100);
    let mut c = Claims::new(1);
    let Need::Claim(claim) = c.need(T0, id(), &limit, None, 1) else { panic!() };
    // Valid for 10 ms from when the claim was asked for (T0), not from
    // when the answer came.
    c.settle(T0 + 4 * MS, vec![grant(claim, 50, 10, 50, 0)]);
    assert!(c.take(T0 + 9 * MS, id(), &limit, None, 1, false).go);
    assert!(!c.take(T0 + 10 * MS, id(), &limit, None, 1, false).go, "the slot ended at T0 + 10 ms");
    assert!(matches!(c.need(T0 + 10 * MS, id(), &limit, None, 1), Need::Claim(_)), "a new slot claims again");
}

#[test]
fn a_spent_store_answers_sorry_until_its_retry_time_without_claiming() {
    let limit = fixed(5);
    let (mut c, claim) = claiming(&limit);
    c.settle(T0, vec![grant(claim, 1, 300, 0, 300)]);
    assert!(c.take(T0, id(), &limit, None, 1, false).go);
    assert_eq!(c.need(T0 + MS, id(), &limit, None, 1), Need::Ready, "spent: no claim until the retry time");
    assert!(c.take_outbox().is_empty());
    let sorry = c.take(T0 + MS, id(), &limit, None, 1, false);
    assert!(!sorry.go);
    assert_eq!(sorry.retry_after, 299 * MS);
    assert!(matches!(c.need(T0 + 300 * MS, id(), &limit, None, 1), Need::Claim(_)));
}

#[test]
fn a_steady_hand_claims_ahead_in_chunks_sized_by_demand() {
    let limit = fixed(100_000);
    let mut c = Claims::new(1);
    let mut now = T0;
    let mut claims = 0;
    let mut decisions = 0;
    for _ in 0..20_000 {
        now += 10_000; // an ask every 10 µs
        let _ = c.need(now, id(), &limit, None, 1);
        for ask in c.take_outbox() {
            claims += 1;
            // The store answers at once with all that was asked.
            c.settle(now, vec![grant(ask.id, ask.want, 10_000, 100_000, 0)]);
        }
        if c.take(now, id(), &limit, None, 1, false).go {
            decisions += 1;
        }
    }
    assert!(decisions >= 19_990, "a steady caller is answered from the hand: {decisions}");
    assert!(claims * 20 < decisions, "claims are a small fraction of decisions: {claims} for {decisions}");
}

#[test]
fn a_chunk_is_at_most_a_quarter_of_the_capacity_but_covers_what_waits() {
    assert_eq!(chunk(1_000, 1, 100), 25);
    assert_eq!(chunk(1_000, 60, 100), 60);
    assert_eq!(chunk(0, 0, 100), 1);
    assert_eq!(chunk(3, 1, 100), 6);
    assert_eq!(chunk(10, 0, 2), 1);
}

#[test]
fn a_failing_store_is_left_alone_for_a_while() {
    let limit = fixed(10);
    let (mut c, claim) = claiming(&limit);
    let report = failed(NODE_REPORT, "10.0.0.1:7000", "connection refused");
    c.settle(T0, vec![failed(claim, "10.0.0.1:7000", "connection refused"), report]);
    assert_eq!(c.down(), Some("10.0.0.1:7000: connection refused"));
    assert!(c.failing(id(), None));
    assert_eq!(c.need(T0 + MS, id(), &limit, None, 1), Need::Ready);
    assert!(!c.take(T0 + MS, id(), &limit, None, 1, false).go, "fails closed");
    let Need::Claim(again) = c.need(T0 + RETRY_DOWN, id(), &limit, None, 1) else { panic!("tries again") };
    c.settle(T0 + RETRY_DOWN, vec![grant(again, 1, 500, 9, 0), grant(NODE_REPORT, 0, 0, 0, 0)]);
    assert_eq!(c.down(), None, "back");
    assert!(!c.failing(id(), None));
    assert!(c.take(T0 + RETRY_DOWN, id(), &limit, None, 1, false).go);
}

#[test]
fn terms_cover_a_claims_life_for_buckets_and_rolling_windows() {
    let bucket =
        Limit::with_algorithm("b", Quota::new(100, 1.0).unwrap(), Algorithm::token_bucket(80).unwrap()).unwrap();
    let Some(ClaimTerms::Bucket { burst, interval_us, life_us }) = ClaimTerms::of(&bucket, T0) else { panic!() };
    // 100 per second: a token every 10 ms; an eighth of the burst is 10 tokens, 100 ms.
    assert_eq!((burst, interval_us, life_us), (80, 10_000.0, 100_000));
    let rolling = Limit::with_algorithm("r", Quota::new(100, 1.6).unwrap(), Algorithm::RollingWindow).unwrap();
    let Some(ClaimTerms::Rolling { max, sub_us, span, life_us }) = ClaimTerms::of(&rolling, T0) else { panic!() };
    assert_eq!((max, sub_us, life_us), (100, 100_000.0, 100_000));
    // Counted over the window (16 sub-slots) and a claim's life (one more), plus the sub-slot in progress.
    assert_eq!(span, 18);
    assert!((span - 1) as f64 * sub_us >= 1_600_000.0 + life_us as f64);
    let semaphore = Limit::with_algorithm("s", Quota::new(1, 1.0).unwrap(), Algorithm::Semaphore).unwrap();
    assert_eq!(ClaimTerms::of(&semaphore, T0), None);
}

#[test]
fn one_nodes_failure_puts_aside_only_its_own_keys_and_names_the_node() {
    let limit = fixed(100);
    let mut c = Claims::new(1);
    let Need::Claim(sick) = c.need(T0, id(), &limit, Some("on-a"), 1) else { panic!() };
    let Need::Claim(well) = c.need(T0, id(), &limit, Some("on-b"), 1) else { panic!() };
    c.take_outbox();
    let ok = Claimed { node: "b:2".into(), ..grant(well, 10, 500, 90, 0) };
    let reports =
        [failed(NODE_REPORT, "a:1", "timed out"), Claimed { node: "b:2".into(), ..grant(NODE_REPORT, 0, 0, 0, 0) }];
    c.settle(T0 + 200 * MS, [failed(sick, "a:1", "timed out"), ok].into_iter().chain(reports).collect());
    assert_eq!(c.down(), Some("a:1: timed out"), "the node is named as soon as a call to it failed");
    assert_eq!(c.nodes().collect::<Vec<_>>(), [("a:1", Some("timed out")), ("b:2", None)]);
    assert!(c.failing(id(), Some("on-a")) && !c.failing(id(), Some("on-b")));
    assert!(c.take(T0 + 201 * MS, id(), &limit, Some("on-b"), 1, false).go, "the healthy node's key goes on");
    let sorry = c.take(T0 + 201 * MS, id(), &limit, Some("on-a"), 1, false);
    assert!(!sorry.go && sorry.retry_after >= 99 * MS, "the sick node's key: sorry until it is tried again");
    // A new key on the healthy node claims at once: nothing global is down.
    assert!(matches!(c.need(T0 + 201 * MS, id(), &limit, Some("also-on-b"), 1), Need::Claim(_)));
    // The store reports the node back (a probe answered): it is no longer named.
    let back = Claimed {
        id: NODE_REPORT,
        node: "a:1".into(),
        grant: Ok(Grant { got: 0, valid_us: 0, left: 0, retry_us: 0, debt: 0 }),
    };
    assert!(c.settle(T0 + 250 * MS, vec![back]).is_empty(), "a report answers no claim");
    assert_eq!(c.down(), None);
    let gone = Claimed { id: NODE_GONE, node: "a:1".into(), grant: Err(String::new()) };
    c.settle(T0 + 260 * MS, vec![failed(NODE_REPORT, "a:1", "refused"), gone]);
    assert_eq!((c.down(), c.nodes().count()), (None, 1), "a node that left the map is forgotten");
    // What its calls still bring back later does not make it failing again.
    let Need::Claim(late) = c.need(T0 + 260 * MS, id(), &limit, Some("late"), 1) else { panic!() };
    c.settle(T0 + 300 * MS, vec![failed(late, "a:1", "timed out")]);
    assert_eq!(c.down(), None, "only reports tell a node's health");
}

#[test]
fn a_charge_claims_what_the_hand_lacks_and_only_a_charge_spends_what_that_claim_brought() {
    let limit = fixed(10);
    let (mut c, claim) = claiming(&limit);
    c.settle(T0, vec![grant(claim, 2, 500, 8, 0)]);
    // The hand holds 2: a charge of 5 claims the 3 it lacks, by force.
    let Need::Claim(forced) = c.need_charge(T0, id(), &limit, None, 5) else { panic!("a short hand must claim") };
    let sent = c.take_outbox();
    assert_eq!((sent.len(), sent[0].want, sent[0].force), (1, 3, true), "{sent:?}");
    let debt = Claimed {
        id: forced,
        node: "10.0.0.1:7000".into(),
        grant: Ok(Grant { got: 3, valid_us: 500_000, left: 0, retry_us: 900_000, debt: 0 }),
    };
    c.settle(T0 + MS, vec![debt]);
    assert!(c.take(T0 + MS, id(), &limit, None, 2, false).go, "an ask spends the hand's own 2");
    assert!(!c.take(T0 + MS, id(), &limit, None, 1, false).go, "but not what the charge's claim brought");
    assert!(c.charge(T0 + MS, id(), &limit, None, 4).is_none(), "3 on hand for charges: a charge of 4 takes nothing");
    let charged = c.charge(T0 + MS, id(), &limit, None, 3).expect("the charge's own 3");
    assert_eq!((charged.verdict.go, charged.verdict.granted, charged.debt), (true, 3, 0));
    assert_eq!(c.need_charge(T0 + MS, id(), &limit, None, 0), Need::Ready, "nothing to claim for nothing");
}
