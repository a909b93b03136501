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
//! Steps that are not a whole number of slots (issue 36, item 3): slots of
//! 10 s, 100 go, kill -9, a restart with the wall clock 4 s ahead (or
//! behind) grants nothing more where those 100 went, and a restart on the
//! right clock in the next real slot serves all of it. These wait for the
//! wall clock to reach a point in a slot (time itself, not a process); a
//! restart too slow to land where the test needs it says so and checks
//! nothing.
//!
//! A peer whose clock runs fast or slow is followed by the group: that is
//! tested exactly on the simulated clock in `group`, not here.

use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use locker::{Ask, Client};

use crate::support::{self, Daemon, DEADLINE, GONE};

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

const SLOT_MS: u64 = 10_000;

/// Sleeps until the wall clock is `into_ms` into a 10 s slot (the next
/// time it is), and returns that slot's number. This waits on time itself.
fn into_slot(into_ms: u64) -> u64 {
    let now = wall_ms();
    let wait = (into_ms + SLOT_MS - now % SLOT_MS) % SLOT_MS;
    std::thread::sleep(Duration::from_millis(wait));
    (now + wait) / SLOT_MS
}

/// Kills `d` with SIGKILL and waits until it is gone.
fn kill_9(mut d: Daemon) {
    d.signal("KILL");
    assert!(d.wait_exit(GONE).is_some(), "not dead after kill -9");
}

/// How many of `n` asks of one permit went.
fn goes(d: &Daemon, n: usize) -> usize {
    let mut c = Client::new([d.endpoint.as_str()], DEADLINE).unwrap();
    (0..n).filter(|_| c.ask(&Ask::new()).unwrap().ok).count()
}

/// The state file's directory for one test, removed when dropped.
struct Dir(std::path::PathBuf);

impl Dir {
    /// A new directory, unique to this call: tests that run at once
    /// (the wall-step tests both name theirs "jump") never share one.
    fn new(name: &str) -> Dir {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("locker-clocks-it-{}-{n}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Dir(dir)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// 100 of 100 go `into_ms` into a 10 s slot; kill -9; a restart with the
/// wall clock moved by `offset` (libfaketime) asks once, which must be
/// sorry if answered before `sorry_until_ms` into that real slot, and
/// again 9 s into it, which must be sorry too; kill -9;
/// a restart on the right clock early in the next real slot must serve 20
/// of 20. Returns nothing where libfaketime is missing or a restart came
/// too late to tell.
fn step_of_part_of_a_slot(name: &str, into_ms: u64, offset: &str, sorry_until_ms: u64, step_ms_logged: i64) {
    let Some(wrapper) = faked(offset) else { return };
    let wrapper: Vec<&str> = wrapper.iter().map(String::as_str).collect();
    let dir = Dir::new(name);
    let state = dir.0.join("s.log").to_str().unwrap().to_owned();
    let args = ["--max-requests", "100", "--in-seconds", "10", "--state", state.as_str()];

    let first = Daemon::start_logged(&args);
    let slot = into_slot(into_ms);
    assert!(ask(&first, 100).ok, "the whole slot's quota at once");
    kill_9(first);

    let stepped = Daemon::start_logged_under(&wrapper, &args);
    let again = ask(&stepped, 1);
    let late = wall_ms() >= slot * SLOT_MS + sorry_until_ms;
    // Late in the same real slot: by then the stepped clock is in another
    // slot of its own (4 s ahead, since 6 s in; 4 s behind, since 4 s in).
    into_slot(9_000);
    let later = ask(&stepped, 1);
    let later_in_slot = wall_ms() / SLOT_MS == slot;
    let log = stepped.log_with("step_ms=");
    kill_9(stepped);

    // The next real slot, early enough to ask in it.
    std::thread::sleep(Duration::from_millis(((slot + 1) * SLOT_MS + 200).saturating_sub(wall_ms())));
    let right = Daemon::start_logged(&args);
    let served = goes(&right, 20);
    let in_next = wall_ms() / SLOT_MS == slot + 1;
    let log_right = right.log_with("step_ms=");
    kill_9(right);

    let near = |log: &str, ms: i64| step_ms(log).is_some_and(|s| (s - ms).abs() < 500);
    assert!(near(&log, step_ms_logged), "the step was logged: {log}");
    if late {
        eprintln!("the stepped restart answered after {sorry_until_ms} ms into the slot: nothing to check of it");
    } else {
        assert!(!again.ok, "the slot's 100 were granted again on the stepped clock: {again:?}");
    }
    if later_in_slot {
        assert!(!later.ok, "granted again late in the real slot, in the stepped clock's next slot: {later:?}");
    } else {
        eprintln!("the later ask did not fall in the real slot: nothing to check of it");
    }
    assert!(near(&log_right, -step_ms_logged), "the step back was logged: {log_right}");
    if in_next {
        assert_eq!(served, 20, "the next real slot serves in full on the right clock");
    } else {
        eprintln!("the right clock's asks did not fall in the next real slot: nothing to check of them");
    }
}

/// Issue 36, item 3: with the step rounded to whole slots (+4 s of 10 s is
/// none), the 100 went again 4 s ahead, and the next restart moved them
/// into the next real slot, which then gave 0 of 20.
#[test]
fn a_restart_4_s_ahead_grants_nothing_where_the_slot_went_and_the_next_real_slot_serves_in_full() {
    // Granted at 6.5 s, which is 10.5 s on the stepped clock: its next slot.
    step_of_part_of_a_slot("ahead", 6_500, "+4", 10_000, 4_000);
}

/// 4 s behind, grants made 1.5 s into a slot fall in the slot before on the
/// stepped clock, which ends 4 s into the real one: its next slot, which
/// begins inside the real slot, must not grant them again either. (Before
/// the fix this held by accident: the count, left in a slot still ahead,
/// was taken for reservations, which every ask queues behind.)
#[test]
fn a_restart_4_s_behind_grants_nothing_where_the_slot_went_and_the_next_real_slot_serves_in_full() {
    step_of_part_of_a_slot("behind", 1_500, "-4", 4_000, -4_000);
}

/// The `unseen_ms` a locker logged, if it logged one.
fn unseen_ms(log: &str) -> Option<u64> {
    let at = log.find("unseen_ms=")? + "unseen_ms=".len();
    log[at..].chars().take_while(char::is_ascii_digit).collect::<String>().parse().ok()
}

/// A locker whose wall clock is stepped `step` seconds ahead while it runs
/// (libfaketime re-reading its timestamp file; the monotonic and boot-time
/// clocks stay true), as a paused VM's is set right after it resumes:
/// real time the monotonic clock did not see, or a step. Returns its log
/// once it logged `logged`; `None` without libfaketime.
fn wall_stepped_ahead(args: &[&str], logged: &str) -> Option<(Daemon, String)> {
    if !Path::new(LIBFAKETIME).exists() {
        eprintln!("libfaketime is not installed (apt-get install faketime): skipping");
        return None;
    }
    let dir = Dir::new("jump");
    let file = dir.0.join("faketime");
    std::fs::write(&file, "+0\n").unwrap();
    let vars = [
        format!("LD_PRELOAD={LIBFAKETIME}"),
        "FAKETIME_DONT_FAKE_MONOTONIC=1".into(),
        format!("FAKETIME_TIMESTAMP_FILE={}", file.display()),
        // Read again at least every second, not at every reading.
        "FAKETIME_CACHE_DURATION=1".into(),
    ];
    let wrapper: Vec<&str> = std::iter::once("env").chain(vars.iter().map(String::as_str)).collect();
    let d = Daemon::start_logged_under(&wrapper, args);
    // An answer shows the loop has read its clocks on the unstepped file:
    // without it, a start slower than libfaketime's cache (a loaded
    // machine) could read the step first and see no jump at all.
    let answered = Client::new([d.endpoint.as_str()], DEADLINE).unwrap().stats();
    assert!(answered.is_ok(), "answers before the step: {answered:?}");
    assert!(!d.log().contains(logged), "nothing before the step: {}", d.log());
    std::fs::write(&file, "+5\n").unwrap();
    // The loop turns at least every 100 ms; libfaketime reads its file
    // again within a second.
    let log = d.log_with(logged);
    assert!(log.contains(logged), "the step was not noticed: {log}");
    Some((d, log))
}

/// A peered locker takes a wall clock jump the monotonic clock did not see
/// for a pause of as much (issue 52, item 4): the safe side, since its
/// lease must not outlive one its heir saw run out.
#[test]
fn a_wall_clock_jump_the_monotonic_clock_did_not_see_is_taken_for_a_pause() {
    let (peer_bind, silent) =
        (format!("tcp://127.0.0.1:{}", support::free_port()), format!("tcp://127.0.0.1:{}", support::free_port()));
    let args = ["--peer-bind", &peer_bind, "--node-id", "a", "--peer", &silent, "--max-requests", "100"];
    let Some((d, log)) = wall_stepped_ahead(&args, "taken as a pause") else { return };
    let unseen = unseen_ms(&log).expect("unseen_ms logged");
    assert!((4_000..=5_000).contains(&unseen), "a pause of about 5 s: {unseen} ms in {log}");
    let answer = Client::new([d.endpoint.as_str()], DEADLINE).unwrap().ask(&Ask::new());
    assert!(answer.is_ok(), "answers on: {answer:?}");
    stop(d, "");
}

/// A lone locker holds no lease: it logs a wall clock step ahead but keeps
/// its own reckoning, so its current slot is not cut short.
#[test]
fn a_lone_locker_logs_a_wall_clock_step_ahead_and_keeps_its_slots() {
    let args = ["--max-requests", "100", "--in-seconds", "1"];
    let Some((d, log)) = wall_stepped_ahead(&args, "keeps its own reckoning") else { return };
    assert!(!log.contains("taken as a pause"), "a lone locker followed a wall step: {log}");
    assert!(ask(&d, 1).ok, "serves on");
    stop(d, "");
}
