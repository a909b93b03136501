//! `--state FILE` on a real disk across real process restarts: a locker
//! killed with -9 mid-slot and restarted on the same file re-grants nothing;
//! a damaged file restores every good record and says so; a file for other
//! limits is refused; the file stays small under a flood of new keys;
//! SIGTERM syncs; a reload rewrites the file.
//!
//! What each kind keeps and restores (fixed and rolling windows, buckets,
//! reservations, leases, batches, restarts after the slot), and how a
//! restored count merges with a peer's snapshot of it, is exact on the
//! service seam in `kept`.

use std::fs::{self, OpenOptions};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use locker::wire::{BatchAsk, EntryReply};
use locker::{Ask, Client};

use crate::support::{Daemon, DEADLINE, GONE};

/// A directory for one test's state file, config and log, removed when dropped.
struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        let dir = std::env::temp_dir().join(format!("locker-state-it-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        Dir(dir)
    }
    fn path(&self, name: &str) -> String {
        self.0.join(name).to_str().unwrap().to_owned()
    }
    fn state(&self) -> String {
        self.path("s.log")
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Starts `locker serve --state <dir>/s.log <args>`, keeping its log (the
/// `_log` name only tells the runs of a test apart when reading it).
fn serve(dir: &Dir, _log: &str, args: &[&str]) -> Daemon {
    let state = dir.state();
    let mut all = vec!["--state", state.as_str()];
    all.extend_from_slice(args);
    Daemon::start_logged(&all)
}

/// Kills the daemon with SIGKILL and waits until it is gone.
fn kill_9(mut d: Daemon) {
    d.signal("KILL");
    assert!(d.wait_exit(GONE).is_some(), "not dead after kill -9");
}

fn client(d: &Daemon) -> Client {
    Client::new([d.endpoint.as_str()], DEADLINE).unwrap()
}

/// How many of `n` plain asks went.
fn plain_goes(d: &Daemon, n: usize) -> usize {
    let mut c = client(d);
    (0..n).filter(|_| c.plain(b"let me go").unwrap()).count()
}

/// Waits, when needed, until at least `need` of a `slot`-long slot is left,
/// so that a test's asks all fall in one slot. This waits on time itself,
/// not on the daemon.
fn within_one_slot(slot: Duration, need: Duration) {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos();
    let into = Duration::from_nanos((now % slot.as_nanos()) as u64);
    if into + need > slot {
        std::thread::sleep(slot - into + Duration::from_millis(20));
    }
}

/// The bytes of the state file's records: up to the first zero frame length.
fn records_end(path: &str) -> usize {
    frames(path).last().map_or(40, |&(at, len)| at + 8 + len)
}

/// Every frame of the state file, as (offset, payload length).
fn frames(path: &str) -> Vec<(usize, usize)> {
    let bytes = fs::read(path).unwrap();
    let mut out = Vec::new();
    let mut at = 40;
    while at + 8 <= bytes.len() {
        let len = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        if len == 0 {
            break;
        }
        out.push((at, len));
        at += 8 + len;
    }
    out
}

#[test]
fn a_locker_killed_mid_slot_regrants_nothing_of_it() {
    // The acceptance test: 100 per 20 s slot, 60 go, kill -9, restart,
    // 100 more asks: at most 100 go in that slot in all.
    let dir = Dir::new("window");
    let args = ["--max-requests", "100", "--in-seconds", "20"];
    within_one_slot(Duration::from_secs(20), Duration::from_secs(8));
    let d = serve(&dir, "first.log", &args);
    assert_eq!(plain_goes(&d, 60), 60);
    kill_9(d);
    let d = serve(&dir, "second.log", &args);
    let after = plain_goes(&d, 100);
    assert_eq!(60 + after, 100, "{after} more went after the restart");
}

/// A fixed window's debt survives a kill -9: 35 charged of 10 an hour
/// fill this hour and the next two and 5 of the third, and after the
/// restart the asks still wait for that third hour, not the next.
#[test]
fn a_charges_debt_carried_into_later_slots_survives_a_kill_9() {
    let dir = Dir::new("charge");
    let args = ["--max-requests", "10", "--in-seconds", "3600"];
    within_one_slot(Duration::from_secs(3600), Duration::from_secs(10));
    let d = serve(&dir, "first.log", &args);
    let charged = client(&d).charge(None, None, 35).unwrap();
    assert_eq!((charged.granted, charged.debt), (35, 25));
    let before = client(&d).ask(&Ask::new()).unwrap();
    kill_9(d);
    let d = serve(&dir, "second.log", &args);
    let after = client(&d).ask(&Ask::new()).unwrap();
    assert!(!before.ok && before.retry_after_ms > 2 * 3_600_000, "before: {before:?}");
    assert!(!after.ok && after.retry_after_ms > 2 * 3_600_000, "the debt was kept: {after:?}");
}

/// Runs 60 plain asks on a fresh locker, kills it, damages its state file
/// with `damage`, restarts it, and returns how many of 100 more went and
/// what it logged.
fn damaged(name: &str, damage: impl FnOnce(&str)) -> (usize, String) {
    let dir = Dir::new(name);
    let args = ["--max-requests", "100", "--in-seconds", "20"];
    within_one_slot(Duration::from_secs(20), Duration::from_secs(8));
    let d = serve(&dir, "first.log", &args);
    assert_eq!(plain_goes(&d, 60), 60);
    kill_9(d);
    damage(&dir.state());
    let d = serve(&dir, "second.log", &args);
    let after = plain_goes(&d, 100);
    (after, d.log_with("damaged"))
}

#[test]
fn a_truncated_state_file_restores_its_good_prefix_and_says_so() {
    let (after, log) = damaged("truncated", |path| {
        let &(last, _) = frames(path).last().unwrap();
        OpenOptions::new().write(true).open(path).unwrap().set_len(last as u64 + 10).unwrap();
    });
    // Counts are cumulative: losing the last record loses one grant, no more.
    assert_eq!(after, 41, "{log}");
    assert!(log.contains("damaged") && log.contains("unfinished"), "{log}");
}

#[test]
fn a_corrupted_record_is_stepped_over_and_the_records_after_it_restored() {
    let (after, log) = damaged("corrupted", |path| {
        // Frame 0 names the run; frame 30 holds the count after 30 go.
        let (at, _) = frames(path)[31];
        let mut bytes = fs::read(path).unwrap();
        bytes[at + 8 + 12] ^= 0xff;
        fs::write(path, bytes).unwrap();
    });
    // The records after the bad one still count: nothing is granted again.
    assert_eq!(after, 40, "{log}");
    assert!(log.contains("damaged") && log.contains("checksum") && log.contains("skipped=1"), "{log}");
}

#[test]
fn a_file_for_other_limits_is_refused_unless_discarded() {
    let dir = Dir::new("refused");
    within_one_slot(Duration::from_secs(3600), Duration::from_secs(10));
    let d = serve(&dir, "first.log", &["--max-requests", "3", "--in-seconds", "3600"]);
    assert_eq!(plain_goes(&d, 1), 1);
    drop(d);
    let state = dir.state();
    let out = Command::new(crate::support::locker_bin())
        .args([
            "serve",
            "--bind",
            "tcp://127.0.0.1:*",
            "--state",
            &state,
            "--max-requests",
            "4",
            "--in-seconds",
            "3600",
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("other limits") && stderr.contains("--state-discard"), "{stderr}");
    let d = serve(&dir, "second.log", &["--max-requests", "4", "--in-seconds", "3600", "--state-discard"]);
    assert_eq!(plain_goes(&d, 5), 4);
}

#[test]
fn the_state_file_stays_bounded_under_a_flood_of_new_keys() {
    let dir = Dir::new("flood");
    let d = serve(&dir, "first.log", &["--max-requests", "1", "--in-seconds", "0.05"]);
    let mut c = client(&d);
    let keys = 40_000;
    let mut largest = 0;
    for i in 0..keys {
        assert!(c.ask(&Ask::new().key(&format!("user-{i}"))).unwrap().ok);
        if i % 1000 == 0 {
            largest = largest.max(records_end(&dir.state()));
        }
    }
    let written = keys * (8 + 36 + "user-39999".len());
    let on_disk = fs::metadata(dir.state()).unwrap().len() as usize;
    assert!(largest < written / 4, "records of {largest} bytes for {written} written");
    assert!(on_disk <= 2 << 20, "a file of {on_disk} bytes");
    assert_eq!(client(&d).stats().unwrap().limits[0].go, keys as u64);
}

#[test]
fn sigterm_syncs_and_a_clean_restart_restores_too() {
    let dir = Dir::new("sigterm");
    let args = ["--max-requests", "10", "--in-seconds", "20", "--state-fsync", "50ms"];
    within_one_slot(Duration::from_secs(20), Duration::from_secs(8));
    let mut d = serve(&dir, "first.log", &args);
    assert_eq!(plain_goes(&d, 4), 4);
    d.signal("TERM");
    assert_eq!(d.wait_exit(DEADLINE).and_then(|s| s.code()), Some(0));
    let d = serve(&dir, "second.log", &args);
    assert_eq!(plain_goes(&d, 10), 6);
    assert!(Path::new(&dir.state()).exists());
}

#[test]
fn a_reload_rewrites_the_state_file_for_the_new_limits() {
    let dir = Dir::new("reload");
    let config = dir.path("limits.toml");
    let limits = |max: u32| format!("[[limits]]\nname = 'api'\nmax_requests = {max}\nin_seconds = 3600\n");
    fs::write(&config, limits(5)).unwrap();
    within_one_slot(Duration::from_secs(3600), Duration::from_secs(20));
    let d = serve(&dir, "first.log", &["--config", &config]);
    let mut c = client(&d);
    for _ in 0..3 {
        assert!(c.ask(&Ask::new().limit("api")).unwrap().ok);
    }
    fs::write(&config, limits(6)).unwrap();
    d.signal("HUP");
    let end = Instant::now() + DEADLINE;
    while c.ask(&Ask::new().limit("api").cost(0)).unwrap().limit != 6 {
        assert!(Instant::now() < end, "the reload never took effect");
    }
    assert!(c.ask(&Ask::new().limit("api")).unwrap().ok, "the fourth of six");
    kill_9(d);
    // Started on the new config, the file written after the reload is its own.
    let d = serve(&dir, "second.log", &["--config", &config]);
    let mut c = client(&d);
    let batch = c.ask(&Ask::new().limit("api").cost(6).up_to()).unwrap();
    assert_eq!(batch.granted, Some(2), "{batch:?}");
}

/// Issue 38: limits sent with the ask are kept by the state file, terms
/// and counts. One is created, then takes new terms (the file is
/// rewritten), and another is created after it (its terms appended); a
/// kill -9 and a restart bring both back with their counts, and the
/// configured limit's count with them.
#[test]
fn limits_sent_with_terms_come_back_with_their_counts_after_a_kill_9() {
    let dir = Dir::new("runtime");
    let config = dir.path("limits.toml");
    fs::write(&config, "runtime_limits = 3\n[[limits]]\nname = 'api'\nmax_requests = 5\nin_seconds = 3600\n").unwrap();
    within_one_slot(Duration::from_secs(3600), Duration::from_secs(20));
    let d = serve(&dir, "first.log", &["--config", &config]);
    let mut c = client(&d);
    let tenant = |max| Ask::new().limit("tenant").key("u").terms(locker::Terms::new("fixed-window", max, 3600.0));
    for _ in 0..3 {
        assert!(c.ask(&tenant(5)).unwrap().ok);
    }
    assert!(c.ask(&tenant(6)).unwrap().ok, "new terms keep the 3 counted: the fourth of six");
    let bucket = Ask::new().limit("b").terms(locker::Terms::new("token-bucket", 1, 3600.0).burst(4)).cost(3);
    assert!(c.ask(&bucket).unwrap().ok);
    assert!(c.ask(&Ask::new().limit("api")).unwrap().ok);
    kill_9(d);
    let d = serve(&dir, "second.log", &["--config", &config]);
    let mut c = client(&d);
    let back = c.ask(&Ask::new().limit("tenant").key("u").cost(0)).unwrap();
    assert_eq!((back.limit, back.remaining), (6, 2), "named without terms, back with its terms and count: {back:?}");
    let left: Vec<bool> = (0..3).map(|_| c.ask(&Ask::new().limit("tenant").key("u")).unwrap().ok).collect();
    assert_eq!(left, [true, true, false]);
    let b = c.ask(&Ask::new().limit("b").cost(0)).unwrap();
    assert_eq!((b.limit, b.remaining), (4, 1), "{b:?}");
    assert_eq!(c.ask(&Ask::new().limit("api").cost(0)).unwrap().remaining, 4);
}

/// A locker with a state file in `dir` serving `a` and `b` (3 an hour
/// each) well within one slot, after a go of `a` for `k` (a record of its
/// own): its config, the locker, a client of it, and the frames so far.
fn a_and_b(dir: &Dir) -> (String, Daemon, Client, usize) {
    let config = dir.path("limits.toml");
    let limit = |name: &str| format!("[[limits]]\nname = '{name}'\nmax_requests = 3\nin_seconds = 3600\n");
    fs::write(&config, limit("a") + &limit("b")).unwrap();
    within_one_slot(Duration::from_secs(3600), Duration::from_secs(20));
    let d = serve(dir, "first.log", &["--config", &config]);
    let mut c = client(&d);
    assert!(c.ask(&Ask::new().limit("a").key("k")).unwrap().ok, "one record of its own");
    let before = frames(&dir.state()).len();
    (config, d, c, before)
}

/// Issue 38: an `all` whose parts went is one frame of the state file (its
/// parts' records held together, so a kill leaves all of them or none),
/// and a restart puts back every part's count.
#[test]
fn an_all_is_one_frame_and_every_part_comes_back() {
    let dir = Dir::new("all");
    let (config, d, mut c, before) = a_and_b(&dir);
    let both = [Ask::new().limit("a").key("k"), Ask::new().limit("b").key("k").cost(2)];
    assert!(c.all(&both).unwrap().ok);
    assert_eq!(frames(&dir.state()).len(), before + 1, "the two parts in one frame");
    kill_9(d);
    let d = serve(&dir, "second.log", &["--config", &config]);
    let mut c = client(&d);
    let left = |c: &mut Client, name| c.ask(&Ask::new().limit(name).key("k").cost(0)).unwrap().remaining;
    assert_eq!((left(&mut c, "a"), left(&mut c, "b")), (1, 1), "both parts restored");
}

/// Issue 38, in batches too: a batch's grants, an `all` entry's parts
/// among them, are one frame of the state file, and a restart puts back
/// every count.
#[test]
fn a_batch_with_an_all_entry_is_one_frame() {
    let dir = Dir::new("batch-all");
    let (config, d, mut c, before) = a_and_b(&dir);
    let both = [Ask::new().limit("a").key("k"), Ask::new().limit("b").key("k").cost(2)];
    let replies = c.ask_entries(&[BatchAsk::Go(Ask::new().limit("b").key("j")), BatchAsk::All(&both)]).unwrap();
    assert!(matches!(&replies[1], Ok(EntryReply::All(all)) if all.ok), "{replies:?}");
    assert_eq!(frames(&dir.state()).len(), before + 1, "the go and the two parts in one frame");
    kill_9(d);
    let d = serve(&dir, "second.log", &["--config", &config]);
    let mut c = client(&d);
    let left = |c: &mut Client, name, key| c.ask(&Ask::new().limit(name).key(key).cost(0)).unwrap().remaining;
    assert_eq!((left(&mut c, "a", "k"), left(&mut c, "b", "k"), left(&mut c, "b", "j")), (1, 1, 2), "all restored");
}
