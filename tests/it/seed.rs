//! The seed's own client, unchanged, against a locker on the seed's limit:
//! it gets go and sorry, and no epoch slot holds more than 5 go.
//!
//! The client prints the time it read before sending each ask, and sends
//! the next ask `interval` after printing the reply, so a go was decided
//! between its own line's time and the next line's less the interval: a
//! slot is judged on the go certainly decided in it (see `per_slot`).

use std::sync::Mutex;

use crate::support::{per_slot, run_seed_client, Daemon};

const SLOT_NS: u128 = 800_000_000;
const MAX: u32 = 5;
const INTERVAL_NS: u128 = 50_000_000;

#[test]
fn the_seed_client_gets_go_and_sorry_and_never_more_than_max_per_slot() {
    let d = Daemon::start(&["--max-requests", "5", "--in-seconds", "0.8"]);
    let text = run_seed_client(&d.endpoint, 20, "0.05");
    let replies: Vec<(u128, &str)> = text
        .lines()
        .map(|l| {
            let (t, r) = l.split_once(' ').unwrap_or_else(|| panic!("bad line {l:?}"));
            ((t.parse::<f64>().unwrap() * 1e9) as u128, r)
        })
        .collect();
    assert_eq!(replies.len(), 20, "{text}");
    assert!(replies.iter().any(|r| r.1 == "go"), "{text}");
    assert!(replies.iter().any(|r| r.1 == "sorry"), "{text}");
    assert!(replies.iter().all(|r| r.1 == "go" || r.1 == "sorry"), "{text}");
    // The last reply came some time before the client exited: a slot later at most.
    let next_times = replies.iter().skip(1).map(|r| r.0.saturating_sub(INTERVAL_NS)).chain([u128::MAX]);
    let stamps: Vec<(u128, u128)> = replies
        .iter()
        .zip(next_times)
        .filter(|(r, _)| r.1 == "go")
        .map(|(r, before_next)| (r.0, before_next.max(r.0).min(r.0 + SLOT_NS)))
        .collect();
    let per_slot = per_slot(&Mutex::new(stamps), SLOT_NS);
    assert!(per_slot.values().all(|n| n.at_least <= MAX), "go per slot {per_slot:?}\n{text}");
}
