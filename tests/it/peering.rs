use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use locker::wire::{self, Ask, GoReply, Reply};

use crate::support::{req, Peered, DEADLINE};

/// Milliseconds since the Unix epoch, by the wall clock the lockers anchor to.
pub(crate) fn wall_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64
}

/// Asks once for `key` on `socket`.
pub(crate) fn ask(socket: &zmq::Socket, key: &str, buf: &mut Vec<u8>) -> GoReply {
    buf.clear();
    wire::encode(&Ask::new().key(key).to_map(), buf);
    socket.send(&buf[..], 0).expect("send");
    let reply = socket.recv_bytes(0).expect("a reply within the deadline");
    match wire::decode_reply::<GoReply>(&reply).expect("a go reply") {
        Reply::Answer(r) => r,
        Reply::Refused(why) => panic!("refused: {why}"),
    }
}

/// Asks like a client that honours a sorry's retry hint when it is sooner
/// than the slot's end (a share refusal, or a locker still joining), for at
/// most `DEADLINE`; returns the first go or the first slot-spent sorry.
fn ask_patiently(socket: &zmq::Socket, key: &str, buf: &mut Vec<u8>) -> GoReply {
    let end = Instant::now() + DEADLINE;
    loop {
        let r = ask(socket, key, buf);
        if r.ok || r.retry_after_ms >= r.reset_after_ms || Instant::now() > end {
            return r;
        }
        std::thread::sleep(Duration::from_millis(r.retry_after_ms.min(10)));
    }
}

/// The slot a reply was decided in: its slot ends `reset_after_ms` after
/// the decision, which came just before the reply arrived.
pub(crate) fn slot_of(reply: &GoReply, received_ms: u64, slot_ms: u64) -> u64 {
    (received_ms + reply.reset_after_ms + slot_ms / 2) / slot_ms - 1
}

/// Go answers per slot when `threads` clients per endpoint ask for `key`
/// as fast as they can for `run`.
pub(crate) fn saturate(
    endpoints: &[String],
    threads: usize,
    key: &str,
    run: Duration,
    slot_ms: u64,
) -> BTreeMap<u64, u64> {
    let end = Instant::now() + run;
    let handles: Vec<_> = endpoints
        .iter()
        .flat_map(|ep| std::iter::repeat_n(ep.clone(), threads))
        .map(|ep| {
            let key = key.to_owned();
            std::thread::spawn(move || {
                let ctx = zmq::Context::new();
                let socket = req(&ctx, &ep);
                let mut per_slot = BTreeMap::new();
                let mut buf = Vec::new();
                while Instant::now() < end {
                    let r = ask(&socket, &key, &mut buf);
                    if r.ok {
                        *per_slot.entry(slot_of(&r, wall_ms(), slot_ms)).or_insert(0u64) += 1;
                    }
                }
                per_slot
            })
        })
        .collect();
    let mut total = BTreeMap::new();
    for h in handles {
        for (slot, n) in h.join().expect("client thread") {
            *total.entry(slot).or_insert(0) += n;
        }
    }
    total
}

/// Checks the bound on every slot and the fill on every slot the run
/// covered from start to end (all but the first and the last).
fn check_slots(per_slot: &BTreeMap<u64, u64>, max: u64, what: &str) {
    eprintln!("{what}: go per slot {per_slot:?}");
    assert!(per_slot.len() >= 3, "{what}: too few slots {per_slot:?}");
    let bound = max + max / 100;
    for (slot, &n) in per_slot {
        assert!(n <= bound, "{what}: slot {slot} granted {n}, above {bound}");
    }
    let inner: Vec<u64> = per_slot.values().copied().skip(1).take(per_slot.len() - 2).collect();
    for n in inner {
        assert!(n >= max - max / 100, "{what}: a full slot granted only {n} of {max}");
    }
}

#[test]
fn three_saturated_lockers_stay_within_one_percent_of_max_together() {
    let trio = Peered::start(3, &["--max-requests", "1000", "--in-seconds", "1"]);
    trio.wait_joined(2);
    let endpoints: Vec<String> = (0..3).map(|i| trio.endpoint(i)).collect();
    let per_slot = saturate(&endpoints, 2, "all-three", Duration::from_millis(3300), 1000);
    check_slots(&per_slot, 1000, "three lockers saturated");
}

#[test]
fn one_busy_locker_of_three_still_fills_the_slot() {
    let trio = Peered::start(3, &["--max-requests", "1000", "--in-seconds", "1"]);
    trio.wait_joined(2);
    let per_slot = saturate(&[trio.endpoint(0)], 3, "one-busy", Duration::from_millis(3300), 1000);
    check_slots(&per_slot, 1000, "all load on one locker");
}

/// Waits, bounded, until a fresh slot of `slot_ms` has at least `need_ms` left.
fn align_to_slot_start(slot_ms: u64, need_ms: u64) {
    let into = wall_ms() % slot_ms;
    if slot_ms - into < need_ms {
        std::thread::sleep(Duration::from_millis(slot_ms - into + 5));
    }
}

#[test]
fn two_lockers_share_one_count() {
    let pair = Peered::start(2, &["--max-requests", "20", "--in-seconds", "2"]);
    pair.wait_joined(1);
    align_to_slot_start(2000, 1500);
    let ctx = zmq::Context::new();
    let sockets = [req(&ctx, &pair.endpoint(0)), req(&ctx, &pair.endpoint(1))];
    let mut buf = Vec::new();
    let mut go = BTreeMap::new();
    let mut spent = 0;
    for i in 0..400 {
        let r = ask(&sockets[i % 2], "shared", &mut buf);
        if r.ok {
            *go.entry(slot_of(&r, wall_ms(), 2000)).or_insert(0) += 1;
        } else if r.retry_after_ms < r.reset_after_ms {
            // Over this locker's share while its last grants are in flight:
            // the hint is a few milliseconds, and the client honours it.
            std::thread::sleep(Duration::from_millis(r.retry_after_ms));
        } else {
            spent += 1;
            if spent == 6 {
                break;
            }
        }
    }
    assert_eq!(spent, 6, "the count was never spent: {go:?}");
    assert_eq!(go.values().copied().collect::<Vec<_>>(), [20], "go per slot {go:?}");
}

#[test]
fn a_killed_and_restarted_locker_does_not_grant_the_slot_again() {
    let slot_ms = 4000;
    let mut trio = Peered::start(3, &["--max-requests", "100", "--in-seconds", "4", "--peer-grace", "2"]);
    trio.wait_joined(2);
    align_to_slot_start(slot_ms, 3000);
    let ctx = zmq::Context::new();
    let mut buf = Vec::new();
    let mut go = BTreeMap::new();
    let count = |r: &GoReply, go: &mut BTreeMap<u64, u64>| {
        if r.ok {
            *go.entry(slot_of(r, wall_ms(), slot_ms)).or_insert(0) += 1;
        }
    };
    let first = req(&ctx, &trio.endpoint(0));
    for _ in 0..60 {
        let r = ask_patiently(&first, "restart", &mut buf);
        assert!(r.ok, "the first 60 of 100 go");
        count(&r, &mut go);
    }
    // Let the last count reach the peers before the kill: once one of them
    // answers with 40 left, it has heard all 60.
    let other = req(&ctx, &trio.endpoint(1));
    let end = Instant::now() + DEADLINE;
    loop {
        assert!(Instant::now() < end, "the peer never heard the 60 grants");
        let r = ask_patiently(&other, "restart", &mut buf);
        count(&r, &mut go);
        if r.remaining <= 39 {
            break;
        }
    }
    drop(first);
    trio.kill(0);
    trio.restart(0);
    let restarted = req(&ctx, &trio.endpoint(0));
    // Ask the restarted locker and a survivor in turn until both say sorry.
    let mut sorry_streak = 0;
    for i in 0..400 {
        let socket = if i % 2 == 0 { &restarted } else { &other };
        let r = ask_patiently(socket, "restart", &mut buf);
        count(&r, &mut go);
        sorry_streak = if r.ok { 0 } else { sorry_streak + 1 };
        if sorry_streak >= 20 {
            break;
        }
    }
    assert!(sorry_streak >= 20, "never saturated: {go:?}");
    assert_eq!(go.len(), 1, "the test crossed a slot boundary: {go:?}");
    let total = *go.values().next().unwrap();
    eprintln!("kill -9 and restart mid-slot: {total} go in the slot of 100");
    assert!(total <= 101, "the restart handed out the slot again: {total} go in one slot");
    assert!(total >= 99, "the slot was not filled: {total} go");
}

#[test]
fn a_locker_whose_peers_are_all_gone_serves_alone() {
    let mut trio = Peered::start(3, &["--max-requests", "1000", "--in-seconds", "1", "--peer-grace", "0.3"]);
    trio.wait_joined(2);
    trio.kill(1);
    trio.kill(2);
    trio.kill(0);
    trio.restart(0);
    // Joining: sorry at first, then alone after the grace period.
    let ctx = zmq::Context::new();
    let socket = req(&ctx, &trio.endpoint(0));
    let mut buf = Vec::new();
    let started = Instant::now();
    let first = ask(&socket, "alone", &mut buf);
    assert!(!first.ok, "a restarted locker grants nothing before it learned the counts or the grace ran out");
    let mut granted = 0;
    while Instant::now() < started + DEADLINE && granted < 50 {
        if ask(&socket, "alone", &mut buf).ok {
            granted += 1;
        }
    }
    assert_eq!(granted, 50, "alone, the locker must serve");
    let stats = locker::Client::new([trio.endpoint(0)], DEADLINE).unwrap().stats().unwrap();
    assert!(!stats.joining);
    assert!(stats.peers.iter().all(|p| !p.live), "{stats:?}");
}

#[test]
fn stats_show_each_peer_with_its_age_and_clock_offset() {
    let trio = Peered::start(3, &[]);
    trio.wait_joined(2);
    let s = locker::Client::new([trio.endpoint(0)], DEADLINE).unwrap().stats().unwrap();
    assert_eq!(s.node.as_deref(), Some("node-0"));
    let names: Vec<&str> = s.peers.iter().map(|p| p.node.as_str()).collect();
    assert_eq!(names, ["node-1", "node-2"]);
    for p in &s.peers {
        assert!(p.live && !p.flagged, "{p:?}");
        assert!(p.last_heard_ms < 1000, "{p:?}");
        assert!(p.clock_offset_ms.abs() < 100.0, "{p:?}");
    }
    let out = crate::support::run_locker(&["stats", "--connect", &trio.endpoint(0)]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("node: node-0") && text.contains("node-1") && text.contains("clock_offset_ms"), "{text}");
}
