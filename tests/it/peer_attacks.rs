//! The peer link under attack, with real processes on loopback: a rogue
//! publisher bound at a listed peer address (implausible counts, a flood of
//! made-up node ids), a peer frozen with SIGSTOP under load, and two lockers
//! that define one limit differently. Each test is bounded in messages and
//! time (a few seconds).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use locker::core::{Limit, Quota, DEFAULT_LIMIT};
use locker::wire::{self, PeerCount, PeerKind, PeerLimit, PeerMsg, PeerNode, StatsReply};
use locker::{Ask, Client};

use crate::peering::{ask, saturate};
use crate::support::{req, round_trip, wait_for_room, Daemon, Peered, DEADLINE};

/// The limits every locker here serves: 1000 go per 1 s slot.
const LIMITS: [&str; 4] = ["--max-requests", "1000", "--in-seconds", "1"];

fn wall_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64
}

/// A process that binds the PUB address a locker lists as its peer and
/// says whatever it likes, knowing the protocol (and the limits' digests)
/// as well as a real locker does.
struct Rogue {
    _ctx: zmq::Context,
    socket: zmq::Socket,
    endpoint: String,
}

impl Rogue {
    fn bind() -> Rogue {
        let ctx = zmq::Context::new();
        let socket = ctx.socket(zmq::PUB).unwrap();
        socket.set_linger(0).unwrap();
        socket.set_sndhwm(100_000).unwrap();
        socket.bind("tcp://127.0.0.1:*").unwrap();
        let endpoint = socket.get_last_endpoint().unwrap().unwrap();
        Rogue { _ctx: ctx, socket, endpoint }
    }

    /// A locker whose one configured peer is this rogue.
    fn victim(&self) -> Daemon {
        let mut args = vec!["--peer-bind", "tcp://127.0.0.1:*", "--peer", &self.endpoint, "--node-id", "victim"];
        args.extend(["--peer-grace", "0.2"]);
        args.extend(LIMITS);
        Daemon::start(&args)
    }

    fn send(&self, msg: &PeerMsg) {
        let mut body = Vec::new();
        wire::encode(msg, &mut body);
        self.socket.send(body, 0).unwrap();
    }

    /// A heartbeat from node "rogue", with the digest a real peer would send.
    fn beat(&self) {
        let digest = Limit::new(DEFAULT_LIMIT, Quota::new(1000, 1.0).unwrap()).unwrap().digest();
        self.send(&PeerMsg {
            kind: PeerKind::Beat,
            nodes: vec![PeerNode("rogue".into(), 1)],
            at: wall_ns(),
            joining: false,
            done: false,
            counts: vec![],
            limits: vec![PeerLimit(DEFAULT_LIMIT.into(), digest)],
            asked: vec![],
            seen: vec![],
        });
    }

    /// Counts for the current slot: `(node index, key, count)`, with the
    /// nodes listed after the sender.
    fn counts(&self, nodes: &[String], counts: &[(u32, &str, u32)]) {
        let slot = wall_ns() / 1_000_000_000;
        let mut all = vec![PeerNode("rogue".into(), 1)];
        all.extend(nodes.iter().map(|id| PeerNode(id.clone(), 1)));
        self.send(&PeerMsg {
            kind: PeerKind::Counts,
            nodes: all,
            at: wall_ns(),
            joining: false,
            done: false,
            counts: counts
                .iter()
                .map(|&(n, key, c)| PeerCount(DEFAULT_LIMIT.into(), Some(key.into()), slot, n, c))
                .collect(),
            limits: vec![],
            asked: vec![],
            seen: vec![],
        });
    }
}

fn stats(endpoint: &str) -> StatsReply {
    Client::new([endpoint], DEADLINE).unwrap().stats().expect("stats")
}

/// Sends heartbeats until the locker lists the rogue as a live peer.
fn until_heard(rogue: &Rogue, victim: &Daemon) {
    let end = Instant::now() + DEADLINE;
    loop {
        rogue.beat();
        let s = stats(&victim.endpoint);
        if !s.joining && s.peers.iter().any(|p| p.live) {
            return;
        }
        assert!(Instant::now() < end, "the locker never heard the rogue: {s:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_rogue_count_of_u32_max_blocks_nothing() {
    let rogue = Rogue::bind();
    let victim = rogue.victim();
    until_heard(&rogue, &victim);
    let ctx = zmq::Context::new();
    let socket = req(&ctx, &victim.endpoint);
    let mut buf = Vec::new();
    let end = Instant::now() + DEADLINE;
    // A plausible count (the whole slot) is indistinguishable from a busy
    // peer and blocks its key for the slot; 2^32-1 is refused. Repeated,
    // since a slot may end between the counts and the asks.
    loop {
        rogue.beat();
        rogue.counts(&[], &[(0, "targeted", u32::MAX), (0, "plausible", 1000)]);
        std::thread::sleep(Duration::from_millis(5));
        let plausible = ask(&socket, "plausible", &mut buf);
        let targeted = ask(&socket, "targeted", &mut buf);
        let rejected = stats(&victim.endpoint).peers.first().map_or(0, |p| p.rejected);
        if !plausible.ok && rejected > 0 {
            assert!(targeted.ok, "a count of 2^32-1 blocked the key");
            assert_eq!(targeted.remaining, 999);
            return;
        }
        assert!(targeted.ok, "a count of 2^32-1 blocked the key");
        assert!(Instant::now() < end, "the rogue's counts never arrived (rejected {rejected})");
    }
}

/// The median of `n` plain round trips, in microseconds.
fn median_latency_us(socket: &zmq::Socket, n: usize) -> u128 {
    let mut times: Vec<u128> = (0..n)
        .map(|_| {
            let start = Instant::now();
            round_trip(socket, b"let me go");
            start.elapsed().as_micros()
        })
        .collect();
    times.sort_unstable();
    times[n / 2]
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).expect("VmRSS");
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Floods `rogue` with counts naming 250 made-up node ids each, from
/// `first` on, until `stop` or `messages` were sent; returns how many ids.
fn flood(rogue: &Rogue, first: u64, messages: u64, stop: &AtomicBool) -> u64 {
    let mut sent = 0;
    for m in 0..messages {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        if m % 64 == 0 {
            rogue.beat();
        }
        let ids: Vec<String> = (0..250).map(|i| format!("made-up-{}", first + sent + i)).collect();
        let counts: Vec<(u32, &str, u32)> = (1..=250).map(|n| (n, "k", 1)).collect();
        rogue.counts(&ids, &counts);
        sent += 250;
    }
    sent
}

#[test]
fn a_node_id_flood_leaves_memory_request_cost_and_shutdown_bounded() {
    let rogue = Rogue::bind();
    let mut victim = rogue.victim();
    until_heard(&rogue, &victim);
    let ctx = zmq::Context::new();
    let socket = req(&ctx, &victim.endpoint);
    median_latency_us(&socket, 200); // warm up
    let before_us = median_latency_us(&socket, 300);
    let before_kib = rss_kib(victim.pid());

    // 250,000 made-up ids, then until the locker has read them all.
    let ids = flood(&rogue, 0, 1000, &AtomicBool::new(false));
    let end = Instant::now() + DEADLINE;
    let s = loop {
        let s = stats(&victim.endpoint);
        if s.peers[0].rejected >= ids / 2 {
            break s;
        }
        assert!(Instant::now() < end, "the flood never arrived: {s:?}");
        std::thread::sleep(Duration::from_millis(20));
    };
    let runs = s.peer_runs.expect("peered stats");
    assert!(runs <= locker::core::peering::MAX_RUNS_PER_PEER as u64, "{runs} runs in the node table");
    let grown_kib = rss_kib(victim.pid()).saturating_sub(before_kib);
    assert!(grown_kib < 16 * 1024, "{ids} made-up ids grew the RSS by {grown_kib} KiB");
    let after_us = median_latency_us(&socket, 300);
    eprintln!("node-id flood of {ids}: {runs} runs kept, RSS +{grown_kib} KiB, median {before_us} us -> {after_us} us");
    assert!(after_us <= 5 * before_us.max(20), "requests slowed from {before_us} us to {after_us} us");

    // SIGTERM in the middle of an endless flood stops it within a second.
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));
    let flooder = {
        let (stop, sent) = (Arc::clone(&stop), Arc::clone(&sent));
        std::thread::spawn(move || {
            let n = flood(&rogue, 1_000_000, 100_000, &stop);
            sent.store(n, Ordering::Relaxed);
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    victim.signal("TERM");
    let started = Instant::now();
    let status = victim.wait_exit(Duration::from_secs(1));
    stop.store(true, Ordering::Relaxed);
    flooder.join().unwrap();
    let status = status.unwrap_or_else(|| panic!("still running 1 s after SIGTERM under a flood"));
    assert!(status.success(), "{status:?}");
    eprintln!("stopped {:?} after SIGTERM, {} ids flooded", started.elapsed(), sent.load(Ordering::Relaxed));
}

#[test]
fn a_peer_frozen_under_load_stays_within_the_bound_and_warns_of_no_skew() {
    let mut args = LIMITS.to_vec();
    args.extend(["--peer-grace", "1"]);
    let trio = Peered::start_logged(3, &args);
    trio.wait_joined(2);
    let endpoints: Vec<String> = (0..3).map(|i| trio.endpoint(i)).collect();
    let frozen = trio.lockers[0].as_ref().unwrap();
    let per_slot: BTreeMap<u64, u64> = std::thread::scope(|s| {
        let load = s.spawn(|| saturate(&endpoints, 2, "frozen", Duration::from_millis(4300), 1000));
        std::thread::sleep(Duration::from_millis(1000));
        frozen.signal("STOP");
        std::thread::sleep(Duration::from_millis(2000));
        frozen.signal("CONT");
        load.join().unwrap()
    });
    eprintln!("a peer frozen for 2 s under load: go per slot {per_slot:?}");
    // The stated bound for three lockers asking one permit at a time.
    let bound = 1000 + 2;
    for (slot, &n) in &per_slot {
        assert!(n <= bound, "slot {slot} granted {n}, above {bound}");
    }
    let log = frozen.log();
    assert!(log.contains("paused longer than the peer-dead time"), "no rejoin logged:\n{log}");
    for (i, d) in trio.lockers.iter().enumerate() {
        let log = d.as_ref().unwrap().log();
        assert!(!log.contains("peer clock differs"), "locker {i} warned of a false clock skew:\n{log}");
    }
}

#[test]
fn a_limit_defined_differently_is_flagged_and_not_mixed() {
    // Slots of 10 s, so that both asks fall in one slot.
    let (a_pub, b_pub) = (free_pub(), free_pub());
    let peered = |me: &str, other: &str, max: &'static str| {
        let args = ["--peer-bind", me, "--peer", other, "--max-requests", max, "--in-seconds", "10"];
        Daemon::start(&args)
    };
    let a = peered(&a_pub, &b_pub, "1000");
    let b = peered(&b_pub, &a_pub, "2000");
    let end = Instant::now() + DEADLINE;
    let flagged = loop {
        let s = stats(&a.endpoint);
        if let Some(p) = s.peers.iter().find(|p| !p.mismatched_limits.is_empty()) {
            break p.mismatched_limits.clone();
        }
        assert!(Instant::now() < end, "the mismatch was never flagged: {s:?}");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(flagged, [DEFAULT_LIMIT]);
    let mut on_b = Client::new([b.endpoint.as_str()], DEADLINE).unwrap();
    let mut on_a = Client::new([a.endpoint.as_str()], DEADLINE).unwrap();
    // Both asks in one slot: a new slot splits a's limit by the demand of
    // the one before, which b's grant would have made mostly b's.
    wait_for_room(10_000_000_000, Duration::from_secs(5));
    // A cost above half the pool goes on b's turn: the hint says when.
    let taken = loop {
        let r = on_b.ask(&Ask::new().key("k").cost(1500)).unwrap();
        if r.ok || r.retry_after_ms >= r.reset_after_ms || Instant::now() > end {
            break r;
        }
        std::thread::sleep(Duration::from_millis(r.retry_after_ms));
    };
    assert!(taken.ok, "{taken:?}");
    // A heartbeat b sent after the grant has reached a, so its count did
    // too (one connection keeps its messages in order): not added up.
    let granted = Instant::now();
    loop {
        let heard = stats(&a.endpoint).peers[0].last_heard_ms;
        if u128::from(heard + 5) < granted.elapsed().as_millis() {
            break;
        }
        assert!(Instant::now() < end, "a never heard b after the grant");
        std::thread::sleep(Duration::from_millis(5));
    }
    let r = on_a.ask(&Ask::new().key("k")).unwrap();
    assert!(r.ok, "b's 1500 of 2000 spent a's 1000: {r:?}");
    assert_eq!(r.remaining, 999);
}

fn free_pub() -> String {
    format!("tcp://127.0.0.1:{}", crate::support::free_port())
}
