//! Wall clocks that are wrong or stepped, on real processes: a locker with
//! `--state` restarted with its wall clock stepped an hour ahead (under
//! libfaketime, which moves the wall clock and leaves the boot clock alone,
//! as a stepped host clock does) re-grants nothing of the slot it saved,
//! and restarted again with the right clock serves on the right clock.
//!
//! Slots of an hour, so that the step moves exactly one slot and the test's
//! few seconds fall in one real slot; should a real hour end during the
//! test, it says so and checks nothing.
//!
//! A peer whose clock runs fast or slow is followed by the group: that is
//! tested exactly on the simulated clock in `group`, not here.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use locker::{Ask, Client};

use crate::support::{Daemon, DEADLINE};

const LIBFAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";
const HOUR_MS: u64 = 3_600_000;

fn wall_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64
}

/// `env` with libfaketime moving the wall clock by `offset` seconds, or
/// `None` (and a note) where libfaketime is not installed.
fn faked(offset: &str) -> Option<Vec<String>> {
    if !Path::new(LIBFAKETIME).exists() {
        eprintln!("libfaketime is not installed (apt-get install faketime): skipping");
        return None;
    }
    let vars =
        [format!("LD_PRELOAD={LIBFAKETIME}"), "FAKETIME_DONT_FAKE_MONOTONIC=1".into(), format!("FAKETIME={offset}")];
    Some(std::iter::once("env".to_owned()).chain(vars).collect())
}

/// The `step_ms` a locker logged, if it logged one.
fn step_ms(log: &str) -> Option<i64> {
    let at = log.find("step_ms=")? + "step_ms=".len();
    let digits: String = log[at..].chars().take_while(|c| *c == '-' || c.is_ascii_digit()).collect();
    digits.parse().ok()
}

/// Stops `d` with SIGTERM; its log once it holds `awaited` (the log is
/// read by a thread, which may lag the exit).
fn stop(mut d: Daemon, awaited: &str) -> String {
    d.signal("TERM");
    assert!(d.wait_exit(DEADLINE).is_some(), "no exit after SIGTERM");
    d.log_with(awaited)
}

fn ask(d: &Daemon, cost: u64) -> locker::GoReply {
    Client::new([d.endpoint.as_str()], DEADLINE).unwrap().ask(&Ask::new().cost(cost)).unwrap()
}

#[test]
fn a_restart_with_the_clock_stepped_ahead_regrants_nothing_and_the_next_one_runs_on_the_right_clock() {
    let Some(wrapper) = faked("+3600") else { return };
    let dir = std::env::temp_dir().join(format!("locker-clocks-it-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let state = dir.join("s.log").to_str().unwrap().to_owned();
    let args = ["--max-requests", "100", "--in-seconds", "3600", "--state", state.as_str()];
    let hour = wall_ms() / HOUR_MS;

    let first = Daemon::start_logged(&args);
    assert!(ask(&first, 100).ok, "the whole hour's count at once");
    stop(first, "");

    let wrapper: Vec<&str> = wrapper.iter().map(String::as_str).collect();
    let ahead = Daemon::start_logged_under(&wrapper, &args);
    let r = ask(&ahead, 1);
    let log = stop(ahead, "step_ms=");

    let right = Daemon::start_logged(&args);
    let again = ask(&right, 1);
    let log_right = stop(right, "step_ms=");
    let _ = std::fs::remove_dir_all(&dir);

    if wall_ms() / HOUR_MS != hour {
        eprintln!("a real hour ended during the test: nothing to check");
        return;
    }
    assert!(!r.ok, "the hour's 100 were granted again on the stepped clock: {r:?}");
    let near = |log: &str, hour: i64| step_ms(log).is_some_and(|ms| (ms - hour).abs() < 1_000);
    assert!(log.contains("the wall clock was stepped") && near(&log, 3_600_000), "the step was logged: {log}");
    assert!(near(&log_right, -3_600_000), "the step back was logged: {log_right}");
    assert!(!again.ok, "the hour's 100 were granted again on the right clock: {again:?}");
    let left_ms = HOUR_MS - wall_ms() % HOUR_MS;
    let reset = again.reset_after_ms;
    assert!(
        reset <= left_ms + 1000,
        "runs on the right clock, not the file's future: reset in {reset} ms, {left_ms} ms left"
    );
    assert!(reset + 5000 >= left_ms, "reset in {reset} ms, {left_ms} ms left");
}
