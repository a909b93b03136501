//! The permit pool against a real locker: it takes batches of permits and
//! hands them out locally, and a slot still never gets more than its
//! limit. Each permit is stamped before and after `take`, so a permit
//! handed out across a slot boundary on a busy machine counts as uncertain
//! instead of landing in the wrong slot.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use locker::{Client, PermitPool};

use crate::support::{per_slot, wall_ns, Served};

const MAX: u32 = 300;
const SLOT_NS: u128 = 100_000_000;

#[test]
fn a_permit_pool_hands_out_batches_but_never_more_than_a_slot_allows() {
    let d = Served::start(&["--max-requests", "300", "--in-seconds", "0.1"]);
    let client = Client::new([d.endpoint.as_str()], Duration::from_secs(5)).unwrap();
    let mut pool = PermitPool::new(client, None, Some("batch"), 64);
    let stamps = Mutex::new(Vec::new());
    let (mut go, mut sorry) = (0u64, 0u64);
    let end = Instant::now() + Duration::from_millis(450);
    while Instant::now() < end && go + sorry < 5_000_000 {
        let asked = wall_ns();
        if pool.take().unwrap() {
            go += 1;
            stamps.lock().unwrap().push((asked, wall_ns()));
        } else {
            sorry += 1;
        }
    }
    let per_slot = per_slot(&stamps, SLOT_NS);
    assert!(sorry > 0, "the pool must have run dry: {per_slot:?}");
    assert!(per_slot.values().all(|n| n.at_least <= MAX), "permits per slot {per_slot:?}");
    // Every full slot inside the run was filled from batches of up to 64.
    let mut full = per_slot.values().skip(1).take(per_slot.len().saturating_sub(2));
    assert!(full.all(|n| n.at_most >= MAX - 64), "slots not filled: {per_slot:?}");
}
