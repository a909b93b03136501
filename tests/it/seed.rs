use crate::support::{run_seed_client, Daemon};

const SLOT_S: f64 = 0.8;
const MAX: usize = 5;

/// A go timestamped this close before a slot boundary may have been decided
/// just after it: the seed client reads its clock before it sends.
const BOUNDARY_SLACK_S: f64 = 0.010;

#[test]
fn the_seed_client_gets_go_and_sorry_and_never_more_than_max_per_slot() {
    let d = Daemon::start(&["--max-requests", "5", "--in-seconds", "0.8"]);
    let text = run_seed_client(&d.endpoint, 20, "0.05");
    let replies: Vec<(f64, &str)> = text
        .lines()
        .map(|l| {
            let (t, r) = l.split_once(' ').unwrap_or_else(|| panic!("bad line {l:?}"));
            (t.parse().unwrap(), r)
        })
        .collect();
    assert_eq!(replies.len(), 20, "{text}");
    assert!(replies.iter().any(|r| r.1 == "go"), "{text}");
    assert!(replies.iter().any(|r| r.1 == "sorry"), "{text}");
    assert!(replies.iter().all(|r| r.1 == "go" || r.1 == "sorry"), "{text}");
    let mut per_slot = std::collections::BTreeMap::<u64, usize>::new();
    for (t, _) in replies.iter().filter(|r| r.1 == "go") {
        let mut slot = (t / SLOT_S) as u64;
        let to_end = (slot + 1) as f64 * SLOT_S - t;
        if to_end < BOUNDARY_SLACK_S && per_slot.get(&slot) == Some(&MAX) {
            slot += 1;
        }
        *per_slot.entry(slot).or_default() += 1;
    }
    assert!(per_slot.values().all(|&n| n <= MAX), "go per slot {per_slot:?}\n{text}");
}
