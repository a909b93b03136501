//! Peered lockers sharing a token bucket, on a simulated clock
//! (`locker::sim`): saturated, they grant within `burst + rate x elapsed`
//! and fill it; a burst on one of three takes the whole bucket, as its
//! peers give it their tokens while its asks are held, and they then find
//! the bucket empty.
//!
//! What this does not test: real sockets between lockers (see
//! `properties::conserved_bucket` for adversarial schedules).

use locker::core::{Algorithm, Limit, Locker, Nanos, Quota};
use locker::wire::{self, Ask, GoReply, Reply};

use crate::group::{joined, MS};

/// Refill rate (per second) and burst of the shared bucket.
const RATE: u64 = 1000;
const BURST: u64 = 100;

/// A locker whose only limit, "smooth", is a bucket of `burst` refilled at
/// `rate` per `secs`.
fn bucket(rate: u32, secs: f64, burst: u32) -> impl Fn() -> Locker + Clone {
    move || {
        let quota = Quota::new(rate, secs).unwrap();
        let smooth = Limit::with_algorithm("smooth", quota, Algorithm::token_bucket(burst).unwrap()).unwrap();
        Locker::new(Limit::new(locker::core::DEFAULT_LIMIT, quota).unwrap(), vec![smooth], 1000)
    }
}

/// Six callers, two on each locker, asking "smooth" as fast as they can
/// (each call 50 µs, a sorry retried after its hint) from `start` until
/// `end`: the go in all.
fn saturate(g: &mut locker::sim::Group, start: Nanos, end: Nanos) -> u64 {
    let mut next: Vec<Nanos> = (0..6).map(|i| start + i * 9_000).collect();
    let ask = Ask::new().limit("smooth").key("shared");
    let mut granted = 0;
    while let Some((at, c)) = next.iter().enumerate().map(|(i, &t)| (t, i)).min().filter(|&(t, _)| t < end) {
        g.advance_to(at);
        let r = g.ask(c % 3, &ask).expect("an answer");
        granted += u64::from(r.ok);
        next[c] = g.now() + if r.ok { 50_000 } else { r.retry_after_ms.max(1) * MS };
    }
    granted
}

#[test]
fn three_saturated_lockers_share_one_token_bucket_within_the_stated_bound() {
    let mut g = joined(3, 11, bucket(RATE as u32, 1.0, BURST as u32));
    let start = g.now();
    let elapsed = 1500 * MS;
    let granted = saturate(&mut g, start, start + elapsed);
    let secs = elapsed as f64 / 1e9;
    // Alone, one bucket grants at most this over the run; the three
    // lockers' shares of it, together, too.
    let one_bucket = BURST as f64 + RATE as f64 * secs;
    eprintln!("token bucket shared by three saturated lockers: {granted} go, one bucket {one_bucket:.0}");
    assert!(granted as f64 <= one_bucket, "{granted} go, above {one_bucket:.0}");
    // Saturated: the whole burst and every refill, but the part of a
    // token each locker's share may hold at the end.
    assert!(granted as f64 >= one_bucket - 3.0, "only {granted} go of {one_bucket:.0}: not filled");
}

/// Issue 15, for token buckets: a burst on one of three peered lockers
/// takes the whole `burst`: it spends its own 2 tokens at once, and its
/// asks are held while its peers give it theirs (within a round trip or
/// two); the peers then hold nothing.
#[test]
fn a_burst_on_one_of_three_lockers_takes_the_whole_bucket() {
    // One token per 12 s: nothing refills during the test.
    let mut g = joined(3, 12, bucket(5, 60.0, 5));
    let ask = |cost| Ask::new().limit("smooth").key("burst").cost(cost);
    let body = |cost| {
        let mut body = Vec::new();
        wire::encode(&ask(cost).to_map(), &mut body);
        body
    };
    let tokens: Vec<_> = (0..6).map(|_| g.send(0, &body(1))).collect();
    g.advance(100 * MS);
    let go = tokens
        .iter()
        .map(|&t| wire::decode_reply(&g.reply(t).expect("answered within the hold")).unwrap())
        .filter(|r: &Reply<GoReply>| matches!(r, Reply::Answer(r) if r.ok))
        .count();
    assert_eq!(go, 5, "the whole burst of 5, then sorry");
    for i in 1..3 {
        assert_eq!(g.ask(i, &ask(0)).unwrap().remaining, 0, "locker {i} gave all it held");
        assert!(!g.ask(i, &ask(1)).unwrap().ok, "locker {i} grants nothing of an empty bucket");
    }
}
