//! Structured requests and named limits from a config file, on the service
//! seam: the file's text and the flags resolved as `locker serve` resolves
//! them, then both request forms at exact instants; keys, their cap, and
//! the error replies and counters a client reads.
//!
//! What this does not test: reading the file from disk (`edges`,
//! `operations`) and the client library's socket (`failover`).

use locker::config::{FileConfig, Flags, ServeConfig};
use locker::core::{Locker, Nanos};
use locker::service::Service;
use locker::wire::Ask;

use crate::support::{seam, seam_ask, seam_stats};

const MS: Nanos = 1_000_000;
/// An instant on a 60 s boundary.
const T0: Nanos = 28_000_000 * 60_000 * MS;

/// A service as `locker serve` builds it from a config file's `text` and
/// the command line's `flags`.
fn served(text: &str, flags: Flags) -> Service {
    let file = FileConfig::parse(text).expect("a valid config");
    let config = ServeConfig::resolve(flags, file).expect("valid settings");
    Service::new(Locker::new(config.default, config.limits, config.max_keys))
}

#[test]
fn named_limits_from_a_file_serve_both_forms() {
    let text = "[[limits]]\nname = 'api'\nmax_requests = 2\nin_seconds = 60\n";
    let mut s = served(text, Flags { max_requests: Some(100), ..Flags::default() });
    let t = T0 + 12_345 * MS;
    assert_eq!(seam(&mut s, t, b"api"), b"go");
    let r = seam_ask(&mut s, t, &Ask::new().limit("api")).unwrap();
    assert_eq!((r.ok, r.limit, r.remaining, r.reset_after_ms), (true, 2, 0, 60_000 - 12_345));
    assert_eq!(seam(&mut s, t, b"api"), b"sorry");
    assert_eq!(seam(&mut s, t, b"let me go"), b"go", "the default limit is separate");
    let default = seam_ask(&mut s, t, &Ask::new()).unwrap();
    assert_eq!((default.limit, default.remaining), (100, 98), "the flag's max_requests for the default");
}

#[test]
fn keys_have_their_own_counts_within_max_keys_and_errors_are_counted() {
    let flags = Flags { max_requests: Some(1), in_seconds: Some(60.0), max_keys: Some(2), ..Flags::default() };
    let mut s = served("", flags);
    let t = T0 + 5 * MS;
    assert!(seam_ask(&mut s, t, &Ask::new().key("a")).unwrap().ok);
    let again = seam_ask(&mut s, t, &Ask::new().key("a")).unwrap();
    assert_eq!((again.ok, again.retry_after_ms), (false, 59_995));
    assert!(seam_ask(&mut s, t, &Ask::new().key("b")).unwrap().ok);
    let full = seam_ask(&mut s, t, &Ask::new().key("c")).unwrap_err();
    assert!(full.contains("too many live keys"), "{full}");
    assert_eq!(seam_ask(&mut s, t, &Ask::new().limit("nope")).unwrap_err(), "unknown limit \"nope\"");
    assert_eq!(seam(&mut s, t, b"let me go"), b"go", "unkeyed asks have their own count");
    assert_eq!(seam(&mut s, t, b"let me go"), b"sorry");
    let stats = seam_stats(&mut s, t);
    assert_eq!(stats.live_keys, 2);
    let default = &stats.limits[0];
    assert_eq!((default.requests, default.go, default.sorry, default.errors), (6, 3, 2, 1));
    assert_eq!(stats.errors, 1, "the unknown limit");
}
