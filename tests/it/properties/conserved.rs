//! Conserved permits on the simulated group (`locker::sim`): two to five
//! peered lockers sharing a fixed window, under generated schedules of
//! asks and faults (delays from nothing to two slots, jitter that reorders,
//! loss up to a half, duplication, pauses, partitions that heal, kills and
//! restarts). Whatever the schedule, no slot holds more than
//! `max_requests` go across the group; with timely messages, demand on
//! every locker fills every slot.
//!
//! A go is counted in the slot of the locker that granted it (its group
//! clock, read from the reply's `reset_after_ms`): the guarantee is per
//! slot of the group clock. Cases: `PROPTEST_CASES`, else 32. With
//! timely messages, demand on every locker, or on one, fills the slots.

use std::collections::BTreeMap;

use locker::core::Nanos;
use locker::sim::{Group, Link};
use locker::wire::Ask;
use proptest::prelude::*;

use crate::group::{fixed, joined, MS};

/// One thing that happens, after a pause of `gap` microseconds.
#[derive(Debug, Clone)]
pub(crate) enum Event {
    /// Node `node` is asked for `cost` permits.
    Ask { node: usize, cost: u64 },
    /// The network changes for messages sent from now on.
    Link { delay_pct: u64, jitter_pct: u64, loss_pct: u64, dup_pct: u64 },
    /// Node `node` is stopped for `pct` % of a slot.
    Pause { node: usize, pct: u64 },
    /// Nodes `a` and `b` are cut from each other, both ways.
    Cut { a: usize, b: usize },
    /// Every cut heals.
    Heal,
    /// Node `node` is killed (or, if down, restarted).
    Kill { node: usize },
}

pub(crate) fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        8 => (0usize..5, 1u64..3).prop_map(|(node, cost)| Event::Ask { node, cost }),
        1 => (0u64..200, 0u64..100, 0u64..50, 0u64..30)
            .prop_map(|(delay_pct, jitter_pct, loss_pct, dup_pct)| Event::Link { delay_pct, jitter_pct, loss_pct, dup_pct }),
        1 => (0usize..5, 10u64..150).prop_map(|(node, pct)| Event::Pause { node, pct }),
        1 => (0usize..5, 0usize..5).prop_map(|(a, b)| Event::Cut { a, b }),
        1 => Just(Event::Heal),
        1 => (0usize..5).prop_map(|node| Event::Kill { node }),
    ]
}

/// Which nodes of a group are up and not paused, as a schedule's faults
/// left them; `slot` scales the faults' times.
pub(crate) struct Faults {
    slot: Nanos,
    up: Vec<bool>,
    paused_until: Vec<Nanos>,
}

impl Faults {
    pub(crate) fn new(n: usize, slot: Nanos) -> Faults {
        Faults { slot, up: vec![true; n], paused_until: vec![0; n] }
    }

    /// Whether `node` may be asked now.
    pub(crate) fn ready(&self, g: &Group, node: usize) -> bool {
        self.up[node] && self.paused_until[node] <= g.now()
    }

    /// Applies `e` to `g`; an ask is left to the caller, as `(node, cost)`.
    pub(crate) fn apply(&mut self, g: &mut Group, e: &Event) -> Option<(usize, u64)> {
        let n = self.up.len();
        match *e {
            Event::Ask { node, cost } => return Some((node % n, cost)),
            Event::Link { delay_pct, jitter_pct, loss_pct, dup_pct } => {
                let (delay, jitter) = (self.slot * delay_pct / 100, self.slot * jitter_pct / 100);
                g.set_link(Link { delay, jitter, loss: loss_pct as f64 / 100.0 });
                g.set_duplication(dup_pct as f64 / 100.0);
            }
            Event::Pause { node, pct } => {
                let node = node % n;
                if self.ready(g, node) {
                    let d = self.slot * pct / 100;
                    g.pause(node, d);
                    self.paused_until[node] = g.now() + d;
                }
            }
            Event::Cut { a, b } => {
                let (a, b) = (a % n, b % n);
                if a != b {
                    g.set_cut(a, b, true);
                    g.set_cut(b, a, true);
                }
            }
            Event::Heal => (0..n).for_each(|a| (0..n).for_each(|b| g.set_cut(a, b, false))),
            Event::Kill { node } => {
                let node = node % n;
                if self.up[node] {
                    g.kill(node);
                } else {
                    g.restart(node);
                    self.paused_until[node] = 0;
                }
                self.up[node] = !self.up[node];
            }
        }
        None
    }
}

/// A group of `n` lockers at `max` per `slot_ms`, and its bookkeeping.
struct Trial {
    g: Group,
    slot: Nanos,
    max: u32,
    faults: Faults,
    /// Go per slot, as the granting locker numbers its slots.
    per_slot: BTreeMap<u64, u64>,
}

impl Trial {
    fn new(n: usize, max: u32, slot_ms: u64, seed: u64) -> Trial {
        let g = joined(n, seed, fixed(max, slot_ms));
        let slot = slot_ms * MS;
        Trial { g, slot, max, faults: Faults::new(n, slot), per_slot: BTreeMap::new() }
    }

    fn ask(&mut self, node: usize, cost: u64) {
        if !self.faults.ready(&self.g, node) {
            return;
        }
        let cost = cost.min(u64::from(self.max));
        let r = self.g.ask(node, &Ask::new().key("k").cost(cost)).expect("an answer");
        if r.ok {
            // The slot's end on the granting locker's clock, less half a
            // slot, falls in that slot whatever the millisecond rounding.
            let end = self.g.now() + r.reset_after_ms * MS;
            let slot = (end.saturating_sub(self.slot / 2)) / self.slot;
            *self.per_slot.entry(slot).or_insert(0) += u64::from(r.granted.unwrap_or(1));
        }
    }

    fn apply(&mut self, e: &Event) {
        if let Some((node, cost)) = self.faults.apply(&mut self.g, e) {
            self.ask(node, cost);
        }
    }

    fn over(&self) -> Vec<(u64, u64)> {
        self.per_slot.iter().filter(|(_, &n)| n > u64::from(self.max)).map(|(&s, &n)| (s, n)).collect()
    }
}

pub(crate) fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(32)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn no_slot_ever_holds_more_than_max_whatever_the_messages_do(
        n in 2usize..=5,
        max in 1u32..8,
        slot_ms in prop::sample::select(vec![40u64, 100, 300, 800]),
        seed in any::<u64>(),
        events in prop::collection::vec((0u64..60, event()), 1..80),
    ) {
        let mut t = Trial::new(n, max, slot_ms, seed);
        for (gap_pct, e) in &events {
            let at = t.g.now() + t.slot * gap_pct / 100;
            // A paused node must not be asked; the group runs past pauses.
            t.g.advance_to(at);
            t.apply(e);
        }
        prop_assert!(t.over().is_empty(), "slots over {max}: {:?} of {:?}", t.over(), t.per_slot);
    }

    #[test]
    fn with_timely_messages_demand_on_one_locker_fills_every_slot_from_the_second(
        n in 2usize..=5,
        max in 1u32..12,
        slot_ms in prop::sample::select(vec![100u64, 300, 800]),
        busy in 0usize..5,
        seed in any::<u64>(),
    ) {
        let mut t = Trial::new(n, max, slot_ms, seed);
        let busy = busy % n;
        let start = (t.g.now() / t.slot + 1) * t.slot;
        let mut at = start;
        // One locker asked once a millisecond, following the short hints
        // while permits come (the daemon holds such an ask), for four slots.
        while at < start + 4 * t.slot {
            at += MS;
            t.g.advance_to(at);
            t.ask(busy, 1);
        }
        let first = start / t.slot;
        for slot in first + 1..first + 4 {
            let got = t.per_slot.get(&slot).copied().unwrap_or(0);
            prop_assert_eq!(got, u64::from(max), "slot {} of {:?}", slot - first, t.per_slot);
        }
    }

    #[test]
    fn with_timely_messages_demand_on_every_locker_fills_every_slot(
        n in 2usize..=5,
        max in 1u32..12,
        slot_ms in prop::sample::select(vec![100u64, 300, 800]),
        seed in any::<u64>(),
    ) {
        let mut t = Trial::new(n, max, slot_ms, seed);
        let start = (t.g.now() / t.slot + 1) * t.slot;
        t.g.advance_to(start);
        // Every locker asked once a millisecond, in turn, for four slots.
        let mut at = start;
        while at < start + 4 * t.slot {
            for node in 0..n {
                at += MS / n as u64;
                t.g.advance_to(at);
                t.ask(node, 1);
            }
        }
        let first = start / t.slot;
        for slot in first..first + 4 {
            let got = t.per_slot.get(&slot).copied().unwrap_or(0);
            prop_assert_eq!(got, u64::from(max), "slot {} of {:?}", slot - first, t.per_slot);
        }
    }
}
