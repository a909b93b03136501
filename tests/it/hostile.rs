//! Hostile input. On the service seam: malformed structured requests each
//! get an error map naming the problem, and serving goes on. On a real
//! socket, what only a socket carries: empty, multi-part and random
//! messages on one REQ socket, envelopes a REQ socket would never send,
//! messages over --max-message-size, and raw bytes that are not ZMTP; the
//! daemon keeps serving others.

use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

use locker::core::{Limit, Locker, Nanos, Quota, DEFAULT_LIMIT};
use locker::service::Service;
use locker::wire::{self, ErrorReply, Reply};

use crate::support::{req, round_trip, seam, Served};

const T0: Nanos = 1_700_000_000_000_000_000;

fn error_of(reply: &[u8]) -> String {
    match wire::decode_reply::<ErrorReply>(reply) {
        Ok(Reply::Refused(e)) => e,
        other => panic!("expected an error map, got {other:?} from {reply:?}"),
    }
}

/// Asserts the daemon still answers a well-behaved client on a fresh socket.
fn still_serving(ctx: &zmq::Context, endpoint: &str) {
    let reply = round_trip(&req(ctx, endpoint), b"let me go");
    assert!(reply == b"go" || reply == b"sorry", "{reply:?}");
}

/// The service behind the socket, as `--max-requests 1000` builds it.
fn service() -> Service {
    let default = Limit::new(DEFAULT_LIMIT, Quota::new(1000, 1.0).unwrap()).unwrap();
    Service::new(Locker::new(default, vec![], 1000))
}

#[test]
fn bad_structured_requests_get_error_maps_naming_the_problem_and_serving_goes_on() {
    let mut s = service();
    let mut deep = b"\x81\xa1x".to_vec();
    deep.extend(std::iter::repeat_n(0x91, 10_000));
    deep.push(0x00);
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (b"\x81\xa2op\xa4jump".to_vec(), "unknown op"),
        (b"\x81\xa5limit\xa4nope".to_vec(), "unknown limit"),
        (b"\x81\xa3key\x05".to_vec(), "must be a string"),
        (b"\x81\xa5up_to\xa3yes".to_vec(), "wrong type"),
        (b"\x81\xa4cost\xcd\x03\xe9".to_vec(), "above the limit's capacity"),
        (b"\x80\x00".to_vec(), "trailing bytes"),
        (b"\x81\xa2op\xa2go\xc1".to_vec(), "trailing bytes"),
        (b"\x81\xa2op\xa2go\xb1".to_vec(), "trailing bytes"),
        (b"\x81\xa2op".to_vec(), "ends in the middle"),
        (deep, "nesting deeper"),
    ];
    for (body, want) in cases {
        let e = error_of(&seam(&mut s, T0, &body));
        assert!(e.contains(want), "{body:?}: {e}");
    }
    assert_eq!(seam(&mut s, T0, b"let me go"), b"go");
    let stats = s.locker().figures().stats().next().unwrap().1;
    assert_eq!((stats.go, stats.sorry), (1, 0), "no error took a permit");
}

#[test]
fn empty_multipart_and_random_messages_never_stop_the_daemon() {
    let d = Served::start(&["--max-requests", "100000"]);
    let ctx = zmq::Context::new();
    let s = req(&ctx, &d.endpoint);
    assert_eq!(round_trip(&s, b""), b"go", "an empty message is a plain request");
    s.send_multipart([&b"a"[..], b"b", b"c"], 0).unwrap();
    let e = error_of(&s.recv_bytes(0).expect("a reply to a multi-part message"));
    assert!(e.contains("3"), "{e}");
    let mut x = 0x9e37_79b9_7f4a_7c15_u64;
    for len in 0..300usize {
        let body: Vec<u8> = (0..len)
            .map(|_| {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                (x >> 56) as u8
            })
            .collect();
        assert!(!round_trip(&s, &body).is_empty(), "no reply to {body:?}");
    }
    still_serving(&ctx, &d.endpoint);
}

#[test]
fn envelopes_without_a_delimiter_or_a_body_are_dropped_and_longer_ones_go_back_whole() {
    let d = Served::start(&["--max-requests", "100000"]);
    let ctx = zmq::Context::new();
    let s = ctx.socket(zmq::DEALER).unwrap();
    s.set_linger(0).unwrap();
    s.set_rcvtimeo(crate::support::DEADLINE.as_millis() as i32).unwrap();
    s.connect(&d.endpoint).unwrap();
    // No delimiter; a delimiter and no body; frames and no empty one: a
    // REP socket drops each, and so does the locker, answering nothing.
    s.send(&b"let me go"[..], 0).unwrap();
    s.send(&b""[..], 0).unwrap();
    s.send_multipart([&b"a"[..], b"let me go"], 0).unwrap();
    // A routing frame before the delimiter, as through a proxy, comes back
    // before the reply; then a REQ socket's own shape.
    s.send_multipart([&b"hop"[..], b"", b"let me go"], 0).unwrap();
    s.send_multipart([&b""[..], b"let me go"], 0).unwrap();
    let first = s.recv_multipart(0).expect("a reply to the request through a hop");
    assert_eq!(first, [b"hop".to_vec(), Vec::new(), b"go".to_vec()], "no reply to a dropped message came first");
    let second = s.recv_multipart(0).expect("a reply to the plain request");
    assert_eq!(second, [Vec::new(), b"go".to_vec()]);
    still_serving(&ctx, &d.endpoint);
}

#[test]
fn oversized_messages_and_raw_garbage_only_hurt_their_sender() {
    let d = Served::start(&["--max-message-size", "1024", "--max-requests", "1000"]);
    let ctx = zmq::Context::new();
    let big = req(&ctx, &d.endpoint);
    big.set_rcvtimeo(300).unwrap();
    big.send(vec![b'x'; 4096], 0).unwrap();
    assert!(big.recv_bytes(0).is_err(), "a message over the cap is dropped, not answered");
    // Bytes that are not ZMTP at all, straight onto the TCP port.
    let addr = d.endpoint.trim_start_matches("tcp://");
    let mut raw = TcpStream::connect_timeout(&addr.parse().unwrap(), Duration::from_secs(5)).unwrap();
    let _ = raw.write_all(&[0xff; 512]);
    still_serving(&ctx, &d.endpoint);
    let s = req(&ctx, &d.endpoint);
    assert_eq!(round_trip(&s, &[b'y'; 1000]), b"go", "a message under the cap is served");
}
