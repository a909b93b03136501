//! The one-host recipes of `examples/one-host/` run as written: three
//! peered lockers, CURVE with generated keys, a lease secret, and the Redis
//! store with a local redis-server (which must be installed, as for
//! `store::*`). Each script starts its lockers, checks what the recipe
//! shows and stops them; this test runs it on ports nothing else uses and
//! checks its output (#40).

use std::path::Path;
use std::process::Command;

use crate::support::locker_bin;

/// The ports a recipe uses are `BASE + 1` to `BASE + LAST`.
const LAST: u16 = 13;

/// A base below the kernel's ephemeral range (where the other tests' ports
/// come from) whose recipe ports are all free now.
fn free_base(recipe: &str) -> u16 {
    let salt = recipe.bytes().map(u32::from).sum::<u32>();
    let start = 20_000 + ((std::process::id() + salt * 97) % 500) as u16 * 20;
    (0..50)
        .map(|i| 20_000 + (start - 20_000 + i * 20) % 10_000)
        .find(|base| (1..=LAST).all(|p| std::net::TcpListener::bind(("127.0.0.1", base + p)).is_ok()))
        .expect("a free range of ports")
}

/// Runs `examples/one-host/<recipe>.sh`; returns its output, or fails with it.
fn run(recipe: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let script = root.join(format!("examples/one-host/{recipe}.sh"));
    let out = Command::new("timeout")
        .args(["120", "bash"])
        .arg(&script)
        .env("LOCKER", locker_bin())
        .env("BASE", free_base(recipe).to_string())
        .env("LOCKER_LOG", "warn")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{recipe}.sh: {stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    stdout
}

/// The number after `go: ` in a recipe's summary line.
fn go_count(out: &str) -> u32 {
    let line = out.lines().find(|l| l.starts_with("go: ")).unwrap_or_else(|| panic!("a summary line: {out}"));
    line[4..].split(' ').next().unwrap().parse().unwrap()
}

#[test]
fn three_peered_lockers_grant_the_groups_limit_and_see_each_other() {
    let out = run("peering");
    let go = go_count(&out);
    assert!((10..=30).contains(&go), "at most the group's 30, at least one locker's share: {out}");
    let peers: Vec<&str> = out.lines().filter(|l| l.starts_with("b ") || l.starts_with("c ")).collect();
    assert!(peers.len() == 2 && peers.iter().all(|l| l.contains("true")), "a hears b and c: {out}");
}

#[test]
fn a_curve_locker_answers_its_listed_client_only() {
    let out = run("curve");
    assert!(out.contains("alice: go"), "{out}");
    assert!(out.contains("mallory: locker: no locker answered"), "{out}");
    assert!(out.contains("plain: locker: no locker answered"), "{out}");
}

#[test]
fn a_lease_secret_refuses_a_made_up_id_and_keeps_a_minted_one() {
    let out = run("lease-secret");
    assert!(out.contains("made-up id: refused") && out.contains("no locker of this group minted it"), "{out}");
    assert!(out.contains("release: released"), "{out}");
}

#[test]
fn two_lockers_on_one_redis_store_grant_exactly_the_limit() {
    let out = run("store");
    assert_eq!(go_count(&out), 10, "{out}");
}
