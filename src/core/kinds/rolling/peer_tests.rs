//! Two to four rolling windows sharing one key's rights, wired by hand over
//! a network the test controls: every count, want and gift reaches each
//! other locker after a delay of up to two windows, or twice, or never, and
//! every 100 ms each repairs what it granted, asked or gave since. Checked
//! over every interval of length T: never more than max across them.

use super::*;
use crate::core::limit::LimitId;
use crate::core::share::{Count, Counted, NodeIx, ME};
use proptest::prelude::*;

const MS: Nanos = 1_000_000;
const T0: Nanos = 1_700_000_000_000 * MS;
/// How often each locker republishes what it granted (its heartbeat).
const REPAIR: Nanos = 100 * MS;

/// One generated ask: time moves by `gap` first; `delay`, `lost` and
/// `twice` are the fate of what it publishes.
#[derive(Debug, Clone, Copy)]
struct Step {
    gap: Nanos,
    locker: usize,
    cost: u32,
    up_to: bool,
    delay: Nanos,
    lost: bool,
    twice: bool,
}

fn steps(window: Nanos) -> impl Strategy<Value = Vec<Step>> {
    let delays = prop_oneof![2 => 0..2 * MS, 1 => 0..2 * window];
    let step = (0..window / 4, 0usize..4, 1u32..=2, any::<bool>(), delays, prop::bool::weighted(0.3), any::<bool>());
    let step = step.prop_map(|(gap, locker, cost, up_to, delay, lost, twice)| Step {
        gap,
        locker,
        cost,
        up_to,
        delay,
        lost,
        twice: twice && !lost,
    });
    prop::collection::vec(step, 1..300)
}

/// A count on its way, in the sender's numbering of nodes.
struct Msg {
    due: Nanos,
    to: usize,
    from: usize,
    count: Count,
}

/// Lockers of one rolling window, each a member of the group by its index.
struct Net {
    windows: Vec<RollingWindow>,
    shares: Vec<Share>,
    wire: Vec<Msg>,
    goes: Vec<(Nanos, u32)>,
    next_repair: Nanos,
}

/// Locker `owner`'s index for locker `other` (itself is `ME`).
fn ix(owner: usize, other: usize) -> NodeIx {
    if owner == other {
        ME
    } else {
        other as NodeIx + 1
    }
}

/// Which locker `owner`'s index `node` names.
fn locker_of(owner: usize, node: NodeIx) -> usize {
    if node == ME {
        owner
    } else {
        node as usize - 1
    }
}

impl Net {
    fn new(n: usize, quota: Quota, start: Nanos) -> Net {
        let members = n as u32;
        let shares = (0..members).map(|m| Share { members, member: Some(m), ..Share::new(members, quota.slot_ns()) });
        let windows = vec![RollingWindow::new(quota); n];
        Net { windows, shares: shares.collect(), wire: Vec::new(), goes: Vec::new(), next_repair: start + REPAIR }
    }

    fn send(&mut self, from: usize, now: Nanos, counts: Vec<Count>, s: &Step) {
        if s.lost {
            return;
        }
        for to in (0..self.windows.len()).filter(|&to| to != from) {
            for c in &counts {
                for copy in 0..1 + u64::from(s.twice) {
                    self.wire.push(Msg { due: now + s.delay + copy * MS, to, from, count: c.clone() });
                }
            }
        }
    }

    /// Merges every count due by `now`, publishing the gifts they bring
    /// out, and repairs when a heartbeat is due.
    fn deliver(&mut self, now: Nanos, s: &Step) {
        while self.next_repair <= now {
            for from in 0..self.windows.len() {
                let mut counts = Vec::new();
                let walk = crate::core::share::repair::RepairWalk::new(0, usize::MAX);
                self.windows[from].drain_touched(self.next_repair, &walk, |key, slot, node, n, what| {
                    counts.push(Count::of(what, LimitId(0), key, slot, node, n));
                });
                let at = self.next_repair;
                self.send(from, at, counts, s);
            }
            self.next_repair += REPAIR;
        }
        self.wire.sort_by_key(|m| m.due);
        let k = self.wire.iter().take_while(|m| m.due <= now).count();
        let due: Vec<Msg> = self.wire.drain(..k).collect();
        for m in due {
            let mut c = m.count;
            c.node = ix(m.to, locker_of(m.from, c.node));
            if let Counted::Gave(to) = c.what {
                c.what = Counted::Gave(ix(m.to, locker_of(m.from, to)));
            }
            let mut gifts = Vec::new();
            let share = self.shares[m.to];
            self.windows[m.to]
                .merge_count(now, &c, Leeway { room: KeyRoom::Free, share }, |key, w, to, n| {
                    gifts.push(Count::of(Counted::Gave(to), LimitId(0), key, w, ME, n));
                })
                .unwrap();
            self.send(m.to, now, gifts, s);
        }
    }

    fn ask(&mut self, now: Nanos, s: &Step) {
        let i = s.locker % self.windows.len();
        let want = Want { cost: s.cost, up_to: s.up_to, max_wait: 0 };
        let v =
            self.windows[i].take_shared(now, Some("k"), want, Leeway { room: KeyRoom::Free, share: self.shares[i] });
        let v = v.unwrap();
        if v.go {
            self.goes.push((now + v.wait, v.granted));
        }
        // Grants reach the peers by the repairs (`deliver`), wants at once.
        let mut counts = Vec::new();
        if let Some((w, n)) = self.windows[i].note_wanted(Some("k")) {
            counts.push(Count::of(Counted::Wanted, LimitId(0), Some("k"), w, ME, n));
        }
        self.send(i, now, counts, s);
    }

    fn run(&mut self, start: Nanos, steps: &[Step]) {
        let mut now = start;
        for s in steps {
            now += s.gap;
            self.deliver(now, s);
            self.ask(now, s);
        }
    }

    /// The most go in any interval of length `window`.
    fn worst(&self, window: Nanos) -> u64 {
        let goes = &self.goes;
        let within =
            |end: Nanos| goes.iter().filter(move |&&(t, _)| t <= end && t + window > end).map(|&(_, n)| u64::from(n));
        goes.iter().map(|&(end, _)| within(end).sum()).max().unwrap_or(0)
    }
}

proptest! {
    #[test]
    fn peers_never_grant_more_than_max_in_any_interval_whatever_the_messages_do(
        n in 2usize..=4,
        max in 1u32..10,
        steps in steps(100 * MS),
    ) {
        let quota = Quota::new(max, 0.1).unwrap();
        let mut net = Net::new(n, quota, T0);
        net.run(T0, &steps);
        let worst = net.worst(quota.slot_ns());
        prop_assert!(worst <= u64::from(max), "{} go in one window of {}: {:?}", worst, max, net.goes);
    }
}

#[test]
fn demand_on_one_locker_fills_every_window_from_the_second_with_timely_messages() {
    for (n, max) in [(2usize, 1u32), (3, 5), (4, 7), (3, 100)] {
        let quota = Quota::new(max, 0.1).unwrap();
        let window = quota.slot_ns();
        let start = (T0 / window + 1) * window;
        let mut net = Net::new(n, quota, start);
        let timely = Step { gap: 0, locker: n - 1, cost: 1, up_to: false, delay: MS / 10, lost: false, twice: false };
        let mut now = start;
        while now < start + 5 * window {
            now += MS / 4;
            net.deliver(now, &timely);
            net.ask(now, &timely);
        }
        let per_window = |k: u64| -> u64 {
            let (from, to) = (start + k * window, start + (k + 1) * window);
            net.goes.iter().filter(|&&(t, _)| t >= from && t < to).map(|&(_, g)| u64::from(g)).sum()
        };
        let got: Vec<u64> = (0..5).map(per_window).collect();
        // A coarse window (above 64) gives back a permit up to a sub-slot late.
        let least = if max > 64 { u64::from(max) * 64 / 66 } else { u64::from(max) };
        assert!(got[1..].iter().all(|&g| g >= least && g <= u64::from(max)), "{n} lockers, {max}: {got:?}");
        assert!(net.worst(window) <= u64::from(max));
    }
}
