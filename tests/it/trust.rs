//! Attacks from ordinary clients (issue 11): guessing other clients' lease
//! ids, restoring made-up leases, and flooding the key table. Each attack
//! must fail, and the locker must go on serving.
//!
//! Restores under a lease secret are on the service seam, with the secret
//! and a seeded entropy given to the locker as the daemon gives them. On a
//! real process, only what needs one: the daemon's own entropy against
//! guessed ids, the resident memory a key flood takes and gives back with
//! no request, and the start-up warning for a semaphore without a secret.

use std::time::{Duration, Instant, UNIX_EPOCH};

use locker::core::lease_id::RANDOM_BYTES;
use locker::core::{Algorithm, Entropy, LeaseMinter, LeaseSecret, Limit, Locker, Nanos, Quota, DEFAULT_LIMIT};
use locker::service::Service;
use locker::wire::{Heartbeat, LeaseAsk, LeaseReply, Release, RequestMap};
use locker::{Client, ClientError};

use crate::support::{answer, seam, Daemon, TempFile, DEADLINE};

/// A semaphore `db` of capacity `capacity`, with leases of 5 s unless asked.
fn semaphore(name: &str, capacity: u32) -> TempFile {
    let text = format!("[[limits]]\nname = 'db'\nalgorithm = 'semaphore'\nmax_requests = {capacity}\nin_seconds = 5\n");
    TempFile::new(&format!("trust-{name}.toml"), &text)
}

/// A lease secret file of 32 bytes made of `fill`.
fn secret(name: &str, fill: char) -> TempFile {
    TempFile::new(&format!("trust-{name}.secret"), &fill.to_string().repeat(32))
}

fn client(d: &Daemon) -> Client {
    Client::new([d.endpoint.as_str()], DEADLINE).unwrap()
}

fn acquire(c: &mut Client, count: u64) -> LeaseReply {
    c.acquire_lease(&LeaseAsk::new("db", count).ttl_ms(10_000)).unwrap()
}

fn beat<'a>(lease: &'a str, count: Option<u64>) -> Heartbeat<'a> {
    Heartbeat { limit: Some("db"), lease, ttl_ms: Some(10_000), count, hold_ms: None }
}

/// Ids an attacker holding `id` might try: its neighbours by counting (as a
/// hex number, from its first and last digits), each of its digits changed,
/// its random part without its MAC or with another's, and its case changed.
fn derived(id: &str) -> Vec<String> {
    let mut ids = Vec::new();
    let random = id.split('.').next().unwrap();
    let n = u128::from_str_radix(random, 16).unwrap();
    for near in [n.wrapping_add(1), n.wrapping_sub(1), n.wrapping_add(2), n ^ 1, n ^ (1 << 127)] {
        ids.push(id.replacen(random, &format!("{near:032x}"), 1));
    }
    for i in 0..id.len() {
        let mut bytes = id.as_bytes().to_vec();
        bytes[i] = match bytes[i] {
            b'.' => continue,
            b'0' => b'1',
            _ => b'0',
        };
        ids.push(String::from_utf8(bytes).unwrap());
    }
    ids.push(random.to_owned());
    ids.push(format!("{random}.{}", "0".repeat(32)));
    ids.push(id.to_uppercase());
    ids.retain(|d| d != id);
    ids
}

#[test]
fn lease_ids_derived_from_ones_own_touch_no_one_elses_lease() {
    let config = semaphore("guess", 3);
    let d = Daemon::start(&["--config", config.path()]);
    let (mut holder, mut attacker) = (client(&d), client(&d));
    let held = acquire(&mut holder, 1).lease.expect("held");
    let own = acquire(&mut attacker, 1).lease.expect("held");
    assert_eq!(held.len(), 32, "128 random bits in hex: {held}");
    for guess in derived(&own).iter().chain(&derived(&held)) {
        let freed = attacker.release(&Release { limit: Some("db"), lease: guess }).unwrap();
        assert!(!freed.ok, "release of {guess} freed a lease");
        match attacker.heartbeat(&beat(guess, None)) {
            Err(ClientError::Refused(why)) => assert!(why.contains("unknown lease"), "{why}"),
            other => panic!("heartbeat of {guess} answered {other:?}"),
        }
    }
    let kept = holder.heartbeat(&beat(&held, None)).unwrap();
    assert!(kept.ok, "the holder still holds: {kept:?}");
    assert_eq!(kept.remaining, 1, "the two real leases hold two of three");
}

/// Requests in flight in a flood: well within the REP socket's high-water
/// mark (1000), past which it would drop replies.
const IN_FLIGHT: usize = 256;

/// The daemon's resident memory, from /proc/<pid>/statm, in bytes.
fn rss(pid: u32) -> u64 {
    let statm = std::fs::read_to_string(format!("/proc/{pid}/statm")).expect("statm");
    let pages: u64 = statm.split_whitespace().nth(1).and_then(|p| p.parse().ok()).expect("resident pages");
    // SAFETY: sysconf only reads a system setting.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    pages * u64::try_from(page).expect("a page size")
}

/// Asks once for each of `keys` through one DEALER socket, `IN_FLIGHT` at
/// a time; returns how many got an answer (go, sorry or error).
fn flood(endpoint: &str, keys: impl Iterator<Item = String>) -> usize {
    let ctx = zmq::Context::new();
    let s = ctx.socket(zmq::DEALER).unwrap();
    s.set_linger(0).unwrap();
    s.set_rcvtimeo(DEADLINE.as_millis() as i32).unwrap();
    s.set_sndhwm(0).unwrap();
    s.connect(endpoint).unwrap();
    let (mut sent, mut answered) = (0usize, 0usize);
    let mut body = Vec::new();
    for key in keys {
        body.clear();
        locker::wire::encode(&locker::Ask::new().key(&key).to_map(), &mut body);
        s.send_multipart([&b""[..], &body], 0).unwrap();
        sent += 1;
        while sent - answered >= IN_FLIGHT {
            s.recv_multipart(0).expect("an answer within the deadline");
            answered += 1;
        }
    }
    while answered < sent {
        s.recv_multipart(0).expect("an answer within the deadline");
        answered += 1;
    }
    answered
}

#[test]
fn a_flood_of_keys_gives_its_memory_back_at_the_next_slot_change_without_a_request() {
    // Issue 11: after a flood the key table (and the long keys' map) kept
    // their memory until asked again, or for good.
    const KEYS: usize = 100_000;
    const SLOT_MS: u64 = 3_000;
    let d = Daemon::start(&["--max-requests", "5", "--in-seconds", "3", "--max-keys", &KEYS.to_string()]);
    let before = rss(d.pid());
    // Start just after a slot boundary (slots are aligned to the epoch), so
    // that the flood (about a second on a busy machine) fills one slot.
    let into_slot = UNIX_EPOCH.elapsed().unwrap().as_millis() as u64 % SLOT_MS;
    std::thread::sleep(Duration::from_millis(SLOT_MS + 20 - into_slot));
    let started = Instant::now();
    let short = (0..KEYS / 2).map(|i| format!("user-{i:08}"));
    let long = (0..KEYS / 2).map(|i| format!("account-{i:08}-0000-0000-000000000"));
    assert_eq!(flood(&d.endpoint, short.chain(long)), KEYS);
    let flooded = rss(d.pid());
    eprintln!("flood of {KEYS} keys took {:?}", started.elapsed());
    // About 14 MiB when the flood fills one slot; less if a very busy
    // machine spread it over two and the first slot's share was given back.
    assert!(flooded > before + (4 << 20), "the flood took memory: {before} -> {flooded} bytes");
    // No request from here on: the loop notices the slot change itself.
    let deadline = started + Duration::from_millis(3 * SLOT_MS);
    let mut after = flooded;
    // What stays (about a MiB) is ZeroMQ's buffers and the allocator's own.
    while after > before + (3 << 20) {
        assert!(Instant::now() < deadline, "still {after} bytes resident (from {before}, flooded {flooded})");
        std::thread::sleep(Duration::from_millis(20));
        after = rss(d.pid());
    }
    eprintln!(
        "resident: {} KiB before, {} KiB flooded, {} KiB {:?} after the flood began",
        before >> 10,
        flooded >> 10,
        after >> 10,
        started.elapsed()
    );
    // Stats do not touch the tables; they report what the slot change left.
    wait_for_no_keys(&mut client(&d), deadline);
}

/// Polls stats until no key is live and the key tables hold nothing,
/// failing at `deadline`. Stats do not touch the tables: this waits for the
/// serving loop to drop the keys on its own.
fn wait_for_no_keys(c: &mut Client, deadline: Instant) {
    loop {
        let stats = c.stats().unwrap();
        if (stats.live_keys, stats.key_bytes) == (0, 0) {
            break;
        }
        assert!(Instant::now() < deadline, "{stats:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_flood_of_rolling_window_keys_gives_its_memory_back_without_a_request() {
    // A rolling window swept its keys only when next asked: after a flood
    // and silence, they and their memory stayed for good.
    const KEYS: usize = 50_000;
    let d = Daemon::start(&[
        "--algorithm",
        "rolling-window",
        "--max-requests",
        "5",
        "--in-seconds",
        "1",
        "--max-keys",
        &KEYS.to_string(),
    ]);
    let before = rss(d.pid());
    let started = Instant::now();
    assert_eq!(flood(&d.endpoint, (0..KEYS).map(|i| format!("user-{i:08}"))), KEYS);
    let flooded = rss(d.pid());
    eprintln!("flood of {KEYS} keys took {:?}", started.elapsed());
    assert!(flooded > before + (2 << 20), "the flood took memory: {before} -> {flooded} bytes");
    let mut c = client(&d);
    let stats = c.stats().unwrap();
    assert!(stats.live_keys > 0 && stats.key_bytes > 0, "the flood's keys are live: {stats:?}");
    // No ask from here on (stats do not touch the tables): the loop sweeps
    // once the grants stop counting, a second or two after the flood.
    let deadline = Instant::now() + Duration::from_secs(8);
    wait_for_no_keys(&mut c, deadline);
    let mut after = rss(d.pid());
    while after > before + (2 << 20) {
        assert!(Instant::now() < deadline, "still {after} bytes resident (from {before}, flooded {flooded})");
        std::thread::sleep(Duration::from_millis(20));
        after = rss(d.pid());
    }
    eprintln!("resident: {} KiB before, {} KiB flooded, {} KiB after", before >> 10, flooded >> 10, after >> 10);
}

/// What `locker serve <args>` logs at `warn` before it is ready.
fn start_up_warnings(args: &[&str]) -> String {
    use std::io::{BufRead, BufReader, Read};
    let mut child = std::process::Command::new(crate::support::locker_bin())
        .args(["serve", "--bind", "tcp://127.0.0.1:*"])
        .args(args)
        .env("LOCKER_LOG", "warn")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn locker");
    // The endpoint line comes after the start-up checks; then stop it.
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    assert!(line.starts_with("listening on"), "{line:?}");
    child.kill().unwrap();
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    child.wait().unwrap();
    stderr
}

#[test]
fn a_locker_warns_at_start_when_it_serves_a_semaphore_without_a_lease_secret() {
    let (config, key) = (semaphore("warn", 1), secret("warn", 'w'));
    let warning = "without --lease-secret";
    assert!(start_up_warnings(&["--config", config.path()]).contains(warning));
    assert!(!start_up_warnings(&["--config", config.path(), "--lease-secret", key.path()]).contains(warning));
    assert!(!start_up_warnings(&[]).contains(warning), "no semaphore, nothing to warn of");
}

/// Entropy from a seed (splitmix64): unpredictable enough that ids derived
/// from one another are not minted, and the same in every run.
#[derive(Debug)]
struct Seeded(u64);

impl Entropy for Seeded {
    fn fill(&mut self, out: &mut [u8; RANDOM_BYTES]) {
        for half in out.chunks_mut(8) {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            half.copy_from_slice(&(z ^ (z >> 31)).to_be_bytes());
        }
    }
}

const MS: Nanos = 1_000_000;
const T0: Nanos = 1_700_000_000_000 * MS;

/// A locker run serving the semaphore `db` of `capacity`, minting lease ids
/// under a secret of 32 `fill` bytes from entropy seeded by `run`.
fn run_with_secret(capacity: u32, fill: u8, run: u64) -> Service {
    let quota = Quota::new(capacity, 5.0).unwrap();
    let db = Limit::with_algorithm("db", quota, Algorithm::Semaphore).unwrap();
    let secret = LeaseSecret::new(vec![fill; 32]).unwrap();
    let minter = LeaseMinter::new(Box::new(Seeded(run)), Some(&secret));
    let locker = Locker::new(Limit::new(DEFAULT_LIMIT, quota).unwrap(), vec![db], 1000).with_lease_minter(minter);
    Service::new(locker)
}

fn lease_call(s: &mut Service, request: RequestMap) -> Result<LeaseReply, String> {
    let mut body = Vec::new();
    locker::wire::encode(&request, &mut body);
    answer(&seam(s, T0, &body))
}

/// A restore of `lease` for `count` is refused as not minted by the group.
fn refused(s: &mut Service, lease: &str, count: u64) {
    match lease_call(s, beat(lease, Some(count)).to_map()) {
        Err(why) => assert!(why.contains("no locker of this group minted it"), "{why}"),
        other => panic!("a restore of {lease} with count {count} answered {other:?}"),
    }
}

#[test]
fn with_a_secret_only_a_lease_a_locker_minted_is_restored_also_after_a_restart() {
    let mut first = run_with_secret(2, b'k', 1);
    let made_up = format!("{}.{}", "ab".repeat(16), "cd".repeat(16));
    refused(&mut first, &made_up, 2);
    let lease = lease_call(&mut first, LeaseAsk::new("db", 1).ttl_ms(10_000).to_map()).unwrap().lease.expect("held");
    assert_eq!(lease.len(), 65, "random part, '.', MAC: {lease}");
    for guess in derived(&lease) {
        refused(&mut first, &guess, 1);
    }

    // The same secret after a restart: the locker knows no lease, but
    // vouches for its group's ids, for the count they were minted with.
    let mut second = run_with_secret(2, b'k', 2);
    refused(&mut second, &made_up, 2);
    refused(&mut second, &lease, 2);
    let restored = lease_call(&mut second, beat(&lease, Some(1)).to_map()).unwrap();
    assert!(restored.ok && restored.remaining == 1, "{restored:?}");
    let other = lease_call(&mut second, LeaseAsk::new("db", 1).ttl_ms(10_000).to_map()).unwrap();
    assert!(other.ok, "the count the restores were refused is still free: {other:?}");

    // Another secret is another group.
    refused(&mut run_with_secret(2, b'x', 3), &lease, 1);
}

#[test]
fn a_made_up_restore_does_not_take_the_count_a_waiter_is_queued_for() {
    // Issue 11: a client that never acquired sent a heartbeat with a
    // made-up id and a count, and got the capacity ahead of a waiter.
    let mut s = run_with_secret(2, b'q', 4);
    let held = lease_call(&mut s, LeaseAsk::new("db", 2).ttl_ms(10_000).to_map()).unwrap().lease.expect("held");
    let queued = lease_call(&mut s, LeaseAsk::new("db", 2).ttl_ms(10_000).max_wait_ms(10_000).to_map()).unwrap();
    assert!(queued.pending, "{queued:?}");
    let waiting = queued.lease.unwrap();
    assert!(lease_call(&mut s, Release { limit: Some("db"), lease: &held }.to_map()).unwrap().ok);
    // The count is the waiter's now; a made-up restore cannot take it, nor
    // a share of it, with an id made up or derived from the waiter's.
    let made_up = format!("{}.{}", "5".repeat(32), "a".repeat(32));
    for (lease, count) in [(made_up.clone(), 2), (made_up, 1), (derived(&waiting).remove(0), 2)] {
        match lease_call(&mut s, beat(&lease, Some(count)).to_map()) {
            Err(why) => assert!(why.contains("minted"), "{why}"),
            other => panic!("a restore of {lease} with count {count} answered {other:?}"),
        }
    }
    let mine = lease_call(&mut s, beat(&waiting, None).to_map()).unwrap();
    assert!(mine.ok && mine.remaining == 0, "the waiter holds the whole count: {mine:?}");
}
