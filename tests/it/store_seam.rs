//! A locker on a store, on the service seam with literal instants and the
//! store's answers written by hand: what is asked of the store, when an
//! ask waits for it and when it is answered from the hand, the failure
//! policy (for the keys of the failing node only), and lease requests that
//! go to the store and come back.

use locker::core::claims::{Claimed, Grant, NODE_REPORT};
use locker::core::store_lease::{LeaseAnswer, LeaseOp, StoreLease, StoreLeaseState};
use locker::core::{Algorithm, Limit, Locker, Nanos, Quota, DEFAULT_LIMIT};
use locker::service::{step, Answer, Service};
use locker::wire::{self, Ask, GoReply, LeaseAsk, LeaseReply, Reply, RequestMap};

use crate::support::{finals, ready, seam_stats, serve, store_calls};

const MS: Nanos = 1_000_000;
const T0: Nanos = 2_000_000_000_000 * MS;

/// The default limit (100 per second, failing closed), "open" (100 per
/// second, failing open) and the semaphore "db" of 3, on a store.
fn on_store() -> Service {
    let q = |n, s| Quota::new(n, s).unwrap();
    let limits = vec![
        Limit::new("open", q(100, 1.0)).unwrap().with_fail_open(true),
        Limit::with_algorithm("db", q(3, 1.0), Algorithm::Semaphore).unwrap(),
    ];
    Service::new(Locker::new(Limit::new(DEFAULT_LIMIT, q(100, 1.0)).unwrap(), limits, 100)).with_store()
}

fn body(map: &RequestMap) -> Vec<u8> {
    let mut body = Vec::new();
    wire::encode(map, &mut body);
    body
}

fn grant(got: u32, left: u32) -> Result<Grant, String> {
    Ok(Grant { got, valid_us: 1_000_000, left, retry_us: 0, debt: 0 })
}

#[test]
fn an_ask_waits_for_its_claim_and_the_asks_after_it_go_from_the_hand_without_the_store() {
    let mut s = on_store();
    assert_eq!(serve(&mut s, T0, 1, b"let me go").0, Answer::Held, "nothing on hand: the ask waits");
    assert_eq!(serve(&mut s, T0, 2, b"let me go").0, Answer::Held, "the second waits for the same claim");
    let claims = store_calls(&mut s, T0).claims;
    assert_eq!(claims.len(), 1, "one claim for both: {claims:?}");
    assert!(claims[0].want >= 2, "the unsent claim grew to cover both asks: {claims:?}");
    assert!(ready(&mut s, T0).is_empty(), "nothing is answered before the store answers");
    step::store_answers(
        &mut s,
        T0 + MS,
        vec![Claimed { id: claims[0].id, node: "n:1".into(), grant: grant(10, 90) }],
        Vec::new(),
    );
    assert_eq!(ready(&mut s, T0 + MS), [(1, b"go".to_vec()), (2, b"go".to_vec())], "in arrival order");
    for token in 3..8 {
        assert_eq!(serve(&mut s, T0 + 2 * MS, token, b"let me go"), (Answer::Now, b"go".to_vec()));
    }
    let ahead = store_calls(&mut s, T0).claims;
    assert_eq!(ahead.len(), 1, "a hand running low claims its next chunk while it still answers: {ahead:?}");
    let stats = s.locker().figures().stats().next().unwrap().1;
    assert_eq!((stats.requests, stats.go), (7, 7));
}

#[test]
fn when_the_store_fails_a_limit_that_fails_closed_says_sorry_and_one_that_fails_open_decides_alone() {
    let mut s = on_store();
    let open = body(&Ask::new().limit("open").to_map());
    assert_eq!(serve(&mut s, T0, 1, b"let me go").0, Answer::Held);
    assert_eq!(serve(&mut s, T0, 2, &open).0, Answer::Held);
    let failed = store_calls(&mut s, T0).claims.into_iter().map(|c| Claimed {
        id: c.id,
        node: "n:1".into(),
        grant: Err("the store failed".into()),
    });
    step::store_answers(&mut s, T0 + MS, failed.collect(), Vec::new());
    let answers = ready(&mut s, T0 + MS);
    assert_eq!(answers[0], (1, b"sorry".to_vec()), "closed: sorry");
    let Ok(Reply::Answer(r)) = wire::decode_reply::<GoReply>(&answers[1].1) else { panic!("{answers:?}") };
    assert!(r.ok, "open: go from this locker's own counts: {r:?}");
    assert_eq!(serve(&mut s, T0 + 2 * MS, 3, b"let me go"), (Answer::Now, b"sorry".to_vec()), "no claim while down");
    assert!(store_calls(&mut s, T0).claims.is_empty(), "the store is left alone a while after it failed");
}

fn lease_reply(out: &[u8]) -> Result<LeaseReply, String> {
    match wire::decode_reply::<LeaseReply>(out).unwrap() {
        Reply::Answer(r) => Ok(r),
        Reply::Refused(why) => Err(why),
    }
}

#[test]
fn a_lease_request_goes_to_the_store_and_its_reply_is_the_stores_answer_on_the_lockers_clock() {
    let mut s = on_store();
    let acquire = body(&LeaseAsk::new("db", 2).ttl_ms(500).to_map());
    assert_eq!(serve(&mut s, T0, 1, &acquire).0, Answer::Held, "a lease waits for the store");
    let calls = store_calls(&mut s, T0).leases;
    assert_eq!(calls.len(), 1);
    assert_eq!((&*calls[0].name, calls[0].capacity), ("db", 3));
    let LeaseOp::Acquire(hold) = calls[0].op else { panic!("{calls:?}") };
    assert_eq!((hold.count, hold.ttl), (2, 500 * MS), "checked and converted by the locker");
    let held = StoreLease { state: StoreLeaseState::Held, left_us: 500_000, capacity: 3, free: 1 };
    step::store_answers(&mut s, T0 + 2 * MS, Vec::new(), vec![LeaseAnswer { id: calls[0].id, result: Ok(held) }]);
    let answered = ready(&mut s, T0 + 2 * MS);
    assert_eq!(answered.len(), 1);
    let reply = lease_reply(&answered[0].1).unwrap();
    assert!(reply.ok && reply.lease.as_deref() == Some(&*calls[0].lease), "{reply:?}");
    assert_eq!((reply.remaining, reply.expires_in_ms), (1, 500));

    let too_many = body(&LeaseAsk::new("db", 4).to_map());
    let (answer, out) = serve(&mut s, T0 + 3 * MS, 2, &too_many);
    assert_eq!(answer, Answer::Now, "a bad count never reaches the store");
    assert!(lease_reply(&out).unwrap_err().contains("count 4"), "{:?}", lease_reply(&out));
    assert!(store_calls(&mut s, T0).leases.is_empty());

    let again = body(&LeaseAsk::new("db", 1).to_map());
    assert_eq!(serve(&mut s, T0 + 4 * MS, 3, &again).0, Answer::Held);
    let call = store_calls(&mut s, T0).leases.remove(0);
    step::store_answers(
        &mut s,
        T0 + 5 * MS,
        Vec::new(),
        vec![LeaseAnswer { id: call.id, result: Err("the store failed: gone".into()) }],
    );
    let failed = ready(&mut s, T0 + 5 * MS);
    assert_eq!(lease_reply(&failed[0].1), Err("the store failed: gone".into()), "an error, never a lease");

    assert_eq!(serve(&mut s, T0 + 6 * MS, 4, &again).0, Answer::Held);
    let finals = finals(&mut s, T0 + 7 * MS);
    assert_eq!(finals.len(), 1);
    assert_eq!(finals[0].0, 4, "at a stop, a lease request is answered");
    assert!(lease_reply(&finals[0].1).unwrap_err().contains("stopped before the store answered"));
    let db = s.locker().figures().stats().nth(2).unwrap().1;
    assert_eq!((db.requests, db.go, db.errors), (4, 1, 3), "each lease request counted once, when answered");
}

fn go(out: &[u8]) -> bool {
    let Ok(Reply::Answer(r)) = wire::decode_reply::<GoReply>(out) else { panic!("{out:?}") };
    r.ok
}

// Issue 36 (4): one failing node made every key follow the failure policy.
#[test]
fn when_one_node_fails_only_the_keys_it_answered_for_follow_the_failure_policy() {
    let mut s = on_store();
    let ask = |key| body(&Ask::new().limit("open").key(key).to_map());
    assert_eq!(serve(&mut s, T0, 1, &ask("on-sick")).0, Answer::Held);
    assert_eq!(serve(&mut s, T0, 2, &ask("on-well")).0, Answer::Held);
    let claims = store_calls(&mut s, T0).claims;
    let id = |key: &str| claims.iter().find(|c| &*c.key == key).unwrap().id;
    let spent = Grant { got: 1, valid_us: 1_000_000, left: 0, retry_us: 1_000_000, debt: 0 };
    step::store_answers(
        &mut s,
        T0 + MS,
        vec![
            Claimed { id: id("on-sick"), node: "10.0.0.1:7000".into(), grant: Err("no answer within 200 ms".into()) },
            Claimed { id: id("on-well"), node: "10.0.0.2:7000".into(), grant: Ok(spent) },
            // The store's report of the node's failure, which comes with it.
            Claimed { id: NODE_REPORT, node: "10.0.0.1:7000".into(), grant: Err("no answer within 200 ms".into()) },
        ],
        Vec::new(),
    );
    let answered = ready(&mut s, T0 + MS);
    assert!(answered.iter().all(|(_, out)| go(out)), "alone, and from the one permit claimed: {answered:?}");
    // The healthy node said the key is spent: it holds, while the sick
    // node's key is decided by this locker alone (the limit fails open).
    let (now, well) = serve(&mut s, T0 + 2 * MS, 3, &ask("on-well"));
    assert!(now == Answer::Now && !go(&well), "the healthy node's count still holds");
    let (now, sick) = serve(&mut s, T0 + 2 * MS, 4, &ask("on-sick"));
    assert!(now == Answer::Now && go(&sick), "the sick node's key fails open");
    let down = seam_stats(&mut s, T0 + 2 * MS).store.unwrap().down;
    assert_eq!(down.as_deref(), Some("10.0.0.1:7000: no answer within 200 ms"), "stats name the node");
}
