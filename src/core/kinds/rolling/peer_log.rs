//! A rolling window shared across peers: per key, the cumulative grants
//! each peer node made in each sub-slot, the key's conserved rights, and
//! what this locker publishes.
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
//! The peers' counts say how much of the window is left across the group,
//! so that a locker short of rights asks its peers only while some may be
//! spare; what a locker may grant is its rights' (see `rights`), whatever
//! the counts say. This module keeps the counts only: no clock, no names,
//! no wire format.

use super::rights::Rights;
use super::span::Span;
use crate::core::share::{raise, NodeIx};
use crate::core::time::Nanos;

/// One node's cumulative grants for one sub-slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct SubSlotGrants {
    pub(super) node: NodeIx,
    pub(super) sub: u64,
    pub(super) count: u32,
}

/// The part of a key's log that only peered lockers use.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PeerLog {
    pub(super) heard: Vec<SubSlotGrants>,
    /// The key's conserved rights.
    pub(super) rights: Rights,
    /// The earliest go instant among own grants not republished since the
    /// last repair.
    pub(super) touched_from: Option<Nanos>,
    /// The grants of this locker's earlier runs, as its state file kept
    /// them: a run that resumed their share charges them as its own.
    pub(super) earlier: Vec<SubSlotGrants>,
}

impl PeerLog {
    /// Forgets peer counts that no longer count at `now` or after, and
    /// rights that no longer bear on its window.
    pub fn prune(&mut self, now: Nanos, span: Span) {
        let counts = |h: &SubSlotGrants| span.sub_bounds(h.sub).1.saturating_add(span.window) > now;
        self.heard.retain(counts);
        self.earlier.retain(counts);
        self.rights.prune(span.window_of(now));
    }

    /// Whether no peer count and no right is held.
    pub fn is_idle(&self) -> bool {
        self.heard.is_empty() && self.rights.is_idle() && self.earlier.is_empty()
    }

    /// Notes that earlier run `node` of this locker granted `count` in
    /// sub-slot `sub`, keeping the larger figure.
    pub(super) fn carry(&mut self, node: NodeIx, sub: u64, count: u32) {
        match self.earlier.iter_mut().find(|h| h.node == node && h.sub == sub) {
            Some(h) => h.count = h.count.max(count),
            None => self.earlier.push(SubSlotGrants { node, sub, count }),
        }
    }

    /// The earlier runs' grants that still count at `now` (see `carry`).
    pub(super) fn earlier_held(&self, now: Nanos, span: Span) -> u32 {
        let counts = |h: &&SubSlotGrants| span.sub_bounds(h.sub).1.saturating_add(span.window) > now;
        self.earlier.iter().filter(counts).map(|h| h.count).sum()
    }

    /// Every peer count as (first instant, last instant, permits).
    pub fn spans(&self, span: Span) -> impl Iterator<Item = (Nanos, Nanos, u32)> + '_ {
        self.heard.iter().map(move |h| {
            let (first, last) = span.sub_bounds(h.sub);
            (first, last, h.count)
        })
    }

    /// Keeps the larger of `count` and what `node` said before for `sub`;
    /// returns whether it grew.
    pub(super) fn merge(&mut self, node: NodeIx, sub: u64, count: u32) -> bool {
        match self.heard.iter_mut().find(|h| h.node == node && h.sub == sub) {
            Some(h) => raise(&mut h.count, count) > 0,
            None => {
                self.heard.push(SubSlotGrants { node, sub, count });
                true
            }
        }
    }
}
