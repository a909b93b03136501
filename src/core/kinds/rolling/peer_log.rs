//! A rolling window shared across peers: per key, the cumulative grants
//! each peer node made in each sub-slot, the own grants still in flight,
//! and what this locker publishes.
//!
//! Peers exchange the same cumulative counts as fixed windows do, numbered
//! by sub-slot (`Span::peer_grain`, a 64th of the window, aligned to the
//! epoch) instead of by slot: a node's count for a (limit, key, sub-slot) is
//! every permit it granted to callers going in that sub-slot, reservations
//! included (published at once, so peers count them ahead). A receiver
//! keeps the largest count heard per (node, sub-slot), so repeats and
//! reordering change nothing and a later count repairs a lost one, and
//! counts it wherever in its sub-slot it may have gone (see `log`): a
//! peer's grant stops counting at the end of its sub-slot + T.
//!
//! Grants made on several lockers at once, each on a view that lacks the
//! others' latest grants, could add up past `max`; so each locker holds the
//! own grants of the last in-flight window (`Share`) to its share of what
//! is left, the remainder going by turns (see `over_share`). This module
//! keeps the counts only: no clock, no names, no wire format.

use super::span::Span;
use crate::core::share::{NodeIx, Recent};
use crate::core::time::Nanos;

/// One node's cumulative grants for one sub-slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Heard {
    pub(super) node: NodeIx,
    pub(super) sub: u64,
    pub(super) count: u32,
}

/// The part of a key's log that only peered lockers use.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PeerLog {
    pub(super) heard: Vec<Heard>,
    /// Own permits granted since sharing began, for the in-flight rule.
    total: u64,
    recent: Recent<u64>,
    /// The earliest go instant among own grants not republished since the
    /// last repair.
    pub(super) touched_from: Option<Nanos>,
}

impl PeerLog {
    /// A record that counts own grants as in flight from `now` on.
    pub fn since(now: Nanos) -> PeerLog {
        PeerLog { recent: Recent::since(now), ..PeerLog::default() }
    }

    /// Forgets peer counts that no longer count at `now` or after.
    pub fn prune(&mut self, now: Nanos, span: Span) {
        self.heard.retain(|h| span.sub_bounds(h.sub).1.saturating_add(span.window) > now);
    }

    /// Whether no peer count is held.
    pub fn is_idle(&self) -> bool {
        self.heard.is_empty()
    }

    /// Every peer count as (first instant, last instant, permits).
    pub fn spans(&self, span: Span) -> impl Iterator<Item = (Nanos, Nanos, u32)> + '_ {
        self.heard.iter().map(move |h| {
            let (first, last) = span.sub_bounds(h.sub);
            (first, last, h.count)
        })
    }

    /// Counts `n` own permits going at `at`.
    pub fn add_own(&mut self, _at: Nanos, n: u32) {
        self.total += u64::from(n);
    }

    /// Own permits granted within the last `window` before `now` (or a little more).
    pub fn in_flight(&mut self, now: Nanos, window: Nanos) -> u64 {
        self.recent.in_flight(now, self.total, window)
    }

    /// Keeps the larger of `count` and what `node` said before for `sub`;
    /// returns whether it grew.
    pub(super) fn merge(&mut self, node: NodeIx, sub: u64, count: u32) -> bool {
        match self.heard.iter_mut().find(|h| h.node == node && h.sub == sub) {
            Some(h) if h.count >= count => false,
            Some(h) => {
                h.count = count;
                true
            }
            None => {
                self.heard.push(Heard { node, sub, count });
                true
            }
        }
    }
}
