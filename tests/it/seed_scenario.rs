//! The seed's scenario, run as a user runs it: the seed's limit (5 per
//! 0.8 s), three peered lockers, eight workers each with all three lockers
//! in its failover list (each starting on a different one, so demand is
//! spread over all three), asking as fast as the replies allow.
//!
//! - With the fixed window, no epoch slot holds more than 5 go, by the true
//!   clock between each ask and its go, through a kill -9 of one
//!   locker and its restart.
//! - With the rolling window and a margin of 20 ms, a stand-in resource
//!   that itself allows 5 in any 0.8 s, and that every worker reaches 0 to
//!   8 ms after each go, refuses nothing (without the margin it refuses
//!   some, in most runs).
//!
//! Workers follow the replies' hints (`retry_after_ms`), as a polite
//! client does; nothing waits on a fixed sleep for the lockers.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::support::{per_slot, stamping, wall_ns, workers, OnGo, Peered};

const SLOT_NS: u128 = 800_000_000;
const WORKERS: usize = 8;

#[test]
fn the_seeds_limit_on_three_peered_lockers_never_puts_six_go_in_an_epoch_slot_through_a_kill_and_restart() {
    let mut group = Peered::start(3, &["--max-requests", "5", "--in-seconds", "0.8"]);
    group.wait_joined(2);
    let endpoints: Vec<String> = (0..3).map(|i| group.endpoint(i)).collect();
    let (stamps, on_go) = stamping();
    let start = Instant::now();
    let end = start + Duration::from_millis(6_400);
    let mut running = workers(&endpoints, WORKERS, 0, end, &on_go);

    thread::sleep(Duration::from_millis(2_000).saturating_sub(start.elapsed()));
    group.kill(1);
    thread::sleep(Duration::from_millis(3_200).saturating_sub(start.elapsed()));
    group.restart(1);
    // The restarted locker answers on a new port: two more workers start on it.
    let mut after = endpoints.clone();
    after[1] = group.endpoint(1);
    running.extend(workers(&after, 2, 1, end, &on_go));
    let goes: usize = running.into_iter().map(|w| w.join().unwrap()).sum();

    let per_slot = per_slot(&stamps, SLOT_NS);
    let (first, last) = (per_slot.keys().next().copied(), per_slot.keys().last().copied());
    let full: Vec<u32> =
        per_slot.iter().filter(|(s, _)| Some(**s) != first && Some(**s) != last).map(|(_, n)| n.at_most).collect();
    let over: Vec<_> = per_slot.iter().filter(|(_, n)| n.at_least > 5).collect();
    eprintln!("{goes} go in {} slots: {:?}", per_slot.len(), per_slot.values().collect::<Vec<_>>());
    assert!(over.is_empty(), "slots with more than 5 go: {over:?} (all: {per_slot:?})");
    let filled: u32 = full.iter().sum();
    assert!(
        filled * 10 >= full.len() as u32 * 5 * 8,
        "saturated slots are at least 80 % full, kill and restart included: {per_slot:?}"
    );
}

/// A stand-in for the paid API: it allows 5 in any 0.8 s by the instant
/// each call reaches it, and refuses the rest.
struct Resource {
    arrivals: VecDeque<Instant>,
    served: usize,
    refused: usize,
}

impl Resource {
    fn call(&mut self) {
        let now = Instant::now();
        while self.arrivals.front().is_some_and(|&t| now.duration_since(t) >= Duration::from_millis(800)) {
            self.arrivals.pop_front();
        }
        if self.arrivals.len() >= 5 {
            self.refused += 1;
        } else {
            self.arrivals.push_back(now);
            self.served += 1;
        }
    }
}

#[test]
fn the_seeds_limit_as_a_rolling_window_with_a_margin_never_has_a_call_refused_by_the_resource() {
    // The margin covers the way's 0 to 8 ms and what a busy machine adds
    // to a worker's sleep: with 10 ms, one run in about twenty beside a
    // concurrent build saw a call refused.
    let args = ["--max-requests", "5", "--in-seconds", "0.8", "--algorithm", "rolling-window", "--margin-ms", "20"];
    let group = Peered::start(3, &args);
    group.wait_joined(2);
    let endpoints: Vec<String> = (0..3).map(|i| group.endpoint(i)).collect();
    let resource = Arc::new(Mutex::new(Resource { arrivals: VecDeque::new(), served: 0, refused: 0 }));
    let on_go: OnGo = {
        let resource = resource.clone();
        Arc::new(move |_asked| {
            // The way to the resource: 0 to 8 ms, varying from call to call
            // (the clock's low digits stand in for a random number).
            thread::sleep(Duration::from_micros((wall_ns() % 8_000) as u64));
            resource.lock().unwrap().call()
        })
    };
    let end = Instant::now() + Duration::from_millis(4_000);
    let goes: usize = workers(&endpoints, WORKERS, 0, end, &on_go).into_iter().map(|w| w.join().unwrap()).sum();
    let r = resource.lock().unwrap();
    eprintln!("{goes} go: the resource served {} and refused {}", r.served, r.refused);
    assert_eq!(r.refused, 0, "the resource refused calls the lockers said go to");
    assert!(r.served >= 4 * 5, "at least 5 per 0.8 s over 4 s were served: {}", r.served);
}
