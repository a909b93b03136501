use std::time::Duration;

use locker::wire::{self, Ask, GoReply, Reply};
use locker::{Client, ClientError};

use crate::support::{req, round_trip, Daemon, TempFile};

#[test]
fn named_limits_from_a_file_serve_both_forms() {
    let file = TempFile::new("named-limits", "[[limits]]\nname = 'api'\nmax_requests = 2\nin_seconds = 60\n");
    let d = Daemon::start(&["--config", file.path(), "--max-requests", "100"]);
    let ctx = zmq::Context::new();
    let s = req(&ctx, &d.endpoint);
    assert_eq!(round_trip(&s, b"api"), b"go");
    let mut body = Vec::new();
    wire::encode(&Ask::new().limit("api").to_map(), &mut body);
    let reply: Reply<GoReply> = wire::decode_reply(&round_trip(&s, &body)).unwrap();
    let Reply::Answer(r) = reply else { panic!("refused: {reply:?}") };
    assert_eq!((r.ok, r.limit, r.remaining), (true, 2, 0));
    assert_eq!(round_trip(&s, b"api"), b"sorry");
    assert!(r.reset_after_ms <= 60_000 && r.reset_after_ms > 0);
    assert_eq!(round_trip(&s, b"let me go"), b"go", "the default limit is separate");
}

#[test]
fn the_client_library_asks_keys_and_reads_errors() {
    let d = Daemon::start(&["--max-requests", "1", "--in-seconds", "60", "--max-keys", "2"]);
    let mut c = Client::new([d.endpoint.as_str()], Duration::from_secs(5)).unwrap();
    assert!(c.ask(&Ask::new().key("a")).unwrap().ok);
    let again = c.ask(&Ask::new().key("a")).unwrap();
    assert!(!again.ok && again.retry_after_ms > 0);
    assert!(c.ask(&Ask::new().key("b")).unwrap().ok);
    match c.ask(&Ask::new().key("c")) {
        Err(ClientError::Refused(e)) => assert!(e.contains("too many live keys"), "{e}"),
        other => panic!("expected a refusal, got {other:?}"),
    }
    match c.ask(&Ask::new().limit("nope")) {
        Err(ClientError::Refused(e)) => assert_eq!(e, "unknown limit \"nope\""),
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert!(c.plain(b"let me go").unwrap(), "unkeyed asks have their own count");
    assert!(!c.plain(b"let me go").unwrap());
    let stats = c.stats().unwrap();
    assert_eq!(stats.live_keys, 2);
    let default = &stats.limits[0];
    assert_eq!((default.requests, default.go, default.sorry, default.errors), (6, 3, 2, 1));
    assert_eq!(stats.errors, 1, "the unknown limit");
}
