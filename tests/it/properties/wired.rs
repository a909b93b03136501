//! Lockers wired by hand for the peered properties: each generated ask
//! goes to one locker at a literal instant, and the counts it publishes
//! reach the others after the step's delay (or never), merged latest first
//! so that they also arrive out of order. No service, no clock, no socket:
//! the core alone.

use locker::core::{Count, Limit, Locker, PeerView, PermitAsk};
use proptest::prelude::*;

pub(super) const MS: u64 = 1_000_000;

/// One generated ask: when (ns into the slot), which locker, and how long
/// its counts take to reach the others (`None`: lost).
#[derive(Debug, Clone)]
pub(super) struct Step {
    pub at_ns: u64,
    pub locker: usize,
    pub delay_ns: Option<u64>,
}

/// `n` lockers of `limit`, each told that all `n` are live, ranked 0 to
/// `n - 1`.
pub(super) fn lockers(n: usize, limit: &Limit) -> Vec<Locker> {
    (0..n)
        .map(|rank| {
            let mut l = Locker::new(limit.clone(), vec![], 10);
            l.peers().set_view(PeerView { live: n as u32, rank: rank as u32, ..PeerView::ALONE });
            l
        })
        .collect()
}

/// What is on the way: (deliver at, to, count as the receiver names the sender).
pub(super) type Wire = Vec<(u64, usize, Count)>;

/// Sends `counts` from `from` to every other locker, arriving `delay` later.
pub(super) fn send(wire: &mut Wire, n: usize, from: usize, counts: &[Count], now: u64, delay: Option<u64>) {
    let Some(delay) = delay else { return };
    for to in (0..n).filter(|&to| to != from) {
        for c in counts {
            // Node 0 is the receiver itself; the sender is from + 1.
            wire.push((now + delay, to, Count { node: from as u32 + 1, ..c.clone() }));
        }
    }
}

/// Merges every count due by `now`, latest first (reordered).
pub(super) fn deliver(lockers: &mut [Locker], wire: &mut Wire, now: u64) {
    let (mut due, later): (Wire, Wire) = wire.drain(..).partition(|(at, _, _)| *at <= now);
    *wire = later;
    due.reverse();
    for (_, to, count) in due {
        lockers[to].peers().merge(now, &count);
    }
}

/// Asks once per step at `start + step.at_ns`; returns the go per locker
/// and the asks per locker.
pub(super) fn run(lockers: &mut [Locker], wire: &mut Wire, start: u64, steps: &[Step]) -> (Vec<u32>, Vec<u32>) {
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

/// Up to 200 asks crowded into the first `within_ns` of a slot, whose
/// counts all arrive within the in-flight window (2 ms): lockers deciding
/// at once on views that lack each other's latest grants.
pub(super) fn prompt(within_ns: u64) -> impl Strategy<Value = Vec<Step>> {
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
