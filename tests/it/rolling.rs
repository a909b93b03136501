//! Rolling windows end to end: on the seam (`Service::respond`, and two
//! services peered by hand), then against the real binary, where the
//! seed's client and busy Rust clients never see more than max_requests go
//! within any interval of length in_seconds, slot boundaries or not, on one
//! locker and on three peered ones; and a saturated caller still gets
//! nearly max_requests per interval.
//!
//! A go was decided between its request's send and its reply's receipt, so
//! grants whose whole [send, receive] spans lie within one interval of
//! length T were certainly decided within it: counting those can only
//! under-count, and any excess it finds is real.

use std::time::{Duration, Instant};

use locker::core::{Algorithm, Limit, Locker, NodeKey, Peering, PeeringSettings, Quota, DEFAULT_LIMIT};
use locker::service::Service;
use locker::wire::{self, Ask, GoReply, Reply, RequestMap, StatsReply};

use crate::support::{req, run_seed_client, Daemon, Peered};

const MS: u64 = 1_000_000;
/// The start of a 0.8 s slot of a fixed window, which a rolling window ignores.
const T0: u64 = 2_125_000_000 * 800 * MS;

/// A service whose default limit rolls: 5 in any 0.8 s.
fn rolling_locker() -> Locker {
    let quota = Quota::new(5, 0.8).unwrap();
    Locker::new(Limit::with_algorithm(DEFAULT_LIMIT, quota, Algorithm::RollingWindow).unwrap(), vec![], 10)
}

fn respond(s: &mut Service, now: u64, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    s.respond(now, body, &mut out, &mut ());
    out
}

fn answer<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> T {
    match wire::decode_reply(bytes).expect("a decodable reply") {
        Reply::Answer(r) => r,
        Reply::Refused(e) => panic!("{e}"),
    }
}

fn ask_at(s: &mut Service, now: u64, a: Ask) -> GoReply {
    let mut body = Vec::new();
    wire::encode(&a.to_map(), &mut body);
    answer(&respond(s, now, &body))
}

#[test]
fn the_seed_form_gets_no_second_burst_across_a_slot_boundary() {
    let mut s = Service::new(rolling_locker());
    for i in 0..5 {
        assert_eq!(respond(&mut s, T0 - 50 * MS + i, b"let me go"), b"go");
    }
    assert_eq!(respond(&mut s, T0, b"let me go"), b"sorry", "a fixed window would start afresh here");
    assert_eq!(respond(&mut s, T0 + 749 * MS, b"let me go"), b"sorry");
    assert_eq!(respond(&mut s, T0 + 750 * MS, b"let me go"), b"go", "the first go is 0.8 s old");
}

#[test]
fn replies_say_exactly_when_the_oldest_grant_leaves() {
    let mut s = Service::new(rolling_locker());
    let first = ask_at(&mut s, T0, Ask::new().key("k").cost(2));
    assert_eq!((first.ok, first.remaining, first.reset_after_ms), (true, 3, 800));
    assert!(ask_at(&mut s, T0 + 300 * MS, Ask::new().key("k").cost(3)).ok);
    let sorry = ask_at(&mut s, T0 + 500 * MS, Ask::new().key("k"));
    assert_eq!((sorry.ok, sorry.retry_after_ms, sorry.reset_after_ms), (false, 300, 600));
    let reserved = ask_at(&mut s, T0 + 500 * MS, Ask::new().key("k").cost(3).max_wait_ms(700));
    assert_eq!((reserved.ok, reserved.wait_ms), (true, Some(600)), "3 fit once all of T0 + 300 ms leave");
    let peek = ask_at(&mut s, T0 + 500 * MS, Ask::new().key("k").cost(0));
    assert_eq!((peek.ok, peek.remaining), (false, 0));
    let stats: StatsReply = answer(&respond(&mut s, T0, &stats_body()));
    assert_eq!(stats.limits[0].algorithm, "rolling-window");
    assert_eq!((stats.limits[0].go, stats.limits[0].sorry, stats.limits[0].waited), (3, 2, 1));
}

fn stats_body() -> Vec<u8> {
    let mut body = Vec::new();
    wire::encode(&RequestMap { op: Some("stats"), ..Default::default() }, &mut body);
    body
}

fn peered(id: &str, now: u64) -> Service {
    let settings = PeeringSettings::new(
        NodeKey { id: id.into(), incarnation: now },
        vec!["tcp://peer".into()],
        500 * MS,
        800 * MS,
    );
    Service::peered(rolling_locker(), Peering::new(settings, now), now)
}

fn outbox(s: &mut Service, now: u64) -> Vec<Vec<u8>> {
    let mut msgs = Vec::new();
    s.publish(now, |m| msgs.push(m.to_vec()));
    msgs
}

fn deliver(to: &mut Service, now: u64, msgs: &[Vec<u8>]) {
    for m in msgs {
        assert!(to.on_peer(now, 0, m), "a peer message was not understood");
    }
}

#[test]
fn peers_count_each_others_grants_until_their_sub_slot_leaves_the_window() {
    let (mut a, mut b) = (peered("a", T0), peered("b", T0));
    for round in 0..3 {
        let now = T0 + round * 10 * MS;
        let (from_a, from_b) = (outbox(&mut a, now), outbox(&mut b, now));
        deliver(&mut b, now, &from_a);
        deliver(&mut a, now, &from_b);
    }
    let now = T0 + 100 * MS;
    // Spaced beyond the in-flight window, so the share rule stays out of it.
    for i in 0..3 {
        assert!(ask_at(&mut a, now + i * 5 * MS, Ask::new().key("k")).ok);
    }
    deliver(&mut b, now + 20 * MS, &outbox(&mut a, now + 20 * MS));
    let r = ask_at(&mut b, now + 30 * MS, Ask::new().key("k"));
    assert_eq!((r.ok, r.remaining), (true, 1), "3 granted by a, 1 by b, of 5");
    // The last permit goes to one locker at a time, by turns of 8 ms.
    let last = (31..60).map(|ms| now + ms * MS).find(|&t| ask_at(&mut b, t, Ask::new().key("k")).ok);
    let last = last.expect("b's turn came");
    let sorry = ask_at(&mut b, last, Ask::new().key("k"));
    assert!(!sorry.ok);
    // a's first grant, at T0 + 100 ms, is counted to the end of its
    // sub-slot of 12.5 ms: until T0 + 112.5 ms + 0.8 s.
    assert_eq!(sorry.retry_after_ms, (T0 + 912_500_000 - last).div_ceil(MS), "{sorry:?}");
    assert!(ask_at(&mut b, T0 + 912_500_000, Ask::new().key("k")).ok);
}

#[test]
fn a_starting_locker_learns_the_counts_from_a_snapshot() {
    let mut a = peered("a", T0);
    let now = T0 + 600 * MS; // a's grace has run out: it serves alone
    for i in 0..3 {
        assert!(ask_at(&mut a, now + i * 5 * MS, Ask::new().key("k")).ok);
    }
    // a's repair of those counts goes out before c listens.
    assert!(!outbox(&mut a, now + 15 * MS).is_empty());
    let mut c = peered("c", now + 20 * MS);
    assert!(!ask_at(&mut c, now + 20 * MS, Ask::new().key("k")).ok, "joining: sorry until it has the counts");
    for round in 0..3 {
        let at = now + (20 + round * 10) * MS;
        let (from_a, from_c) = (outbox(&mut a, at), outbox(&mut c, at));
        deliver(&mut c, at, &from_a);
        deliver(&mut a, at, &from_c);
    }
    let peek = ask_at(&mut c, now + 60 * MS, Ask::new().key("k").cost(0));
    assert_eq!((peek.ok, peek.remaining), (true, 2), "3 of 5 granted by a before c started");
}

/// One go: when its request left and its reply arrived, in seconds since
/// the test's origin.
#[derive(Debug, Clone, Copy)]
struct Go {
    sent: f64,
    received: f64,
}

/// The most grants certainly decided within one interval of `window` seconds.
fn most_in_any_window(goes: &[Go], window: f64) -> usize {
    let mut goes = goes.to_vec();
    goes.sort_by(|a, b| a.received.total_cmp(&b.received));
    let mut worst = 0;
    for (j, end) in goes.iter().enumerate() {
        let from = end.received - window;
        // Earlier receipts before `from` were also sent before it.
        let inside = goes[..=j].iter().rev().take_while(|g| g.received > from).filter(|g| g.sent > from).count();
        worst = worst.max(inside);
    }
    worst
}

/// Grants received within `windows` intervals of `window` seconds from the
/// first one's send: a lower bound of those decided then.
fn filled(goes: &[Go], window: f64, windows: u32) -> usize {
    let first = goes.iter().map(|g| g.sent).fold(f64::INFINITY, f64::min);
    goes.iter().filter(|g| g.received < first + window * f64::from(windows)).count()
}

/// Asks `endpoint` for `key` as fast as one client can until `end`; returns the goes.
fn saturate_one(origin: Instant, endpoint: &str, key: &str, end: Instant) -> Vec<Go> {
    let ctx = zmq::Context::new();
    let socket = req(&ctx, endpoint);
    let mut body = Vec::new();
    wire::encode(&Ask::new().key(key).to_map(), &mut body);
    let mut goes = Vec::new();
    while Instant::now() < end {
        let sent = origin.elapsed().as_secs_f64();
        socket.send(&body[..], 0).expect("send");
        let reply = socket.recv_bytes(0).expect("a reply within the deadline");
        let received = origin.elapsed().as_secs_f64();
        match wire::decode_reply::<GoReply>(&reply).expect("a go reply") {
            Reply::Answer(r) if r.ok => goes.push(Go { sent, received }),
            Reply::Answer(_) => {}
            Reply::Refused(why) => panic!("refused: {why}"),
        }
    }
    goes
}

/// Goes of `clients` clients per endpoint saturating `key` for `run`.
fn saturate(endpoints: &[String], clients: usize, key: &str, run: Duration) -> Vec<Go> {
    let origin = Instant::now();
    let end = origin + run;
    let handles: Vec<_> = endpoints
        .iter()
        .flat_map(|ep| std::iter::repeat_n(ep.clone(), clients))
        .map(|ep| {
            let key = key.to_owned();
            std::thread::spawn(move || saturate_one(origin, &ep, &key, end))
        })
        .collect();
    handles.into_iter().flat_map(|h| h.join().expect("client thread")).collect()
}

#[test]
fn the_seed_client_never_sees_more_than_five_go_in_any_0_8_s() {
    let d = Daemon::start(&["--algorithm", "rolling-window", "--max-requests", "5", "--in-seconds", "0.8"]);
    // 10 ms apart for 2.6 s: across three slot boundaries of a fixed window.
    let text = run_seed_client(&d.endpoint, 260, "0.01");
    // The client stamps a line just before it sends, and sends the next
    // request only after the reply: each go was decided between its own
    // stamp and the next line's.
    let lines: Vec<(f64, bool)> = text
        .lines()
        .map(|l| l.split_once(' ').unwrap_or_else(|| panic!("bad line {l:?}")))
        .map(|(t, reply)| (t.parse::<f64>().unwrap(), reply == "go"))
        .collect();
    let goes: Vec<Go> = (0..lines.len())
        .filter(|&i| lines[i].1)
        .map(|i| Go { sent: lines[i].0, received: lines.get(i + 1).map_or(lines[i].0 + 1.0, |next| next.0) })
        .collect();
    assert!(text.lines().any(|l| l.ends_with(" sorry")), "{text}");
    let worst = most_in_any_window(&goes, 0.8);
    eprintln!("seed client, rolling window of 5 per 0.8 s: {} go, at most {worst} in any 0.8 s", goes.len());
    assert!(worst <= 5, "{worst} go within 0.8 s\n{text}");
    // A caller asking every 10 ms gets a permit back at most 10 ms after it frees.
    let got = filled(&goes, 0.8, 3);
    assert!(got * 100 >= 15 * 95, "only {got} go in three windows of 5\n{text}");
}

#[test]
fn a_saturated_caller_gets_max_per_window_and_never_more() {
    let d = Daemon::start(&["--algorithm", "rolling-window", "--max-requests", "5", "--in-seconds", "0.8"]);
    let goes = saturate(std::slice::from_ref(&d.endpoint), 1, "busy", Duration::from_millis(2500));
    let (worst, got) = (most_in_any_window(&goes, 0.8), filled(&goes, 0.8, 3));
    eprintln!("one saturated caller: {} go, at most {worst} in any 0.8 s, {got} in three windows", goes.len());
    assert!(worst <= 5, "{worst} go within 0.8 s");
    assert!(got * 100 >= 15 * 95, "only {got} go in three windows of 5");
}

/// Saturates three peered lockers sharing a rolling window of `max` per
/// `secs` with two clients each; returns (most in any window, filled in three).
fn saturate_trio(max: u32, secs: f64) -> (usize, usize, usize) {
    let (max, secs) = (max.to_string(), secs.to_string());
    let trio = Peered::start(3, &["--algorithm", "rolling-window", "--max-requests", &max, "--in-seconds", &secs]);
    trio.wait_joined(2);
    let endpoints: Vec<String> = (0..3).map(|i| trio.endpoint(i)).collect();
    let window: f64 = secs.parse().unwrap();
    let goes = saturate(&endpoints, 2, "all-three", Duration::from_secs_f64(window * 3.3));
    (goes.len(), most_in_any_window(&goes, window), filled(&goes, window, 3))
}

#[test]
fn three_saturated_peered_lockers_stay_within_the_bound_in_any_window() {
    // The stated bound is max + the largest cost - 1 (here, max) while
    // counts reach the peers within the in-flight window of 2 ms; one more
    // allows for a loaded machine delaying a count beyond it.
    for (max, secs) in [(5u32, 0.8), (1000, 1.0)] {
        let (all, worst, got) = saturate_trio(max, secs);
        eprintln!(
            "three saturated lockers, {max} per {secs} s: {all} go, at most {worst} in any window, {got} in three"
        );
        let bound = max as usize + 1 + max as usize / 100;
        assert!(worst <= bound, "{worst} go within {secs} s, above {bound}");
        assert!(got * 100 >= 3 * max as usize * 95, "only {got} go in three windows of {max}");
    }
}
