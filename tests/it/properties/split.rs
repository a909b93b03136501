//! The split of a fixed window by demand, checked with generated sequences
//! at literal instants: two or three lockers are asked in one slot, their
//! figures reach each other lost, repeated and out of order but repaired by
//! one heartbeat before the slot ends, and in the next slot they are asked
//! again while their counts take a random delay, up to never arriving.
//!
//! What must hold in that next slot: every locker grants at least its share
//! of what it is asked (no false sorry within a share), less only what the
//! others granted beyond their shares, and all together grant at most
//! `max_requests + (N - 1) x pool`, where the pool is what the rounded-down
//! shares leave: shares are never granted twice, and only the pool can be
//! granted by more than one locker on stale views.

use locker::core::{Count, Limit, Locker, PeerView, PermitAsk, Quota, DEFAULT_LIMIT};
use proptest::prelude::*;

const MS: u64 = 1_000_000;
/// The start of a 1 s slot; the demand cutoff is two thirds into it.
const T0: u64 = 1_700_000_000_000 * MS;

/// One generated ask: when (ns into the slot), which locker, and how long
/// its counts take to reach the others (`None`: lost).
#[derive(Debug, Clone)]
struct Step {
    at_ns: u64,
    locker: usize,
    delay_ns: Option<u64>,
}

fn steps(within_ns: u64, max_delay_ns: u64) -> impl Strategy<Value = Vec<Step>> {
    let delay = prop_oneof![Just(None), (0..=max_delay_ns).prop_map(Some)];
    let step = (0..within_ns, 0usize..5, delay).prop_map(|(at_ns, locker, delay_ns)| Step { at_ns, locker, delay_ns });
    prop::collection::vec(step, 0..60).prop_map(|mut s| {
        s.sort_by_key(|s| s.at_ns);
        s
    })
}

fn lockers(n: usize, max: u32) -> Vec<Locker> {
    let limit = Limit::new(DEFAULT_LIMIT, Quota::new(max, 1.0).unwrap()).unwrap();
    (0..n)
        .map(|rank| {
            let mut l = Locker::new(limit.clone(), vec![], 10);
            l.peers().set_view(PeerView { live: n as u32, rank: rank as u32, ..PeerView::ALONE });
            l
        })
        .collect()
}

/// What is on the way: (deliver at, to, count as the receiver names the sender).
type Wire = Vec<(u64, usize, Count)>;

/// Sends `counts` from `from` to every other locker, arriving `delay` later.
fn send(wire: &mut Wire, n: usize, from: usize, counts: &[Count], now: u64, delay: Option<u64>) {
    let Some(delay) = delay else { return };
    for to in (0..n).filter(|&to| to != from) {
        for c in counts {
            // Node 0 is the receiver itself; the sender is from + 1.
            wire.push((now + delay, to, Count { node: from as u32 + 1, ..c.clone() }));
        }
    }
}

/// Merges every count due by `now`, latest first (reordered).
fn deliver(lockers: &mut [Locker], wire: &mut Wire, now: u64) {
    let (mut due, later): (Wire, Wire) = wire.drain(..).partition(|(at, _, _)| *at <= now);
    *wire = later;
    due.reverse();
    for (_, to, count) in due {
        lockers[to].peers().merge(now, &count);
    }
}

/// Asks once per step at `start + step.at_ns`; returns the go per locker
/// and the asks per locker.
fn run(lockers: &mut [Locker], wire: &mut Wire, start: u64, steps: &[Step]) -> (Vec<u32>, Vec<u32>) {
    let n = lockers.len();
    let id = lockers[0].find(None).unwrap();
    let (mut go, mut asked) = (vec![0; n], vec![0; n]);
    for step in steps {
        let (now, from) = (start + step.at_ns, step.locker % n);
        deliver(lockers, wire, now);
        asked[from] += 1;
        if lockers[from].ask(now, &PermitAsk::new(id).key("k")).unwrap().go {
            go[from] += 1;
        }
        let sent: Vec<Count> = lockers[from].peers().take_granted().collect();
        send(wire, n, from, &sent, now, step.delay_ns);
    }
    (go, asked)
}

/// Slot 0 asked `before` (figures on the way, some lost), repaired after
/// the cutoff; returns slot 0's demand and the shares it gives slot 1.
fn split_by(all: &mut [Locker], wire: &mut Wire, max: u32, before: &[Step]) -> Vec<u32> {
    let n = all.len();
    let (_, demand) = run(all, wire, T0, before);
    // One heartbeat's repair after the cutoff republishes every figure,
    // twice over, and everything still on the way arrives before slot 1.
    let repair_at = T0 + 900 * MS;
    for (from, locker) in all.iter_mut().enumerate() {
        let mut counts = Vec::new();
        locker.peers().drain_touched(repair_at, |c| counts.push(c));
        send(wire, n, from, &counts, repair_at, Some(0));
        send(wire, n, from, &counts, repair_at, Some(MS));
    }
    deliver(all, wire, T0 + 999 * MS);
    wire.clear();
    let total: u64 = demand.iter().map(|&d| u64::from(d)).sum();
    demand.iter().map(|&d| (u64::from(max) * u64::from(d)).checked_div(total).unwrap_or(0) as u32).collect()
}

/// Up to 200 asks crowded into the first `within_ns` of a slot, whose
/// counts all arrive within the in-flight window (2 ms): lockers deciding
/// at once on views that lack each other's latest grants.
fn prompt(within_ns: u64) -> impl Strategy<Value = Vec<Step>> {
    let step = (0..within_ns, 0usize..5, 0..=1_900_000u64).prop_map(|(at_ns, locker, d)| Step {
        at_ns,
        locker,
        delay_ns: Some(d),
    });
    prop::collection::vec(step, 0..200).prop_map(|mut s| {
        s.sort_by_key(|s| s.at_ns);
        s
    })
}

proptest! {
    #[test]
    fn shares_are_granted_whole_and_only_the_pool_can_overshoot(
        n in 2usize..=3,
        max in 1u32..40,
        before in steps(660 * MS, 300 * MS),
        after in steps(1000 * MS, 2000 * MS),
    ) {
        let mut all = lockers(n, max);
        let mut wire = Wire::new();
        let shares = split_by(&mut all, &mut wire, max, &before);
        let pool = max - shares.iter().sum::<u32>();
        let (go, asked) = run(&mut all, &mut wire, T0 + 1000 * MS, &after);
        // A share is cut only by what the others granted beyond theirs, out
        // of the pool on stale views: the total check still holds then.
        let beyond: Vec<u32> = go.iter().zip(&shares).map(|(&g, &a)| g.saturating_sub(a)).collect();
        for j in 0..n {
            let cut: u32 = (0..n).filter(|&k| k != j).map(|k| beyond[k]).sum();
            let least = asked[j].min(shares[j]).saturating_sub(cut);
            prop_assert!(go[j] >= least, "locker {} granted {} of its share {} (cut {})", j, go[j], shares[j], cut);
        }
        // Counts that arrive late or never: each locker may take the whole
        // pool on a view that never hears of the others' pool grants.
        let granted: u32 = go.iter().sum();
        let bound = max + (n as u32 - 1) * pool;
        prop_assert!(granted <= bound, "{} go in slot 1 with shares {:?}, above {}", granted, shares, bound);
    }

    /// While counts arrive within the in-flight window, the pool goes by
    /// parts and turns, and no slot holds more than max_requests.
    #[test]
    fn counts_that_arrive_in_time_keep_every_slot_within_max(
        n in 2usize..=5,
        max in 1u32..40,
        before in steps(660 * MS, 300 * MS),
        after in prompt(40 * MS),
    ) {
        let mut all = lockers(n, max);
        let mut wire = Wire::new();
        let shares = split_by(&mut all, &mut wire, max, &before);
        let (go, _) = run(&mut all, &mut wire, T0 + 1000 * MS, &after);
        let granted: u32 = go.iter().sum();
        prop_assert!(granted <= max, "{} go in slot 1 with shares {:?}, above {}", granted, shares, max);
    }
}

/// A case the property above once found: locker 0 grants, and locker 1
/// grants too a nanosecond before locker 0's count reaches it, on a view
/// without it; its own count then takes almost the whole in-flight window
/// to come back. Locker 0's grant must still count as its own in flight
/// when its in-flight window has passed, until every peer grant made
/// without knowing of it has had the time to arrive: otherwise locker 0
/// takes its part of the room again and a slot of max 2 gets 3.
#[test]
fn a_grant_stays_in_flight_until_the_peer_grants_made_without_it_are_back() {
    let step = |at_ns, locker, delay_ns| Step { at_ns, locker, delay_ns: Some(delay_ns) };
    let before: Vec<Step> = [0, 1, 0, 1, 2, 2, 2, 2, 2, 0, 0, 0, 0].iter().map(|&l| step(0, l, 0)).collect();
    let after =
        [step(430_863, 0, 0), step(2_000_000, 0, 755_416), step(2_755_415, 1, 1_852_879), step(4_608_293, 0, 0)];
    let (mut all, mut wire) = (lockers(3, 2), Wire::new());
    assert_eq!(split_by(&mut all, &mut wire, 2, &before), [0, 0, 0], "the whole slot is the pool");
    let (go, _) = run(&mut all, &mut wire, T0 + 1000 * MS, &after);
    assert_eq!(go, [1, 1, 0], "locker 0's second ask waits for locker 1's grant");
}
