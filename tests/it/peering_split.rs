//! Peered lockers split each slot of a fixed window by the previous slot's
//! demand, so a caller whose load lands on one locker gets its whole quota
//! from the second slot on, and the lockers together still never grant
//! more than max_requests in a slot.

use std::time::Duration;

use locker::wire::GoReply;

use crate::peering::{ask, slot_of, wall_ms};
use crate::support::{req, Peered, DEADLINE};

/// Sleeps until `offset_ms` into the next slot of `slot_ms`.
fn sleep_to_next_slot(slot_ms: u64, offset_ms: u64) {
    let into = wall_ms() % slot_ms;
    std::thread::sleep(Duration::from_millis(slot_ms - into + offset_ms));
}

/// Sleeps until `at_ms` into the slot `slot`, if that is still ahead.
fn sleep_until(slot: u64, slot_ms: u64, at_ms: u64) {
    let target = slot * slot_ms + at_ms;
    let now = wall_ms();
    if target > now {
        std::thread::sleep(Duration::from_millis(target - now));
    }
}

/// `n` asks back to back on `socket`: the go among them, and the slot they
/// were decided in (the slot of the last).
fn burst(socket: &zmq::Socket, key: &str, n: usize, slot_ms: u64) -> (u64, u64) {
    let mut buf = Vec::new();
    let replies: Vec<(GoReply, u64)> = (0..n).map(|_| (ask(socket, key, &mut buf), wall_ms())).collect();
    let go = replies.iter().filter(|(r, _)| r.ok).count() as u64;
    let (last, at) = replies.last().expect("at least one ask");
    (go, slot_of(last, *at, slot_ms))
}

/// The go answered for the only limit, summed over the running lockers.
fn total_go(group: &Peered) -> u64 {
    let running = group.lockers.iter().flatten();
    running
        .map(|d| {
            let stats = locker::Client::new([d.endpoint.as_str()], DEADLINE).unwrap().stats().unwrap();
            stats.limits.iter().map(|l| l.go).sum::<u64>()
        })
        .sum()
}

/// How many times a scenario runs before its bursts fall in consecutive
/// slots. On a loaded machine the test itself may stall past a slot; that
/// run then says nothing about the split, and the scenario runs again.
const ATTEMPTS: usize = 3;

/// Whether the bursts fell in consecutive slots, so each slot was split by
/// the one before it; says so when they did not.
fn consecutive(slots: &[u64], what: &str) -> bool {
    let ok = slots.windows(2).all(|w| w[1] == w[0] + 1);
    if !ok {
        eprintln!("{what}: the test stalled and its bursts skipped a slot ({slots:?}); running it again");
    }
    ok
}

/// Runs `scenario` until its bursts fall in consecutive slots, at most
/// `ATTEMPTS` times, and returns what it measured.
fn in_consecutive_slots<T>(what: &str, mut scenario: impl FnMut() -> (Vec<u64>, T)) -> T {
    for _ in 0..ATTEMPTS {
        let (slots, measured) = scenario();
        if consecutive(&slots, what) {
            return measured;
        }
    }
    panic!("{what}: the bursts skipped a slot in each of {ATTEMPTS} runs");
}

/// Issue 15: three peered lockers, 5 per 0.8 s, and a caller sending 5 asks
/// back to back to one locker at the start of each slot. Alone a locker
/// grants 5 of 5; peered under the in-flight rule alone it granted 2; with
/// the split by demand 2 or 3 in the first slot and 5 after it; now that a
/// sorry that only waits for grants in flight is held, 5 from the first.
#[test]
fn a_bursty_caller_on_one_of_three_lockers_gets_its_whole_quota() {
    let slot_ms = 800;
    let (go, answered, total) = in_consecutive_slots("bursty trio", || bursty_trio(slot_ms));
    eprintln!("bursts of 5 on one of three lockers, 5 per 0.8 s: go per slot {go:?}");
    assert_eq!(go, [5, 5, 5, 5, 5], "every slot grants the whole burst, the first included");
    assert_eq!(total, answered, "every go was answered to the test's own asks");
}

/// Five bursts on locker 0 of a fresh trio: the slots, the go per slot,
/// the go answered in all, and the go the lockers counted.
fn bursty_trio(slot_ms: u64) -> (Vec<u64>, (Vec<u64>, u64, u64)) {
    let trio = Peered::start(3, &["--max-requests", "5", "--in-seconds", "0.8"]);
    trio.wait_joined(2);
    let ctx = zmq::Context::new();
    let caller = req(&ctx, &trio.endpoint(0));
    // Asks on the other two lockers after the demand cutoff (two thirds
    // into the slot): they must find the slot spent, and they do not count
    // as demand.
    let probes = [req(&ctx, &trio.endpoint(1)), req(&ctx, &trio.endpoint(2))];
    let (mut slots, mut go, mut answered) = (Vec::new(), Vec::new(), 0);
    sleep_to_next_slot(slot_ms, 10);
    for _ in 0..5 {
        let (n, slot) = burst(&caller, "burst", 5, slot_ms);
        sleep_until(slot, slot_ms, 620);
        let late: u64 = probes.iter().map(|p| burst(p, "burst", 1, slot_ms).0).sum();
        assert!(n + late <= 5, "slot {slot}: {n} go on the busy locker and {late} on the others, of 5");
        answered += n + late;
        slots.push(slot);
        go.push(n);
        sleep_until(slot + 1, slot_ms, 10);
    }
    let total = total_go(&trio);
    (slots, (go, answered, total))
}

/// Issue 15: two peered lockers, 100 per 5 s, one fast caller on one of
/// them: the first sorry comes after at least 90 go in every slot after
/// the first (it came after 33 to 46 under the in-flight rule alone; now
/// 100 from the first slot, the in-flight waits being held, not refused).
#[test]
fn a_fast_caller_on_one_of_two_lockers_gets_at_least_90_of_100() {
    let slot_ms = 5000;
    let (slots, before_sorry) = in_consecutive_slots("fast pair", || {
        let (slots, before_sorry) = fast_pair(slot_ms);
        (slots.clone(), (slots, before_sorry))
    });
    eprintln!("a fast caller on one of two lockers, 100 per 5 s: go before the first sorry {before_sorry:?}");
    for (slot, &n) in slots.iter().zip(&before_sorry).skip(1) {
        assert!(n >= 90, "slot {slot}: the first sorry came after {n} go");
    }
}

/// Three slots of one fast caller on locker 0 of a fresh pair: the slots
/// and the go before each slot's first sorry.
fn fast_pair(slot_ms: u64) -> (Vec<u64>, Vec<u64>) {
    let pair = Peered::start(2, &["--max-requests", "100", "--in-seconds", "5"]);
    pair.wait_joined(1);
    // Start early enough in a slot that the first slot's demand is counted
    // before its cutoff.
    if wall_ms() % slot_ms > 2500 {
        sleep_to_next_slot(slot_ms, 10);
    }
    let ctx = zmq::Context::new();
    let caller = req(&ctx, &pair.endpoint(0));
    let mut buf = Vec::new();
    let (mut slots, mut before_sorry) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        let mut go = 0;
        let slot = loop {
            let r = ask(&caller, "fast", &mut buf);
            if !r.ok {
                break slot_of(&r, wall_ms(), slot_ms);
            }
            go += 1;
            assert!(go <= 100, "more than 100 go in one slot");
        };
        slots.push(slot);
        before_sorry.push(go);
        sleep_until(slot + 1, slot_ms, 10);
    }
    (slots, before_sorry)
}

/// Issue 15: a client failing over. Bursts go to locker 0 for three slots,
/// then locker 0 is killed and the bursts go to locker 1: the slot of the
/// move may fall short (locker 0's share of it is held until it ends), the
/// slots after it grant the whole burst again.
#[test]
fn load_that_moves_to_another_locker_adapts_within_one_slot() {
    let go = in_consecutive_slots("moving load", || moving_load(800));
    eprintln!("bursts of 5 moving from locker 0 to locker 1 after three slots: go per slot {go:?}");
    assert_eq!(go[1..3], [5, 5], "before the move");
    assert_eq!(go[4..], [5, 5], "from the second slot after the move");
    assert!(go.iter().all(|&n| n <= 5), "{go:?}");
}

/// Six bursts on a fresh trio, moved from locker 0 (then killed) to locker
/// 1 after three: the slots and the go per slot.
fn moving_load(slot_ms: u64) -> (Vec<u64>, Vec<u64>) {
    let mut trio = Peered::start(3, &["--max-requests", "5", "--in-seconds", "0.8"]);
    trio.wait_joined(2);
    let ctx = zmq::Context::new();
    let first = req(&ctx, &trio.endpoint(0));
    let second = req(&ctx, &trio.endpoint(1));
    let (mut slots, mut go) = (Vec::new(), Vec::new());
    sleep_to_next_slot(slot_ms, 10);
    for round in 0..6 {
        if round == 3 {
            trio.kill(0);
        }
        let caller = if round < 3 { &first } else { &second };
        let (n, slot) = burst(caller, "moving", 5, slot_ms);
        slots.push(slot);
        go.push(n);
        sleep_until(slot + 1, slot_ms, 10);
    }
    (slots, go)
}
