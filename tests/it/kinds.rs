use std::time::{Duration, Instant};

use locker::wire::{Heartbeat, LeaseAsk};
use locker::{Ask, Client};

use crate::support::{run_locker, Daemon, DEADLINE};

/// A config file mixing the three kinds, written once per test.
fn config(test: &str, semaphore_capacity: u32) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!("locker-kinds-{}-{test}.toml", std::process::id()));
    let text = format!(
        "[[limits]]\nname = 'api'\nmax_requests = 1\nin_seconds = 0.5\n\
         [[limits]]\nname = 'smooth'\nalgorithm = 'token-bucket'\nmax_requests = 5\nin_seconds = 1\nburst = 1\n\
         [[limits]]\nname = 'db'\nalgorithm = 'semaphore'\nmax_requests = {semaphore_capacity}\nin_seconds = 5\n"
    );
    std::fs::write(&path, text).expect("write the config");
    path
}

fn start(test: &str) -> Daemon {
    let path = config(test, 1);
    Daemon::start(&["--config", path.to_str().unwrap()])
}

fn client(d: &Daemon) -> Client {
    Client::new([d.endpoint.as_str()], DEADLINE).unwrap()
}

#[test]
fn a_reservation_is_ok_with_wait_ms_and_acquire_sleeps_it() {
    let d = start("reservation");
    let mut c = client(&d);
    assert!(c.ask(&Ask::new().limit("smooth")).unwrap().ok);
    let started = Instant::now();
    let reply = c.acquire(&Ask::new().limit("smooth").max_wait_ms(1_000)).unwrap();
    assert!(reply.ok, "{reply:?}");
    let wait = reply.wait_ms.expect("wait_ms");
    assert!((1..=200).contains(&wait), "one token per 200 ms: {wait}");
    assert!(started.elapsed() >= Duration::from_millis(wait), "acquire returned before the reservation");
    let sorry = c.ask(&Ask::new().limit("smooth").max_wait_ms(10)).unwrap();
    assert!(!sorry.ok && sorry.retry_after_ms > 10, "{sorry:?}");
    // The same from a shell: the fixed window is spent, so `ask --wait` sleeps into the next slot.
    assert!(c.ask(&Ask::new().limit("api")).unwrap().ok);
    let out = run_locker(&["ask", "--connect", &d.endpoint, "--limit", "api", "--wait", "1s"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "go");
    let out = run_locker(&["ask", "--connect", &d.endpoint, "--limit", "api", "--wait", "0"]);
    assert_eq!(out.status.code(), Some(1), "the next slot is taken by the reservation");
}

#[test]
fn an_expired_lease_frees_its_count_on_time_without_any_request() {
    let d = start("expiry");
    let mut c = client(&d);
    let held = c.acquire_lease(&LeaseAsk::new("db", 1).ttl_ms(100)).unwrap();
    assert!(held.ok, "{held:?}");
    let queued = c.acquire_lease(&LeaseAsk::new("db", 1).ttl_ms(5_000).max_wait_ms(5_000)).unwrap();
    assert!(queued.pending, "{queued:?}");
    assert_eq!(c.stats().unwrap().live_keys, 2);
    // Let the first lease's ttl pass with no request but stats: only the
    // loop's own deadline can expire it and hand its count to the waiter.
    let end = Instant::now() + DEADLINE;
    while c.stats().unwrap().live_keys != 1 {
        assert!(Instant::now() < end, "the expired lease never went");
        std::thread::sleep(Duration::from_millis(10));
    }
    let lease = queued.lease.unwrap();
    let beat = c.heartbeat(&Heartbeat { limit: Some("db"), lease: &lease, ttl_ms: None, count: None }).unwrap();
    assert!(beat.ok && !beat.pending, "the waiter holds the count: {beat:?}");
}

#[test]
fn a_restarted_locker_restores_a_lease_from_its_heartbeat() {
    let first = start("restore-1");
    let lease = client(&first).acquire_lease(&LeaseAsk::new("db", 1).ttl_ms(5_000)).unwrap().lease.unwrap();
    drop(first);
    let second = start("restore-2");
    let mut c = client(&second);
    let beat = Heartbeat { limit: Some("db"), lease: &lease, ttl_ms: Some(5_000), count: Some(1) };
    assert!(c.heartbeat(&beat).unwrap().ok, "restored");
    let other = c.acquire_lease(&LeaseAsk::new("db", 1)).unwrap();
    assert!(!other.ok, "a restart cannot double the capacity: {other:?}");
    let out = run_locker(&["lease", "release", "--connect", &second.endpoint, "--limit", "db", "--lease", &lease]);
    assert_eq!(out.status.code(), Some(0));
    let out = run_locker(&["lease", "acquire", "--connect", &second.endpoint, "--limit", "db", "--ttl", "1s"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let fresh = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    assert_ne!(fresh, lease, "lease ids differ across restarts");
}

#[test]
fn the_lease_guard_keeps_its_lease_while_held_and_releases_it_on_drop() {
    let d = start("guard");
    let mut c = client(&d);
    let guard = c.lease(&LeaseAsk::new("db", 1).ttl_ms(600)).unwrap().expect("the count is free");
    // Three ttls pass; the guard's heartbeats (every 200 ms, a third of the
    // ttl, so a beat late by 400 ms still keeps it) keep the lease.
    std::thread::sleep(Duration::from_millis(1_800));
    assert!(guard.is_held());
    assert!(!c.acquire_lease(&LeaseAsk::new("db", 1)).unwrap().ok, "still held");
    drop(guard);
    assert!(c.acquire_lease(&LeaseAsk::new("db", 1)).unwrap().ok, "released on drop");
}
