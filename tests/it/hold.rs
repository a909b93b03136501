//! Holding an ask instead of answering sorry. On the service seam with
//! literal instants: held until the slot begins, in arrival order, at that
//! very instant, bounded by --max-parked, each answered once, answered at
//! shutdown; and on a simulated peered group, a plain burst on one of three
//! fresh peers gets its whole quota in its first slot. On real processes,
//! only what needs one: the seed's Python client unchanged gets go for
//! every ask, SIGTERM answers every held ask before the exit, and a held go
//! is in the state file before its reply leaves (kill -9, restart).

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use locker::core::{Limit, Locker, Nanos, Quota, DEFAULT_LIMIT};
use locker::service::{step, Answer, Io, Service, Token};
use locker::wire::{self, Ask, GoReply};
use locker::Client;

use crate::support::{deadline, finals, ready, req, run_seed_client, serve, Daemon, Served, DEADLINE, GONE};

const MS: Nanos = 1_000_000;
/// An instant on an 0.8 s slot boundary.
const T0: Nanos = 2_000_000_000_000 * MS;

/// A lone locker of the seed's 5 per 0.8 s, holding sorry up to `hold_ms`.
fn seed_holding(hold_ms: f64) -> Service {
    let limit = Limit::new(DEFAULT_LIMIT, Quota::new(5, 0.8).unwrap()).unwrap().with_hold(hold_ms).unwrap();
    Service::new(Locker::new(limit, vec![], 1000)).with_max_parked(3)
}

fn plain(s: &mut Service, now: Nanos, token: u64) -> (Answer, Vec<u8>) {
    serve(s, now, token, b"let me go")
}

#[test]
fn a_sorry_within_the_hold_is_held_until_the_slot_begins_and_answered_go_in_arrival_order() {
    let mut s = seed_holding(800.0);
    for i in 0..5 {
        assert_eq!(plain(&mut s, T0 + i * MS, i), (Answer::Now, b"go".to_vec()));
    }
    for i in 5..8 {
        assert_eq!(plain(&mut s, T0 + 700 * MS + i * MS, i).0, Answer::Held, "ask {i} is held");
    }
    assert_eq!(s.status().parked, 3);
    assert_eq!(plain(&mut s, T0 + 790 * MS, 8), (Answer::Now, b"sorry".to_vec()), "no room: sorry at once");
    assert_eq!(deadline(&s), Some(T0 + 800 * MS), "the loop wakes when the next slot begins");
    assert_eq!(ready(&mut s, T0 + 799 * MS), []);
    let ready = ready(&mut s, T0 + 800 * MS);
    assert_eq!(ready, [(5, b"go".to_vec()), (6, b"go".to_vec()), (7, b"go".to_vec())], "in arrival order");
    let stats = s.locker().figures().stats().next().unwrap().1;
    assert_eq!((stats.requests, stats.go, stats.sorry), (9, 8, 1), "a held ask counts once, when answered");
}

#[test]
fn an_ask_that_cannot_go_within_its_hold_gets_sorry_at_once_and_one_held_too_long_gets_sorry_when_it_ends() {
    let mut s = seed_holding(100.0);
    for i in 0..5 {
        let _ = plain(&mut s, T0 + i * MS, i);
    }
    assert_eq!(plain(&mut s, T0 + 10 * MS, 5), (Answer::Now, b"sorry".to_vec()), "the slot ends beyond the hold");
    assert_eq!(plain(&mut s, T0 + 750 * MS, 6).0, Answer::Held);
    // A structured ask names its own hold, longer than the limit's.
    let mut body = Vec::new();
    wire::encode(&Ask::new().cost(5).hold_ms(2_000).to_map(), &mut body);
    assert_eq!(serve(&mut s, T0 + 760 * MS, 7, &body).0, Answer::Held);
    // The structured ask of 5 waits for the slot after (one permit is gone).
    assert_eq!(ready(&mut s, T0 + 800 * MS), [(6, b"go".to_vec())]);
    assert_eq!(deadline(&s), Some(T0 + 1600 * MS));
    let ready = ready(&mut s, T0 + 1600 * MS);
    assert_eq!(ready.iter().map(|r| r.0).collect::<Vec<_>>(), [7]);
    let reply: GoReply = rmp_serde::from_slice(&ready[0].1).unwrap();
    assert!(reply.ok, "{reply:?}");
}

#[test]
fn at_shutdown_every_held_ask_is_answered_once() {
    let mut s = seed_holding(800.0);
    for i in 0..5 {
        let _ = plain(&mut s, T0 + i * MS, i);
    }
    for i in 5..8 {
        assert_eq!(plain(&mut s, T0 + 100 * MS, i).0, Answer::Held);
    }
    let finals = finals(&mut s, T0 + 200 * MS);
    assert_eq!(finals, [(5, b"sorry".to_vec()), (6, b"sorry".to_vec()), (7, b"sorry".to_vec())]);
    assert_eq!((s.status().parked, ready(&mut s, T0 + 900 * MS)), (0, vec![]), "nothing is left to answer");
}

fn wall_ns() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos()
}

/// What each caller heard: the instant of each reply and the reply.
type Heard = Vec<Vec<(Nanos, Vec<u8>)>>;

/// Callers that each send the seed's plain ask, and again 50 µs after each
/// reply, until `end`, to one service; plays the daemon's loop: a held ask
/// is answered by a loop turn at the service's next deadline.
fn callers(s: &mut Service, callers: usize, from: Nanos, end: Nanos) -> Heard {
    let mut heard: Heard = vec![Vec::new(); callers];
    let mut asks: Vec<Option<Nanos>> = (0..callers).map(|i| Some(from + i as u64 * 1_000)).collect();
    loop {
        let asking = asks.iter().enumerate().filter_map(|(i, t)| t.map(|t| (t, i))).filter(|&(t, _)| t < end).min();
        let due = deadline(s).filter(|_| s.status().parked > 0);
        match (asking, due) {
            (Some((t, i)), d) if d.is_none_or(|d| t < d) => {
                let (answer, out) = serve(s, t, i as u64, b"let me go");
                if answer == Answer::Now {
                    heard[i].push((t, out));
                    asks[i] = Some(t + 50_000);
                } else {
                    asks[i] = None;
                }
            }
            (_, Some(d)) => {
                for (token, out) in ready(s, d) {
                    heard[token as usize].push((d, out));
                    asks[token as usize] = Some(d + 50_000);
                }
            }
            _ => return heard,
        }
    }
}

#[test]
fn held_asks_go_exactly_as_their_slot_begins_and_no_slot_gets_more_than_five() {
    let slot = 800 * MS;
    let mut s = seed_holding(800.0).with_max_parked(100);
    let heard = callers(&mut s, 3, T0 + 3 * MS, T0 + 2_600 * MS);
    let all: Vec<&(Nanos, Vec<u8>)> = heard.iter().flatten().collect();
    assert!(all.iter().all(|(_, r)| r == b"go"), "every ask went");
    let mut per_slot = std::collections::BTreeMap::new();
    for (t, _) in &all {
        *per_slot.entry(t / slot).or_insert(0u32) += 1;
    }
    // Slots 0 to 3 hold the 2.6 s; the three callers held at its end go
    // as slot 4 begins.
    let go: Vec<u32> = per_slot.values().copied().collect();
    assert_eq!(go, [5, 5, 5, 5, 3], "go per slot: {per_slot:?}");
    // From the second slot on, the three held asks go at the very instant
    // it begins, and two of their next asks 50 µs later fill it.
    for n in 1..4 {
        let mut into: Vec<Nanos> =
            all.iter().filter(|(t, _)| t / slot == T0 / slot + n).map(|(t, _)| t % slot).collect();
        into.sort_unstable();
        assert_eq!(into, [0, 0, 0, 50_000, 50_000], "slot {n}: go at these nanoseconds into it");
    }
}

#[test]
fn a_flood_of_held_asks_is_bounded_and_each_ask_is_answered_exactly_once() {
    let limit = Limit::new(DEFAULT_LIMIT, Quota::new(1, 1.0).unwrap()).unwrap().with_hold(1500.0).unwrap();
    let mut s = Service::new(Locker::new(limit, vec![], 1000)).with_max_parked(50);
    let asked = T0 + 10 * MS;
    let mut answers = vec![Vec::new(); 200];
    for token in 0..200u64 {
        let (answer, out) = serve(&mut s, asked, token, b"let me go");
        if answer == Answer::Now {
            answers[token as usize].push(out);
        }
    }
    assert_eq!(s.status().parked, 50, "held up to --max-parked, the rest answered at once");
    while let Some(due) = deadline(&s).filter(|_| s.status().parked > 0) {
        for (token, out) in ready(&mut s, due) {
            answers[token as usize].push(out);
        }
        assert!(s.status().parked <= 50);
    }
    assert!(answers.iter().all(|a| a.len() == 1), "each ask answered exactly once");
    let go = answers.iter().filter(|a| a[0] == b"go").count();
    // One permit in the slot of the asks, one in the next (within the hold
    // of 1.5 s); the slot after that begins past every hold.
    assert_eq!(go, 2, "one permit in each of the two slots the holds reach");
    let stats = s.locker().figures().stats().next().unwrap().1;
    assert_eq!((stats.requests, stats.go, stats.sorry), (200, 2, 198), "each ask counted once");
}

/// Issue 15 with holding: a plain burst of 5 on one of three fresh peered
/// lockers (5 per 0.8 s), just after a slot begins, gets go for each ask:
/// a sorry that only waits for the locker's grants in flight is held until
/// they reach the peers, not answered.
#[test]
fn a_plain_burst_on_one_of_three_fresh_peers_gets_its_whole_quota_in_its_first_slot() {
    let slot = 800 * MS;
    let mut g = crate::group::joined(3, 31, crate::group::fixed(5, 800));
    g.advance_to((g.now() / slot + 1) * slot + 5 * MS);
    let first_slot = g.now() / slot;
    let mut replies = Vec::new();
    for _ in 0..5 {
        let token = g.send(0, b"let me go");
        // Held: the loop turns (hearing the peers) until it is answered.
        let reply = loop {
            if let Some(reply) = g.reply(token) {
                break reply;
            }
            let due = g.next_deadline(0).expect("a held ask wakes the loop");
            g.advance_to(due.max(g.now() + 1));
        };
        replies.push(reply);
    }
    assert_eq!(g.now() / slot, first_slot, "the burst stayed in one slot");
    assert!(replies.iter().all(|r| r == b"go"), "the whole quota in the first slot: {replies:?}");
}

#[test]
fn a_rolling_window_holds_an_ask_until_the_exact_instant_its_oldest_grant_leaves() {
    let quota = Quota::new(2, 1.0).unwrap();
    let limit = Limit::with_algorithm(DEFAULT_LIMIT, quota, locker::core::Algorithm::RollingWindow).unwrap();
    let mut s = Service::new(Locker::new(limit.with_hold(1_000.0).unwrap(), vec![], 1000));
    let t = T0 + 123 * MS;
    assert_eq!(plain(&mut s, t, 0).1, b"go");
    assert_eq!(plain(&mut s, t + 300 * MS, 1).1, b"go");
    assert_eq!(plain(&mut s, t + 400 * MS, 2).0, Answer::Held);
    assert_eq!(deadline(&s), Some(t + 1_000 * MS), "when the first grant stops counting");
    assert_eq!(ready(&mut s, t + 1_000 * MS - 1), []);
    assert_eq!(ready(&mut s, t + 1_000 * MS), [(2, b"go".to_vec())]);
}

#[test]
fn the_seeds_client_unchanged_gets_go_for_every_ask_with_a_hold_of_800_ms() {
    let d = Daemon::start(&["--max-requests", "5", "--in-seconds", "0.8", "--hold-ms", "800"]);
    let out = run_seed_client(&d.endpoint, 12, "0");
    let replies: Vec<&str> = out.lines().filter_map(|l| l.split_whitespace().nth(1)).collect();
    assert_eq!(replies.len(), 12, "{out}");
    assert!(replies.iter().all(|r| *r == "go"), "every ask went: {out}");
}

#[test]
fn sigterm_answers_every_held_ask_before_the_locker_exits() {
    let mut d = Daemon::start(&["--max-requests", "1", "--in-seconds", "2", "--hold-ms", "5000"]);
    let ctx = zmq::Context::new();
    let sockets: Vec<zmq::Socket> = (0..10).map(|_| req(&ctx, &d.endpoint)).collect();
    for s in &sockets {
        s.send(&b"let me go"[..], 0).unwrap();
    }
    let mut client = Client::new([d.endpoint.as_str()], DEADLINE).unwrap();
    let deadline = Instant::now() + DEADLINE;
    while client.stats().unwrap().parked < 9 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    let stop = Instant::now();
    d.signal("TERM");
    let replies: Vec<Vec<u8>> = sockets.iter().map(|s| s.recv_bytes(0).expect("answered before the exit")).collect();
    let status = d.wait_exit(DEADLINE).expect("exits after SIGTERM");
    assert!(status.success(), "{status:?}");
    assert!(stop.elapsed() < Duration::from_secs(2), "stopped within the deadline: {:?}", stop.elapsed());
    assert_eq!(replies.iter().filter(|r| *r == b"go").count(), 1, "one permit, the rest sorry: {replies:?}");
}

#[test]
fn a_held_ask_that_goes_is_in_the_state_file_before_its_reply_leaves() {
    let dir = std::env::temp_dir().join(format!("locker-hold-it-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let state = dir.join("s.log").to_str().unwrap().to_owned();
    let args = ["--max-requests", "1", "--in-seconds", "2", "--hold-ms", "3000", "--state", state.as_str()];
    let mut d = Daemon::start(&args);
    let ctx = zmq::Context::new();
    let socket = req(&ctx, &d.endpoint);
    let ask = |s: &zmq::Socket| {
        s.send(&b"let me go"[..], 0).unwrap();
        s.recv_bytes(0).unwrap()
    };
    assert_eq!(ask(&socket), b"go");
    assert_eq!(ask(&socket), b"go", "held until the next slot");
    let slot = wall_ns() / 2_000_000_000;
    d.signal("KILL");
    d.wait_exit(GONE).expect("gone after SIGKILL");
    let again = Daemon::start(&["--max-requests", "1", "--in-seconds", "2", "--state", state.as_str()]);
    let r = Client::new([again.endpoint.as_str()], DEADLINE).unwrap().ask(&Ask::new()).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    if wall_ns() / 2_000_000_000 != slot {
        eprintln!("the slot ended during the restart: nothing to check");
        return;
    }
    assert!(!r.ok, "the held go was recorded before its reply: the slot is spent after the restart ({r:?})");
}

/// Limit `x`: 2 per second, held up to 1.5 s.
fn two_per_second_held() -> Service {
    let limit = Limit::new("x", Quota::new(2, 1.0).unwrap()).unwrap().with_hold(1_500.0).unwrap();
    let default = Limit::new(DEFAULT_LIMIT, Quota::new(1, 1.0).unwrap()).unwrap();
    Service::new(Locker::new(default, vec![limit], 1000))
}

fn structured(s: &mut Service, now: Nanos, token: u64, ask: &Ask) -> (Answer, Option<GoReply>) {
    let mut body = Vec::new();
    wire::encode(&ask.to_map(), &mut body);
    let (answer, out) = serve(s, now, token, &body);
    (answer, (answer == Answer::Now).then(|| rmp_serde::from_slice(&out).unwrap()))
}

#[test]
fn an_asks_own_short_hold_behind_a_queue_gets_sorry_at_once_and_a_longer_one_waits_its_turn() {
    let mut s = two_per_second_held();
    let x = Ask::new().limit("x").key("k");
    for t in 0..2 {
        assert!(structured(&mut s, T0 + (100 + t) * MS, t, &x).1.unwrap().ok);
    }
    assert_eq!(structured(&mut s, T0 + 200 * MS, 2, &x).0, Answer::Held, "held for the next slot");
    let (answer, reply) = structured(&mut s, T0 + 300 * MS, 3, &x.hold_ms(50));
    assert_eq!(answer, Answer::Now, "the queue moves at T0 + 1 s, after this ask's hold of 50 ms");
    assert!(!reply.unwrap().ok, "sorry at once");
    assert_eq!(structured(&mut s, T0 + 310 * MS, 4, &x.hold_ms(900)).0, Answer::Held, "its hold reaches the slot");
    let ready: Vec<_> = ready(&mut s, T0 + 1_000 * MS)
        .into_iter()
        .map(|(token, out)| (token, rmp_serde::from_slice::<GoReply>(&out).unwrap().ok))
        .collect();
    assert_eq!(ready, [(2, true), (4, true)], "in arrival order, both in the new slot");
}

#[test]
fn an_ask_behind_a_head_that_waits_longer_is_answered_when_its_own_hold_ends() {
    let quota = Quota::new(2, 1.0).unwrap();
    let limit = Limit::with_algorithm("x", quota, locker::core::Algorithm::RollingWindow).unwrap();
    let default = Limit::new(DEFAULT_LIMIT, Quota::new(1, 1.0).unwrap()).unwrap();
    let mut s = Service::new(Locker::new(default, vec![limit.with_hold(1_500.0).unwrap()], 1000));
    let x = Ask::new().limit("x").key("k");
    let t = T0 + 123 * MS;
    assert!(structured(&mut s, t, 0, &x).1.unwrap().ok);
    assert!(structured(&mut s, t + 300 * MS, 1, &x).1.unwrap().ok);
    // The head needs both permits: it can go only when the second grant
    // leaves, at t + 1.3 s.
    assert_eq!(structured(&mut s, t + 400 * MS, 2, &x.cost(2)).0, Answer::Held);
    let head_wake = deadline(&s).unwrap();
    let hold = (head_wake - (t + 400 * MS)) / MS + 50;
    assert_eq!(
        structured(&mut s, t + 400 * MS, 3, &x.hold_ms(hold)).0,
        Answer::Held,
        "its hold reaches the head's wake"
    );
    let mut answered = Replies::default();
    let mut now = t + 400 * MS;
    while let Some(due) = deadline(&s).filter(|_| s.status().parked > 0) {
        now = due;
        step::turn(&mut s, now, &mut (), &mut answered, &mut Vec::new());
        answered.at(now);
    }
    let answered = answered.0;
    let own = answered.iter().find(|(token, _, _)| *token == 3).expect("answered");
    let head = answered.iter().find(|(token, _, _)| *token == 2).expect("answered");
    assert!(head.2 > own.2, "the head waited longer than the ask behind it: {answered:?}");
    assert!(own.2 <= t + 400 * MS + hold * MS, "answered by the end of its own hold: {answered:?}");
    assert!(now > t + 400 * MS, "{answered:?}");
}

/// The replies a loop step sends: token, go, and the instant (set by `at`).
#[derive(Default)]
struct Replies(Vec<(Token, bool, Nanos)>);

impl Replies {
    fn at(&mut self, now: Nanos) {
        for r in self.0.iter_mut().filter(|r| r.2 == 0) {
            r.2 = now;
        }
    }
}

impl Io for Replies {
    fn reply(&mut self, token: Token, body: &[u8]) {
        let reply: GoReply = rmp_serde::from_slice(body).unwrap();
        self.0.push((token, reply.ok, 0));
    }
}

#[test]
fn an_ask_whose_own_hold_is_too_long_is_refused_at_once_even_behind_a_queue() {
    let mut s = two_per_second_held();
    let x = Ask::new().limit("x").key("k");
    for t in 0..2 {
        assert!(structured(&mut s, T0 + (100 + t) * MS, t, &x).1.unwrap().ok);
    }
    assert_eq!(structured(&mut s, T0 + 200 * MS, 2, &x).0, Answer::Held, "a queue on the key");
    let mut body = Vec::new();
    wire::encode(&x.hold_ms(60_001).to_map(), &mut body);
    let (answer, out) = serve(&mut s, T0 + 300 * MS, 3, &body);
    assert_eq!(answer, Answer::Now, "not parked behind the queue");
    let error = wire::decode_reply::<GoReply>(&out);
    assert!(matches!(&error, Ok(wire::Reply::Refused(e)) if e.contains("hold_ms 60001")), "{error:?}");
}

/// A clock a test sets, for a locker served in this process.
#[derive(Clone)]
struct SetClock(std::sync::Arc<std::sync::atomic::AtomicU64>);

impl locker::daemon::server::LoopClock for SetClock {
    fn now(&self) -> Nanos {
        self.0.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// The daemon's own loop, on real sockets, on a clock the test moves: a
/// held ask is answered when that clock reaches the next slot, not before.
#[test]
fn a_served_locker_on_a_clock_the_test_sets_answers_a_held_ask_when_that_clock_reaches_the_next_slot() {
    let clock = SetClock(std::sync::Arc::new((T0 + 100 * MS).into()));
    let d = Served::start_at(&["--max-requests", "1", "--in-seconds", "1", "--hold-ms", "1000"], clock.clone());
    let ctx = zmq::Context::new();
    let s = req(&ctx, &d.endpoint);
    s.send(&b"let me go"[..], 0).unwrap();
    assert_eq!(s.recv_bytes(0).unwrap(), b"go");
    s.send(&b"let me go"[..], 0).unwrap();
    // Longer than a slot of real time: on the system's clock the ask
    // would have gone in the next real slot by now.
    assert_eq!(s.poll(zmq::POLLIN, 1_100).unwrap(), 0, "held while the locker's clock stands in the slot");
    clock.0.store(T0 + 1_000 * MS, std::sync::atomic::Ordering::Relaxed);
    assert_eq!(s.recv_bytes(0).expect("answered once its clock reaches the next slot"), b"go");
}
