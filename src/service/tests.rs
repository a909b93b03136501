//! Protocol tests on the seam: request bytes in, reply bytes out, with
//! literal instants, for each kind of limit.

use super::*;
use crate::core::{Algorithm, Limit, Quota, DEFAULT_LIMIT};
use crate::wire::{LeaseAsk, LeaseReply, Reply, RequestMap};

const MS: Nanos = 1_000_000;

fn service() -> Service {
    let q = |max, secs| Quota::new(max, secs).unwrap();
    let limits = vec![
        Limit::new("api", q(2, 1.0)).unwrap(),
        Limit::with_algorithm("smooth", q(10, 1.0), Algorithm::token_bucket(2).unwrap()).unwrap(),
        Limit::with_algorithm("db", q(1, 0.1), Algorithm::Semaphore).unwrap(),
    ];
    Service::new(Locker::new(Limit::new(DEFAULT_LIMIT, q(1, 1.0)).unwrap(), limits, 100))
}

fn send<T: serde::de::DeserializeOwned>(s: &mut Service, now: Nanos, map: &RequestMap) -> Reply<T> {
    let mut body = Vec::new();
    wire::encode(map, &mut body);
    let mut out = Vec::new();
    s.respond(now, &body, &mut out);
    wire::decode_reply(&out).unwrap()
}

fn go(s: &mut Service, now: Nanos, ask: wire::Ask) -> GoReply {
    match send(s, now, &ask.to_map()) {
        Reply::Answer(r) => r,
        Reply::Refused(why) => panic!("refused: {why}"),
    }
}

fn lease(s: &mut Service, now: Nanos, map: &RequestMap) -> Reply<LeaseReply> {
    send(s, now, map)
}

#[test]
fn a_reservation_answers_ok_with_wait_ms_and_fields_appear_only_when_asked() {
    let mut s = service();
    let t = 5_000 * MS + 400 * MS;
    let plain = go(&mut s, t, wire::Ask::new().limit("api").cost(2));
    assert_eq!((plain.granted, plain.wait_ms), (None, None));
    let waited = go(&mut s, t, wire::Ask::new().limit("api").max_wait_ms(1_000));
    assert!(waited.ok);
    assert_eq!(waited.wait_ms, Some(600));
    let too_far = go(&mut s, t, wire::Ask::new().limit("api").cost(2).max_wait_ms(1_000));
    assert!(!too_far.ok);
    assert_eq!(too_far.retry_after_ms, 1_600, "slot 6 holds the reservation; slot 7 has room");
    let batch = go(&mut s, t, wire::Ask::new().limit("smooth").cost(5).up_to());
    assert_eq!((batch.ok, batch.granted), (true, Some(2)));
    let spaced = go(&mut s, t, wire::Ask::new().limit("smooth").max_wait_ms(500));
    assert_eq!(spaced.wait_ms, Some(100));
}

#[test]
fn leases_expire_on_the_deadline_the_loop_is_given() {
    let mut s = service();
    let acquire = LeaseAsk::new("db", 1).ttl_ms(50).to_map();
    let Reply::Answer(held) = lease(&mut s, 0, &acquire) else { panic!("refused") };
    assert!(held.ok);
    assert_eq!(held.expires_in_ms, 50);
    let waiting = LeaseAsk::new("db", 1).ttl_ms(50).max_wait_ms(1_000).to_map();
    let Reply::Answer(pending) = lease(&mut s, 10 * MS, &waiting) else { panic!("refused") };
    assert!(!pending.ok && pending.pending);
    assert_eq!(s.next_deadline(), Some(50 * MS));
    s.on_timeout(50 * MS);
    let id = pending.lease.unwrap();
    let poll = RequestMap { op: Some("heartbeat"), limit: Some("db"), lease: Some(&id), ..RequestMap::default() };
    let Reply::Answer(now_held) = lease(&mut s, 60 * MS, &poll) else { panic!("refused") };
    assert!(now_held.ok, "the waiter got the count when the first lease expired");
    let release = RequestMap { op: Some("release"), limit: Some("db"), lease: Some(&id), ..RequestMap::default() };
    let Reply::Answer(freed) = lease(&mut s, 70 * MS, &release) else { panic!("refused") };
    assert!(freed.ok);
    assert_eq!((freed.remaining, s.next_deadline()), (1, None));
}

#[test]
fn kinds_refuse_the_wrong_ops_with_a_reason() {
    let mut s = service();
    let Reply::Refused(why) = send::<GoReply>(&mut s, 0, &wire::Ask::new().limit("db").to_map()) else {
        panic!("a go on a semaphore must be refused")
    };
    assert!(why.contains("semaphore"), "{why}");
    let Reply::Refused(why) = lease(&mut s, 0, &LeaseAsk::new("api", 1).to_map()) else { panic!("accepted") };
    assert!(why.contains("not a semaphore"), "{why}");
    let no_lease = RequestMap { op: Some("heartbeat"), limit: Some("db"), ..RequestMap::default() };
    let Reply::Refused(why) = lease(&mut s, 0, &no_lease) else { panic!("accepted") };
    assert!(why.contains("needs a lease"), "{why}");
    let mut out = Vec::new();
    s.respond(0, b"db", &mut out);
    assert_eq!(out, wire::SORRY, "the plain form cannot hold a lease");
}

#[test]
fn plain_bodies_keep_selecting_their_own_limits() {
    let limit = |name, max| Limit::new(name, Quota::new(max, 1.0).unwrap()).unwrap();
    let mut service = Service::new(Locker::new(limit(DEFAULT_LIMIT, 2), vec![limit("api", 1)], 10));
    let mut out = Vec::new();
    let long = vec![b'x'; PLAIN_MEMO_BYTES + 1];
    let mut ask = |body: &[u8]| {
        service.respond(0, body, &mut out);
        String::from_utf8(out.clone()).unwrap()
    };
    // "api" allows 1, the default 2: each answer shows which was asked.
    assert_eq!(ask(b"api"), "go");
    assert_eq!(ask(b"let me go"), "go");
    assert_eq!(ask(b"api"), "sorry");
    assert_eq!(ask(&long), "go");
    assert_eq!(ask(b""), "sorry", "the default's count is spent");
    assert_eq!(ask(b"api"), "sorry");
}
