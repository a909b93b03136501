//! The kinds of limits, each on the service seam at exact instants: a
//! token-bucket and fixed-window reservation, a lease that expires on the
//! deadline the loop is given (no request needed), and a lease restored
//! after a restart from its heartbeat. On a real process, only what the
//! client library does with real time: `Client::acquire` sleeps a
//! reservation, and the lease guard heartbeats in the background.
//!
//! What this does not test: the same commands from a shell (`readme` runs
//! `locker ask --wait` and `locker lease ...` as the README gives them).

use std::time::{Duration, Instant};

use locker::core::{Algorithm, Limit, Locker, Nanos, Quota, DEFAULT_LIMIT};
use locker::service::Service;
use locker::wire::{Heartbeat, LeaseAsk, LeaseReply, Release};
use locker::{Ask, Client, GoReply};

use crate::support::{answer, seam, seam_ask, seam_stats, turn, Served, TempFile, DEADLINE};

const MS: Nanos = 1_000_000;
/// An instant on a 0.5 s and a 1 s boundary.
const T0: Nanos = 1_700_000_000_000 * MS;

/// The three kinds, as the real-process config below: `api` 1 per 0.5 s,
/// `smooth` a bucket of 1 refilled 5 per second, `db` a semaphore of 1.
fn three_kinds() -> Service {
    let quota = |max, secs| Quota::new(max, secs).unwrap();
    let api = Limit::new("api", quota(1, 0.5)).unwrap();
    let smooth = Limit::with_algorithm("smooth", quota(5, 1.0), Algorithm::token_bucket(1).unwrap()).unwrap();
    let db = Limit::with_algorithm("db", quota(1, 5.0), Algorithm::Semaphore).unwrap();
    Service::new(Locker::new(Limit::new(DEFAULT_LIMIT, quota(5, 1.0)).unwrap(), vec![api, smooth, db], 1000))
}

fn go(s: &mut Service, now: Nanos, ask: Ask) -> GoReply {
    seam_ask(s, now, &ask).expect("an answer")
}

fn lease(s: &mut Service, now: Nanos, request: locker::wire::RequestMap) -> Result<LeaseReply, String> {
    let mut body = Vec::new();
    locker::wire::encode(&request, &mut body);
    answer(&seam(s, now, &body))
}

#[test]
fn a_reservation_is_ok_with_the_exact_wait_and_the_next_ask_finds_it_taken() {
    let mut s = three_kinds();
    let t = T0 + 30 * MS;
    assert!(go(&mut s, t, Ask::new().limit("smooth")).ok);
    let reserved = go(&mut s, t, Ask::new().limit("smooth").max_wait_ms(1_000));
    assert_eq!((reserved.ok, reserved.wait_ms), (true, Some(200)), "one token per 200 ms");
    let sorry = go(&mut s, t, Ask::new().limit("smooth").max_wait_ms(10));
    assert_eq!((sorry.ok, sorry.retry_after_ms), (false, 400), "the token after the reserved one");
    // The fixed window: spent, so a wait of up to 1 s reserves the next slot.
    assert!(go(&mut s, t, Ask::new().limit("api")).ok);
    let next_slot = go(&mut s, t, Ask::new().limit("api").max_wait_ms(1_000));
    assert_eq!((next_slot.ok, next_slot.wait_ms), (true, Some(470)), "the slot begins at T0 + 500 ms");
    let taken = go(&mut s, t, Ask::new().limit("api"));
    assert!(!taken.ok, "the next slot is taken by the reservation: {taken:?}");
    assert_eq!(taken.retry_after_ms, 970, "the slot after the reserved one");
}

#[test]
fn an_expired_lease_frees_its_count_on_its_deadline_without_any_request() {
    let mut s = three_kinds();
    let held = lease(&mut s, T0, LeaseAsk::new("db", 1).ttl_ms(100).to_map()).unwrap();
    assert!(held.ok, "{held:?}");
    let queued = lease(&mut s, T0 + MS, LeaseAsk::new("db", 1).ttl_ms(5_000).max_wait_ms(5_000).to_map()).unwrap();
    assert!(queued.pending, "{queued:?}");
    assert_eq!(seam_stats(&mut s, T0 + MS).live_keys, 2);
    // Nothing but the loop's own wake-up at the deadline it was given can
    // expire the first lease and hand its count to the waiter.
    assert_eq!(crate::support::deadline(&s), Some(T0 + 100 * MS), "the loop wakes when the ttl ends");
    turn(&mut s, T0 + 100 * MS - 1);
    assert_eq!(seam_stats(&mut s, T0 + 100 * MS - 1).live_keys, 2, "not before");
    turn(&mut s, T0 + 100 * MS);
    assert_eq!(seam_stats(&mut s, T0 + 100 * MS).live_keys, 1, "the expired lease is gone");
    let id = queued.lease.unwrap();
    let beat = Heartbeat { limit: Some("db"), lease: &id, ttl_ms: None, count: None, hold_ms: None };
    let beat = lease(&mut s, T0 + 101 * MS, beat.to_map()).unwrap();
    assert!(beat.ok && !beat.pending, "the waiter holds the count: {beat:?}");
}

#[test]
fn a_restarted_locker_restores_a_lease_from_its_heartbeat() {
    let mut first = three_kinds();
    let id = lease(&mut first, T0, LeaseAsk::new("db", 1).ttl_ms(5_000).to_map()).unwrap().lease.unwrap();
    // The restarted locker has no record of it (no state file, no secret).
    let mut second = three_kinds();
    let now = T0 + 300 * MS;
    let beat = Heartbeat { limit: Some("db"), lease: &id, ttl_ms: Some(5_000), count: Some(1), hold_ms: None };
    let restored = lease(&mut second, now, beat.to_map()).unwrap();
    assert!(restored.ok && restored.remaining == 0, "restored: {restored:?}");
    assert_eq!(restored.expires_in_ms, 5_000);
    let other = lease(&mut second, now, LeaseAsk::new("db", 1).to_map()).unwrap();
    assert!(!other.ok, "a restart cannot double the capacity: {other:?}");
    let freed = lease(&mut second, now, Release { limit: Some("db"), lease: &id }.to_map()).unwrap();
    assert!(freed.ok && freed.remaining == 1, "{freed:?}");
    assert!(lease(&mut second, now, LeaseAsk::new("db", 1).to_map()).unwrap().ok, "free again");
}

/// A config file of the three kinds, with a semaphore of `capacity`.
fn config(test: &str, capacity: u32) -> TempFile {
    let text = format!(
        "[[limits]]\nname = 'api'\nmax_requests = 1\nin_seconds = 0.5\n\
         [[limits]]\nname = 'smooth'\nalgorithm = 'token-bucket'\nmax_requests = 5\nin_seconds = 1\nburst = 1\n\
         [[limits]]\nname = 'db'\nalgorithm = 'semaphore'\nmax_requests = {capacity}\nin_seconds = 5\n"
    );
    TempFile::new(&format!("kinds-{test}.toml"), &text)
}

/// Real time on a real socket: the client sleeps what a reservation says,
/// and a lease guard's background heartbeats (every third of the ttl, so a
/// beat late by 400 ms still keeps it) hold its lease over three ttls.
#[test]
fn the_client_sleeps_a_reservation_and_its_lease_guard_holds_until_dropped() {
    let file = config("client", 1);
    let d = Served::start(&["--config", file.path()]);
    let mut c = Client::new([d.endpoint.as_str()], DEADLINE).unwrap();
    assert!(c.ask(&Ask::new().limit("smooth")).unwrap().ok);
    let started = Instant::now();
    let reply = c.acquire(&Ask::new().limit("smooth").max_wait_ms(1_000)).unwrap();
    let wait = reply.wait_ms.expect("a reservation");
    assert!(reply.ok && (1..=200).contains(&wait), "one token per 200 ms: {reply:?}");
    assert!(started.elapsed() >= Duration::from_millis(wait), "acquire returned before the reservation");

    let guard = c.lease(&LeaseAsk::new("db", 1).ttl_ms(600)).unwrap().expect("the count is free");
    std::thread::sleep(Duration::from_millis(1_800));
    assert!(guard.is_held());
    assert!(!c.acquire_lease(&LeaseAsk::new("db", 1)).unwrap().ok, "still held");
    drop(guard);
    assert!(c.acquire_lease(&LeaseAsk::new("db", 1)).unwrap().ok, "released on drop");
}
