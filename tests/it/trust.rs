//! Attacks from ordinary clients on a real locker (issue 11): guessing
//! other clients' lease ids, restoring made-up leases, and flooding the key
//! table. Each attack must fail, and the locker must go on serving.

use locker::wire::{Heartbeat, LeaseAsk, LeaseReply, Release};
use locker::{Client, ClientError};

use crate::support::{Daemon, TempFile, DEADLINE};

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
    Heartbeat { limit: Some("db"), lease, ttl_ms: Some(10_000), count }
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

#[test]
fn with_a_secret_only_a_lease_a_locker_minted_is_restored_also_after_a_restart() {
    let (config, key) = (semaphore("restore", 2), secret("restore", 'k'));
    let args = ["--config", config.path(), "--lease-secret", key.path()];
    let first = Daemon::start(&args);
    let mut c = client(&first);
    let made_up = format!("{}.{}", "ab".repeat(16), "cd".repeat(16));
    let refused = |c: &mut Client, lease: &str, count| match c.heartbeat(&beat(lease, Some(count))) {
        Err(ClientError::Refused(why)) => assert!(why.contains("no locker of this group minted it"), "{why}"),
        other => panic!("a restore of {lease} with count {count} answered {other:?}"),
    };
    refused(&mut c, &made_up, 2);
    let lease = acquire(&mut c, 1).lease.expect("held");
    assert_eq!(lease.len(), 65, "random part, '.', MAC: {lease}");
    for guess in derived(&lease) {
        refused(&mut c, &guess, 1);
    }
    drop(first);

    // The same secret after a restart: the locker knows no lease, but
    // vouches for its group's ids, for the count they were minted with.
    let second = Daemon::start(&args);
    let mut c = client(&second);
    refused(&mut c, &made_up, 2);
    refused(&mut c, &lease, 2);
    let restored = c.heartbeat(&beat(&lease, Some(1))).unwrap();
    assert!(restored.ok && restored.remaining == 1, "{restored:?}");
    assert!(acquire(&mut c, 1).ok, "the count the restores were refused is still free");
    drop(second);

    // Another secret is another group.
    let other_key = secret("restore-other", 'x');
    let third = Daemon::start(&["--config", config.path(), "--lease-secret", other_key.path()]);
    refused(&mut client(&third), &lease, 1);
}
