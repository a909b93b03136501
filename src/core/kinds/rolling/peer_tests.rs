//! Two or three rolling windows sharing one key's count, wired by hand over
//! a network the test controls: each grant's cumulative count reaches the
//! others after a random delay or is lost, and every 100 ms each repairs
//! what it granted since. Checked over every interval of length T.

use super::*;
use crate::core::share::NodeIx;
use proptest::prelude::*;

const MS: Nanos = 1_000_000;
const T0: Nanos = 1_700_000_000_123 * MS;
/// How often each locker republishes what it granted (its heartbeat).
const REPAIR: Nanos = 100 * MS;

/// One generated ask: time moves by `gap` first; `delay` and `lost` are
/// the fate of the count it publishes.
#[derive(Debug, Clone, Copy)]
struct Step {
    gap: Nanos,
    locker: usize,
    cost: u32,
    up_to: bool,
    max_wait: Nanos,
    delay: Nanos,
    lost: bool,
}

fn steps(max_gap: Nanos, max_delay: Nanos, loss: bool) -> impl Strategy<Value = Vec<Step>> {
    let waits = prop_oneof![3 => Just(0), 1 => 0..1_000 * MS];
    let step = (0..max_gap, 0usize..3, 1u32..=4, any::<bool>(), waits, 0..=max_delay, prop::bool::weighted(0.2));
    let step = step.prop_map(move |(gap, locker, cost, up_to, max_wait, delay, lost)| Step {
        gap,
        locker,
        cost,
        up_to,
        max_wait,
        delay,
        lost: lost && loss,
    });
    prop::collection::vec(step, 1..300)
}

/// A count on its way: to whom, from whom, for which sub-slot.
struct Msg {
    due: Nanos,
    to: usize,
    from: usize,
    sub: u64,
    count: u32,
}

/// A grant: when its caller goes, who decided it when, and when each
/// locker learned of it.
#[derive(Debug)]
struct Grant {
    at: Nanos,
    locker: usize,
    n: u32,
    sub: u64,
    /// The own count of its sub-slot once it was granted.
    cumulative: u32,
    decided: Nanos,
    known: [Nanos; 3],
}

struct Sim {
    windows: Vec<RollingWindow>,
    /// Every locker's terms but its rank, which is its index.
    share: Share,
    wire: Vec<Msg>,
    grants: Vec<Grant>,
    next_repair: Nanos,
}

impl Sim {
    fn new(n: usize, quota: Quota, start: Nanos) -> Sim {
        let windows = vec![RollingWindow::new(quota); n];
        let share = Share::new(n as u32, quota.slot_ns());
        Sim { windows, share, wire: Vec::new(), grants: Vec::new(), next_repair: start + REPAIR }
    }

    /// The node index under which a receiver knows locker `from` (0 is itself).
    fn node(from: usize) -> NodeIx {
        from as NodeIx + 1
    }

    fn send(&mut self, from: usize, due: Nanos, sub: u64, count: u32) {
        for to in (0..self.windows.len()).filter(|&to| to != from) {
            self.wire.push(Msg { due, to, from, sub, count });
        }
    }

    /// Merges every count due by `now`, and repairs when a heartbeat is due.
    fn deliver(&mut self, now: Nanos, delay: Nanos) {
        while self.next_repair <= now {
            for from in 0..self.windows.len() {
                let mut counts = Vec::new();
                self.windows[from].drain_touched(|_, sub, count| counts.push((sub, count)));
                for (sub, count) in counts {
                    self.send(from, self.next_repair + delay, sub, count);
                }
            }
            self.next_repair += REPAIR;
        }
        let (due, later): (Vec<Msg>, Vec<Msg>) = self.wire.drain(..).partition(|m| m.due <= now);
        self.wire = later;
        for m in due {
            self.windows[m.to].merge(now, Some("k"), m.sub, Sim::node(m.from), m.count, KeyRoom::Free).unwrap();
            let heard =
                self.grants.iter_mut().filter(|g| g.locker == m.from && g.sub == m.sub && g.cumulative <= m.count);
            for g in heard {
                g.known[m.to] = g.known[m.to].min(now);
            }
        }
    }

    fn run(&mut self, start: Nanos, steps: &[Step], max: u32) {
        let mut now = start;
        for s in steps {
            now += s.gap;
            self.deliver(now, s.delay);
            let from = s.locker % self.windows.len();
            let want = Want { cost: s.cost.min(max), up_to: s.up_to, max_wait: s.max_wait };
            let w = &mut self.windows[from];
            w.advance(now);
            let share = Share { rank: from as u32, ..self.share };
            let v = w.take_shared(now, Some("k"), want, Leeway { room: KeyRoom::Free, share }).unwrap();
            if v.granted > 0 {
                let (sub, cumulative) = w.note_own(Some("k"), now + v.wait);
                let mut known = [Nanos::MAX; 3];
                known[from] = now;
                self.grants.push(Grant {
                    at: now + v.wait,
                    locker: from,
                    n: v.granted,
                    sub,
                    cumulative,
                    decided: now,
                    known,
                });
                if !s.lost {
                    self.send(from, now + s.delay, sub, cumulative);
                }
            }
            self.deliver(now, s.delay);
        }
    }

    /// For every interval of length `window` ending at a grant's instant:
    /// (permits in it, permits in it that the locker deciding its latest
    /// grant had not heard of when it decided).
    fn intervals(&self, window: Nanos) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        for end in &self.grants {
            let inside: Vec<&Grant> = self.grants.iter().filter(|g| g.at <= end.at && g.at + window > end.at).collect();
            let Some(last) = inside.iter().max_by_key(|g| g.decided) else { continue };
            let total = inside.iter().map(|g| u64::from(g.n)).sum();
            let unheard = inside
                .iter()
                .filter(|g| g.locker != last.locker && g.known[last.locker] > last.decided)
                .map(|g| u64::from(g.n))
                .sum();
            out.push((total, unheard));
        }
        out
    }
}

proptest! {
    /// Whatever the delays and losses, an interval of length T holds at
    /// most max plus what the locker deciding its latest grant had not heard.
    #[test]
    fn peers_exceed_max_only_by_what_was_unheard(
        n in 2usize..=3,
        max in prop_oneof![1u32..=10, 65u32..=100],
        tenths in 1u64..=10,
        start in 0..1_000_000 * MS,
        delay_ms in 0u64..=50,
        steps in steps(20 * MS, 50 * MS, true),
    ) {
        let quota = Quota::new(max, tenths as f64 / 10.0).unwrap();
        let mut sim = Sim::new(n, quota, T0 + start);
        let steps: Vec<Step> = steps.into_iter().map(|s| Step { delay: s.delay.min(delay_ms * MS), ..s }).collect();
        sim.run(T0 + start, &steps, max);
        for (total, unheard) in sim.intervals(tenths * 100 * MS) {
            prop_assert!(total <= u64::from(max) + unheard, "{} with {} unheard, max {}", total, unheard, max);
        }
    }

    /// While every count arrives within the in-flight window, an interval
    /// of length T holds at most max + the largest cost - 1: lockers split
    /// what is left by turns, and only the turn holder may take a cost
    /// above its share.
    #[test]
    fn peers_heard_in_time_overshoot_by_less_than_one_cost(
        n in 2usize..=3,
        max in prop_oneof![1u32..=10, 65u32..=100],
        tenths in 1u64..=10,
        start in 0..1_000_000 * MS,
        steps in steps(2 * MS, 2 * MS, false),
    ) {
        let quota = Quota::new(max, tenths as f64 / 10.0).unwrap();
        let mut sim = Sim::new(n, quota, T0 + start);
        let d = sim.share.in_flight_window;
        let steps: Vec<Step> = steps.into_iter().map(|s| Step { delay: s.delay.min(d), ..s }).collect();
        sim.run(T0 + start, &steps, max);
        let bound = u64::from(max) + u64::from(4.min(max)) - 1;
        for (total, _) in sim.intervals(tenths * 100 * MS) {
            prop_assert!(total <= bound, "{} in one window, bound {}", total, bound);
        }
    }
}

#[test]
fn three_saturated_peers_fill_the_window_and_stay_within_the_bound() {
    // 5 per 0.8 s and 1000 per second, three lockers asked in turn every
    // 50 us, counts arriving after 1 ms.
    for (max, secs, windows) in [(5, 0.8, 10), (1000, 1.0, 4)] {
        let quota = Quota::new(max, secs).unwrap();
        let mut sim = Sim::new(3, quota, T0);
        let step =
            |i: usize| Step { gap: 50_000, locker: i % 3, cost: 1, up_to: false, max_wait: 0, delay: MS, lost: false };
        let window = quota.slot_ns();
        let steps: Vec<Step> = (0..(windows * window / 50_000) as usize).map(step).collect();
        sim.run(T0, &steps, max);
        let granted: u64 = sim.grants.iter().map(|g| u64::from(g.n)).sum();
        assert!(granted * 100 >= windows * u64::from(max) * 95, "{granted} in {windows} windows of {max}");
        let worst = sim.intervals(window).iter().map(|&(total, _)| total).max().unwrap();
        assert!(worst <= u64::from(max), "{worst} in one window of {max}");
    }
}

#[test]
fn the_first_grant_of_a_new_key_counts_as_in_flight() {
    // Two lockers, 8 per 100 ms, asked at one instant before any count
    // arrives: each may take only its share of what it sees left.
    let quota = Quota::new(8, 0.1).unwrap();
    let mut sim = Sim::new(2, quota, T0);
    let step = |locker, cost| Step { gap: 0, locker, cost, up_to: false, max_wait: 0, delay: MS, lost: false };
    sim.run(T0, &[step(1, 2), step(0, 4), step(0, 4), step(1, 3)], 8);
    let granted: Vec<(usize, u32)> = sim.grants.iter().map(|g| (g.locker, g.n)).collect();
    assert_eq!(granted, [(1, 2), (0, 4)]);
}
