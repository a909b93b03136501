//! The whole request path without sockets: bytes into `Service::respond`,
//! bytes out, at literal instants.

use locker::core::{Limit, Locker, Quota, DEFAULT_LIMIT};
use locker::service::Service;
use locker::wire::{self, Ask, GoReply, Reply, RequestMap, StatsReply, WireError};

const SLOT: u64 = 800_000_000; // 0.8 s
const T0: u64 = 10 * SLOT; // the start of slot 10

fn service(max_keys: usize) -> Service {
    let default = Limit::new(DEFAULT_LIMIT, Quota::new(5, 0.8).unwrap()).unwrap();
    let api = Limit::new("api", Quota::new(2, 1.0).unwrap()).unwrap();
    Service::new(Locker::new(default, vec![api], max_keys))
}

fn respond(s: &mut Service, now: u64, body: &[u8]) -> Vec<u8> {
    let mut out = vec![0xaa; 3]; // respond must clear what was there
    s.respond(now, body, &mut out);
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
            wait_ms: None
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
    s.reject(WireError::MultiPart(2), &mut out);
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
