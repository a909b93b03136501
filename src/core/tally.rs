//! One key's count in one slot, as a peered locker keeps it: its own grants,
//! the cumulative count each peer node reported, and the rule that decides
//! whether one more grant fits.
//!
//! Peers publish cumulative counts over PUB/SUB, which drops, repeats and
//! reorders messages. Taking the maximum per node makes a repeated or late
//! message harmless and lets any later message repair a lost one; summing
//! over nodes gives the count all lockers granted together. This module is
//! pure arithmetic: it never reads a clock, and it knows nothing of sockets,
//! names or slots.
//!
//! A peered tally also keeps the demand figures that split the next slot
//! by demand (see `peering::share`): the permits asked of each node in this
//! slot, and the figures of the previous slot, which give each node its
//! share of this one.

use super::peering::share::share_of;
use super::peering::{NodeIx, Nodes, Share};
use super::time::Nanos;

/// Own count at two checkpoints, at least `window` apart, so that
/// `own - prev` covers every grant of the last `window` (and possibly a
/// little more, which errs on the safe side).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Recent {
    prev: u32,
    cur: u32,
    since: Nanos,
}

impl Recent {
    #[inline]
    fn in_flight(&mut self, now: Nanos, own: u32, window: Nanos) -> u32 {
        let age = now.saturating_sub(self.since);
        if age >= window.saturating_mul(2) {
            *self = Recent { prev: own, cur: own, since: now };
        } else if age >= window {
            *self = Recent { prev: self.cur, cur: own, since: now };
        }
        own - self.prev
    }
}

/// The outcome of a take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Take {
    /// The permits were taken.
    Go,
    /// The slot's count is spent.
    Spent,
    /// Permits are left in the pool, but this locker's share of them is in
    /// flight; it may grant again once its recent grants have reached the
    /// peers.
    OverShare,
}

impl Take {
    /// Whether the permits were taken.
    pub fn is_go(self) -> bool {
        self == Take::Go
    }
}

/// One key's counts in the current slot.
///
/// Every live key of a fixed window holds one, in the window's key table, so
/// it is kept small: what only peering needs (each node's count, the recent
/// grants) lives behind a box that a locker on its own never allocates.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Tally {
    own: u32,
    heard: u32,
    /// Granted since the last repair publish (see `Locker::drain_touched`).
    pub(crate) touched: bool,
    peered: Option<Box<Peered>>,
}

/// The part of a tally that only peered lockers use.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct Peered {
    peers: Vec<(NodeIx, u32)>,
    recent: Recent,
    /// Permits asked of each node in this slot before the cutoff, this
    /// locker's own under `Nodes::ME`.
    asked: Vec<(NodeIx, u32)>,
    /// The figures of the previous slot: they split this slot.
    basis: Vec<(NodeIx, u32)>,
}

/// What a peered locker may grant of one key's slot: the unused part of
/// its own share, and the pool (what is neither granted nor another
/// node's unused share).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Split {
    /// This locker's share not yet granted.
    pub mine: u32,
    /// The permits nobody holds a share of.
    pub pool: u32,
}

/// Raises `node`'s figure in `list` to `count`; returns whether it grew.
fn raise(list: &mut Vec<(NodeIx, u32)>, node: NodeIx, count: u32) -> bool {
    match list.iter_mut().find(|(n, _)| *n == node) {
        Some((_, c)) if *c >= count => false,
        Some((_, c)) => {
            *c = count;
            true
        }
        None => {
            list.push((node, count));
            true
        }
    }
}

fn figure_of(list: &[(NodeIx, u32)], node: NodeIx) -> u32 {
    list.iter().find(|(n, _)| *n == node).map_or(0, |&(_, c)| c)
}

impl Tally {
    /// A tally that starts its slot with `own` permits this locker reserved
    /// earlier, marked for publishing so the peers learn of them.
    pub fn reserved(own: u32) -> Tally {
        Tally { own, touched: own > 0, ..Tally::default() }
    }

    /// This locker's own grants.
    pub fn own(&self) -> u32 {
        self.own
    }

    /// The sum of the peers' reported counts.
    pub fn heard(&self) -> u32 {
        self.heard
    }

    /// Own grants plus every peer's, saturating.
    #[inline]
    pub fn total(&self) -> u32 {
        self.own.saturating_add(self.heard)
    }

    /// Each peer node's reported count.
    pub fn peers(&self) -> impl Iterator<Item = (NodeIx, u32)> + '_ {
        self.peered.iter().flat_map(|s| s.peers.iter().copied())
    }

    fn peered(&mut self) -> &mut Peered {
        self.peered.get_or_insert_with(Box::default)
    }

    /// Records that `node` has granted `count` in all (cumulative). Keeps the
    /// larger of this and what was heard before, so repeats and reordering
    /// change nothing. Returns whether the count grew.
    pub fn merge(&mut self, node: NodeIx, count: u32) -> bool {
        let peers = &mut self.peered().peers;
        let before = figure_of(peers, node);
        if !raise(peers, node, count) {
            return false;
        }
        self.heard = self.heard.saturating_add(count - before);
        true
    }

    /// Records that this very node had granted `count`, as a peer echoed it
    /// back: raises the own count if the echo is larger.
    pub fn merge_own(&mut self, count: u32) -> bool {
        let grew = count > self.own;
        self.own = self.own.max(count);
        grew
    }

    /// Takes `cost` permits out of `max` if they fit.
    ///
    /// They fit when the total stays within `max` and, with peers live,
    /// when they fit the unused part of this locker's share of the slot
    /// (split by the previous slot's demand) plus the pool. Within its
    /// share a locker grants at once: no other node may grant those
    /// permits. Beyond it, its grants still in flight must stay within its
    /// part of the pool, `ceil(pool / live)`. Every live locker holds itself
    /// to the same part of the same pool, so grants made at once on stale
    /// views cannot add up to much more than the pool. The first grant in a
    /// window is always allowed when it fits, so no cost can starve.
    #[inline]
    pub fn take(&mut self, now: Nanos, max: u32, cost: u32, share: Share) -> Take {
        if cost > self.remaining(max) {
            return Take::Spent;
        }
        if share.live > 1 {
            let split = self.split(max);
            if cost > split.mine {
                let need = cost - split.mine;
                if need > split.pool {
                    return Take::Spent;
                }
                let own = self.own;
                let in_flight = self.peered().recent.in_flight(now, own, share.in_flight_window);
                if in_flight > 0 && in_flight + need > split.pool.div_ceil(share.live) {
                    return Take::OverShare;
                }
            }
        }
        self.own += cost;
        self.touched = true;
        Take::Go
    }

    /// What this locker may grant now out of `max`: everything left when
    /// alone, its unused share plus the pool when peered.
    #[inline]
    pub fn free(&self, max: u32, share: Share) -> u32 {
        if share.live > 1 {
            let split = self.split(max);
            split.mine + split.pool
        } else {
            self.remaining(max)
        }
    }

    /// This slot split by the previous slot's demand figures: each node's
    /// share is `max x its figure / all figures`, rounded down. A node that
    /// granted less than its share holds the rest until the slot ends;
    /// without figures everything left is pool.
    pub fn split(&self, max: u32) -> Split {
        let left = self.remaining(max);
        let Some(p) = self.peered.as_deref() else {
            return Split { mine: 0, pool: left };
        };
        let total: u64 = p.basis.iter().map(|&(_, d)| u64::from(d)).sum();
        let (mut mine, mut others) = (0u32, 0u32);
        for &(node, asked) in &p.basis {
            let share = share_of(max, asked, total);
            if node == Nodes::ME {
                mine = share.saturating_sub(self.own);
            } else {
                others = others.saturating_add(share.saturating_sub(figure_of(&p.peers, node)));
            }
        }
        let mine = mine.min(left);
        Split { mine, pool: left - mine - others.min(left - mine) }
    }

    /// Counts `cost` permits asked of this locker, go or sorry, towards the
    /// next slot's split.
    pub fn note_asked(&mut self, cost: u32) {
        let asked = &mut self.peered().asked;
        match asked.iter_mut().find(|(n, _)| *n == Nodes::ME) {
            Some((_, c)) => *c = c.saturating_add(cost),
            None => asked.push((Nodes::ME, cost)),
        }
        self.touched = true;
    }

    /// Permits asked of this locker in this slot, before the cutoff.
    pub fn asked_own(&self) -> u32 {
        self.peered.as_deref().map_or(0, |p| figure_of(&p.asked, Nodes::ME))
    }

    /// Records that `node` was asked for `count` permits in this slot
    /// (with `previous`, in the slot before, which splits this one).
    /// Keeps the larger figure, as `merge` does. Returns whether it grew.
    pub fn merge_asked(&mut self, node: NodeIx, count: u32, previous: bool) -> bool {
        let p = self.peered();
        raise(if previous { &mut p.basis } else { &mut p.asked }, node, count)
    }

    /// Each node's figure in this slot, this locker's under `Nodes::ME`.
    pub fn asked(&self) -> impl Iterator<Item = (NodeIx, u32)> + '_ {
        self.peered.iter().flat_map(|s| s.asked.iter().copied())
    }

    /// Each node's figure in the previous slot.
    pub fn basis(&self) -> impl Iterator<Item = (NodeIx, u32)> + '_ {
        self.peered.iter().flat_map(|s| s.basis.iter().copied())
    }

    /// Takes this slot's figures, if any, to split the next slot with.
    pub fn take_asked(&mut self) -> Option<Vec<(NodeIx, u32)>> {
        let p = self.peered.as_deref_mut()?;
        p.asked.iter().any(|&(_, c)| c > 0).then(|| std::mem::take(&mut p.asked))
    }

    /// Sets the previous slot's figures, which split this slot.
    pub fn set_basis(&mut self, basis: Vec<(NodeIx, u32)>) {
        self.peered().basis = basis;
    }

    /// Permits left out of `max`.
    pub fn remaining(&self, max: u32) -> u32 {
        max.saturating_sub(self.total())
    }
}

#[cfg(test)]
mod tests;
