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
//! by demand (see `core::share`): the permits asked of each node in this
//! slot, and the figures of the previous slot, which give each node its
//! share of this one.
//!
//! A key table keeps a million tallies, so a tally is stored in two parts:
//! the [`Count`] (own grants and two marks, eight bytes) inline in the
//! table's slot, and the [`Peered`] part aside, which a locker on its own
//! never allocates. The rules read a tally through [`TallyRef`] and change
//! it through [`TallyMut`], wherever its parts are; [`Tally`] holds both
//! parts whole, for the unkeyed count and keys too long for the table.

use crate::core::share::share_of;
use crate::core::share::ME;
use crate::core::share::{NodeIx, Recent, Share};
use crate::core::time::Nanos;

mod count;
pub use count::Count;

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

/// One key's counts in the current slot, held whole: the unkeyed count of a
/// window, and keys too long for a key table's slots.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Tally {
    count: Count,
    peered: Option<Box<Peered>>,
}

/// A tally to read, wherever it is stored.
#[derive(Debug, Clone, Copy)]
pub struct TallyRef<'a> {
    count: Count,
    peered: Option<&'a Peered>,
}

/// A tally to change, wherever it is stored: its count, and where its
/// peers' part is or would go.
#[derive(Debug)]
pub struct TallyMut<'a> {
    count: &'a mut Count,
    aside: Aside<'a>,
}

/// Where a tally's peers' part lives.
#[derive(Debug)]
pub enum Aside<'a> {
    /// A whole tally's own.
    Own(&'a mut Option<Box<Peered>>),
    /// A key table's list, parallel to its slots and empty until a tally
    /// first needs it (`len` long then); `at` is this tally's place, whose
    /// content is this slot's only while the count's `ASIDE` flag is set.
    Table { list: &'a mut Vec<Option<Box<Peered>>>, at: usize, len: usize },
}

/// The part of a tally that only peered lockers use.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Peered {
    /// The sum of the peers' reported counts.
    heard: u32,
    peers: Vec<(NodeIx, u32)>,
    recent: Recent<u32>,
    /// Permits asked of each node in this slot before the cutoff, this
    /// locker's own under `ME`.
    asked: Vec<(NodeIx, u32)>,
    /// The figures of the previous slot: they split this slot.
    basis: Vec<(NodeIx, u32)>,
}

impl Peered {
    /// Empty again, keeping the lists' memory for the next key in a slot.
    fn reset(&mut self) {
        self.heard = 0;
        self.recent = Recent::default();
        self.peers.clear();
        self.asked.clear();
        self.basis.clear();
    }
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
    /// Own grants beyond this locker's share: taken from the pool.
    pub beyond: u32,
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
        let mut count = Count { mark: 0, own };
        count.set(Count::TOUCHED, own > 0);
        Tally { count, peered: None }
    }

    /// To read.
    pub fn get(&self) -> TallyRef<'_> {
        TallyRef { count: self.count, peered: self.peered.as_deref() }
    }

    /// To change.
    pub fn get_mut(&mut self) -> TallyMut<'_> {
        TallyMut { count: &mut self.count, aside: Aside::Own(&mut self.peered) }
    }
}

impl<'a> TallyRef<'a> {
    /// A tally read from its parts; `peered` is ignored unless the count
    /// says it is its own.
    pub fn from_parts(count: Count, peered: Option<&'a Peered>) -> TallyRef<'a> {
        TallyRef { count, peered: peered.filter(|_| count.has_aside()) }
    }

    /// This locker's own grants.
    #[inline]
    pub fn own(self) -> u32 {
        self.count.own
    }

    /// The sum of the peers' reported counts.
    #[inline]
    pub fn heard(self) -> u32 {
        self.peered.map_or(0, |p| p.heard)
    }

    /// Own grants plus every peer's, saturating.
    #[inline]
    pub fn total(self) -> u32 {
        self.own().saturating_add(self.heard())
    }

    /// Permits left out of `max`.
    #[inline]
    pub fn remaining(self, max: u32) -> u32 {
        max.saturating_sub(self.total())
    }

    /// Whether it was granted or asked since the last repair publish.
    pub fn touched(self) -> bool {
        self.count.has(Count::TOUCHED)
    }

    /// Each peer node's reported count.
    pub fn peers(self) -> impl Iterator<Item = (NodeIx, u32)> + 'a {
        self.peered.into_iter().flat_map(|s| s.peers.iter().copied())
    }

    /// What this locker may grant now out of `max`: everything left when
    /// alone, its unused share plus the pool when peered.
    #[inline]
    pub fn free(self, max: u32, share: Share) -> u32 {
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
    pub fn split(self, max: u32) -> Split {
        let left = self.remaining(max);
        let Some(p) = self.peered else {
            return Split { mine: 0, pool: left, beyond: self.own() };
        };
        let total: u64 = p.basis.iter().map(|&(_, d)| u64::from(d)).sum();
        let (mut share, mut others) = (0u32, 0u32);
        for &(node, asked) in &p.basis {
            let of_node = share_of(max, asked, total);
            if node == ME {
                share = of_node;
            } else {
                others = others.saturating_add(of_node.saturating_sub(figure_of(&p.peers, node)));
            }
        }
        let mine = share.saturating_sub(self.own()).min(left);
        let beyond = self.own().saturating_sub(share);
        Split { mine, pool: left - mine - others.min(left - mine), beyond }
    }

    /// Permits asked of this locker in this slot, before the cutoff.
    pub fn asked_own(self) -> u32 {
        self.peered.map_or(0, |p| figure_of(&p.asked, ME))
    }

    /// Each node's figure in this slot, this locker's under `ME`.
    pub fn asked(self) -> impl Iterator<Item = (NodeIx, u32)> + 'a {
        self.peered.into_iter().flat_map(|s| s.asked.iter().copied())
    }

    /// Each node's figure in the previous slot.
    pub fn basis(self) -> impl Iterator<Item = (NodeIx, u32)> + 'a {
        self.peered.into_iter().flat_map(|s| s.basis.iter().copied())
    }
}

impl<'a> TallyMut<'a> {
    /// A tally to change, from a key table's parts (see `Aside::Table`).
    pub fn from_parts(count: &'a mut Count, aside: Aside<'a>) -> TallyMut<'a> {
        TallyMut { count, aside }
    }

    /// To read.
    #[inline]
    pub fn get(&self) -> TallyRef<'_> {
        let peered = match &self.aside {
            Aside::Own(p) => p.as_deref(),
            Aside::Table { list, at, .. } if self.count.has_aside() => list[*at].as_deref(),
            Aside::Table { .. } => None,
        };
        TallyRef { count: *self.count, peered }
    }

    /// The peers' part, made empty the first time a slot needs it.
    fn peered(&mut self) -> &mut Peered {
        match &mut self.aside {
            Aside::Own(p) => p.get_or_insert_with(Box::default),
            Aside::Table { list, at, len } => {
                if list.is_empty() {
                    list.resize_with(*len, || None);
                }
                let p = list[*at].get_or_insert_with(Box::default);
                if !self.count.has_aside() {
                    // A key of an earlier slot left it here.
                    p.reset();
                    self.count.set(Count::ASIDE, true);
                }
                p
            }
        }
    }

    /// Sets this tally to `tally`, as if it had been built here.
    pub fn set(&mut self, tally: Tally) {
        let mark = self.count.mark & !(Count::TOUCHED | Count::ASIDE);
        *self.count = Count { mark: mark | (tally.count.mark & Count::TOUCHED), own: tally.count.own };
        match tally.peered {
            Some(p) => *self.peered() = *p,
            None => {
                if let Aside::Own(p) = &mut self.aside {
                    **p = None;
                }
            }
        }
    }

    /// Clears the mark of a repair publish; returns whether it was set.
    pub fn take_touched(&mut self) -> bool {
        let touched = self.count.has(Count::TOUCHED);
        self.count.set(Count::TOUCHED, false);
        touched
    }

    /// Records that `node` has granted `count` in all (cumulative). Keeps the
    /// larger of this and what was heard before, so repeats and reordering
    /// change nothing. Returns whether the count grew.
    pub fn merge(&mut self, node: NodeIx, count: u32) -> bool {
        let p = self.peered();
        let before = figure_of(&p.peers, node);
        if !raise(&mut p.peers, node, count) {
            return false;
        }
        p.heard = p.heard.saturating_add(count - before);
        true
    }

    /// Records that this very node had granted `count`, as a peer echoed it
    /// back: raises the own count if the echo is larger.
    pub fn merge_own(&mut self, count: u32) -> bool {
        let grew = count > self.count.own;
        self.count.own = self.count.own.max(count);
        grew
    }

    /// Takes `cost` permits out of `max` if they fit.
    ///
    /// They fit when the total stays within `max` and, with peers live,
    /// when they fit the unused part of this locker's share of the slot
    /// (split by the previous slot's demand) plus the pool. Within its
    /// share a locker grants at once: no other node may grant those
    /// permits. Beyond it, its grants still in flight must stay within its
    /// part of the pool (`Share::over_part`: `pool / live`, the remainder by
    /// turns), so that grants made at once on stale views add up to no more
    /// than the pool.
    #[inline]
    pub fn take(&mut self, now: Nanos, max: u32, cost: u32, share: Share) -> Take {
        if cost > self.get().remaining(max) {
            return Take::Spent;
        }
        if share.live > 1 {
            let split = self.get().split(max);
            if cost > split.mine {
                let need = cost - split.mine;
                if need > split.pool {
                    return Take::Spent;
                }
                let own = self.count.own;
                // Only grants beyond the share came out of the pool.
                let in_flight = self.peered().recent.in_flight(now, own, share.charged_for()).min(split.beyond);
                if share.over_part(now, in_flight, split.pool, need) {
                    return Take::OverShare;
                }
            }
        }
        self.count.own += cost;
        self.count.set(Count::TOUCHED, true);
        Take::Go
    }

    /// Counts `cost` permits asked of this locker, go or sorry, towards the
    /// next slot's split.
    pub fn note_asked(&mut self, cost: u32) {
        let asked = &mut self.peered().asked;
        match asked.iter_mut().find(|(n, _)| *n == ME) {
            Some((_, c)) => *c = c.saturating_add(cost),
            None => asked.push((ME, cost)),
        }
        self.count.set(Count::TOUCHED, true);
    }

    /// Records that `node` was asked for `count` permits in this slot
    /// (with `previous`, in the slot before, which splits this one).
    /// Keeps the larger figure, as `merge` does. Returns whether it grew.
    pub fn merge_asked(&mut self, node: NodeIx, count: u32, previous: bool) -> bool {
        let p = self.peered();
        raise(if previous { &mut p.basis } else { &mut p.asked }, node, count)
    }

    /// Takes this slot's figures, if any, to split the next slot with.
    pub fn take_asked(&mut self) -> Option<Vec<(NodeIx, u32)>> {
        // A tally without a peers' part has no figures: do not make one.
        self.get().peered?;
        let p = self.peered();
        p.asked.iter().any(|&(_, c)| c > 0).then(|| std::mem::take(&mut p.asked))
    }

    /// Sets the previous slot's figures, which split this slot.
    pub fn set_basis(&mut self, basis: Vec<(NodeIx, u32)>) {
        self.peered().basis = basis;
    }
}

#[cfg(test)]
mod tests;
