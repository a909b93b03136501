use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use locker::{Client, PermitPool};

use crate::support::Daemon;

const MAX: u64 = 300;
const SLOT_MS: u64 = 100;

#[test]
fn a_permit_pool_hands_out_batches_but_never_more_than_a_slot_allows() {
    let d = Daemon::start(&["--max-requests", "300", "--in-seconds", "0.1"]);
    let client = Client::new([d.endpoint.as_str()], Duration::from_secs(5)).unwrap();
    let mut pool = PermitPool::new(client, None, Some("batch"), 64);
    let mut per_slot = std::collections::BTreeMap::<u64, u64>::new();
    let (mut go, mut sorry) = (0u64, 0u64);
    let end = Instant::now() + Duration::from_millis(450);
    while Instant::now() < end && go + sorry < 5_000_000 {
        if pool.take().unwrap() {
            go += 1;
            let ms = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64;
            *per_slot.entry(ms / SLOT_MS).or_default() += 1;
        } else {
            sorry += 1;
        }
    }
    assert!(sorry > 0, "the pool must have run dry: {per_slot:?}");
    assert!(per_slot.values().all(|&n| n <= MAX), "permits per slot {per_slot:?}");
    // Every full slot inside the run was filled from batches of up to 64.
    let full: Vec<u64> = per_slot.values().copied().skip(1).take(per_slot.len().saturating_sub(2)).collect();
    assert!(full.iter().all(|&n| n >= MAX - 64), "slots not filled: {per_slot:?}");
}
