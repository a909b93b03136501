//! Capacity on real lockers, as a user meets it: peered lockers sharing
//! 100 per 16 s, each with its state file (`--state`).
//! - A pair: locker 0 grants 60 (its share of 50 and 10 its peer gives
//!   it), is killed with -9 and restarted with the same command line; then
//!   both are asked until the slot is spent. The restart resumes what its
//!   earlier run owned and did not spend, so the slot serves its 100.
//! - A trio, the same: 100.
//! - A trio, no kill: 60 asks on locker 0, then 100 spread over the other
//!   two. What locker 0 was given and did not spend reaches the others
//!   once its own asks have ended: the slot serves its 100.
//! - A pair, locker 0 kept busy by a flood of batched asks on other keys
//!   (`locker bench`): locker 1 still gets its peer's half, since the loop
//!   reads its peers between requests however many keep coming.
//!
//! Every scenario runs inside one slot: it starts at least 12 s before the
//! slot's end, and a go counts only when its ask and its answer both fall
//! inside the slot. A slot that ended first fails the test with that
//! reason (a machine too loaded to restart a locker in 12 s), never with a
//! wrong count.

use std::process::{Command, Stdio};
use std::time::Duration;

use locker::{Ask, Client};

use crate::support::{locker_bin, wait_for_room, wall_ns, Peered, DEADLINE};

const SLOT: Duration = Duration::from_secs(16);
const LIMIT: [&str; 4] = ["--max-requests", "100", "--in-seconds", "16"];

/// A go as its caller saw it: when the ask left and when the answer came
/// (the wall clock, in nanoseconds).
type Go = (u128, u128);

/// Asks `endpoint` one permit at a time until `most` go or a sorry that
/// says the slot is spent; a sorry that says to ask again soon (a locker
/// short of permits while its peers' gifts come) is waited out, at most
/// fifty in a row. The go.
fn take(endpoint: &str, most: usize) -> Vec<Go> {
    let mut client = Client::new([endpoint], DEADLINE).unwrap();
    let (mut goes, mut short) = (Vec::new(), 0);
    while goes.len() < most && short < 50 {
        let asked = wall_ns();
        let r = client.ask(&Ask::new()).expect("an answer");
        if r.ok {
            goes.push((asked, wall_ns()));
            short = 0;
        } else if r.retry_after_ms >= r.reset_after_ms {
            break;
        } else {
            short += 1;
            std::thread::sleep(Duration::from_millis(r.retry_after_ms.max(1)));
        }
    }
    goes
}

/// Asks every running locker of `group` in turn until each says the slot
/// is spent: the go.
fn drain(group: &Peered, n: usize) -> Vec<Go> {
    (0..n).flat_map(|i| take(&group.endpoint(i), 200)).collect()
}

/// The go of `goes` certainly inside the slot that began at `start`, after
/// checking that none fell outside it.
fn in_slot(goes: &[Go], start: u128) -> usize {
    let end = start + SLOT.as_nanos();
    let outside = goes.iter().filter(|&&(asked, answered)| asked < start || answered >= end).count();
    assert_eq!(outside, 0, "the scenario outran its slot: a machine too loaded to restart a locker in 12 s");
    goes.len()
}

/// A group of `n` with state files, joined, at least 12 s before the end
/// of the slot under way: the group, and the slot's start.
fn group_of(n: usize) -> (Peered, u128) {
    let group = Peered::start(n, &LIMIT);
    group.wait_joined(n - 1);
    wait_for_room(SLOT.as_nanos(), Duration::from_secs(12));
    let start = wall_ns() / SLOT.as_nanos() * SLOT.as_nanos();
    (group, start)
}

/// Locker 0 of a group of `n` grants 60, is killed with -9 and restarted
/// on its state file; then the group is asked until the slot is spent.
/// The go of the slot, and how many of them came before the kill.
fn sixty_then_kill_and_restart(n: usize) -> (usize, usize) {
    let (mut group, start) = group_of(n);
    let mut goes = take(&group.endpoint(0), 60);
    let before = goes.len();
    group.kill(0);
    group.restart(0);
    group.wait_joined(n - 1);
    goes.extend(drain(&group, n));
    (in_slot(&goes, start), before)
}

#[test]
fn a_pair_restarted_on_its_state_files_serves_its_whole_slot() {
    let (go, before) = sixty_then_kill_and_restart(2);
    eprintln!("a pair at 100 per 16 s: {before} go on locker 0, kill -9, restart with --state: {go} go in the slot");
    assert_eq!(before, 60, "locker 0 is given what it lacks of 60");
    assert!(go <= 100, "{go} go in a slot of 100");
    assert!(go >= 98, "the restart resumes what its earlier run owned: {go} go of 100");
}

#[test]
fn a_trio_restarted_on_its_state_files_serves_its_whole_slot() {
    let (go, before) = sixty_then_kill_and_restart(3);
    eprintln!("a trio at 100 per 16 s: {before} go on locker 0, kill -9, restart with --state: {go} go in the slot");
    assert_eq!(before, 60, "locker 0 is given what it lacks of 60");
    assert!(go <= 100, "{go} go in a slot of 100");
    assert!(go >= 98, "the restart resumes what its earlier run owned: {go} go of 100");
}

#[test]
fn permits_given_to_a_locker_whose_asks_ended_reach_the_other_two() {
    let (group, start) = group_of(3);
    let mut goes = take(&group.endpoint(0), 60);
    let first = goes.len();
    let mut clients: Vec<Client> = (1..3).map(|i| Client::new([group.endpoint(i)], DEADLINE).unwrap()).collect();
    for n in 0..100 {
        let client = &mut clients[n % 2];
        for _ in 0..50 {
            let asked = wall_ns();
            let r = client.ask(&Ask::new()).expect("an answer");
            if r.ok {
                goes.push((asked, wall_ns()));
            }
            if r.ok || r.retry_after_ms >= r.reset_after_ms {
                break;
            }
            std::thread::sleep(Duration::from_millis(r.retry_after_ms.max(1)));
        }
    }
    let go = in_slot(&goes, start);
    eprintln!("a trio at 100 per 16 s: {first} go on locker 0, then 100 asks over the other two: {go} go in the slot");
    assert_eq!(first, 60, "locker 0 is given what it lacks of 60");
    assert!(go <= 100, "{go} go in a slot of 100");
    assert!(go >= 98, "what locker 0 did not spend reaches the others: {go} go of 100");
}

#[test]
fn a_member_flooded_with_requests_still_gives_its_peer_what_it_asks() {
    let (group, start) = group_of(2);
    // Batches of 100 over 100,000 keys of their own, never waiting for a
    // reply before sending the next: locker 0's loop is never idle.
    let mut flood = Command::new(locker_bin())
        .args(["bench", "--connect", &group.endpoint(0), "--keys", "100000", "--batch", "100"])
        .args(["--pipeline", "4", "--clients", "1", "--duration", "30s", "--timeout", "10s"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    under_way(&group.endpoint(0), 10_000);
    // Patient: on a loaded machine a gift may come later than `take`'s
    // fifty short waits, so it asks again until 5 s have passed. The flood
    // runs for 30 s, so that a slow start (up to 10 s in `under_way`) still
    // leaves it running through the asks; it is killed once they end.
    let (mut goes, patience) = (Vec::new(), std::time::Instant::now() + Duration::from_secs(5));
    while goes.len() < 100 && std::time::Instant::now() < patience {
        goes.extend(take(&group.endpoint(1), 100 - goes.len()));
    }
    let flooding = flood.try_wait().unwrap().is_none();
    let _ = flood.kill();
    let _ = flood.wait();
    let go = in_slot(&goes, start);
    eprintln!("a pair at 100 per 16 s, locker 0 flooded: {go} go on locker 1");
    assert!(flooding, "the flood ended before locker 1's asks did: nothing was tested");
    assert_eq!(go, 100, "locker 1's half and its peer's, given under the flood");
}

/// Waits (10 s at most) until `endpoint` has answered more than `requests`
/// asks, by its stats: the flood is under way.
fn under_way(endpoint: &str, requests: u64) {
    let mut client = Client::new([endpoint], DEADLINE).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let answered: u64 = client.stats().expect("stats").limits.iter().map(|l| l.requests).sum();
        if answered > requests {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "the flood did not start: {answered} requests in 10 s");
        std::thread::sleep(Duration::from_millis(10));
    }
}
