//! Rolling windows on the seam (`Service`, two services peered by hand,
//! and `locker::sim` groups): the seed's form every 10 ms and a saturated
//! caller never see more than max_requests go within any interval of
//! length in_seconds, slot boundaries or not, on one locker and on three
//! peered ones, and still get max_requests per interval.
//!
//! Every go has an exact instant here, so "any interval" is checked
//! exactly. What this does not test: the seed's own Python client (`seed`),
//! and the margin from the go to the resource (`seed_scenario`).

use locker::core::{Algorithm, Limit, Locker, Nanos, NodeKey, Peering, PeeringSettings, Quota, DEFAULT_LIMIT};
use locker::service::Service;
use locker::wire::{Ask, GoReply, StatsReply};

use crate::support::{answer, seam, seam_ask, stats_body};

const MS: u64 = 1_000_000;
/// The start of a 0.8 s slot of a fixed window, which a rolling window ignores.
const T0: u64 = 2_125_000_000 * 800 * MS;

/// A service whose default limit rolls: 5 in any 0.8 s.
fn rolling_locker() -> Locker {
    let quota = Quota::new(5, 0.8).unwrap();
    Locker::new(Limit::with_algorithm(DEFAULT_LIMIT, quota, Algorithm::RollingWindow).unwrap(), vec![], 10)
}

fn ask_at(s: &mut Service, now: u64, a: Ask) -> GoReply {
    seam_ask(s, now, &a).expect("an answer")
}

#[test]
fn the_seed_form_gets_no_second_burst_across_a_slot_boundary() {
    let mut s = Service::new(rolling_locker());
    for i in 0..5 {
        assert_eq!(seam(&mut s, T0 - 50 * MS + i, b"let me go"), b"go");
    }
    assert_eq!(seam(&mut s, T0, b"let me go"), b"sorry", "a fixed window would start afresh here");
    assert_eq!(seam(&mut s, T0 + 749 * MS, b"let me go"), b"sorry");
    assert_eq!(seam(&mut s, T0 + 750 * MS, b"let me go"), b"go", "the first go is 0.8 s old");
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
    let stats: StatsReply = answer(&seam(&mut s, T0, &stats_body())).unwrap();
    assert_eq!(stats.limits[0].algorithm, "rolling-window");
    let l = &stats.limits[0];
    assert_eq!((l.go, l.sorry, l.waited, l.peeks), (3, 1, 1, 1), "a peek is neither go nor sorry");
}

fn peered(id: &str, now: u64) -> Service {
    let settings = PeeringSettings::new(
        NodeKey { id: id.into(), incarnation: now },
        vec!["tcp://peer".into()],
        500 * MS,
        800 * MS,
    );
    crate::support::first_run(Service::peered(rolling_locker(), Peering::new(settings, now), now), now)
}

fn outbox(s: &mut Service, now: u64) -> Vec<Vec<u8>> {
    crate::support::published(s, now)
}

fn deliver(to: &mut Service, now: u64, msgs: &[Vec<u8>]) {
    for m in msgs {
        assert!(locker::service::step::peer(to, now, 0, m), "a peer message was not understood");
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
    // Of 5 rights, a holds 3 (its place by id, "a" before "b, takes the
    // remainder) and b holds 2.
    for i in 0..3 {
        assert!(ask_at(&mut a, now + i * 10 * MS, Ask::new().key("k")).ok);
    }
    deliver(&mut b, now + 25 * MS, &outbox(&mut a, now + 25 * MS));
    let r = ask_at(&mut b, now + 30 * MS, Ask::new().key("k"));
    assert_eq!((r.ok, r.remaining), (true, 1), "3 granted by a, 1 by b, of 5");
    assert!(ask_at(&mut b, now + 31 * MS, Ask::new().key("k")).ok, "b's second right");
    let sorry = ask_at(&mut b, now + 32 * MS, Ask::new().key("k"));
    assert!(!sorry.ok);
    // a's first grant, at T0 + 100 ms, is counted to the end of its
    // sub-slot of 12.5 ms: until T0 + 112.5 ms + 0.8 s.
    assert_eq!(sorry.retry_after_ms, (T0 + 912_500_000 - now - 32 * MS).div_ceil(MS), "{sorry:?}");
    // Then the permit is free again, but it is a's: b asks a for it (a
    // sorry after a round trip) and a, having callers of its own, grants it.
    let short = ask_at(&mut b, T0 + 912_500_000, Ask::new().key("k"));
    assert!(!short.ok && short.retry_after_ms <= 4, "{short:?}");
    assert!(ask_at(&mut a, T0 + 912_500_000, Ask::new().key("k")).ok);
}

#[test]
fn a_starting_locker_learns_the_counts_from_a_snapshot() {
    let mut a = peered("a", T0);
    // a's grace ran out at 500 ms with its peer unheard: it serves its own
    // share alone, from the third window after (an earlier run of it may
    // have lent rights until then). Its peer's id unknown, it does not know
    // its place: 2 rights of 5, no remainder.
    assert!(!outbox(&mut a, T0 + 600 * MS).is_empty(), "a's loop turns: it has joined, alone");
    let now = T0 + 2_500 * MS;
    for i in 0..2 {
        let r = ask_at(&mut a, now + i * 5 * MS, Ask::new().key("k"));
        assert!(r.ok, "{r:?}");
    }
    assert!(!ask_at(&mut a, now + 10 * MS, Ask::new().key("k")).ok, "a holds no third right");
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
    assert_eq!((peek.ok, peek.remaining), (true, 3), "2 of 5 granted by a before c started");
}

/// The most go within any interval of `window` (half-open: a permit
/// granted at t is free again at t + window), among go at `instants`.
fn most_in_any_window(instants: &[Nanos], window: Nanos) -> usize {
    let mut sorted = instants.to_vec();
    sorted.sort_unstable();
    sorted
        .iter()
        .enumerate()
        .map(|(j, &end)| sorted[..=j].iter().filter(|&&t| t + window > end).count())
        .max()
        .unwrap_or(0)
}

/// The go within `windows` intervals of `window` from the first go.
fn filled(instants: &[Nanos], window: Nanos, windows: u64) -> usize {
    let first = instants.iter().copied().min().expect("at least one go");
    instants.iter().filter(|&&t| t < first + window * windows).count()
}

const WINDOW: Nanos = 800 * MS;

#[test]
fn the_seed_form_every_10_ms_never_gets_more_than_five_go_in_any_0_8_s() {
    let mut s = Service::new(rolling_locker());
    // 10 ms apart for 2.6 s: across three slot boundaries of a fixed window.
    let asked: Vec<(Nanos, bool)> =
        (0..260).map(|k| T0 + 3 * MS + k * 10 * MS).map(|t| (t, seam(&mut s, t, b"let me go") == b"go")).collect();
    let goes: Vec<Nanos> = asked.iter().filter(|(_, go)| *go).map(|&(t, _)| t).collect();
    assert!(asked.iter().any(|(_, go)| !go), "never a sorry");
    assert_eq!(most_in_any_window(&goes, WINDOW), 5);
    // Each permit frees 0.8 s after its go, and an ask every 10 ms takes it
    // at once: the first go of each window lands on the free instant.
    assert_eq!(filled(&goes, WINDOW, 3), 15, "go in three windows of 5: {goes:?}");
    assert_eq!(goes[5] - goes[0], WINDOW, "the sixth go comes exactly as the first leaves");
}

#[test]
fn a_saturated_caller_gets_max_per_window_and_never_more() {
    let mut s = Service::new(rolling_locker());
    // Asks as fast as it can (a call takes 50 µs), after a sorry at its hint.
    let (mut now, mut goes) = (T0 + 7 * MS, Vec::new());
    while now < T0 + 2500 * MS {
        let r = seam_ask(&mut s, now, &Ask::new().key("busy")).expect("an answer");
        if r.ok {
            goes.push(now);
            now += 50_000;
        } else {
            now += r.retry_after_ms.max(1) * MS;
        }
    }
    assert_eq!(most_in_any_window(&goes, WINDOW), 5);
    assert_eq!(filled(&goes, WINDOW, 3), 15, "go in three windows of 5: {goes:?}");
}

/// Three peered lockers sharing a rolling window of `max` per `window`,
/// two callers on each asking as fast as they can for 3.3 windows (a call
/// takes 50 µs, a sorry is retried at its hint): the instants of the go.
fn saturated_trio(max: u32, window: Nanos, seed: u64) -> Vec<Nanos> {
    let secs = window as f64 / 1e9;
    let mut g = crate::group::joined(3, seed, move || {
        let limit = Limit::with_algorithm(DEFAULT_LIMIT, Quota::new(max, secs).unwrap(), Algorithm::RollingWindow);
        Locker::new(limit.unwrap(), vec![], 10)
    });
    let start = g.now();
    let end = start + window * 33 / 10;
    let mut next: Vec<Nanos> = (0..6).map(|i| start + i * 11_000).collect();
    let mut goes = Vec::new();
    while let Some((at, c)) = next.iter().enumerate().map(|(i, &t)| (t, i)).min().filter(|&(t, _)| t < end) {
        g.advance_to(at);
        let r = g.ask(c % 3, &Ask::new().key("all-three")).expect("an answer");
        if r.ok {
            goes.push(g.now());
        }
        next[c] = g.now() + if r.ok { 50_000 } else { r.retry_after_ms.max(1) * MS };
    }
    goes
}

#[test]
fn three_saturated_peered_lockers_stay_within_the_bound_in_any_window() {
    // Conserved rights: max in any window, whatever the delays; counts
    // take 100 µs here.
    for (max, window) in [(5u32, WINDOW), (1000, 1000 * MS)] {
        let goes = saturated_trio(max, window, u64::from(max));
        let (worst, got) = (most_in_any_window(&goes, window), filled(&goes, window, 3));
        eprintln!(
            "three saturated lockers, {max} per {window} ns: {} go, at most {worst} in any window, {got} in three",
            goes.len()
        );
        assert!(worst <= max as usize, "{worst} go within one window, above {max}");
        assert!(got * 100 >= 3 * max as usize * 95, "only {got} go in three windows of {max}");
    }
}
