//! The whole request path without sockets: bytes into `service::step::request`,
//! bytes out, at literal instants, for each kind of limit.

use locker::core::{Algorithm, Limit, Locker, Quota, DEFAULT_LIMIT};
use locker::service::Service;
use locker::wire::{self, Ask, GoReply, LeaseAsk, LeaseReply, Reply, RequestMap, StatsReply, WireError};

use crate::support::turn;

const SLOT: u64 = 800_000_000; // 0.8 s
const T0: u64 = 10 * SLOT; // the start of slot 10

fn service(max_keys: usize) -> Service {
    let default = Limit::new(DEFAULT_LIMIT, Quota::new(5, 0.8).unwrap()).unwrap();
    let api = Limit::new("api", Quota::new(2, 1.0).unwrap()).unwrap();
    Service::new(Locker::new(default, vec![api], max_keys))
}

fn respond(s: &mut Service, now: u64, body: &[u8]) -> Vec<u8> {
    let mut out = vec![0xaa; 3]; // the step must clear what was there
    let _ = locker::service::step::request(s, now, 0, body, &mut (), &mut (), &mut out);
    out
}

fn ask(s: &mut Service, now: u64, a: Ask) -> Result<GoReply, String> {
    let mut body = Vec::new();
    wire::encode(&a.to_map(), &mut body);
    match wire::decode_reply(&respond(s, now, &body)).expect("a decodable reply") {
        Reply::Answer(r) => Ok(r),
        Reply::Refused(e) => Err(e),
    }
}

#[test]
fn the_seed_form_gets_go_five_times_per_slot_then_sorry() {
    let mut s = service(10);
    let replies: Vec<Vec<u8>> = (0..7).map(|i| respond(&mut s, T0 + i, b"let me go")).collect();
    assert_eq!(replies[..5], vec![b"go".to_vec(); 5][..]);
    assert_eq!(replies[5..], vec![b"sorry".to_vec(); 2][..]);
    assert_eq!(respond(&mut s, T0 + SLOT, b"let me go"), b"go", "the next slot frees the count");
}

#[test]
fn a_plain_body_naming_a_limit_uses_that_limit() {
    let mut s = service(10);
    assert_eq!(respond(&mut s, 0, b"api"), b"go");
    assert_eq!(respond(&mut s, 0, b"api"), b"go");
    assert_eq!(respond(&mut s, 0, b"api"), b"sorry");
    assert_eq!(respond(&mut s, 0, b""), b"go", "the empty body asks the default limit");
}

#[test]
fn structured_replies_carry_the_numbers_a_caller_plans_with() {
    let mut s = service(10);
    let now = T0 + 100_000_000;
    let first = ask(&mut s, now, Ask::new()).unwrap();
    assert_eq!(
        first,
        GoReply {
            ok: true,
            limit: 5,
            remaining: 4,
            retry_after_ms: 0,
            reset_after_ms: 700,
            granted: None,
            wait_ms: None,
            shadow_sorry: false
        }
    );
    let big = ask(&mut s, now, Ask::new().cost(4)).unwrap();
    assert_eq!((big.ok, big.remaining), (true, 0));
    let sorry = ask(&mut s, now + 1, Ask::new()).unwrap();
    assert!(!sorry.ok);
    assert_eq!(sorry.retry_after_ms, 700, "699.999999 ms rounds up");
}

#[test]
fn keys_have_their_own_counts_and_max_keys_is_an_error_reply() {
    let mut s = service(1);
    assert!(ask(&mut s, 0, Ask::new().limit("api").key("a")).unwrap().ok);
    let e = ask(&mut s, 0, Ask::new().limit("api").key("b")).unwrap_err();
    assert!(e.contains("too many live keys"), "{e}");
    assert!(ask(&mut s, 0, Ask::new().limit("api")).unwrap().ok, "unkeyed asks still served");
}

#[test]
fn bad_asks_get_error_replies_naming_the_problem() {
    let mut s = service(10);
    for (a, want) in [
        (Ask::new().limit("nope"), "unknown limit \"nope\""),
        (Ask::new().max_wait_ms(3_600_001), "max_wait_ms 3600001 is above the most a request may wait, 3600000"),
        (Ask::new().cost(6), "cost 6 is above the limit's capacity 5"),
    ] {
        assert_eq!(ask(&mut s, 0, a).unwrap_err(), want);
    }
}

#[test]
fn bytes_after_the_request_map_are_an_error_whole_or_not() {
    // Issue 11: a reserved marker (0xc1) or a value cut short (0xb1) after
    // the map was answered go.
    let mut s = service(10);
    let mut go = Vec::new();
    wire::encode(&Ask::new().to_map(), &mut go);
    for tail in [&b"\xc1"[..], b"\xb1", b"\xb1abc", b"\x92\x01", b"\xcd\x01", b"\xc0", b"\x01"] {
        let body = [&go[..], tail].concat();
        let Ok(Reply::Refused(why)) = wire::decode_reply::<GoReply>(&respond(&mut s, T0, &body)) else {
            panic!("{tail:?} after the map was not refused")
        };
        assert!(why.contains("trailing bytes"), "{tail:?}: {why}");
    }
    assert_eq!(ask(&mut s, T0, Ask::new()).map(|r| r.remaining), Ok(4), "only the whole map took a permit");
}

#[test]
fn every_input_gets_exactly_one_reply() {
    let mut s = service(10);
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    for len in 0..2000usize {
        let body: Vec<u8> = (0..len % 97)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                seed as u8
            })
            .collect();
        let reply = respond(&mut s, T0, &body);
        let plain = reply == b"go" || reply == b"sorry";
        let structured = wire::decode_reply::<GoReply>(&reply).is_ok();
        assert!(plain || structured, "no usable reply to {body:?}: {reply:?}");
    }
    assert_eq!(respond(&mut s, T0 + SLOT, b"let me go"), b"go", "still serving");
}

#[test]
fn stats_count_requests_go_sorry_and_errors_per_limit() {
    let mut s = service(10);
    for _ in 0..3 {
        respond(&mut s, 0, b"api");
    }
    ask(&mut s, 0, Ask::new().limit("api").cost(9)).unwrap_err();
    ask(&mut s, 0, Ask::new().limit("missing")).unwrap_err();
    let mut out = Vec::new();
    locker::service::step::refuse(&mut s, 0, WireError::MultiPart(2), &mut (), &mut out);
    let mut body = Vec::new();
    wire::encode(&RequestMap { op: Some("stats"), ..RequestMap::default() }, &mut body);
    let Reply::Answer(stats) = wire::decode_reply::<StatsReply>(&respond(&mut s, 0, &body)).unwrap() else {
        panic!("stats refused")
    };
    let api = stats.limits.iter().find(|l| l.name == "api").unwrap();
    assert_eq!((api.requests, api.go, api.sorry, api.errors), (4, 2, 1, 1));
    assert_eq!(stats.errors, 2, "the unknown limit and the multi-part message");
    assert_eq!(stats.limits[0].name, DEFAULT_LIMIT);
}

const MS: u64 = 1_000_000;

/// A fixed window, a token bucket and a semaphore.
fn three_kinds() -> Service {
    let q = |max, secs| Quota::new(max, secs).unwrap();
    let limits = vec![
        Limit::new("api", q(2, 1.0)).unwrap(),
        Limit::with_algorithm("smooth", q(10, 1.0), Algorithm::token_bucket(2).unwrap()).unwrap(),
        Limit::with_algorithm("db", q(1, 0.1), Algorithm::Semaphore).unwrap(),
    ];
    Service::new(Locker::new(Limit::new(DEFAULT_LIMIT, q(1, 1.0)).unwrap(), limits, 100))
}

fn send<T: serde::de::DeserializeOwned>(s: &mut Service, now: u64, map: &RequestMap) -> Reply<T> {
    let mut body = Vec::new();
    wire::encode(map, &mut body);
    let mut out = Vec::new();
    let _ = locker::service::step::request(s, now, 0, &body, &mut (), &mut (), &mut out);
    wire::decode_reply(&out).unwrap()
}

fn go(s: &mut Service, now: u64, ask: Ask) -> GoReply {
    match send(s, now, &ask.to_map()) {
        Reply::Answer(r) => r,
        Reply::Refused(why) => panic!("refused: {why}"),
    }
}

fn lease(s: &mut Service, now: u64, map: &RequestMap) -> Reply<LeaseReply> {
    send(s, now, map)
}

#[test]
fn a_reservation_answers_ok_with_wait_ms_and_fields_appear_only_when_asked() {
    let mut s = three_kinds();
    let t = 5_000 * MS + 400 * MS;
    let plain = go(&mut s, t, Ask::new().limit("api").cost(2));
    assert_eq!((plain.granted, plain.wait_ms), (None, None));
    let waited = go(&mut s, t, Ask::new().limit("api").max_wait_ms(1_000));
    assert!(waited.ok);
    assert_eq!(waited.wait_ms, Some(600));
    let too_far = go(&mut s, t, Ask::new().limit("api").cost(2).max_wait_ms(1_000));
    assert!(!too_far.ok);
    assert_eq!(too_far.retry_after_ms, 1_600, "slot 6 holds the reservation; slot 7 has room");
    let batch = go(&mut s, t, Ask::new().limit("smooth").cost(5).up_to());
    assert_eq!((batch.ok, batch.granted), (true, Some(2)));
    let spaced = go(&mut s, t, Ask::new().limit("smooth").max_wait_ms(500));
    assert_eq!(spaced.wait_ms, Some(100));
}

#[test]
fn leases_expire_on_the_deadline_the_loop_is_given() {
    let mut s = three_kinds();
    let acquire = LeaseAsk::new("db", 1).ttl_ms(50).to_map();
    let Reply::Answer(held) = lease(&mut s, 0, &acquire) else { panic!("refused") };
    assert!(held.ok);
    assert_eq!(held.expires_in_ms, 50);
    let waiting = LeaseAsk::new("db", 1).ttl_ms(50).max_wait_ms(1_000).to_map();
    let Reply::Answer(pending) = lease(&mut s, 10 * MS, &waiting) else { panic!("refused") };
    assert!(!pending.ok && pending.pending);
    assert_eq!(crate::support::deadline(&s), Some(50 * MS));
    turn(&mut s, 50 * MS);
    let id = pending.lease.unwrap();
    let poll = RequestMap { op: Some("heartbeat"), limit: Some("db"), lease: Some(&id), ..RequestMap::default() };
    let Reply::Answer(now_held) = lease(&mut s, 60 * MS, &poll) else { panic!("refused") };
    assert!(now_held.ok, "the waiter got the count when the first lease expired");
    let release = RequestMap { op: Some("release"), limit: Some("db"), lease: Some(&id), ..RequestMap::default() };
    let Reply::Answer(freed) = lease(&mut s, 70 * MS, &release) else { panic!("refused") };
    assert!(freed.ok);
    assert_eq!((freed.remaining, crate::support::deadline(&s)), (1, None));
}

#[test]
fn kinds_refuse_the_wrong_ops_with_a_reason() {
    let mut s = three_kinds();
    let Reply::Refused(why) = send::<GoReply>(&mut s, 0, &Ask::new().limit("db").to_map()) else {
        panic!("a go on a semaphore must be refused")
    };
    assert!(why.contains("semaphore"), "{why}");
    let Reply::Refused(why) = lease(&mut s, 0, &LeaseAsk::new("api", 1).to_map()) else { panic!("accepted") };
    assert!(why.contains("not a semaphore"), "{why}");
    let no_lease = RequestMap { op: Some("heartbeat"), limit: Some("db"), ..RequestMap::default() };
    let Reply::Refused(why) = lease(&mut s, 0, &no_lease) else { panic!("accepted") };
    assert!(why.contains("needs a lease"), "{why}");
    let mut out = Vec::new();
    let _ = locker::service::step::request(&mut s, 0, 0, b"db", &mut (), &mut (), &mut out);
    assert_eq!(out, wire::SORRY, "the plain form cannot hold a lease");
}

#[test]
fn plain_bodies_keep_selecting_their_own_limits() {
    let limit = |name, max| Limit::new(name, Quota::new(max, 1.0).unwrap()).unwrap();
    let mut service = Service::new(Locker::new(limit(DEFAULT_LIMIT, 2), vec![limit("api", 1)], 10));
    let mut out = Vec::new();
    // Longer than the plain bodies the service remembers (64 bytes).
    let long = vec![b'x'; 65];
    let mut ask = |body: &[u8]| {
        let _ = locker::service::step::request(&mut service, 0, 0, body, &mut (), &mut (), &mut out);
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

/// The loop may wake late (poll timeouts round up to whole milliseconds, a
/// batch keeps it busy): a waiter still gets what a lease freed while it
/// waited. Capacity 1; A holds until 10 ms, B waits until 10.5 ms, and the
/// loop first runs again at 10.6 ms.
#[test]
fn a_late_wake_up_still_hands_an_expired_lease_to_its_waiter() {
    let mut s = three_kinds();
    let Reply::Answer(a) = lease(&mut s, 0, &LeaseAsk::new("db", 1).ttl_ms(10).to_map()) else { panic!("refused") };
    assert!(a.ok);
    let waiting = LeaseAsk::new("db", 1).ttl_ms(10).max_wait_ms(10).to_map();
    let Reply::Answer(b) = lease(&mut s, MS / 2, &waiting) else { panic!("refused") };
    assert!(!b.ok && b.pending);
    let late = 10 * MS + 6 * MS / 10;
    turn(&mut s, late);
    let id = b.lease.unwrap();
    let poll = RequestMap { op: Some("heartbeat"), limit: Some("db"), lease: Some(&id), ..RequestMap::default() };
    let Reply::Answer(held) = lease(&mut s, late, &poll) else { panic!("refused") };
    assert!(held.ok, "b was granted a's count at 10 ms, before its wait ended: {held:?}");
}
